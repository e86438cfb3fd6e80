/*
 * peer.h - a relayed peer's runtime state, as the delivery modules share
 * it (peer.c keeps the table of them): relay.c makes and reloads them and
 * runs their delivery threads; sched.c queues their jobs as their
 * breakers allow; relay_result.c feeds the breakers. Every field
 * marked "under lock" is read and written only with lock held. Never
 * freed before relay_stop, so a pointer from peer_find stays valid.
 */
#ifndef TERN_PEER_H
#define TERN_PEER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "breaker.h"
#include "conf.h"
#include "jobq.h"
#include "store.h"
#include "window.h"

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
	pthread_cond_t ready;		/* a job was queued */
	struct jobq q;			/* under lock */
	pthread_t *threads;
	int nthreads;
	struct breaker br;		/* under lock */
	struct window_cc cc;		/* under lock: its pipeline window (window.h) */
	struct peer_rt *backup;
	struct bucket messages, connections;	/* rate limits (under lock) */
	/* for ternq peers (under lock) */
	enum breaker_state br_shown;	/* the breaker's state since br_since */
	uint64_t br_since;
	char last_error[256];		/* the last connection failure's text, or "" */
	uint64_t last_error_at;
	char *conn;			/* per thread slot: 0 no connection, 1 idle, 2 busy */
	struct store_due_pos due;	/* the scheduler's only: where its walk of the
					 * peer's due mail goes on (sched.c) */
};

/* One peer as ternq peers shows it (peer_views). */
struct peer_view {
	const char *name;
	enum breaker_state state;
	uint64_t since, open_until, last_error_at;
	int busy, idle;
	const char *last_error;
};

int peer_stopping(void);
void peer_stop(void);
struct peer_rt *peer_new(const struct conf_peer *p, SSL_CTX *tls);
void peer_add(struct peer_rt *rt);
void peer_backups(const struct conf *conf);
void peer_retire(const struct conf *conf);
void peer_each(void (*fn)(struct peer_rt *rt, void *arg), void *arg);
void peer_table_free(void);
struct peer_rt *peer_find(const char *name);
char *peer_settings(const struct conf_peer *p);
void peer_resettle(struct peer_rt *rt, SSL_CTX *tls, char *settings);
enum breaker_offer peer_due(struct peer_rt *rt, uint64_t now);
int peer_allow(struct peer_rt *rt, const struct conf_peer *p, struct breaker_pass *pass);
void peer_connected(struct peer_rt *rt, const struct conf_peer *p, struct breaker_pass *pass, int ok,
		    const char *why);
void peer_begin(struct peer_rt *rt, struct breaker_pass *pass);
void peer_attempt(struct peer_rt *rt, const struct conf_peer *p, struct breaker_pass *pass, int failed,
		  uint32_t ms);
void peer_cancel(struct peer_rt *rt, struct breaker_pass *pass);
void peer_bucket_wait(struct peer_rt *rt, struct bucket *b, long long interval_us, double burst);
void peer_rate_wait(struct peer_rt *rt, const struct conf_peer *p);
size_t peer_window(struct peer_rt *rt, const struct conf_peer *p, struct window_cc *own, int acked,
		   uint64_t rtt_us, int limited);
void peer_window_loss(struct peer_rt *rt, struct window_cc *own, const char *where, size_t inflight);
void peer_views(void (*fn)(const struct peer_view *v, void *arg), void *arg);
int peer_reset(const char *name);

#endif
