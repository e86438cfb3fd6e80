/* check_hdr_check - each header check, its threshold and its reason text */
#include "config.h"

#include <string.h>

#include "hdr_check.h"
#include "unit.h"

static const struct hdr_limits limits = {.max_header_size = 200, .max_headers = 6, .max_received = 2};

/* push - add "Name: value" fields from a NULL-terminated list of pairs */
static struct hdr_check *build(const char *const *fields)
{
	struct hdr_check *hc = hdr_check_new(&limits);

	for (; fields[0]; fields += 2)
		hdr_check_push(hc, fields[0], strlen(fields[0]), fields[1], strlen(fields[1]));
	return hc;
}

#define BASE "From", "a@example.org", "Date", "Mon, 1 Jan 2024 00:00:00 +0000"

static const struct {
	const char *fields[16];
	enum check_id check;
	const char *why;	/* NULL: the check passes */
} cases[] = {
	{{BASE, NULL}, CHECK_FROM, NULL},
	{{BASE, NULL}, CHECK_DATE, NULL},
	{{BASE, NULL}, CHECK_LOOP, NULL},
	{{BASE, NULL}, CHECK_HEADER_LIMITS, NULL},
	{{BASE, NULL}, CHECK_HEADER_BYTES, NULL},
	{{"Date", "x", NULL}, CHECK_FROM, "message has no From: header"},
	{{BASE, "FROM", "b@example.org", NULL}, CHECK_FROM,
	 "message has 2 From: headers, only one is allowed"},
	{{"From", "a@example.org", NULL}, CHECK_DATE, "message has no Date: header"},
	{{BASE, "Received", "1", "received", "2", NULL}, CHECK_LOOP, NULL},
	{{BASE, "Received", "1", "received", "2", "RECEIVED", "3", NULL}, CHECK_LOOP,
	 "message has 3 Received: headers, limit 2 (mail loop?)"},
	{{BASE, "A", "1", "B", "2", "C", "3", "D", "4", NULL}, CHECK_HEADER_LIMITS, NULL},
	{{BASE, "A", "1", "B", "2", "C", "3", "D", "4", "E", "5", NULL}, CHECK_HEADER_LIMITS,
	 "message has 7 header fields, limit 6"},
	{{BASE, "Subject", "0123456789012345678901234567890123456789012345678901234567890123456789"
	  "0123456789012345678901234567890123456789012345678901234567890123456789", NULL},
	 CHECK_HEADER_LIMITS, "message header is 210 bytes, limit 200"},
	{{BASE, "Subject", "bad\rcr", NULL}, CHECK_HEADER_BYTES,
	 "header field Subject: contains a bare CR"},
	{{BASE, "Subject", "trailing cr\r", NULL}, CHECK_HEADER_BYTES,
	 "header field Subject: contains a bare CR"},
	{{BASE, "Subject", "folded\r\n line", NULL}, CHECK_HEADER_BYTES, NULL},
	{{BASE, "X-%s\r", "v", NULL}, CHECK_HEADER_BYTES, "header field X-?s?: contains a bare CR"},
};

START_TEST(test_checks)
{
	struct hdr_check *hc = build(cases[_i].fields);
	char why[256] = "";
	int failed = hdr_check_failed(hc, cases[_i].check, why, sizeof(why));

	if (cases[_i].why == NULL) {
		ck_assert_msg(!failed, "case %d: %s fails: %s", _i, check_name(cases[_i].check), why);
	} else {
		ck_assert_msg(failed, "case %d: %s passes", _i, check_name(cases[_i].check));
		ck_assert_str_eq(why, cases[_i].why);
	}
	hdr_check_free(&hc);
	ck_assert_ptr_null(hc);
}
END_TEST

START_TEST(test_nul)
{
	struct hdr_check *hc = hdr_check_new(&limits);
	char why[256];

	hdr_check_push(hc, "Subject", 7, "a\0b", 3);
	ck_assert_int_eq(hdr_check_failed(hc, CHECK_HEADER_BYTES, why, sizeof(why)), 1);
	ck_assert_str_eq(why, "header field Subject: contains a NUL byte");
	hdr_check_free(&hc);
}
END_TEST

START_TEST(test_trace_fields)
{
	static const char *const fields[] = {
		"Traceparent", " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
		"Tracestate", "a=1", "traceparent", "second", "TRACESTATE", "tern=x", NULL,
	};
	struct hdr_check *hc = build(fields);
	struct hdr_trace_fields t;

	hdr_check_trace(hc, &t);
	ck_assert_int_eq(t.ntraceparent, 2);
	ck_assert_int_eq(t.ntracestate, 2);
	ck_assert_uint_eq(t.traceparent_len, 55);
	ck_assert_int_eq(strncmp(t.traceparent, "00-4bf92f", 9), 0);
	ck_assert_uint_eq(t.tracestate_len, 10);
	ck_assert_int_eq(strncmp(t.tracestate, "a=1,tern=x", 10), 0);
	ck_assert_int_eq(t.overflow, 0);
	hdr_check_free(&hc);
}
END_TEST

START_TEST(test_trace_overflow)
{
	char big[HDR_TRACESTATE_MAX + 10];
	struct hdr_check *hc = hdr_check_new(&limits);
	struct hdr_trace_fields t;

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	hdr_check_push(hc, "Tracestate", 10, big, strlen(big));
	hdr_check_trace(hc, &t);
	ck_assert_int_eq(t.overflow, 1);
	ck_assert_ptr_null(t.tracestate);
	ck_assert_int_eq(t.ntracestate, 1);
	hdr_check_free(&hc);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hdr_check");
	TCase *tc = tcase_create("hdr_check");

	tcase_add_loop_test(tc, test_checks, 0, N_ELEMENTS(cases));
	tcase_add_test(tc, test_nul);
	tcase_add_test(tc, test_trace_fields);
	tcase_add_test(tc, test_trace_overflow);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
