/*
 * check_window - the bookkeeping of the transactions in flight on one
 * connection: slots come back oldest first, in the order written, around
 * the ring; no more than max_pipeline_depth transactions nor (but for one
 * alone) max_pipeline_bytes of content are in flight; the depth is cut to
 * 1..WINDOW_MAX. The congestion window: it starts at one, doubles per
 * round trip up to ssthresh, then grows by one per window answered in
 * full, never past the depth; a loss with transactions in flight cuts it
 * to one and ssthresh to half of them (at least 2); a reload's depth cuts
 * it or lets it grow.
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

/* cc_acks - n final replies read while the window held the connection
 * up, with no round trip sample */
static void cc_acks(struct window_cc *cc, int n)
{
	while (n-- > 0)
		window_cc_ack(cc, 0, 1);
}

/* cc_samples - n final replies read while the window held the
 * connection up, each rtt_us after its commands */
static void cc_samples(struct window_cc *cc, int n, uint64_t rtt_us)
{
	while (n-- > 0)
		window_cc_ack(cc, rtt_us, 1);
}

START_TEST(test_cc)
{
	struct window_cc cc;

	window_cc_init(&cc, 32);
	ck_assert_uint_eq(cc.cwnd, 1);		/* starts small */
	ck_assert_uint_eq(cc.ssthresh, 32);
	/* slow start: a window answered in full doubles it */
	cc_acks(&cc, 1);
	ck_assert_uint_eq(cc.cwnd, 2);
	cc_acks(&cc, 2);
	ck_assert_uint_eq(cc.cwnd, 4);
	cc_acks(&cc, 4 + 8 + 16);
	ck_assert_uint_eq(cc.cwnd, 32);
	cc_acks(&cc, 1000);
	ck_assert_uint_eq(cc.cwnd, 32);		/* never past the depth */
	/* a loss with 20 in flight: back to 1, ssthresh 10 */
	window_cc_loss(&cc, 20);
	ck_assert_uint_eq(cc.cwnd, 1);
	ck_assert_uint_eq(cc.ssthresh, 10);
	cc_acks(&cc, 9);
	ck_assert_uint_eq(cc.cwnd, 10);		/* slow start up to ssthresh */
	cc_acks(&cc, 9);
	ck_assert_uint_eq(cc.cwnd, 10);		/* then one per window in full */
	cc_acks(&cc, 1);
	ck_assert_uint_eq(cc.cwnd, 11);
	cc_acks(&cc, 10);
	ck_assert_uint_eq(cc.cwnd, 11);
	cc_acks(&cc, 1);
	ck_assert_uint_eq(cc.cwnd, 12);
	/* a loss with nothing in flight changes nothing */
	window_cc_loss(&cc, 0);
	ck_assert_uint_eq(cc.cwnd, 12);
	/* repeated losses: ssthresh at least 2 */
	window_cc_loss(&cc, 1);
	ck_assert_uint_eq(cc.cwnd, 1);
	ck_assert_uint_eq(cc.ssthresh, 2);
	cc_acks(&cc, 1);
	ck_assert_uint_eq(cc.cwnd, 2);
	cc_acks(&cc, 1);
	ck_assert_uint_eq(cc.cwnd, 2);		/* additive from 2 */
	cc_acks(&cc, 1);
	ck_assert_uint_eq(cc.cwnd, 3);
	/* more in flight than the depth (a reload cut it): ssthresh at most the depth */
	window_cc_init(&cc, 4);
	window_cc_loss(&cc, 100);
	ck_assert_uint_eq(cc.ssthresh, 4);
	/* depth 1: one at a time, whatever happens */
	window_cc_init(&cc, 1);
	cc_acks(&cc, 10);
	ck_assert_uint_eq(cc.cwnd, 1);
	window_cc_init(&cc, 0);
	ck_assert_uint_eq(cc.max, 1);
	window_cc_init(&cc, 100000);
	ck_assert_uint_eq(cc.max, WINDOW_MAX);
}
END_TEST

START_TEST(test_cc_depth)
{
	struct window_cc cc;

	window_cc_init(&cc, 32);
	cc_acks(&cc, 31);
	ck_assert_uint_eq(cc.cwnd, 32);
	window_cc_depth(&cc, 8);		/* a reload cuts the depth */
	ck_assert_uint_eq(cc.cwnd, 8);
	ck_assert_uint_eq(cc.ssthresh, 8);
	window_cc_depth(&cc, 64);		/* and raises it: slow start on to it */
	ck_assert_uint_eq(cc.cwnd, 8);
	ck_assert_uint_eq(cc.ssthresh, 64);
	cc_acks(&cc, 56);
	ck_assert_uint_eq(cc.cwnd, 64);
	/* after a loss, a larger depth keeps the lower ssthresh */
	window_cc_loss(&cc, 10);
	window_cc_depth(&cc, 128);
	ck_assert_uint_eq(cc.ssthresh, 5);
	ck_assert_uint_eq(cc.max, 128);
	window_cc_depth(&cc, 128);		/* the same: nothing changes */
	ck_assert_uint_eq(cc.cwnd, 1);
}
END_TEST

START_TEST(test_cc_queue)
{
	struct window_cc cc;

	/* replies as fast as the base: nothing queued, slow start */
	window_cc_init(&cc, 32);
	cc_samples(&cc, 1, 20000);
	ck_assert_uint_eq(cc.base_us, 20000);
	ck_assert_uint_eq(cc.cwnd, 2);
	cc_samples(&cc, 6, 20200);		/* 1% over the base: still nothing queued */
	ck_assert_uint_eq(cc.cwnd, 8);
	/* a window that was not used does not grow (RFC 7661) */
	window_cc_ack(&cc, 20000, 0);
	ck_assert_uint_eq(cc.cwnd, 8);
	/* 8 x (25 - 20) / 25 = 1.6 queued: held, neither grown nor cut */
	cc_samples(&cc, 20, 25000);
	ck_assert_uint_eq(cc.cwnd, 8);
	/* 8 x (100 - 20) / 100 = 6.4 queued: one less per window answered */
	cc_samples(&cc, 7, 100000);
	ck_assert_uint_eq(cc.cwnd, 8);
	cc_samples(&cc, 1, 100000);
	ck_assert_uint_eq(cc.cwnd, 7);
	ck_assert_uint_eq(cc.ssthresh, 7);	/* slow start is over */
	cc_samples(&cc, 7, 100000);
	ck_assert_uint_eq(cc.cwnd, 6);
	/* at the base again: additive growth, one per window */
	cc_samples(&cc, 5, 20000);
	ck_assert_uint_eq(cc.cwnd, 6);
	cc_samples(&cc, 1, 20000);
	ck_assert_uint_eq(cc.cwnd, 7);
	/* a smaller sample is the new base */
	cc_samples(&cc, 1, 5000);
	ck_assert_uint_eq(cc.base_us, 5000);
	/* loopback: the base is tiny and every reply waits behind others,
	 * so the window stays at one or two */
	window_cc_init(&cc, 32);
	cc_samples(&cc, 1, 50);
	ck_assert_uint_eq(cc.cwnd, 2);
	cc_samples(&cc, 100, 400);		/* 2 x 350 / 400 = 1.75 queued */
	ck_assert_uint_eq(cc.cwnd, 2);
	/* one transaction alone is never "queued": from one it grows to two,
	 * where a slow peer holds it */
	window_cc_init(&cc, 32);
	cc_samples(&cc, 1, 50);
	cc_samples(&cc, 100, 100000);		/* 2 x ~1: 2 queued, held */
	ck_assert_uint_eq(cc.cwnd, 2);
	window_cc_loss(&cc, 1);
	ck_assert_uint_eq(cc.cwnd, 1);
	cc_samples(&cc, 100, 100000);
	ck_assert_uint_eq(cc.cwnd, 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("window");
	TCase *tc = tcase_create("window");

	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_bytes);
	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_cc);
	tcase_add_test(tc, test_cc_depth);
	tcase_add_test(tc, test_cc_queue);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
