/*
 * escape - fields and text for the formats people open in other programs:
 * CSV (RFC 4180 quoting) and HTML (text and attribute values), and the
 * times every format prints (local or UTC, with the offset). Pure apart
 * from writing to the stream and the process's time zone.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "report.h"
#include "timefmt.h"

/* csv_field - one CSV field: quoted when it holds a separator, a quote, a
 * line end or starts with a character a spreadsheet would evaluate */
void csv_field(FILE *out, const char *s)
{
	int formula = s[0] != '\0' && strchr("=+-@\t", s[0]) != NULL;

	if (s[strcspn(s, ",\"\r\n")] == '\0' && !formula) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	if (formula)
		fputc('\'', out);	/* not a formula (CSV injection) */
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

/* html_text - text for an HTML element or a quoted attribute value */
void html_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '&':
			fputs("&amp;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default:
			/* control characters would make the document invalid */
			fputc((unsigned char)*s < 0x20 ? ' ' : *s, out);
		}
	}
}

/* rpt_when - a time of the report to the minute, in its zone:
 * "YYYY-MM-DD HH:MM +HHMM" */
const char *rpt_when(const struct report *r, uint64_t sec, char *buf, size_t cap)
{
	return timefmt_human(sec * 1000000, r->utc, TIMEFMT_MIN, buf, cap);
}

/* rpt_delay_str - a delay in ms for people: "350ms", "1.2s", "4.5m", "2.0h" */
const char *rpt_delay_str(uint64_t ms, char *buf, size_t cap)
{
	if (ms < 1000)
		snprintf(buf, cap, "%llums", (unsigned long long)ms);
	else if (ms < 60000)
		snprintf(buf, cap, "%.1fs", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, cap, "%.1fm", (double)ms / 60000);
	else
		snprintf(buf, cap, "%.1fh", (double)ms / 3600000);
	return buf;
}

/* rpt_pctl_str - a delay percentile for people, "-" without deliveries */
const char *rpt_pctl_str(const struct rpt_hist *h, double q, char *buf, size_t cap)
{
	uint64_t n = 0;

	for (size_t b = 0; b < RPT_DELAY_NBUCKETS; b++)
		n += h->count[b];
	if (n == 0) {
		snprintf(buf, cap, "-");
		return buf;
	}
	return rpt_delay_str(rpt_percentile(h, q), buf, cap);
}

/* rpt_percent - a ratio as "87%", or "-" when there was nothing to divide */
const char *rpt_percent(uint64_t a, uint64_t b, char *buf, size_t cap)
{
	if (b == 0)
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%.0f%%", 100.0 * (double)a / (double)b);
	return buf;
}

/* bytes_short - a size bound for people: "512", "4K", "10M" (binary units) */
static void bytes_short(uint64_t v, char *buf, size_t cap)
{
	if (v >= 1048576 && v % 1048576 == 0)
		snprintf(buf, cap, "%lluM", (unsigned long long)(v / 1048576));
	else if (v >= 1024 && v % 1024 == 0)
		snprintf(buf, cap, "%lluK", (unsigned long long)(v / 1024));
	else
		snprintf(buf, cap, "%llu", (unsigned long long)v);
}

/* rpt_size_label - a size bucket as a range: "0-1K", "1K-4K", ..., "64M+" */
const char *rpt_size_label(size_t b, char *buf, size_t cap)
{
	char lo[24] = "0", hi[24];

	if (b > 0)
		bytes_short(rpt_size_bounds[b - 1], lo, sizeof(lo));
	if (b >= RPT_SIZE_NBOUNDS) {
		snprintf(buf, cap, "%s+", lo);
		return buf;
	}
	bytes_short(rpt_size_bounds[b], hi, sizeof(hi));
	snprintf(buf, cap, "%s-%s", lo, hi);
	return buf;
}

/* rpt_hosts - the nodes' names, comma-separated, "and N more" past the
 * list, "unnamed" when no node gave its name */
const char *rpt_hosts(const struct report *r, char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < r->nhosts && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", r->hosts[i]);
	if (r->hosts_more && n < cap)
		snprintf(buf + n, cap - n, r->nhosts ? " and %llu more" : "%llu unnamed",
			 (unsigned long long)r->hosts_more);
	else if (r->nhosts == 0)
		snprintf(buf, cap, "unnamed");
	return buf;
}
