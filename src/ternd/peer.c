/*
 * peer - the relayed peers' runtime state (see peer.h): the table of
 * peers a reload adds to, each peer's circuit breaker and rate buckets
 * under its lock, its pipeline window, its backup peer, and whether ternd
 * is stopping. The relay (relay.c) makes the peers, with their TLS
 * contexts, and runs their delivery threads; the scheduler (sched.c)
 * offers them work. Never opens a connection, never reads or writes the
 * store.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "peer.h"
#include "sched.h"
#include "stats.h"
#include "ternd.h"
#include "xalloc.h"

static struct {
	struct peer_rt **peers;		/* never freed before peer_table_free */
	size_t n;
	pthread_rwlock_t lock;		/* the array: a reload adds to it */
	int stopping;
} table = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* peer_stopping - ternd is stopping: finish what is in progress, start nothing */
int peer_stopping(void)
{
	return __atomic_load_n(&table.stopping, __ATOMIC_RELAXED);
}

/* peer_find - a relayed peer's runtime state by name, or NULL (no host:
 * not relayed; or removed by a reload) */
struct peer_rt *peer_find(const char *name)
{
	struct peer_rt *rt = NULL;

	pthread_rwlock_rdlock(&table.lock);
	for (size_t i = 0; i < table.n && rt == NULL; i++)
		if (!table.peers[i]->gone && strcmp(table.peers[i]->name, name) == 0)
			rt = table.peers[i];
	pthread_rwlock_unlock(&table.lock);
	return rt;
}

/* peer_publish - after a breaker call (under lock), when its state was
 * set: the state to tern_breaker_state (not for a peer a reload removed,
 * whose gauge reads 0); jobs still waiting for a breaker that stopped
 * letting attempts through leave the queue unread (without a backup
 * peer to take them), and a closed one has the scheduler look at the
 * peer's mail at once */
static void peer_publish(struct peer_rt *rt)
{
	char qid[QID_LEN + 1];

	if (!rt->br.changed)
		return;
	rt->br.changed = 0;
	if (!rt->gone)
		metric_set(stats.breaker, rt->br.state, rt->name);
	if (rt->br.state != rt->br_shown) {	/* for ternq peers: since when */
		rt->br_shown = rt->br.state;
		rt->br_since = now_us();
	}
	if (rt->br.state == BREAKER_CLOSED)
		sched_kick();
	else
		while (rt->backup == NULL && jobq_take(&rt->q, qid))
			jobq_done(&rt->q, qid);	/* still due in the queue database */
}

/* peer_views - each relayed peer as ternq peers shows it, read under
 * its lock; fn is called with the lock held (it must not block) */
void peer_views(void (*fn)(const struct peer_view *v, void *arg), void *arg)
{
	pthread_rwlock_rdlock(&table.lock);
	for (size_t i = 0; i < table.n; i++) {
		struct peer_rt *rt = table.peers[i];
		struct peer_view v = {0};

		if (rt->gone)
			continue;
		pthread_mutex_lock(&rt->lock);
		v.name = rt->name;
		v.state = rt->br.state;
		v.since = rt->br_since;
		v.open_until = rt->br.state == BREAKER_OPEN ? rt->br.open_until : 0;
		v.last_error = rt->last_error;
		v.last_error_at = rt->last_error_at;
		for (int k = 0; k < rt->nthreads; k++) {
			v.busy += rt->alive[k] == 1 && rt->conn[k] == 2;
			v.idle += rt->alive[k] == 1 && rt->conn[k] == 1;
		}
		fn(&v, arg);
		pthread_mutex_unlock(&rt->lock);
	}
	pthread_rwlock_unlock(&table.lock);
}

/* peer_reset - close a peer's breaker now (ternq peers reset) and
 * look at the schedule at once; -1 when no relayed peer has that name */
int peer_reset(const char *name)
{
	struct peer_rt *rt = peer_find(name);
	const struct conf_peer *p = conf_peer_find(ternd_conf(), name);

	if (rt == NULL || p == NULL)
		return -1;
	pthread_mutex_lock(&rt->lock);
	breaker_reset(&rt->br, p, now_us());
	peer_publish(rt);	/* closed: it kicks the scheduler */
	pthread_mutex_unlock(&rt->lock);
	return 0;
}

/* peer_allow - may an attempt go to this peer now (breaker_allow)? */
int peer_allow(struct peer_rt *rt, const struct conf_peer *p, struct breaker_pass *pass)
{
	int ok;

	pthread_mutex_lock(&rt->lock);
	ok = breaker_allow(&rt->br, p, now_us(), pass);
	peer_publish(rt);
	pthread_mutex_unlock(&rt->lock);
	return ok;
}

/* peer_breaker_due - what the scheduler may offer the peer now, by its
 * own breaker (breaker_due) */
static enum breaker_offer peer_breaker_due(struct peer_rt *rt, const struct conf_peer *p,
					   uint64_t now)
{
	enum breaker_offer o;

	pthread_mutex_lock(&rt->lock);
	o = breaker_due(&rt->br, p, rt->backup ? rt->backup->name : NULL, now);
	peer_publish(rt);
	pthread_mutex_unlock(&rt->lock);
	return o;
}

/* peer_due - what the scheduler may offer the peer now: by its breaker,
 * or by its backup peer's when that one takes more */
enum breaker_offer peer_due(struct peer_rt *rt, uint64_t now)
{
	const struct conf *conf = ternd_conf();
	const struct conf_peer *p = conf_peer_find(conf, rt->name), *bp;
	enum breaker_offer o, ob;

	if (p == NULL)
		return BREAKER_HOLD;	/* removed by a reload just now */
	o = peer_breaker_due(rt, p, now);
	if (o == BREAKER_GO || rt->backup == NULL || (bp = conf_peer_find(conf, rt->backup->name)) == NULL)
		return o;
	ob = peer_breaker_due(rt->backup, bp, now);
	return ob < o ? ob : o;
}

/* peer_connected - count a connection's success or failure (breaker_result) */
void peer_connected(struct peer_rt *rt, const struct conf_peer *p, struct breaker_pass *pass, int ok,
		    const char *why)
{
	pthread_mutex_lock(&rt->lock);
	breaker_result(&rt->br, p, rt->backup ? rt->backup->name : NULL, pass, ok, why, now_us());
	peer_publish(rt);
	if (!ok) {
		snprintf(rt->last_error, sizeof(rt->last_error), "%s", why ? why : "");
		rt->last_error_at = now_us();
	}
	pthread_mutex_unlock(&rt->lock);
}

/* peer_begin - a transaction starts (breaker_begin) */
void peer_begin(struct peer_rt *rt, struct breaker_pass *pass)
{
	pthread_mutex_lock(&rt->lock);
	breaker_begin(&rt->br, pass, now_us());
	pthread_mutex_unlock(&rt->lock);
}

/* peer_attempt - count a transaction's outcome and time (breaker_attempt) */
void peer_attempt(struct peer_rt *rt, const struct conf_peer *p, struct breaker_pass *pass, int failed,
		  uint32_t ms)
{
	pthread_mutex_lock(&rt->lock);
	breaker_attempt(&rt->br, p, rt->backup ? rt->backup->name : NULL, pass, failed, ms, now_us());
	peer_publish(rt);
	pthread_mutex_unlock(&rt->lock);
}

/* peer_cancel - an attempt ends with nothing tried (breaker_cancel) */
void peer_cancel(struct peer_rt *rt, struct breaker_pass *pass)
{
	pthread_mutex_lock(&rt->lock);
	breaker_cancel(&rt->br, pass);
	pthread_mutex_unlock(&rt->lock);
}

/* peer_bucket_wait - block until the bucket gives a token. What is over the
 * limit just waits here: no deferral, no retry penalty. */
void peer_bucket_wait(struct peer_rt *rt, struct bucket *b, long long interval_us, double burst)
{
	for (;;) {
		uint64_t wait_us;

		pthread_mutex_lock(&rt->lock);
		wait_us = bucket_take(b, interval_us, burst, now_us());
		pthread_mutex_unlock(&rt->lock);
		if (wait_us == 0 || peer_stopping())
			return;
		usleep(wait_us < 1000000 ? (useconds_t)wait_us + 100 : 1000000);
	}
}

/* peer_rate_wait - one message within the peer's max_message_rate */
void peer_rate_wait(struct peer_rt *rt, const struct conf_peer *p)
{
	peer_bucket_wait(rt, &rt->messages, p->max_message_rate, rate_burst(p));
}

/* peer_window - the window a connection to rt may use now: the smaller of
 * the peer's congestion window and the connection's own, own (window.h); with
 * acked, a final reply was just read, rtt_us after its commands were
 * written, limited when the window held the connection up: both follow
 * it first (window_cc_ack) */
size_t peer_window(struct peer_rt *rt, const struct conf_peer *p, struct window_cc *own, int acked,
		   uint64_t rtt_us, int limited)
{
	size_t n;

	pthread_mutex_lock(&rt->lock);
	window_cc_depth(&rt->cc, p->max_pipeline_depth);
	if (acked)
		window_cc_ack(&rt->cc, rtt_us, limited);
	n = rt->cc.cwnd;
	pthread_mutex_unlock(&rt->lock);
	metric_set(stats.window, (double)n, rt->name);
	window_cc_depth(own, p->max_pipeline_depth);
	if (acked)
		window_cc_ack(own, rtt_us, limited);
	return n < own->cwnd ? n : own->cwnd;
}

/* peer_window_loss - a connection to rt was lost with inflight
 * transactions unanswered: the peer's window and the connection's own
 * back to one (window_cc_loss); where is the connection's host[addr] */
void peer_window_loss(struct peer_rt *rt, struct window_cc *own, const char *where, size_t inflight)
{
	uint32_t ssthresh;

	pthread_mutex_lock(&rt->lock);
	window_cc_loss(&rt->cc, inflight);
	ssthresh = rt->cc.ssthresh;
	pthread_mutex_unlock(&rt->lock);
	window_cc_loss(own, inflight);
	metric_set(stats.window, 1, rt->name);
	log_info("peer %s: connection to %s lost with %zu transaction%s unanswered: pipeline "
		 "window 1, growing again (slow start to %u)", rt->name, where, inflight,
		 inflight == 1 ? "" : "s", ssthresh);
}

/* peer_settings - what a peer's connections are made from: a reload that
 * changes any of it replaces the TLS context and reopens connections */
char *peer_settings(const struct conf_peer *p)
{
	return xasprintf("%s|%lld|%d|%d|%d|%s|%s|%s|%s|%s|%s|%s", p->host, p->port, (int)p->tls,
			 p->tls_wrapper, (int)p->tls_min_version, p->tls_ca_file, p->tls_servername,
			 p->helo_name, p->auth_user, p->auth_password_file, p->tls_cert_file,
			 p->tls_key_file);
}

/* peer_resettle - a reload changed rt's connection settings to
 * settings (taken): tls (NULL for tls = none) replaces its TLS context,
 * the old one kept until the stop for the connections still on it, and
 * the generation moves, so that each connection is reopened as it
 * comes free */
void peer_resettle(struct peer_rt *rt, SSL_CTX *tls, char *settings)
{
	pthread_mutex_lock(&rt->lock);
	if (rt->tls) {
		rt->retired = xreallocarray(rt->retired, rt->nretired + 1, sizeof(*rt->retired));
		rt->retired[rt->nretired++] = rt->tls;
	}
	rt->tls = tls;
	rt->gen++;
	free(rt->settings);
	rt->settings = settings;
	pthread_mutex_unlock(&rt->lock);
}

/* peer_new - a relayed peer's runtime state, with its TLS context tls
 * (made by the relay: tls_cache_context) */
struct peer_rt *peer_new(const struct conf_peer *p, SSL_CTX *tls)
{
	struct peer_rt *rt = xcalloc(1, sizeof(*rt));

	rt->tls = tls;
	rt->name = xstrdup(p->name);
	rt->settings = peer_settings(p);
	rt->br.cooldown_ms = p->breaker_cooldown;
	rt->br_since = now_us();
	window_cc_init(&rt->cc, p->max_pipeline_depth);	/* a start begins small */
	pthread_mutex_init(&rt->lock, NULL);
	pthread_cond_init(&rt->ready, NULL);
	jobq_init(&rt->q);
	return rt;
}

/* peer_add - make a peer known to the scheduler */
void peer_add(struct peer_rt *rt)
{
	pthread_rwlock_wrlock(&table.lock);
	table.peers = xreallocarray(table.peers, table.n + 1, sizeof(*table.peers));
	table.peers[table.n++] = rt;
	pthread_rwlock_unlock(&table.lock);
}

/* peer_backups - point each peer at its backup_peer */
void peer_backups(const struct conf *conf)
{
	pthread_rwlock_rdlock(&table.lock);
	for (size_t i = 0; i < table.n; i++) {
		struct peer_rt *rt = table.peers[i];
		const struct conf_peer *p = conf_peer_find(conf, rt->name);
		struct peer_rt *b = NULL;

		if (rt->gone || p == NULL)
			continue;
		for (size_t k = 0; p->backup_peer[0] && k < table.n && b == NULL; k++)
			if (!table.peers[k]->gone && strcmp(table.peers[k]->name, p->backup_peer) == 0)
				b = table.peers[k];
		if (p->backup_peer[0] && b == NULL)
			log_warning("peer %s: backup_peer %s is not a relayed peer: ignored", p->name,
				    p->backup_peer);
		rt->backup = b;
	}
	pthread_rwlock_unlock(&table.lock);
}

/* peer_each - fn for each peer made (removed ones too), in order; fn runs
 * without the table's lock, as it may block (relay_stop joins threads that
 * take it): the table only grows, and a peer lives until peer_table_free */
void peer_each(void (*fn)(struct peer_rt *rt, void *arg), void *arg)
{
	struct peer_rt **peers;
	size_t n;

	pthread_rwlock_rdlock(&table.lock);
	n = table.n;
	peers = xreallocarray(NULL, n ? n : 1, sizeof(*peers));
	if (n > 0)
		memcpy(peers, table.peers, n * sizeof(*peers));
	pthread_rwlock_unlock(&table.lock);
	for (size_t i = 0; i < n; i++)
		fn(peers[i], arg);
	free(peers);
}

/* peer_retire - a reload removed the peers conf no longer relays to: each
 * one is gone, its threads end, its jobs stay in LMDB (routed again) */
void peer_retire(const struct conf *conf)
{
	pthread_rwlock_rdlock(&table.lock);
	for (size_t i = 0; i < table.n; i++) {
		struct peer_rt *rt = table.peers[i];
		const struct conf_peer *p = conf_peer_find(conf, rt->name);

		if (rt->gone || (p != NULL && p->host[0]))
			continue;
		log_info("peer %s: removed from the configuration: its connections close, its "
			 "mail is routed again", rt->name);
		pthread_mutex_lock(&rt->lock);
		rt->gone = 1;
		rt->q.count = 0;	/* the jobs stay in LMDB */
		metric_set(stats.breaker, 0, rt->name);	/* no alert for a peer that is gone */
		pthread_cond_broadcast(&rt->ready);
		pthread_mutex_unlock(&rt->lock);
	}
	pthread_rwlock_unlock(&table.lock);
}

/* peer_stop - ternd stops: from now on peer_stopping says so */
void peer_stop(void)
{
	__atomic_store_n(&table.stopping, 1, __ATOMIC_RELAXED);
}

/* peer_table_free - every peer freed, once their threads have ended */
void peer_table_free(void)
{
	for (size_t i = 0; i < table.n; i++) {
		struct peer_rt *rt = table.peers[i];

		SSL_CTX_free(rt->tls);
		for (size_t k = 0; k < rt->nretired; k++)
			SSL_CTX_free(rt->retired[k]);
		free(rt->retired);
		free(rt->threads);
		free(rt->alive);
		free(rt->conn);
		jobq_free(&rt->q);
		free(rt->settings);
		free(rt->name);
		free(rt);
	}
	free(table.peers);
	table.peers = NULL;
	table.n = 0;
}
