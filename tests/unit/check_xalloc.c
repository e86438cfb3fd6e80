/* check_xalloc - the allocation helpers that succeed or exit */
#include "config.h"

#include <stdint.h>

#include "unit.h"
#include "xalloc.h"

START_TEST(test_growarray)
{
	unsigned *a = NULL;
	size_t cap = 0, grown = 0;

	for (unsigned i = 0; i < 100000; i++) {
		size_t before = cap;

		a = xgrowarray(a, &cap, i + 1, sizeof(*a));
		grown += cap != before;
		ck_assert_uint_ge(cap, i + 1);
		a[i] = i;
	}
	ck_assert_uint_eq(grown, 15);	/* 8, 16, ..., 131072: doubling */
	for (unsigned i = 0; i < 100000; i++)
		ck_assert_uint_eq(a[i], i);
	ck_assert_ptr_eq(xgrowarray(a, &cap, 10, sizeof(*a)), a);	/* room enough */
	ck_assert_uint_eq(cap, 131072);
	a = xgrowarray(a, &cap, 1000000, sizeof(*a));	/* a jump */
	ck_assert_uint_eq(cap, 1048576);
	free(a);
}
END_TEST

START_TEST(test_growarray_overflow)
{
	char (*a)[64] = NULL;
	size_t cap = 0;

	/* more elements than size_t can count octets of: exit 75, never a
	 * wrapped-around small block */
	a = xgrowarray(a, &cap, SIZE_MAX / 64 + 1, sizeof(*a));
	ck_abort_msg("xgrowarray returned %p", (void *)a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("xalloc");
	TCase *tc = tcase_create("xalloc");

	tcase_add_test(tc, test_growarray);
	tcase_add_exit_test(tc, test_growarray_overflow, 75);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
