/*
 * relay - delivery of queued mail to relay peers.
 *
 * The scheduler thread reads the schedule index (recipients due now) and
 * hands (message, peer) jobs to the peer's delivery threads, at most
 * max_connections of them, each keeping its connection open between
 * messages. A delivery thread sends one transaction per message and
 * peer (MAIL, RCPT..., DATA or BDAT, pipelined when offered), then hands
 * the outcome to the committer: sent and bounced recipients are final,
 * deferred ones get their next attempt (exponential backoff with jitter,
 * never past max_queue_lifetime), and a message leaves the queue only in
 * the transaction that records its last final recipient. A 250 that is
 * lost to a crash before that commit means the message is sent again:
 * at least once, never lost. Bounces become DSNs in ternd's own queue.
 *
 * Memory is bounded: each peer's job queue and in-flight set hold at most
 * RELAY_PEER_JOBS entries; what does not fit waits in LMDB.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "conn.h"
#include "dsn.h"
#include "log.h"
#include "queue_ops.h"
#include "relay.h"
#include "smtp_cmd.h"
#include "ternd.h"
#include "traceparent.h"
#include "xalloc.h"

#define RELAY_PEER_JOBS 1024
#define RCPT_WAIT 0xff			/* outcome: not tried (breaker open), no penalty */

enum breaker { BREAKER_CLOSED, BREAKER_OPEN, BREAKER_HALF_OPEN };

struct peer_rt {
	char *name;
	SSL_CTX *tls;
	pthread_mutex_t lock;
	pthread_cond_t ready;
	char (*jobs)[QID_LEN + 1];	/* ring of queue ids waiting */
	size_t head, count;
	char (*busy)[QID_LEN + 1];	/* queued or being delivered: not again */
	size_t nbusy;
	pthread_t *threads;
	int nthreads;
	/* circuit breaker (under lock) */
	enum breaker breaker;
	int failures;			/* consecutive connection failures */
	uint64_t open_until;
	long long cooldown_ms;
	struct peer_rt *backup;
	/* rate limit: a token bucket (under lock) */
	double tokens;
	uint64_t refilled;
};

static struct {
	struct peer_rt *peers;
	size_t npeers;
	pthread_t sched;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int kicked;
	int stopping;
} relay = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* relay_kick - new mail is queued: look at the schedule now */
void relay_kick(void)
{
	pthread_mutex_lock(&relay.lock);
	relay.kicked = 1;
	pthread_cond_signal(&relay.wake);
	pthread_mutex_unlock(&relay.lock);
}

/* find_rt - a peer's runtime state by name, or NULL (no host: not relayed) */
static struct peer_rt *find_rt(const char *name)
{
	for (size_t i = 0; i < relay.npeers; i++)
		if (strcmp(relay.peers[i].name, name) == 0)
			return &relay.peers[i];
	return NULL;
}

/* busy_find - index of qid in the peer's busy set, or -1 */
static long busy_find(const struct peer_rt *p, const char *qid)
{
	for (size_t i = 0; i < p->nbusy; i++)
		if (memcmp(p->busy[i], qid, QID_LEN) == 0)
			return (long)i;
	return -1;
}

/* offer - queue a due message for a peer, once; 0 when the peer is full */
static int offer(struct peer_rt *p, const char *qid)
{
	int ok = 1;

	pthread_mutex_lock(&p->lock);
	if (busy_find(p, qid) < 0) {
		if (p->nbusy == RELAY_PEER_JOBS) {
			ok = 0;
		} else {
			memcpy(p->busy[p->nbusy++], qid, QID_LEN + 1);
			memcpy(p->jobs[(p->head + p->count) % RELAY_PEER_JOBS], qid, QID_LEN + 1);
			p->count++;
			pthread_cond_signal(&p->ready);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return ok;
}

/* done - a message's delivery attempt is over: it may be offered again */
static void done(struct peer_rt *p, const char *qid)
{
	long i;

	pthread_mutex_lock(&p->lock);
	if ((i = busy_find(p, qid)) >= 0)
		memcpy(p->busy[i], p->busy[--p->nbusy], QID_LEN + 1);
	pthread_mutex_unlock(&p->lock);
}

/* due - the scheduler's callback for each recipient due now */
static int due(uint64_t next_us, const char *qid, uint32_t idx, const char *peer, void *arg)
{
	struct peer_rt *p = find_rt(peer);

	(void)next_us;
	(void)idx;
	(void)arg;
	if (p)
		offer(p, qid);
	return relay.stopping;
}

/* sched_main - the scheduler loop: once a second, or when kicked */
static void *sched_main(void *arg)
{
	for (;;) {
		struct timespec t;

		store_foreach_due(ternd.store, now_us(), due, NULL);
		pthread_mutex_lock(&relay.lock);
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 1;
		while (!relay.kicked && !relay.stopping)
			if (pthread_cond_timedwait(&relay.wake, &relay.lock, &t) == ETIMEDOUT)
				break;
		relay.kicked = 0;
		if (relay.stopping) {
			pthread_mutex_unlock(&relay.lock);
			break;
		}
		pthread_mutex_unlock(&relay.lock);
	}
	return arg;
}

/* One recipient's outcome of an attempt. */
struct outcome {
	uint32_t idx;
	uint8_t state;			/* RCPT_SENT, RCPT_DEFERRED or RCPT_BOUNCED */
	char reply[SMTP_REPLY_FORMAT_MAX];
	char esc[SMTP_ESC_MAX + 1];
};

/* The result of one attempt, as the committer applies it. */
struct result {
	char qid[QID_LEN + 1];
	struct outcome *out;
	size_t nout;
	uint64_t now;
	uint64_t wait_until;		/* RCPT_WAIT outcomes: next attempt */
	const struct conf *conf;
	/* filled in by the write: what to do after the commit */
	struct queue_op_arg del;	/* the message left the queue */
	int removed;
	struct q_msg msg;		/* for logs and DSNs */
	struct q_rcpt *rcpts;
	size_t nrcpts;
};

/* backoff_us - the delay before attempt number attempts+1 */
static uint64_t backoff_us(const struct conf *conf, uint32_t attempts)
{
	long long ms = conf->ternd.min_backoff;

	for (uint32_t i = 1; i < attempts && ms < conf->ternd.max_backoff; i++)
		ms *= 2;
	if (ms > conf->ternd.max_backoff)
		ms = conf->ternd.max_backoff;
	/* jitter: 0.8 .. 1.2 */
	ms = ms * (80 + (long long)randombytes_uniform(41)) / 100;
	return (uint64_t)ms * 1000;
}

/* apply_result - record an attempt's outcome; remove a finished message */
static int apply_result(struct store_txn *txn, void *arg)
{
	struct result *res = arg;
	uint64_t expire;
	int rc;

	q_msg_clear(&res->msg);
	q_rcpts_free(&res->rcpts, res->nrcpts);
	res->removed = 0;
	if ((rc = store_txn_get_msg(txn, res->qid, &res->msg)) == 1)
		return 0;	/* deleted meanwhile */
	if (rc != 0)
		return rc;
	store_txn_get_rcpts(txn, res->qid, &res->rcpts, &res->nrcpts);
	expire = res->msg.arrival_us + (uint64_t)res->conf->ternd.max_queue_lifetime * 1000;
	for (size_t i = 0; i < res->nout; i++) {
		struct outcome *o = &res->out[i];

		for (size_t k = 0; k < res->nrcpts; k++) {
			struct q_rcpt *r = &res->rcpts[k];
			uint64_t old = r->next_us;

			if (r->idx != o->idx || (r->state != RCPT_QUEUED && r->state != RCPT_DEFERRED))
				continue;
			if (o->state == RCPT_WAIT) {
				r->next_us = res->wait_until;
				free(r->reply);
				r->reply = xstrdup(o->reply);
				if ((rc = store_put_rcpt(txn, res->qid, r, old)) != 0)
					return rc;
				continue;
			}
			r->attempts++;
			r->state = o->state;
			free(r->reply);
			r->reply = xstrdup(o->reply);
			if (o->state == RCPT_DEFERRED) {
				r->next_us = res->now + backoff_us(res->conf, r->attempts);
				if (r->next_us > expire) {
					if (res->now >= expire) {
						char last[sizeof(o->reply)];

						/* expired: bounced, with the last reason */
						r->state = o->state = RCPT_BOUNCED;
						snprintf(o->esc, sizeof(o->esc), "4.4.7");
						snprintf(last, sizeof(last), "%s", o->reply);
						snprintf(o->reply, sizeof(o->reply),
							 "message expired in the queue; last reason: %.900s", last);
						free(r->reply);
						r->reply = xstrdup(o->reply);
					} else {
						r->next_us = expire;
					}
				}
			}
			if (r->state != RCPT_DEFERRED && res->msg.nlive > 0)
				res->msg.nlive--;
			if ((rc = store_put_rcpt(txn, res->qid, r, old)) != 0)
				return rc;
		}
	}
	if (res->msg.nlive > 0)
		return store_put_msg(txn, &res->msg);
	/* The last recipient is final: the message leaves the queue. */
	memset(&res->del, 0, sizeof(res->del));
	res->del.op = QOP_DELETE;
	memcpy(res->del.qid, res->qid, QID_LEN + 1);
	res->del.current_seg = spool_segment_id(ternd.spool);
	res->removed = 1;
	return queue_op_write(txn, &res->del);
}

/* bounce - a DSN for the bounced recipients, queued like any mail */
static void bounce(const struct result *res, const struct conf *conf, const char *host)
{
	struct dsn_rcpt *dr = xcalloc(res->nout, sizeof(*dr));
	struct dsn_msg dm = {0};
	struct dsn_buf buf = {0};
	char id[QID_LEN + 32], *content = NULL;
	int flags;
	size_t n = 0, clen = 0;
	off_t off;
	int fd;

	for (size_t i = 0; i < res->nout; i++) {
		const struct outcome *o = &res->out[i];

		for (size_t k = 0; k < res->nrcpts; k++) {
			const struct q_rcpt *r = &res->rcpts[k];

			if (r->idx != o->idx || r->state != RCPT_BOUNCED)
				continue;
			if (r->notify && !(r->notify & NOTIFY_FAILURE))
				continue;	/* NOTIFY=NEVER or without FAILURE */
			dr[n].addr = r->addr;
			dr[n].orcpt = r->orcpt[0] ? r->orcpt : NULL;
			dr[n].status = o->esc[0] ? o->esc : "5.0.0";
			dr[n].remote_mta = host;
			dr[n].diagnostic = o->reply;
			dr[n].last_attempt = (time_t)(res->now / 1000000);
			n++;
		}
	}
	if (n == 0 || res->msg.sender[0] == '\0') {
		free(dr);
		return;		/* nothing to report, or to <>: never */
	}
	/* the original, for the third part */
	if ((fd = spool_open_body(ternd.spool, &res->msg, &off)) >= 0) {
		/* Enough for the whole message under RET=FULL, or its header:
		 * a larger message is returned as headers only anyway. */
		size_t want = res->msg.size < DSN_HEADERS_MAX + DSN_FULL_MAX
			? (size_t)res->msg.size : DSN_HEADERS_MAX + DSN_FULL_MAX;

		content = xmalloc(want + 1);
		ssize_t got = pread(fd, content, want, off);

		clen = got > 0 ? (size_t)got : 0;
		close(fd);
	}
	/* unique per attempt: a message may bounce recipients more than once */
	snprintf(id, sizeof(id), "%s.%" PRIu64, res->msg.qid, res->now);
	dm.reporting_mta = ternd.hostname;
	dm.unique_id = id;
	dm.now = time(NULL);
	dm.qid = res->msg.qid;
	dm.sender = res->msg.sender;
	dm.envid = res->msg.envid[0] ? res->msg.envid : NULL;
	dm.arrival = (time_t)(res->msg.arrival_us / 1000000);
	dm.rcpt = dr;
	dm.nrcpt = n;
	dm.ret = (enum smtp_ret)res->msg.ret;
	dm.content = content;
	dm.content_len = clen;
	if ((flags = dsn_build(&dm, &buf)) < 0) {
		log_error("%s: cannot build the delivery status notification", res->msg.qid);
	} else {
		char dqid[QID_LEN + 1];

		if (relay_enqueue_dsn(conf, res->msg.sender, buf.data, buf.len,
				      (flags & DSN_SMTPUTF8) != 0, dqid) == 0)
			log_info("%s: sender non-delivery notification: %s", res->msg.qid, dqid);
		else
			log_error("%s: cannot queue the non-delivery notification", res->msg.qid);
	}
	dsn_buf_free(&buf);
	free(content);
	free(dr);
}

/* fmt_delay - seconds as Postfix logs them: 0, 0.12, 1.5, 12 */
static void fmt_delay(double d, char *out, size_t len)
{
	if (d < 0.01)
		snprintf(out, len, "0");
	else if (d < 1)
		snprintf(out, len, "%.2f", d);
	else if (d < 10)
		snprintf(out, len, "%.1f", d);
	else
		snprintf(out, len, "%.0f", d);
}

/* log_outcomes - one Postfix-style line per recipient of the attempt */
static void log_outcomes(const struct result *res, const struct conn *c, const char *relay_host)
{
	char delay[32];

	fmt_delay((double)(res->now - res->msg.arrival_us) / 1e6, delay, sizeof(delay));

	for (size_t i = 0; i < res->nout; i++) {
		const struct outcome *o = &res->out[i];
		const char *addr = "?";

		if (o->state == RCPT_WAIT)
			continue;
		for (size_t k = 0; k < res->nrcpts; k++)
			if (res->rcpts[k].idx == o->idx)
				addr = res->rcpts[k].addr;
		log_info("%s: to=<%s>, relay=%s, delay=%s, tls=%s, dsn=%s, status=%s (%s)",
			 res->qid, addr, relay_host, delay,
			 c && c->ssl ? (c->tls_resumed ? "resumed" : "full") : "none",
			 o->esc[0] ? o->esc : (o->state == RCPT_SENT ? "2.0.0"
					       : o->state == RCPT_DEFERRED ? "4.0.0" : "5.0.0"),
			 o->state == RCPT_SENT ? "sent" : o->state == RCPT_DEFERRED ? "deferred" : "bounced",
			 o->reply);
	}
}

/* set_outcome - one recipient's outcome from a reply (or a failure text) */
static void set_outcome(struct outcome *o, uint32_t idx, int code, const char *esc, const char *text)
{
	o->idx = idx;
	o->state = code >= 200 && code < 300 ? RCPT_SENT : code >= 500 ? RCPT_BOUNCED : RCPT_DEFERRED;
	snprintf(o->esc, sizeof(o->esc), "%s", esc ? esc : "");
	snprintf(o->reply, sizeof(o->reply), "%s", text);
}

/* esmtp_params - MAIL parameters the peer understands */
static void mail_params(const struct conn *c, const struct q_msg *m, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	if (c->ehlo.flags & SMTP_EXT_SIZE)
		o += (size_t)snprintf(out + o, len - o, " SIZE=%" PRIu64, m->size);
	if ((m->flags & QMSG_8BIT) && (c->ehlo.flags & SMTP_EXT_8BITMIME) && o < len)
		o += (size_t)snprintf(out + o, len - o, " BODY=8BITMIME");
	if ((m->flags & QMSG_SMTPUTF8) && o < len)
		o += (size_t)snprintf(out + o, len - o, " SMTPUTF8");
	if ((c->ehlo.flags & SMTP_EXT_DSN) && o < len) {
		if (m->ret == RET_FULL || m->ret == RET_HDRS)
			o += (size_t)snprintf(out + o, len - o, " RET=%s", m->ret == RET_FULL ? "FULL" : "HDRS");
		if (m->envid[0] && o < len)
			snprintf(out + o, len - o, " ENVID=%s", m->envid);
	}
}

/* rcpt_params - RCPT parameters the peer understands */
static void rcpt_params(const struct conn *c, const struct q_rcpt *r, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	if (!(c->ehlo.flags & SMTP_EXT_DSN))
		return;
	if (r->notify) {
		o += (size_t)snprintf(out, len, " NOTIFY=%s%s%s%s", r->notify & NOTIFY_NEVER ? "NEVER" : "",
				      r->notify & NOTIFY_SUCCESS ? "SUCCESS," : "",
				      r->notify & NOTIFY_FAILURE ? "FAILURE," : "",
				      r->notify & NOTIFY_DELAY ? "DELAY," : "");
		if (o > 0 && out[o - 1] == ',')
			out[--o] = '\0';
	}
	if (r->orcpt[0] && o < len)
		snprintf(out + o, len - o, " ORCPT=%s", r->orcpt);
}

/* transaction - one message to one peer over an open connection; fills
 * res->out for every recipient tried; returns -1 if the connection is lost */
static int transaction(struct conn *c, const struct q_msg *m, struct result *res,
		       const struct q_rcpt **rc, size_t n)
{
	const struct conf_peer *p = c->peer;
	int pipelined = (c->ehlo.flags & SMTP_EXT_PIPELINING) != 0;
	int bdat = (c->ehlo.flags & SMTP_EXT_CHUNKING) != 0;
	char *cmds = xmalloc(1024 + n * (SMTP_PATH_MAX + SMTP_ORCPT_MAX + 64)), params[700];
	char text[SMTP_REPLY_FORMAT_MAX];
	size_t len = 0, accepted = 0;
	struct smtp_reply r;
	int *ok = xcalloc(n, sizeof(*ok)), fd = -1, clean = 0;
	off_t off;

	res->nout = 0;
	mail_params(c, m, params, sizeof(params));
	len += (size_t)sprintf(cmds + len, "MAIL FROM:<%s>%s\r\n", m->sender, params);
	if (!pipelined && (conn_write(c, cmds, len, p->command_timeout) < 0 || (len = 0)))
		goto lost;
	for (size_t i = 0; i < n; i++) {
		rcpt_params(c, rc[i], params, sizeof(params));
		len += (size_t)sprintf(cmds + len, "RCPT TO:<%s>%s\r\n", rc[i]->addr, params);
	}
	if (bdat)
		len += (size_t)sprintf(cmds + len, "BDAT %" PRIu64 " LAST\r\n", m->size);
	else
		len += (size_t)sprintf(cmds + len, "DATA\r\n");
	if (!pipelined) {
		/* one command, one reply: MAIL was sent above */
		if (conn_reply(c, &r, p->command_timeout) < 0)
			goto lost;
		if (r.code != 250) {
			smtp_reply_format(&r, text, sizeof(text));
			for (size_t i = 0; i < n; i++)
				set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			char one[SMTP_PATH_MAX + SMTP_ORCPT_MAX + 64];
			int k;

			rcpt_params(c, rc[i], params, sizeof(params));
			k = snprintf(one, sizeof(one), "RCPT TO:<%s>%s\r\n", rc[i]->addr, params);
			if (conn_write(c, one, (size_t)k, p->command_timeout) < 0
			    || conn_reply(c, &r, p->command_timeout) < 0)
				goto lost;
			smtp_reply_format(&r, text, sizeof(text));
			if (r.code == 250 || r.code == 251)
				ok[i] = 1, accepted++;
			else
				set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
		}
		if (accepted == 0)
			goto out;
		len = (size_t)sprintf(cmds, bdat ? "BDAT %" PRIu64 " LAST\r\n" : "DATA\r\n", m->size);
	}
	if (conn_write(c, cmds, len, p->command_timeout) < 0)
		goto lost;
	if ((fd = spool_open_body(ternd.spool, m, &off)) < 0) {
		conn_close(c, 0);
		snprintf(c->why, sizeof(c->why), "cannot open the spool file: %s", strerror(errno));
		goto lost;
	}
	if (bdat) {
		/* BDAT content follows at once, whatever the RCPT replies say. */
		if (conn_send_body(c, fd, off, m->size, 0, p->data_timeout) < 0)
			goto lost;
	}
	if (pipelined) {
		if (conn_reply(c, &r, p->command_timeout) < 0)
			goto lost;
		if (r.code != 250) {
			smtp_reply_format(&r, text, sizeof(text));
			for (size_t i = 0; i < n; i++)
				set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
		}
		for (size_t i = 0; i < n; i++) {
			if (conn_reply(c, &r, p->command_timeout) < 0)
				goto lost;
			if (res->nout >= n)
				continue;	/* MAIL failed: already set */
			smtp_reply_format(&r, text, sizeof(text));
			if (r.code == 250 || r.code == 251)
				ok[i] = 1, accepted++;
			else
				set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
		}
	}
	if (!bdat) {
		if (conn_reply(c, &r, p->command_timeout) < 0)
			goto lost;
		if (r.code != 354) {
			smtp_reply_format(&r, text, sizeof(text));
			for (size_t i = 0; i < n; i++)
				if (ok[i])
					set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
			goto out;
		}
		if (accepted == 0) {
			/* every RCPT refused but DATA said 354: an empty message ends it */
			if (conn_write(c, ".\r\n", 3, p->command_timeout) < 0
			    || conn_reply(c, &r, p->data_timeout) < 0)
				goto lost;
			goto out;
		}
		if (conn_send_body(c, fd, off, m->size, (m->flags & QMSG_DOTLINES) != 0,
				   p->data_timeout) < 0
		    || conn_write(c, ".\r\n", 3, p->data_timeout) < 0)
			goto lost;
	}
	if (conn_reply(c, &r, p->data_timeout) < 0)
		goto lost_after_data;
	smtp_reply_format(&r, text, sizeof(text));
	for (size_t i = 0; i < n; i++)
		if (ok[i])
			set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
	c->messages++;
	clean = r.code >= 200 && r.code < 300;
out:
	/* A transaction that did not end in 2xx may still be open on the
	 * server: RSET before the connection serves the next message. */
	if (!clean && (conn_write(c, "RSET\r\n", 6, p->command_timeout) < 0
		       || conn_reply(c, &r, p->command_timeout) < 0 || r.code != 250)) {
		if (fd >= 0)
			close(fd);
		free(cmds);
		free(ok);
		return -1;	/* outcomes are set; the connection is not reusable */
	}
	if (fd >= 0)
		close(fd);
	free(cmds);
	free(ok);
	return 0;
lost_after_data:
	/* The final reply was lost: it may have been delivered. */
	strncat(c->why, " (the message may be delivered twice)", sizeof(c->why) - strlen(c->why) - 1);
lost:
	for (size_t i = 0; i < n; i++) {
		int set = 0;

		for (size_t k = 0; k < res->nout; k++)
			set |= res->out[k].idx == rc[i]->idx;
		if (!set)
			set_outcome(&res->out[res->nout++], rc[i]->idx, 450, "4.4.2", c->why);
	}
	if (fd >= 0)
		close(fd);
	free(cmds);
	free(ok);
	return -1;
}

/* breaker_allow - may we connect to this peer now? A half-open breaker
 * lets exactly one probe through. */
static int breaker_allow(struct peer_rt *rt, uint64_t now)
{
	int ok;

	pthread_mutex_lock(&rt->lock);
	if (rt->breaker == BREAKER_OPEN && now >= rt->open_until) {
		rt->breaker = BREAKER_HALF_OPEN;
		log_info("peer %s: circuit breaker half-open: probing", rt->name);
		ok = 1;
	} else {
		ok = rt->breaker == BREAKER_CLOSED;
	}
	pthread_mutex_unlock(&rt->lock);
	return ok;
}

/* breaker_result - count a connection's success or failure */
static void breaker_result(struct peer_rt *rt, const struct conf_peer *p, int ok, const char *why)
{
	pthread_mutex_lock(&rt->lock);
	if (ok) {
		if (rt->breaker != BREAKER_CLOSED)
			log_info("peer %s: circuit breaker closed", rt->name);
		rt->breaker = BREAKER_CLOSED;
		rt->failures = 0;
		rt->cooldown_ms = p->breaker_cooldown;
	} else if (++rt->failures >= p->breaker_failures || rt->breaker == BREAKER_HALF_OPEN) {
		if (rt->cooldown_ms <= 0)
			rt->cooldown_ms = p->breaker_cooldown;
		rt->breaker = BREAKER_OPEN;
		rt->open_until = now_us() + (uint64_t)rt->cooldown_ms * 1000;
		log_warning("peer %s: circuit breaker open for %llds after %d failure%s (%s)%s%s",
			    rt->name, rt->cooldown_ms / 1000, rt->failures, rt->failures == 1 ? "" : "s",
			    why, rt->backup ? "; its mail goes to " : "; its mail waits",
			    rt->backup ? rt->backup->name : "");
		rt->cooldown_ms *= 2;
		if (rt->cooldown_ms > p->breaker_max_cooldown)
			rt->cooldown_ms = p->breaker_max_cooldown;
	}
	pthread_mutex_unlock(&rt->lock);
}

/* rate_wait - block until the peer's max_message_rate allows one more
 * message: a token bucket of rate_burst tokens refilled smoothly. Mail over
 * the limit just waits here: no deferral, no retry penalty. */
static void rate_wait(struct peer_rt *rt, const struct conf_peer *p)
{
	double burst = p->rate_burst > 0 ? (double)p->rate_burst : 1.0;

	if (p->max_message_rate <= 0)
		return;
	for (;;) {
		uint64_t now = now_us(), wait_us;

		pthread_mutex_lock(&rt->lock);
		if (rt->refilled == 0) {
			rt->tokens = burst;
			rt->refilled = now;
		}
		rt->tokens += (double)(now - rt->refilled) / (double)p->max_message_rate;
		if (rt->tokens > burst)
			rt->tokens = burst;
		rt->refilled = now;
		if (rt->tokens >= 1.0) {
			rt->tokens -= 1.0;
			pthread_mutex_unlock(&rt->lock);
			return;
		}
		wait_us = (uint64_t)((1.0 - rt->tokens) * (double)p->max_message_rate);
		pthread_mutex_unlock(&rt->lock);
		if (relay.stopping)
			return;
		usleep(wait_us < 1000000 ? (useconds_t)wait_us + 100 : 1000000);
	}
}

/* deliver - one attempt for one message and peer */
static void deliver(struct peer_rt *rt, struct conn *c, struct conn *cb, const char *qid)
{
	const struct conf *conf = ternd_conf();
	const struct conf_peer *p = conf_peer_find(conf, rt->name);
	struct result res = {0};
	const struct q_rcpt **todo;
	struct q_msg m;
	struct q_rcpt *rcpts;
	size_t n, ntodo = 0;
	char relay_host[400];
	struct job job;
	uint64_t now = now_us();

	if (p == NULL || store_get(ternd.store, qid, &m, &rcpts, &n) != 0)
		return;
	if (m.flags & QMSG_HOLD) {
		q_rcpts_free(&rcpts, n);
		q_msg_clear(&m);
		return;
	}
	todo = xcalloc(n ? n : 1, sizeof(*todo));
	for (size_t i = 0; i < n && ntodo < (size_t)p->max_rcpts_per_transaction; i++)
		if ((rcpts[i].state == RCPT_QUEUED || rcpts[i].state == RCPT_DEFERRED)
		    && rcpts[i].next_us <= now && strcmp(rcpts[i].peer, rt->name) == 0)
			todo[ntodo++] = &rcpts[i];
	if (ntodo == 0)
		goto out;
	memcpy(res.qid, qid, QID_LEN + 1);
	res.out = xcalloc(ntodo, sizeof(*res.out));
	if (!breaker_allow(rt, now)) {
		const struct conf_peer *bp = rt->backup ? conf_peer_find(conf, rt->backup->name) : NULL;

		if (bp == NULL || !breaker_allow(rt->backup, now)) {
			/* The mail waits, without an attempt counted against it. */
			for (size_t i = 0; i < ntodo; i++) {
				struct outcome *o = &res.out[res.nout++];

				o->idx = todo[i]->idx;
				o->state = RCPT_WAIT;
				snprintf(o->reply, sizeof(o->reply), "circuit breaker of peer %s is open",
					 rt->name);
			}
			res.wait_until = rt->open_until;
			goto record;
		}
		rt = rt->backup;	/* this attempt goes to the backup peer */
		p = bp;
		c = cb;
	}
	if (c->fd >= 0 && !conn_alive(c))
		conn_close(c, 0);	/* closed by the peer while idle: open anew */
	if (c->fd < 0 && conn_open(c, p, rt->tls, p->helo_name[0] ? p->helo_name : ternd.hostname) < 0) {
		breaker_result(rt, p, 0, c->why);
		for (size_t i = 0; i < ntodo; i++)
			set_outcome(&res.out[res.nout++], todo[i]->idx, c->temporary ? 450 : 550,
				    c->temporary ? "4.4.1" : "5.4.1", c->why);
		snprintf(relay_host, sizeof(relay_host), "none");
	} else {
		breaker_result(rt, p, 1, NULL);
		rate_wait(rt, p);
		snprintf(relay_host, sizeof(relay_host), "%s[%s]:%d", c->host, c->addr, c->port);
		if (transaction(c, &m, &res, todo, ntodo) < 0)
			conn_close(c, 0);
		else if (p->max_messages_per_connection && c->messages >= (unsigned)p->max_messages_per_connection)
			conn_close(c, 1);
	}
record:
	res.now = now_us();
	res.conf = conf;
	/* apply_result loads the current records into res.msg and res.rcpts */
	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = apply_result;
	job.arg = &res;
	if (commit_submit(&job) < 0) {
		log_error("%s: cannot record the delivery attempt: %s", qid, job.err);
	} else if (res.msg.sender == NULL) {
		log_info("%s: removed from the queue during the delivery attempt", qid);
	} else {
		int bounced = 0;

		log_outcomes(&res, c->fd >= 0 || c->why[0] == '\0' ? c : NULL, relay_host);
		for (size_t i = 0; i < res.nout; i++)
			bounced |= res.out[i].state == RCPT_BOUNCED;
		if (bounced)
			bounce(&res, conf, c->host[0] ? c->host : NULL);
		if (res.removed) {
			queue_op_cleanup(ternd.spool, &res.del);
			pthread_mutex_lock(&ternd.lock);
			ternd.queued--;
			pthread_mutex_unlock(&ternd.lock);
			log_info("%s: removed", qid);
		}
	}
	free(res.out);
	q_msg_clear(&res.msg);
	q_rcpts_free(&res.rcpts, res.nrcpts);
out:
	free(todo);
	q_rcpts_free(&rcpts, n);
	q_msg_clear(&m);
}

/* One delivery thread and its connection. */
struct worker_arg {
	struct peer_rt *rt;
	int warm;			/* one of min_idle: open at start, kept open */
};

/* keepalive - NOOP on an idle connection; close it if that fails */
static void keepalive(struct conn *c)
{
	struct smtp_reply r;

	if (conn_write(c, "NOOP\r\n", 6, c->peer->command_timeout) < 0
	    || conn_reply(c, &r, c->peer->command_timeout) < 0 || r.code != 250)
		conn_close(c, 0);
}

/* worker - one delivery thread of a peer, with its connection */
static void *worker(void *arg)
{
	struct worker_arg *wa = arg;
	struct peer_rt *rt = wa->rt;
	struct conn c = {.fd = -1}, cb = {.fd = -1};	/* to the peer, to its backup */
	const struct conf_peer *p = conf_peer_find(ternd_conf(), rt->name);
	uint64_t last_used = now_us(), last_try = 0;

	for (;;) {
		char qid[QID_LEN + 1];
		struct timespec t;
		int idle = 0;

		pthread_mutex_lock(&rt->lock);
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 1;
		while (rt->count == 0 && !relay.stopping && !idle)
			idle = pthread_cond_timedwait(&rt->ready, &rt->lock, &t) == ETIMEDOUT;
		if (relay.stopping && rt->count == 0) {
			pthread_mutex_unlock(&rt->lock);
			break;
		}
		if (rt->count == 0) {
			uint64_t now = now_us();

			pthread_mutex_unlock(&rt->lock);
			if (c.fd >= 0 && !conn_alive(&c))
				conn_close(&c, 0);
			if (wa->warm && c.fd < 0 && now - last_try > (uint64_t)p->connect_timeout * 1000) {
				/* min_idle: keep a connection ready, EHLO and TLS done */
				last_try = now;
				if (conn_open(&c, p, rt->tls, p->helo_name[0] ? p->helo_name : ternd.hostname) == 0)
					last_used = now;
			} else if (c.fd >= 0 && !wa->warm && now - last_used > (uint64_t)p->idle_timeout * 1000) {
				conn_close(&c, 1);	/* idle_timeout */
			} else if (c.fd >= 0 && now - last_used > (uint64_t)p->keepalive_interval * 1000) {
				keepalive(&c);
				last_used = now;
			}
			continue;
		}
		memcpy(qid, rt->jobs[rt->head], QID_LEN + 1);
		rt->head = (rt->head + 1) % RELAY_PEER_JOBS;
		rt->count--;
		pthread_mutex_unlock(&rt->lock);
		deliver(rt, &c, &cb, qid);
		done(rt, qid);
		last_used = now_us();
	}
	conn_close(&c, 1);
	conn_close(&cb, 1);
	smtp_reply_free(&c.parser);
	smtp_reply_free(&cb.parser);
	free(wa);
	return NULL;
}

/* The key that seals TLS sessions in the queue database. */
static struct trace_key *session_key;

/* A sealed session, as the committer writes it. */
struct tls_put {
	const char *key;
	unsigned char *blob;
	size_t len;
};

/* put_tls - write function: keep one sealed session */
static int put_tls(struct store_txn *txn, void *arg)
{
	const struct tls_put *tp = arg;

	return store_put_tls(txn, tp->key, tp->blob, tp->len);
}

/* save_session - seal a new TLS session and keep it (conn_tls_save_fn) */
static void save_session(const char *key, const unsigned char *der, int len)
{
	struct tls_put tp = {key, NULL, crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + (size_t)len};
	struct job job;

	if (session_key == NULL)
		return;
	tp.blob = xmalloc(tp.len);
	randombytes_buf(tp.blob, crypto_secretbox_NONCEBYTES);
	crypto_secretbox_easy(tp.blob + crypto_secretbox_NONCEBYTES, der, (size_t)len, tp.blob,
			      session_key->bytes);
	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = put_tls;
	job.arg = &tp;
	if (commit_submit(&job) < 0)
		log_warning("cannot keep a TLS session: %s", job.err);
	free(tp.blob);
}

/* load_session - a kept session for this context, unsealed, offered first */
static void load_session(SSL_CTX *ctx)
{
	unsigned char blob[70000], der[70000];
	size_t n = store_get_tls(ternd.store, conn_tls_key(ctx), blob, sizeof(blob));

	if (session_key == NULL || n < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
		return;
	if (crypto_secretbox_open_easy(der, blob + crypto_secretbox_NONCEBYTES,
				       n - crypto_secretbox_NONCEBYTES, blob, session_key->bytes) != 0) {
		log_warning("a kept TLS session does not open with the key: ignored");
		return;
	}
	conn_tls_preload(ctx, der, (int)(n - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES));
	sodium_memzero(der, n - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES);
}

/* open_session_key - key_file, created 0600 when absent */
static void open_session_key(const struct conf *conf)
{
	char path[4096], err[512];

	if (conf->ternd.key_file[0])
		snprintf(path, sizeof(path), "%s", conf->ternd.key_file);
	else
		snprintf(path, sizeof(path), "%s/session.key", conf->global.state_dir);
	if (access(path, F_OK) != 0 && trace_key_create(path, err, sizeof(err)) < 0)
		log_fatal("%s", err);
	if ((session_key = trace_key_load(path, err, sizeof(err))) == NULL)
		log_fatal("%s", err);
}

/* relay_start - start the scheduler and each relayed peer's threads */
void relay_start(void)
{
	const struct conf *conf = ternd_conf();
	char err[512];

	relay.peers = xcalloc(conf->npeers ? conf->npeers : 1, sizeof(*relay.peers));
	for (size_t i = 0; i < conf->npeers; i++) {
		const struct conf_peer *p = &conf->peers[i];
		struct peer_rt *rt;

		if (p->host[0] == '\0') {
			log_info("peer %s has no host: its mail stays queued", p->name);
			continue;
		}
		rt = &relay.peers[relay.npeers++];
		rt->name = xstrdup(p->name);
		if (p->tls != TLS_NONE) {
			if (session_key == NULL)
				open_session_key(conf);
			if ((rt->tls = conn_tls_context(p, save_session, err, sizeof(err))) == NULL)
				log_fatal("%s", err);
			load_session(rt->tls);
		}
		pthread_mutex_init(&rt->lock, NULL);
		pthread_cond_init(&rt->ready, NULL);
		rt->jobs = xcalloc(RELAY_PEER_JOBS, sizeof(*rt->jobs));
		rt->busy = xcalloc(RELAY_PEER_JOBS, sizeof(*rt->busy));
		rt->nthreads = (int)(p->max_connections > 0 ? p->max_connections : 1);
		rt->threads = xcalloc((size_t)rt->nthreads, sizeof(*rt->threads));
		for (int k = 0; k < rt->nthreads; k++) {
			struct worker_arg *wa = xcalloc(1, sizeof(*wa));

			wa->rt = rt;
			wa->warm = k < p->min_idle;
			if (pthread_create(&rt->threads[k], NULL, worker, wa) != 0)
				log_fatal("cannot start a delivery thread");
		}
		log_info("peer %s: relaying to %s port %lld, tls %s, %d connection%s", p->name, p->host,
			 p->port, conf_tls_name(p->tls), rt->nthreads, rt->nthreads == 1 ? "" : "s");
	}
	for (size_t i = 0; i < relay.npeers; i++) {
		const struct conf_peer *p = conf_peer_find(conf, relay.peers[i].name);

		relay.peers[i].cooldown_ms = p->breaker_cooldown;
		if (p->backup_peer[0] && (relay.peers[i].backup = find_rt(p->backup_peer)) == NULL)
			log_warning("peer %s: backup_peer %s is not a relayed peer: ignored", p->name,
				    p->backup_peer);
	}
	if (pthread_create(&relay.sched, NULL, sched_main, NULL) != 0)
		log_fatal("cannot start the scheduler");
}

/* relay_stop - finish attempts in progress, QUIT, stop */
void relay_stop(void)
{
	pthread_mutex_lock(&relay.lock);
	relay.stopping = 1;
	pthread_cond_broadcast(&relay.wake);
	pthread_mutex_unlock(&relay.lock);
	pthread_join(relay.sched, NULL);
	for (size_t i = 0; i < relay.npeers; i++) {
		struct peer_rt *rt = &relay.peers[i];

		pthread_mutex_lock(&rt->lock);
		rt->count = 0;	/* queued jobs stay in LMDB for next time */
		pthread_cond_broadcast(&rt->ready);
		pthread_mutex_unlock(&rt->lock);
		for (int k = 0; k < rt->nthreads; k++)
			pthread_join(rt->threads[k], NULL);
		SSL_CTX_free(rt->tls);
		free(rt->threads);
		free(rt->jobs);
		free(rt->busy);
		free(rt->name);
	}
	free(relay.peers);
	relay.npeers = 0;
	trace_key_free(&session_key);
}

/* relay_enqueue_dsn - queue a notification from <> to rcpt, routed like
 * any mail; committed before it is counted as sent */
int relay_enqueue_dsn(const struct conf *conf, const char *rcpt, const char *body, size_t len,
		      int smtputf8, char qid[QID_LEN + 1])
{
	const char *peer = conf_route(conf, rcpt);
	struct q_msg m = {0};
	struct q_rcpt r = {0};
	struct job job;
	crypto_generichash_state h;

	if (peer == NULL) {
		log_warning("no route for the notification to <%s>: not sent", rcpt);
		return -1;
	}
	qid_next(&ternd.qids, now_us(), m.qid);
	m.arrival_us = now_us();
	m.size = len;
	m.nrcpt = m.nlive = 1;
	m.sender = m.envid = m.helo = (char *)"";
	m.client = (char *)"local";
	if (smtputf8)
		m.flags |= QMSG_SMTPUTF8;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)body[i] > 127)
			m.flags |= QMSG_8BIT;
	for (size_t i = 0; i + 1 < len; i++)
		if (body[i] == '\n' && body[i + 1] == '.')
			m.flags |= QMSG_DOTLINES;
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
	if (commit_submit(&job) < 0)
		return -1;
	memcpy(qid, m.qid, QID_LEN + 1);
	log_info("%s: from=<>, size=%zu, nrcpt=1 (queue active)", m.qid, len);
	return 0;
}
