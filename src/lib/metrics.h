/*
 * metrics - a small registry of Prometheus metrics (counters, gauges,
 * histograms) and their text exposition (format 0.0.4).
 *
 * Every metric and its label sets are registered before the threads that
 * update them run: at startup, and for a peer a reload adds, by the
 * thread that reloads (only label sets may be added then); label
 * values come from bounded sets (peer names from the configuration, fixed
 * enums), never from addresses or domains. Updates are lock-free (C11
 * atomics on the series), so hot paths never wait for a scrape, a
 * registration or each other. An update with a label set that was not
 * registered is dropped: an update never creates a series.
 */
#ifndef TERN_METRICS_H
#define TERN_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define METRIC_LABELS_MAX 3

enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

struct metric;

/* registration: metric_new, metric_gauge_fn (an unlabelled counter or
 * gauge computed at each scrape) and metric_collect at startup only, before
 * any thread updates or renders; metric_series then too, and later (it
 * serializes itself). labels: comma-separated names or NULL.
 * metric_series of a label set registered already does nothing. */
struct metric *metric_new(enum metric_type type, const char *name, const char *help,
			  const char *labels, const double *buckets, size_t nbuckets);
void metric_series(struct metric *m, ...);
void metric_gauge_fn(struct metric *m, double (*fn)(void *arg), void *arg);
/* metric_collect - a labelled gauge that fn sets (metric_set on its
 * registered series) at each scrape, every series 0 before; scrapes
 * take turns, so fn runs once at a time (never on an update path) */
void metric_collect(struct metric *m, void (*fn)(struct metric *m, void *arg), void *arg);

/* updates: label values follow, as many as the metric has labels.
 * metric_add returns 0 when the label set is not registered (the update
 * is dropped): a caller whose label values come from a small fixed set
 * may register the set then (metric_series) and add again */
int metric_add(struct metric *m, uint64_t n, ...);
void metric_gauge_add(struct metric *m, int64_t delta, ...);
void metric_set(struct metric *m, int64_t value, ...);
void metric_observe(struct metric *m, double value, ...);

/* metrics_render - every metric, HELP and TYPE lines first; malloc'ed */
char *metrics_render(size_t *len);
/* metrics_reset - forget every metric (tests) */
void metrics_reset(void);

/* the HTTP endpoint (metrics_http.c) */
struct metrics_server;
int metrics_listen_parse(const char *spec, char *host, size_t hostlen, int *port);
struct metrics_server *metrics_serve(const char *spec, char *err, size_t errlen);
void metrics_server_stop(struct metrics_server **srv);

#endif
