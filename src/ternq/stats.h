/* stats.h - ternq stats: the queue's shape, ternd's storage state, the
 * spool's octets */
#ifndef TERN_TERNQ_STATS_H
#define TERN_TERNQ_STATS_H

#include <stdint.h>

#include "conf.h"
#include "store.h"

struct stats_ctx {
	const struct conf *conf;
	struct store *store;
	const char *by;			/* "domain" or "peer" */
	int json;
	uint64_t now;			/* microseconds */
	long long timeout_ms;		/* for the question to ternd */
};

int ternq_stats(const struct stats_ctx *q);

#endif
