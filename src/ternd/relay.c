/*
 * relay - delivery of queued mail to relay peers: their delivery threads
 * and a reload's changes to them (their runtime state is peer.c's).
 *
 * The scheduler (sched.c) hands a relayed peer's messages due now, as
 * jobs, to its delivery threads: at most max_connections per peer, each
 * keeping its connection open between messages (min_idle of them warm,
 * with keepalive NOOPs). A delivery thread sends one transaction per
 * message and peer (relay_proto.c; with PIPELINING the next waiting
 * message's transaction goes out before the previous final reply is
 * read: with DATA one per round trip, with CHUNKING a window of up to
 * max_pipeline_depth, window.h), and hands each attempt's outcomes to the
 * committer as soon as its final reply is read (relay_result.c). A
 * transaction whose final reply was read is never sent again. A 250 that is lost to a crash
 * before that commit means the message is sent again: at least once,
 * never lost. While a peer's circuit breaker (breaker.c) is open or
 * half-open its mail waits unread (the scheduler holds the peer: one job
 * for the probe), or goes to its backup peer.
 *
 * Memory is bounded: each peer's job queue and in-flight set hold at most
 * JOBQ_MAX entries; what does not fit waits in LMDB.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "deadline.h"
#include "kept.h"
#include "log.h"
#include "notice.h"
#include "peer.h"
#include "relay.h"
#include "relay_proto.h"
#include "relay_result.h"
#include "sched.h"
#include "stats.h"
#include "storage.h"
#include "ternd.h"
#include "tls_cache.h"
#include "window.h"
#include "xalloc.h"

/* peer_connect - a new connection, within the peer's max_connection_rate */
static int peer_connect(struct peer_rt *rt, const struct conf_peer *p, struct conn *c)
{
	SSL_CTX *ctx;

	peer_bucket_wait(rt, &rt->connections, p->max_connection_rate, 1.0);
	pthread_mutex_lock(&rt->lock);
	ctx = rt->tls;
	c->gen = rt->gen;
	pthread_mutex_unlock(&rt->lock);
	return conn_open(c, p, ctx, p->helo_name[0] ? p->helo_name : ternd.hostname);
}

/* conn_full - the connection takes no more transactions: its reuse
 * ended (spent), or max_messages_per_connection transactions were
 * started on it, whatever they came to */
static int conn_full(const struct conn *c, const struct conf_peer *p)
{
	return c->spent || (p->max_messages_per_connection
			    && c->txns >= (unsigned long long)p->max_messages_per_connection);
}

/* next_attempt - the peer's next job, if one is waiting, the breaker is
 * closed, the rate allows it and the connection may carry one more
 * transaction; never waits. 1 loaded into a */
static int next_attempt(struct peer_rt *rt, const struct conf_peer *p, const struct conn *c,
			struct attempt *a)
{
	if (!(c->ehlo.flags & SMTP_EXT_PIPELINING) || c->fd < 0 || peer_stopping() || conn_full(c, p))
		return 0;
	for (;;) {
		char qid[QID_LEN + 1];
		struct breaker_pass pass;
		int got = 0;

		pthread_mutex_lock(&rt->lock);
		if (rt->q.count > 0 && rt->br.state == BREAKER_CLOSED
		    && bucket_take(&rt->messages, p->max_message_rate, rate_burst(p), now_us()) == 0)
			got = jobq_take(&rt->q, qid) && breaker_allow(&rt->br, p, now_us(), &pass);
		pthread_mutex_unlock(&rt->lock);
		if (!got)
			return 0;
		if (sched_load(a, rt, p, qid)) {
			a->pass = pass;
			a->res.connected = a->res.start;	/* no connection of its own to wait for */
			return 1;
		}
		peer_cancel(rt, &pass);
		sched_release(a);	/* held, or nothing due: the token is spent */
	}
}

/* Transactions that end in a 4xx of the peer's, one after another, that
 * end a connection's reuse (the next ones go over a new connection). */
#define RELAY_FAILED_IN_ROW 3

/* attempt_requeue - an attempt that was not sent goes back to the front
 * of its peer's queue at no attempt cost, to be sent again at once on a
 * new connection; why says why it was not (only loaded, its end of data
 * never written, written behind a 421, refused at MAIL on a reused
 * connection). None of these can have been delivered, so none is a
 * possible duplicate. */
static void attempt_requeue(const struct conn *c, struct attempt *a, const char *why)
{
	if (a->t0)
		log_info("%s: not sent to %s[%s] (%s): sent again at once", a->qid, c->host, c->addr, why);
	else
		log_info("%s: not written (%s): tried again at once", a->qid, why);
	peer_cancel(a->to, &a->pass);
	sched_requeue(a);
}

/* tx_done - a transaction is over: its outcomes recorded (posted to q,
 * or, without q, recorded before this returns and released), or, refused
 * at MAIL on a reused connection, sent again at once. A connection whose
 * transactions end in the peer's 4xx RELAY_FAILED_IN_ROW times in a row
 * takes no more. */
static void tx_done(struct conn *c, struct attempt *a, struct posted *q, const struct conf *conf)
{
	int sent = 0, deferred = 0;

	if (a->refused_reuse) {
		attempt_requeue(c, a, "refused at MAIL on a reused connection");
		return;
	}
	for (size_t i = 0; i < a->res.nout; i++) {
		sent |= a->res.out[i].state == RCPT_SENT;
		deferred |= a->res.out[i].state == RCPT_DEFERRED;
	}
	if (sent || !deferred || c->fd < 0)
		c->failed_in_row = 0;
	else if (++c->failed_in_row == RELAY_FAILED_IN_ROW && !c->spent) {
		log_info("peer %s: %d transactions in a row deferred by %s[%s]: the connection takes "
			 "no more", c->peer->name, RELAY_FAILED_IN_ROW, c->host, c->addr);
		c->spent = 1;
	}
	if (q) {
		posted_add(q, a, c, conf);
		return;
	}
	relay_result_record(a, c, conf);
	sched_release(a);
}

/*
 * relay_serial - attempts for one job and, over a PIPELINING connection
 * without CHUNKING, for the jobs waiting behind it (RFC 2920 section
 * 3.1): the next transaction is written with the previous end of data
 * (its content waits for 354), so one transaction per round trip. Each
 * attempt is recorded as soon as its final reply is read. After the final
 * reply to the end of data the transaction is over (RFC 5321 4.1.1.4),
 * so DATA needs no RSET there.
 *
 * When the connection is lost before the previous final reply was read,
 * that attempt is deferred as any lost one (a possible duplicate when its
 * end of data went out). An attempt written behind it none of whose
 * replies was read goes back to the front of the peer's queue
 * (attempt_requeue): nothing of it can have been accepted, its content
 * waits for 354. The loss was not its own, so it costs no attempt and no
 * backoff; a failure of the new connection counts as usual.
 */
static void relay_serial(struct peer_rt *home, struct peer_rt *rt, struct conn *c,
			 const struct conf_peer *p, struct attempt at[2])
{
	const struct conf *conf = ternd_conf();
	struct attempt *a = &at[0], *b = &at[1];
	int rc, next = 0;

	rc = tx_start(c, a, "");
	for (;;) {
		/* a: written; with next, b is written behind it */
		if (rc == 0)
			rc = tx_replies(c, a);
		if (rc < 0 && a->behind && !a->replied) {
			/* none of a's replies came: as if lost before them */
			relay_fail(c, NULL, 0, NULL, NULL);
			if (next)
				attempt_requeue(c, b, "its content waited for a 354");
			attempt_requeue(c, a, "its content waited for a 354");
			return;
		}
		if (rc == 0 && !next && rt == home && next_attempt(home, p, c, b)) {
			snprintf(b->relay_host, sizeof(b->relay_host), "%s", a->relay_host);
			b->behind = 1;
			next = 1;
			peer_begin(home, &b->pass);
			if ((rc = tx_start(c, b, a->dot ? ".\r\n" : "")) == 1)
				tx_done(c, b, NULL, conf), next = 0, rc = 0;
			else if (a->dot)	/* it went with b's commands, or may have */
				a->dot = 0, a->final_sent = 1;
		}
		if (rc == 0)
			rc = tx_final(c, a);
		if (rc < 0)
			tx_lost(c, a);
		else if (!next && tx_rset(c, a->clean) < 0)
			relay_fail(c, NULL, 0, NULL, NULL);	/* outcomes are set */
		tx_done(c, a, NULL, conf);
		if (!next)
			return;
		*a = *b;
		next = 0;
		if (c->fd < 0) {
			attempt_requeue(c, a, "its content waited for a 354");
			return;
		}
		rc = 0;
	}
}

/* window_lost - the connection was lost with w's transactions unanswered
 * (the oldest first; pend: one more loaded, never written). Each whose
 * end of data went out may have been delivered: deferred as a possible
 * duplicate (tx_lost), unless a 421 came before it (said421: a peer that
 * says 421 processes nothing after it). The oldest is deferred too when
 * it was the connection's first transaction or a reply of its own was read, so
 * that a message that always costs the connection is not sent again for
 * ever; and recorded as it is when a 421 of its own ended it. Every other
 * one was not sent: back to the front of the queue, in order. */
static void window_lost(struct conn *c, struct window *w, struct attempt *at, struct attempt *pend,
			int said421, struct posted *q, const struct conf *conf)
{
	unsigned char settled[WINDOW_MAX] = {0};

	relay_fail(c, NULL, 0, NULL, NULL);
	for (size_t k = 0; k < w->count; k++) {
		struct attempt *a = &at[window_nth(w, k)];

		if (k == 0 && a->closing) {
			tx_done(c, a, q, conf);	/* its own 421: its outcomes are set */
		} else if (said421) {
			continue;
		} else if (tx_twice(a) || (k == 0 && (a->res.conn_use == 1 || a->replied))) {
			tx_lost(c, a);
			tx_done(c, a, q, conf);
		} else {
			continue;
		}
		settled[k] = 1;
	}
	/* the newest first: each goes to the front, so they keep their order */
	if (pend)
		attempt_requeue(c, pend, "the connection was lost first");
	for (size_t k = w->count; k-- > 0;)
		if (!settled[k])
			attempt_requeue(c, &at[window_nth(w, k)], said421 ? "written behind a 421"
					: "the connection was lost before its end of data");
}

/*
 * relay_window - attempts for one job and, over a connection with
 * CHUNKING and PIPELINING, for the jobs waiting behind it: with BDAT
 * nothing waits for a 354, so transaction after transaction (MAIL,
 * RCPT..., BDAT n LAST and the content) is written while the congestion
 * window (at most max_pipeline_depth transactions) and max_pipeline_bytes
 * of content allow (window.h), and the replies are read for the oldest,
 * strictly in order. Each attempt goes to the committer as soon as its
 * final reply is read, without waiting for the commit (posted), and the
 * window is filled again. After a failed BDAT the transaction may still
 * be open on the server (RFC 3030), so each transaction written behind
 * another (or after one that did not end in 2xx) starts with RSET: one
 * more reply in the same read, no round trip. A possible duplicate
 * (solo) goes alone: into an empty window, nothing behind it.
 *
 * Failures, in order:
 * - a write fails: nothing more is written, and the replies already sent
 *   are read until a short drain deadline (TX_DRAIN_MS) before anything
 *   is decided: a transaction whose final reply was read is never sent
 *   again;
 * - a 421: the same (nothing more is written, what is owed is read until
 *   the drain deadline), the 421 being its transaction's outcome;
 * - a reply cannot be read (connection lost, or the drain is over): the
 *   window shrinks (peer_window_loss) and window_lost sorts what was in
 *   flight: possible duplicates deferred and announced, the rest not sent.
 */
static void relay_window(struct peer_rt *home, struct peer_rt *rt, struct conn *c,
			 const struct conf_peer *p, struct attempt *first)
{
	const struct conf *conf = ternd_conf();
	struct window w;
	struct posted q;
	struct attempt *at, *a;
	char why[sizeof(c->why)] = "";	/* the write that failed */
	long long drain = 0;
	int rc, pend = 1, dirty = 0, started = 0, solo = 0, said421 = 0, waited;
	unsigned long waits;
	uint64_t rtt;
	size_t room;

	window_init(&w, p->max_pipeline_depth, p->max_pipeline_bytes);
	if (c->txns == 0)
		window_cc_init(&c->cc, p->max_pipeline_depth);	/* a new connection starts small */
	room = peer_window(rt, p, &c->cc, 0, 0, 0);
	storage_window((int64_t)room);	/* the reserve follows the windows in use */
	/* the window's slots, the posted ones, and one loaded but not written */
	at = xcalloc(2 * w.depth + 1, sizeof(*at));
	q.at = at + w.depth;
	q.cap = w.depth;
	q.head = q.count = 0;
	a = &at[2 * w.depth];
	*a = *first;	/* pending: the first attempt, then each one from the queue */
	for (;;) {
		int full = 0;

		/* write while there is room: at most the window in flight, and
		 * at most as many answered but not yet recorded, so that what a
		 * crash can cost again is bounded by the window too */
		posted_reap(&q, 0);
		while (drain == 0 && c->fd >= 0 && !solo) {
			const char *lead = "";

			if ((full = w.count >= room || q.count >= room))
				break;
			if (!pend && w.count == 0 && !conn_alive(c)) {
				relay_fail(c, NULL, 0, NULL, NULL);	/* closed by the peer meanwhile */
				break;
			}
			if (!pend && (rt != home || !window_room(&w, 0)	/* full: load none yet */
				      || !(pend = next_attempt(home, p, c, a))))
				break;
			if ((a->solo && w.count > 0) || !window_room(&w, a->m.size))
				break;
			pend = 0;
			if (started++) {	/* the first began in relay_deliver */
				snprintf(a->relay_host, sizeof(a->relay_host), "%s", first->relay_host);
				peer_begin(home, &a->pass);
			}
			if (w.count > 0 || dirty) {
				a->rset = dirty || w.count > 0;
				a->behind = w.count > 0;
				lead = "RSET\r\n";
			}
			if ((rc = tx_start(c, a, lead)) == 1) {
				tx_done(c, a, &q, conf);	/* nothing written */
				continue;
			}
			dirty = 0;
			solo = a->solo;
			at[window_push(&w, a->m.size)] = *a;
			if (rc < 0) {
				snprintf(why, sizeof(why), "%s", c->why);
				drain = deadline_after(TX_DRAIN_MS);
			}
		}
		if (w.count == 0 && full && q.count > 0) {
			posted_reap(&q, 1);	/* the commits hold it up: wait for one */
			continue;
		}
		if (w.count == 0)
			break;
		/* the oldest one's replies; did the window hold the connection
		 * up (full, and the peer's replies not there yet)? */
		a = &at[window_oldest(&w)];
		full = w.count >= room;
		waits = c->waits;
		if (drain)
			a->drain = drain;
		if ((rc = tx_replies(c, a)) == 0)
			rc = tx_final(c, a);
		waited = c->waits != waits;
		if (a->closing) {
			said421 = 1;
			if (drain == 0)
				drain = a->drain;	/* 421: nothing more is written */
		}
		if (rc < 0)
			break;
		dirty = !a->clean;
		solo = 0;	/* it went alone: the window is empty now */
		/* a round trip sample only when its reply was waited for: one
		 * found already read says how busy ternd was, not the peer */
		rtt = waited ? now_us() - a->t0 : 0;
		window_pop(&w);
		tx_done(c, a, &q, conf);
		if (drain == 0 && c->fd >= 0) {
			size_t was = room;

			room = peer_window(rt, p, &c->cc, 1, rtt, full && waited);
			storage_window((int64_t)room - (int64_t)was);
		}
		a = &at[2 * w.depth];
	}
	if (why[0])
		snprintf(c->why, sizeof(c->why), "%s", why);	/* the cause, not the drain's end */
	if (w.count > 0) {
		if (!said421) {
			char where[sizeof(c->host) + sizeof(c->addr) + 2];

			snprintf(where, sizeof(where), "%s[%s]", c->host, c->addr);
			peer_window_loss(rt, &c->cc, where, w.count);
		}
		window_lost(c, &w, at, pend ? &at[2 * w.depth] : NULL, said421, &q, conf);
	} else {
		if (drain)
			relay_fail(c, NULL, 0, NULL, NULL);	/* 421 or a failed write: all read */
		else if (dirty && tx_rset(c, 0) < 0)
			relay_fail(c, NULL, 0, NULL, NULL);	/* outcomes are set */
		if (pend)
			attempt_requeue(c, &at[2 * w.depth], "not written before the window ended");
	}
	posted_reap(&q, SIZE_MAX);
	storage_window(-(int64_t)room);
	free(at);
}

/*
 * relay_deliver - attempts for one job of a peer and the jobs waiting
 * behind it on the same connection: a window of BDAT transactions when
 * the peer offers CHUNKING and PIPELINING (relay_window), else one
 * transaction per round trip (relay_serial).
 */
static void relay_deliver(struct peer_rt *rt, struct conn *c, struct conn *cb, const char *qid)
{
	const struct conf *conf = ternd_conf();
	const struct conf_peer *p = conf_peer_find(conf, rt->name);
	struct attempt at[2], *a = &at[0];
	const struct conf_peer *bp = NULL;
	struct peer_rt *home = rt;
	struct breaker_pass pass;

	/* asked before the message is read: a held peer's mail is neither
	 * read nor written, it stays due for when the breaker lets it go */
	if (p == NULL || (!peer_allow(rt, p, &pass)
			  && ((bp = rt->backup ? conf_peer_find(conf, rt->backup->name) : NULL) == NULL
			      || !peer_allow(rt->backup, bp, &pass)))) {
		sched_skip(rt, qid);
		return;
	}
	if (!sched_load(a, rt, p, qid)) {
		peer_cancel(bp ? rt->backup : rt, &pass);
		sched_release(a);
		return;
	}
	a->pass = pass;
	if (bp) {
		rt = a->to = rt->backup;	/* this attempt goes to the backup peer */
		p = bp;
		c = cb;
	}
	if (c->fd >= 0 && !conn_alive(c))
		conn_close(c, 0);	/* closed by the peer while idle: open anew */
	if (c->fd < 0 && peer_connect(rt, p, c) < 0) {
		relay_fail(c, a, c->temporary ? 450 : 550,
			   c->temporary ? (c->esc[0] ? c->esc : "4.4.1") : "5.4.1", c->why);
		a->res.connected = now_us();
		snprintf(a->relay_host, sizeof(a->relay_host), "none");
		relay_result_record(a, c, conf);
		sched_release(a);
		return;
	}
	a->res.connected = now_us();
	peer_connected(rt, p, &a->pass, 1, NULL);
	peer_rate_wait(rt, p);
	conn_busy(c, 1);
	snprintf(a->relay_host, sizeof(a->relay_host), "%s[%s]:%d", c->host, c->addr, c->port);
	peer_begin(rt, &a->pass);
	if ((c->ehlo.flags & SMTP_EXT_PIPELINING) && (c->ehlo.flags & SMTP_EXT_CHUNKING))
		relay_window(home, rt, c, p, a);
	else {
		storage_window(2);	/* one waiting for its final reply, one behind it */
		relay_serial(home, rt, c, p, at);
		storage_window(-2);
	}
	conn_busy(c, 0);
	if (c->fd >= 0 && conn_full(c, p))
		conn_close(c, 1);	/* spent, or max_messages_per_connection */
}

/* One delivery thread and its connection. */
struct worker_arg {
	struct peer_rt *rt;
	int index;			/* its slot: below min_idle, kept warm */
};

/* relay_keepalive - NOOP on an idle connection; close it if that fails */
static void relay_keepalive(struct conn *c)
{
	struct smtp_reply r;

	if (conn_write(c, "NOOP\r\n", 6, c->peer->command_timeout) < 0
	    || conn_reply(c, &r, c->peer->command_timeout) < 0 || r.code != 250)
		conn_close(c, 0);
}

/* relay_worker - one delivery thread of a peer, with its connection */
static void *relay_worker(void *arg)
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

		if (p == NULL || rt->gone || wa->index >= conf_peer_connections(p))
			break;	/* removed, or fewer connections: this one goes */
		warm = wa->index < p->min_idle;
		if (c.fd >= 0 && c.gen != rt->gen)
			conn_close(&c, 1);	/* its settings changed: reopen when needed */
		if (cb.fd >= 0 && (rt->backup == NULL || cb.gen != rt->backup->gen))
			conn_close(&cb, 1);
		pthread_mutex_lock(&rt->lock);
		rt->conn[wa->index] = c.fd >= 0;	/* for ternq peers: idle, or none */
		clock_deadline(&t, 1000);
		while (rt->q.count == 0 && !peer_stopping() && !idle)
			idle = clock_cond_wait(&rt->ready, &rt->lock, &t) == ETIMEDOUT;
		if (peer_stopping() && rt->q.count == 0) {
			pthread_mutex_unlock(&rt->lock);
			break;
		}
		if (rt->q.count == 0) {
			uint64_t now = now_us();
			/* a breaker that is not closed holds the warm ones too */
			int closed = rt->br.state == BREAKER_CLOSED;

			pthread_mutex_unlock(&rt->lock);
			if (c.fd >= 0 && !conn_alive(&c))
				conn_close(&c, 0);
			if (warm && closed && c.fd < 0
			    && now - last_try > (uint64_t)p->connect_timeout * 1000) {
				/* min_idle: keep a connection ready, EHLO and TLS done */
				last_try = now;
				if (peer_connect(rt, p, &c) == 0)
					last_used = now;
			} else if (c.fd >= 0 && !warm && now - last_used > (uint64_t)p->idle_timeout * 1000) {
				conn_close(&c, 1);	/* idle_timeout */
			} else if (c.fd >= 0 && now - last_used > (uint64_t)p->keepalive_interval * 1000) {
				relay_keepalive(&c);
				last_used = now;
			}
			continue;
		}
		jobq_take(&rt->q, qid);
		rt->conn[wa->index] = 2;	/* busy */
		pthread_mutex_unlock(&rt->lock);
		relay_deliver(rt, &c, &cb, qid);	/* sched_release for each job */
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

/* peer_threads - start the delivery threads the peer's max_connections
 * asks for and that do not run (at start, or more after a reload) */
static void peer_threads(struct peer_rt *rt, const struct conf_peer *p)
{
	int want = conf_peer_connections(p);

	pthread_mutex_lock(&rt->lock);
	if (want > rt->nthreads) {
		rt->threads = xreallocarray(rt->threads, (size_t)want, sizeof(*rt->threads));
		rt->alive = xreallocarray(rt->alive, (size_t)want, sizeof(*rt->alive));
		rt->conn = xreallocarray(rt->conn, (size_t)want, sizeof(*rt->conn));
		for (int k = rt->nthreads; k < want; k++)
			rt->alive[k] = rt->conn[k] = 0;
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
		if (pthread_create(&rt->threads[k], NULL, relay_worker, wa) != 0)
			log_fatal("cannot start a delivery thread");
	}
	pthread_mutex_unlock(&rt->lock);
}

/* peer_log_start - the line that says a peer is being relayed to */
static void peer_log_start(const struct conf_peer *p)
{
	int n = conf_peer_connections(p);

	log_info("peer %s: relaying to %s port %lld, tls %s, %d connection%s", p->name, p->host,
		 p->port, conf_tls_name(p->tls), n, n == 1 ? "" : "s");
}

/* peer_make - a relayed peer's runtime state and TLS context; NULL with
 * err when the context cannot be made */
static struct peer_rt *peer_make(const struct conf_peer *p, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	err[0] = '\0';
	if ((ctx = tls_cache_context(p, err, errlen)) == NULL && err[0])
		return NULL;
	return peer_new(p, ctx);
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
		if ((rt = peer_make(p, err, sizeof(err))) == NULL)
			log_fatal("%s", err);
		peer_add(rt);
	}
}

/* peer_go - a peer's sessions, its delivery threads, its start line */
static void peer_go(struct peer_rt *rt, void *arg)
{
	const struct conf *conf = arg;
	const struct conf_peer *p = conf_peer_find(conf, rt->name);

	tls_cache_load(conf, rt->tls);
	peer_threads(rt, p);
	peer_log_start(p);
}

/* relay_start - start the scheduler and each relayed peer's threads */
void relay_start(void)
{
	static const struct sched_hooks hooks = {
		.before = kept_retry, .after = notices_send, .held = kept_has,
	};
	const struct conf *conf = ternd_conf();

	peer_each(peer_go, (void *)conf);
	peer_backups(conf);
	sched_start(&hooks);
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

	peer_retire(conf);
	for (size_t i = 0; i < conf->npeers; i++) {
		const struct conf_peer *p = &conf->peers[i];
		struct peer_rt *rt = peer_find(p->name);
		char *settings;

		if (p->host[0] == '\0')
			continue;
		if (rt == NULL) {
			if ((rt = peer_make(p, err, sizeof(err))) == NULL) {
				log_error("peer %s: not added: %s", p->name, err);
				continue;
			}
			stats_peer(p->name);	/* before its threads update them */
			tls_cache_load(conf, rt->tls);
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
			    && (ctx = tls_cache_context(p, err, sizeof(err))) == NULL && err[0]) {
				log_error("peer %s: keeping its old connection settings: %s", p->name, err);
				free(settings);
				continue;
			}
			peer_resettle(rt, ctx, settings);
			settings = NULL;
			log_info("peer %s: connection settings changed: its connections are reopened",
				 p->name);
			peer_log_start(p);
		}
		free(settings);
		peer_threads(rt, p);	/* more, if max_connections grew */
	}
	peer_backups(conf);
	sched_kick();
}

/* peer_join - let a peer's queue go (its jobs stay in LMDB for next
 * time) and wait for its delivery threads to end */
static void peer_join(struct peer_rt *rt, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&rt->lock);
	rt->q.count = 0;
	pthread_cond_broadcast(&rt->ready);
	pthread_mutex_unlock(&rt->lock);
	for (int k = 0; k < rt->nthreads; k++)
		if (rt->alive[k])
			pthread_join(rt->threads[k], NULL);
}

/* relay_stop - finish attempts in progress, QUIT, stop */
void relay_stop(void)
{
	peer_stop();
	sched_stop();
	peer_each(peer_join, NULL);
	peer_table_free();
	tls_cache_close();
}
