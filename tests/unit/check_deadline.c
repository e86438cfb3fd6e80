/*
 * check_deadline - a read deadline that a data rate extends (struct
 * rdeadline): without a rate it stays where the first wait put it; with
 * one, each rate octets received earn a second, a part of rate its share
 * in milliseconds; it never wraps past LLONG_MAX.
 */
#include "config.h"

#include <limits.h>

#include "deadline.h"
#include "unit.h"

START_TEST(test_rdeadline)
{
	struct rdeadline d = rdeadline_start("DATA content", 3000, 0);

	ck_assert_str_eq(d.what, "DATA content");
	ck_assert_int_eq(d.base, 0);		/* not waited yet */
	d.base = 10000;
	d.octets = 1000000;
	ck_assert_int_eq(rdeadline_at(&d), 10000);	/* no rate: the octets earn nothing */
	d = rdeadline_start("DATA content", 3000, 500);
	d.base = 10000;
	ck_assert_int_eq(rdeadline_at(&d), 10000);
	d.octets = 499;
	ck_assert_int_eq(rdeadline_at(&d), 10998);	/* 499/500 of a second */
	d.octets = 500;
	ck_assert_int_eq(rdeadline_at(&d), 11000);
	d.octets = 1250;
	ck_assert_int_eq(rdeadline_at(&d), 12500);
	d = rdeadline_start("a BDAT chunk", 3000, -5);	/* a negative rate: none */
	ck_assert_uint_eq(d.rate, 0);
	d = rdeadline_start("a BDAT chunk", 3000, 1);
	d.base = LLONG_MAX - 10;
	d.octets = 1000;			/* 1000 s more: past the end */
	ck_assert_int_eq(rdeadline_at(&d), LLONG_MAX);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("deadline");
	TCase *tc = tcase_create("deadline");

	tcase_add_test(tc, test_rdeadline);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
