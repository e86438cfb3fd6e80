/*
 * check_textesc - the escaper of text from mail: control octets, ESC
 * sequences, BEL, DEL, C1 controls and every kind of ill-formed UTF-8
 * become \xHH; well-formed UTF-8 stays; the field flags for log lines;
 * cuts never split an escape or a character; escaped text is a fixed
 * point of TEXTESC_LINE; textesc_line escapes its whole line.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "textesc.h"
#include "unit.h"

static const struct {
	const char *in;
	unsigned flags;
	const char *out;
} cases[] = {
	{"", TEXTESC_LINE, ""},
	{"user@example.com", TEXTESC_LINE, "user@example.com"},
	{"<id@host> a, b (c) \\ \"q\" ~", TEXTESC_LINE, "<id@host> a, b (c) \\ \"q\" ~"},
	/* the title-setting OSC and colour codes of the issue */
	{"<\x1b]2;pwned\x07@x>", TEXTESC_LINE, "<\\x1b]2;pwned\\x07@x>"},
	{"\x1b[31mred\x1b[0m", TEXTESC_LINE, "\\x1b[31mred\\x1b[0m"},
	{"a\nb\rc\td", TEXTESC_LINE, "a\\x0ab\\x0dc\\x09d"},
	{"\x01\x1f\x20\x7e\x7f", TEXTESC_LINE, "\\x01\\x1f ~\\x7f"},
	/* well-formed UTF-8 of each length, the extremes included */
	{"caf\xc3\xa9", TEXTESC_LINE, "caf\xc3\xa9"},
	{"\xc2\xa0\xdf\xbf", TEXTESC_LINE, "\xc2\xa0\xdf\xbf"},
	{"\xe0\xa0\x80\xe2\x82\xac\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf", TEXTESC_LINE,
	 "\xe0\xa0\x80\xe2\x82\xac\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"},
	{"\xf0\x90\x80\x80\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf", TEXTESC_LINE,
	 "\xf0\x90\x80\x80\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"},
	/* C1 controls, as bare octets and as UTF-8 (U+009B is CSI) */
	{"\x9b" "31m", TEXTESC_LINE, "\\x9b31m"},
	{"\xc2\x9b" "31m\xc2\x80\xc2\x9f", TEXTESC_LINE, "\\xc2\\x9b31m\\xc2\\x80\\xc2\\x9f"},
	/* ill-formed: stray continuations, impossible leads */
	{"\x80\xbf", TEXTESC_LINE, "\\x80\\xbf"},
	{"a\xfe\xff" "b", TEXTESC_LINE, "a\\xfe\\xffb"},
	{"\xf5\x80\x80\x80", TEXTESC_LINE, "\\xf5\\x80\\x80\\x80"},
	/* overlongs: '/' in two, three and four octets, C0/C1 leads */
	{"\xc0\xaf", TEXTESC_LINE, "\\xc0\\xaf"},
	{"\xc1\xbf", TEXTESC_LINE, "\\xc1\\xbf"},
	{"\xe0\x80\xaf", TEXTESC_LINE, "\\xe0\\x80\\xaf"},
	{"\xe0\x9f\xbf", TEXTESC_LINE, "\\xe0\\x9f\\xbf"},
	{"\xf0\x80\x80\xaf", TEXTESC_LINE, "\\xf0\\x80\\x80\\xaf"},
	{"\xf0\x8f\xbf\xbf", TEXTESC_LINE, "\\xf0\\x8f\\xbf\\xbf"},
	/* surrogates, past U+10FFFF */
	{"\xed\xa0\x80\xed\xbf\xbf", TEXTESC_LINE, "\\xed\\xa0\\x80\\xed\\xbf\\xbf"},
	{"\xf4\x90\x80\x80", TEXTESC_LINE, "\\xf4\\x90\\x80\\x80"},
	/* cut sequences: at the end, and before ASCII (which stays) */
	{"x\xe2\x82", TEXTESC_LINE, "x\\xe2\\x82"},
	{"\xf0\x9f\x98" "a", TEXTESC_LINE, "\\xf0\\x9f\\x98a"},
	{"\xc3" "A\xc3\xa9", TEXTESC_LINE, "\\xc3A\xc3\xa9"},
	/* the values of a log line */
	{"a\\b", TEXTESC_VALUE, "a\\x5cb"},
	{"a,b<c>", TEXTESC_VALUE, "a,b<c>"},
	{"\"x>, relay=r, delay=1, status=sent (x)\"@example.com", TEXTESC_ADDR,
	 "\"x\\x3e\\x2c relay=r\\x2c delay=1\\x2c status=sent (x)\"@example.com"},
	{"\"a\\\"b\"@x", TEXTESC_ADDR, "\"a\\x5c\"b\"@x"},
	{"bounce+u=example.com@list.test", TEXTESC_ADDR, "bounce+u=example.com@list.test"},
	{"<u@x>: rejected, see https://x/?a=1, b=2", TEXTESC_REPLY,
	 "<u@x>: rejected, see https://x/?a=1\\x2c b=2"},
	{"ok), tls=full, queued_as=X", TEXTESC_REPLY, "ok)\\x2c tls=full\\x2c queued_as=X"},
	{"a,b=1 a,  c_9= a, =x a, b c=", TEXTESC_REPLY, "a\\x2cb=1 a\\x2c  c_9= a, =x a, b c="},
	{"550 5.1.1 \\x1b", TEXTESC_REPLY, "550 5.1.1 \\x5cx1b"},
	{"\x1b[0m\xff", TEXTESC_ADDR, "\\x1b[0m\\xff"},
};

START_TEST(test_cases)
{
	char out[256];

	memset(out, 'x', sizeof(out));
	ck_assert_str_eq(textesc(out, sizeof(out), cases[_i].in, cases[_i].flags), cases[_i].out);
}
END_TEST

/* escaped text is left alone by TEXTESC_LINE, whatever the flags were:
 * a log line whose values were escaped can be escaped whole */
START_TEST(test_fixed_point)
{
	char once[256], twice[256];

	textesc(once, sizeof(once), cases[_i].in, cases[_i].flags);
	ck_assert_str_eq(textesc(twice, sizeof(twice), once, TEXTESC_LINE), once);
}
END_TEST

/* a cut: never inside an escape or a character, always terminated */
static const struct {
	const char *in;
	size_t cap;
	const char *out;
} cuts[] = {
	{"abc", 1, ""},
	{"abc", 3, "ab"},
	{"abc", 4, "abc"},
	{"a\x1b" "b", 2, "a"},
	{"a\x1b" "b", 5, "a"},
	{"a\x1b" "b", 6, "a\\x1b"},
	{"a\xc3\xa9", 3, "a"},
	{"a\xc3\xa9", 4, "a\xc3\xa9"},
	{"a\xc2\x9b", 9, "a"},
	{"a\xc2\x9b", 10, "a\\xc2\\x9b"},
};

START_TEST(test_cuts)
{
	char out[32];

	memset(out, 'x', sizeof(out));
	ck_assert_str_eq(textesc(out, cuts[_i].cap, cuts[_i].in, TEXTESC_LINE), cuts[_i].out);
	ck_assert_int_eq(out[cuts[_i].cap], 'x');	/* nothing past cap */
}
END_TEST

/* TEXTESC_SIZE is enough for the worst case */
START_TEST(test_size)
{
	char in[65], out[TEXTESC_SIZE(64)];

	memset(in, '\x1b', 64);
	in[64] = '\0';
	textesc(out, sizeof(out), in, TEXTESC_LINE);
	ck_assert_uint_eq(strlen(out), 4 * 64);
}
END_TEST

/* textesc_line - the whole formatted line, short and long, then '\n' */
START_TEST(test_line)
{
	static const char head[] = "id=<\\x1b]2;t\\x07@x>\\x0aforged line n=7\n";
	char *buf = NULL, big[3000];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	memset(big, '\x07', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	textesc_line(f, "id=%s n=%d", "<\x1b]2;t\x07@x>\nforged line", 7);
	textesc_line(f, "%s", big);
	fclose(f);
	ck_assert_uint_eq(len, strlen(head) + 4 * (sizeof(big) - 1) + 1);
	ck_assert_int_eq(memcmp(buf, head, strlen(head)), 0);
	for (size_t i = 0; i < sizeof(big) - 1; i++)
		ck_assert_int_eq(memcmp(buf + strlen(head) + 4 * i, "\\x07", 4), 0);
	ck_assert_int_eq(buf[len - 1], '\n');
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("textesc");
	TCase *tc = tcase_create("textesc");

	tcase_add_loop_test(tc, test_cases, 0, N_ELEMENTS(cases));
	tcase_add_loop_test(tc, test_fixed_point, 0, N_ELEMENTS(cases));
	tcase_add_loop_test(tc, test_cuts, 0, N_ELEMENTS(cuts));
	tcase_add_test(tc, test_size);
	tcase_add_test(tc, test_line);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
