/*
 * notice - non-delivery notifications (see notice.h). A DSN goes to the
 * envelope sender, never to the null sender, and only for recipients
 * whose NOTIFY asks for failures (or that gave none). A notification
 * that is damaged is logged and dropped; one that no route takes is
 * queued all the same, for the peer NOTICE_UNROUTED that no [peer] can
 * be named, so that the scheduler routes it again (sched.c) when a
 * reload brings a route, and it waits till then; after a storage error
 * the scheduler waits min_backoff before trying again.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "commit.h"
#include "compact.h"
#include "dsn.h"
#include "log.h"
#include "notice.h"
#include "peer.h"
#include "smtp_cmd.h"
#include "smtp_data.h"
#include "ternd.h"
#include "textesc.h"
#include "xalloc.h"

/* A notification read and built before the committer's write, with
 * what it tells, so that the write can check it still tells the truth. */
struct notice_draft {
	char id[STORE_NOTICE_ID_MAX + 1];
	struct dsn_rcpt *rcpt;		/* its own copies of the strings */
	size_t n;
	int flags;
	struct dsn_buf buf;
};

/* find_rcpt - recipient idx of rcpts */
static const struct q_rcpt *find_rcpt(const struct q_rcpt *rcpts, size_t n, uint32_t idx)
{
	for (size_t i = 0; i < n; i++)
		if (rcpts[i].idx == idx)
			return &rcpts[i];
	return NULL;
}

/* notice_rcpts - the recipients a notification tells of: those the
 * outcomes bounced whose NOTIFY asks for failures (or that gave none),
 * into dr (nout entries); their count, and the notification's id */
static size_t notice_rcpts(const struct outcome *out, size_t nout, const struct q_rcpt *rcpts,
			   size_t nrcpts, const struct result *res, struct dsn_rcpt *dr,
			   char id[STORE_NOTICE_ID_MAX + 1])
{
	size_t n = 0;

	for (size_t i = 0; i < nout; i++) {
		const struct outcome *o = &out[i];
		const struct q_rcpt *r = o->bounced ? find_rcpt(rcpts, nrcpts, o->idx) : NULL;

		if (r == NULL || (r->notify && !(r->notify & NOTIFY_FAILURE)))
			continue;	/* not bounced now; NOTIFY=NEVER or without FAILURE */
		if (n == 0)	/* unique: a message's recipients bounce once each */
			snprintf(id, STORE_NOTICE_ID_MAX + 1, "%s.%" PRIu64 ".%" PRIu32, res->qid,
				 res->now, r->idx);
		dr[n].addr = r->addr;
		dr[n].orcpt = r->orcpt[0] ? r->orcpt : NULL;
		dr[n].status = o->esc[0] ? o->esc : "5.0.0";
		dr[n].remote_mta = res->host;
		dr[n].diagnostic = o->reply;
		dr[n].last_attempt = (time_t)(res->now / 1000000);
		n++;
	}
	return n;
}

/* notice_build - the DSN of message m for dr: its flags (dsn_build), or -1;
 * reads the original from the spool, for the third part */
static int notice_build(const struct q_msg *m, const struct result *res, const char *id,
			const struct dsn_rcpt *dr, size_t n, struct dsn_buf *buf)
{
	struct dsn_msg dm = {0};
	struct q_msg at = *m;		/* where the body is: copy-forward may move it */
	char *content = NULL;
	size_t clen = 0;
	off_t off;
	int fd, flags;

	if ((fd = compact_open_body(&at, &off)) >= 0) {
		/* Enough for the whole message under RET=FULL, or its header:
		 * a larger message is returned as headers only anyway. */
		size_t want = m->size < DSN_HEADERS_MAX + DSN_FULL_MAX
			? (size_t)m->size : DSN_HEADERS_MAX + DSN_FULL_MAX;

		content = xmalloc(want + 1);
		ssize_t got = pread(fd, content, want, off);

		clen = got > 0 ? (size_t)got : 0;
		close(fd);
	}
	dm.reporting_mta = ternd.hostname;
	dm.unique_id = id;
	dm.now = (time_t)(res->now / 1000000);
	dm.qid = m->qid;
	dm.sender = m->sender;
	dm.envid = m->envid[0] ? m->envid : NULL;
	dm.arrival = (time_t)(m->arrival_us / 1000000);
	dm.rcpt = (struct dsn_rcpt *)dr;
	dm.nrcpt = n;
	dm.ret = (enum smtp_ret)m->ret;
	dm.content = content;
	dm.content_len = clen;
	flags = dsn_build(&dm, buf);
	free(content);
	return flags;
}

/* opt_eq - two optional strings are the same */
static int opt_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* draft_tells - the draft tells exactly of dr, under id */
static int draft_tells(const struct notice_draft *d, const char *id, const struct dsn_rcpt *dr,
		       size_t n)
{
	if (d == NULL || d->n != n || strcmp(d->id, id) != 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(d->rcpt[i].addr, dr[i].addr) != 0 || !opt_eq(d->rcpt[i].orcpt, dr[i].orcpt)
		    || strcmp(d->rcpt[i].status, dr[i].status) != 0
		    || !opt_eq(d->rcpt[i].remote_mta, dr[i].remote_mta)
		    || !opt_eq(d->rcpt[i].diagnostic, dr[i].diagnostic)
		    || d->rcpt[i].last_attempt != dr[i].last_attempt)
			return 0;
	return 1;
}

/* opt_dup - a copy of an optional string */
static char *opt_dup(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/* notice_draft - before the committer's write of res: the DSN it will
 * store if it bounces what the attempt's outcomes and the records read
 * when the attempt began (m, rcpts) say, read and built here, in the
 * delivery thread, so that the write transaction only stores it (LMDB:
 * keep write transactions short). Nothing when nothing will bounce. */
void notice_draft(struct result *res, const struct q_msg *m, const struct q_rcpt *rcpts, size_t n)
{
	struct outcome *out;
	struct dsn_rcpt *dr;
	struct notice_draft *d;
	char id[STORE_NOTICE_ID_MAX + 1];
	size_t k = 0;
	int any = 0;

	res->draft = NULL;
	for (size_t i = 0; i < res->nout; i++)
		any |= res->out[i].state == RCPT_BOUNCED || res->out[i].state == RCPT_DEFERRED;
	if (!any || m->sender[0] == '\0')
		return;	/* nothing can bounce, or to <>: never */
	/* the write's decisions, on copies: it makes them again itself */
	out = xcalloc(res->nout, sizeof(*out));
	for (size_t i = 0; i < res->nout; i++) {
		const struct q_rcpt *r = find_rcpt(rcpts, n, res->out[i].idx);
		uint64_t next;

		out[i] = res->out[i];
		out[i].bounced = 0;
		if (r == NULL || (r->state != RCPT_QUEUED && r->state != RCPT_DEFERRED))
			continue;
		relay_outcome_fate(res->conf, m->arrival_us, r->attempts + 1, &out[i], res->now, &next);
	}
	dr = xcalloc(res->nout, sizeof(*dr));
	if ((k = notice_rcpts(out, res->nout, rcpts, n, res, dr, id)) > 0) {
		d = xcalloc(1, sizeof(*d));
		memcpy(d->id, id, sizeof(id));
		if ((d->flags = notice_build(m, res, id, dr, k, &d->buf)) >= 0) {
			d->rcpt = xcalloc(k, sizeof(*d->rcpt));
			for (size_t i = 0; i < k; i++) {
				d->rcpt[i] = dr[i];
				d->rcpt[i].addr = xstrdup(dr[i].addr);
				d->rcpt[i].orcpt = opt_dup(dr[i].orcpt);
				d->rcpt[i].status = xstrdup(dr[i].status);
				d->rcpt[i].remote_mta = opt_dup(dr[i].remote_mta);
				d->rcpt[i].diagnostic = opt_dup(dr[i].diagnostic);
			}
			d->n = k;
			res->draft = d;
		} else {
			dsn_buf_free(&d->buf);
			free(d);	/* the write tries, and logs */
		}
	}
	free(dr);
	free(out);
}

/* notice_draft_free - forget a draft (after the write) */
void notice_draft_free(struct notice_draft **dp)
{
	struct notice_draft *d = *dp;

	if (d == NULL)
		return;
	for (size_t i = 0; i < d->n; i++) {
		free((char *)d->rcpt[i].addr);
		free((char *)d->rcpt[i].orcpt);
		free((char *)d->rcpt[i].status);
		free((char *)d->rcpt[i].remote_mta);
		free((char *)d->rcpt[i].diagnostic);
	}
	free(d->rcpt);
	dsn_buf_free(&d->buf);
	free(d);
	*dp = NULL;
}

/* notice_put - the non-delivery notification (DSN) for the recipients
 * this write bounced, kept in the queue database in the same transaction:
 * the scheduler queues it as a message (notices_send), so that neither a
 * crash nor a storage error between the two loses it. It stores the
 * draft built before the write when the draft tells what the write did;
 * else (the queue changed during the attempt: a recipient held, expired
 * or deleted by ternq) it builds the DSN here. */
int notice_put(struct store_txn *txn, struct result *res)
{
	struct dsn_rcpt *dr;
	struct dsn_buf buf = {0};
	char id[STORE_NOTICE_ID_MAX + 1];
	int flags, rc = 0, any = 0;
	size_t n;

	for (size_t i = 0; i < res->nout && !any; i++)
		any = res->out[i].bounced;
	if (!any || res->msg.sender[0] == '\0')
		return 0;	/* nothing bounced (every attempt comes here), or to <>: never */
	dr = xcalloc(res->nout, sizeof(*dr));
	if ((n = notice_rcpts(res->out, res->nout, res->rcpts, res->nrcpts, res, dr, id)) == 0) {
		free(dr);
		return 0;
	}
	if (draft_tells(res->draft, id, dr, n)) {
		flags = res->draft->flags;
		rc = store_put_notice(txn, id, res->msg.sender, (uint8_t)flags, res->draft->buf.data,
				      res->draft->buf.len);
	} else {
		log_debug("%s: the notification is built in the write: the queue changed during "
			  "the attempt", res->qid);
		/* the original: its files go only after the commit */
		if ((flags = notice_build(&res->msg, res, id, dr, n, &buf)) < 0)
			log_error("%s: cannot build the delivery status notification", res->msg.qid);
		else
			rc = store_put_notice(txn, id, res->msg.sender, (uint8_t)flags, buf.data,
					      buf.len);
		dsn_buf_free(&buf);
	}
	if (flags >= 0 && rc == 0)
		res->noticed = 1;
	free(dr);
	return rc;
}

/* notice_done - the notification is queued: forget it, in the same
 * transaction as its message's records */
static int notice_done(struct store_txn *txn, void *arg)
{
	return store_del_notice(txn, arg);
}

/* A peer name no [peer] section can have (conf.c: letters, digits, '-',
 * '_', '.'): a notification without a route waits on it. */
#define NOTICE_UNROUTED "(unrouted)"

/* notice_enqueue - queue a notification from <> to rcpt, routed like any
 * mail (with no route, for NOTICE_UNROUTED: it waits for one), and forget
 * it as a notice in the same transaction; 0, or -1 on a storage error */
static int notice_enqueue(const struct conf *conf, const char *id, const char *rcpt,
			  const char *body, size_t len, int smtputf8, char qid[QID_LEN + 1])
{
	const char *peer = conf_route(conf, rcpt);
	struct q_msg m = {0};
	struct q_rcpt r = {0};
	struct job job;
	crypto_generichash_state h;
	int dotlines, eightbit;

	if (peer == NULL) {
		char ea[TEXTESC_SIZE(SMTP_PATH_MAX)];

		log_warning("%.*s: no route for the notification to <%s>: it is queued and waits "
			    "for a route", QID_LEN, id, textesc(ea, sizeof(ea), rcpt, TEXTESC_ADDR));
		peer = NOTICE_UNROUTED;
	}
	qid_next(&ternd.qids, now_us(), m.qid);
	m.arrival_us = now_us();
	m.size = len;
	m.nrcpt = m.nlive = 1;
	m.sender = m.envid = m.helo = (char *)"";
	m.client = (char *)"local";
	smtp_data_scan(body, len, &dotlines, &eightbit);	/* as for received content */
	m.flags = (smtputf8 ? QMSG_SMTPUTF8 : 0) | (dotlines ? QMSG_DOTLINES : 0)
		  | (eightbit ? QMSG_8BIT : 0);
	crypto_generichash_init(&h, NULL, 0, Q_DIGEST_BYTES);
	crypto_generichash_update(&h, (const unsigned char *)body, len);
	crypto_generichash_final(&h, m.digest, Q_DIGEST_BYTES);
	randombytes_buf(m.trace_id, sizeof(m.trace_id));
	randombytes_buf(m.span_id, sizeof(m.span_id));
	r.state = RCPT_QUEUED;
	r.next_us = m.arrival_us;
	r.addr = (char *)rcpt;
	r.orcpt = r.reply = (char *)"";
	r.peer = (char *)peer;
	memset(&job, 0, sizeof(job));
	job.kind = JOB_ACCEPT;
	job.msg = &m;
	job.rcpts = &r;
	job.nrcpts = 1;
	job.body[0].iov_base = (void *)body;
	job.body[0].iov_len = len;
	job.nbody = 1;
	job.write = notice_done;
	job.arg = (void *)id;
	if (commit_submit(&job) < 0) {
		log_error("%.*s: cannot queue the non-delivery notification: %s (next try in %lld s)",
			  QID_LEN, id, job.err, conf->ternd.min_backoff / 1000);
		return -1;
	}
	memcpy(qid, m.qid, QID_LEN + 1);
	log_info("%s: from=<>, size=%zu, nrcpt=1 (queue active)", m.qid, len);
	return 0;
}

#define NOTICE_BATCH 16			/* notifications queued per scan */
struct notice_ids {
	char id[NOTICE_BATCH][STORE_NOTICE_ID_MAX + 1];
	size_t n;
};

/* notice_id - collect a waiting notification's id */
static int notice_id(const char *id, void *arg)
{
	struct notice_ids *ids = arg;

	memcpy(ids->id[ids->n++], id, strlen(id) + 1);
	return ids->n == NOTICE_BATCH;
}

/* notice_forget - a notification that cannot be sent: drop it */
static void notice_forget(const char *id)
{
	struct job job = {0};

	job.kind = JOB_WRITE;
	job.write = notice_done;
	job.arg = (void *)id;
	if (commit_submit(&job) < 0)
		log_error("%.*s: cannot drop the notification: %s", QID_LEN, id, job.err);
}

/* notices_send - queue the notifications waiting in the queue database
 * (the scheduler's job); after a storage error, wait min_backoff */
void notices_send(void)
{
	static uint64_t not_before;
	const struct conf *conf = ternd_conf();
	struct notice_ids ids;

	if (now_us() < not_before)
		return;
	ids.n = 0;
	store_foreach_notice(ternd.store, notice_id, &ids);
	for (size_t i = 0; i < ids.n && !peer_stopping(); i++) {
		char *rcpt = NULL, *body = NULL, dqid[QID_LEN + 1];
		uint8_t flags = 0;
		size_t len = 0;
		int rc = store_get_notice(ternd.store, ids.id[i], &rcpt, &flags, &body, &len);

		if (rc == 1)
			continue;	/* queued meanwhile */
		if (rc == 2) {
			log_error("%.*s: a notification in the queue database is damaged: dropped",
				  QID_LEN, ids.id[i]);
			notice_forget(ids.id[i]);
			continue;
		}
		if (rc == 0)
			rc = notice_enqueue(conf, ids.id[i], rcpt, body, len,
					    (flags & DSN_SMTPUTF8) != 0, dqid);
		free(rcpt);
		free(body);
		if (rc == 0)
			log_info("%.*s: sender non-delivery notification: %s", QID_LEN, ids.id[i],
				 dqid);
		else {
			not_before = now_us() + (uint64_t)conf->ternd.min_backoff * 1000;
			break;
		}
	}
}
