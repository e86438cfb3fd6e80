/*
 * check_pflog - Postfix's delay precision: rounding at 10 ms, 100 ms and
 * 1 s, carries across those limits, trailing zeros dropped.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "pflog.h"
#include "unit.h"

static const struct {
	uint64_t us;
	const char *text;
} delays[] = {
	{0, "0"},
	{4999, "0"},
	{5000, "0.01"},		/* rounded, not truncated */
	{10000, "0.01"},
	{99999, "0.1"},		/* 0.10: the trailing zero goes */
	{123456, "0.12"},
	{125000, "0.13"},
	{470000, "0.47"},
	{994999, "0.99"},
	{995000, "1"},		/* carries into the next resolution */
	{1000000, "1"},
	{1049999, "1"},
	{1050000, "1.1"},
	{2500000, "2.5"},
	{9949999, "9.9"},
	{9950000, "10"},
	{12499999, "12"},
	{12500000, "13"},
	{2335000000ULL, "2335"},
	{UINT64_MAX, "18446744073710"},
};

START_TEST(test_delay)
{
	char out[PFLOG_DELAY_MAX];

	memset(out, 'x', sizeof(out));
	pflog_delay(delays[_i].us, out, sizeof(out));
	ck_assert_str_eq(out, delays[_i].text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pflog");
	TCase *tc = tcase_create("pflog");

	tcase_add_loop_test(tc, test_delay, 0, N_ELEMENTS(delays));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
