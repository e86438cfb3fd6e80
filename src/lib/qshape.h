/*
 * qshape - the shape of the queue by age, as Postfix's qshape shows it:
 * live recipients counted per key (recipient domain or relay peer) in
 * age buckets of 5, 10, 20, ... 1280 minutes and older. Shared by
 * "ternq stats" and tern-report. Pure: no I/O, fed one message at a time.
 */
#ifndef TERN_QSHAPE_H
#define TERN_QSHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"

#define QSHAPE_NBOUNDS 9
#define QSHAPE_NBUCKETS (QSHAPE_NBOUNDS + 1)	/* the last: older than the last bound */

extern const unsigned qshape_bounds[QSHAPE_NBOUNDS];	/* minutes */

struct qshape_row {
	char *key;
	unsigned long total;
	unsigned long count[QSHAPE_NBUCKETS];
};

struct qshape {
	int by_peer;			/* key: peer, else recipient domain */
	uint64_t now_us;
	struct qshape_row *rows;
	size_t n, cap;
	struct qshape_row all;
};

void qshape_add(struct qshape *s, const char *key, uint64_t age_min);
void qshape_add_bucket(struct qshape *s, const char *key, size_t b, unsigned long n);
int qshape_msg(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg);
void qshape_sort(struct qshape *s);
void qshape_free(struct qshape *s);

#endif
