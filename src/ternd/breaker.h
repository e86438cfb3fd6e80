/*
 * breaker.h - a relayed peer's circuit breaker and its token buckets:
 * pure policy over plain structs. The caller holds the lock that guards
 * them and passes the time in (now, microseconds since the epoch), so
 * that a unit test can drive them with a clock of its own. Never takes
 * a lock, reads a clock, sleeps, or touches a socket or the store; the
 * only side effect is a log line when the breaker opens, half-opens or
 * closes. The gauge is the caller's: after a call, when changed is set,
 * it publishes the state and clears changed.
 */
#ifndef TERN_BREAKER_H
#define TERN_BREAKER_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"

#define BREAKER_RING 256		/* recent attempts kept per peer */
#define BREAKER_MIN_ATTEMPTS 20		/* in breaker_window, before rate or latency count */

enum breaker_state { BREAKER_CLOSED, BREAKER_OPEN, BREAKER_HALF_OPEN };

/* One recent attempt, for the error rate and the latency. */
struct breaker_sample {
	uint64_t at;			/* when it ended */
	uint32_t ms;			/* transaction time; UINT32_MAX: no transaction */
	int failed;			/* temporary failure: 4xx, lost or no connection */
};

struct breaker {
	enum breaker_state state;
	int failures;			/* consecutive connection failures */
	uint64_t open_until;
	long long cooldown_ms;		/* the next opening's; set to breaker_cooldown at start */
	struct breaker_sample ring[BREAKER_RING];	/* the newest at ring[(next - 1) % size] */
	size_t ring_next, ring_len;
	int changed;			/* state was set: the caller publishes it */
};

/* A token bucket. */
struct bucket {
	double tokens;
	uint64_t refilled;
};

int breaker_allow(struct breaker *b, const char *peer, uint64_t now);
void breaker_attempt(struct breaker *b, const struct conf_peer *p, const char *backup, int failed,
		     uint32_t ms, uint64_t now);
void breaker_result(struct breaker *b, const struct conf_peer *p, const char *backup, int ok,
		    const char *why, uint64_t now);
void breaker_reset(struct breaker *b, const struct conf_peer *p, uint64_t now);

uint64_t bucket_take(struct bucket *b, long long interval_us, double burst, uint64_t now);
double rate_burst(const struct conf_peer *p);

#endif
