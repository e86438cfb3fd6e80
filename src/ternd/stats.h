/*
 * stats.h - ternd's Prometheus metrics: the handles the threads update
 * (one line at each place where something happens) and the endpoint.
 * The metric names, labels and meanings are listed in ternd(8).
 */
#ifndef TERN_STATS_H
#define TERN_STATS_H

#include <stdint.h>

#include "conf.h"
#include "metrics.h"

struct stats {
	struct metric *received, *rcpts_received, *deliveries, *transmission, *queue_delay;
	struct metric *queue, *oldest, *notices, *conns_opened, *conns, *transactions;
	struct metric *tls_handshakes, *tls_seconds, *breaker, *batch, *commit_seconds, *bytes;
	struct metric *codes, *queue_rcpts, *spans_dropped, *unroutable, *conns_tried;
	struct metric *duplicates, *window;
};

extern struct stats stats;

/* conn_send_body's methods, for tern_bytes_sent_total{method} */
extern const char *const stats_send_methods[3];

void stats_init(const struct conf *conf);
void stats_peer(const char *peer);
void stats_start(const struct conf *conf);
void stats_stop(void);
void stats_queue(int was, int now);
void stats_queued_set(uint64_t n);
void stats_queued_add(int64_t n);
uint64_t stats_queued(void);
void stats_delivery(const char *peer, int state, const char *esc);
int64_t stats_peer_rcpts(const char *peer);

#endif
