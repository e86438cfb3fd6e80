/*
 * breaker.h - a relayed peer's circuit breaker and its token buckets:
 * pure policy over plain structs. The caller holds the lock that guards
 * them and passes the time in (now, microseconds since the epoch), so
 * that a unit test can drive them with a clock of its own. Never takes
 * a lock, reads a clock, sleeps, or touches a socket or the store; the
 * only side effect is one log line per change of state (open, half-open,
 * closed). The gauge is the caller's: after a call, when changed is set,
 * it publishes the state and clears changed.
 *
 * Each attempt holds a pass from breaker_allow, and the breaker judges
 * it by the pass: a result of an attempt let through before the latest
 * change of state (an older epoch) neither closes nor opens it again.
 * A pass ends with exactly one verdict: breaker_result with a failure
 * (no connection), breaker_attempt (its transaction's outcome), or
 * breaker_cancel (nothing was tried). Usage, under the caller's lock:
 *
 *	if (breaker_allow(b, p, now, &pass)) {
 *		connect; breaker_result(b, p, backup, &pass, ok, why, now);
 *		breaker_begin(b, &pass, now); transaction;
 *		breaker_attempt(b, p, backup, &pass, failed, ms, now);
 *	}
 *
 * A reset (closed, cooldown back to its minimum) is: state CLOSED,
 * epoch bumped, probing, failures and ring_len 0.
 */
#ifndef TERN_BREAKER_H
#define TERN_BREAKER_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"

#define BREAKER_RING 256		/* recent attempts kept per peer */
#define BREAKER_MIN_ATTEMPTS 20		/* in breaker_window, before rate or latency count */
#define BREAKER_INFLIGHT 256		/* transactions in flight whose start is kept */

enum breaker_state { BREAKER_CLOSED, BREAKER_OPEN, BREAKER_HALF_OPEN };

/* What the scheduler may offer the peer now (breaker_due). */
enum breaker_offer {
	BREAKER_GO,			/* closed: all that is due */
	BREAKER_PROBE,			/* one job, for the half-open probe */
	BREAKER_HOLD			/* nothing: its mail is not read */
};

/* One recent attempt, for the error rate and the latency. */
struct breaker_sample {
	uint64_t at;			/* when it ended */
	uint32_t ms;			/* transaction time; UINT32_MAX: no transaction */
	int failed;			/* temporary failure: 4xx, lost or no connection */
};

/* A transaction in flight. */
struct breaker_flight {
	uint64_t start;			/* 0: a free slot */
	unsigned epoch;			/* its pass's */
};

/* An attempt's leave to go, from breaker_allow. */
struct breaker_pass {
	unsigned epoch;			/* the breaker's when it was given */
	int probe;			/* the half-open breaker's one probe */
	int slot;			/* its transaction in inflight[], or -1 */
	int done;			/* its verdict was given */
};

struct breaker {
	enum breaker_state state;
	unsigned epoch;			/* bumped at each change of state */
	int probing;			/* half-open: the probe is out */
	int failures;			/* consecutive connection failures */
	uint64_t open_until;
	long long cooldown_ms;		/* the current (or last) opening's */
	struct breaker_sample ring[BREAKER_RING];	/* the newest at ring[(next - 1) % size] */
	size_t ring_next, ring_len;
	struct breaker_flight inflight[BREAKER_INFLIGHT];
	int changed;			/* state was set: the caller publishes it */
};

/* A token bucket. */
struct bucket {
	double tokens;
	uint64_t refilled;
};

int breaker_allow(struct breaker *b, const struct conf_peer *p, uint64_t now,
		  struct breaker_pass *pass);
enum breaker_offer breaker_due(struct breaker *b, const struct conf_peer *p, const char *backup,
			       uint64_t now);
void breaker_result(struct breaker *b, const struct conf_peer *p, const char *backup,
		    struct breaker_pass *pass, int ok, const char *why, uint64_t now);
void breaker_begin(struct breaker *b, struct breaker_pass *pass, uint64_t now);
void breaker_attempt(struct breaker *b, const struct conf_peer *p, const char *backup,
		     struct breaker_pass *pass, int failed, uint32_t ms, uint64_t now);
void breaker_cancel(struct breaker *b, struct breaker_pass *pass);
void breaker_reset(struct breaker *b, const struct conf_peer *p, uint64_t now);

uint64_t bucket_take(struct bucket *b, long long interval_us, double burst, uint64_t now);
double rate_burst(const struct conf_peer *p);

#endif
