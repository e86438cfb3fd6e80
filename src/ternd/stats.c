/*
 * stats - ternd's metrics: registration of every metric and label set (at
 * startup, and a new peer's at a reload), the queue gauges, and the HTTP
 * endpoint on metrics_listen.
 *
 * Peers are the label values of the configuration: those read at startup,
 * and each one a reload adds (stats_peer, before its threads start); a
 * removed peer's series stay until a restart, its circuit breaker gauge
 * reset to closed. tern_queue_messages starts from the queue database's
 * per-state counts (queue_count_move; a walk of the queue rebuilds them
 * when they do not add up to the messages in it) and is then moved by
 * every change of a message's state, so a scrape never reads the queue;
 * tern_queue_oldest_age_seconds is one LMDB lookup (the oldest queue id)
 * per scrape, tern_notices_waiting one table count, the map gauges one
 * look at LMDB's meta page, the spool gauges one read of the segment
 * table; tern_queue_recipients one lookup per peer (the count the store
 * moves with the schedule's entries, store_peer_rcpts), so a scrape
 * reads no recipient whatever the queue holds. The delivery codes'
 * series (tern_delivery_codes_total) are registered as they occur: the
 * label is one of RFC 3463's codes or "other"
 * (smtp_esc_label), so they stay fewer than 150 per peer.
 */
#include "config.h"

#include <stdatomic.h>
#include <string.h>

#include "log.h"
#include "metrics_std.h"
#include "smtp_reply.h"
#include "queue_ops.h"
#include "stats.h"
#include "ternd.h"
#include "unroutable.h"

struct stats stats;


static const char *const queue_states[] = {"queued", "deferred", "hold"};
static struct metrics_server *server;
/* the messages in the queue (max_queue_messages, STATUS=): set by
 * recovery, moved by the commits that add and remove messages */
static _Atomic uint64_t queued;

static const double seconds_wan[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
static const double seconds_queue[] = {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600,
				       14400, 86400};
static const double seconds_disk[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
				      0.5, 1, 2.5};
static const double batch_sizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* oldest_age - seconds since the oldest queued message's MAIL */
static double oldest_age(void *arg)
{
	uint64_t v, now = now_us(), t;

	(void)arg;
	if (store_first_qid(ternd.store, &v) < 0 || v == 0)
		return 0;
	t = qid_time_us(v);
	return now > t ? (double)(now - t) / 1e6 : 0;
}

/* the methods of tern_bytes_sent_total, in enum conn_send_method's order */
const char *const stats_send_methods[3] = {"sendfile", "ktls", "copy"};

/* notices_waiting - notifications kept in the queue database, not yet
 * queued as messages */
static double notices_waiting(void *arg)
{
	uint64_t n = 0;

	(void)arg;
	store_count_notices(ternd.store, &n);
	return (double)n;
}

/* map_used, map_size - the queue database's map: octets in use, its size */
static double map_used(void *arg)
{
	uint64_t used = 0, size = 0;

	(void)arg;
	store_map_usage(ternd.store, &used, &size);
	return (double)used;
}

static double map_size(void *arg)
{
	uint64_t used = 0, size = 0;

	(void)arg;
	store_map_usage(ternd.store, &used, &size);
	return (double)size;
}

/* stats_peer_rcpts - a peer's live recipients (its schedule entries,
 * held ones too), as tern_queue_recipients and ternq peers show them */
int64_t stats_peer_rcpts(const char *peer)
{
	uint64_t n = 0;

	store_peer_rcpts(ternd.store, peer, &n);
	return (int64_t)n;
}

/* queue_rcpts - at a scrape: each configured peer's live recipients */
static void queue_rcpts(struct metric *m, void *arg)
{
	const struct conf *conf = __atomic_load_n(&ternd.conf, __ATOMIC_ACQUIRE);

	(void)arg;
	for (size_t p = 0; p < conf->npeers; p++)
		metric_set(m, stats_peer_rcpts(conf->peers[p].name), conf->peers[p].name);
}

/* count_one - a message into its state's count */
static int count_one(const struct q_msg *m, const struct q_rcpt *rcpts, size_t n, void *arg)
{
	uint64_t *counts = arg;

	counts[queue_state(m, rcpts, n)]++;
	return 0;
}

/* queue_counts - startup: tern_queue_messages from the queue database's
 * counts; from a walk of the queue if they do not add up, written back */
static void queue_counts(void)
{
	uint64_t n[QSTATE_N] = {0};
	char err[256];
	int rc;

	if ((rc = queue_counts_get(ternd.store, n)) != 0) {
		memset(n, 0, sizeof(n));
		if (store_foreach(ternd.store, count_one, n) < 0)
			log_fatal("queue database: cannot count the messages in the queue");
		if (store_write(ternd.store, queue_counts_put, n, err, sizeof(err)) < 0)
			log_warning("queue database: cannot record the counts of messages per "
				    "state: %s; they are counted again at the next start", err);
		else if (rc == 1)
			log_info("queue database: counts of messages per state rebuilt (%llu "
				 "queued, %llu deferred, %llu held): an older layout, or counts "
				 "that did not add up", (unsigned long long)n[QSTATE_QUEUED],
				 (unsigned long long)n[QSTATE_DEFERRED],
				 (unsigned long long)n[QSTATE_HOLD]);
	}
	for (int i = 0; i < QSTATE_N; i++)
		metric_gauge_add(stats.queue, (int64_t)n[i], queue_states[i]);
}

static const char *const delivery_status[] = {"sent", "deferred", "bounced", "expired"};
static const char *const yes_no[] = {"yes", "no"};

/* stats_peer - register the series of a peer (again: nothing happens) */
void stats_peer(const char *peer)
{
	for (size_t i = 0; i < N(delivery_status); i++)
		metric_series(stats.deliveries, peer, delivery_status[i]);
	metric_series(stats.transmission, peer);
	metric_series(stats.queue_delay, peer);
	metric_series(stats.conns_opened, peer);
	metric_series(stats.conns_tried, peer);
	metric_series(stats.conns, peer, "idle");
	metric_series(stats.conns, peer, "busy");
	for (size_t i = 0; i < N(yes_no); i++) {
		metric_series(stats.transactions, peer, yes_no[i]);
		metric_series(stats.tls_handshakes, peer, "ok", yes_no[i]);
	}
	metric_series(stats.tls_handshakes, peer, "failed", "no");
	metric_series(stats.tls_seconds, peer);
	metric_series(stats.breaker, peer);
	metric_series(stats.queue_rcpts, peer);
	metric_series(stats.duplicates, peer);
	metric_series(stats.window, peer);
	for (size_t i = 0; i < 3; i++)
		metric_series(stats.bytes, peer, stats_send_methods[i]);
}

/* stats_init - register every metric and label set (before the threads) */
void stats_init(const struct conf *conf)
{
	stats.received = metric_new(METRIC_COUNTER, "tern_messages_received_total",
				    "Messages accepted (250 sent to the client), by listener.",
				    "listener", NULL, 0);
	metric_series(stats.received, "lmtp");
	metric_series(stats.received, "smtp");
	stats.rcpts_received = metric_new(METRIC_COUNTER, "tern_recipients_received_total",
					  "Recipients of the accepted messages.", NULL, NULL, 0);
	metrics_std_init();
	stats.deliveries = metric_new(METRIC_COUNTER, "tern_deliveries_total",
				      "Delivery attempts per recipient, by peer and outcome.",
				      "peer,status", NULL, 0);
	stats.codes = metric_new(METRIC_COUNTER, "tern_delivery_codes_total",
				 "Delivery attempts per recipient, by peer and enhanced status code "
				 "(RFC 3463; other for any other).", "peer,dsn", NULL, 0);
	stats.transmission = metric_new(METRIC_HISTOGRAM, "tern_delivery_transmission_seconds",
					"Time of one SMTP transaction with the peer, MAIL to the final reply.",
					"peer", seconds_wan, N(seconds_wan));
	stats.queue_delay = metric_new(METRIC_HISTOGRAM, "tern_queue_delay_seconds",
				       "Time from arrival to the start of a delivery attempt.",
				       "peer", seconds_queue, N(seconds_queue));
	stats.queue = metric_new(METRIC_GAUGE, "tern_queue_messages",
				 "Messages in the queue, by state.", "state", NULL, 0);
	for (size_t i = 0; i < N(queue_states); i++)
		metric_series(stats.queue, queue_states[i]);
	stats.oldest = metric_new(METRIC_GAUGE, "tern_queue_oldest_age_seconds",
				  "Age of the oldest message in the queue (0 when empty).", NULL, NULL, 0);
	metric_gauge_fn(stats.oldest, oldest_age, NULL);
	stats.notices = metric_new(METRIC_GAUGE, "tern_notices_waiting",
				   "Non-delivery notifications written with their bounce and not "
				   "yet queued (a storage error retries them after min_backoff).",
				   NULL, NULL, 0);
	metric_gauge_fn(stats.notices, notices_waiting, NULL);
	stats.queue_rcpts = metric_new(METRIC_GAUGE, "tern_queue_recipients",
				       "Recipients in the queue not yet delivered (held ones too), by "
				       "peer.", "peer", NULL, 0);
	metric_collect(stats.queue_rcpts, queue_rcpts, NULL);
	metric_gauge_fn(metric_new(METRIC_GAUGE, "tern_queue_map_used_bytes",
				   "Octets of the queue database's map in use.", NULL, NULL, 0),
			map_used, NULL);
	metric_gauge_fn(metric_new(METRIC_GAUGE, "tern_queue_map_size_bytes",
				   "Size of the queue database's map (it grows when full).", NULL,
				   NULL, 0), map_size, NULL);
	stats.spans_dropped = metric_new(METRIC_COUNTER, "tern_spans_dropped_total",
					 "Span lines not written to otlp_spans_file (the writer "
					 "could not keep up, or a write failed).", NULL, NULL, 0);
	unroutable_init();
	stats.conns_opened = metric_new(METRIC_COUNTER, "tern_connections_opened_total",
					"Connections opened to the peer (greeting, EHLO and TLS done).",
					"peer", NULL, 0);
	stats.conns_tried = metric_new(METRIC_COUNTER, "tern_connections_tried_total",
				       "TCP connections tried to the peer's addresses, refused "
				       "and failed ones too.", "peer", NULL, 0);
	stats.conns = metric_new(METRIC_GAUGE, "tern_connections",
				 "Open connections to the peer, idle or busy with a transaction.",
				 "peer,state", NULL, 0);
	stats.transactions = metric_new(METRIC_COUNTER, "tern_transactions_total",
					"Mail transactions, by whether the connection had carried one before.",
					"peer,reused", NULL, 0);
	stats.tls_handshakes = metric_new(METRIC_COUNTER, "tern_tls_handshakes_total",
					  "TLS handshakes with the peer, by result and session resumption.",
					  "peer,result,resumed", NULL, 0);
	stats.tls_seconds = metric_new(METRIC_HISTOGRAM, "tern_tls_handshake_seconds",
				       "Duration of successful TLS handshakes.", "peer", seconds_wan,
				       N(seconds_wan));
	stats.breaker = metric_new(METRIC_GAUGE, "tern_breaker_state",
				   "Circuit breaker of the peer: 0 closed, 1 open, 2 half-open.",
				   "peer", NULL, 0);
	stats.bytes = metric_new(METRIC_COUNTER, "tern_bytes_sent_total",
				 "Message octets sent to the peer, by how they were sent.",
				 "peer,method", NULL, 0);
	stats.duplicates = metric_new(METRIC_COUNTER, "tern_possible_duplicates_total",
				      "Transactions whose end of data went to the peer but whose final "
				      "reply was never read: the message may be delivered twice.",
				      "peer", NULL, 0);
	stats.window = metric_new(METRIC_GAUGE, "tern_pipeline_window",
				  "The peer's congestion window: transactions each of its connections "
				  "may have in flight now (at most max_pipeline_depth).", "peer", NULL, 0);
	for (size_t p = 0; p < conf->npeers; p++)
		stats_peer(conf->peers[p].name);
	stats.batch = metric_new(METRIC_HISTOGRAM, "tern_commit_batch_messages",
				 "Jobs (messages accepted, queue changes) per group commit.", NULL,
				 batch_sizes, N(batch_sizes));
	stats.commit_seconds = metric_new(METRIC_HISTOGRAM, "tern_commit_seconds",
					  "Duration of a group commit: spool sync and LMDB transaction.",
					  NULL, seconds_disk, N(seconds_disk));
}

/* stats_start - count the queue and serve metrics_listen (after recovery,
 * as the tern user) */
void stats_start(const struct conf *conf)
{
	char err[512];

	if (conf->ternd.metrics_listen[0] == '\0')
		return;
	queue_counts();
	if ((server = metrics_serve(conf->ternd.metrics_listen, err, sizeof(err))) == NULL)
		log_fatal("%s", err);
	log_info("metrics on http://%s/metrics", conf->ternd.metrics_listen);
}

/* stats_stop - stop the endpoint */
void stats_stop(void)
{
	metrics_server_stop(&server);
}

/* stats_queued_set - recovery: the messages in the queue at start */
void stats_queued_set(uint64_t n)
{
	atomic_store(&queued, n);
}

/* stats_queued_add - n messages more (fewer, if negative) in the queue */
void stats_queued_add(int64_t n)
{
	atomic_fetch_add(&queued, (uint64_t)n);
}

/* stats_queued - the messages in the queue now */
uint64_t stats_queued(void)
{
	return atomic_load(&queued);
}

/* stats_queue - a message went from one queue state to another */
void stats_queue(int was, int now)
{
	if (was == now)
		return;
	if (was != QSTATE_GONE)
		metric_gauge_add(stats.queue, -1, queue_states[was]);
	if (now != QSTATE_GONE)
		metric_gauge_add(stats.queue, 1, queue_states[now]);
}

/* stats_delivery - one recipient's attempt: sent, deferred, bounced, or
 * expired (bounced by ternd itself, with a 4.X.X status) */
void stats_delivery(const char *peer, int state, const char *esc)
{
	const char *status = state == RCPT_SENT ? "sent" : state == RCPT_DEFERRED ? "deferred"
		: esc[0] == '4' ? "expired" : "bounced";

	char dsn[SMTP_ESC_LABEL_MAX];

	if (state != RCPT_SENT && state != RCPT_DEFERRED && state != RCPT_BOUNCED)
		return;
	metric_add(stats.deliveries, 1, peer, status);
	smtp_esc_label(esc, dsn);
	if (!metric_add(stats.codes, 1, peer, dsn)) {	/* the code's first time */
		metric_series(stats.codes, peer, dsn);
		metric_add(stats.codes, 1, peer, dsn);
	}
}

