/*
 * backoff - the retry policy of a deferred recipient (see backoff.h).
 */
#include "config.h"

#include <sodium.h>

#include "backoff.h"

/* backoff_us - the delay before attempt number attempts+1 */
uint64_t backoff_us(const struct conf *conf, uint32_t attempts)
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

/* backoff_next - the next attempt of a recipient deferred at now after
 * attempts attempts, into next_us: never past the message's lifetime;
 * 1 when that is over (the recipient expires; next_us is then now plus
 * the backoff), else 0 */
int backoff_next(const struct conf *conf, uint32_t attempts, uint64_t arrival_us, uint64_t now,
		 uint64_t *next_us)
{
	uint64_t expire = arrival_us + (uint64_t)conf->ternd.max_queue_lifetime * 1000;

	*next_us = now + backoff_us(conf, attempts);
	if (*next_us <= expire)
		return 0;
	if (now >= expire)
		return 1;
	*next_us = expire;
	return 0;
}
