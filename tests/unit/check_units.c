/* check_units - sizes and durations as written in tern.conf */
#include "config.h"

#include "unit.h"
#include "units.h"

static const struct {
	const char *in;
	int ok;
	unsigned long long bytes;
} size_cases[] = {
	{"0", 1, 0}, {"102400", 1, 102400}, {"10MB", 1, 10485760}, {"10mb", 1, 10485760},
	{"10 MB", 1, 10485760}, {"1k", 1, 1024}, {"1KiB", 1, 1024}, {"2G", 1, 2147483648ULL},
	{"5B", 1, 5}, {"", 0, 0}, {"MB", 0, 0}, {"-1", 0, 0}, {"10XB", 0, 0}, {"1.5MB", 0, 0},
	{"99999999999999999999", 0, 0}, {"9999999999999GB", 0, 0}, {"10 M B", 0, 0},
};

START_TEST(test_size)
{
	unsigned long long v = 12345;
	const char *why = NULL;
	int rc = units_size(size_cases[_i].in, &v, &why);

	ck_assert_msg((rc == 0) == size_cases[_i].ok, "units_size(\"%s\") returned %d",
		      size_cases[_i].in, rc);
	if (size_cases[_i].ok)
		ck_assert_uint_eq(v, size_cases[_i].bytes);
	else
		ck_assert_ptr_nonnull(why);
}
END_TEST

static const struct {
	const char *in;
	int ok;
	long long ms;
} time_cases[] = {
	{"30s", 1, 30000}, {"30", 1, 30000}, {"5d", 1, 432000000}, {"250ms", 1, 250},
	{"10m", 1, 600000}, {"1h", 1, 3600000}, {"2w", 1, 1209600000}, {"0", 1, 0},
	{"", 0, 0}, {"s", 0, 0}, {"5x", 0, 0}, {"5 days", 0, 0}, {"-5s", 0, 0},
	{"9999999999999999w", 0, 0}, {"1h30m", 0, 0},
};

START_TEST(test_duration)
{
	long long v = -1;
	const char *why = NULL;
	int rc = units_duration(time_cases[_i].in, &v, &why);

	ck_assert_msg((rc == 0) == time_cases[_i].ok, "units_duration(\"%s\") returned %d",
		      time_cases[_i].in, rc);
	if (time_cases[_i].ok)
		ck_assert_int_eq(v, time_cases[_i].ms);
	else
		ck_assert_ptr_nonnull(why);
}
END_TEST

START_TEST(test_uint)
{
	unsigned long long v;
	const char *why;

	ck_assert_int_eq(units_uint("50", 100, &v, &why), 0);
	ck_assert_uint_eq(v, 50);
	ck_assert_int_eq(units_uint("101", 100, &v, &why), -1);
	ck_assert_int_eq(units_uint("5s", 100, &v, &why), -1);
	ck_assert_int_eq(units_uint("", 100, &v, &why), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("units");
	TCase *tc = tcase_create("units");

	tcase_add_loop_test(tc, test_size, 0, N_ELEMENTS(size_cases));
	tcase_add_loop_test(tc, test_duration, 0, N_ELEMENTS(time_cases));
	tcase_add_test(tc, test_uint);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
