/*
 * html - the report as one self-contained HTML file: inline SVG charts
 * (volume stacked by outcome, delivery delay percentiles, over the
 * report's series: per minute for an hour, per quarter hour for a day)
 * and tables. The charts fill the page's width (viewBox, width 100%),
 * with round ticks on both axes and margins that hold their labels. No scripts, no style sheets or fonts or images from
 * elsewhere; styles are inline attributes, which mail clients keep. The
 * markup is also well-formed XML, so both HTML and XML tools read it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "timefmt.h"

#define U(v) ((unsigned long long)(v))
/* The charts' coordinates (the SVG's viewBox): the chart scales to the
 * page's width, text with it; the margins hold the axis labels. */
#define CHART_W 960
#define CHART_H 320
#define PLOT_X 76			/* left: the y tick labels and the axis title */
#define PLOT_Y 40			/* top: the legend */
#define PLOT_W (CHART_W - PLOT_X - 28)
#define PLOT_H (CHART_H - PLOT_Y - 54)	/* bottom: the x tick labels and the axis title */
#define FONT 13				/* tick labels, legend */
#define CHAR_W (0.62 * FONT)		/* a character's width, at most, for layout */
#define XTICKS_MAX 8

static const char *const TD = "style=\"padding:2px 8px;text-align:right;border-bottom:1px solid #ddd\"";
static const char *const TDL = "style=\"padding:2px 8px;text-align:left;border-bottom:1px solid #ddd\"";
static const char *const TH = "style=\"padding:2px 8px;text-align:right;background:#eee\"";
static const char *const THL = "style=\"padding:2px 8px;text-align:left;background:#eee\"";
static const char *const TABLE = "style=\"border-collapse:collapse;font-size:13px;margin-bottom:16px\"";

/* x tick steps, seconds */
static const uint64_t xsteps[] = {60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
	86400, 172800, 604800, 1209600, 2592000, 7776000};

/* The scales of one chart: the window on x, 0..ymax on y. */
struct scale {
	double from, to;		/* seconds */
	double ymax, ystep;
	int utc;			/* the zone: UTC, or local */
};

/* xpos - the x coordinate of a time, clamped to the plot */
static double xpos(const struct scale *sc, double t)
{
	if (t < sc->from)
		t = sc->from;
	if (t > sc->to)
		t = sc->to;
	return PLOT_X + (double)PLOT_W * (t - sc->from) / (sc->to - sc->from);
}

/* ypos - the y coordinate of a value */
static double ypos(const struct scale *sc, double v)
{
	return PLOT_Y + PLOT_H - (double)PLOT_H * v / sc->ymax;
}

/* yscale - round y ticks: a step of 1, 2 or 5 times a power of ten that
 * gives 3 to 6 ticks over max; at least 1 when integer is set */
static void yscale(struct scale *sc, double max, int integer)
{
	double raw = max > 0 ? max / 5 : 1, step = 1;

	while (step * 10 <= raw)
		step *= 10;
	while (step > raw)
		step /= 10;
	if (step * 2 >= raw)
		step *= 2;
	else if (step * 5 >= raw)
		step *= 5;
	else
		step *= 10;
	if (integer && step < 1)
		step = 1;
	sc->ystep = step;
	sc->ymax = step * (max > 0 ? (double)(long long)((max + step * 0.999) / step) : 5);
	if (sc->ymax < max)
		sc->ymax += step;
}

/* text_at - one label; anchored so that its estimated width stays inside
 * the chart */
static void text_at(FILE *out, double x, double y, const char *anchor, const char *s)
{
	double w = CHAR_W * (double)strlen(s);

	if (strcmp(anchor, "middle") == 0 && x + w / 2 > CHART_W - 2)
		anchor = "end", x = CHART_W - 2;
	else if (strcmp(anchor, "middle") == 0 && x - w / 2 < 2)
		anchor = "start", x = 2;
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", x, y, FONT,
		anchor);
	html_text(out, s);
	fputs("</text>\n", out);
}

/* num_label - a tick value: integers without a point */
static const char *num_label(double v, double step, char *buf, size_t cap)
{
	snprintf(buf, cap, step >= 1 ? "%.0f" : step >= 0.1 ? "%.1f" : "%.2f", v);
	return buf;
}

/* zone_title - the x axis title: the zone's offset at the chart's ends */
static void zone_title(const struct scale *sc, char *buf, size_t cap)
{
	long a = timefmt_offset((uint64_t)sc->from, sc->utc), b = timefmt_offset((uint64_t)sc->to, sc->utc);
	char x[48], y[48];

	if (sc->utc) {
		snprintf(buf, cap, "time (UTC)");
		return;
	}
	snprintf(x, sizeof(x), "UTC%c%02ld:%02ld", a < 0 ? '-' : '+', labs(a) / 3600, labs(a) / 60 % 60);
	snprintf(y, sizeof(y), "UTC%c%02ld:%02ld", b < 0 ? '-' : '+', labs(b) / 3600, labs(b) / 60 % 60);
	if (a == b)
		snprintf(buf, cap, "time (%s)", x);
	else
		snprintf(buf, cap, "time (%s, then %s)", x, y);
}

/* axes - the frame, y ticks with grid lines, x ticks at round times of
 * the zone (local or UTC), and both axis titles */
static void axes(FILE *out, const struct scale *sc, const char *ytitle)
{
	double span = sc->to - sc->from;
	uint64_t step = xsteps[sizeof(xsteps) / sizeof(xsteps[0]) - 1];
	long off = timefmt_offset((uint64_t)sc->from, sc->utc);
	char buf[128];

	for (size_t i = 0; i < sizeof(xsteps) / sizeof(xsteps[0]); i++)
		if (span / (double)xsteps[i] <= XTICKS_MAX) {
			step = xsteps[i];
			break;
		}
	for (double v = 0; v <= sc->ymax + sc->ystep / 2; v += sc->ystep) {
		double y = ypos(sc, v);

		fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"/>\n", PLOT_X - 5,
			y, PLOT_X + PLOT_W, y, v == 0 ? "#444" : "#e0e0e0");
		text_at(out, PLOT_X - 8, y + FONT * 0.35, "end", num_label(v, sc->ystep, buf, sizeof(buf)));
	}
	fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", PLOT_X,
		PLOT_Y, PLOT_X, PLOT_Y + PLOT_H);
	/* round in the zone's clock; a tick's own offset places it (DST) */
	for (long long lt = ((long long)sc->from + off + (long long)step - 1) / (long long)step
		     * (long long)step;; lt += (long long)step) {
		long long t = lt - timefmt_offset((uint64_t)(lt - off), sc->utc);
		char when[RPT_WHEN_MAX];
		double x;

		if (t < (long long)sc->from)
			continue;
		if ((double)t > sc->to)
			break;
		x = xpos(sc, (double)t);
		timefmt_human((uint64_t)t * 1000000, sc->utc, TIMEFMT_MIN, when, sizeof(when));
		when[16] = '\0';	/* YYYY-MM-DD HH:MM, the zone in the axis title */
		fprintf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\"/>\n", x,
			PLOT_Y + PLOT_H, x, PLOT_Y + PLOT_H + 5);
		if (step >= 86400)
			when[10] = '\0';	/* the date */
		text_at(out, x, PLOT_Y + PLOT_H + 10 + FONT, "middle",
			step >= 86400 ? when + 5 : span > 86400 ? when + 5 : when + 11);
	}
	zone_title(sc, buf, sizeof(buf));
	text_at(out, PLOT_X + PLOT_W / 2.0, CHART_H - 8, "middle", buf);
	fprintf(out, "<text x=\"0\" y=\"0\" font-size=\"%d\" text-anchor=\"middle\" "
		"transform=\"translate(%d,%.1f) rotate(-90)\">", FONT, FONT + 2, PLOT_Y + PLOT_H / 2.0);
	html_text(out, ytitle);
	fputs("</text>\n", out);
}

/* legend - colored keys along the top */
static void legend(FILE *out, const char *const *names, const char *const *colors, size_t n)
{
	double x = PLOT_X;

	for (size_t i = 0; i < n; i++) {
		fprintf(out, "<rect x=\"%.1f\" y=\"12\" width=\"12\" height=\"12\" fill=\"%s\"/>", x, colors[i]);
		fprintf(out, "<text x=\"%.1f\" y=\"22\" font-size=\"%d\">%s</text>\n", x + 17, FONT, names[i]);
		x += 17 + 0.55 * FONT * (double)strlen(names[i]) + 18;
	}
}

/* svg_open - an SVG element that fills its container's width, with its title */
static void svg_open(FILE *out, const char *title)
{
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%%\" viewBox=\"0 0 %d %d\" "
		"preserveAspectRatio=\"xMidYMid meet\" role=\"img\" "
		"style=\"display:block;width:100%%;height:auto;font-family:sans-serif\">"
		"<title>%s</title>\n", CHART_W, CHART_H, title);
}

/* scale_x - the chart's x range: the series' whole slots, so that the
 * slot the window ends in (now, usually) is a whole bar, not a sliver */
static void scale_x(const struct report *r, struct scale *sc)
{
	sc->utc = r->utc;
	sc->from = (double)r->slot0;
	sc->to = (double)(r->slot0 + r->slot_step * (r->nslots ? r->nslots : 1));
}

/* slot_name - a step of the series in words: "minute", "15 minutes", "hour" */
static void slot_name(uint64_t step, char *buf, size_t cap)
{
	if (step == 60)
		snprintf(buf, cap, "minute");
	else if (step == 3600)
		snprintf(buf, cap, "hour");
	else if (step == 86400)
		snprintf(buf, cap, "day");
	else
		snprintf(buf, cap, "%llu minutes", U(step / 60));
}

/* volume_chart - recipients per slot of the series, stacked by outcome */
static void volume_chart(const struct report *r, FILE *out)
{
	static const char *const names[] = {"sent", "deferred", "bounced", "expired"};
	static const char *const colors[] = {"#2e7d32", "#f9a825", "#c62828", "#757575"};
	struct scale sc;
	double ymax = 0;
	char title[64], per[32];

	for (size_t i = 0; i < r->nslots; i++) {
		const struct rpt_counts *c = &r->slots[i].c;
		double sum = (double)(c->sent + c->deferred + c->bounced + c->expired);

		if (sum > ymax)
			ymax = sum;
	}
	scale_x(r, &sc);
	yscale(&sc, ymax, 1);
	slot_name(r->slot_step, per, sizeof(per));
	snprintf(title, sizeof(title), "Recipients per %s by outcome", per);
	svg_open(out, title);
	legend(out, names, colors, 4);
	snprintf(title, sizeof(title), "recipients per %s", per);
	axes(out, &sc, title);
	for (size_t i = 0; i < r->nslots; i++) {
		const struct rpt_counts *c = &r->slots[i].c;
		const uint64_t v[] = {c->sent, c->deferred, c->bounced, c->expired};
		double t0 = (double)(r->slot0 + r->slot_step * i), x0 = xpos(&sc, t0);
		double x1 = xpos(&sc, t0 + (double)r->slot_step), w = x1 - x0, y = ypos(&sc, 0);

		for (size_t s = 0; s < 4; s++) {
			double h = (double)PLOT_H * (double)v[s] / sc.ymax;

			if (v[s] == 0 || w <= 0)
				continue;
			y -= h;
			fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
				"fill=\"%s\"><title>%llu %s</title></rect>\n", x0 + w * 0.1, y,
				w * 0.8 > 1 ? w * 0.8 : 1, h, colors[s], U(v[s]), names[s]);
		}
	}
	fputs("</svg>\n", out);
}

/* delay_chart - p50, p90 and p99 of the delivery delay per slot of the
 * series, in ms or in seconds: lines through the slots with deliveries,
 * broken where a slot had none, a dot on each point */
static void delay_chart(const struct report *r, FILE *out)
{
	static const char *const names[] = {"p50", "p90", "p99"};
	static const char *const colors[] = {"#1565c0", "#6a1b9a", "#c62828"};
	static const double qs[] = {0.5, 0.9, 0.99};
	double ymax = 0, unit = 1;
	struct scale sc;

	for (size_t i = 0; i < r->nslots; i++) {
		double ms = (double)rpt_percentile(&r->slots[i].delay, 0.99);

		if (ms > ymax)
			ymax = ms;
	}
	if (ymax >= 2000)
		unit = 1000;
	scale_x(r, &sc);
	yscale(&sc, ymax / unit, 0);
	svg_open(out, "Delivery delay percentiles");
	legend(out, names, colors, 3);
	axes(out, &sc, unit == 1 ? "delivery delay (ms)" : "delivery delay (s)");
	for (size_t q = 0; q < 3; q++) {
		int open = 0;

		for (size_t i = 0; i <= r->nslots; i++) {
			double x, y;

			if (i == r->nslots || !r->slots[i].c.sent) {
				if (open)
					fputs("\"/>\n", out);
				open = 0;
				continue;
			}
			x = xpos(&sc, (double)(r->slot0 + r->slot_step * i) + (double)r->slot_step / 2);
			y = ypos(&sc, (double)rpt_percentile(&r->slots[i].delay, qs[q]) / unit);
			if (!open)
				fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
					"stroke-linejoin=\"round\" points=\"", colors[q]);
			fprintf(out, "%.1f,%.1f ", x, y);
			open = 1;
		}
		for (size_t i = 0; i < r->nslots; i++)
			if (r->slots[i].c.sent)
				fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
					xpos(&sc, (double)(r->slot0 + r->slot_step * i) + (double)r->slot_step / 2),
					ypos(&sc, (double)rpt_percentile(&r->slots[i].delay, qs[q]) / unit),
					colors[q]);
	}
	fputs("</svg>\n", out);
}

/* th - a header row; align has an 'l' for each column of text (left, as
 * its cells are), anything else or its end for a number's (right) */
static void th(FILE *out, const char *const *cols, size_t n, const char *align)
{
	size_t na = strlen(align);

	fputs("<tr>", out);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "<th %s>%s</th>", i < na && align[i] == 'l' ? THL : TH, cols[i]);
	fputs("</tr>\n", out);
}

/* none_row - the row of a table with nothing to show in the window */
static void none_row(FILE *out, size_t n)
{
	fprintf(out, "<tr><td colspan=\"%zu\" %s>none in this window</td></tr>\n", n, TDL);
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

/* extra_tables - the milter's verdicts, the top senders, message sizes */
static void extra_tables(const struct report *r, FILE *out, size_t top)
{
	static const char *const mcols[] = {"inspected", "accepted", "tagged", "rejected",
		"temporarily refused", "other"};
	static const char *const ccols[] = {"verdict", "check", "messages"};
	static const char *const scols[] = {"sender", "messages", "recipients", "bytes"};
	static const char *const zcols[] = {"size", "messages", "bytes"};
	char label[32];

	if (r->have_milter) {
		const struct rpt_milter *m = &r->milter;

		fprintf(out, "<h2>Milter verdicts</h2>\n<table %s>\n", TABLE);
		th(out, mcols, 6, "");
		fputs("<tr>", out);
		td_num(out, m->messages), td_num(out, m->accepted), td_num(out, m->tagged);
		td_num(out, m->rejected), td_num(out, m->tempfailed), td_num(out, m->other);
		fprintf(out, "</tr>\n</table>\n<table %s>\n", TABLE);
		th(out, ccols, 3, "ll");
		if (r->nchecks == 0)
			none_row(out, 3);
		for (size_t i = 0; i < r->nchecks; i++) {
			fputs("<tr>", out);
			td_text(out, r->checks[i].verdict);
			td_text(out, r->checks[i].check);
			td_num(out, r->checks[i].count);
			fputs("</tr>\n", out);
		}
		fputs("</table>\n", out);
	}
	fprintf(out, "<h2>Top senders%s</h2>\n<table %s>\n", r->senders_exact ? "" : " (approximate)",
		TABLE);
	th(out, scols, 4, "l");
	if (r->nsenders == 0)
		none_row(out, 4);
	for (size_t i = 0; i < r->nsenders && i < top; i++) {
		fputs("<tr>", out);
		td_text(out, r->senders[i].name);
		td_num(out, r->senders[i].total), td_num(out, r->senders[i].recipients);
		td_num(out, r->senders[i].bytes);
		fputs("</tr>\n", out);
	}
	fprintf(out, "</table>\n<h2>Message sizes (octets)</h2>\n<table %s>\n", TABLE);
	th(out, zcols, 3, "");
	for (size_t b = 0; b < RPT_SIZE_NBUCKETS; b++) {
		if (r->sizes.count[b] == 0)
			continue;
		fputs("<tr>", out);
		td_str(out, rpt_size_label(b, label, sizeof(label)));
		td_num(out, r->sizes.count[b]), td_num(out, r->sizes.bytes[b]);
		fputs("</tr>\n", out);
	}
	fprintf(out, "<tr><td %s>largest</td><td %s></td>", TD, TD);
	td_num(out, r->sizes.max);
	fputs("</tr>\n</table>\n", out);
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
	th(out, tcols, 7, "");
	fputs("<tr>", out);
	td_num(out, c->received), td_num(out, c->recipients), td_num(out, c->bytes);
	td_num(out, c->sent), td_num(out, c->deferred), td_num(out, c->bounced), td_num(out, c->expired);
	fputs("</tr>\n</table>\n", out);
	fprintf(out, "<h2>Relay peers</h2>\n<table %s>\n", TABLE);
	th(out, pcols, 11, "l");
	if (r->npeers == 0)
		none_row(out, 11);
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
	th(out, dcols, 6, "l");
	if (r->ndomains == 0)
		none_row(out, 6);
	for (size_t i = 0; i < r->ndomains && i < top; i++) {
		const struct rpt_domain *d = &r->domains[i];

		fputs("<tr>", out);
		td_text(out, d->name);
		td_num(out, d->total), td_num(out, d->sent), td_num(out, d->deferred);
		td_num(out, d->bounced), td_num(out, d->expired);
		fputs("</tr>\n", out);
	}
	fprintf(out, "</table>\n<h2>Deferral and bounce reasons</h2>\n<table %s>\n", TABLE);
	th(out, rcols, 4, "llrl");
	if (r->nreasons == 0)
		none_row(out, 4);
	for (size_t i = 0; i < r->nreasons; i++) {
		fputs("<tr>", out);
		td_text(out, r->reasons[i].status);
		td_text(out, r->reasons[i].dsn);
		td_num(out, r->reasons[i].count);
		td_text(out, r->reasons[i].example);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
	extra_tables(r, out, top);
	if (r->have_queue) {
		fprintf(out, "<h2>Queue now (recipients by age in minutes)</h2>\n<table %s>\n<tr>", TABLE);
		fprintf(out, "<th %s>peer</th><th %s>total</th>", THL, TH);
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
	char a[TIMEFMT_LEN], b[TIMEFMT_LEN], hosts[RPT_HOSTS_TEXT];

	timefmt_human(r->from_us, r->utc, TIMEFMT_SEC, a, sizeof(a));
	timefmt_human(r->to_us, r->utc, TIMEFMT_SEC, b, sizeof(b));
	rpt_hosts(r, hosts, sizeof(hosts));
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
	      "<title>tern report: ", out);
	html_text(out, hosts);
	fprintf(out, ", %s to %s</title>\n</head>\n"
		"<body style=\"font-family:sans-serif;color:#222;background:#fff;margin:8px 16px\">\n"
		"<h1 style=\"font-size:20px\">tern report: ", a, b);
	html_text(out, hosts);
	fprintf(out, ", %s to %s", a, b);
	if (r->nodes > 1)
		fprintf(out, ", %u nodes", r->nodes);
	fputs("</h1>\n<h2>Deliveries</h2>\n<div style=\"width:100%\">\n", out);
	volume_chart(r, out);
	fputs("</div>\n<h2>Delivery delay</h2>\n<div style=\"width:100%\">\n", out);
	delay_chart(r, out);
	fputs("</div>\n", out);
	tables(r, out, top);
	fputs("</body>\n</html>\n", out);
	return ferror(out) ? -1 : 0;
}
