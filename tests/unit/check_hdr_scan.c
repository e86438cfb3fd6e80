/*
 * check_hdr_scan - finding one header field in canonical message bytes:
 * the first field wins, names match without case, values are trimmed,
 * the header ends at the empty line, folded values are not returned;
 * and every field in order, folded ones whole (hdr_scan_each).
 * Every case is also run from a copy of exactly its length, so a read
 * past the end shows under ASan.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hdr_scan.h"
#include "unit.h"

/* A byte string with its length, so that it may hold NUL or lack a newline. */
#define B(s) s, sizeof(s) - 1

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static const struct {
	const char *buf;
	size_t len;
	const char *name;
	int found;
	const char *value;		/* when found */
} cases[] = {
	{B("Traceparent: " TP "\r\n\r\nbody\r\n"), "Traceparent", 1, TP},
	{B("From: a@example.org\r\nTraceparent: " TP "\r\nSubject: x\r\n\r\n"), "Traceparent", 1, TP},
	/* the first of two */
	{B("Traceparent: first\r\nTraceparent: second\r\n\r\n"), "Traceparent", 1, "first"},
	/* case-insensitive name */
	{B("TRACEPARENT: upper\r\n\r\n"), "Traceparent", 1, "upper"},
	{B("traceparent: lower\r\n\r\n"), "TraceParent", 1, "lower"},
	/* value trimmed of SP and HT on both sides, inner space kept */
	{B("Subject: \t  two  words \t\r\n\r\n"), "Subject", 1, "two  words"},
	{B("Subject:x\r\n\r\n"), "Subject", 1, "x"},
	{B("Subject:\r\n\r\n"), "Subject", 1, ""},
	{B("Subject:   \r\n\r\n"), "Subject", 1, ""},
	/* the empty line ends the header: a field in the body is not found */
	{B("From: a\r\n\r\nTraceparent: " TP "\r\n"), "Traceparent", 0, NULL},
	{B("\r\nTraceparent: x\r\n"), "Traceparent", 0, NULL},
	{B("From: a\n\nTraceparent: x\n"), "Traceparent", 0, NULL},
	/* folded values are not returned */
	{B("Traceparent: 00-abc\r\n -def\r\n\r\n"), "Traceparent", 0, NULL},
	{B("Traceparent: 00-abc\r\n\t-def\r\n\r\n"), "Traceparent", 0, NULL},
	{B("Traceparent: 00-abc\n -def\n\n"), "Traceparent", 0, NULL},
	/* a folded other field does not hide the one we want */
	{B("Subject: a\r\n b\r\nTraceparent: x\r\n\r\n"), "Traceparent", 1, "x"},
	/* a continuation line that looks like the field is not the field */
	{B("Subject: a\r\n Traceparent: x\r\n\r\n"), "Traceparent", 0, NULL},
	/* at the end of the buffer, with or without CRLF */
	{B("From: a\r\nTraceparent: last"), "Traceparent", 1, "last"},
	{B("From: a\r\nTraceparent: last\r"), "Traceparent", 1, "last"},
	{B("From: a\r\nTraceparent: last\r\n"), "Traceparent", 1, "last"},
	{B("Traceparent: last  "), "Traceparent", 1, "last"},
	{B("Traceparent:"), "Traceparent", 1, ""},
	/* LF-only lines */
	{B("From: a\nTraceparent: lf\nSubject: s\n\nbody\n"), "Traceparent", 1, "lf"},
	{B("From: a\nTraceparent: lf"), "Traceparent", 1, "lf"},
	/* a name that only starts like the field */
	{B("Traceparentx: no\r\n\r\n"), "Traceparent", 0, NULL},
	{B("Traceparentx: no\r\nTraceparent: yes\r\n\r\n"), "Traceparent", 1, "yes"},
	{B("Traceparent : no\r\n\r\n"), "Traceparent", 0, NULL},
	{B("X-Traceparent: no\r\n\r\n"), "Traceparent", 0, NULL},
	{B("Tracepar: no\r\n\r\n"), "Traceparent", 0, NULL},
	{B("Traceparent\r\n\r\n"), "Traceparent", 0, NULL},
	{B("Traceparent"), "Traceparent", 0, NULL},
	/* nothing at all */
	{B(""), "Traceparent", 0, NULL},
	{B("\r\n"), "Traceparent", 0, NULL},
	/* a CR inside a value is part of it */
	{B("Subject: a\rb\r\n\r\n"), "Subject", 1, "a\rb"},
	/* NUL is just another octet */
	{B("X: \0\r\nSubject: after nul\r\n\r\n"), "Subject", 1, "after nul"},
};

START_TEST(test_scan)
{
	/* an exact-size copy: ASan sees any read past len */
	char *buf = malloc(cases[_i].len ? cases[_i].len : 1);
	const char *value = (const char *)1;
	size_t vlen = 999;
	int found;

	ck_assert_ptr_nonnull(buf);
	memcpy(buf, cases[_i].buf, cases[_i].len);
	found = hdr_scan_field(buf, cases[_i].len, cases[_i].name, &value, &vlen);
	ck_assert_int_eq(found, cases[_i].found);
	if (found) {
		ck_assert_ptr_nonnull(value);
		ck_assert(value >= buf && value + vlen <= buf + cases[_i].len);
		ck_assert_uint_eq(vlen, strlen(cases[_i].value));
		ck_assert_int_eq(memcmp(value, cases[_i].value, vlen), 0);
	} else {
		/* nothing written when not found */
		ck_assert_ptr_eq(value, (const char *)1);
		ck_assert_uint_eq(vlen, 999);
	}
	free(buf);
}
END_TEST

/* test_prefixes - every prefix of a header: never a read past the end */
START_TEST(test_prefixes)
{
	static const char hdr[] = "From: a\r\nTraceparent:  v \r\n\r\nTraceparent: body\r\n";
	const char *value;
	size_t vlen;

	for (size_t len = 0; len <= sizeof(hdr) - 1; len++) {
		char *buf = malloc(len ? len : 1);
		int found;

		ck_assert_ptr_nonnull(buf);
		memcpy(buf, hdr, len);
		found = hdr_scan_field(buf, len, "traceparent", &value, &vlen);
		/* "Traceparent:" is complete from 21 octets on */
		ck_assert_int_eq(found, len >= 21);
		if (found) {
			ck_assert_uint_eq(vlen, len >= 24 ? 1 : 0);	/* "...:  v" */
			if (vlen)
				ck_assert_int_eq(value[0], 'v');
		}
		free(buf);
	}
}
END_TEST

/* collect - hdr_scan_each's callback: "name=value;" per field */
static void collect(void *arg, const char *name, size_t nlen, const char *value, size_t vlen)
{
	char *out = arg;
	size_t n = strlen(out);

	snprintf(out + n, 512 - n, "%.*s=%.*s;", (int)nlen, name, (int)vlen, value);
}

/* every field in order, folded values whole, and whether the header ended */
static const struct {
	const char *buf, *fields;
	int whole;
} each_cases[] = {
	{"A: 1\r\nB:\r\n x\r\n\ty\r\nC: z\r\n\r\nD: body\r\n", "A= 1;B=\r\n x\r\n\ty;C= z;", 1},
	{"A: 1\r\nnot a field\r\nB: 2\r\n\r\n", "A= 1;", 1},
	{"A: 1\r\n: no name\r\n", "A= 1;", 1},
	{"A: 1\r\nB: 2", "A= 1;B= 2;", 0},
	{"A: 1\r\nB: 2\r\n", "A= 1;B= 2;", 0},
	{"A: 1\r\nBB", "A= 1;", 0},
	{"", "", 0},
	{"\r\n", "", 1},
};

START_TEST(test_each)
{
	char out[512] = "";
	size_t len = strlen(each_cases[_i].buf);
	char *buf = malloc(len ? len : 1);

	ck_assert_ptr_nonnull(buf);
	memcpy(buf, each_cases[_i].buf, len);
	ck_assert_int_eq(hdr_scan_each(buf, len, collect, out), each_cases[_i].whole);
	ck_assert_str_eq(out, each_cases[_i].fields);
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hdr_scan");
	TCase *tc = tcase_create("hdr_scan");

	tcase_add_loop_test(tc, test_scan, 0, N_ELEMENTS(cases));
	tcase_add_test(tc, test_prefixes);
	tcase_add_loop_test(tc, test_each, 0, N_ELEMENTS(each_cases));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
