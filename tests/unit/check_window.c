/*
 * check_window - the bookkeeping of the transactions in flight on one
 * connection: slots come back oldest first, in the order written, around
 * the ring; no more than max_pipeline_depth transactions nor (but for one
 * alone) max_pipeline_bytes of content are in flight; the depth is cut to
 * 1..WINDOW_MAX.
 */
#include "config.h"

#include <stdint.h>

#include "unit.h"
#include "window.h"

START_TEST(test_order)
{
	struct window w;
	size_t slots[4];

	window_init(&w, 4, 0);
	for (int round = 0; round < 3; round++) {	/* around the ring, more than once */
		for (size_t k = 0; k < 4; k++) {
			ck_assert_int_eq(window_room(&w, 10), 1);
			slots[k] = window_push(&w, 10);
		}
		ck_assert_int_eq(window_room(&w, 1), 0);	/* depth 4: full */
		ck_assert_uint_eq(w.count, 4);
		for (size_t k = 0; k < 4; k++)
			ck_assert_uint_eq(window_nth(&w, k), slots[k]);
		for (size_t k = 0; k < 4; k++) {
			ck_assert_uint_eq(window_oldest(&w), slots[k]);
			window_pop(&w);
			if (k == 1) {	/* room again: a new one goes behind the others */
				slots[0] = window_push(&w, 10);
				ck_assert_uint_eq(window_nth(&w, w.count - 1), slots[0]);
				ck_assert_uint_eq(window_oldest(&w), slots[2]);
				window_pop(&w);
				window_pop(&w);
				ck_assert_uint_eq(window_oldest(&w), slots[0]);
				window_pop(&w);
				break;
			}
		}
		ck_assert_uint_eq(w.count, 0);
		ck_assert_uint_eq(w.bytes, 0);
	}
	window_pop(&w);	/* empty: nothing happens */
	ck_assert_uint_eq(w.count, 0);
}
END_TEST

START_TEST(test_bytes)
{
	struct window w;

	window_init(&w, 16, 1000);
	ck_assert_int_eq(window_room(&w, 400), 1);
	window_push(&w, 400);
	ck_assert_int_eq(window_room(&w, 600), 1);	/* exactly the bound */
	ck_assert_int_eq(window_room(&w, 601), 0);
	window_push(&w, 600);
	ck_assert_uint_eq(w.bytes, 1000);
	ck_assert_int_eq(window_room(&w, 0), 1);	/* nothing more of content */
	ck_assert_int_eq(window_room(&w, 1), 0);
	window_pop(&w);
	ck_assert_uint_eq(w.bytes, 600);
	ck_assert_int_eq(window_room(&w, 400), 1);
	window_pop(&w);
	/* larger than the bound: only alone, and nothing goes behind it */
	ck_assert_int_eq(window_room(&w, 5000), 1);
	window_push(&w, 5000);
	ck_assert_int_eq(window_room(&w, 0), 0);
	ck_assert_int_eq(window_room(&w, 1), 0);
	window_pop(&w);
	ck_assert_int_eq(window_room(&w, 1), 1);
	/* no bound on bytes: only the depth */
	window_init(&w, 2, 0);
	window_push(&w, UINT64_MAX / 4);
	ck_assert_int_eq(window_room(&w, UINT64_MAX / 4), 1);
	window_push(&w, UINT64_MAX / 4);
	ck_assert_int_eq(window_room(&w, 1), 0);
}
END_TEST

START_TEST(test_depth)
{
	struct window w;

	window_init(&w, 0, 0);
	ck_assert_uint_eq(w.depth, 1);
	window_init(&w, -5, 0);
	ck_assert_uint_eq(w.depth, 1);
	window_push(&w, 1);
	ck_assert_int_eq(window_room(&w, 1), 0);	/* one at a time */
	window_init(&w, 100000, 0);
	ck_assert_uint_eq(w.depth, WINDOW_MAX);
	for (size_t k = 0; k < WINDOW_MAX; k++)
		ck_assert_uint_eq(window_push(&w, 1), k);
	ck_assert_int_eq(window_room(&w, 1), 0);
	ck_assert_uint_eq(w.bytes, WINDOW_MAX);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("window");
	TCase *tc = tcase_create("window");

	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_bytes);
	tcase_add_test(tc, test_depth);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
