/*
 * prom - a node_exporter textfile (Prometheus text format 0.0.4) with a
 * few gauges of the report's window: what ternd's own /metrics counters
 * cannot show without a long range query. Labels are peer names and
 * fixed words only, never domains or addresses.
 */
#include "config.h"

#include <stdio.h>

#include "report.h"

#define U(v) ((unsigned long long)(v))

/* label - a label value, escaped as the text format wants */
static void label(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', out);
		if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

/* head - HELP and TYPE of a gauge */
static void head(FILE *out, const char *name, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

/* report_prom - the textfile */
int report_prom(const struct report *r, FILE *out)
{
	static const char *const st[] = {"sent", "deferred", "bounced", "expired"};
	const uint64_t tot[] = {r->total.sent, r->total.deferred, r->total.bounced, r->total.expired};
	static const double qs[] = {0.5, 0.9, 0.99};

	head(out, "tern_report_generated_timestamp_seconds", "When tern-report wrote this file.");
	fprintf(out, "tern_report_generated_timestamp_seconds %llu\n", U(r->generated_us / 1000000));
	head(out, "tern_report_window_seconds", "Length of the reported window.");
	fprintf(out, "tern_report_window_seconds %llu\n", U((r->to_us - r->from_us) / 1000000));
	head(out, "tern_report_received_messages", "Messages accepted in the window.");
	fprintf(out, "tern_report_received_messages %llu\n", U(r->total.received));
	head(out, "tern_report_received_bytes", "Octets of the messages accepted in the window.");
	fprintf(out, "tern_report_received_bytes %llu\n", U(r->total.bytes));
	head(out, "tern_report_deliveries", "Recipient delivery attempts in the window by outcome.");
	for (size_t i = 0; i < 4; i++)
		fprintf(out, "tern_report_deliveries{status=\"%s\"} %llu\n", st[i], U(tot[i]));
	head(out, "tern_report_peer_deliveries", "Recipient delivery attempts in the window by peer and outcome.");
	for (size_t i = 0; i < r->npeers; i++) {
		const struct rpt_peer *p = &r->peers[i];
		const uint64_t v[] = {p->c.sent, p->c.deferred, p->c.bounced, p->c.expired};

		for (size_t s = 0; s < 4; s++) {
			fputs("tern_report_peer_deliveries{peer=\"", out);
			label(out, p->name);
			fprintf(out, "\",status=\"%s\"} %llu\n", st[s], U(v[s]));
		}
	}
	head(out, "tern_report_peer_delivery_delay_seconds",
	     "Delivery delay percentiles of sent recipients in the window, from fixed buckets.");
	for (size_t i = 0; i < r->npeers; i++)
		for (size_t q = 0; q < 3; q++) {
			fputs("tern_report_peer_delivery_delay_seconds{peer=\"", out);
			label(out, r->peers[i].name);
			fprintf(out, "\",percentile=\"%g\"} %.3f\n", 100 * qs[q],
				(double)rpt_percentile(&r->peers[i].delay, qs[q]) / 1000);
		}
	head(out, "tern_report_peer_connection_reuse_ratio",
	     "Share of transactions in the window sent on a reused connection.");
	for (size_t i = 0; i < r->npeers; i++) {
		const struct rpt_peer *p = &r->peers[i];

		fputs("tern_report_peer_connection_reuse_ratio{peer=\"", out);
		label(out, p->name);
		fprintf(out, "\"} %.4f\n", p->transactions ? (double)p->reused / (double)p->transactions : 0.0);
	}
	head(out, "tern_report_peer_tls_resumption_ratio",
	     "Share of new TLS connections in the window that resumed a session.");
	for (size_t i = 0; i < r->npeers; i++) {
		const struct rpt_peer *p = &r->peers[i];
		uint64_t tls = p->tls_full + p->tls_resumed;

		fputs("tern_report_peer_tls_resumption_ratio{peer=\"", out);
		label(out, p->name);
		fprintf(out, "\"} %.4f\n", tls ? (double)p->tls_resumed / (double)tls : 0.0);
	}
	head(out, "tern_report_peer_connection_failures",
	     "Failed connections (connect, greeting, TLS) in the window.");
	for (size_t i = 0; i < r->npeers; i++) {
		fputs("tern_report_peer_connection_failures{peer=\"", out);
		label(out, r->peers[i].name);
		fprintf(out, "\"} %llu\n", U(r->peers[i].conn_failures));
	}
	head(out, "tern_report_message_size_max_bytes", "The largest message accepted in the window.");
	fprintf(out, "tern_report_message_size_max_bytes %llu\n", U(r->sizes.max));
	if (r->have_milter) {
		static const char *const v[] = {"accept", "tag", "reject", "tempfail"};
		const uint64_t n[] = {r->milter.accepted, r->milter.tagged, r->milter.rejected,
			r->milter.tempfailed};

		head(out, "tern_report_milter_messages", "Messages the milter decided on in the window, by verdict.");
		for (size_t i = 0; i < 4; i++)
			fprintf(out, "tern_report_milter_messages{verdict=\"%s\"} %llu\n", v[i], U(n[i]));
		head(out, "tern_report_milter_checks",
		     "Messages tagged, rejected or refused in the window, by verdict and deciding check.");
		for (size_t i = 0; i < r->nchecks; i++) {
			fputs("tern_report_milter_checks{verdict=\"", out);
			label(out, r->checks[i].verdict);
			fputs("\",check=\"", out);
			label(out, r->checks[i].check);
			fprintf(out, "\"} %llu\n", U(r->checks[i].count));
		}
	}
	if (r->have_queue) {
		head(out, "tern_report_queue_recipients", "Recipients in the queue when the report ran.");
		fprintf(out, "tern_report_queue_recipients %lu\n", r->queue.all.total);
	}
	return ferror(out) ? -1 : 0;
}
