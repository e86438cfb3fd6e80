/*
 * backoff.h - when a deferred recipient is tried again: exponential
 * backoff from min_backoff to max_backoff with a jitter of 0.8 to 1.2,
 * never past max_queue_lifetime, after which it expires. Pure: times are
 * passed in (microseconds since the epoch); never reads a clock or the
 * store.
 */
#ifndef TERN_BACKOFF_H
#define TERN_BACKOFF_H

#include <stdint.h>

#include "conf.h"

uint64_t backoff_us(const struct conf *conf, uint32_t attempts);
int backoff_next(const struct conf *conf, uint32_t attempts, uint64_t arrival_us, uint64_t now,
		 uint64_t *next_us);

#endif
