/*
 * ratelimit - one log line per cause and interval (see ratelimit.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "ratelimit.h"

/* ratelimit_pass - 1 when the cause key has not passed in the interval
 * before now (its first time, or interval since the last), with *held
 * the calls that did not pass since then; else 0, and the call is held */
int ratelimit_pass(struct ratelimit *rl, const char *key, uint64_t now, uint64_t interval,
		   uint64_t *held)
{
	size_t i, oldest = 0;
	int pass;

	pthread_mutex_lock(&rl->lock);
	for (i = 0; i < RATELIMIT_KEYS; i++) {
		if (rl->e[i].last == 0 || strncmp(rl->e[i].key, key, RATELIMIT_KEY_MAX - 1) == 0)
			break;
		if (rl->e[i].last < rl->e[oldest].last)
			oldest = i;
	}
	if (i == RATELIMIT_KEYS || rl->e[i].last == 0) {	/* a new cause */
		i = i == RATELIMIT_KEYS ? oldest : i;
		snprintf(rl->e[i].key, sizeof(rl->e[i].key), "%s", key);
		rl->e[i].last = 0;
		rl->e[i].held = 0;
	}
	pass = rl->e[i].last == 0 || now < rl->e[i].last || now - rl->e[i].last >= interval;
	if (pass) {
		*held = rl->e[i].held;
		rl->e[i].held = 0;
		rl->e[i].last = now ? now : 1;
	} else {
		rl->e[i].held++;
	}
	pthread_mutex_unlock(&rl->lock);
	return pass;
}
