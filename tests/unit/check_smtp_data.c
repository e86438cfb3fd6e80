/*
 * check_smtp_data - DATA and BDAT content: dot-unstuffing, the end marker
 * and the smuggling forms that must not end DATA, bare CR/LF, limits,
 * flags (also of content scanned whole: smtp_data_scan). Every case is fed whole, split at every position, byte by byte,
 * and through output buffers down to 2 octets; all must agree exactly.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <string.h>

#include "smtp_data.h"
#include "unit.h"

/* A byte string with its length, so that it may hold NUL. */
#define B(s) s, sizeof(s) - 1

#define NOT_ENDED ((size_t)-1)

struct result {
	char out[4096];
	size_t outlen;
	size_t consumed;		/* where DATA ended, or NOT_ENDED */
	unsigned errors;
	unsigned long long size;
	int dotlines, eightbit;
};

/* drain - push one piece until it is consumed or the content has ended */
static int drain(struct smtp_data *sd, const char *in, size_t len, size_t outcap,
		 struct result *r, size_t base)
{
	char buf[4096];
	size_t off = 0;

	ck_assert_uint_le(outcap, sizeof(buf));
	while (off < len) {
		size_t used, made;
		int end = smtp_data_push(sd, in + off, len - off, &used, buf, outcap, &made);

		ck_assert_int_ge(end, 0);
		ck_assert_uint_le(used, len - off);
		ck_assert_uint_le(made, outcap);
		ck_assert_uint_le(r->outlen + made, sizeof(r->out));
		memcpy(r->out + r->outlen, buf, made);
		r->outlen += made;
		off += used;
		if (end) {
			r->consumed = base + off;
			return 1;
		}
		ck_assert_msg(used > 0 || made > 0, "no progress at %zu", base + off);
	}
	return 0;
}

/*
 * feed - the whole input, cut at cut (if below len) and then into pieces
 * of step octets (0: no further cuts), through an out buffer of outcap.
 */
static void feed(struct result *r, enum smtp_data_mode mode, const struct smtp_data_limits *lim,
		 const char *in, size_t len, size_t cut, size_t step, size_t outcap)
{
	struct smtp_data *sd = smtp_data_new(mode, lim);
	size_t pos = 0;

	memset(r, 0, sizeof(*r));
	r->consumed = NOT_ENDED;
	while (pos < len) {
		size_t n = len - pos;

		if (pos < cut && cut < len)
			n = cut - pos;
		else if (step && step < n)
			n = step;
		if (drain(sd, in + pos, n, outcap, r, pos))
			break;
		pos += n;
	}
	if (mode == SMTP_DATA_BDAT) {
		char buf[2];
		size_t made = smtp_data_finish(sd, buf, sizeof(buf));

		ck_assert_uint_le(made, 2);
		memcpy(r->out + r->outlen, buf, made);
		r->outlen += made;
	}
	r->errors = smtp_data_errors(sd);
	r->size = smtp_data_size(sd);
	r->dotlines = smtp_data_dotlines(sd);
	r->eightbit = smtp_data_8bit(sd);
	smtp_data_free(&sd);
	ck_assert_ptr_null(sd);
}

/* same - two results are identical */
static void same(const struct result *a, const struct result *b, const char *how)
{
	ck_assert_msg(a->outlen == b->outlen && memcmp(a->out, b->out, a->outlen) == 0,
		      "%s: output differs (%zu vs %zu octets)", how, a->outlen, b->outlen);
	ck_assert_msg(a->consumed == b->consumed, "%s: consumed %zu vs %zu", how,
		      a->consumed, b->consumed);
	ck_assert_msg(a->errors == b->errors, "%s: errors %u vs %u", how, a->errors, b->errors);
	ck_assert_msg(a->size == b->size, "%s: size %llu vs %llu", how, a->size, b->size);
	ck_assert_int_eq(a->dotlines, b->dotlines);
	ck_assert_int_eq(a->eightbit, b->eightbit);
}

/* every_way - feed in every way; all results equal the first, which is returned */
static void every_way(struct result *r, enum smtp_data_mode mode,
		      const struct smtp_data_limits *lim, const char *in, size_t len)
{
	static const size_t outcaps[] = {4096, 2, 3, 7};
	static struct result other;
	char how[64];

	feed(r, mode, lim, in, len, len, 0, 4096);
	for (size_t c = 0; c < N_ELEMENTS(outcaps); c++) {
		for (size_t cut = 0; cut <= len; cut++) {
			feed(&other, mode, lim, in, len, cut, 0, outcaps[c]);
			snprintf(how, sizeof(how), "cut at %zu, outcap %zu", cut, outcaps[c]);
			same(r, &other, how);
		}
		feed(&other, mode, lim, in, len, len, 1, outcaps[c]);
		snprintf(how, sizeof(how), "byte by byte, outcap %zu", outcaps[c]);
		same(r, &other, how);
		feed(&other, mode, lim, in, len, len, 3, outcaps[c]);
		snprintf(how, sizeof(how), "3 at a time, outcap %zu", outcaps[c]);
		same(r, &other, how);
	}
}

/* check_out - output, end, errors and size are exactly as wanted */
static void check_out(const struct result *r, const char *want, size_t wantlen,
		      size_t consumed, unsigned errors)
{
	ck_assert_msg(r->outlen == wantlen && memcmp(r->out, want, wantlen) == 0,
		      "output is %zu octets \"%.*s\", wanted %zu", r->outlen, (int)r->outlen,
		      r->out, wantlen);
	ck_assert_msg(r->consumed == consumed, "consumed %zd, wanted %zd", (ssize_t)r->consumed,
		      (ssize_t)consumed);
	ck_assert_uint_eq(r->errors, errors);
	if (errors == 0)
		ck_assert_uint_eq(r->size, r->outlen);
}

/* DATA content; consumed is where the end marker finished, or NOT_ENDED. */
static const struct {
	const char *in;
	size_t len;
	const char *out;
	size_t outlen;
	size_t consumed;
	int dotlines;
	int eightbit;
} data_cases[] = {
	{B(".\r\n"), B(""), 3, 0, 0},
	{B("hello\r\n.\r\n"), B("hello\r\n"), 10, 0, 0},
	{B("hello\r\n.\r\nQUIT\r\n"), B("hello\r\n"), 10, 0, 0},
	{B("\r\n.\r\n"), B("\r\n"), 5, 0, 0},
	{B("a\r\nb\r\n\r\n.\r\n"), B("a\r\nb\r\n\r\n"), 11, 0, 0},
	{B("..leading\r\n.\r\n"), B(".leading\r\n"), 14, 1, 0},
	{B("a\r\n..\r\n.\r\n"), B("a\r\n.\r\n"), 10, 1, 0},
	{B("a\r\n...\r\n.\r\n"), B("a\r\n..\r\n"), 11, 1, 0},
	{B("a\r\n.b\r\n.\r\n"), B("a\r\nb\r\n"), 10, 0, 0},
	{B("a\r\n. \r\n.\r\n"), B("a\r\n \r\n"), 10, 0, 0},
	{B("a.\r\n.\r\n"), B("a.\r\n"), 7, 0, 0},
	{B("a\r\n.\r\n.\r\n"), B("a\r\n"), 6, 0, 0},
	{B("no end\r\n"), B("no end\r\n"), NOT_ENDED, 0, 0},
	{B("no end\r\n."), B("no end\r\n"), NOT_ENDED, 0, 0},
	{B("no end\r\n.\r"), B("no end\r\n"), NOT_ENDED, 0, 0},
	{B("a\0b\r\n.\r\n"), B("a\0b\r\n"), 8, 0, 0},
	{B("caf\xc3\xa9\r\n.\r\n"), B("caf\xc3\xa9\r\n"), 10, 0, 1},
	{B("x\r\n\0.\r\ny\r\n.\r\n"), B("x\r\n\0.\r\ny\r\n"), 13, 0, 0},
	{B("x\r\n.\0\r\ny\r\n.\r\n"), B("x\r\n\0\r\ny\r\n"), 13, 0, 0},
};

START_TEST(test_data)
{
	struct smtp_data_limits lim = {0, 0, _i & 1};
	static struct result r;

	every_way(&r, SMTP_DATA_DOT, &lim, data_cases[_i / 2].in, data_cases[_i / 2].len);
	check_out(&r, data_cases[_i / 2].out, data_cases[_i / 2].outlen, data_cases[_i / 2].consumed, 0);
	ck_assert_int_eq(r.dotlines, data_cases[_i / 2].dotlines);
	ck_assert_int_eq(r.eightbit, data_cases[_i / 2].eightbit);
}
END_TEST

/*
 * Smuggling: "x" V "y\r\n.\r\n" must end only at the real marker, with
 * BARE (normalize off) or CR LF for each bare CR/LF (normalize on).
 */
static const struct {
	const char *v;
	size_t len;
	const char *raw;		/* output with normalize off, up to the error */
	size_t rawlen;
	const char *norm;		/* output with normalize on */
	size_t normlen;
	unsigned errors;		/* with normalize off */
} smuggle[] = {
	{B("\n.\n"), B("x"), B("x\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r.\r"), B("x"), B("x\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r.\n"), B("x"), B("x\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\n.\r"), B("x"), B("x\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\n.\r\n"), B("x"), B("x\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r\n.\n"), B("x\r\n"), B("x\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r.\r\n"), B("x"), B("x\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r\n.\r"), B("x\r\n"), B("x\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r\n\0.\r\n"), B("x\r\n\0.\r\ny\r\n"), B("x\r\n\0.\r\ny\r\n"), 0},
	{B("\r\n.\0\r\n"), B("x\r\n\0\r\ny\r\n"), B("x\r\n\0\r\ny\r\n"), 0},
	{B("\n\n.\n\n"), B("x"), B("x\r\n\r\n\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r\n.\r\r\n"), B("x\r\n"), B("x\r\n\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r\n.\n\r\n"), B("x\r\n"), B("x\r\n\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
	{B("\r\r\n.\n"), B("x"), B("x\r\n\r\n\r\ny\r\n"), SMTP_DATA_ERR_BARE},
};

START_TEST(test_smuggling)
{
	char in[64];
	size_t len = 0;
	static struct result r;

	in[len++] = 'x';
	memcpy(in + len, smuggle[_i].v, smuggle[_i].len);
	len += smuggle[_i].len;
	memcpy(in + len, "y\r\n.\r\n", 6);
	len += 6;
	for (int normalize = 0; normalize <= 1; normalize++) {
		struct smtp_data_limits lim = {0, 0, normalize};

		every_way(&r, SMTP_DATA_DOT, &lim, in, len);
		if (normalize)
			check_out(&r, smuggle[_i].norm, smuggle[_i].normlen, len, 0);
		else
			check_out(&r, smuggle[_i].raw, smuggle[_i].rawlen, len, smuggle[_i].errors);
	}
}
END_TEST

/* The end marker right after a smuggling form still ends DATA where it is. */
START_TEST(test_end_after_bare)
{
	struct smtp_data_limits lim = {0, 0, 1};
	static struct result r;

	every_way(&r, SMTP_DATA_DOT, &lim, B("x\n.\r\n.\r\ntail"));
	check_out(&r, B("x\r\n\r\n"), 8, 0);
	lim.normalize = 0;
	every_way(&r, SMTP_DATA_DOT, &lim, B("x\n.\r\n.\r\ntail"));
	check_out(&r, B("x"), 8, SMTP_DATA_ERR_BARE);
}
END_TEST

/* BDAT content, after smtp_data_finish(); never ends by itself. */
static const struct {
	const char *in;
	size_t len;
	int normalize;
	const char *out;
	size_t outlen;
	unsigned errors;
	int dotlines;
} bdat_cases[] = {
	{B("hello\r\n"), 0, B("hello\r\n"), 0, 0},
	{B("hello"), 0, B("hello\r\n"), 0, 0},
	{B("a\r\nb"), 0, B("a\r\nb\r\n"), 0, 0},
	{B(""), 0, B(""), 0, 0},
	{B("\r\n"), 0, B("\r\n"), 0, 0},
	{B(".\r\n"), 0, B(".\r\n"), 0, 1},
	{B("a\r\n.\r\nb"), 0, B("a\r\n.\r\nb\r\n"), 0, 1},
	{B("..x\r\n"), 0, B("..x\r\n"), 0, 1},
	{B("\0"), 0, B("\0\r\n"), 0, 0},
	{B("a\rb"), 1, B("a\r\nb\r\n"), 0, 0},
	{B("a\rb"), 0, B("a"), SMTP_DATA_ERR_BARE, 0},
	{B("a\r"), 1, B("a\r\n"), 0, 0},
	{B("a\r"), 0, B("a"), SMTP_DATA_ERR_BARE, 0},
	{B("a\n"), 1, B("a\r\n"), 0, 0},
	{B("a\n"), 0, B("a"), SMTP_DATA_ERR_BARE, 0},
	{B("a\r\n\r"), 1, B("a\r\n\r\n"), 0, 0},
	{B("a\r\n\r"), 0, B("a\r\n"), SMTP_DATA_ERR_BARE, 0},
	{B("\n.\n"), 1, B("\r\n.\r\n"), 0, 1},
	{B("\r"), 1, B("\r\n"), 0, 0},
};

START_TEST(test_bdat)
{
	struct smtp_data_limits lim = {0, 0, bdat_cases[_i].normalize};
	static struct result r;

	every_way(&r, SMTP_DATA_BDAT, &lim, bdat_cases[_i].in, bdat_cases[_i].len);
	check_out(&r, bdat_cases[_i].out, bdat_cases[_i].outlen, NOT_ENDED, bdat_cases[_i].errors);
	ck_assert_int_eq(r.dotlines, bdat_cases[_i].dotlines);
}
END_TEST

/*
 * Limits: max_line (octets without CR LF, after unstuffing) and max_size.
 * Output goes on up to the octet that passes a limit, a CR LF is whole.
 */
static const struct {
	enum smtp_data_mode mode;
	unsigned long long max_size;
	size_t max_line;
	int normalize;
	const char *in;
	size_t len;
	const char *out;
	size_t outlen;
	unsigned errors;
	unsigned long long size;
} limit_cases[] = {
	{SMTP_DATA_DOT, 0, 5, 0, B("12345\r\n.\r\n"), B("12345\r\n"), 0, 7},
	{SMTP_DATA_DOT, 0, 5, 0, B("123456\r\n.\r\n"), B("12345"), SMTP_DATA_ERR_LINE, 8},
	{SMTP_DATA_DOT, 0, 5, 0, B("ok\r\n123456\r\nmore\r\n.\r\n"), B("ok\r\n12345"),
	 SMTP_DATA_ERR_LINE, 18},
	{SMTP_DATA_DOT, 0, 5, 0, B("..2345\r\n.\r\n"), B(".2345\r\n"), 0, 7},
	{SMTP_DATA_DOT, 0, 5, 1, B("12345\n12345\r.\r\n.\r\n"), B("12345\r\n12345\r\n\r\n"), 0, 16},
	{SMTP_DATA_BDAT, 0, 5, 0, B("..2345\r\n"), B("..234"), SMTP_DATA_ERR_LINE, 8},
	{SMTP_DATA_BDAT, 0, 5, 0, B("123456"), B("12345"), SMTP_DATA_ERR_LINE, 8},
	{SMTP_DATA_DOT, 7, 0, 0, B("12345\r\n.\r\n"), B("12345\r\n"), 0, 7},
	{SMTP_DATA_DOT, 7, 0, 0, B("123456\r\n.\r\n"), B("123456"), SMTP_DATA_ERR_SIZE, 8},
	{SMTP_DATA_DOT, 7, 0, 0, B("123456\r\nabc\r\n.\r\n"), B("123456"), SMTP_DATA_ERR_SIZE, 13},
	{SMTP_DATA_DOT, 7, 0, 0, B("12345678\r\n.\r\n"), B("1234567"), SMTP_DATA_ERR_SIZE, 10},
	{SMTP_DATA_BDAT, 7, 0, 0, B("12345\r\n"), B("12345\r\n"), 0, 7},
	{SMTP_DATA_BDAT, 7, 0, 0, B("1234567"), B("1234567"), SMTP_DATA_ERR_SIZE, 9},
	/* only the first error is kept */
	{SMTP_DATA_DOT, 5, 3, 0, B("a\nbbbbbbbbbb\r\n.\r\n"), B("a"), SMTP_DATA_ERR_BARE, 15},
	{SMTP_DATA_DOT, 5, 3, 0, B("bbbb\nbbbbbbbbbb\r\n.\r\n"), B("bbb"), SMTP_DATA_ERR_LINE, 18},
	{SMTP_DATA_DOT, 3, 30, 0, B("bbbb\nbbbbbbbbbb\r\n.\r\n"), B("bbb"), SMTP_DATA_ERR_SIZE, 18},
};

START_TEST(test_limits)
{
	struct smtp_data_limits lim = {limit_cases[_i].max_size, limit_cases[_i].max_line,
				       limit_cases[_i].normalize};
	static struct result r;
	size_t end = limit_cases[_i].mode == SMTP_DATA_DOT ? limit_cases[_i].len : NOT_ENDED;

	every_way(&r, limit_cases[_i].mode, &lim, limit_cases[_i].in, limit_cases[_i].len);
	check_out(&r, limit_cases[_i].out, limit_cases[_i].outlen, end, limit_cases[_i].errors);
	ck_assert_uint_eq(r.size, limit_cases[_i].size);
	if (lim.max_size)
		ck_assert_uint_le(r.outlen, lim.max_size);
}
END_TEST

/* One object, several messages: reset forgets everything but the limits. */
START_TEST(test_reset)
{
	struct smtp_data_limits lim = {100, 0, 0};
	struct smtp_data *sd = smtp_data_new(SMTP_DATA_DOT, &lim);
	char out[64];
	size_t used, made;

	ck_assert_int_eq(smtp_data_push(sd, B("..a\xff\nb\r\n.\r\n"), &used, out, sizeof(out), &made), 1);
	ck_assert_uint_eq(used, 11);
	ck_assert_uint_eq(smtp_data_errors(sd), SMTP_DATA_ERR_BARE);
	ck_assert_int_eq(smtp_data_dotlines(sd), 1);
	ck_assert_int_eq(smtp_data_8bit(sd), 1);

	smtp_data_reset(sd, SMTP_DATA_BDAT);
	ck_assert_uint_eq(smtp_data_errors(sd), 0);
	ck_assert_uint_eq(smtp_data_size(sd), 0);
	ck_assert_int_eq(smtp_data_dotlines(sd), 0);
	ck_assert_int_eq(smtp_data_8bit(sd), 0);
	ck_assert_int_eq(smtp_data_push(sd, B("x\r\n.\r\n"), &used, out, sizeof(out), &made), 0);
	ck_assert_uint_eq(used, 6);
	ck_assert_uint_eq(made, 6);
	ck_assert_int_eq(memcmp(out, "x\r\n.\r\n", 6), 0);
	ck_assert_uint_eq(smtp_data_finish(sd, out, sizeof(out)), 0);

	smtp_data_reset(sd, SMTP_DATA_DOT);
	ck_assert_int_eq(smtp_data_push(sd, B("y\r\n.\r\n"), &used, out, sizeof(out), &made), 1);
	ck_assert_uint_eq(made, 3);
	ck_assert_uint_eq(smtp_data_size(sd), 3);
	ck_assert_int_eq(smtp_data_dotlines(sd), 0);

	/* the limits survive a reset */
	smtp_data_reset(sd, SMTP_DATA_BDAT);
	for (int i = 0; i < 10; i++)
		smtp_data_push(sd, B("0123456789\r\n"), &used, out, sizeof(out), &made);
	ck_assert_uint_eq(smtp_data_errors(sd), SMTP_DATA_ERR_SIZE);
	ck_assert_uint_eq(smtp_data_size(sd), 120);
	smtp_data_free(&sd);
	ck_assert_ptr_null(sd);
}
END_TEST

/* Misuse: a too small out buffer, pushing past the end, finishing DATA. */
START_TEST(test_misuse)
{
	struct smtp_data_limits lim = {0, 0, 0};
	struct smtp_data *sd = smtp_data_new(SMTP_DATA_DOT, &lim);
	char out[8];
	size_t used = 99, made = 99;

	errno = 0;
	ck_assert_int_eq(smtp_data_push(sd, B("a"), &used, out, 1, &made), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_eq(made, 0);
	ck_assert_uint_eq(smtp_data_finish(sd, out, sizeof(out)), 0);	/* not BDAT */
	ck_assert_int_eq(smtp_data_push(sd, B(".\r\nMAIL"), &used, out, sizeof(out), &made), 1);
	ck_assert_uint_eq(used, 3);
	ck_assert_int_eq(smtp_data_push(sd, B("MAIL"), &used, out, sizeof(out), &made), 1);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_eq(made, 0);

	smtp_data_reset(sd, SMTP_DATA_BDAT);
	ck_assert_int_eq(smtp_data_push(sd, B("abc"), &used, out, sizeof(out), &made), 0);
	ck_assert_uint_eq(smtp_data_finish(sd, out, sizeof(out)), 2);
	ck_assert_int_eq(memcmp(out, "\r\n", 2), 0);
	ck_assert_uint_eq(smtp_data_finish(sd, out, sizeof(out)), 0);	/* twice */
	ck_assert_int_eq(smtp_data_push(sd, B("more"), &used, out, sizeof(out), &made), 1);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_eq(smtp_data_size(sd), 5);
	smtp_data_free(&sd);
}
END_TEST

/* A full out buffer stops consumption where its output would not fit. */
START_TEST(test_out_full)
{
	struct smtp_data_limits lim = {0, 0, 0};
	struct smtp_data *sd = smtp_data_new(SMTP_DATA_DOT, &lim);
	char out[4];
	size_t used, made;

	ck_assert_int_eq(smtp_data_push(sd, B("abcdefg\r\n.\r\n"), &used, out, sizeof(out), &made), 0);
	ck_assert_uint_eq(used, 4);
	ck_assert_uint_eq(made, 4);
	ck_assert_int_eq(smtp_data_push(sd, B("efg\r\n.\r\n"), &used, out, sizeof(out), &made), 0);
	ck_assert_uint_eq(used, 4);	/* "efg" and the CR; CR LF does not fit */
	ck_assert_uint_eq(made, 3);
	ck_assert_int_eq(smtp_data_push(sd, B("\n.\r\n"), &used, out, sizeof(out), &made), 1);
	ck_assert_uint_eq(used, 4);
	ck_assert_uint_eq(made, 2);
	ck_assert_int_eq(memcmp(out, "\r\n", 2), 0);
	smtp_data_free(&sd);
}
END_TEST

/* xorshift - a fixed pseudo-random sequence */
static unsigned xorshift(unsigned *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/*
 * Random content over the octets that matter: every way of feeding agrees,
 * output never holds a bare CR or LF, size is what was produced.
 */
START_TEST(test_random)
{
	static const char alphabet[] = {'a', '.', '.', '\r', '\r', '\n', '\n', '\0', '\x80'};
	static struct result r;
	unsigned seed = 0x9e3779b9u + (unsigned)_i;
	char in[48];

	for (int round = 0; round < 40; round++) {
		size_t len = xorshift(&seed) % sizeof(in);
		struct smtp_data_limits lim = {0, 0, (int)(xorshift(&seed) & 1)};
		enum smtp_data_mode mode = xorshift(&seed) & 1 ? SMTP_DATA_BDAT : SMTP_DATA_DOT;

		if (xorshift(&seed) % 4 == 0)
			lim.max_line = xorshift(&seed) % 8;
		if (xorshift(&seed) % 4 == 0)
			lim.max_size = xorshift(&seed) % 32;
		for (size_t i = 0; i < len; i++)
			in[i] = alphabet[xorshift(&seed) % sizeof(alphabet)];
		every_way(&r, mode, &lim, in, len);
		for (size_t i = 0; i < r.outlen; i++) {
			if (r.out[i] == '\r')
				ck_assert(i + 1 < r.outlen && r.out[i + 1] == '\n');
			if (r.out[i] == '\n')
				ck_assert(i > 0 && r.out[i - 1] == '\r');
		}
		if (r.errors == 0) {
			ck_assert_uint_eq(r.size, r.outlen);
			if (mode == SMTP_DATA_BDAT || r.consumed != NOT_ENDED)
				ck_assert(r.outlen == 0 || (r.outlen >= 2 && r.out[r.outlen - 1] == '\n'));
		}
		if (lim.max_size)
			ck_assert_uint_le(r.outlen, lim.max_size);
	}
}
END_TEST

/* smtp_data_scan: content ternd builds itself (a DSN), canonical already */
static const struct {
	const char *in;
	int dotlines, eightbit;
} scan_cases[] = {
	{"", 0, 0},
	{"a\r\nb\r\n", 0, 0},
	{".a\r\n", 1, 0},			/* the first line counts too */
	{"a\r\n.b\r\n", 1, 0},
	{"a.\r\nb .\r\n", 0, 0},
	{"a\r\n\xc3\xa9\r\n", 0, 1},
	{"\x7f\r\n", 0, 0},
	{"a\r\n.", 1, 0},			/* a last line without CR LF */
	{"a\r\n.\xff\r\n", 1, 1},
};

START_TEST(test_scan)
{
	int dot = -1, eight = -1;

	smtp_data_scan(scan_cases[_i].in, strlen(scan_cases[_i].in), &dot, &eight);
	ck_assert_int_eq(dot, scan_cases[_i].dotlines);
	ck_assert_int_eq(eight, scan_cases[_i].eightbit);
}
END_TEST

/* smtp_data_scan past its 4096-octet output window: a '.' line at the end */
START_TEST(test_scan_long)
{
	static char body[10000 + 3];
	int dot = -1, eight = -1;

	for (size_t i = 0; i < 10000; i += 100) {
		memset(body + i, 'x', 98);
		memcpy(body + i + 98, "\r\n", 2);
	}
	smtp_data_scan(body, 10000, &dot, &eight);
	ck_assert_int_eq(dot, 0);
	memcpy(body + 10000, ".\r\n", 3);
	body[5000] = (char)0xe9;
	smtp_data_scan(body, sizeof(body), &dot, &eight);
	ck_assert_int_eq(dot, 1);
	ck_assert_int_eq(eight, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("smtp_data");
	TCase *tc = tcase_create("smtp_data");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_data, 0, 2 * N_ELEMENTS(data_cases));
	tcase_add_loop_test(tc, test_smuggling, 0, N_ELEMENTS(smuggle));
	tcase_add_test(tc, test_end_after_bare);
	tcase_add_loop_test(tc, test_bdat, 0, N_ELEMENTS(bdat_cases));
	tcase_add_loop_test(tc, test_limits, 0, N_ELEMENTS(limit_cases));
	tcase_add_test(tc, test_reset);
	tcase_add_test(tc, test_misuse);
	tcase_add_test(tc, test_out_full);
	tcase_add_loop_test(tc, test_random, 0, 50);
	tcase_add_loop_test(tc, test_scan, 0, N_ELEMENTS(scan_cases));
	tcase_add_test(tc, test_scan_long);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
