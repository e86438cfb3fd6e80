/*
 * check_clock - waits with a deadline run on the monotonic clock: a
 * deadline is monotonic time, not wall time (so setting the wall clock
 * back cannot stretch a wait), and clock_cond_wait() ends at it on a
 * condition variable made with no attributes, as tern's are.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "clock.h"
#include "unit.h"

/* ns - a timespec in nanoseconds */
static long long ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

START_TEST(test_deadline_is_monotonic)
{
	struct timespec mono, wall, d;

	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &wall);
	clock_deadline(&d, 250);
	/* 250 ms past monotonic now (within a second of scheduling noise),
	 * and nowhere near the wall clock, which is decades ahead of it */
	ck_assert_int_ge(ns(&d) - ns(&mono), 250000000LL);
	ck_assert_int_lt(ns(&d) - ns(&mono), 1250000000LL);
	ck_assert_int_gt(ns(&wall) - ns(&d), 3600LL * 1000000000LL);
	ck_assert_int_lt(d.tv_nsec, 1000000000L);
}
END_TEST

START_TEST(test_cond_wait_ends_at_deadline)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	struct timespec d, before, after;
	long long waited;

	clock_gettime(CLOCK_MONOTONIC, &before);
	clock_deadline(&d, 100);
	pthread_mutex_lock(&m);
	while (clock_cond_wait(&c, &m, &d) != ETIMEDOUT)
		;	/* a spurious wake-up waits on */
	pthread_mutex_unlock(&m);
	clock_gettime(CLOCK_MONOTONIC, &after);
	waited = (ns(&after) - ns(&before)) / 1000000;
	ck_assert_int_ge(waited, 99);
	ck_assert_int_lt(waited, 3000);	/* below Check's own 4 s timeout */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("clock");
	TCase *tc = tcase_create("deadline");

	tcase_add_test(tc, test_deadline_is_monotonic);
	tcase_add_test(tc, test_cond_wait_ends_at_deadline);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
