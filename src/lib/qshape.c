/*
 * qshape - the queue's shape by age (see qshape.h). Rows grow with the
 * number of distinct keys in the queue; the queue itself bounds that.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "qshape.h"
#include "xalloc.h"

const unsigned qshape_bounds[QSHAPE_NBOUNDS] = {5, 10, 20, 40, 80, 160, 320, 640, 1280};

/* qshape_add - count one recipient of a message of the given age */
void qshape_add(struct qshape *s, const char *key, uint64_t age_min)
{
	size_t b = 0;

	while (b < QSHAPE_NBUCKETS - 1 && age_min >= qshape_bounds[b])
		b++;
	qshape_add_bucket(s, key, b, 1);
}

/* qshape_add_bucket - count n recipients in age bucket b */
void qshape_add_bucket(struct qshape *s, const char *key, size_t b, unsigned long n)
{
	size_t i;

	for (i = 0; i < s->n && strcasecmp(s->rows[i].key, key) != 0; i++)
		;
	if (i == s->n) {
		s->rows = xgrowarray(s->rows, &s->cap, s->n + 1, sizeof(*s->rows));
		memset(&s->rows[s->n], 0, sizeof(s->rows[0]));
		s->rows[s->n++].key = xstrdup(key);
	}
	s->rows[i].total += n;
	s->rows[i].count[b] += n;
	s->all.total += n;
	s->all.count[b] += n;
}

/* qshape_msg - a message's live recipients into the shape (a store_msg_fn) */
int qshape_msg(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg)
{
	struct qshape *s = arg;
	uint64_t age_min = s->now_us > m->arrival_us ? (s->now_us - m->arrival_us) / 60000000u : 0;

	for (size_t i = 0; i < n; i++) {
		const char *at = strrchr(r[i].addr, '@');

		if (r[i].state != RCPT_QUEUED && r[i].state != RCPT_DEFERRED)
			continue;
		qshape_add(s, s->by_peer ? r[i].peer : at ? at + 1 : r[i].addr, age_min);
	}
	return 0;
}

/* by_total - rows by total, largest first, then by key */
static int by_total(const void *a, const void *b)
{
	const struct qshape_row *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : strcmp(x->key, y->key);
}

/* qshape_sort - largest rows first */
void qshape_sort(struct qshape *s)
{
	if (s->n)
		qsort(s->rows, s->n, sizeof(*s->rows), by_total);
}

/* qshape_free - free the rows and zero the shape */
void qshape_free(struct qshape *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->rows[i].key);
	free(s->rows);
	memset(s, 0, sizeof(*s));
}
