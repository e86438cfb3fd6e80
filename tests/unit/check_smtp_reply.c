/* check_smtp_reply - server replies: lines, codes, limits, splitting, EHLO, queue ids; status code labels */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smtp_reply.h"
#include "unit.h"

/* A string with its length, so that it may hold NUL. */
#define L(s) s, sizeof(s) - 1

#define MAX_REPLIES 8
#define BUFFERED_MAX (SMTP_REPLY_LINE_MAX + 1 + SMTP_REPLY_TEXT_MAX)

/* What feeding some input produced. */
struct result {
	size_t n;			/* complete replies */
	struct smtp_reply r[MAX_REPLIES];
	int error;			/* smtp_reply_next failed */
	const char *why;
	size_t buffered;		/* at the end */
};

/* drain - take every complete reply */
static void drain(struct smtp_reply_parser *p, struct result *res)
{
	struct smtp_reply tmp;
	int rc;

	while ((rc = smtp_reply_next(p, &tmp)) == 1) {
		if (res->n < MAX_REPLIES)
			res->r[res->n] = tmp;
		res->n++;
	}
	if (rc < 0) {
		ck_assert_int_eq(errno, EPROTO);
		ck_assert_ptr_nonnull(smtp_reply_error(p));
		res->error = 1;
		res->why = smtp_reply_error(p);
	} else {
		ck_assert_int_eq(rc, 0);
		ck_assert_ptr_null(smtp_reply_error(p));
	}
}

/* feed - push in, all of it, then take what is complete */
static void feed(struct smtp_reply_parser *p, const char *in, size_t len, struct result *res)
{
	while (len > 0) {
		ssize_t n = smtp_reply_push(p, in, len);

		ck_assert_int_gt(n, 0);
		ck_assert_uint_le((size_t)n, len);
		ck_assert_uint_le(smtp_reply_buffered(p), BUFFERED_MAX);
		in += n;
		len -= (size_t)n;
		drain(p, res);
	}
}

/* run - feed input in pieces of at most step octets (0: at once) from offset cut */
static void run(struct result *res, const char *in, size_t len, size_t cut, size_t step)
{
	struct smtp_reply_parser *p = smtp_reply_new();

	memset(res, 0, sizeof(*res));
	if (cut > 0)
		feed(p, in, cut, res);
	for (size_t pos = cut; pos < len;) {
		size_t n = step == 0 || step > len - pos ? len - pos : step;

		feed(p, in + pos, n, res);
		pos += n;
	}
	res->buffered = smtp_reply_buffered(p);
	smtp_reply_free(&p);
	ck_assert_ptr_null(p);
}

/* same_reply - two replies agree on everything */
static void same_reply(const struct smtp_reply *a, const struct smtp_reply *b)
{
	ck_assert_int_eq(a->code, b->code);
	ck_assert_str_eq(a->esc, b->esc);
	ck_assert_uint_eq(a->nlines, b->nlines);
	ck_assert_uint_eq(a->textlen, b->textlen);
	for (size_t i = 0; i < a->nlines; i++) {
		ck_assert_uint_eq(a->len[i], b->len[i]);
		ck_assert(memcmp(smtp_reply_line(a, i), smtp_reply_line(b, i), a->len[i] + 1) == 0);
	}
}

/* same - two runs agree */
static void same(const struct result *a, const struct result *b)
{
	ck_assert_uint_eq(a->n, b->n);
	ck_assert_int_eq(a->error, b->error);
	ck_assert_uint_eq(a->buffered, b->buffered);
	if (a->error)
		ck_assert_str_eq(a->why, b->why);
	for (size_t i = 0; i < a->n && i < MAX_REPLIES; i++)
		same_reply(&a->r[i], &b->r[i]);
}

/* fmt - smtp_reply_format into a static buffer */
static const char *fmt(const struct smtp_reply *r)
{
	static char buf[SMTP_REPLY_FORMAT_MAX];

	smtp_reply_format(r, buf, sizeof(buf));
	return buf;
}

#define E_RANGE "reply code out of range"
#define E_CODE "malformed reply code"
#define E_LINE "malformed reply line"
#define E_MIXED "inconsistent codes in multi-line reply"
#define BAD(in, why) {L(in), 0, why, 0, NULL, 0, NULL, NULL}

/*
 * Table: input, complete replies, the error after them (NULL: none), and
 * for the first reply its code, enhanced code, lines, first text, format.
 */
static const struct {
	const char *in;
	size_t len;
	size_t n;
	const char *why;
	int code;
	const char *esc;
	size_t nlines;
	const char *line0;
	const char *fmt;
} cases[] = {
	/* single lines */
	{L("220 mx.example.org ESMTP Postfix\r\n"), 1, NULL, 220, "", 1, "mx.example.org ESMTP Postfix",
	 "220 mx.example.org ESMTP Postfix"},
	{L("250 2.1.0 Ok\r\n"), 1, NULL, 250, "2.1.0", 1, "Ok", "250 2.1.0 Ok"},
	{L("250 2.1.0 Ok\n"), 1, NULL, 250, "2.1.0", 1, "Ok", "250 2.1.0 Ok"},
	{L("250\r\n"), 1, NULL, 250, "", 1, "", "250"},
	{L("250 \r\n"), 1, NULL, 250, "", 1, "", "250"},
	{L("354 End data with <CR><LF>.<CR><LF>\r\n"), 1, NULL, 354, "", 1,
	 "End data with <CR><LF>.<CR><LF>", "354 End data with <CR><LF>.<CR><LF>"},
	{L("599 x\r\n"), 1, NULL, 599, "", 1, "x", "599 x"},
	{L("200 x\r\n"), 1, NULL, 200, "", 1, "x", "200 x"},
	/* multi-line */
	{L("250-mx.example.org\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250 8BITMIME\r\n"), 1, NULL,
	 250, "", 4, "mx.example.org", "250 mx.example.org PIPELINING SIZE 10240000 8BITMIME"},
	{L("250-a\r\n250\r\n"), 1, NULL, 250, "", 2, "a", "250 a"},
	{L("250-\r\n250-\r\n250 \r\n"), 1, NULL, 250, "", 3, "", "250"},
	{L("550-5.7.1 first\r\n550 5.7.1 second\r\n"), 1, NULL, 550, "5.7.1", 2, "first",
	 "550 5.7.1 first second"},
	{L("421-4.7.0 one\n421-two\r\n421 4.7.0 three\n"), 1, NULL, 421, "4.7.0", 3, "one",
	 "421 4.7.0 one two three"},
	/* enhanced status codes: good, mismatched, absent, malformed */
	{L("451 4.3.0 Try again later\r\n"), 1, NULL, 451, "4.3.0", 1, "Try again later",
	 "451 4.3.0 Try again later"},
	{L("550 5.1.10 Null MX\r\n"), 1, NULL, 550, "5.1.10", 1, "Null MX", "550 5.1.10 Null MX"},
	{L("550 5.100.100 x\r\n"), 1, NULL, 550, "5.100.100", 1, "x", "550 5.100.100 x"},
	{L("250 2.0.0\r\n"), 1, NULL, 250, "2.0.0", 1, "", "250 2.0.0"},
	{L("250 2.0.0   spaced\r\n"), 1, NULL, 250, "2.0.0", 1, "spaced", "250 2.0.0 spaced"},
	{L("250 5.0.0 odd\r\n"), 1, NULL, 250, "", 1, "5.0.0 odd", "250 5.0.0 odd"},
	{L("550 4.1.1 mismatch\r\n"), 1, NULL, 550, "", 1, "4.1.1 mismatch", "550 4.1.1 mismatch"},
	{L("550 User unknown\r\n"), 1, NULL, 550, "", 1, "User unknown", "550 User unknown"},
	{L("250 2.0.0Ok\r\n"), 1, NULL, 250, "", 1, "2.0.0Ok", "250 2.0.0Ok"},
	{L("550 5.1234.1 x\r\n"), 1, NULL, 550, "", 1, "5.1234.1 x", "550 5.1234.1 x"},
	{L("550 5.1.1234 x\r\n"), 1, NULL, 550, "", 1, "5.1.1234 x", "550 5.1.1234 x"},
	{L("550 5..1 x\r\n"), 1, NULL, 550, "", 1, "5..1 x", "550 5..1 x"},
	{L("550 5.1. x\r\n"), 1, NULL, 550, "", 1, "5.1. x", "550 5.1. x"},
	{L("550 3.1.1 x\r\n"), 1, NULL, 550, "", 1, "3.1.1 x", "550 3.1.1 x"},
	{L("550-first\r\n550 5.1.1 second\r\n"), 1, NULL, 550, "", 2, "first", "550 first second"},
	/* text that is not log-safe */
	{L("250 a\rb\r\n"), 1, NULL, 250, "", 1, "a\rb", "250 a?b"},
	{L("550 5.7.1 \x1b[31mred\xff\r\n"), 1, NULL, 550, "5.7.1", 1, "\x1b[31mred\xff",
	 "550 5.7.1 ?[31mred?"},
	{L("250 a \t  b  \r\n"), 1, NULL, 250, "", 1, "a \t  b  ", "250 a b"},
	{L("250 a\r\r\n"), 1, NULL, 250, "", 1, "a\r", "250 a?"},
	/* bad codes and lines */
	BAD("199 x\r\n", E_RANGE),
	BAD("600 x\r\n", E_RANGE),
	BAD("000\r\n", E_RANGE),
	BAD("2a0 x\r\n", E_CODE),
	BAD("25\r\n", E_CODE),
	BAD(" 250 x\r\n", E_CODE),
	BAD("abc\r\n", E_CODE),
	BAD("\r\n", "empty reply line"),
	BAD("\n", "empty reply line"),
	BAD("250x\r\n", E_LINE),
	BAD("250\tx\r\n", E_LINE),
	BAD("250=x\r\n", E_LINE),
	BAD("250 a\0b\r\n", "NUL in reply"),
	/* inconsistent multi-line codes */
	BAD("250-a\r\n251 b\r\n", E_MIXED),
	BAD("250-a\r\n550 b\r\n", E_MIXED),
	BAD("250-a\r\n250-b\r\n251-c\r\n250 d\r\n", E_MIXED),
	/* incomplete: nothing yet, no error */
	BAD("250 ok", NULL),
	BAD("250-a\r\n", NULL),
	BAD("250-a\r\n250 b\r", NULL),
	/* a good reply, then a bad one: the good one is kept */
	{L("250 ok\r\n999 bad\r\n250 ok\r\n"), 1, E_RANGE, 250, "", 1, "ok", "250 ok"},
};

/* The table, fed at once, byte by byte and split at every boundary. */
START_TEST(test_cases)
{
	struct result whole, other;

	run(&whole, cases[_i].in, cases[_i].len, 0, 0);
	ck_assert_msg(whole.n == cases[_i].n, "case %d: %zu replies", _i, whole.n);
	ck_assert_msg(whole.error == (cases[_i].why != NULL), "case %d: error %s", _i,
		      whole.why ? whole.why : "(none)");
	if (cases[_i].why != NULL)
		ck_assert_str_eq(whole.why, cases[_i].why);
	if (cases[_i].n > 0) {
		const struct smtp_reply *r = &whole.r[0];

		ck_assert_int_eq(r->code, cases[_i].code);
		ck_assert_str_eq(r->esc, cases[_i].esc);
		ck_assert_uint_eq(r->nlines, cases[_i].nlines);
		ck_assert_str_eq(smtp_reply_line(r, 0), cases[_i].line0);
		ck_assert_str_eq(smtp_reply_line(r, r->nlines), "");
		ck_assert_str_eq(fmt(r), cases[_i].fmt);
	}
	run(&other, cases[_i].in, cases[_i].len, 0, 1);
	same(&whole, &other);
	for (size_t k = 1; k < cases[_i].len; k++) {
		run(&other, cases[_i].in, cases[_i].len, k, 0);
		same(&whole, &other);
	}
}
END_TEST

/* Pipelined replies in one buffer: push stops after each; order kept. */
START_TEST(test_pipelined)
{
	static const char in[] = "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n550 5.1.1 <b@example.org>: "
		"Recipient address rejected\r\n354 End data with <CR><LF>.<CR><LF>\r\n";
	static const int codes[] = {250, 250, 550, 354};
	struct smtp_reply_parser *p = smtp_reply_new();
	struct smtp_reply r;
	struct result whole, other;
	const char *at = in;
	size_t left = sizeof(in) - 1;
	ssize_t n;

	n = smtp_reply_push(p, at, left);
	ck_assert_int_eq(n, 14);		/* "250 2.1.0 Ok\r\n" */
	errno = 0;
	ck_assert_int_eq(smtp_reply_push(p, at + n, left - (size_t)n), -1);
	ck_assert_int_eq(errno, EALREADY);
	for (size_t i = 0; i < N_ELEMENTS(codes); i++) {
		if (i > 0)
			ck_assert_int_gt(n = smtp_reply_push(p, at, left), 0);
		at += n;
		left -= (size_t)n;
		ck_assert_int_eq(smtp_reply_next(p, &r), 1);
		ck_assert_int_eq(r.code, codes[i]);
		ck_assert_int_eq(smtp_reply_next(p, &r), 0);
	}
	ck_assert_uint_eq(left, 0);
	ck_assert_str_eq(r.esc, "");
	smtp_reply_free(&p);

	run(&whole, in, sizeof(in) - 1, 0, 0);
	ck_assert_uint_eq(whole.n, 4);
	ck_assert_str_eq(fmt(&whole.r[2]),
			 "550 5.1.1 <b@example.org>: Recipient address rejected");
	for (size_t k = 1; k < sizeof(in) - 1; k++) {
		run(&other, in, sizeof(in) - 1, k, 0);
		same(&whole, &other);
		run(&other, in, sizeof(in) - 1, 0, k);
		same(&whole, &other);
	}
}
END_TEST

/* An endless multi-line reply fails at line 65, long before its end. */
START_TEST(test_endless)
{
	static const char line[] = "250-x\r\n";
	struct smtp_reply_parser *p = smtp_reply_new();
	struct smtp_reply r;
	size_t fed = 0;
	int rc = 0;

	for (int i = 0; i < 100000 && rc == 0; i++) {
		ck_assert_int_eq(smtp_reply_push(p, line, sizeof(line) - 1), sizeof(line) - 1);
		fed += sizeof(line) - 1;
		ck_assert_uint_le(smtp_reply_buffered(p), BUFFERED_MAX);
		rc = smtp_reply_next(p, &r);
	}
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_uint_eq(fed, (SMTP_REPLY_LINES_MAX + 1) * (sizeof(line) - 1));
	ck_assert_str_eq(smtp_reply_error(p), "too many lines in reply");
	/* sticky: more input is swallowed, never a reply */
	ck_assert_int_eq(smtp_reply_push(p, L("250 ok\r\n")), 8);
	ck_assert_int_eq(smtp_reply_next(p, &r), -1);
	ck_assert_uint_eq(smtp_reply_buffered(p), 0);
	/* until reset */
	smtp_reply_reset(p);
	ck_assert_ptr_null(smtp_reply_error(p));
	ck_assert_int_eq(smtp_reply_push(p, L("250 ok\r\n")), 8);
	ck_assert_int_eq(smtp_reply_next(p, &r), 1);
	ck_assert_str_eq(fmt(&r), "250 ok");
	smtp_reply_free(&p);
}
END_TEST

/* A 10 MB line: refused as soon as it passes the limit, in any piece size. */
START_TEST(test_huge_line)
{
	static const size_t big = 10 * 1024 * 1024;
	static const size_t steps[] = {0, 65536, 4096, 1000, 7};
	char *in = malloc(big);
	struct smtp_reply r;

	ck_assert_ptr_nonnull(in);
	memcpy(in, "250 ", 4);
	memset(in + 4, 'a', big - 4);
	for (size_t s = 0; s < N_ELEMENTS(steps); s++) {
		struct smtp_reply_parser *p = smtp_reply_new();
		size_t step = steps[s] ? steps[s] : big, pos = 0, failed_at = 0;

		while (pos < big) {
			size_t n = step < big - pos ? step : big - pos;

			ck_assert_int_eq(smtp_reply_push(p, in + pos, n), (ssize_t)n);
			ck_assert_uint_le(smtp_reply_buffered(p), SMTP_REPLY_LINE_MAX + 1);
			pos += n;
			if (failed_at == 0 && smtp_reply_error(p) != NULL)
				failed_at = pos;
		}
		ck_assert_uint_gt(failed_at, 0);
		/* found within one piece of the limit */
		ck_assert_uint_le(failed_at, SMTP_REPLY_LINE_MAX + 1 + step);
		ck_assert_int_eq(smtp_reply_next(p, &r), -1);
		ck_assert_int_eq(errno, EPROTO);
		ck_assert_str_eq(smtp_reply_error(p), "reply line too long");
		smtp_reply_free(&p);
	}
	free(in);
}
END_TEST

/* push_all - one parser, whole input; replies taken, *why set on error */
static size_t push_all(const char *in, size_t len, struct smtp_reply *r, const char **why)
{
	struct result res;

	run(&res, in, len, 0, 0);
	*why = res.why;
	if (res.n > 0)
		*r = res.r[0];
	return res.n;
}

/* Limits exactly: line length, CR at the limit, text, line count. */
START_TEST(test_limits)
{
	static char in[SMTP_REPLY_LINES_MAX * 16 + 3 * (SMTP_REPLY_LINE_MAX + 4)];
	struct smtp_reply r;
	const char *why;
	size_t n = 0;

	/* a line of exactly SMTP_REPLY_LINE_MAX octets, with CRLF, LF or CR then more */
	memcpy(in, "250 ", 4);
	memset(in + 4, 'a', SMTP_REPLY_LINE_MAX - 4);
	memcpy(in + SMTP_REPLY_LINE_MAX, "\r\n", 2);
	ck_assert_uint_eq(push_all(in, SMTP_REPLY_LINE_MAX + 2, &r, &why), 1);
	ck_assert_uint_eq(r.len[0], SMTP_REPLY_LINE_MAX - 4);
	in[SMTP_REPLY_LINE_MAX] = '\n';
	ck_assert_uint_eq(push_all(in, SMTP_REPLY_LINE_MAX + 1, &r, &why), 1);
	in[SMTP_REPLY_LINE_MAX] = '\r';
	ck_assert_uint_eq(push_all(in, SMTP_REPLY_LINE_MAX + 1, &r, &why), 0);
	ck_assert_ptr_null(why);
	in[SMTP_REPLY_LINE_MAX + 1] = 'x';
	ck_assert_uint_eq(push_all(in, SMTP_REPLY_LINE_MAX + 2, &r, &why), 0);
	ck_assert_str_eq(why, "reply line too long");
	/* one octet more: refused with or without its line end */
	in[SMTP_REPLY_LINE_MAX] = 'a';
	memcpy(in + SMTP_REPLY_LINE_MAX + 1, "\r\n", 2);
	ck_assert_uint_eq(push_all(in, SMTP_REPLY_LINE_MAX + 3, &r, &why), 0);
	ck_assert_str_eq(why, "reply line too long");
	ck_assert_uint_eq(push_all(in, SMTP_REPLY_LINE_MAX + 1, &r, &why), 0);
	ck_assert_str_eq(why, "reply line too long");

	/* text: exactly SMTP_REPLY_TEXT_MAX octets, then one more */
	for (int i = 0; i < 2; i++) {
		memcpy(in + n, "250-", 4);
		memset(in + n + 4, 'b', SMTP_REPLY_LINE_MAX - 4);
		memcpy(in + n + SMTP_REPLY_LINE_MAX, "\r\n", 2);
		n += SMTP_REPLY_LINE_MAX + 2;
	}
	memcpy(in + n, "250 ", 4);
	memset(in + n + 4, 'c', SMTP_REPLY_TEXT_MAX - 2 * (SMTP_REPLY_LINE_MAX - 4));
	n += 4 + SMTP_REPLY_TEXT_MAX - 2 * (SMTP_REPLY_LINE_MAX - 4);
	memcpy(in + n, "\r\n", 2);
	ck_assert_uint_eq(push_all(in, n + 2, &r, &why), 1);
	ck_assert_uint_eq(r.textlen, SMTP_REPLY_TEXT_MAX);
	ck_assert_uint_eq(r.nlines, 3);
	memcpy(in + n, "c\r\n", 3);
	ck_assert_uint_eq(push_all(in, n + 3, &r, &why), 0);
	ck_assert_str_eq(why, "reply text too long");

	/* lines: exactly SMTP_REPLY_LINES_MAX, then one more */
	n = 0;
	for (int i = 0; i < SMTP_REPLY_LINES_MAX - 1; i++)
		n += (size_t)sprintf(in + n, "250-%d\r\n", i);
	n += (size_t)sprintf(in + n, "250 last\r\n");
	ck_assert_uint_eq(push_all(in, n, &r, &why), 1);
	ck_assert_uint_eq(r.nlines, SMTP_REPLY_LINES_MAX);
	ck_assert_str_eq(smtp_reply_line(&r, SMTP_REPLY_LINES_MAX - 1), "last");
	ck_assert_str_eq(smtp_reply_line(&r, 7), "7");
	n -= 10;
	n += (size_t)sprintf(in + n, "250-%d\r\n250 last\r\n", SMTP_REPLY_LINES_MAX - 1);
	ck_assert_uint_eq(push_all(in, n, &r, &why), 0);
	ck_assert_str_eq(why, "too many lines in reply");
}
END_TEST

/* A reply struct is plain data: copies stay valid after the parser is gone. */
START_TEST(test_copy)
{
	struct smtp_reply_parser *p = smtp_reply_new();
	struct smtp_reply r, copy;

	ck_assert_int_eq(smtp_reply_push(p, L("250-one\r\n250 two\r\n")), 18);
	ck_assert_int_eq(smtp_reply_next(p, &r), 1);
	smtp_reply_free(&p);
	copy = r;
	memset(&r, 0, sizeof(r));
	ck_assert_str_eq(smtp_reply_line(&copy, 0), "one");
	ck_assert_str_eq(smtp_reply_line(&copy, 1), "two");
	ck_assert_str_eq(smtp_reply_line(&copy, 2), "");
	ck_assert_str_eq(smtp_reply_line(&r, 0), "");
	/* misuse */
	p = smtp_reply_new();
	errno = 0;
	ck_assert_int_eq(smtp_reply_push(p, "x", (size_t)SSIZE_MAX + 1), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(smtp_reply_push(p, "", 0), 0);
	ck_assert_int_eq(smtp_reply_next(p, &r), 0);
	smtp_reply_free(&p);
}
END_TEST

/* Format: bounded, terminated, "..." when cut. */
START_TEST(test_format)
{
	struct smtp_reply r;
	const char *why;
	char small[16], one[1];

	ck_assert_uint_eq(push_all(L("550-5.7.1 Our system has detected that this message\r\n"
				     "550 5.7.1 is likely unsolicited mail.\r\n"), &r, &why), 1);
	ck_assert_str_eq(fmt(&r), "550 5.7.1 Our system has detected that this message "
			 "is likely unsolicited mail.");
	ck_assert_uint_eq(smtp_reply_format(&r, small, sizeof(small)), 15);
	ck_assert_str_eq(small, "550 5.7.1 Ou...");
	ck_assert_uint_eq(smtp_reply_format(&r, small, 4), 3);
	ck_assert_str_eq(small, "...");
	ck_assert_uint_eq(smtp_reply_format(&r, small, 3), 2);
	ck_assert_str_eq(small, "55");
	ck_assert_uint_eq(smtp_reply_format(&r, one, 1), 0);
	ck_assert_str_eq(one, "");
	ck_assert_uint_eq(smtp_reply_format(&r, NULL, 0), 0);
}
END_TEST

/* EHLO replies: flags, SIZE's number, AUTH mechanisms. */
static const struct {
	const char *in;
	size_t len;
	int rc;
	unsigned flags;
	unsigned long long size;
	unsigned auth;
} ehlo[] = {
	{L("250-mx.example.org\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250-VRFY\r\n250-ETRN\r\n"
	   "250-STARTTLS\r\n250-AUTH PLAIN LOGIN\r\n250-AUTH=PLAIN LOGIN\r\n"
	   "250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250-DSN\r\n250-SMTPUTF8\r\n250 CHUNKING\r\n"),
	 0, 0x1ff, 10240000, SMTP_AUTH_PLAIN | SMTP_AUTH_LOGIN},
	{L("250-x\r\n250-pipelining\r\n250-size\r\n250 auth cram-md5 Plain\r\n"), 0,
	 SMTP_EXT_PIPELINING | SMTP_EXT_SIZE | SMTP_EXT_AUTH, 0, SMTP_AUTH_PLAIN},
	{L("250-x\r\n250 SIZE abc\r\n"), 0, SMTP_EXT_SIZE, 0, 0},
	{L("250-x\r\n250 SIZE 0\r\n"), 0, SMTP_EXT_SIZE, 0, 0},
	{L("250-x\r\n250 SIZE 12x\r\n"), 0, SMTP_EXT_SIZE, 0, 0},
	{L("250-x\r\n250 SIZE 18446744073709551615\r\n"), 0, SMTP_EXT_SIZE, 18446744073709551615ULL, 0},
	{L("250-x\r\n250 SIZE 18446744073709551616\r\n"), 0, SMTP_EXT_SIZE, 0, 0},
	{L("250-x\r\n250 SIZE 99999999999999999999999\r\n"), 0, SMTP_EXT_SIZE, 0, 0},
	{L("250-x\r\n250 AUTH=LOGIN\r\n"), 0, SMTP_EXT_AUTH, 0, SMTP_AUTH_LOGIN},
	{L("250-x\r\n250 AUTH\r\n"), 0, SMTP_EXT_AUTH, 0, 0},
	{L("250-x\r\n250 AUTH XOAUTH2 GSSAPI PLAINX\r\n"), 0, SMTP_EXT_AUTH, 0, 0},
	{L("250-x\r\n250-XFOO bar\r\n250-PIPELININGX\r\n250-X-PIPELINING\r\n250 PIPE LINING\r\n"),
	 0, 0, 0, 0},
	{L("250-x\r\n250-  starttls  \r\n250 \tDsn\r\n"), 0, SMTP_EXT_STARTTLS | SMTP_EXT_DSN, 0, 0},
	{L("250-x\r\n250-2.0.0 PIPELINING\r\n250 CHUNKING\r\n"), 0,
	 SMTP_EXT_PIPELINING | SMTP_EXT_CHUNKING, 0, 0},
	{L("250 mx.example.org\r\n"), 0, 0, 0, 0},
	{L("250 PIPELINING\r\n"), 0, 0, 0, 0},
	{L("502 5.5.1 EHLO not implemented\r\n"), -1, 0, 0, 0},
	{L("220-x\r\n220 PIPELINING\r\n"), -1, 0, 0, 0},
};

START_TEST(test_ehlo)
{
	struct smtp_reply r;
	struct smtp_ehlo e;
	const char *why;

	ck_assert_uint_eq(push_all(ehlo[_i].in, ehlo[_i].len, &r, &why), 1);
	memset(&e, 0xa5, sizeof(e));
	errno = 0;
	ck_assert_int_eq(smtp_reply_ehlo(&r, &e), ehlo[_i].rc);
	if (ehlo[_i].rc < 0)
		ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(e.flags, ehlo[_i].flags);
	ck_assert_uint_eq(e.size, ehlo[_i].size);
	ck_assert_uint_eq(e.auth, ehlo[_i].auth);
}
END_TEST

/* Queue ids in replies to the end of data. */
static const struct {
	const char *in;
	size_t len;
	const char *id;
} qids[] = {
	{L("250 2.0.0 Ok: queued as 4XyZ1QID\r\n"), "4XyZ1QID"},
	{L("250 2.0.0 Ok: queued as 4Y1abcDEFghIJk\r\n"), "4Y1abcDEFghIJk"},
	{L("250 Ok: Queued As 12345ABC (ok)\r\n"), "12345ABC"},
	{L("250 OK id=1abc-2def-3g\r\n"), "1abc-2def-3g"},
	{L("250 OK id=1rRdZx-00000000fbO-0Ym3\r\n"), "1rRdZx-00000000fbO-0Ym3"},
	{L("250 2.0.0 xAB12345 Message accepted for delivery\r\n"), "xAB12345"},
	{L("250 xAB12345 Message accepted for delivery\r\n"), "xAB12345"},
	{L("250-first line\r\n250 2.0.0 Ok: queued as ABC123\r\n"), "ABC123"},
	{L("250 Ok\r\n"), ""},
	{L("250 2.0.0 Ok: queued as \r\n"), ""},
	{L("250 2.0.0 Ok: queued as <x@y>\r\n"), ""},
	{L("250 OK msgid=abc\r\n"), ""},
	{L("250 OK id=\r\n"), ""},
	{L("250 2.0.0 OK  1701234567 a1-20020a05 - gsmtp\r\n"), ""},
	{L("250 2.0.0 Message accepted for delivery\r\n"), ""},
	{L("250 2.0.0 <abc> Message accepted for delivery\r\n"), ""},
	{L("550 5.7.1 queued as ABC\r\n"), ""},
	{L("451 4.3.0 id=abc\r\n"), ""},
	{L("250 queued as 0123456789012345678901234567890123456789012345678901234567890123\r\n"),
	 "0123456789012345678901234567890123456789012345678901234567890123"},
	{L("250 queued as 01234567890123456789012345678901234567890123456789012345678901234\r\n"), ""},
};

START_TEST(test_queue_id)
{
	struct smtp_reply r;
	char id[SMTP_QUEUE_ID_MAX + 1];
	const char *why;

	ck_assert_uint_eq(push_all(qids[_i].in, qids[_i].len, &r, &why), 1);
	memset(id, 'z', sizeof(id));
	ck_assert_uint_eq(smtp_reply_queue_id(&r, id, sizeof(id)), strlen(qids[_i].id));
	ck_assert_str_eq(id, qids[_i].id);
}
END_TEST

/* A buffer too small for the id gets "", never a cut id. */
START_TEST(test_queue_id_small)
{
	struct smtp_reply r;
	char id[8];
	const char *why;

	ck_assert_uint_eq(push_all(L("250 2.0.0 Ok: queued as 4XyZ1QIDX\r\n"), &r, &why), 1);
	ck_assert_uint_eq(smtp_reply_queue_id(&r, id, sizeof(id)), 0);
	ck_assert_str_eq(id, "");
	ck_assert_uint_eq(smtp_reply_queue_id(&r, id, 0), 0);
	ck_assert_uint_eq(push_all(L("250 2.0.0 Ok: queued as 4XyZ1QI\r\n"), &r, &why), 1);
	ck_assert_uint_eq(smtp_reply_queue_id(&r, id, sizeof(id)), 7);
	ck_assert_str_eq(id, "4XyZ1QI");
}
END_TEST

/* xorshift - a small deterministic generator */
static unsigned xorshift(unsigned *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Random input over the octets that matter: every way of feeding agrees. */
START_TEST(test_random)
{
	static const char *const pieces[] = {"250", "550", "2", "-", " ", "\r", "\n", "\r\n",
					     "5.1.1", "2.0.0", "x", "\0", "250-", "250 ", "199"};
	unsigned seed = 0x9e3779b9u + (unsigned)_i;
	char in[128];

	for (int round = 0; round < 40; round++) {
		struct result whole, other;
		size_t len = 0;

		while (len + 8 < sizeof(in)) {
			const char *pc = pieces[xorshift(&seed) % N_ELEMENTS(pieces)];
			size_t pn = pc[0] == '\0' ? 1 : strlen(pc);

			memcpy(in + len, pc, pn);
			len += pn;
			if (xorshift(&seed) % 16 == 0)
				break;
		}
		run(&whole, in, len, 0, 0);
		run(&other, in, len, 0, 1 + xorshift(&seed) % 9);
		same(&whole, &other);
		run(&other, in, len, xorshift(&seed) % (len + 1), 0);
		same(&whole, &other);
		for (size_t i = 0; i < whole.n && i < MAX_REPLIES; i++) {
			const char *f = fmt(&whole.r[i]);

			ck_assert_int_ge(whole.r[i].code, 200);
			ck_assert_int_le(whole.r[i].code, 599);
			for (; *f != '\0'; f++)
				ck_assert(*f >= ' ' && *f <= '~');
		}
	}
}
END_TEST

/* smtp_esc_label: the RFC 3463 codes as they are, anything else "other" */
static const struct {
	const char *esc, *label;
} esc_labels[] = {
	{"5.1.1", "5.1.1"}, {"4.7.0", "4.7.0"}, {"2.0.0", "2.0.0"}, {"2.6.0", "2.6.0"},
	{"5.0.0", "5.0.0"}, {"4.1.8", "4.1.8"}, {"5.2.4", "5.2.4"}, {"4.3.5", "4.3.5"},
	{"4.4.7", "4.4.7"}, {"5.5.5", "5.5.5"}, {"5.6.5", "5.6.5"}, {"5.7.7", "5.7.7"},
	{"5.0.1", "other"}, {"5.1.9", "other"}, {"5.2.5", "other"}, {"4.3.6", "other"},
	{"4.4.8", "other"}, {"5.5.6", "other"}, {"5.6.6", "other"}, {"5.7.8", "other"},
	{"5.8.0", "other"}, {"3.1.1", "other"}, {"1.0.0", "other"}, {"6.0.0", "other"},
	{"5.1.10", "other"}, {"5.10.1", "other"}, {"5.01.1", "other"}, {"5.1.1 ", "other"},
	{"5.1", "other"}, {"5.1.", "other"}, {"5..1", "other"}, {"", "other"},
	{"x.1.1", "other"}, {"5-1-1", "other"}, {"5.1.1\n", "other"},
};

START_TEST(test_esc_label)
{
	char out[SMTP_ESC_LABEL_MAX];

	ck_assert_str_eq(smtp_esc_label(esc_labels[_i].esc, out), esc_labels[_i].label);
	ck_assert_ptr_eq(smtp_esc_label(esc_labels[_i].esc, out), out);
}
END_TEST

/* smtp_esc_label: of every code with one-digit parts, exactly the 3 x 49
 * RFC 3463 defines keep their value; NULL is "other" */
START_TEST(test_esc_label_bounded)
{
	char esc[6], out[SMTP_ESC_LABEL_MAX];
	int kept = 0;

	for (int c = 0; c <= 9; c++)
		for (int s = 0; s <= 9; s++)
			for (int d = 0; d <= 9; d++) {
				snprintf(esc, sizeof(esc), "%d.%d.%d", c, s, d);
				if (strcmp(smtp_esc_label(esc, out), esc) == 0)
					kept++;
				else
					ck_assert_str_eq(out, "other");
			}
	ck_assert_int_eq(kept, 3 * (1 + 9 + 5 + 6 + 8 + 6 + 6 + 8));
	ck_assert_str_eq(smtp_esc_label(NULL, out), "other");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("smtp_reply");
	TCase *tc = tcase_create("smtp_reply");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_cases, 0, N_ELEMENTS(cases));
	tcase_add_test(tc, test_pipelined);
	tcase_add_test(tc, test_endless);
	tcase_add_test(tc, test_huge_line);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_copy);
	tcase_add_test(tc, test_format);
	tcase_add_loop_test(tc, test_ehlo, 0, N_ELEMENTS(ehlo));
	tcase_add_loop_test(tc, test_queue_id, 0, N_ELEMENTS(qids));
	tcase_add_test(tc, test_queue_id_small);
	tcase_add_loop_test(tc, test_random, 0, 50);
	tcase_add_loop_test(tc, test_esc_label, 0, N_ELEMENTS(esc_labels));
	tcase_add_test(tc, test_esc_label_bounded);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
