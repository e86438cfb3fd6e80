/*
 * ratelimit - one log line per cause and interval. A condition that lasts
 * (a domain with no route, a peer without a host) is warned about once a
 * minute, not once per message, and the line says how many warnings were
 * held back since the last one. A fixed table of causes (keys) under one
 * lock: never allocates, never logs; the caller logs when it passes.
 *
 *     static struct ratelimit rl = RATELIMIT_INIT;
 *     uint64_t held;
 *     if (ratelimit_pass(&rl, "no_route", now_us(), 60000000, &held))
 *             log_warning("... (%" PRIu64 " more since the last warning)", held);
 *
 * A new cause when the table is full takes the entry used longest ago.
 */
#ifndef TERN_RATELIMIT_H
#define TERN_RATELIMIT_H

#include <pthread.h>
#include <stdint.h>

#define RATELIMIT_KEYS 64		/* causes remembered */
#define RATELIMIT_KEY_MAX 128		/* octets of a key, longer ones are cut */
#define RATELIMIT_MINUTE 60000000ULL	/* microseconds: the interval of ternd's warnings */

struct ratelimit {
	pthread_mutex_t lock;
	struct {
		char key[RATELIMIT_KEY_MAX];
		uint64_t last;			/* when it last passed, 0: unused */
		uint64_t held;			/* calls that did not pass since */
	} e[RATELIMIT_KEYS];
};

#define RATELIMIT_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}

int ratelimit_pass(struct ratelimit *rl, const char *key, uint64_t now, uint64_t interval,
		   uint64_t *held);

#endif
