/*
 * check_trace_header - the one rule by which tern-milter continues a
 * trace and ternd trusts one, table-driven: each case is a header in
 * canonical bytes, fed field by field (hdr_scan_each) to hdr_check as
 * ternd feeds it, and the verdict of trace_header_verify. "@S@" in a
 * case stands for "tern=2." and the signature of TP for the case's
 * signed_for Message-ID under the test key.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "hdr_check.h"
#include "hdr_scan.h"
#include "trace_header.h"
#include "unit.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TP2 "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01"

static const struct {
	const char *name;
	const char *hdr;
	const char *signed_for;		/* the Message-ID the signature covers */
	enum trace_origin want;
	int whole;			/* hdr_scan_each: the header ended */
} cases[] = {
	{"signed for its Message-ID",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\n\r\nbody\r\n",
	 "<m@x>", TRACE_OURS, 1},
	{"no Message-ID, signed for none",
	 "Traceparent: " TP "\r\nTracestate: @S@\r\n\r\n", "", TRACE_OURS, 1},
	{"two Message-IDs, the signed one first",
	 "Message-ID: <m@x>\r\nMessage-ID: <n@y>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\n\r\n",
	 "<m@x>", TRACE_FOREIGN, 1},
	{"two Message-IDs, the signed one second",
	 "Message-ID: <n@y>\r\nMessage-ID: <m@x>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\n\r\n",
	 "<m@x>", TRACE_FOREIGN, 1},
	{"two Message-IDs, far apart",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\nSubject: s\r\n"
	 "message-id: <n@y>\r\n\r\n", "<m@x>", TRACE_FOREIGN, 1},
	{"signed for another Message-ID",
	 "Message-ID: <n@y>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\n\r\n",
	 "<m@x>", TRACE_FOREIGN, 1},
	{"signed for one, sent with none",
	 "Traceparent: " TP "\r\nTracestate: @S@\r\n\r\n", "<m@x>", TRACE_FOREIGN, 1},
	{"two Traceparent fields, the signed one first",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\nTraceparent: " TP2 "\r\nTracestate: @S@\r\n\r\n",
	 "<m@x>", TRACE_FOREIGN, 1},
	{"no Tracestate",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\n\r\n", "<m@x>", TRACE_FOREIGN, 1},
	{"Tracestate naming tern twice",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\nTracestate: @S@,tern=2.x\r\n\r\n",
	 "<m@x>", TRACE_FOREIGN, 1},
	{"the signature in a second Tracestate field (joined)",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\nTracestate: other=1\r\nTracestate: @S@\r\n\r\n",
	 "<m@x>", TRACE_OURS, 1},
	{"a folded Message-ID (white space is not signed)",
	 "Message-ID:\r\n <m@x>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\n\r\n",
	 "<m@x>", TRACE_OURS, 1},
	{"a Message-ID in the body does not count",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\n\r\nMessage-ID: <n@y>\r\n",
	 "<m@x>", TRACE_OURS, 1},
	{"a line that is not a field ends the header",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\nnot a field\r\n"
	 "Message-ID: <n@y>\r\n", "<m@x>", TRACE_OURS, 1},
	{"a header cut before its end",
	 "Message-ID: <m@x>\r\nTraceparent: " TP "\r\nTracestate: @S@\r\nSubject: s", "<m@x>",
	 TRACE_OURS, 0},
	{"a Traceparent that does not parse",
	 "Message-ID: <m@x>\r\nTraceparent: 00-xyz\r\nTracestate: @S@\r\n\r\n", "<m@x>",
	 TRACE_NONE, 1},
	{"no Traceparent", "Message-ID: <m@x>\r\nTracestate: @S@\r\n\r\n", "<m@x>", TRACE_NONE, 1},
	{"nothing", "", "", TRACE_NONE, 0},
};

static struct trace_key key = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};

/* push_field - hdr_scan_each's callback */
static void push_field(void *hc, const char *name, size_t nlen, const char *value, size_t vlen)
{
	hdr_check_push(hc, name, nlen, value, vlen);
}

/* verdict - scan hdr (with @S@ replaced) and judge it under keys */
static enum trace_origin verdict(const struct trace_keys *keys, const char *hdr,
				 const char *signed_for, int *whole, struct traceparent *tp)
{
	static const struct hdr_limits limits = {1 << 20, 1000, 100};
	char buf[4096], sig[TRACE_SIG_LEN + 1], state[TRACESTATE_TERN_LEN + 1];
	const char *at = strstr(hdr, "@S@");
	struct hdr_check *hc = hdr_check_new(&limits);
	struct hdr_trace_fields in;
	enum trace_origin origin;
	int n;

	trace_sign(&key, TP, signed_for, strlen(signed_for), sig);
	tracestate_format(sig, state);
	if (at)
		n = snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - hdr), hdr, state, at + 3);
	else
		n = snprintf(buf, sizeof(buf), "%s", hdr);
	ck_assert(n >= 0 && (size_t)n < sizeof(buf));
	*whole = hdr_scan_each(buf, (size_t)n, push_field, hc);
	hdr_check_trace(hc, &in);
	origin = trace_header_verify(keys, &in, tp);
	hdr_check_free(&hc);
	return origin;
}

START_TEST(test_verdict)
{
	const struct trace_keys keys = {&key, NULL}, none = {NULL, NULL};
	struct traceparent tp, want;
	int whole;

	ck_assert_int_eq(traceparent_parse(TP, strlen(TP), &want), 0);
	ck_assert_msg(verdict(&keys, cases[_i].hdr, cases[_i].signed_for, &whole, &tp) == cases[_i].want,
		      "%s", cases[_i].name);
	ck_assert_msg(whole == cases[_i].whole, "%s: whole %d", cases[_i].name, whole);
	if (cases[_i].want != TRACE_NONE)
		ck_assert_int_eq(memcmp(tp.trace_id, want.trace_id, sizeof(want.trace_id)), 0);
	/* without a key nothing is ours */
	ck_assert_msg(verdict(&none, cases[_i].hdr, cases[_i].signed_for, &whole, &tp)
		      == (cases[_i].want == TRACE_OURS ? TRACE_FOREIGN : cases[_i].want),
		      "%s, no key", cases[_i].name);
}
END_TEST

/* test_long_msgid - a Message-ID too long to keep verifies as nothing */
START_TEST(test_long_msgid)
{
	const struct trace_keys keys = {&key, NULL};
	char mid[HDR_MSGID_MAX + 8], hdr[2048];
	struct traceparent tp;
	int whole;

	memset(mid, 'a', sizeof(mid) - 1);
	mid[sizeof(mid) - 1] = '\0';
	snprintf(hdr, sizeof(hdr), "Message-ID: %s\r\nTraceparent: " TP "\r\nTracestate: @S@\r\n\r\n",
		 mid);
	ck_assert_int_eq(verdict(&keys, hdr, mid, &whole, &tp), TRACE_FOREIGN);
	ck_assert_int_eq(verdict(&keys, hdr, "", &whole, &tp), TRACE_FOREIGN);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("trace_header");
	TCase *tc = tcase_create("trace_header");

	tcase_add_loop_test(tc, test_verdict, 0, N_ELEMENTS(cases));
	tcase_add_test(tc, test_long_msgid);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
