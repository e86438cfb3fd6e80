/*
 * metrics - the metric registry and its Prometheus text exposition.
 *
 * Registration builds a list of metrics, each with its series (one per
 * label set). Updates find their series without a lock and change it
 * with atomics. Series may also be registered later (a peer added by a
 * reload), one registration at a time: a series is published, complete,
 * by a release store of the count that readers load first; an index
 * that had to grow is replaced, never freed while running (a reader may
 * still be walking it), so readers never lock either. A
 * histogram keeps one counter per bucket (not cumulative) and an extra
 * one for +Inf; the exposition makes them cumulative and derives _count
 * from them, so _count always equals the +Inf bucket even while updates
 * race with a scrape. This module must never allocate or lock on update.
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "xalloc.h"

struct series {
	char *values[METRIC_LABELS_MAX];
	_Atomic int64_t value;			/* counter or gauge */
	_Atomic uint64_t *buckets;		/* histogram: nbuckets + 1 (+Inf) */
	_Atomic uint64_t sum;			/* histogram: a double's bits */
};

struct metric {
	struct metric *next;
	enum metric_type type;
	char *name, *help;
	char *labels[METRIC_LABELS_MAX];
	size_t nlabels;
	double *buckets;
	size_t nbuckets;
	struct series **_Atomic index;	/* the series, in registration order */
	_Atomic size_t nseries;		/* how many of them readers may use */
	size_t cap;			/* the index's room (registration only) */
	struct series ***outgrown;	/* indexes replaced, freed by metrics_reset */
	size_t noutgrown;
	double (*fn)(void *);
	void *arg;
	void (*collect)(struct metric *, void *);
	void *collect_arg;
};

static struct metric *metrics, **metrics_tail = &metrics;
static pthread_mutex_t registering = PTHREAD_MUTEX_INITIALIZER;	/* metric_series */
static pthread_mutex_t collecting = PTHREAD_MUTEX_INITIALIZER;	/* metric_collect's fns */

/* metric_new - register a metric; an unlabelled one gets its series now */
struct metric *metric_new(enum metric_type type, const char *name, const char *help,
			  const char *labels, const double *buckets, size_t nbuckets)
{
	struct metric *m = xcalloc(1, sizeof(*m));

	m->type = type;
	m->name = xstrdup(name);
	m->help = xstrdup(help);
	if (labels) {
		char *copy = xstrdup(labels), *save = NULL;

		for (char *l = strtok_r(copy, ",", &save); l && m->nlabels < METRIC_LABELS_MAX;
		     l = strtok_r(NULL, ",", &save))
			m->labels[m->nlabels++] = xstrdup(l);
		free(copy);
	}
	if (type == METRIC_HISTOGRAM) {
		m->buckets = xcalloc(nbuckets ? nbuckets : 1, sizeof(*m->buckets));
		memcpy(m->buckets, buckets, nbuckets * sizeof(*buckets));
		m->nbuckets = nbuckets;
	}
	*metrics_tail = m;
	metrics_tail = &m->next;
	if (m->nlabels == 0)
		metric_series(m);
	return m;
}

static struct series *find(struct metric *m, va_list ap);

/* metric_series - register one label set (its values follow); one
 * registered already is left as it is */
void metric_series(struct metric *m, ...)
{
	struct series *s, **index;
	size_t n;
	va_list ap;

	pthread_mutex_lock(&registering);
	index = atomic_load_explicit(&m->index, memory_order_relaxed);
	n = atomic_load_explicit(&m->nseries, memory_order_relaxed);
	va_start(ap, m);
	s = find(m, ap);
	va_end(ap);
	if (s) {
		pthread_mutex_unlock(&registering);
		return;
	}
	s = xcalloc(1, sizeof(*s));
	va_start(ap, m);
	for (size_t i = 0; i < m->nlabels; i++)
		s->values[i] = xstrdup(va_arg(ap, const char *));
	va_end(ap);
	if (m->type == METRIC_HISTOGRAM)
		s->buckets = xcalloc(m->nbuckets + 1, sizeof(*s->buckets));
	if (n == m->cap) {	/* a copy: readers may be walking the old index */
		struct series **grown = xgrowarray(NULL, &m->cap, n + 1, sizeof(*grown));

		if (index) {
			memcpy(grown, index, n * sizeof(*grown));
			m->outgrown = xreallocarray(m->outgrown, m->noutgrown + 1, sizeof(*m->outgrown));
			m->outgrown[m->noutgrown++] = index;
		}
		atomic_store_explicit(&m->index, grown, memory_order_release);
		index = grown;
	}
	index[n] = s;
	atomic_store_explicit(&m->nseries, n + 1, memory_order_release);
	pthread_mutex_unlock(&registering);
}

/* metric_gauge_fn - an unlabelled counter or gauge computed at each scrape */
void metric_gauge_fn(struct metric *m, double (*fn)(void *arg), void *arg)
{
	m->fn = fn;
	m->arg = arg;
}

/* metric_collect - a labelled gauge set by fn at each scrape */
void metric_collect(struct metric *m, void (*fn)(struct metric *m, void *arg), void *arg)
{
	m->collect = fn;
	m->collect_arg = arg;
}

/* series_at - the registered series and their count, for a reader. The
 * count first: the index loaded after it is the one its last series was
 * stored in, or a larger copy; the other way round, an index could be
 * read past its end. */
static struct series **series_at(struct metric *m, size_t *n)
{
	*n = atomic_load_explicit(&m->nseries, memory_order_acquire);
	return atomic_load_explicit(&m->index, memory_order_acquire);
}

/* find - the series with these label values, or NULL (not registered) */
static struct series *find(struct metric *m, va_list ap)
{
	const char *v[METRIC_LABELS_MAX];
	struct series **index;
	size_t n;

	if (m == NULL)
		return NULL;
	for (size_t i = 0; i < m->nlabels; i++)
		v[i] = va_arg(ap, const char *);
	index = series_at(m, &n);
	for (size_t k = 0; k < n; k++) {
		size_t i;

		for (i = 0; i < m->nlabels; i++)
			if (v[i] == NULL || strcmp(index[k]->values[i], v[i]) != 0)
				break;
		if (i == m->nlabels)
			return index[k];
	}
	return NULL;
}

/* metric_add - count n more (counter); 0 when not registered */
int metric_add(struct metric *m, uint64_t n, ...)
{
	struct series *s;
	va_list ap;

	va_start(ap, n);
	s = find(m, ap);
	va_end(ap);
	if (s == NULL)
		return 0;
	atomic_fetch_add_explicit(&s->value, (int64_t)n, memory_order_relaxed);
	return 1;
}

/* metric_gauge_add - move a gauge up or down */
void metric_gauge_add(struct metric *m, int64_t delta, ...)
{
	struct series *s;
	va_list ap;

	va_start(ap, delta);
	s = find(m, ap);
	va_end(ap);
	if (s)
		atomic_fetch_add_explicit(&s->value, delta, memory_order_relaxed);
}

/* metric_set - set a gauge */
void metric_set(struct metric *m, int64_t value, ...)
{
	struct series *s;
	va_list ap;

	va_start(ap, value);
	s = find(m, ap);
	va_end(ap);
	if (s)
		atomic_store_explicit(&s->value, value, memory_order_relaxed);
}

/* metric_observe - one observation into a histogram */
void metric_observe(struct metric *m, double value, ...)
{
	struct series *s;
	uint64_t old, new;
	double sum;
	size_t b = 0;
	va_list ap;

	va_start(ap, value);
	s = find(m, ap);
	va_end(ap);
	if (s == NULL || s->buckets == NULL)
		return;
	while (b < m->nbuckets && value > m->buckets[b])
		b++;
	atomic_fetch_add_explicit(&s->buckets[b], 1, memory_order_relaxed);
	old = atomic_load_explicit(&s->sum, memory_order_relaxed);
	do {
		memcpy(&sum, &old, sizeof(sum));
		sum += value;
		memcpy(&new, &sum, sizeof(new));
	} while (!atomic_compare_exchange_weak_explicit(&s->sum, &old, new, memory_order_relaxed,
							 memory_order_relaxed));
}

/* A growing output buffer. */
struct out {
	char *data;
	size_t len, cap;
};

/* put - append formatted text */
static void __attribute__((format(printf, 2, 3))) put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->data + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < o->cap - o->len)
			break;
		o->cap = o->cap * 2 + (size_t)(n > 0 ? n : 0);
		o->data = xreallocarray(o->data, o->cap, 1);
	}
	o->len += (size_t)n;
}

/* put_escaped - text with \ and newline escaped, and " when in a label */
static void put_escaped(struct out *o, const char *s, int label)
{
	for (; *s; s++) {
		if (*s == '\\')
			put(o, "\\\\");
		else if (*s == '\n')
			put(o, "\\n");
		else if (*s == '"' && label)
			put(o, "\\\"");
		else
			put(o, "%c", *s);
	}
}

/* put_labels - {a="x",b="y"[,le="..."]}, or nothing without labels */
static void put_labels(struct out *o, const struct metric *m, const struct series *s, const char *le)
{
	if (m->nlabels == 0 && le == NULL)
		return;
	put(o, "{");
	for (size_t i = 0; i < m->nlabels; i++) {
		put(o, "%s%s=\"", i ? "," : "", m->labels[i]);
		put_escaped(o, s->values[i], 1);
		put(o, "\"");
	}
	if (le)
		put(o, "%sle=\"%s\"", m->nlabels ? "," : "", le);
	put(o, "}");
}

/* put_histogram - cumulative buckets, _sum and _count of one series */
static void put_histogram(struct out *o, const struct metric *m, struct series *s)
{
	uint64_t total = 0, bits;
	double sum;
	char le[64];

	for (size_t b = 0; b <= m->nbuckets; b++) {
		total += atomic_load_explicit(&s->buckets[b], memory_order_relaxed);
		if (b < m->nbuckets)
			snprintf(le, sizeof(le), "%.15g", m->buckets[b]);
		else
			snprintf(le, sizeof(le), "+Inf");
		put(o, "%s_bucket", m->name);
		put_labels(o, m, s, le);
		put(o, " %llu\n", (unsigned long long)total);
	}
	bits = atomic_load_explicit(&s->sum, memory_order_relaxed);
	memcpy(&sum, &bits, sizeof(sum));
	put(o, "%s_sum", m->name);
	put_labels(o, m, s, NULL);
	put(o, " %.15g\n%s_count", sum, m->name);
	put_labels(o, m, s, NULL);
	put(o, " %llu\n", (unsigned long long)total);
}

/* metrics_render - the exposition of every registered metric */
char *metrics_render(size_t *len)
{
	static const char *const types[] = {"counter", "gauge", "histogram"};
	struct out o = {xmalloc(4096), 0, 4096};

	o.data[0] = '\0';
	for (struct metric *m = metrics; m; m = m->next) {
		put(&o, "# HELP %s ", m->name);
		put_escaped(&o, m->help, 0);
		put(&o, "\n# TYPE %s %s\n", m->name, types[m->type]);
		size_t n;
		struct series **index;

		if (m->collect) {	/* unlocked below, once its series are out */
			pthread_mutex_lock(&collecting);
			index = series_at(m, &n);
			for (size_t k = 0; k < n; k++)
				atomic_store_explicit(&index[k]->value, 0, memory_order_relaxed);
			m->collect(m, m->collect_arg);
		}
		index = series_at(m, &n);
		for (size_t k = 0; k < n; k++) {
			struct series *s = index[k];

			if (m->type == METRIC_HISTOGRAM) {
				put_histogram(&o, m, s);
				continue;
			}
			put(&o, "%s", m->name);
			put_labels(&o, m, s, NULL);
			if (m->fn)
				put(&o, " %.15g\n", m->fn(m->arg));
			else
				put(&o, " %lld\n", (long long)atomic_load_explicit(&s->value,
										   memory_order_relaxed));
		}
		if (m->collect)
			pthread_mutex_unlock(&collecting);
	}
	*len = o.len;
	return o.data;
}

/* metrics_listen_parse - "HOST:PORT" or "[V6]:PORT" into its parts;
 * 0, or -1 when malformed (no I/O: the address is checked by the caller) */
int metrics_listen_parse(const char *spec, char *host, size_t hostlen, int *port)
{
	const char *colon, *h = spec;
	size_t n;
	char *end;
	long p;

	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (close == NULL || close[1] != ':')
			return -1;
		h = spec + 1;
		n = (size_t)(close - h);
		colon = close + 1;
	} else {
		if ((colon = strrchr(spec, ':')) == NULL || memchr(spec, ':', (size_t)(colon - spec)))
			return -1;	/* an IPv6 address needs its brackets */
		n = (size_t)(colon - spec);
	}
	if (n == 0 || n >= hostlen || colon[1] < '0' || colon[1] > '9')
		return -1;
	if (memchr(h, '[', n) || memchr(h, ']', n) || (spec[0] == '[' && !memchr(h, ':', n)))
		return -1;	/* brackets only around an IPv6 address */
	p = strtol(colon + 1, &end, 10);
	if (*end != '\0' || p < 1 || p > 65535)
		return -1;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (int)p;
	return 0;
}

/* metrics_reset - free every metric */
void metrics_reset(void)
{
	while (metrics) {
		struct metric *m = metrics;

		metrics = m->next;
		for (size_t k = 0; k < m->nseries; k++) {
			for (size_t i = 0; i < m->nlabels; i++)
				free(m->index[k]->values[i]);
			free((void *)m->index[k]->buckets);
			free(m->index[k]);
		}
		for (size_t i = 0; i < m->nlabels; i++)
			free(m->labels[i]);
		for (size_t i = 0; i < m->noutgrown; i++)
			free(m->outgrown[i]);
		free(m->outgrown);
		free(m->index);
		free(m->buckets);
		free(m->name);
		free(m->help);
		free(m);
	}
	metrics_tail = &metrics;
}
