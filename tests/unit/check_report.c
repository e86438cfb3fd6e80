/*
 * check_report - tern-report's pure parts: delay buckets and percentiles
 * (also of merged histograms), aggregation of history records (outcomes,
 * transactions, connection reuse and TLS, failures), the bounded tables
 * (peers, reasons, Space-Saving domains), CSV and HTML escaping, the time
 * parser and the --since window in three zones (DST days too), hours
 * that begin where the zone's do, the --merge JSON reader's refusals,
 * store_hist_foreach_range over more records than one read batch, and the sections of the milter's
 * verdicts, the top senders and the message sizes in text, CSV and JSON
 * (also merged), and the series' step per window.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_text.h"
#include "report.h"
#include "store.h"
#include "tmpstore.h"
#include "unit.h"

#define DAY0 1732838400ULL		/* 2024-11-29 00:00 UTC */
#define US(s) ((uint64_t)(s) * 1000000)

/* new_report - a report of DAY0's 24 hours */
static void new_report(struct report *r)
{
	const char *why;

	ck_assert_int_eq(report_init(r, US(DAY0), US(DAY0 + 86400), &why), 0);
}

/* attempt - a history record of one recipient's attempt */
static struct hist_rec attempt(uint64_t t, const char *qid, uint32_t idx, const char *rcpt,
			       const char *peer, unsigned state, uint32_t conn_use, unsigned tls,
			       uint64_t delay_ms, const char *dsn, const char *reply)
{
	struct hist_rec h;

	memset(&h, 0, sizeof(h));
	h.kind = HIST_ATTEMPT;
	h.state = (uint8_t)state;
	h.tls = (uint8_t)tls;
	h.code = (uint16_t)atoi(reply);
	h.idx = idx;
	h.conn_use = conn_use;
	h.time_us = US(t);
	h.delays_us[0] = delay_ms * 1000;
	snprintf(h.qid, sizeof(h.qid), "%s", qid);
	h.rcpt = (char *)rcpt;
	h.peer = (char *)peer;
	h.relay = (char *)(conn_use ? "mx.example[192.0.2.1]:25" : "none");
	h.dsn = (char *)dsn;
	h.reply = (char *)reply;
	h.sender = h.msgid = h.client = h.peer_qid = (char *)"";
	return h;
}

static const struct {
	uint64_t ms;
	size_t bucket;
} buckets[] = {
	{0, 0}, {1, 0}, {2, 1}, {3, 2}, {10, 3}, {11, 4}, {1000, 9},
	{432000000, RPT_DELAY_NBOUNDS - 1}, {432000001, RPT_DELAY_NBOUNDS}, {UINT64_MAX, RPT_DELAY_NBOUNDS},
};

START_TEST(test_bucket)
{
	ck_assert_uint_eq(rpt_delay_bucket(buckets[_i].ms), buckets[_i].bucket);
}
END_TEST

START_TEST(test_percentile)
{
	struct rpt_hist h, twice;

	memset(&h, 0, sizeof(h));
	ck_assert_uint_eq(rpt_percentile(&h, 0.5), 0);
	/* 10 deliveries in (10, 25] ms: linear inside the bucket */
	h.count[rpt_delay_bucket(20)] = 10;
	ck_assert_uint_eq(rpt_percentile(&h, 0.5), 18);	/* 10 + 15 * 5/10 = 17.5 */
	ck_assert_uint_eq(rpt_percentile(&h, 1.0), 25);
	/* one slow delivery lands in p99, not p50 */
	h.count[rpt_delay_bucket(90000)] = 1;
	ck_assert_uint_le(rpt_percentile(&h, 0.5), 25);
	ck_assert_uint_gt(rpt_percentile(&h, 0.99), 60000);
	/* the open bucket answers its lower bound */
	memset(&h, 0, sizeof(h));
	h.count[RPT_DELAY_NBOUNDS] = 3;
	ck_assert_uint_eq(rpt_percentile(&h, 0.5), rpt_delay_bounds_ms[RPT_DELAY_NBOUNDS - 1]);
	/* merged histograms: the same traffic twice has the same percentiles */
	memset(&h, 0, sizeof(h));
	h.count[2] = 4;
	h.count[3] = 3;
	h.count[7] = 1;
	twice = h;
	rpt_hist_add(&twice, &h);
	ck_assert_uint_eq(twice.count[3], 6);
	for (double q = 0.05; q <= 1.0; q += 0.05)
		ck_assert_uint_eq(rpt_percentile(&twice, q), rpt_percentile(&h, q));
}
END_TEST

START_TEST(test_aggregate)
{
	struct report r;
	struct hist_rec acc, h[8];
	size_t n = 0;

	new_report(&r);
	memset(&acc, 0, sizeof(acc));
	acc.kind = HIST_ACCEPT;
	acc.time_us = US(DAY0 + 3600 + 5);
	acc.size = 1500;
	acc.nrcpt = 2;
	report_add(&acc, &r);
	acc.time_us = US(DAY0 - 1);	/* before the window: not counted */
	report_add(&acc, &r);
	/* one transaction of two recipients on a new resumed TLS connection */
	h[n++] = attempt(DAY0 + 3601, "AAAA", 0, "a@x.example", "relay", RCPT_SENT, 1,
			 HIST_TLS_RESUMED, 20, "2.0.0", "250 2.0.0 Ok");
	h[n++] = attempt(DAY0 + 3601, "AAAA", 1, "b@Y.example", "relay", RCPT_SENT, 1,
			 HIST_TLS_RESUMED, 20, "2.0.0", "250 2.0.0 Ok");
	/* the next one on the same connection */
	h[n++] = attempt(DAY0 + 3602, "BBBB", 0, "c@x.example", "relay", RCPT_BOUNCED, 2,
			 HIST_TLS_RESUMED, 0, "5.1.1", "550 5.1.1 unknown user");
	/* a new connection, full handshake */
	h[n++] = attempt(DAY0 + 7300, "CCCC", 0, "d@x.example", "relay", RCPT_DEFERRED, 1,
			 HIST_TLS_FULL, 0, "4.2.0", "450 4.2.0 later");
	/* a TLS failure: no connection */
	h[n++] = attempt(DAY0 + 7400, "DDDD", 0, "e@z.example", "other", RCPT_DEFERRED, 0,
			 HIST_TLS_NONE, 0, "4.4.1",
			 "450 TLS handshake with mx[192.0.2.2] failed: certificate verify failed");
	h[n++] = attempt(DAY0 + 7500, "EEEE", 0, "f@z.example", "other", HIST_EXPIRED, 0,
			 HIST_TLS_NONE, 0, "4.4.7", "message expired");
	for (size_t i = 0; i < n; i++)
		report_add(&h[i], &r);
	report_finish(&r);

	ck_assert_uint_eq(r.total.received, 1);
	ck_assert_uint_eq(r.total.recipients, 2);
	ck_assert_uint_eq(r.total.bytes, 1500);
	ck_assert_uint_eq(r.total.sent, 2);
	ck_assert_uint_eq(r.total.bounced, 1);
	ck_assert_uint_eq(r.total.deferred, 2);
	ck_assert_uint_eq(r.total.expired, 1);
	ck_assert(rpt_traffic(&r));
	ck_assert_uint_eq(r.nhours, 24);
	ck_assert_uint_eq(r.hours[1].c.received, 1);
	ck_assert_uint_eq(r.hours[1].c.sent, 2);
	ck_assert_uint_eq(r.hours[2].c.deferred, 2);
	ck_assert_uint_eq(r.hours[2].c.expired, 1);
	/* peers sorted by name */
	ck_assert_uint_eq(r.npeers, 2);
	ck_assert_str_eq(r.peers[0].name, "other");
	ck_assert_uint_eq(r.peers[0].conn_failures, 1);
	ck_assert_uint_eq(r.peers[0].handshake_failures, 1);
	ck_assert_uint_eq(r.peers[0].transactions, 0);
	ck_assert_str_eq(r.peers[1].name, "relay");
	ck_assert_uint_eq(r.peers[1].transactions, 3);
	ck_assert_uint_eq(r.peers[1].reused, 1);
	ck_assert_uint_eq(r.peers[1].connections, 2);
	ck_assert_uint_eq(r.peers[1].tls_resumed, 1);
	ck_assert_uint_eq(r.peers[1].tls_full, 1);
	ck_assert_uint_eq(r.peers[1].delay.count[rpt_delay_bucket(20)], 2);
	/* domains: by total, case folded */
	ck_assert_uint_eq(r.ndomains, 3);
	ck_assert_str_eq(r.domains[0].name, "x.example");
	ck_assert_uint_eq(r.domains[0].total, 3);
	ck_assert_uint_eq(r.domains[0].sent, 1);
	ck_assert(r.domains_exact);
	/* reasons: by count, then status and code */
	ck_assert_uint_eq(r.nreasons, 4);
	ck_assert_str_eq(r.reasons[0].status, "bounced");
	ck_assert_str_eq(r.reasons[0].dsn, "5.1.1");
	ck_assert_str_eq(r.reasons[0].example, "550 5.1.1 unknown user");
	report_free(&r);
}
END_TEST

START_TEST(test_window)
{
	struct report r;
	const char *why;

	ck_assert_int_eq(report_init(&r, US(DAY0), US(DAY0), &why), -1);
	ck_assert_int_eq(report_init(&r, US(DAY0), US(DAY0 + 367ULL * 86400), &why), -1);
	/* a window that starts mid-hour has the partial hours at both ends */
	ck_assert_int_eq(report_init(&r, US(DAY0 + 1800), US(DAY0 + 1800 + 86400), &why), 0);
	ck_assert_uint_eq(r.nhours, 25);
	ck_assert_uint_eq(r.hour0, DAY0);
	ck_assert_ptr_null(rpt_hour(&r, DAY0 - 1));
	ck_assert_ptr_nonnull(rpt_hour(&r, DAY0 + 86400 + 3599));
	ck_assert_ptr_null(rpt_hour(&r, DAY0 + 86400 + 3600));
	ck_assert(!rpt_traffic(&r));
	report_free(&r);
}
END_TEST

START_TEST(test_caps)
{
	struct report r;
	char name[64];

	new_report(&r);
	for (int i = 0; i < RPT_PEERS_MAX + 50; i++) {
		snprintf(name, sizeof(name), "peer%d", i);
		rpt_peer(&r, name)->c.sent++;
	}
	ck_assert_uint_eq(r.npeers, RPT_PEERS_MAX);
	ck_assert_str_eq(rpt_peer(&r, "peer9999")->name, RPT_OTHER);
	ck_assert_uint_eq(rpt_peer(&r, RPT_OTHER)->c.sent, 51);
	for (int i = 0; i < RPT_REASONS_MAX + 10; i++) {
		snprintf(name, sizeof(name), "4.%d.%d", i / 10, i % 10);
		rpt_reason(&r, "deferred", name, "x")->count++;
	}
	ck_assert_uint_eq(r.nreasons, RPT_REASONS_MAX);
	report_free(&r);
}
END_TEST

START_TEST(test_space_saving)
{
	struct report r;
	struct rpt_domain one = {.total = 1, .sent = 1};
	char name[64];

	new_report(&r);
	/* a heavy domain among many light ones keeps its place and its count */
	for (int i = 0; i < 3 * RPT_DOMAINS_MAX; i++) {
		snprintf(name, sizeof(name), "light%d.example", i);
		rpt_domain_add(&r, name, &one);
		if (i % 3 == 0)
			rpt_domain_add(&r, "heavy.example", &one);
	}
	report_finish(&r);
	ck_assert_uint_eq(r.ndomains, RPT_DOMAINS_MAX);
	ck_assert(!r.domains_exact);
	ck_assert_str_eq(r.domains[0].name, "heavy.example");
	ck_assert_uint_eq(r.domains[0].total, RPT_DOMAINS_MAX);
	ck_assert_uint_eq(r.domains[0].error, 0);
	report_free(&r);
}
END_TEST

/* capture - what fn wrote for s */
static char *capture(void (*fn)(FILE *, const char *), const char *s)
{
	static char buf[512];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	fn(f, s);
	fclose(f);
	return buf;
}

static const struct {
	const char *in, *csv, *html;
} escapes[] = {
	{"plain", "plain", "plain"},
	{"", "", ""},
	{"a,b", "\"a,b\"", "a,b"},
	{"say \"hi\"", "\"say \"\"hi\"\"\"", "say &quot;hi&quot;"},
	{"two\r\nlines", "\"two\r\nlines\"", "two  lines"},
	{"=HYPERLINK(1)", "\"'=HYPERLINK(1)\"", "=HYPERLINK(1)"},
	{"-2+3", "\"'-2+3\"", "-2+3"},
	{"<script>&'", "<script>&'", "&lt;script&gt;&amp;&#39;"},
	{"4.7.0", "4.7.0", "4.7.0"},
};

START_TEST(test_escape)
{
	ck_assert_str_eq(capture(csv_field, escapes[_i].in), escapes[_i].csv);
	ck_assert_str_eq(capture(html_text, escapes[_i].in), escapes[_i].html);
}
END_TEST

static const struct {
	const char *in;
	int rc;
	uint64_t sec;
} times[] = {
	{"@0", 0, 0},
	{"@1732838400", 0, DAY0},
	{"2024-11-29", 0, DAY0},
	{"2024-11-29T01:30", 0, DAY0 + 5400},
	{"2024-11-29 01:30:15", 0, DAY0 + 5415},
	{"2024-11-29T01:30:15Z", 0, DAY0 + 5415},
	{"2024-11-29T01:30:15.250Z", 0, DAY0 + 5415},
	{"2024-11-29T01:30:15+05:30", 0, DAY0 + 5415 - 19800},
	{"2024-11-29T01:30-0500", 0, DAY0 + 5400 + 18000},
	{"2024-11-29T01:30-05", 0, DAY0 + 5400 + 18000},
	{"2024-11-29T01:30+25:00", -1, 0},
	{"2024-11-29T01:30+05:3", -1, 0},
	{"2024-11-29T01:30Zx", -1, 0},
	{"2024-11-29T", -1, 0},
	{"2024-11-29x", -1, 0},
	{"yesterday", -1, 0},
	{"@", -1, 0},
	{"@-5", -1, 0},
	{"@12x", -1, 0},
	{"", -1, 0},
};

START_TEST(test_time)
{
	uint64_t sec = 42;

	ck_assert_int_eq(rpt_parse_time(times[_i].in, 1, &sec), times[_i].rc);
	if (times[_i].rc == 0)
		ck_assert_uint_eq(sec, times[_i].sec);
}
END_TEST

/* zone - make tz the process's local zone */
static void zone(const char *tz)
{
	ck_assert_int_eq(setenv("TZ", tz, 1), 0);
	tzset();
}

START_TEST(test_time_local)
{
	uint64_t sec;

	/* without a zone: local time, the offset in force then; a zone wins */
	zone("America/New_York");
	ck_assert_int_eq(rpt_parse_time("2024-11-29", 0, &sec), 0);
	ck_assert_uint_eq(sec, DAY0 + 18000);
	ck_assert_int_eq(rpt_parse_time("2026-07-01T12:00", 0, &sec), 0);
	ck_assert_uint_eq(sec, 1782921600);	/* EDT: -0400 */
	ck_assert_int_eq(rpt_parse_time("2024-11-29T00:00Z", 0, &sec), 0);
	ck_assert_uint_eq(sec, DAY0);
	zone("Asia/Kolkata");
	ck_assert_int_eq(rpt_parse_time("2024-11-29", 0, &sec), 0);
	ck_assert_uint_eq(sec, DAY0 - 19800);
	ck_assert_int_eq(rpt_parse_time("2024-11-29", 1, &sec), 0);
	ck_assert_uint_eq(sec, DAY0);
	zone("UTC");
}
END_TEST

/* --since: (zone, now, spec) -> [from, to); rc -1 refused */
#define NY_0308 1772946000ULL		/* 2026-03-08 00:00 -0500, a day of 23 hours */
#define NY_1101 1793505600ULL		/* 2026-11-01 00:00 -0400, a day of 25 hours */
static const struct {
	const char *tz;
	uint64_t now;
	const char *spec;
	int utc, rc;
	uint64_t from, to;
} windows[] = {
	/* DAY0 + 3 h: 2024-11-28 22:00 in New York, 08:30 on the 29th in Kolkata */
	{"America/New_York", DAY0 + 10800, "today", 0, 0, DAY0 - 86400 + 18000, DAY0 + 10800},
	{"America/New_York", DAY0 + 10800, "yesterday", 0, 0, DAY0 - 2 * 86400 + 18000,
	 DAY0 - 86400 + 18000},
	{"America/New_York", DAY0 + 10800, "today", 1, 0, DAY0, DAY0 + 10800},
	{"America/New_York", DAY0 + 10800, "yesterday", 1, 0, DAY0 - 86400, DAY0},
	{"Asia/Kolkata", DAY0 + 10800, "today", 0, 0, DAY0 - 19800, DAY0 + 10800},
	{"Asia/Kolkata", DAY0 + 10800, "yesterday", 0, 0, DAY0 - 86400 - 19800, DAY0 - 19800},
	{"Asia/Kolkata", DAY0 + 10800, "-24h", 0, 0, DAY0 + 10800 - 86400, DAY0 + 10800},
	{"Asia/Kolkata", DAY0 + 10800, "24h", 0, 0, DAY0 + 10800 - 86400, DAY0 + 10800},
	{"Asia/Kolkata", DAY0 + 10800, "90m", 0, 0, DAY0 + 10800 - 5400, DAY0 + 10800},
	{"Asia/Kolkata", DAY0 + 10800, "2024-11-29", 0, 0, DAY0 - 19800, DAY0 + 10800},
	{"America/New_York", DAY0 + 10800, "2024-11-28T12:00", 0, 0, DAY0 - 43200 + 18000,
	 DAY0 + 10800},
	{"America/New_York", DAY0 + 10800, "2024-11-28T12:00:00+01:00", 0, 0, DAY0 - 43200 - 3600,
	 DAY0 + 10800},
	{"America/New_York", DAY0 + 10800, "@1732800000", 0, 0, 1732800000, DAY0 + 10800},
	/* the days DST changes: 23 and 25 hours */
	{"America/New_York", NY_0308 + 86400 + 3600, "yesterday", 0, 0, NY_0308, NY_0308 + 82800},
	{"America/New_York", NY_1101 + 90000 + 3600, "yesterday", 0, 0, NY_1101, NY_1101 + 90000},
	{"America/New_York", NY_1101 + 43200, "today", 0, 0, NY_1101, NY_1101 + 43200},
	{"America/New_York", DAY0, "0s", 0, -1, 0, 0},
	{"America/New_York", DAY0, "-0s", 0, -1, 0, 0},
	{"America/New_York", DAY0, "tomorrow", 0, -1, 0, 0},
	{"America/New_York", DAY0, "2024-11-30", 0, -1, 0, 0},
	{"America/New_York", DAY0, "", 0, -1, 0, 0},
	{"America/New_York", DAY0, "--24h", 0, -1, 0, 0},
};

START_TEST(test_since)
{
	uint64_t from = 1, to = 2;
	const char *why = NULL;

	zone(windows[_i].tz);
	ck_assert_int_eq(rpt_window(windows[_i].spec, US(windows[_i].now), windows[_i].utc, &from, &to,
				    &why), windows[_i].rc);
	if (windows[_i].rc == 0) {
		ck_assert_uint_eq(from, US(windows[_i].from));
		ck_assert_uint_eq(to, US(windows[_i].to));
	} else {
		ck_assert_ptr_nonnull(why);
	}
	zone("UTC");
}
END_TEST

/* the hours of a report begin where the zone's do: half an hour off UTC
 * in Kolkata, 25 of them on the day New York falls back */
START_TEST(test_zone_hours)
{
	struct report r;
	const char *why;
	char buf[RPT_WHEN_MAX];

	zone("Asia/Kolkata");
	ck_assert_int_eq(report_init_zone(&r, US(DAY0), US(DAY0 + 86400), 0, &why), 0);
	ck_assert_uint_eq(r.hour0, DAY0 - 1800);
	ck_assert_uint_eq(r.nhours, 25);
	ck_assert_str_eq(rpt_when(&r, r.hour0, buf, sizeof(buf)), "2024-11-29 05:00 +0530");
	ck_assert_ptr_eq(rpt_hour(&r, DAY0 + 1799), &r.hours[0]);	/* 05:59:59 */
	ck_assert_ptr_eq(rpt_hour(&r, DAY0 + 1800), &r.hours[1]);	/* 06:00 */
	ck_assert_uint_eq((r.slot0 + 19800) % r.slot_step, 0);
	report_free(&r);
	ck_assert_int_eq(report_init_zone(&r, US(DAY0), US(DAY0 + 86400), 1, &why), 0);
	ck_assert_uint_eq(r.hour0, DAY0);
	ck_assert_uint_eq(r.nhours, 24);
	ck_assert_str_eq(rpt_when(&r, r.hour0, buf, sizeof(buf)), "2024-11-29 00:00 +0000");
	report_free(&r);
	zone("America/New_York");
	ck_assert_int_eq(report_init_zone(&r, US(NY_1101), US(NY_1101 + 90000), 0, &why), 0);
	ck_assert_uint_eq(r.hour0, NY_1101);
	ck_assert_uint_eq(r.nhours, 25);
	ck_assert_str_eq(rpt_when(&r, r.hour0 + 3600, buf, sizeof(buf)), "2026-11-01 01:00 -0400");
	ck_assert_str_eq(rpt_when(&r, r.hour0 + 7200, buf, sizeof(buf)), "2026-11-01 01:00 -0500");
	ck_assert_str_eq(rpt_when(&r, r.hour0 + 24 * 3600, buf, sizeof(buf)), "2026-11-01 23:00 -0500");
	report_free(&r);
	ck_assert_int_eq(report_init_zone(&r, US(NY_0308), US(NY_0308 + 82800), 0, &why), 0);
	ck_assert_uint_eq(r.nhours, 23);
	ck_assert_str_eq(rpt_when(&r, r.hour0 + 2 * 3600, buf, sizeof(buf)), "2026-03-08 03:00 -0400");
	report_free(&r);
	zone("UTC");
}
END_TEST

/* to_json - a report as JSON text (allocated) */
static char *to_json(const struct report *r, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	ck_assert_int_eq(report_json(r, f), 0);
	fclose(f);
	return buf;
}

START_TEST(test_merge)
{
	struct report r, m;
	struct hist_rec h = attempt(DAY0 + 60, "AAAA", 0, "a@x.example", "relay", RCPT_SENT, 1,
				    HIST_TLS_FULL, 30, "2.0.0", "250 ok");
	char why[256], *json;
	size_t len;
	uint64_t f, t;

	new_report(&r);
	report_add(&h, &r);
	rpt_domain_add(&r, "y.example", &(struct rpt_domain){.total = 2, .bounced = 2});
	report_finish(&r);
	json = to_json(&r, &len);
	ck_assert_int_eq(report_merge_window(json, len, &f, &t), 0);
	ck_assert_uint_eq(f, US(DAY0));
	ck_assert_uint_eq(t, US(DAY0 + 86400));
	new_report(&m);
	m.nodes = 0;
	ck_assert_int_eq(report_merge_json(&m, json, len, why, sizeof(why)), 0);
	ck_assert_int_eq(report_merge_json(&m, json, len, why, sizeof(why)), 0);
	report_finish(&m);
	ck_assert_uint_eq(m.nodes, 2);
	ck_assert_uint_eq(m.total.sent, 2);
	ck_assert_uint_eq(m.hours[0].c.sent, 2);
	ck_assert_uint_eq(m.hours[0].delay.count[rpt_delay_bucket(30)], 2);
	ck_assert_uint_eq(m.npeers, 1);
	ck_assert_uint_eq(m.peers[0].connections, 2);
	ck_assert_uint_eq(m.peers[0].tls_full, 2);
	ck_assert_str_eq(m.domains[0].name, "y.example");
	ck_assert_uint_eq(m.domains[0].bounced, 4);
	ck_assert_uint_eq(rpt_percentile(&m.delay, 0.5), rpt_percentile(&r.delay, 0.5));
	report_free(&m);
	report_free(&r);
	free(json);
}
END_TEST

/* JSON numbers: the fewest digits that read back as the same double, not
 * jansson's 17 ("0.33333333333333331"), in tern-report's JSON */
START_TEST(test_json_numbers)
{
	struct report r;
	struct hist_rec h[3] = {
		attempt(DAY0 + 60, "AAAA", 0, "a@x.example", "relay", RCPT_SENT, 1, HIST_TLS_RESUMED, 20,
			"2.0.0", "250 ok"),
		attempt(DAY0 + 61, "BBBB", 0, "b@x.example", "relay", RCPT_SENT, 2, HIST_TLS_RESUMED, 20,
			"2.0.0", "250 ok"),
		attempt(DAY0 + 9000, "CCCC", 0, "c@x.example", "relay", RCPT_SENT, 1, HIST_TLS_FULL, 20,
			"2.0.0", "250 ok"),
	};
	char *json;
	size_t len;

	new_report(&r);
	for (size_t i = 0; i < 3; i++)
		report_add(&h[i], &r);
	report_finish(&r);
	ck_assert_uint_eq(r.peers[0].transactions, 3);
	ck_assert_uint_eq(r.peers[0].reused, 1);
	json = to_json(&r, &len);
	ck_assert_ptr_nonnull(strstr(json, "\"reuse_ratio\": 0.3333333333333333,\n"));
	ck_assert_ptr_nonnull(strstr(json, "\"tls_resumption_ratio\": 0.5"));
	free(json);
	report_free(&r);
}
END_TEST

/* json_real_shortest and json_dumps_short: each real with its fewest
 * round-trip digits; a string holding the placeholder's octet (or its
 * escape's text) is left as it was */
static const struct {
	double x;
	const char *text;
} shortest[] = {
	{0.1, "0.1"}, {0.5, "0.5"}, {1.0 / 3, "0.3333333333333333"}, {2.0 / 3, "0.6666666666666666"},
	{1765065600.123456, "1765065600.123456"}, {0.0012, "0.0012"}, {0, "0"}, {1e-7, "1e-07"},
	{1e21, "1e+21"}, {123456789012345680.0, "1.2345678901234568e+17"}, {5e-324, "5e-324"},
};

START_TEST(test_json_shortest)
{
	char buf[40], *s;
	json_t *o;

	for (size_t i = 0; i < sizeof(shortest) / sizeof(shortest[0]); i++) {
		json_real_shortest(shortest[i].x, buf, sizeof(buf));
		ck_assert_str_eq(buf, shortest[i].text);
		ck_assert(strtod(buf, NULL) == shortest[i].x);
	}
	o = json_pack("{s:f, s:[f, i, s], s:s}", "a", 0.1, "b", 1.0 / 3, 7, "\\u0001x", "c", "0.1");
	s = json_dumps_short(o, JSON_COMPACT);
	ck_assert_str_eq(s, "{\"a\":0.1,\"b\":[0.3333333333333333,7,\"\\\\u0001x\"],\"c\":\"0.1\"}");
	free(s);
	json_object_set_new(o, "d", json_string("\x01" "2"));
	s = json_dumps_short(o, JSON_COMPACT);	/* the placeholder's octet: jansson's form */
	ck_assert_ptr_nonnull(strstr(s, "\"a\":0.10000000000000001"));
	ck_assert_ptr_nonnull(strstr(s, "\"d\":\"\\u00012\""));
	free(s);
	json_decref(o);
}
END_TEST

static const char *const bad_json[] = {
	"",
	"[]",
	"{\"version\": 2}",
	"{\"version\": 1, \"from\": 0, \"to\": 10}",		/* no delay_bounds_ms */
	"{\"version\": 1, \"delay_bounds_ms\": [1, 2]}",	/* not our buckets */
	"{\"version\": 1, \"version\": 1}",			/* duplicate member */
	"{\"version\": \"1\"}",
};

START_TEST(test_merge_refuses)
{
	struct report r;
	char why[256] = "";

	new_report(&r);
	ck_assert_int_eq(report_merge_json(&r, bad_json[_i], strlen(bad_json[_i]), why, sizeof(why)), -1);
	ck_assert(why[0] != '\0');
	ck_assert_uint_eq(r.nodes, 1);
	report_free(&r);
}
END_TEST

/* bounds_json - the delay_bounds_ms member text */
static void bounds_json(char *buf, size_t cap)
{
	size_t n = (size_t)snprintf(buf, cap, "\"delay_bounds_ms\": [");

	for (size_t b = 0; b < RPT_DELAY_NBOUNDS; b++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%llu", b ? "," : "",
				      (unsigned long long)rpt_delay_bounds_ms[b]);
	snprintf(buf + n, cap - n, "]");
}

START_TEST(test_merge_all_or_nothing)
{
	struct report r;
	char bounds[512], json[2048], why[256];

	/* totals are fine, a later peer is broken: nothing is added */
	bounds_json(bounds, sizeof(bounds));
	snprintf(json, sizeof(json), "{\"version\": 1, %s, \"from\": %llu, \"to\": %llu, "
		 "\"totals\": {\"sent\": 5}, \"peers\": [{\"peer\": \"a\", \"sent\": 5}, "
		 "{\"peer\": \"b\", \"sent\": -1}]}", bounds, DAY0, DAY0 + 86400);
	new_report(&r);
	ck_assert_int_eq(report_merge_json(&r, json, strlen(json), why, sizeof(why)), -1);
	ck_assert_uint_eq(r.total.sent, 0);
	ck_assert_uint_eq(r.npeers, 0);
	report_free(&r);
}
END_TEST

#define RANGE_MSGS 1500			/* three records each: several read batches */

/* put_range - RANGE_MSGS messages, one a second from DAY0: an acceptance and
 * two attempts of the same transaction (same time, one key apart) */
static int put_range(struct store_txn *t, void *arg)
{
	(void)arg;
	for (uint64_t i = 0; i < RANGE_MSGS; i++) {
		char qid[QID_LEN + 1];
		struct hist_rec h[3];

		snprintf(qid, sizeof(qid), "%0*llu", QID_LEN, (unsigned long long)i);
		h[0] = attempt(DAY0 + i, qid, 0, "", "", 0, 0, 0, 0, "", "");
		h[0].kind = HIST_ACCEPT;
		h[0].nrcpt = 2;
		h[0].size = 100;
		h[1] = attempt(DAY0 + i, qid, 0, "a@x.example", "relay", RCPT_SENT, 1 + (unsigned)i % 5,
			       HIST_TLS_FULL, 30, "2.0.0", "250 ok");
		h[2] = attempt(DAY0 + i, qid, 1, "b@x.example", "relay", RCPT_DEFERRED, 1 + (unsigned)i % 5,
			       HIST_TLS_FULL, 0, "4.2.0", "450 later");
		for (size_t k = 0; k < 3; k++)
			if (store_hist_put(t, &h[k]) != 0)
				return -1;
	}
	return 0;
}

START_TEST(test_history_range)
{
	char dir[256], err[256];
	struct store *st = tmpstore_open(dir, sizeof(dir));
	struct report r;
	const char *why;

	ck_assert_int_eq(store_write(st, put_range, NULL, err, sizeof(err)), 0);
	/* [DAY0 + 100, DAY0 + 1300): 1200 messages, the ends exact */
	ck_assert_int_eq(report_init(&r, US(DAY0 + 100), US(DAY0 + 1300), &why), 0);
	ck_assert_int_eq(store_hist_foreach_range(st, r.from_us, r.to_us, report_add, &r), 0);
	report_finish(&r);
	ck_assert_uint_eq(r.total.received, 1200);
	ck_assert_uint_eq(r.total.recipients, 2400);
	ck_assert_uint_eq(r.total.bytes, 120000);
	ck_assert_uint_eq(r.total.sent, 1200);
	ck_assert_uint_eq(r.total.deferred, 1200);
	/* both recipients' records of a transaction make one transaction,
	 * also where a read batch ends between them */
	ck_assert_uint_eq(r.npeers, 1);
	ck_assert_uint_eq(r.peers[0].transactions, 1200);
	ck_assert_uint_eq(r.peers[0].connections, 240);
	ck_assert_uint_eq(r.peers[0].reused, 960);
	report_free(&r);
	/* an empty window, and one past the end */
	ck_assert_int_eq(report_init(&r, US(DAY0 - 7200), US(DAY0), &why), 0);
	ck_assert_int_eq(store_hist_foreach_range(st, r.from_us, r.to_us, report_add, &r), 0);
	ck_assert(!rpt_traffic(&r));
	report_free(&r);
	ck_assert_int_eq(report_init(&r, US(DAY0 + 1499), US(DAY0 + 9999), &why), 0);
	ck_assert_int_eq(store_hist_foreach_range(st, r.from_us, r.to_us, report_add, &r), 0);
	ck_assert_uint_eq(r.total.received, 1);
	report_free(&r);
	store_close(&st);
	tmpdir_remove(dir);
}
END_TEST

/* accept_rec - an acceptance from sender of size octets, one recipient */
static struct hist_rec accept_rec(uint64_t t, const char *sender, uint64_t size)
{
	struct hist_rec h = attempt(t, "QQQQ", 0, "", "", 0, 0, 0, 0, "", "");

	h.kind = HIST_ACCEPT;
	h.nrcpt = 1;
	h.size = size;
	h.sender = (char *)sender;
	return h;
}

/* extra_report - a fixture: five acceptances from three senders (one the
 * null sender) and seven journal records with known verdicts */
static void extra_report(struct report *r)
{
	static const struct {
		const char *sender;
		uint64_t size;
	} acc[] = {{"a@x.example", 500}, {"a@x.example", 2000}, {"", 70000}, {"a@x.example", 2000},
		{"B@y.example", 5000}};
	static const char *const verdicts[] = {"accept", "accept", "tag:date:from", "reject:loop",
		"tempfail:header_limits", "reject", "bogus\033[1m"};

	new_report(r);
	for (size_t i = 0; i < N_ELEMENTS(acc); i++) {
		struct hist_rec h = accept_rec(DAY0 + 60 * i, acc[i].sender, acc[i].size);

		report_add(&h, r);
	}
	for (size_t i = 0; i < N_ELEMENTS(verdicts); i++) {
		struct journal_rec j;

		memset(&j, 0, sizeof(j));
		j.time_us = US(DAY0 + 100 + i);
		j.verdict = (char *)verdicts[i];
		report_add_journal(&j, r);
	}
	/* outside the window: not counted */
	report_add_journal(&(struct journal_rec){.time_us = US(DAY0 + 86400), .verdict = (char *)"accept"}, r);
	r->have_milter = 1;
	rpt_host_add(r, "mx1.example");
	report_finish(r);
}

/* to_text - what an output function wrote (allocated) */
static char *to_text(int (*fn)(const struct report *, FILE *, const char *, size_t),
		     const struct report *r, const char *table)
{
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_int_eq(fn(r, f, table, 10), 0);
	fclose(f);
	return buf;
}

/* text_fn - report_text in to_text's shape */
static int text_fn(const struct report *r, FILE *f, const char *table, size_t top)
{
	(void)table;
	return report_text(r, f, top);
}

START_TEST(test_extra_aggregate)
{
	struct report r;

	extra_report(&r);
	ck_assert_uint_eq(r.nsenders, 3);
	ck_assert(r.senders_exact);
	ck_assert_str_eq(r.senders[0].name, "a@x.example");
	ck_assert_uint_eq(r.senders[0].total, 3);
	ck_assert_uint_eq(r.senders[0].bytes, 4500);
	ck_assert_str_eq(r.senders[1].name, "<>");
	ck_assert_str_eq(r.senders[2].name, "B@y.example");
	ck_assert_uint_eq(r.sizes.count[0], 1);		/* 500 */
	ck_assert_uint_eq(r.sizes.count[1], 2);		/* 2000 twice */
	ck_assert_uint_eq(r.sizes.bytes[1], 4000);
	ck_assert_uint_eq(r.sizes.count[2], 1);		/* 5000 */
	ck_assert_uint_eq(r.sizes.count[4], 1);		/* 70000 */
	ck_assert_uint_eq(r.sizes.max, 70000);
	ck_assert_uint_eq(r.milter.messages, 7);
	ck_assert_uint_eq(r.milter.accepted, 2);
	ck_assert_uint_eq(r.milter.tagged, 1);
	ck_assert_uint_eq(r.milter.rejected, 2);
	ck_assert_uint_eq(r.milter.tempfailed, 1);
	ck_assert_uint_eq(r.milter.other, 1);
	/* one row per check behind a verdict, by count then names */
	ck_assert_uint_eq(r.nchecks, 5);
	ck_assert_str_eq(r.checks[0].verdict, "reject");
	ck_assert_str_eq(r.checks[0].check, "loop");
	ck_assert_str_eq(r.checks[1].check, "unknown");	/* a record from before checks were journaled */
	ck_assert_str_eq(r.checks[2].verdict, "tag");
	ck_assert_str_eq(r.checks[2].check, "date");
	ck_assert_str_eq(r.checks[3].check, "from");
	ck_assert_str_eq(r.checks[4].verdict, "tempfail");
	ck_assert_str_eq(r.checks[4].check, "header_limits");
	report_free(&r);
}
END_TEST

START_TEST(test_extra_text)
{
	struct report r;
	char *t;

	extra_report(&r);
	t = to_text(text_fn, &r, NULL);
	ck_assert_ptr_nonnull(strstr(t, " +0000\nhost: mx1.example\n\nGrand Totals\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nMilter Verdicts\n---------------\n"
				     "        7   messages inspected\n"
				     "        2   accepted\n"
				     "        1   tagged\n"
				     "        2   rejected\n"
				     "        1   temporarily refused\n"
				     "        1   other verdicts\n"
				     "\n"
				     "verdict    check            messages\n"
				     "reject     loop                    1\n"
				     "reject     unknown                 1\n"
				     "tag        date                    1\n"
				     "tag        from                    1\n"
				     "tempfail   header_limits           1\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nTop Senders\n-----------\n"
				     "sender      messages recipients        bytes\n"
				     "a@x.example        3          3         4500\n"
				     "<>                 1          1        70000\n"
				     "B@y.example        1          1         5000\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nMessage Sizes (octets)\n----------------------\n"
				     "size       messages        bytes\n"
				     "0-1K              1          500\n"
				     "1K-4K             2         4000\n"
				     "4K-16K            1         5000\n"
				     "64K-256K          1        70000\n"
				     "largest                    70000\n"
				     "average                    15900\n"));
	free(t);
	/* no journal: no milter section */
	r.have_milter = 0;
	t = to_text(text_fn, &r, NULL);
	ck_assert_ptr_null(strstr(t, "Milter"));
	free(t);
	report_free(&r);
}
END_TEST

static const struct {
	const char *table, *csv;
} extra_csv[] = {
	{"senders", "sender,messages,recipients,bytes,error\r\n"
		"a@x.example,3,3,4500,0\r\n<>,1,1,70000,0\r\nB@y.example,1,1,5000,0\r\n"},
	{"sizes", "size,max_octets,messages,bytes\r\n0-1K,1024,1,500\r\n1K-4K,4096,2,4000\r\n"
		"4K-16K,16384,1,5000\r\n16K-64K,65536,0,0\r\n64K-256K,262144,1,70000\r\n"
		"256K-1M,1048576,0,0\r\n1M-4M,4194304,0,0\r\n4M-10M,10485760,0,0\r\n"
		"10M-25M,26214400,0,0\r\n25M-64M,67108864,0,0\r\n64M+,,0,0\r\n"},
	{"milter", "verdict,check,messages\r\naccept,,2\r\ntag,,1\r\nreject,,2\r\ntempfail,,1\r\n"
		"other,,1\r\nreject,loop,1\r\nreject,unknown,1\r\ntag,date,1\r\ntag,from,1\r\n"
		"tempfail,header_limits,1\r\n"},
};

START_TEST(test_extra_csv)
{
	struct report r;
	char *t;

	extra_report(&r);
	t = to_text(report_csv, &r, extra_csv[_i].table);
	ck_assert_str_eq(t, extra_csv[_i].csv);
	free(t);
	report_free(&r);
}
END_TEST

START_TEST(test_extra_merge)
{
	struct report r, m;
	char why[256], *json;
	size_t len;

	extra_report(&r);
	json = to_json(&r, &len);
	ck_assert_ptr_nonnull(strstr(json, "\"milter\": {"));
	ck_assert_ptr_nonnull(strstr(json, "\"hosts\": [\n  \"mx1.example\"\n ]"));
	new_report(&m);
	m.nodes = 0;
	ck_assert_int_eq(report_merge_json(&m, json, len, why, sizeof(why)), 0);
	ck_assert_int_eq(report_merge_json(&m, json, len, why, sizeof(why)), 0);
	report_finish(&m);
	ck_assert_uint_eq(m.nhosts, 1);
	ck_assert_str_eq(m.hosts[0], "mx1.example");
	ck_assert_uint_eq(m.hosts_more, 0);
	ck_assert(m.have_milter);
	ck_assert_uint_eq(m.milter.messages, 14);
	ck_assert_uint_eq(m.milter.rejected, 4);
	ck_assert_uint_eq(m.nchecks, 5);
	ck_assert_uint_eq(m.checks[0].count, 2);
	ck_assert_uint_eq(m.nsenders, 3);
	ck_assert_uint_eq(m.senders[0].total, 6);
	ck_assert_uint_eq(m.senders[0].bytes, 9000);
	ck_assert_uint_eq(m.sizes.count[1], 4);
	ck_assert_uint_eq(m.sizes.max, 70000);
	/* the series: five acceptances in the first 15-minute slot of the day */
	ck_assert_uint_eq(m.slot_step, 900);
	ck_assert_uint_eq(m.slots[0].c.received, 10);
	report_free(&m);
	/* a report without a milter journal merges without the section */
	r.have_milter = 0;
	free(json);
	json = to_json(&r, &len);
	ck_assert_ptr_null(strstr(json, "\"milter\""));
	new_report(&m);
	ck_assert_int_eq(report_merge_json(&m, json, len, why, sizeof(why)), 0);
	ck_assert(!m.have_milter);
	report_free(&m);
	report_free(&r);
	free(json);
}
END_TEST

static const char *const bad_extra[] = {
	"\"sizes\": {\"bounds_bytes\": [1,2,3,4,5,6,7,8,9,10], \"messages\": [0,0,0,0,0,0,0,0,0,0,0], "
		"\"bytes\": [0,0,0,0,0,0,0,0,0,0,0]}",		/* not our size buckets */
	"\"hosts\": [\"mx1 <b>\"]",				/* not a host name */
	"\"hosts\": [5]",
	"\"series\": {\"step\": 7, \"points\": []}",	/* not one of our steps */
	"\"milter\": {\"messages\": -1}",
	"\"milter\": {\"checks\": [{\"verdict\": \"reject\"}]}",
	"\"senders\": [{\"sender\": \"a@x\", \"messages\": \"1\"}]",
};

START_TEST(test_extra_merge_refuses)
{
	struct report r;
	char bounds[512], json[2048], why[256];

	bounds_json(bounds, sizeof(bounds));
	snprintf(json, sizeof(json), "{\"version\": 1, %s, \"from\": %llu, \"to\": %llu, "
		 "\"totals\": {\"sent\": 5}, %s}", bounds, DAY0, DAY0 + 86400, bad_extra[_i]);
	new_report(&r);
	ck_assert_int_eq(report_merge_json(&r, json, strlen(json), why, sizeof(why)), -1);
	ck_assert_uint_eq(r.total.sent, 0);
	ck_assert_uint_eq(r.nhosts, 0);
	report_free(&r);
}
END_TEST

static const struct {
	uint64_t seconds, step;
} steps[] = {
	{3600, 60}, {2 * 3600, 60}, {6 * 3600, 300}, {86400, 900}, {2 * 86400, 900},
	{7 * 86400, 3600}, {30 * 86400, 86400}, {365 * 86400, 86400},
};

START_TEST(test_slot_step)
{
	struct report r;
	const char *why;

	ck_assert_uint_eq(rpt_slot_step(DAY0, DAY0 + steps[_i].seconds), steps[_i].step);
	ck_assert_int_eq(report_init(&r, US(DAY0 + 30), US(DAY0 + 30 + steps[_i].seconds), &why), 0);
	ck_assert_uint_le(r.nslots, RPT_SLOTS_MAX);
	ck_assert_ptr_nonnull(rpt_slot(&r, DAY0 + 30));
	ck_assert_ptr_nonnull(rpt_slot(&r, DAY0 + 30 + steps[_i].seconds - 1));
	report_free(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("report");
	TCase *tc = tcase_create("report");

	tcase_add_loop_test(tc, test_bucket, 0, N_ELEMENTS(buckets));
	tcase_add_test(tc, test_percentile);
	tcase_add_test(tc, test_aggregate);
	tcase_add_test(tc, test_json_numbers);
	tcase_add_test(tc, test_json_shortest);
	tcase_add_test(tc, test_window);
	tcase_add_test(tc, test_caps);
	tcase_add_test(tc, test_space_saving);
	tcase_add_loop_test(tc, test_escape, 0, N_ELEMENTS(escapes));
	tcase_add_loop_test(tc, test_time, 0, N_ELEMENTS(times));
	tcase_add_test(tc, test_time_local);
	tcase_add_loop_test(tc, test_since, 0, N_ELEMENTS(windows));
	tcase_add_test(tc, test_zone_hours);
	tcase_add_test(tc, test_merge);
	tcase_add_loop_test(tc, test_merge_refuses, 0, N_ELEMENTS(bad_json));
	tcase_add_test(tc, test_merge_all_or_nothing);
	tcase_add_test(tc, test_history_range);
	tcase_add_test(tc, test_extra_aggregate);
	tcase_add_test(tc, test_extra_text);
	tcase_add_loop_test(tc, test_extra_csv, 0, N_ELEMENTS(extra_csv));
	tcase_add_test(tc, test_extra_merge);
	tcase_add_loop_test(tc, test_extra_merge_refuses, 0, N_ELEMENTS(bad_extra));
	tcase_add_loop_test(tc, test_slot_step, 0, N_ELEMENTS(steps));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
