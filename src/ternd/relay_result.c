/*
 * relay_result - what a delivery attempt came to (see relay_result.h).
 *
 * An attempt's outcomes go to the committer as one write (apply_result):
 * sent and bounced recipients are final, deferred ones get their next
 * attempt (backoff.c: exponential backoff with jitter, never past
 * max_queue_lifetime, then they expire and bounce), bounces queue their
 * DSN in the same transaction (notice.c), and a message leaves the queue
 * only in the transaction that records its last final recipient. Only
 * after the commit are the outcomes logged (one Postfix-format line per
 * recipient), turned into spans and counted. Runs in the delivery
 * threads; apply_result in the committer's.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "backoff.h"
#include "commit.h"
#include "kept.h"
#include "log.h"
#include "notice.h"
#include "otlp.h"
#include "peer.h"
#include "pflog.h"
#include "relay_proto.h"
#include "relay_result.h"
#include "sched.h"
#include "smtp_cmd.h"
#include "spanfile.h"
#include "stats.h"
#include "ternd.h"
#include "textesc.h"
#include "xalloc.h"

/* attempt_delays - the four parts of an attempt's delay, in microseconds:
 * before it, rate limit wait, connection setup, transmission */
static void attempt_delays(const struct result *res, uint64_t d[4])
{
	uint64_t start = res->start > res->msg.arrival_us ? res->start : res->msg.arrival_us;
	uint64_t conn = res->connected > start ? res->connected : start;
	uint64_t send = res->sending > conn ? res->sending : conn;
	uint64_t end = res->now > send ? res->now : send;

	d[0] = start - res->msg.arrival_us;
	d[1] = send - conn;
	d[2] = conn - start;
	d[3] = end - send;
}

/* hist_attempt - the history record of one recipient's attempt */
static int hist_attempt(struct store_txn *txn, const struct result *res,
			const struct outcome *o, const struct q_rcpt *r)
{
	struct hist_rec h = {0};

	h.kind = HIST_ATTEMPT;
	h.state = o->expired ? HIST_EXPIRED : o->state;
	h.tls = res->tls;
	h.code = (uint16_t)atoi(o->reply);	/* 0 for a local reason */
	h.idx = o->idx;
	h.conn_use = res->conn_use;
	h.time_us = res->now;
	attempt_delays(res, h.delays_us);
	memcpy(h.trace_id, res->msg.trace_id, sizeof(h.trace_id));
	memcpy(h.span_id, res->msg.span_id, sizeof(h.span_id));
	memcpy(h.qid, res->qid, sizeof(h.qid));
	h.rcpt = r->addr;
	h.peer = r->peer;
	h.relay = (char *)(res->relay ? res->relay : "none");
	h.dsn = (char *)o->esc;
	h.reply = (char *)o->reply;
	h.peer_qid = (char *)(o->state == RCPT_SENT ? res->peer_qid : "");
	return store_hist_put(txn, &h);
}

/* relay_result_rcpt - the loaded recipient with index idx, or NULL (the records
 * come in index order, so it is usually at position idx) */
struct q_rcpt *relay_result_rcpt(const struct result *res, uint32_t idx)
{
	if (idx < res->nrcpts && res->rcpts[idx].idx == idx)
		return &res->rcpts[idx];
	for (size_t k = 0; k < res->nrcpts; k++)
		if (res->rcpts[k].idx == idx)
			return &res->rcpts[k];
	return NULL;
}

/* relay_outcome_fate - what outcome o makes of a live recipient on its
 * attempts-th attempt: o's own state, or, deferred past
 * max_queue_lifetime, bounced (o rewritten: 4.4.7, the last reason kept);
 * a deferred one's next attempt in *next_us. The committer's write and
 * the DSN drafted before it (notice_draft) decide alike through this. */
void relay_outcome_fate(const struct conf *conf, uint64_t arrival_us, uint32_t attempts,
			struct outcome *o, uint64_t now, uint64_t *next_us)
{
	if (o->state == RCPT_DEFERRED && backoff_next(conf, attempts, arrival_us, now, next_us)) {
		char last[sizeof(o->reply)];

		/* expired: bounced, with the last reason */
		o->state = RCPT_BOUNCED;
		o->expired = 1;
		snprintf(o->esc, sizeof(o->esc), "4.4.7");
		snprintf(last, sizeof(last), "%s", o->reply);
		snprintf(o->reply, sizeof(o->reply), "message expired in the queue; last reason: %.900s",
			 last);
	}
	o->bounced = o->state == RCPT_BOUNCED;
}

/* apply_result - record an attempt's outcome; remove a finished message */
static int apply_result(struct store_txn *txn, void *arg)
{
	struct result *res = arg;
	int rc;

	q_msg_clear(&res->msg);
	q_rcpts_free(&res->rcpts, res->nrcpts);
	res->removed = 0;
	res->noticed = 0;
	for (size_t i = 0; i < res->nout; i++)
		res->out[i].bounced = 0;
	if ((rc = store_txn_get_msg(txn, res->qid, &res->msg)) == 1)
		return 0;	/* deleted meanwhile */
	if (rc != 0)
		return rc;
	store_txn_get_rcpts(txn, res->qid, &res->rcpts, &res->nrcpts);
	res->was = queue_state(&res->msg, res->rcpts, res->nrcpts);
	for (size_t i = 0; i < res->nout; i++) {
		struct outcome *o = &res->out[i];
		struct q_rcpt *r = relay_result_rcpt(res, o->idx);

		if (r == NULL || (r->state != RCPT_QUEUED && r->state != RCPT_DEFERRED))
			continue;
		r->attempts++;
		relay_outcome_fate(res->conf, res->msg.arrival_us, r->attempts, o, res->now, &r->next_us);
		r->state = o->state;
		if (o->maybe_sent)
			r->flags |= RCPT_MAYBE_SENT;
		free(r->reply);
		r->reply = xstrdup(o->reply);
		if (r->state != RCPT_DEFERRED && res->msg.nlive > 0)
			res->msg.nlive--;
		if ((rc = store_put_rcpt(txn, res->qid, r)) != 0
		    || (rc = hist_attempt(txn, res, o, r)) != 0)
			return rc;
	}
	if ((rc = notice_put(txn, res)) != 0)
		return rc;
	res->after = res->msg.nlive > 0 ? queue_state(&res->msg, res->rcpts, res->nrcpts)
		: QSTATE_GONE;
	/* to its state with these outcomes; the delete below moves it on */
	if ((rc = queue_count_move(txn, res->was, queue_state(&res->msg, res->rcpts,
							      res->nrcpts), 1)) != 0)
		return rc;
	if (res->msg.nlive > 0)
		return store_put_msg(txn, &res->msg);
	/* The last recipient is final: the message leaves the queue. */
	memset(&res->del, 0, sizeof(res->del));
	res->del.op = QOP_DELETE;
	memcpy(res->del.qid, res->qid, QID_LEN + 1);
	res->del.spool = ternd.spool;
	res->removed = 1;
	return queue_op_write(txn, &res->del);
}

/* log_outcomes - one Postfix-format line per recipient of the attempt:
 * delays= are queue wait before the attempt, rate limit wait, connection
 * setup and transmission (man ternd, LOGGING) */
static void log_outcomes(const struct result *res)
{
	char delay[PFLOG_DELAY_MAX], a[PFLOG_DELAY_MAX], b[PFLOG_DELAY_MAX];
	char cs[PFLOG_DELAY_MAX], d[PFLOG_DELAY_MAX], use[32] = "";
	char ea[TEXTESC_SIZE(SMTP_PATH_MAX)], er[TEXTESC_SIZE(SMTP_REPLY_FORMAT_MAX)];
	uint64_t part[4];

	attempt_delays(res, part);
	pflog_delay(part[0] + part[1] + part[2] + part[3], delay, sizeof(delay));
	pflog_delay(part[0], a, sizeof(a));
	pflog_delay(part[1], b, sizeof(b));
	pflog_delay(part[2], cs, sizeof(cs));
	pflog_delay(part[3], d, sizeof(d));
	if (res->conn_use > 1)	/* as Postfix: only on a reused connection */
		snprintf(use, sizeof(use), " conn_use=%u,", res->conn_use);
	for (size_t i = 0; i < res->nout; i++) {
		const struct outcome *o = &res->out[i];
		const char *addr = "?";

		for (size_t k = 0; k < res->nrcpts; k++)
			if (res->rcpts[k].idx == o->idx)
				addr = res->rcpts[k].addr;
		/* tls= last: pflogsumm wants Postfix's fields, in order, up to
		 * status=; the address and the reply cannot add one (textesc) */
		log_info("%s: to=<%s>, relay=%s,%s delay=%s, delays=%s/%s/%s/%s, dsn=%s, "
			 "status=%s (%s), tls=%s", res->qid, textesc(ea, sizeof(ea), addr, TEXTESC_ADDR),
			 res->relay, use, delay, a, b, cs, d, o->esc,
			 hist_state_name(o->expired ? HIST_EXPIRED : o->state),
			 textesc(er, sizeof(er), o->reply, TEXTESC_REPLY),
			 res->tls == HIST_TLS_RESUMED ? "resumed" : res->tls == HIST_TLS_FULL ? "full" : "none");
	}
}

/* emit_spans - the attempt as one line of otlp_spans_file: a span per
 * recipient, under the message's trace; formatted here, written by the
 * span writer thread */
static void emit_spans(const struct result *res)
{
	struct otlp_span *sp = xcalloc(res->nout ? res->nout : 1, sizeof(*sp));
	struct otlp_attempt a = {0};
	size_t cap = 4096;
	char *line;

	for (size_t i = 0; i < res->nout; i++) {
		const struct outcome *o = &res->out[i];
		struct otlp_span *s = &sp[a.nspans];

		for (size_t k = 0; k < res->nrcpts; k++)
			if (res->rcpts[k].idx == o->idx)
				s->rcpt = res->rcpts[k].addr;
		randombytes_buf(s->span_id, sizeof(s->span_id));
		s->status = hist_state_name(o->expired ? HIST_EXPIRED : o->state);
		s->dsn = o->esc;
		s->reply = o->reply;
		s->peer_qid = o->state == RCPT_SENT ? res->peer_qid : "";
		s->ok = o->state == RCPT_SENT;
		cap += strlen(o->reply) * 12 + (s->rcpt ? strlen(s->rcpt) * 6 : 0) + 1024;
		a.nspans++;
	}
	if (a.nspans) {
		a.service = "ternd";
		a.host = ternd.hostname;
		a.qid = res->qid;
		a.peer = "";
		for (size_t k = 0; k < res->nrcpts; k++)
			if (res->rcpts[k].idx == res->out[0].idx)
				a.peer = res->rcpts[k].peer;
		a.relay = res->relay;
		a.tls = res->tls == HIST_TLS_RESUMED ? "resumed" : res->tls == HIST_TLS_FULL ? "full" : "none";
		a.conn_use = res->conn_use;
		a.start_us = res->start;
		a.end_us = res->now;
		memcpy(a.trace_id, res->msg.trace_id, sizeof(a.trace_id));
		memcpy(a.parent_id, res->msg.span_id, sizeof(a.parent_id));
		a.spans = sp;
		line = xmalloc(cap);
		if (otlp_line(&a, line, cap) > 0)
			spanfile_add(line);	/* the writer frees it */
		else
			free(line);
	}
	free(sp);
}

/* result_committed - after the commit of a result: the queue gauge, the
 * notification to queue, the files of a message that left the queue */
static void result_committed(struct result *res)
{
	stats_queue(res->was, res->after);
	if (res->noticed)
		sched_kick();	/* the scheduler queues the notification */
	if (res->removed) {
		queue_op_cleanup(ternd.spool, &res->del);
		stats_queued_add(-1);
		log_info("%s: removed", res->qid);
	}
}

/* relay_result_post - hand an attempt's outcomes to the committer
 * without waiting for them to be recorded: relay_result_reap (after
 * commit_poll or commit_wait on a->job) logs them, counts them and cleans
 * up. a->to is the peer it went to; the attempt must not move until it is
 * reaped (a->job is queued). The TLS state is the connection's when the
 * transaction was written (tx_start), not after a loss closed it. */
void relay_result_post(struct attempt *a, const struct conn *c, const struct conf *conf)
{
	struct peer_rt *rt = a->to;
	struct result *res = &a->res;

	res->now = now_us();
	res->conf = conf;
	res->relay = a->relay_host[0] ? a->relay_host : "none";
	res->host = c->host[0] ? c->host : NULL;
	if (a->t0) {
		/* a transaction: its time and outcome count for the breaker */
		uint64_t ms = (res->now - a->t0) / 1000;
		int failed = 0;

		for (size_t i = 0; i < res->nout; i++)
			failed |= res->out[i].state == RCPT_DEFERRED;
		metric_observe(stats.transmission, (double)(res->now - a->t0) / 1e6, rt->name);
		peer_attempt(rt, c->peer, &a->pass, failed, ms < UINT32_MAX ? (uint32_t)ms : UINT32_MAX - 1);
	} else {
		peer_cancel(rt, &a->pass);	/* no transaction (or its connection failed) */
	}
	/* the DSN this attempt may cause, read and built before the write:
	 * the committer's transaction only stores it (notice.h) */
	notice_draft(res, &a->m, a->rcpts, a->n);
	/* apply_result loads the current records into res.msg and res.rcpts */
	memset(&a->job, 0, sizeof(a->job));
	a->job.kind = JOB_WRITE;
	a->job.write = apply_result;
	a->job.arg = res;
	commit_post(&a->job);
}

/* relay_result_reap - an attempt posted by relay_result_post whose job
 * was answered: log, count and clean up, or keep its outcomes in memory
 * when they could not be recorded */
void relay_result_reap(struct attempt *a)
{
	struct result *res = &a->res;

	if (a->job.result < 0) {
		/* kept in memory, so that it is not sent again (kept.c) */
		int kept = kept_add(res, a->to->name, a->job.err);

		log_error("%s: cannot record the delivery attempt: %s%s", a->qid, a->job.err,
			  kept ? ": kept in memory, not sent again"
			  : " (too many outcomes kept: it may be sent again)");
	} else {
		relay_result_done(res, a->to->name);
	}
	notice_draft_free(&res->draft);
}

/* relay_result_record - relay_result_post, waiting for the commit:
 * the attempt's outcomes are recorded, logged and counted on return */
void relay_result_record(struct attempt *a, const struct conn *c, const struct conf *conf)
{
	relay_result_post(a, c, conf);
	commit_wait(&a->job);
	relay_result_reap(a);
}

/* posted_reap - release the attempts whose outcomes are recorded, oldest
 * first, waiting for the first wait of them (all: SIZE_MAX) */
void posted_reap(struct posted *q, size_t wait)
{
	for (; q->count > 0; wait -= wait > 0) {
		struct attempt *a = &q->at[q->head];

		if (wait > 0)
			commit_wait(&a->job);
		else if (!commit_poll(&a->job))
			return;
		relay_result_reap(a);
		sched_release(a);
		q->head = (q->head + 1) % q->cap;
		q->count--;
	}
}

/* posted_add - a's outcomes to the committer, without waiting (a moves
 * into q); when q is full, its oldest is waited for first */
void posted_add(struct posted *q, const struct attempt *a, const struct conn *c,
		       const struct conf *conf)
{
	struct attempt *slot;

	if (q->count == q->cap)
		posted_reap(q, 1);
	slot = &q->at[(q->head + q->count++) % q->cap];
	*slot = *a;
	relay_result_post(slot, c, conf);
}

/* relay_result_apply - apply_result, for an outcome recorded later (kept.c) */
int relay_result_apply(struct store_txn *txn, void *arg)
{
	return apply_result(txn, arg);
}

/* relay_result_done - after the commit of an attempt to peer: log, spans,
 * counts, the files of a message that left the queue */
void relay_result_done(struct result *res, const char *peer)
{
	if (res->msg.sender == NULL) {
		log_info("%s: removed from the queue during the delivery attempt", res->qid);
		return;
	}
	log_outcomes(res);
	if (spanfile_enabled())
		emit_spans(res);
	for (size_t i = 0; i < res->nout; i++)
		stats_delivery(peer, res->out[i].state, res->out[i].esc);
	result_committed(res);
}

/* Expired by the admin (ternq expire): the admin's reason and its code,
 * as a lifetime expiry: RFC 3463's 4.4.7 "delivery time expired", with
 * Action: failed in the DSN, counted as expired (stats_delivery). */
#define EXPIRE_ESC "4.4.7"
#define EXPIRE_REPLY "expired by admin"

/* An expiry: the result applied, and the envelope it had. */
struct expiry {
	struct result res;
	char envelope[sizeof(((struct queue_op_arg *)0)->envelope)];
};

/* expire_write - every live recipient of the message bounces as expired
 * by the admin, recorded as an attempt's outcomes are (apply_result:
 * history as expired, the DSN in this transaction, the message removed) */
static int expire_write(struct store_txn *txn, void *arg)
{
	struct expiry *x = arg;
	struct result *res = &x->res;
	struct q_msg m;
	struct q_rcpt *r = NULL;
	size_t n = 0;
	int rc;

	res->nout = 0;
	if ((rc = store_txn_get_msg(txn, res->qid, &m)) != 0)
		return rc == 1 ? 0 : rc;	/* not found: res->msg.sender stays NULL */
	store_txn_get_rcpts(txn, res->qid, &r, &n);
	/* the log line's envelope: the recipients that are live until now */
	queue_envelope(x->envelope, sizeof(x->envelope), &m, r, n);
	free(res->out);
	res->out = xcalloc(n ? n : 1, sizeof(*res->out));
	for (size_t i = 0; i < n; i++) {
		if (r[i].state != RCPT_QUEUED && r[i].state != RCPT_DEFERRED)
			continue;
		outcome_set(&res->out[res->nout], r[i].idx, 554, EXPIRE_ESC, EXPIRE_REPLY);
		res->out[res->nout++].expired = 1;
	}
	q_rcpts_free(&r, n);
	q_msg_clear(&m);
	return apply_result(txn, res);
}

/* relay_result_expire - expire a message now (ternq expire, asked by
 * uid): bounce its live recipients with a DSN, log it as a lifetime
 * expiry is logged (status=expired) after the admin's line; 1 done,
 * 0 not in the queue, -1 with err */
int relay_result_expire(const char *qid, unsigned uid, char *err, size_t len)
{
	struct expiry x;
	struct result *res = &x.res;
	struct job job;
	int rc = 1;

	memset(&x, 0, sizeof(x));
	memcpy(res->qid, qid, QID_LEN + 1);
	res->now = res->start = res->connected = res->sending = now_us();
	res->conf = ternd_conf();
	res->relay = "none";
	{
		/* the DSN, read and built before the write (notice_draft), from
		 * what the queue says now; the write decides again */
		struct q_msg m;
		struct q_rcpt *r = NULL;
		size_t n = 0;

		if (store_get(ternd.store, qid, &m, &r, &n) == 0) {
			res->out = xcalloc(n ? n : 1, sizeof(*res->out));
			for (size_t i = 0; i < n; i++)
				if (r[i].state == RCPT_QUEUED || r[i].state == RCPT_DEFERRED)
					outcome_set(&res->out[res->nout++], r[i].idx, 554, EXPIRE_ESC,
						    EXPIRE_REPLY);
			for (size_t i = 0; i < res->nout; i++) {
				res->out[i].expired = 1;
				res->out[i].state = RCPT_BOUNCED;
			}
			notice_draft(res, &m, r, n);
			q_rcpts_free(&r, n);
			q_msg_clear(&m);
		}
	}
	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = expire_write;
	job.arg = &x;
	if (commit_submit(&job) < 0) {
		snprintf(err, len, "%s", job.err);
		rc = -1;
	} else if (res->msg.sender == NULL) {
		rc = 0;
	} else {
		log_info("%s: expired by admin (uid %u): %s", qid, uid, x.envelope);
		log_outcomes(res);
		for (size_t i = 0; i < res->nout; i++) {
			const struct q_rcpt *r = relay_result_rcpt(res, res->out[i].idx);

			stats_delivery(r ? r->peer : "", res->out[i].state, res->out[i].esc);
		}
		result_committed(res);
	}
	notice_draft_free(&res->draft);
	free(res->out);
	q_msg_clear(&res->msg);
	q_rcpts_free(&res->rcpts, res->nrcpts);
	return rc;
}
