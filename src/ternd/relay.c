/*
 * relay - delivery of queued mail to relay peers.
 *
 * The scheduler thread reads the schedule index peer by peer (a peer
 * without a host is passed over unread) and hands a relayed peer's
 * messages due now, as (message, peer) jobs, to its delivery threads
 * until its job queue is full. There are at most max_connections
 * delivery threads per peer, each keeping its connection open between
 * messages. A delivery thread sends one transaction per message and
 * peer (MAIL, RCPT..., DATA or BDAT, pipelined when offered; with
 * PIPELINING the next waiting message's transaction goes out before the
 * previous final reply is read), and hands each outcome to the committer
 * as soon as its final reply is read: sent and bounced recipients are final,
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "conn.h"
#include "dsn.h"
#include "log.h"
#include "otlp.h"
#include "pflog.h"
#include "queue_ops.h"
#include "relay.h"
#include "smtp_cmd.h"
#include "smtp_data.h"
#include "spanfile.h"
#include "stats.h"
#include "ternd.h"
#include "textesc.h"
#include "traceparent.h"
#include "xalloc.h"

#define RELAY_PEER_JOBS 1024
#define BUSY_SLOTS (4 * RELAY_PEER_JOBS)	/* a power of two */
#define RCPT_WAIT 0xff			/* outcome: not tried (breaker open), no penalty */
#define BREAKER_RING 256		/* recent attempts kept per peer */
#define BREAKER_MIN_ATTEMPTS 20		/* in breaker_window, before rate or latency count */

enum breaker { BREAKER_CLOSED, BREAKER_OPEN, BREAKER_HALF_OPEN };

/* One recent attempt, for breaker_error_rate and breaker_latency. */
struct breaker_sample {
	uint64_t at;			/* when it ended, now_us() */
	uint32_t ms;			/* transaction time; UINT32_MAX: no transaction */
	int failed;			/* temporary failure: 4xx, lost or no connection */
};

/* A token bucket (under the peer's lock). */
struct bucket {
	double tokens;
	uint64_t refilled;
};

struct peer_rt {
	char *name;
	SSL_CTX *tls;			/* under lock: a reload may replace it */
	char *settings;			/* the connection settings tls was made from */
	unsigned gen;			/* under lock: bumped when they change */
	int gone;			/* removed by a reload: its threads stop */
	SSL_CTX **retired;		/* contexts replaced by reloads, freed at stop */
	size_t nretired;
	char *alive;			/* per thread slot: 0 never started, 1 runs, 2 ended */
	pthread_mutex_t lock;
	pthread_cond_t ready;
	char (*jobs)[QID_LEN + 1];	/* ring of queue ids waiting */
	size_t head, count;
	char (*busy)[QID_LEN + 1];	/* queued or being delivered: not again; a hash
					 * set of BUSY_SLOTS, "" for a free slot */
	size_t nbusy;
	pthread_t *threads;
	int nthreads;
	/* circuit breaker (under lock) */
	enum breaker breaker;
	int failures;			/* consecutive connection failures */
	uint64_t open_until;
	long long cooldown_ms;
	struct peer_rt *backup;
	struct breaker_sample ring[BREAKER_RING];	/* the newest at ring[(next - 1) % size] */
	size_t ring_next, ring_len;
	/* rate limits (under lock) */
	struct bucket messages, connections;
};

static struct {
	struct peer_rt **peers;		/* never freed before relay_stop */
	size_t npeers;
	pthread_rwlock_t peers_lock;	/* the array: a reload adds to it */
	pthread_t sched;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int kicked;
	int stopping;
} relay = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
	   .peers_lock = PTHREAD_RWLOCK_INITIALIZER};

static int max_connections(const struct conf_peer *p);

/* Messages the scheduler found routed to a peer a reload removed. */
#define REROUTE_MAX 64			/* per scan; the next scan finds the rest */
struct reroutes {
	char qids[REROUTE_MAX][QID_LEN + 1];
	size_t n;
};

/* relay_kick - new mail is queued: look at the schedule now */
void relay_kick(void)
{
	pthread_mutex_lock(&relay.lock);
	relay.kicked = 1;
	pthread_cond_signal(&relay.wake);
	pthread_mutex_unlock(&relay.lock);
}

/* find_rt - a relayed peer's runtime state by name, or NULL (no host:
 * not relayed; or removed by a reload) */
static struct peer_rt *find_rt(const char *name)
{
	struct peer_rt *rt = NULL;

	pthread_rwlock_rdlock(&relay.peers_lock);
	for (size_t i = 0; i < relay.npeers && rt == NULL; i++)
		if (!relay.peers[i]->gone && strcmp(relay.peers[i]->name, name) == 0)
			rt = relay.peers[i];
	pthread_rwlock_unlock(&relay.peers_lock);
	return rt;
}

/* busy_slot - where qid is in the peer's busy set, or the free slot where
 * it would go (linear probing; the set is at most a quarter full) */
static size_t busy_slot(const struct peer_rt *p, const char *qid)
{
	uint32_t h = 2166136261u;	/* FNV-1a */
	size_t i;

	for (size_t k = 0; k < QID_LEN; k++)
		h = (h ^ (unsigned char)qid[k]) * 16777619u;
	for (i = h & (BUSY_SLOTS - 1); p->busy[i][0] && memcmp(p->busy[i], qid, QID_LEN) != 0;
	     i = (i + 1) & (BUSY_SLOTS - 1))
		;
	return i;
}

/* busy_del - take qid out of the busy set: empty its slot and move up
 * the entries after it that probing would no longer find */
static void busy_del(struct peer_rt *p, const char *qid)
{
	size_t i = busy_slot(p, qid), j = i;

	if (p->busy[i][0] == '\0')
		return;
	p->busy[i][0] = '\0';
	p->nbusy--;
	for (;;) {
		size_t home;

		j = (j + 1) & (BUSY_SLOTS - 1);
		if (p->busy[j][0] == '\0')
			return;
		home = busy_slot(p, p->busy[j]);
		if (home != j) {	/* its probe now stops at the hole: fill it */
			memcpy(p->busy[home], p->busy[j], QID_LEN + 1);
			p->busy[j][0] = '\0';
		}
	}
}

/* offer - queue a due message for a peer, once; 0 when the peer is full */
static int offer(struct peer_rt *p, const char *qid)
{
	int ok = 1;
	size_t slot;

	pthread_mutex_lock(&p->lock);
	slot = busy_slot(p, qid);
	if (p->busy[slot][0] == '\0') {
		if (p->nbusy == RELAY_PEER_JOBS) {
			ok = 0;
		} else {
			memcpy(p->busy[slot], qid, QID_LEN + 1);
			p->nbusy++;
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
	pthread_mutex_lock(&p->lock);
	busy_del(p, qid);
	pthread_mutex_unlock(&p->lock);
}

/* offer_due - a relayed peer's recipient due now: offer its message;
 * stop at the first one the full ring cannot take */
static int offer_due(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	(void)next_us;
	(void)idx;
	return !offer(arg, qid) || relay.stopping;
}

/* reroute_due - a due recipient of a peer a reload removed: note its
 * message, once; stop when REROUTE_MAX are noted */
static int reroute_due(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	struct reroutes *rr = arg;
	size_t i;

	(void)next_us;
	(void)idx;
	for (i = 0; i < rr->n && strcmp(rr->qids[i], qid) != 0; i++)
		;
	if (i == rr->n)
		memcpy(rr->qids[rr->n++], qid, QID_LEN + 1);
	return rr->n == REROUTE_MAX || relay.stopping;
}

/* sched_peer - one peer in the schedule: offer a relayed peer's due
 * mail; pass over a peer without a host, whose mail stays queued,
 * without reading it; collect the mail of a peer no longer configured */
static int sched_peer(const char *peer, void *arg)
{
	struct peer_rt *p = find_rt(peer);
	struct reroutes *rr = arg;

	if (p)
		store_foreach_due(ternd.store, peer, now_us(), offer_due, p);
	else if (conf_peer_find(ternd_conf(), peer) == NULL && rr->n < REROUTE_MAX)
		store_foreach_due(ternd.store, peer, now_us(), reroute_due, rr);
	return relay.stopping;
}

/* reroute_write - route again the live recipients of a message whose peer
 * is no longer configured (removed by a reload): by [routes] now, keeping
 * their schedule and attempts; with no route, they wait min_backoff */
static int reroute_write(struct store_txn *txn, void *arg)
{
	const char *qid = arg;
	const struct conf *conf = ternd_conf();
	struct q_rcpt *rcpts = NULL;
	size_t n = 0;
	int rc;

	if ((rc = store_txn_get_rcpts(txn, qid, &rcpts, &n)) != 0) {
		q_rcpts_free(&rcpts, n);
		return rc == 1 ? 0 : rc;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct q_rcpt *r = &rcpts[i];
		char ea[TEXTESC_SIZE(SMTP_PATH_MAX)];
		const char *to;

		if ((r->state != RCPT_QUEUED && r->state != RCPT_DEFERRED)
		    || conf_peer_find(conf, r->peer) != NULL)
			continue;
		textesc(ea, sizeof(ea), r->addr, TEXTESC_ADDR);
		if ((to = conf_route(conf, r->addr)) != NULL) {
			log_info("%s: to=<%s>: peer %s is no longer configured: routed to %s", qid,
				 ea, r->peer, to);
			free(r->peer);
			r->peer = xstrdup(to);
		} else {
			log_warning("%s: to=<%s>: peer %s is no longer configured and no route "
				    "matches: it waits", qid, ea, r->peer);
			r->next_us = now_us() + (uint64_t)conf->ternd.min_backoff * 1000;
		}
		rc = store_put_rcpt(txn, qid, r);
	}
	q_rcpts_free(&rcpts, n);
	return rc;
}

static void notices_send(void);

/* sched_main - the scheduler loop: once a second, or when kicked */
static void *sched_main(void *arg)
{
	static struct reroutes rr;

	for (;;) {
		struct timespec t;

		rr.n = 0;
		store_foreach_sched_peer(ternd.store, sched_peer, &rr);
		for (size_t i = 0; i < rr.n && !relay.stopping; i++) {
			struct job job = {0};

			job.kind = JOB_WRITE;
			job.write = reroute_write;
			job.arg = rr.qids[i];
			if (commit_submit(&job) < 0)
				log_error("%s: cannot route it again: %s", rr.qids[i], job.err);
		}
		notices_send();
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
	int expired;			/* bounced by max_queue_lifetime */
	int bounced;			/* the write bounced the recipient */
};

/* The result of one attempt, as the committer applies it. */
struct result {
	char qid[QID_LEN + 1];
	struct outcome *out;
	size_t nout;
	uint64_t now;
	uint64_t wait_until;		/* RCPT_WAIT outcomes: next attempt */
	uint64_t start, connected, sending;	/* attempt begun, connection ready, MAIL sent */
	unsigned conn_use;		/* this transaction's number on its connection */
	const char *relay;		/* host[addr]:port, or "none" */
	const char *host;		/* the peer's host name (Remote-MTA), or NULL */
	uint8_t tls;			/* enum hist_tls */
	char peer_qid[SMTP_QUEUE_ID_MAX + 1];	/* from the peer's 250 to the content */
	const struct conf *conf;
	/* filled in by the write: what to do after the commit */
	struct queue_op_arg del;	/* the message left the queue */
	int removed;
	struct q_msg msg;		/* for logs and DSNs */
	struct q_rcpt *rcpts;
	size_t nrcpts;
	int was, after;			/* queue_state before and after */
	int noticed;			/* a notification waits in the queue database */
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

static int notice_put(struct store_txn *txn, struct result *res);

/* rcpt_of - the loaded recipient with index idx, or NULL (the records
 * come in index order, so it is usually at position idx) */
static struct q_rcpt *rcpt_of(const struct result *res, uint32_t idx)
{
	if (idx < res->nrcpts && res->rcpts[idx].idx == idx)
		return &res->rcpts[idx];
	for (size_t k = 0; k < res->nrcpts; k++)
		if (res->rcpts[k].idx == idx)
			return &res->rcpts[k];
	return NULL;
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
	res->noticed = 0;
	for (size_t i = 0; i < res->nout; i++)
		res->out[i].bounced = 0;
	if ((rc = store_txn_get_msg(txn, res->qid, &res->msg)) == 1)
		return 0;	/* deleted meanwhile */
	if (rc != 0)
		return rc;
	store_txn_get_rcpts(txn, res->qid, &res->rcpts, &res->nrcpts);
	res->was = queue_state(&res->msg, res->rcpts, res->nrcpts);
	expire = res->msg.arrival_us + (uint64_t)res->conf->ternd.max_queue_lifetime * 1000;
	for (size_t i = 0; i < res->nout; i++) {
		struct outcome *o = &res->out[i];
		struct q_rcpt *r = rcpt_of(res, o->idx);

		if (r == NULL || (r->state != RCPT_QUEUED && r->state != RCPT_DEFERRED))
			continue;
		if (o->state == RCPT_WAIT) {
			r->next_us = res->wait_until;
			free(r->reply);
			r->reply = xstrdup(o->reply);
			if ((rc = store_put_rcpt(txn, res->qid, r)) != 0)
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
					o->expired = 1;
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
		o->bounced = r->state == RCPT_BOUNCED;
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

/* notice_put - the non-delivery notification (DSN) for the recipients
 * this write bounced, kept in the queue database in the same transaction:
 * the scheduler queues it as a message (notices_send), so that neither a
 * crash nor a storage error between the two loses it */
static int notice_put(struct store_txn *txn, struct result *res)
{
	struct dsn_rcpt *dr;
	struct dsn_msg dm = {0};
	struct dsn_buf buf = {0};
	char id[STORE_NOTICE_ID_MAX + 1], *content = NULL;
	int flags, rc = 0, any = 0;
	size_t n = 0, clen = 0;
	off_t off;
	int fd;

	for (size_t i = 0; i < res->nout && !any; i++)
		any = res->out[i].bounced;
	if (!any || res->msg.sender[0] == '\0')
		return 0;	/* nothing bounced (every attempt comes here), or to <>: never */
	dr = xcalloc(res->nout, sizeof(*dr));
	for (size_t i = 0; i < res->nout; i++) {
		const struct outcome *o = &res->out[i];
		const struct q_rcpt *r = o->bounced ? rcpt_of(res, o->idx) : NULL;

		if (r == NULL || (r->notify && !(r->notify & NOTIFY_FAILURE)))
			continue;	/* not bounced now; NOTIFY=NEVER or without FAILURE */
		if (n == 0)	/* unique: a message's recipients bounce once each */
			snprintf(id, sizeof(id), "%s.%" PRIu64 ".%" PRIu32, res->msg.qid, res->now,
				 r->idx);
		dr[n].addr = r->addr;
		dr[n].orcpt = r->orcpt[0] ? r->orcpt : NULL;
		dr[n].status = o->esc[0] ? o->esc : "5.0.0";
		dr[n].remote_mta = res->host;
		dr[n].diagnostic = o->reply;
		dr[n].last_attempt = (time_t)(res->now / 1000000);
		n++;
	}
	if (n == 0) {
		free(dr);
		return 0;
	}
	/* the original, for the third part; its files go only after the commit */
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
	dm.reporting_mta = ternd.hostname;
	dm.unique_id = id;
	dm.now = (time_t)(res->now / 1000000);
	dm.qid = res->msg.qid;
	dm.sender = res->msg.sender;
	dm.envid = res->msg.envid[0] ? res->msg.envid : NULL;
	dm.arrival = (time_t)(res->msg.arrival_us / 1000000);
	dm.rcpt = dr;
	dm.nrcpt = n;
	dm.ret = (enum smtp_ret)res->msg.ret;
	dm.content = content;
	dm.content_len = clen;
	if ((flags = dsn_build(&dm, &buf)) < 0)
		log_error("%s: cannot build the delivery status notification", res->msg.qid);
	else if ((rc = store_put_notice(txn, id, res->msg.sender, (uint8_t)flags, buf.data,
					buf.len)) == 0)
		res->noticed = 1;
	dsn_buf_free(&buf);
	free(content);
	free(dr);
	return rc;
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

		if (o->state == RCPT_WAIT)
			continue;
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

		if (o->state == RCPT_WAIT)
			continue;
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

/* set_outcome - one recipient's outcome from a reply (or a failure text) */
static void set_outcome(struct outcome *o, uint32_t idx, int code, const char *esc, const char *text)
{
	o->idx = idx;
	o->state = code >= 200 && code < 300 ? RCPT_SENT : code >= 500 ? RCPT_BOUNCED : RCPT_DEFERRED;
	/* without an enhanced status code, the class's generic one (as Postfix) */
	snprintf(o->esc, sizeof(o->esc), "%s", esc && esc[0] ? esc
		 : o->state == RCPT_SENT ? "2.0.0" : o->state == RCPT_DEFERRED ? "4.0.0" : "5.0.0");
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
	if ((m->flags & QMSG_SMTPUTF8) && (c->ehlo.flags & SMTP_EXT_SMTPUTF8) && o < len)
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

/*
 * One message's attempt over a connection, from the write of its commands
 * to its final reply. With cross-transaction pipelining a delivery thread
 * has two open: the oldest waits for its final reply while the next one's
 * commands (and, with BDAT, its content) are already on the wire.
 */
struct attempt {
	struct peer_rt *home;		/* whose job it is: done() there */
	char qid[QID_LEN + 1];
	int loaded;
	struct q_msg m;
	struct q_rcpt *rcpts;
	size_t n;
	const struct q_rcpt **todo;	/* this peer's recipients due now */
	size_t ntodo;
	int *ok;			/* per todo: RCPT accepted */
	size_t accepted;
	int fd;				/* the spool body, once open */
	off_t off;
	int rset;			/* a pipelined RSET went before its MAIL */
	int dot;			/* DATA: the end of data is yet to be written */
	int body_sent;			/* a lost final reply may mean delivered */
	int clean;			/* ended in 2xx: no RSET needed */
	int behind;			/* written behind another attempt's final reply */
	int replied;			/* a reply of its own was read */
	uint64_t t0;			/* its commands were written: transmission began */
	struct result res;
	char relay_host[400];
};

/* not_ascii - s has an octet above 127 */
static int not_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s > 127)
			return 1;
	return 0;
}

/* needs_smtputf8 - the transaction cannot go without SMTPUTF8: the client
 * asked for it and the sender or a recipient is not ASCII (an ASCII
 * envelope goes to a peer without SMTPUTF8 as it is, as with Postfix) */
static int needs_smtputf8(const struct q_msg *m, const struct q_rcpt **rc, size_t n)
{
	if (!(m->flags & QMSG_SMTPUTF8))
		return 0;
	if (not_ascii(m->sender))
		return 1;
	for (size_t i = 0; i < n; i++)
		if (not_ascii(rc[i]->addr))
			return 1;
	return 0;
}

/* cmd_add - append a formatted command to buf (cap octets, len used);
 * -1, with nothing appended, if it does not fit */
static int cmd_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= cap - *len) {
		buf[*len] = '\0';
		return -1;
	}
	*len += (size_t)k;
	return 0;
}

/* tx_start - write a transaction's commands after lead (the previous
 * transaction's end of data, or a pipelined RSET), and with BDAT its
 * content; without PIPELINING, MAIL and each RCPT wait for their reply
 * here. 0 sent; 1 over (outcomes set); -1 connection lost */
static int tx_start(struct conn *c, struct attempt *a, const char *lead)
{
	const struct conf_peer *p = c->peer;
	const struct q_msg *m = &a->m;
	const struct q_rcpt **rc = a->todo;
	size_t n = a->ntodo;
	struct result *res = &a->res;
	int pipelined = (c->ehlo.flags & SMTP_EXT_PIPELINING) != 0;
	int bdat = (c->ehlo.flags & SMTP_EXT_CHUNKING) != 0;
	char *cmds, params[700];
	char text[SMTP_REPLY_FORMAT_MAX];
	size_t len = 0, cap, mail_len;
	struct smtp_reply r;
	int rv = -1, over = 0;

	res->nout = 0;
	/* What the peer said it would refuse is not sent: a bounce now, as
	 * Postfix does, rather than a transaction that must fail. */
	if (((c->ehlo.flags & SMTP_EXT_SIZE) && c->ehlo.size && m->size > c->ehlo.size)
	    || (!(c->ehlo.flags & SMTP_EXT_SMTPUTF8) && needs_smtputf8(m, rc, n))) {
		int toobig = (c->ehlo.flags & SMTP_EXT_SIZE) && c->ehlo.size && m->size > c->ehlo.size;

		if (toobig)
			snprintf(text, sizeof(text), "message size %" PRIu64 " exceeds size limit %llu "
				 "of server %s[%s]", m->size, c->ehlo.size, c->host, c->addr);
		else
			snprintf(text, sizeof(text), "SMTPUTF8 is required, but was not offered by "
				 "host %s[%s]", c->host, c->addr);
		for (size_t i = 0; i < n; i++)
			set_outcome(&res->out[res->nout++], rc[i]->idx, toobig ? 552 : 550,
				    toobig ? "5.3.4" : "5.6.7", text);
		a->clean = 1;	/* nothing was sent */
		return 1;
	}
	a->t0 = res->sending = now_us();
	/* counted when written, not when answered: with pipelining the next
	 * transaction starts before the previous one's final reply */
	res->conn_use = ++c->txns;
	metric_observe(stats.queue_delay, (double)(a->t0 - m->arrival_us) / 1e6, c->peer->name);
	metric_add(stats.transactions, 1, p->name, c->txns > 1 ? "yes" : "no");
	/* Before anything is written: a lead still goes with a later write. */
	if ((a->fd = spool_open_body(ternd.spool, m, &a->off)) < 0) {
		snprintf(text, sizeof(text), "cannot open the spool file: %s", strerror(errno));
		for (size_t i = 0; i < n; i++)
			set_outcome(&res->out[res->nout++], rc[i]->idx, 450, "4.3.0", text);
		a->clean = 1;	/* nothing was sent */
		return 1;
	}
	/* the buffer's size from what goes in it: params are cut to fit theirs */
	cap = strlen(lead) + sizeof("MAIL FROM:<>\r\n") + strlen(m->sender) + sizeof(params)
	      + sizeof("BDAT 18446744073709551615 LAST\r\n");
	for (size_t i = 0; i < n; i++)
		cap += sizeof("RCPT TO:<>\r\n") + strlen(rc[i]->addr) + sizeof(params);
	cmds = xmalloc(cap);
	over |= cmd_add(cmds, cap, &len, "%s", lead);
	mail_params(c, m, params, sizeof(params));
	over |= cmd_add(cmds, cap, &len, "MAIL FROM:<%s>%s\r\n", m->sender, params);
	mail_len = len;
	for (size_t i = 0; i < n; i++) {
		rcpt_params(c, rc[i], params, sizeof(params));
		over |= cmd_add(cmds, cap, &len, "RCPT TO:<%s>%s\r\n", rc[i]->addr, params);
	}
	over |= cmd_add(cmds, cap, &len, bdat ? "BDAT %" PRIu64 " LAST\r\n" : "DATA\r\n", m->size);
	if (over) {	/* never: cap counts all of it */
		for (size_t i = 0; i < n; i++)
			set_outcome(&res->out[res->nout++], rc[i]->idx, 451, "4.3.0",
				    "local error: SMTP commands longer than their buffer");
		a->clean = 1;	/* nothing was sent */
		rv = 1;
		goto out;
	}
	if (!pipelined && conn_write(c, cmds, mail_len, p->command_timeout) < 0)
		goto out;
	if (!pipelined) {
		/* one command, one reply: MAIL was sent above */
		rv = 1;
		if (conn_reply(c, &r, p->command_timeout) < 0) {
			rv = -1;
			goto out;
		}
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
			if (k < 0 || (size_t)k >= sizeof(one)) {	/* never: the record was checked */
				set_outcome(&res->out[res->nout++], rc[i]->idx, 451, "4.3.0",
					    "local error: RCPT command longer than its buffer");
				continue;
			}
			if (conn_write(c, one, (size_t)k, p->command_timeout) < 0
			    || conn_reply(c, &r, p->command_timeout) < 0) {
				rv = -1;
				goto out;
			}
			smtp_reply_format(&r, text, sizeof(text));
			if (r.code == 250 || r.code == 251)
				a->ok[i] = 1, a->accepted++;
			else
				set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
		}
		if (a->accepted == 0)
			goto out;
		rv = -1;
		len = 0;	/* fits: cap counts it */
		cmd_add(cmds, cap, &len, bdat ? "BDAT %" PRIu64 " LAST\r\n" : "DATA\r\n", m->size);
	}
	if (conn_write(c, cmds, len, p->command_timeout) < 0)
		goto out;
	/* BDAT content follows at once, whatever the RCPT replies say. */
	if (bdat && conn_send_body(c, a->fd, a->off, m->size, 0, p->data_timeout) < 0)
		goto out;
	a->body_sent = bdat;
	rv = 0;
out:
	free(cmds);
	return rv;
}

/* tx_replies - the replies before the final one: a pipelined RSET, MAIL
 * and RCPT, DATA's 354, then the DATA content without its end. 0 the
 * final reply is due; 1 over (outcomes set); -1 connection lost */
static int tx_replies(struct conn *c, struct attempt *a)
{
	const struct conf_peer *p = c->peer;
	const struct q_rcpt **rc = a->todo;
	size_t n = a->ntodo;
	struct result *res = &a->res;
	char text[SMTP_REPLY_FORMAT_MAX];
	struct smtp_reply r;

	if (a->rset) {
		if (conn_reply(c, &r, p->command_timeout) < 0)
			return -1;
		a->replied = 1;
		if (r.code != 250) {
			snprintf(c->why, sizeof(c->why), "host %s[%s] refused RSET (%d)", c->host,
				 c->addr, r.code);
			return -1;
		}
	}
	if (c->ehlo.flags & SMTP_EXT_PIPELINING) {
		if (conn_reply(c, &r, p->command_timeout) < 0)
			return -1;
		a->replied = 1;
		if (r.code != 250) {
			smtp_reply_format(&r, text, sizeof(text));
			for (size_t i = 0; i < n; i++)
				set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
		}
		for (size_t i = 0; i < n; i++) {
			if (conn_reply(c, &r, p->command_timeout) < 0)
				return -1;
			if (res->nout >= n)
				continue;	/* MAIL failed: already set */
			smtp_reply_format(&r, text, sizeof(text));
			if (r.code == 250 || r.code == 251)
				a->ok[i] = 1, a->accepted++;
			else
				set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
		}
	}
	if (c->ehlo.flags & SMTP_EXT_CHUNKING)
		return 0;
	if (conn_reply(c, &r, p->command_timeout) < 0)
		return -1;
	if (r.code != 354) {
		smtp_reply_format(&r, text, sizeof(text));
		for (size_t i = 0; i < n; i++)
			if (a->ok[i])
				set_outcome(&res->out[res->nout++], rc[i]->idx, r.code, r.esc, text);
		return 1;
	}
	/* every RCPT refused but DATA said 354: an empty message ends it */
	a->dot = 1;
	if (a->accepted == 0)
		return 0;
	if (conn_send_body(c, a->fd, a->off, a->m.size, (a->m.flags & QMSG_DOTLINES) != 0,
			   p->data_timeout) < 0)
		return -1;
	a->body_sent = 1;
	return 0;
}

/* tx_final - the end of data if not written yet, and the final reply:
 * each accepted recipient's outcome. 0 read; -1 connection lost */
static int tx_final(struct conn *c, struct attempt *a)
{
	const struct conf_peer *p = c->peer;
	char text[SMTP_REPLY_FORMAT_MAX];
	struct smtp_reply r;

	if (a->dot && conn_write(c, ".\r\n", 3, p->data_timeout) < 0)
		return -1;
	a->dot = 0;
	if (conn_reply(c, &r, p->data_timeout) < 0)
		return -1;
	smtp_reply_queue_id(&r, a->res.peer_qid, sizeof(a->res.peer_qid));
	smtp_reply_format(&r, text, sizeof(text));
	for (size_t i = 0; i < a->ntodo; i++)
		if (a->ok[i])
			set_outcome(&a->res.out[a->res.nout++], a->todo[i]->idx, r.code, r.esc, text);
	if (a->accepted > 0)
		c->messages++;
	a->clean = r.code >= 200 && r.code < 300 && a->accepted > 0;
	return 0;
}

/* tx_rset - a transaction that did not end in 2xx may still be open on
 * the server: RSET before the connection serves the next message */
static int tx_rset(struct conn *c, const struct attempt *a)
{
	struct smtp_reply r;

	if (a->clean)
		return 0;
	if (conn_write(c, "RSET\r\n", 6, c->peer->command_timeout) < 0
	    || conn_reply(c, &r, c->peer->command_timeout) < 0 || r.code != 250)
		return -1;	/* outcomes are set; the connection is not reusable */
	return 0;
}

/* tx_lost - the connection was lost: every recipient without an outcome
 * is deferred, with a warning when the content may have arrived */
static void tx_lost(const struct conn *c, struct attempt *a)
{
	char why[sizeof(c->why) + 64];

	/* The final reply was lost: it may have been delivered. */
	snprintf(why, sizeof(why), "%s%s", c->why,
		 a->body_sent ? " (the message may be delivered twice)" : "");
	for (size_t i = 0; i < a->ntodo; i++) {
		int set = 0;

		for (size_t k = 0; k < a->res.nout; k++)
			set |= a->res.out[k].idx == a->todo[i]->idx;
		if (!set)
			set_outcome(&a->res.out[a->res.nout++], a->todo[i]->idx, 450, "4.4.2", why);
	}
}

/* breaker_publish - the breaker's state to tern_breaker_state (under
 * lock); not for a peer a reload removed, whose gauge reads 0 */
static void breaker_publish(const struct peer_rt *rt)
{
	if (!rt->gone)
		metric_set(stats.breaker, rt->breaker, rt->name);
}

/* breaker_allow - may we connect to this peer now? A half-open breaker
 * lets exactly one probe through. */
static int breaker_allow(struct peer_rt *rt, uint64_t now)
{
	int ok;

	pthread_mutex_lock(&rt->lock);
	if (rt->breaker == BREAKER_OPEN && now >= rt->open_until) {
		rt->breaker = BREAKER_HALF_OPEN;
		breaker_publish(rt);
		log_info("peer %s: circuit breaker half-open: probing", rt->name);
		ok = 1;
	} else {
		ok = rt->breaker == BREAKER_CLOSED;
	}
	pthread_mutex_unlock(&rt->lock);
	return ok;
}

/* breaker_open - open the breaker (under lock); what says why */
static void breaker_open(struct peer_rt *rt, const struct conf_peer *p, const char *what)
{
	if (rt->cooldown_ms <= 0)
		rt->cooldown_ms = p->breaker_cooldown;
	rt->breaker = BREAKER_OPEN;
	breaker_publish(rt);
	rt->open_until = now_us() + (uint64_t)rt->cooldown_ms * 1000;
	rt->ring_len = 0;	/* after the cooldown, a fresh window */
	log_warning("peer %s: circuit breaker open for %llds %s%s%s", rt->name, rt->cooldown_ms / 1000,
		    what, rt->backup ? "; its mail goes to " : "; its mail waits",
		    rt->backup ? rt->backup->name : "");
	rt->cooldown_ms *= 2;
	if (rt->cooldown_ms > p->breaker_max_cooldown)
		rt->cooldown_ms = p->breaker_max_cooldown;
}

/* cmp_u32 - qsort order */
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* breaker_attempt - keep an attempt's outcome (ms: its transaction time,
 * UINT32_MAX when none); open the breaker when, over breaker_window and
 * at least BREAKER_MIN_ATTEMPTS attempts, too many failed or the P99
 * transaction time is over breaker_latency. Under lock. */
static void breaker_attempt(struct peer_rt *rt, const struct conf_peer *p, int failed, uint32_t ms)
{
	uint64_t now = now_us(), since = now - (uint64_t)p->breaker_window * 1000;
	uint32_t times[BREAKER_RING];
	size_t n = 0, nfail = 0, ntimes = 0;
	char what[200];

	rt->ring[rt->ring_next] = (struct breaker_sample){now, ms, failed};
	rt->ring_next = (rt->ring_next + 1) % BREAKER_RING;
	if (rt->ring_len < BREAKER_RING)
		rt->ring_len++;
	if (rt->breaker != BREAKER_CLOSED || (p->breaker_error_rate <= 0 && p->breaker_latency <= 0))
		return;
	for (size_t k = 1; k <= rt->ring_len; k++) {
		const struct breaker_sample *a = &rt->ring[(rt->ring_next + BREAKER_RING - k) % BREAKER_RING];

		if (a->at < since)
			break;	/* older ones are older still */
		n++;
		nfail += a->failed != 0;
		if (a->ms != UINT32_MAX)
			times[ntimes++] = a->ms;
	}
	if (n < BREAKER_MIN_ATTEMPTS)
		return;
	if (p->breaker_error_rate > 0 && (double)nfail > p->breaker_error_rate * (double)n) {
		snprintf(what, sizeof(what), "after %zu of %zu attempts in %llds failed temporarily "
			 "(breaker_error_rate %g)", nfail, n, p->breaker_window / 1000, p->breaker_error_rate);
		breaker_open(rt, p, what);
	} else if (p->breaker_latency > 0 && ntimes >= BREAKER_MIN_ATTEMPTS) {
		uint32_t p99;

		qsort(times, ntimes, sizeof(times[0]), cmp_u32);
		p99 = times[(ntimes * 99 + 99) / 100 - 1];
		if ((long long)p99 > p->breaker_latency) {
			snprintf(what, sizeof(what), "after a P99 transaction time of %" PRIu32 "ms over %zu "
				 "transactions in %llds (breaker_latency %lldms)", p99, ntimes,
				 p->breaker_window / 1000, p->breaker_latency);
			breaker_open(rt, p, what);
		}
	}
}

/* breaker_result - count a connection's success or failure */
static void breaker_result(struct peer_rt *rt, const struct conf_peer *p, int ok, const char *why)
{
	char what[700];

	pthread_mutex_lock(&rt->lock);
	if (ok) {
		if (rt->breaker != BREAKER_CLOSED)
			log_info("peer %s: circuit breaker closed", rt->name);
		rt->breaker = BREAKER_CLOSED;
		breaker_publish(rt);
		rt->failures = 0;
		rt->cooldown_ms = p->breaker_cooldown;
	} else if (++rt->failures >= p->breaker_failures || rt->breaker == BREAKER_HALF_OPEN) {
		snprintf(what, sizeof(what), "after %d failure%s (%s)", rt->failures,
			 rt->failures == 1 ? "" : "s", why);
		breaker_open(rt, p, what);
	} else {
		breaker_attempt(rt, p, 1, UINT32_MAX);
	}
	pthread_mutex_unlock(&rt->lock);
}

/* bucket_take - under rt->lock: take a token from the bucket, refilled
 * smoothly with one token per interval_us and holding at most burst; 0
 * when taken (or no limit), else the microseconds until one is there */
static uint64_t bucket_take(struct bucket *b, long long interval_us, double burst)
{
	uint64_t now = now_us();

	if (interval_us <= 0)
		return 0;
	if (b->refilled == 0) {
		b->tokens = burst;
		b->refilled = now;
	}
	b->tokens += (double)(now - b->refilled) / (double)interval_us;
	if (b->tokens > burst)
		b->tokens = burst;
	b->refilled = now;
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
		return 0;
	}
	return (uint64_t)((1.0 - b->tokens) * (double)interval_us) + 1;
}

/* bucket_wait - block until the bucket gives a token. What is over the
 * limit just waits here: no deferral, no retry penalty. */
static void bucket_wait(struct peer_rt *rt, struct bucket *b, long long interval_us, double burst)
{
	for (;;) {
		uint64_t wait_us;

		pthread_mutex_lock(&rt->lock);
		wait_us = bucket_take(b, interval_us, burst);
		pthread_mutex_unlock(&rt->lock);
		if (wait_us == 0 || relay.stopping)
			return;
		usleep(wait_us < 1000000 ? (useconds_t)wait_us + 100 : 1000000);
	}
}

/* rate_burst - the peer's max_message_rate bucket size */
static double rate_burst(const struct conf_peer *p)
{
	return p->rate_burst > 0 ? (double)p->rate_burst : 1.0;
}

/* rate_wait - one message within the peer's max_message_rate */
static void rate_wait(struct peer_rt *rt, const struct conf_peer *p)
{
	bucket_wait(rt, &rt->messages, p->max_message_rate, rate_burst(p));
}

/* peer_connect - a new connection, within the peer's max_connection_rate */
static int peer_connect(struct peer_rt *rt, const struct conf_peer *p, struct conn *c)
{
	SSL_CTX *ctx;

	bucket_wait(rt, &rt->connections, p->max_connection_rate, 1.0);
	pthread_mutex_lock(&rt->lock);
	ctx = rt->tls;
	c->gen = rt->gen;
	pthread_mutex_unlock(&rt->lock);
	return conn_open(c, p, ctx, p->helo_name[0] ? p->helo_name : ternd.hostname);
}

/* hold_damaged - hold, through the committer, a message a record of
 * which fails validation: never sent. Logged by the hold that parks it,
 * so once: the scheduler does not offer it again */
static void hold_damaged(const char *qid)
{
	struct queue_op_arg a;
	struct job job;

	memset(&a, 0, sizeof(a));
	a.op = QOP_HOLD;
	memcpy(a.qid, qid, QID_LEN + 1);
	a.now_us = now_us();
	a.current_seg = spool_segment_id(ternd.spool);
	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = queue_op_write;
	job.arg = &a;
	if (commit_submit(&job) < 0) {
		log_error("%s: a queue record fails validation; holding the message failed: %s",
			  qid, job.err);
		return;
	}
	if (!a.found || a.changed == 0)
		return;
	stats_queue(a.was, a.now);
	log_error("%s: a queue record fails validation (a field too long, a control character, "
		  "or counts that disagree): message held, not relayed", qid);
}

/* attempt_load - a job's message and this peer's recipients due now;
 * 0 when there is nothing to send (then attempt_free) */
static int attempt_load(struct attempt *a, struct peer_rt *home, const struct conf_peer *p,
			const char *qid)
{
	uint64_t now = now_us();
	int rc = 0;

	memset(a, 0, sizeof(*a));
	a->home = home;
	a->fd = -1;
	memcpy(a->qid, qid, QID_LEN + 1);
	if (p == NULL || (rc = store_get(ternd.store, qid, &a->m, &a->rcpts, &a->n)) != 0) {
		if (rc == STORE_DAMAGED)
			hold_damaged(qid);
		return 0;
	}
	a->loaded = 1;
	if (a->m.flags & QMSG_HOLD)
		return 0;
	a->todo = xcalloc(a->n ? a->n : 1, sizeof(*a->todo));
	for (size_t i = 0; i < a->n && a->ntodo < (size_t)p->max_rcpts_per_transaction; i++)
		if ((a->rcpts[i].state == RCPT_QUEUED || a->rcpts[i].state == RCPT_DEFERRED)
		    && a->rcpts[i].next_us <= now && strcmp(a->rcpts[i].peer, home->name) == 0)
			a->todo[a->ntodo++] = &a->rcpts[i];
	if (a->ntodo == 0)
		return 0;
	memcpy(a->res.qid, qid, QID_LEN + 1);
	a->res.start = now;
	a->res.out = xcalloc(a->ntodo, sizeof(*a->res.out));
	a->ok = xcalloc(a->ntodo, sizeof(*a->ok));
	return 1;
}

/* attempt_free - the attempt is over: the message may be offered again */
static void attempt_free(struct attempt *a)
{
	if (a->fd >= 0)
		close(a->fd);
	free(a->res.out);
	q_msg_clear(&a->res.msg);
	q_rcpts_free(&a->res.rcpts, a->res.nrcpts);
	free(a->ok);
	free(a->todo);
	if (a->loaded) {
		q_rcpts_free(&a->rcpts, a->n);
		q_msg_clear(&a->m);
	}
	if (a->home)
		done(a->home, a->qid);
}

/* attempt_requeue - none of the attempt's replies was read before the
 * connection died: its job goes back to the front of the peer's queue,
 * still busy, to be sent again at once on a new connection */
static void attempt_requeue(struct attempt *a)
{
	struct peer_rt *rt = a->home;
	char qid[QID_LEN + 1];

	memcpy(qid, a->qid, QID_LEN + 1);
	if (relay.stopping) {
		attempt_free(a);	/* it stays queued for the next start */
		return;
	}
	a->home = NULL;
	attempt_free(a);
	log_info("%s: connection lost before its replies: sent again", qid);
	pthread_mutex_lock(&rt->lock);
	rt->head = (rt->head + RELAY_PEER_JOBS - 1) % RELAY_PEER_JOBS;
	memcpy(rt->jobs[rt->head], qid, QID_LEN + 1);
	rt->count++;
	pthread_cond_signal(&rt->ready);
	pthread_mutex_unlock(&rt->lock);
}

/* record - hand an attempt's outcomes to the committer, then log them,
 * count them, bounce and clean up; rt is the peer it went to */
static void record(struct attempt *a, struct peer_rt *rt, const struct conn *c,
		   const struct conf *conf)
{
	struct result *res = &a->res;
	struct job job;

	res->now = now_us();
	res->conf = conf;
	res->relay = a->relay_host[0] ? a->relay_host : "none";
	res->host = c->host[0] ? c->host : NULL;
	if ((c->fd >= 0 || c->why[0] == '\0') && c->ssl)
		res->tls = c->tls_resumed ? HIST_TLS_RESUMED : HIST_TLS_FULL;
	if (a->t0) {
		/* a transaction: its time and outcome count for the breaker */
		uint64_t ms = (res->now - a->t0) / 1000;
		int failed = 0;

		for (size_t i = 0; i < res->nout; i++)
			failed |= res->out[i].state == RCPT_DEFERRED;
		metric_observe(stats.transmission, (double)(res->now - a->t0) / 1e6, rt->name);
		pthread_mutex_lock(&rt->lock);
		breaker_attempt(rt, c->peer, failed, ms < UINT32_MAX ? (uint32_t)ms : UINT32_MAX - 1);
		pthread_mutex_unlock(&rt->lock);
	}
	/* apply_result loads the current records into res.msg and res.rcpts */
	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = apply_result;
	job.arg = res;
	if (commit_submit(&job) < 0) {
		log_error("%s: cannot record the delivery attempt: %s", a->qid, job.err);
	} else if (res->msg.sender == NULL) {
		log_info("%s: removed from the queue during the delivery attempt", a->qid);
	} else {
		log_outcomes(res);
		if (spanfile_enabled())
			emit_spans(res);
		for (size_t i = 0; i < res->nout; i++)
			stats_delivery(rt->name, res->out[i].state, res->out[i].esc);
		stats_queue(res->was, res->after);
		if (res->noticed)
			relay_kick();	/* the scheduler queues the notification */
		if (res->removed) {
			queue_op_cleanup(ternd.spool, &res->del);
			ternd.queued--;
			log_info("%s: removed", a->qid);
		}
	}
}

/* next_attempt - the peer's next job, if one is waiting, the breaker is
 * closed, the rate allows it and the connection may carry one more
 * message after those in flight; never waits. 1 loaded into a */
static int next_attempt(struct peer_rt *rt, const struct conf_peer *p, const struct conn *c,
			struct attempt *a)
{
	if (!(c->ehlo.flags & SMTP_EXT_PIPELINING) || c->fd < 0 || relay.stopping
	    || (p->max_messages_per_connection
		&& c->messages + 1 >= (unsigned)p->max_messages_per_connection))
		return 0;
	for (;;) {
		char qid[QID_LEN + 1];
		int got = 0;

		pthread_mutex_lock(&rt->lock);
		if (rt->count > 0 && rt->breaker == BREAKER_CLOSED
		    && bucket_take(&rt->messages, p->max_message_rate, rate_burst(p)) == 0) {
			memcpy(qid, rt->jobs[rt->head], QID_LEN + 1);
			rt->head = (rt->head + 1) % RELAY_PEER_JOBS;
			rt->count--;
			got = 1;
		}
		pthread_mutex_unlock(&rt->lock);
		if (!got)
			return 0;
		if (attempt_load(a, rt, p, qid)) {
			a->res.connected = a->res.start;	/* no connection of its own to wait for */
			return 1;
		}
		attempt_free(a);	/* held, or nothing due: the token is spent */
	}
}

/*
 * deliver - attempts for one job of a peer and, over a PIPELINING
 * connection, for the jobs waiting behind it (RFC 2920 section 3.1): the
 * next transaction is written before the previous final reply is read,
 * with DATA together with the previous end of data (its content waits for
 * 354), with BDAT at once after the previous content. Replies are counted
 * in order; each attempt goes to the committer as soon as its final reply
 * is read. After a failed BDAT the transaction may still be open on the
 * server (RFC 3030), so a BDAT transaction written behind another starts
 * with RSET: one more reply in the same read, no round trip. After the
 * final reply to the end of data the transaction is over (RFC 5321
 * 4.1.1.4), so DATA needs no RSET there.
 *
 * When the connection is lost before the previous final reply was read,
 * that attempt is deferred as any lost one (may be delivered twice). An
 * attempt written behind it none of whose replies was read goes back to
 * the front of the peer's queue, to be sent again at once on a new
 * connection rather than deferred: nothing of it can have been accepted
 * with DATA (its content waits for 354), and with BDAT a retry later would
 * risk the same duplicate as one now. The loss was not its own, so it
 * costs no attempt and no backoff; a failure of the new connection counts
 * as usual.
 */
static void deliver(struct peer_rt *rt, struct conn *c, struct conn *cb, const char *qid)
{
	const struct conf *conf = ternd_conf();
	const struct conf_peer *p = conf_peer_find(conf, rt->name);
	struct attempt at[2], *a = &at[0], *b = &at[1];
	struct peer_rt *home = rt;
	int rc, next = 0;

	if (!attempt_load(a, rt, p, qid)) {
		attempt_free(a);
		return;
	}
	if (!breaker_allow(rt, now_us())) {
		const struct conf_peer *bp = rt->backup ? conf_peer_find(conf, rt->backup->name) : NULL;

		if (bp == NULL || !breaker_allow(rt->backup, now_us())) {
			/* The mail waits, without an attempt counted against it. */
			for (size_t i = 0; i < a->ntodo; i++) {
				struct outcome *o = &a->res.out[a->res.nout++];

				o->idx = a->todo[i]->idx;
				o->state = RCPT_WAIT;
				snprintf(o->reply, sizeof(o->reply), "circuit breaker of peer %s is open",
					 rt->name);
			}
			a->res.wait_until = rt->open_until;
			record(a, rt, c, conf);
			attempt_free(a);
			return;
		}
		rt = rt->backup;	/* this attempt goes to the backup peer */
		p = bp;
		c = cb;
	}
	if (c->fd >= 0 && !conn_alive(c))
		conn_close(c, 0);	/* closed by the peer while idle: open anew */
	if (c->fd < 0 && peer_connect(rt, p, c) < 0) {
		breaker_result(rt, p, 0, c->why);
		a->res.connected = now_us();
		for (size_t i = 0; i < a->ntodo; i++)
			set_outcome(&a->res.out[a->res.nout++], a->todo[i]->idx, c->temporary ? 450 : 550,
				    c->temporary ? (c->esc[0] ? c->esc : "4.4.1") : "5.4.1", c->why);
		snprintf(a->relay_host, sizeof(a->relay_host), "none");
		record(a, rt, c, conf);
		attempt_free(a);
		return;
	}
	a->res.connected = now_us();
	breaker_result(rt, p, 1, NULL);
	rate_wait(rt, p);
	conn_busy(c, 1);
	snprintf(a->relay_host, sizeof(a->relay_host), "%s[%s]:%d", c->host, c->addr, c->port);
	rc = tx_start(c, a, "");
	for (;;) {
		/* a: written; with next, b is written behind it */
		int bdat = (c->ehlo.flags & SMTP_EXT_CHUNKING) != 0;

		if (rc == 0 && !next && bdat && rt == home && next_attempt(home, p, c, b)) {
			snprintf(b->relay_host, sizeof(b->relay_host), "%s", a->relay_host);
			b->rset = b->behind = 1;
			next = 1;
			if ((rc = tx_start(c, b, "RSET\r\n")) == 1)
				record(b, rt, c, conf), attempt_free(b), next = 0, rc = 0;
		}
		if (rc == 0)
			rc = tx_replies(c, a);
		if (rc < 0 && a->behind && !a->replied) {
			/* none of a's replies came: as if lost before them */
			conn_busy(c, 0);
			conn_close(c, 0);
			if (next)
				attempt_requeue(b);
			attempt_requeue(a);
			return;
		}
		if (rc == 0 && !next && !bdat && rt == home && next_attempt(home, p, c, b)) {
			snprintf(b->relay_host, sizeof(b->relay_host), "%s", a->relay_host);
			b->behind = 1;
			next = 1;
			if ((rc = tx_start(c, b, a->dot ? ".\r\n" : "")) == 1)
				record(b, rt, c, conf), attempt_free(b), next = 0, rc = 0;
			else if (rc == 0)
				a->dot = 0;	/* it went with b's commands */
		}
		if (rc == 0)
			rc = tx_final(c, a);
		if (rc < 0) {
			tx_lost(c, a);
			conn_close(c, 0);
		} else if (!next && tx_rset(c, a) < 0) {
			conn_close(c, 0);
		}
		record(a, rt, c, conf);
		attempt_free(a);
		if (!next) {
			conn_busy(c, 0);
			if (c->fd >= 0 && p->max_messages_per_connection
			    && c->messages >= (unsigned)p->max_messages_per_connection)
				conn_close(c, 1);
			return;
		}
		*a = *b;
		next = 0;
		if (c->fd < 0) {
			conn_busy(c, 0);
			attempt_requeue(a);
			return;
		}
		rc = 0;
	}
}

/* One delivery thread and its connection. */
struct worker_arg {
	struct peer_rt *rt;
	int index;			/* its slot: below min_idle, kept warm */
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
	uint64_t last_used = now_us(), last_try = 0;

	for (;;) {
		/* the current settings: a reload may change them */
		const struct conf_peer *p = conf_peer_find(ternd_conf(), rt->name);
		char qid[QID_LEN + 1];
		struct timespec t;
		int idle = 0, warm;

		if (p == NULL || rt->gone || wa->index >= max_connections(p))
			break;	/* removed, or fewer connections: this one goes */
		warm = wa->index < p->min_idle;
		if (c.fd >= 0 && c.gen != rt->gen)
			conn_close(&c, 1);	/* its settings changed: reopen when needed */
		if (cb.fd >= 0 && (rt->backup == NULL || cb.gen != rt->backup->gen))
			conn_close(&cb, 1);
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
			if (warm && c.fd < 0 && now - last_try > (uint64_t)p->connect_timeout * 1000) {
				/* min_idle: keep a connection ready, EHLO and TLS done */
				last_try = now;
				if (peer_connect(rt, p, &c) == 0)
					last_used = now;
			} else if (c.fd >= 0 && !warm && now - last_used > (uint64_t)p->idle_timeout * 1000) {
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
		deliver(rt, &c, &cb, qid);	/* done() for each job */
		last_used = now_us();
	}
	conn_close(&c, 1);
	conn_close(&cb, 1);
	smtp_reply_free(&c.parser);
	smtp_reply_free(&cb.parser);
	pthread_mutex_lock(&rt->lock);
	rt->alive[wa->index] = 2;	/* to be joined */
	pthread_mutex_unlock(&rt->lock);
	free(wa);
	return NULL;
}

/* The key that seals TLS sessions in the queue database. */
static struct trace_key *session_key;

/*
 * A sealed session: a version octet, a random nonce, then the session
 * (DER) encrypted with XChaCha20-Poly1305 (AEAD) under key_file, with
 * the context's binding (peer, host, port, TLS policy, server name and
 * the CA file's digest, conn_tls_binding) as associated data. A session
 * moved under another peer's store key, or kept from before a change of
 * tls_ca_file, does not open and is discarded. Version 1 was
 * crypto_secretbox with nothing bound: discarded at upgrade.
 */
#define SEAL_VERSION 2
#define SEAL_HEAD (1 + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
#define SEAL_OVER (SEAL_HEAD + crypto_aead_xchacha20poly1305_ietf_ABYTES)

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

/* save_session - seal a new TLS session, bound to bind, and keep it
 * under key (conn_tls_save_fn) */
static void save_session(const char *key, const char *bind, const unsigned char *der, int len)
{
	struct tls_put tp = {key, NULL, SEAL_OVER + (size_t)len};
	struct job job;

	if (session_key == NULL)
		return;
	tp.blob = xmalloc(tp.len);
	tp.blob[0] = SEAL_VERSION;
	randombytes_buf(tp.blob + 1, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
	crypto_aead_xchacha20poly1305_ietf_encrypt(tp.blob + SEAL_HEAD, NULL, der, (size_t)len,
						   (const unsigned char *)bind, strlen(bind), NULL,
						   tp.blob + 1, session_key->bytes);
	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = put_tls;
	job.arg = &tp;
	if (commit_submit(&job) < 0)
		log_warning("cannot keep a TLS session: %s", job.err);
	free(tp.blob);
}

/* load_session - a kept session for this context, unsealed, offered
 * first; one that is not bound to the context is discarded */
static void load_session(SSL_CTX *ctx)
{
	unsigned char blob[70000], der[70000];
	const char *key = conn_tls_key(ctx), *bind = conn_tls_binding(ctx);
	size_t n = store_get_tls(ternd.store, key, blob, sizeof(blob));
	unsigned long long dlen;

	if (session_key == NULL || n == 0)
		return;
	if (n < SEAL_OVER || blob[0] != SEAL_VERSION) {
		log_debug("TLS session kept under %s: of an older format: discarded, a full handshake "
			  "follows", key);
		return;
	}
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(der, &dlen, NULL, blob + SEAL_HEAD,
						       n - SEAL_HEAD, (const unsigned char *)bind,
						       strlen(bind), blob + 1, session_key->bytes) != 0) {
		log_debug("TLS session kept under %s: not sealed for %s (moved, or made under other "
			  "settings or another key_file): discarded, a full handshake follows", key, bind);
		return;
	}
	conn_tls_preload(ctx, der, (int)dlen);
	sodium_memzero(der, (size_t)dlen);
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

/* max_connections - a peer's delivery threads */
static int max_connections(const struct conf_peer *p)
{
	return p->max_connections > 0 ? (int)p->max_connections : 1;
}

/* peer_settings - what a peer's connections are made from: a reload that
 * changes any of it replaces the TLS context and reopens connections */
static char *peer_settings(const struct conf_peer *p)
{
	return xasprintf("%s|%lld|%d|%d|%d|%s|%s|%s|%s|%s|%s|%s", p->host, p->port, (int)p->tls,
			 p->tls_wrapper, (int)p->tls_min_version, p->tls_ca_file, p->tls_servername,
			 p->helo_name, p->auth_user, p->auth_password_file, p->tls_cert_file,
			 p->tls_key_file);
}

/* peer_new - a relayed peer's runtime state and TLS context; NULL with
 * err when the context cannot be made */
static struct peer_rt *peer_new(const struct conf_peer *p, char *err, size_t errlen)
{
	struct peer_rt *rt = xcalloc(1, sizeof(*rt));

	err[0] = '\0';
	if ((rt->tls = conn_tls_context(p, save_session, err, errlen)) == NULL && err[0]) {
		free(rt);
		return NULL;
	}
	rt->name = xstrdup(p->name);
	rt->settings = peer_settings(p);
	rt->cooldown_ms = p->breaker_cooldown;
	pthread_mutex_init(&rt->lock, NULL);
	pthread_cond_init(&rt->ready, NULL);
	rt->jobs = xcalloc(RELAY_PEER_JOBS, sizeof(*rt->jobs));
	rt->busy = xcalloc(BUSY_SLOTS, sizeof(*rt->busy));
	return rt;
}

/* peer_add - make a peer known to the scheduler */
static void peer_add(struct peer_rt *rt)
{
	pthread_rwlock_wrlock(&relay.peers_lock);
	relay.peers = xreallocarray(relay.peers, relay.npeers + 1, sizeof(*relay.peers));
	relay.peers[relay.npeers++] = rt;
	pthread_rwlock_unlock(&relay.peers_lock);
}

/* peer_threads - start the delivery threads the peer's max_connections
 * asks for and that do not run (at start, or more after a reload) */
static void peer_threads(struct peer_rt *rt, const struct conf_peer *p)
{
	int want = max_connections(p);

	pthread_mutex_lock(&rt->lock);
	if (want > rt->nthreads) {
		rt->threads = xreallocarray(rt->threads, (size_t)want, sizeof(*rt->threads));
		rt->alive = xreallocarray(rt->alive, (size_t)want, sizeof(*rt->alive));
		for (int k = rt->nthreads; k < want; k++)
			rt->alive[k] = 0;
		rt->nthreads = want;
	}
	for (int k = 0; k < want; k++) {
		struct worker_arg *wa;

		if (rt->alive[k] == 1)
			continue;
		if (rt->alive[k] == 2)
			pthread_join(rt->threads[k], NULL);	/* ended after an earlier reload */
		wa = xcalloc(1, sizeof(*wa));
		wa->rt = rt;
		wa->index = k;
		rt->alive[k] = 1;
		if (pthread_create(&rt->threads[k], NULL, worker, wa) != 0)
			log_fatal("cannot start a delivery thread");
	}
	pthread_mutex_unlock(&rt->lock);
}

/* peer_backups - point each peer at its backup_peer */
static void peer_backups(const struct conf *conf)
{
	pthread_rwlock_rdlock(&relay.peers_lock);
	for (size_t i = 0; i < relay.npeers; i++) {
		struct peer_rt *rt = relay.peers[i];
		const struct conf_peer *p = conf_peer_find(conf, rt->name);
		struct peer_rt *b = NULL;

		if (rt->gone || p == NULL)
			continue;
		for (size_t k = 0; p->backup_peer[0] && k < relay.npeers && b == NULL; k++)
			if (!relay.peers[k]->gone && strcmp(relay.peers[k]->name, p->backup_peer) == 0)
				b = relay.peers[k];
		if (p->backup_peer[0] && b == NULL)
			log_warning("peer %s: backup_peer %s is not a relayed peer: ignored", p->name,
				    p->backup_peer);
		rt->backup = b;
	}
	pthread_rwlock_unlock(&relay.peers_lock);
}

/* peer_log_start - the line that says a peer is being relayed to */
static void peer_log_start(const struct conf_peer *p)
{
	int n = max_connections(p);

	log_info("peer %s: relaying to %s port %lld, tls %s, %d connection%s", p->name, p->host,
		 p->port, conf_tls_name(p->tls), n, n == 1 ? "" : "s");
}

/* relay_prepare - as root, before the privilege drop: each relayed
 * peer's TLS context, with its client certificate and AUTH password */
void relay_prepare(void)
{
	const struct conf *conf = ternd_conf();
	char err[1024];

	for (size_t i = 0; i < conf->npeers; i++) {
		const struct conf_peer *p = &conf->peers[i];
		struct peer_rt *rt;

		if (p->host[0] == '\0') {
			log_info("peer %s has no host: its mail stays queued", p->name);
			continue;
		}
		if ((rt = peer_new(p, err, sizeof(err))) == NULL)
			log_fatal("%s", err);
		peer_add(rt);
	}
}

/* relay_start - start the scheduler and each relayed peer's threads */
void relay_start(void)
{
	const struct conf *conf = ternd_conf();

	for (size_t i = 0; i < relay.npeers; i++) {
		struct peer_rt *rt = relay.peers[i];
		const struct conf_peer *p = conf_peer_find(conf, rt->name);

		if (rt->tls) {
			if (session_key == NULL)
				open_session_key(conf);
			load_session(rt->tls);
		}
		peer_threads(rt, p);
		peer_log_start(p);
	}
	peer_backups(conf);
	if (pthread_create(&relay.sched, NULL, sched_main, NULL) != 0)
		log_fatal("cannot start the scheduler");
}

/*
 * relay_reload - SIGHUP, after the new configuration is in place: a peer
 * whose connection settings (host, port, TLS, AUTH, HELO) are unchanged
 * keeps its connections, warm ones included; a changed one gets a new TLS
 * context and its connections are reopened as they come free; a new peer
 * starts; a removed one stops, and the scheduler routes its mail again by
 * the new [routes]. Files (CA, certificate, key, password) are read as the
 * tern user here: one it cannot read keeps that peer's old settings.
 */
void relay_reload(const struct conf *conf)
{
	char err[1024];

	pthread_rwlock_rdlock(&relay.peers_lock);
	for (size_t i = 0; i < relay.npeers; i++) {
		struct peer_rt *rt = relay.peers[i];
		const struct conf_peer *p = conf_peer_find(conf, rt->name);

		if (rt->gone || (p != NULL && p->host[0]))
			continue;
		log_info("peer %s: removed from the configuration: its connections close, its "
			 "mail is routed again", rt->name);
		pthread_mutex_lock(&rt->lock);
		rt->gone = 1;
		rt->count = 0;	/* the jobs stay in LMDB */
		metric_set(stats.breaker, 0, rt->name);	/* no alert for a peer that is gone */
		pthread_cond_broadcast(&rt->ready);
		pthread_mutex_unlock(&rt->lock);
	}
	pthread_rwlock_unlock(&relay.peers_lock);
	for (size_t i = 0; i < conf->npeers; i++) {
		const struct conf_peer *p = &conf->peers[i];
		struct peer_rt *rt = find_rt(p->name);
		char *settings;

		if (p->host[0] == '\0')
			continue;
		if (rt == NULL) {
			if ((rt = peer_new(p, err, sizeof(err))) == NULL) {
				log_error("peer %s: not added: %s", p->name, err);
				continue;
			}
			stats_peer(p->name);	/* before its threads update them */
			if (rt->tls) {
				if (session_key == NULL)
					open_session_key(conf);
				load_session(rt->tls);
			}
			peer_add(rt);
			peer_threads(rt, p);
			peer_log_start(p);
			continue;
		}
		settings = peer_settings(p);
		if (strcmp(settings, rt->settings) != 0) {
			SSL_CTX *ctx = NULL;

			err[0] = '\0';
			if (p->tls != TLS_NONE
			    && (ctx = conn_tls_context(p, save_session, err, sizeof(err))) == NULL && err[0]) {
				log_error("peer %s: keeping its old connection settings: %s", p->name, err);
				free(settings);
				continue;
			}
			pthread_mutex_lock(&rt->lock);
			if (rt->tls) {
				rt->retired = xreallocarray(rt->retired, rt->nretired + 1,
							    sizeof(*rt->retired));
				rt->retired[rt->nretired++] = rt->tls;
			}
			rt->tls = ctx;
			rt->gen++;
			free(rt->settings);
			rt->settings = settings;
			settings = NULL;
			pthread_mutex_unlock(&rt->lock);
			log_info("peer %s: connection settings changed: its connections are reopened",
				 p->name);
			peer_log_start(p);
		}
		free(settings);
		peer_threads(rt, p);	/* more, if max_connections grew */
	}
	peer_backups(conf);
	relay_kick();
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
		struct peer_rt *rt = relay.peers[i];

		pthread_mutex_lock(&rt->lock);
		rt->count = 0;	/* queued jobs stay in LMDB for next time */
		pthread_cond_broadcast(&rt->ready);
		pthread_mutex_unlock(&rt->lock);
		for (int k = 0; k < rt->nthreads; k++)
			if (rt->alive[k])
				pthread_join(rt->threads[k], NULL);
		SSL_CTX_free(rt->tls);
		for (size_t k = 0; k < rt->nretired; k++)
			SSL_CTX_free(rt->retired[k]);
		free(rt->retired);
		free(rt->threads);
		free(rt->alive);
		free(rt->jobs);
		free(rt->busy);
		free(rt->settings);
		free(rt->name);
		free(rt);
	}
	free(relay.peers);
	relay.peers = NULL;
	relay.npeers = 0;
	trace_key_free(&session_key);
}

/* notice_done - the notification is queued: forget it, in the same
 * transaction as its message's records */
static int notice_done(struct store_txn *txn, void *arg)
{
	return store_del_notice(txn, arg);
}

/* enqueue_notice - queue a notification from <> to rcpt, routed like any
 * mail, and forget it as a notice in the same transaction; 0, 1 when
 * no route matches rcpt, -1 on a storage error */
static int enqueue_notice(const struct conf *conf, const char *id, const char *rcpt,
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

		log_warning("%.*s: no route for the notification to <%s>: not sent", QID_LEN, id,
			    textesc(ea, sizeof(ea), rcpt, TEXTESC_ADDR));
		return 1;
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

/* forget_notice - a notification that cannot be sent: drop it */
static void forget_notice(const char *id)
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
static void notices_send(void)
{
	static uint64_t not_before;
	const struct conf *conf = ternd_conf();
	struct notice_ids ids;

	if (now_us() < not_before)
		return;
	ids.n = 0;
	store_foreach_notice(ternd.store, notice_id, &ids);
	for (size_t i = 0; i < ids.n && !relay.stopping; i++) {
		char *rcpt = NULL, *body = NULL, dqid[QID_LEN + 1];
		uint8_t flags = 0;
		size_t len = 0;
		int rc = store_get_notice(ternd.store, ids.id[i], &rcpt, &flags, &body, &len);

		if (rc == 1)
			continue;	/* queued meanwhile */
		if (rc == 2) {
			log_error("%.*s: a notification in the queue database is damaged: dropped",
				  QID_LEN, ids.id[i]);
			forget_notice(ids.id[i]);
			continue;
		}
		if (rc == 0)
			rc = enqueue_notice(conf, ids.id[i], rcpt, body, len,
					    (flags & DSN_SMTPUTF8) != 0, dqid);
		free(rcpt);
		free(body);
		if (rc == 0)
			log_info("%.*s: sender non-delivery notification: %s", QID_LEN, ids.id[i],
				 dqid);
		else if (rc == 1)
			forget_notice(ids.id[i]);	/* no route */
		else {
			not_before = now_us() + (uint64_t)conf->ternd.min_backoff * 1000;
			break;
		}
	}
}
