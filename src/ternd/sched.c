/*
 * sched - the scheduler (see sched.h).
 *
 * Fairness between peers: each peer's due mail is read in its own scan
 * of the schedule index, which stops at the first message the peer's
 * full job queue cannot take, so that one slow peer's backlog never
 * holds up another's; what does not fit waits in LMDB for the next scan.
 * A peer without a host, or whose TLS context a reload could not build,
 * is passed over unread (but for a count once a minute, for its
 * warning); its mail stays queued, deferred, never bounced, as does mail
 * for a peer no longer configured that no route takes. So is a peer
 * whose circuit breaker holds it (open, or half-open with its probe out):
 * its mail is neither read nor rewritten, however much of it waits; when
 * the cooldown is over one message is offered, for the probe, and when
 * the breaker closes the peer is scanned again at once.
 *
 * Work per scan is bounded, however big a backlog: a peer's walk of its
 * due entries sees at most SCHED_VISIT_MAX of them and goes on from
 * there at the next scan, which then comes at once (after the other
 * peers' turn); a walk stopped for any other reason starts the next one
 * at the earliest entry again. A message's other recipients due at the
 * same time are passed over in one seek, not read one by one. So a peer with
 * 1,000,000 recipients due (after a restart, or when its breaker closes)
 * delays another peer's mail by one bounded walk, not by its backlog.
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

#include "commit.h"
#include "log.h"
#include "queue_ops.h"
#include "ratelimit.h"
#include "sched.h"
#include "smtp_cmd.h"
#include "stats.h"
#include "storage.h"
#include "ternd.h"
#include "textesc.h"
#include "unroutable.h"
#include "xalloc.h"

static struct {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int kicked;
	int more;			/* the scheduler's only: a walk stopped at its bound */
	struct sched_hooks hooks;	/* sched_start's */
} sched = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

#define SCHED_VISIT_MAX 1024		/* due entries one scan sees per peer */

/* Messages the scheduler found routed to a peer a reload removed. */
#define REROUTE_MAX 64			/* per scan; the next scan finds the rest */
struct reroutes {
	char qids[REROUTE_MAX][QID_LEN + 1];
	size_t n;
};

/* sched_kick - new mail is queued: look at the schedule now */
void sched_kick(void)
{
	pthread_mutex_lock(&sched.lock);
	sched.kicked = 1;
	pthread_cond_signal(&sched.wake);
	pthread_mutex_unlock(&sched.lock);
}

/* sched_offer - queue a due message for a peer, once (for a probe, only
 * when no job waits): 1 queued, 0 queued or in delivery already, -1 the
 * peer takes no more */
static int sched_offer(struct peer_rt *p, const char *qid, int probe)
{
	int rc = -1;

	pthread_mutex_lock(&p->lock);
	if ((!probe || p->q.count == 0) && (rc = jobq_offer(&p->q, qid)) > 0)
		pthread_cond_signal(&p->ready);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* sched_done - a message's delivery attempt is over: it may be offered again */
static void sched_done(struct peer_rt *p, const char *qid)
{
	pthread_mutex_lock(&p->lock);
	jobq_done(&p->q, qid);
	pthread_mutex_unlock(&p->lock);
}

/* sched_offer_due - a relayed peer's recipient due now: offer its message
 * (its job takes its other recipients due: they are passed over); stop
 * at the first one the full ring cannot take */
static int sched_offer_due(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	(void)next_us;
	(void)idx;
	if (sched.hooks.held(qid))
		return STORE_DUE_PASS;	/* its outcome waits to be recorded: not sent again */
	return sched_offer(arg, qid, 0) < 0 || peer_stopping() ? 1 : STORE_DUE_PASS;
}

/* sched_offer_probe - a relayed peer's recipient due now, for the
 * half-open breaker's one probe: offer one message, then stop */
static int sched_offer_probe(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	(void)next_us;
	(void)idx;
	if (sched.hooks.held(qid))
		return STORE_DUE_PASS;
	return sched_offer(arg, qid, 1) != 0 || peer_stopping() ? 1 : STORE_DUE_PASS;
}

/* sched_reroute_due - a due recipient of a peer a reload removed: note its
 * message, once; stop when REROUTE_MAX are noted */
static int sched_reroute_due(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	struct reroutes *rr = arg;
	size_t i;

	(void)next_us;
	(void)idx;
	for (i = 0; i < rr->n && strcmp(rr->qids[i], qid) != 0; i++)
		;
	if (i == rr->n)
		memcpy(rr->qids[rr->n++], qid, QID_LEN + 1);
	return rr->n == REROUTE_MAX || peer_stopping() ? 1 : STORE_DUE_PASS;
}

/* sched_parked - a configured peer that is not relayed (no host, or a
 * TLS context the reload that added it could not build): its mail waits,
 * deferred, never bounced; the log says so once a minute, with how many
 * recipients wait */
static void sched_parked(const struct conf_peer *p)
{
	int nohost = p->host[0] == '\0';
	char cause[RATELIMIT_KEY_MAX];
	uint64_t held, n = 0;

	snprintf(cause, sizeof(cause), "%s:%s", nohost ? "no_host" : "tls_context", p->name);
	if (!unroutable_due(cause, &held))
		return;
	store_peer_rcpts(ternd.store, p->name, &n);
	if (nohost)
		unroutable_log(0, "peer %s has no host: %" PRIu64 " recipient%s wait in the queue",
			       p->name, n, n == 1 ? "" : "s");
	else
		unroutable_log(0, "peer %s has no TLS context (see the reload that added it): %"
			       PRIu64 " recipient%s wait in the queue", p->name, n, n == 1 ? "" : "s");
}

/* sched_peer - one peer in the schedule: offer a relayed peer's due
 * mail as its breaker lets it go (all of it, one message for a probe,
 * or none: then unread); pass over a configured peer that is not relayed
 * (no host), whose mail stays queued, without reading it but once a
 * minute (sched_parked); collect the mail of a peer no longer configured */
static int sched_peer(const char *peer, void *arg)
{
	struct peer_rt *p = peer_find(peer);
	const struct conf_peer *cp;
	struct reroutes *rr = arg;
	enum breaker_offer o;

	if (p) {
		if (storage_failing())
			return peer_stopping();	/* no new delivery (storage.c) */
		/* A walk goes on from where the last one stopped only after a
		 * stop at its bound; after any other stop (a full ring, the
		 * probe offered, the breaker holding) the next walk starts at
		 * the earliest entry, so that mail passed over meanwhile (its
		 * job dropped when the breaker opened, recipients beyond
		 * max_rcpts_per_transaction) is not put behind the backlog. */
		if ((o = peer_due(p, now_us())) == BREAKER_HOLD
		    || store_walk_due(ternd.store, peer, now_us(), &p->due, SCHED_VISIT_MAX,
				      o == BREAKER_GO ? sched_offer_due : sched_offer_probe, p) != 0)
			p->due.set = 0;
		else if (p->due.set)
			sched.more = 1;	/* at its bound: the next scan at once */
	} else if ((cp = conf_peer_find(ternd_conf(), peer)) != NULL) {
		sched_parked(cp);
	} else if (rr->n < REROUTE_MAX) {
		store_foreach_due(ternd.store, peer, now_us(), sched_reroute_due, rr);
	}
	return peer_stopping();
}

/* sched_reroute_write - route again the live recipients of a message whose peer
 * is no longer configured (removed by a reload): by [routes] now, keeping
 * their schedule and attempts; with no route, they wait min_backoff */
static int sched_reroute_write(struct store_txn *txn, void *arg)
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
			/* deferred, never bounced: a route added by a reload takes it */
			unroutable_count(UNROUTABLE_NO_ROUTE, 1);
			unroutable_warn("reroute", "%s: to=<%s>: peer %s is no longer configured and "
					"no route matches: it waits", qid, ea, r->peer);
			r->next_us = now_us() + (uint64_t)conf->ternd.min_backoff * 1000;
		}
		rc = store_put_rcpt(txn, qid, r);
	}
	q_rcpts_free(&rcpts, n);
	return rc;
}

/* sched_main - the scheduler loop: once a second, or when kicked */
static void *sched_main(void *arg)
{
	static struct reroutes rr;

	for (;;) {
		struct timespec t;

		rr.n = 0;
		sched.more = 0;
		sched.hooks.before();	/* the relay's kept outcomes */
		store_foreach_sched_peer(ternd.store, sched_peer, &rr);
		for (size_t i = 0; i < rr.n && !peer_stopping(); i++) {
			struct job job = {0};

			job.kind = JOB_WRITE;
			job.write = sched_reroute_write;
			job.arg = rr.qids[i];
			if (commit_submit(&job) < 0)
				log_error("%s: cannot route it again: %s", rr.qids[i], job.err);
		}
		sched.hooks.after();	/* the relay's notifications */
		pthread_mutex_lock(&sched.lock);
		clock_deadline(&t, 1000);
		while (!sched.kicked && !sched.more && !peer_stopping())
			if (clock_cond_wait(&sched.wake, &sched.lock, &t) == ETIMEDOUT)
				break;
		sched.kicked = 0;
		if (peer_stopping()) {
			pthread_mutex_unlock(&sched.lock);
			break;
		}
		pthread_mutex_unlock(&sched.lock);
	}
	return arg;
}

/* sched_start - start the scheduler thread with the upper layer's hooks
 * (sched.h), each of them required */
void sched_start(const struct sched_hooks *hooks)
{
	sched.hooks = *hooks;
	if (pthread_create(&sched.thread, NULL, sched_main, NULL) != 0)
		log_fatal("cannot start the scheduler");
}

/* sched_stop - wake the scheduler to see peer_stopping(), and wait for it */
void sched_stop(void)
{
	pthread_mutex_lock(&sched.lock);
	pthread_cond_broadcast(&sched.wake);
	pthread_mutex_unlock(&sched.lock);
	pthread_join(sched.thread, NULL);
}

/* sched_hold_damaged - hold, through the committer, a message a record of
 * which fails validation: never sent. Logged by the hold that parks it,
 * so once: the scheduler does not offer it again */
static void sched_hold_damaged(const char *qid)
{
	struct queue_op_arg a;
	struct job job;

	memset(&a, 0, sizeof(a));
	a.op = QOP_HOLD;
	memcpy(a.qid, qid, QID_LEN + 1);
	a.now_us = now_us();
	a.spool = ternd.spool;
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

/* sched_load - a job's message and this peer's recipients due now;
 * 0 when there is nothing to send (then sched_release) */
int sched_load(struct attempt *a, struct peer_rt *home, const struct conf_peer *p,
	       const char *qid)
{
	uint64_t now = now_us();
	int rc = 0;

	memset(a, 0, sizeof(*a));
	a->home = a->to = home;
	a->fd = -1;
	memcpy(a->qid, qid, QID_LEN + 1);
	if (storage_failing() || sched.hooks.held(qid))
		return 0;	/* no new delivery, nor again one not recorded (kept.c) */
	if (p == NULL || (rc = store_get(ternd.store, qid, &a->m, &a->rcpts, &a->n)) != 0) {
		if (rc == STORE_DAMAGED)
			sched_hold_damaged(qid);
		return 0;
	}
	a->loaded = 1;
	if (a->m.flags & QMSG_HOLD)
		return 0;
	a->todo = xcalloc(a->n ? a->n : 1, sizeof(*a->todo));
	a->ntodo = jobq_due(a->rcpts, a->n, home->name, now, (size_t)p->max_rcpts_per_transaction,
			    a->todo);
	if (a->ntodo == 0)
		return 0;
	for (size_t i = 0; i < a->ntodo; i++)
		a->solo |= (a->todo[i]->flags & RCPT_MAYBE_SENT) != 0;	/* it goes alone */
	memcpy(a->res.qid, qid, QID_LEN + 1);
	a->res.start = now;
	a->res.out = xcalloc(a->ntodo, sizeof(*a->res.out));
	a->ok = xcalloc(a->ntodo, sizeof(*a->ok));
	a->told = xcalloc(a->ntodo, sizeof(*a->told));
	return 1;
}

/* sched_skip - a job not tried now (its peer's breaker holds it),
 * released unread: it stays due in the queue database */
void sched_skip(struct peer_rt *home, const char *qid)
{
	sched_done(home, qid);
}

/* sched_release - the attempt is over: the message may be offered again */
void sched_release(struct attempt *a)
{
	if (a->fd >= 0)
		close(a->fd);
	free(a->res.out);
	q_msg_clear(&a->res.msg);
	q_rcpts_free(&a->res.rcpts, a->res.nrcpts);
	free(a->ok);
	free(a->told);
	free(a->todo);
	if (a->loaded) {
		q_rcpts_free(&a->rcpts, a->n);
		q_msg_clear(&a->m);
	}
	if (a->home)
		sched_done(a->home, a->qid);
}

/* sched_requeue - the attempt was not sent (relay.c says why): its job
 * goes back to the front of the peer's queue, still busy, to be sent
 * again at once on a new connection */
void sched_requeue(struct attempt *a)
{
	struct peer_rt *rt = a->home;
	char qid[QID_LEN + 1];

	memcpy(qid, a->qid, QID_LEN + 1);
	if (peer_stopping()) {
		sched_release(a);	/* it stays queued for the next start */
		return;
	}
	a->home = NULL;
	sched_release(a);
	pthread_mutex_lock(&rt->lock);
	jobq_requeue(&rt->q, qid);
	pthread_cond_signal(&rt->ready);
	pthread_mutex_unlock(&rt->lock);
}
