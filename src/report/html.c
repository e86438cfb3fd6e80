/*
 * html - the report as one self-contained HTML file: inline SVG charts
 * (hourly volume stacked by outcome, delivery delay percentiles per hour)
 * and tables. No scripts, no style sheets or fonts or images from
 * elsewhere; styles are inline attributes, which mail clients keep. The
 * markup is also well-formed XML, so both HTML and XML tools read it.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "report.h"

#define U(v) ((unsigned long long)(v))
#define CHART_W 760
#define CHART_H 260
#define PLOT_X 60			/* left margin: the y labels */
#define PLOT_Y 30			/* top margin: the legend */
#define PLOT_W (CHART_W - PLOT_X - 20)
#define PLOT_H (CHART_H - PLOT_Y - 30)

static const char *const TD = "style=\"padding:2px 8px;text-align:right;border-bottom:1px solid #ddd\"";
static const char *const TDL = "style=\"padding:2px 8px;text-align:left;border-bottom:1px solid #ddd\"";
static const char *const TH = "style=\"padding:2px 8px;text-align:right;background:#eee\"";
static const char *const TABLE = "style=\"border-collapse:collapse;font-size:13px;margin-bottom:16px\"";

/* nice_max - a round axis maximum at or above v */
static double nice_max(double v)
{
	double step = 1;

	if (v <= 0)
		return 1;
	while (step * 10 <= v)
		step *= 10;
	while (step > v)
		step /= 10;
	for (int m = 1; m <= 10; m++)
		if (step * m >= v)
			return step * m;
	return step * 10;
}

/* axes - the frame, the y scale (0 and max with unit) and the hour labels */
static void axes(const struct report *r, FILE *out, double ymax, const char *unit)
{
	size_t every = r->nhours > 8 ? (r->nhours + 7) / 8 : 1;

	fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", PLOT_X,
		PLOT_Y + PLOT_H, PLOT_X + PLOT_W, PLOT_Y + PLOT_H);
	fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", PLOT_X,
		PLOT_Y, PLOT_X, PLOT_Y + PLOT_H);
	fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%g%s</text>\n",
		PLOT_X - 4, PLOT_Y + 4, ymax, unit);
	fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">0</text>\n",
		PLOT_X - 4, PLOT_Y + PLOT_H);
	for (size_t i = 0; i < r->nhours; i += every) {
		char when[32];

		rpt_utc(r->hour0 + 3600 * i, when, sizeof(when));
		fprintf(out, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\">%s</text>\n",
			PLOT_X + (double)PLOT_W * (double)i / (double)r->nhours, PLOT_Y + PLOT_H + 14,
			r->nhours > 24 ? when + 5 : when + 11);
	}
}

/* legend - colored keys along the top */
static void legend(FILE *out, const char *const *names, const char *const *colors, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "<rect x=\"%zu\" y=\"8\" width=\"10\" height=\"10\" fill=\"%s\"/>",
			PLOT_X + 100 * i, colors[i]);
		fprintf(out, "<text x=\"%zu\" y=\"17\" font-size=\"11\">%s</text>\n",
			PLOT_X + 100 * i + 14, names[i]);
	}
}

/* svg_open - an SVG element with its title */
static void svg_open(FILE *out, const char *title)
{
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" role=\"img\" style=\"font-family:sans-serif\">"
		"<title>%s</title>\n", CHART_W, CHART_H, CHART_W, CHART_H, title);
}

/* volume_chart - hourly recipients stacked by outcome */
static void volume_chart(const struct report *r, FILE *out)
{
	static const char *const names[] = {"sent", "deferred", "bounced", "expired"};
	static const char *const colors[] = {"#2e7d32", "#f9a825", "#c62828", "#757575"};
	double ymax = 0, bw = (double)PLOT_W / (double)(r->nhours ? r->nhours : 1);

	for (size_t i = 0; i < r->nhours; i++) {
		const struct rpt_counts *c = &r->hours[i].c;
		double sum = (double)(c->sent + c->deferred + c->bounced + c->expired);

		if (sum > ymax)
			ymax = sum;
	}
	ymax = nice_max(ymax);
	svg_open(out, "Deliveries per hour by outcome");
	legend(out, names, colors, 4);
	for (size_t i = 0; i < r->nhours; i++) {
		const struct rpt_counts *c = &r->hours[i].c;
		const uint64_t v[] = {c->sent, c->deferred, c->bounced, c->expired};
		double y = PLOT_Y + PLOT_H;

		for (size_t s = 0; s < 4; s++) {
			double h = (double)PLOT_H * (double)v[s] / ymax;

			if (v[s] == 0)
				continue;
			y -= h;
			fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
				"fill=\"%s\"><title>%llu %s</title></rect>\n", PLOT_X + bw * (double)i + bw * 0.1,
				y, bw * 0.8, h, colors[s], U(v[s]), names[s]);
		}
	}
	axes(r, out, ymax, "");
	fputs("</svg>\n", out);
}

/* delay_chart - p50, p90 and p99 of the delivery delay per hour, in ms
 * or in seconds; a dot per hour with deliveries, joined by lines */
static void delay_chart(const struct report *r, FILE *out)
{
	static const char *const names[] = {"p50", "p90", "p99"};
	static const char *const colors[] = {"#1565c0", "#6a1b9a", "#c62828"};
	static const double qs[] = {0.5, 0.9, 0.99};
	double ymax = 0, unit = 1, bw = (double)PLOT_W / (double)(r->nhours ? r->nhours : 1);

	for (size_t i = 0; i < r->nhours; i++) {
		double ms = (double)rpt_percentile(&r->hours[i].delay, 0.99);

		if (ms > ymax)
			ymax = ms;
	}
	if (ymax >= 1000)
		unit = 1000;
	ymax = nice_max(ymax / unit);
	svg_open(out, "Delivery delay percentiles per hour");
	legend(out, names, colors, 3);
	for (size_t q = 0; q < 3; q++) {
		fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colors[q]);
		for (size_t i = 0; i < r->nhours; i++)
			if (r->hours[i].c.sent)
				fprintf(out, "%.1f,%.1f ", PLOT_X + bw * ((double)i + 0.5), PLOT_Y + PLOT_H
					- (double)PLOT_H * (double)rpt_percentile(&r->hours[i].delay, qs[q]) / unit / ymax);
		fputs("\"/>\n", out);
		for (size_t i = 0; i < r->nhours; i++)
			if (r->hours[i].c.sent)
				fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
					PLOT_X + bw * ((double)i + 0.5), PLOT_Y + PLOT_H
					- (double)PLOT_H * (double)rpt_percentile(&r->hours[i].delay, qs[q]) / unit / ymax,
					colors[q]);
	}
	axes(r, out, ymax, unit == 1 ? " ms" : " s");
	fputs("</svg>\n", out);
}

/* th - a header row */
static void th(FILE *out, const char *const *cols, size_t n)
{
	fputs("<tr>", out);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "<th %s>%s</th>", TH, cols[i]);
	fputs("</tr>\n", out);
}

/* td_text - a text cell */
static void td_text(FILE *out, const char *s)
{
	fprintf(out, "<td %s>", TDL);
	html_text(out, s);
	fputs("</td>", out);
}

/* td_num - a number cell */
static void td_num(FILE *out, uint64_t v)
{
	fprintf(out, "<td %s>%llu</td>", TD, U(v));
}

/* td_str - a right-aligned cell of our own text */
static void td_str(FILE *out, const char *s)
{
	fprintf(out, "<td %s>%s</td>", TD, s);
}

/* tables - totals, peers, domains, reasons, queue */
static void tables(const struct report *r, FILE *out, size_t top)
{
	static const char *const tcols[] = {"received", "recipients", "bytes", "sent", "deferred",
		"bounced", "expired"};
	static const char *const pcols[] = {"peer", "sent", "deferred", "bounced", "p50", "p90",
		"p99", "reuse", "TLS resumed", "conn. failures", "TLS failures"};
	static const char *const dcols[] = {"domain", "total", "sent", "deferred", "bounced", "expired"};
	static const char *const rcols[] = {"status", "code", "count", "example"};
	const struct rpt_counts *c = &r->total;
	char b[3][16];

	fprintf(out, "<h2>Totals</h2>\n<table %s>\n", TABLE);
	th(out, tcols, 7);
	fputs("<tr>", out);
	td_num(out, c->received), td_num(out, c->recipients), td_num(out, c->bytes);
	td_num(out, c->sent), td_num(out, c->deferred), td_num(out, c->bounced), td_num(out, c->expired);
	fputs("</tr>\n</table>\n", out);
	fprintf(out, "<h2>Relay peers</h2>\n<table %s>\n", TABLE);
	th(out, pcols, 11);
	for (size_t i = 0; i < r->npeers; i++) {
		const struct rpt_peer *p = &r->peers[i];

		fputs("<tr>", out);
		td_text(out, p->name);
		td_num(out, p->c.sent), td_num(out, p->c.deferred), td_num(out, p->c.bounced);
		for (size_t q = 0; q < 3; q++)
			td_str(out, rpt_pctl_str(&p->delay, q == 0 ? 0.5 : q == 1 ? 0.9 : 0.99,
						  b[q], sizeof(b[q])));
		td_str(out, rpt_percent(p->reused, p->transactions, b[0], sizeof(b[0])));
		td_str(out, rpt_percent(p->tls_resumed, p->tls_full + p->tls_resumed, b[1], sizeof(b[1])));
		td_num(out, p->conn_failures), td_num(out, p->handshake_failures);
		fputs("</tr>\n", out);
	}
	fprintf(out, "</table>\n<h2>Top recipient domains%s</h2>\n<table %s>\n",
		r->domains_exact ? "" : " (approximate)", TABLE);
	th(out, dcols, 6);
	for (size_t i = 0; i < r->ndomains && i < top; i++) {
		const struct rpt_domain *d = &r->domains[i];

		fputs("<tr>", out);
		td_text(out, d->name);
		td_num(out, d->total), td_num(out, d->sent), td_num(out, d->deferred);
		td_num(out, d->bounced), td_num(out, d->expired);
		fputs("</tr>\n", out);
	}
	fprintf(out, "</table>\n<h2>Deferral and bounce reasons</h2>\n<table %s>\n", TABLE);
	th(out, rcols, 4);
	for (size_t i = 0; i < r->nreasons; i++) {
		fputs("<tr>", out);
		td_text(out, r->reasons[i].status);
		td_text(out, r->reasons[i].dsn);
		td_num(out, r->reasons[i].count);
		td_text(out, r->reasons[i].example);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
	if (r->have_queue) {
		fprintf(out, "<h2>Queue now (recipients by age in minutes)</h2>\n<table %s>\n<tr>", TABLE);
		fprintf(out, "<th %s>peer</th><th %s>total</th>", TH, TH);
		for (size_t i = 0; i < QSHAPE_NBOUNDS; i++)
			fprintf(out, "<th %s>&lt;%u</th>", TH, qshape_bounds[i]);
		fprintf(out, "<th %s>%u+</th></tr>\n", TH, qshape_bounds[QSHAPE_NBOUNDS - 1]);
		for (size_t i = 0; i <= r->queue.n; i++) {
			const struct qshape_row *row = i ? &r->queue.rows[i - 1] : &r->queue.all;

			fputs("<tr>", out);
			td_text(out, i ? row->key : "TOTAL");
			td_num(out, row->total);
			for (size_t k = 0; k < QSHAPE_NBUCKETS; k++)
				td_num(out, row->count[k]);
			fputs("</tr>\n", out);
		}
		fputs("</table>\n", out);
	}
}

/* report_html - the whole report as an HTML document */
int report_html(const struct report *r, FILE *out, size_t top)
{
	char a[32], b[32];

	rpt_utc(r->from_us / 1000000, a, sizeof(a));
	rpt_utc(r->to_us / 1000000, b, sizeof(b));
	fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
		"<title>tern report %s to %s UTC</title>\n</head>\n"
		"<body style=\"font-family:sans-serif;color:#222;background:#fff\">\n"
		"<h1 style=\"font-size:20px\">tern report, %s to %s UTC", a, b, a, b);
	if (r->nodes > 1)
		fprintf(out, ", %u nodes", r->nodes);
	fputs("</h1>\n<h2>Deliveries per hour</h2>\n<div>\n", out);
	volume_chart(r, out);
	fputs("</div>\n<h2>Delivery delay per hour</h2>\n<div>\n", out);
	delay_chart(r, out);
	fputs("</div>\n", out);
	tables(r, out, top);
	fputs("</body>\n</html>\n", out);
	return ferror(out) ? -1 : 0;
}
