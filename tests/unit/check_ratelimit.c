/*
 * check_ratelimit - one warning per cause and interval: the first call of
 * a cause passes, the calls within the interval are held and counted, the
 * first after it passes with that count; causes do not share a limit; a
 * full table gives the entry used longest ago to a new cause.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>

#include "ratelimit.h"
#include "unit.h"

#define MIN RATELIMIT_MINUTE
#define T0 1700000000000000ULL

START_TEST(test_interval)
{
	static struct ratelimit rl = RATELIMIT_INIT;
	uint64_t held = 99;

	ck_assert_int_eq(ratelimit_pass(&rl, "no_route", T0, MIN, &held), 1);
	ck_assert_uint_eq(held, 0);
	for (int i = 1; i <= 5; i++)
		ck_assert_int_eq(ratelimit_pass(&rl, "no_route", T0 + (uint64_t)i * 1000, MIN, &held), 0);
	ck_assert_int_eq(ratelimit_pass(&rl, "no_route", T0 + MIN - 1, MIN, &held), 0);
	ck_assert_int_eq(ratelimit_pass(&rl, "no_route", T0 + MIN, MIN, &held), 1);
	ck_assert_uint_eq(held, 6);
	ck_assert_int_eq(ratelimit_pass(&rl, "no_route", T0 + MIN + 1, MIN, &held), 0);
	/* another cause has its own limit */
	ck_assert_int_eq(ratelimit_pass(&rl, "no_host:relay", T0 + MIN + 1, MIN, &held), 1);
	ck_assert_uint_eq(held, 0);
	ck_assert_int_eq(ratelimit_pass(&rl, "no_host:relay", T0 + MIN + 2, MIN, &held), 0);
	/* the clock set back: passes rather than staying silent */
	ck_assert_int_eq(ratelimit_pass(&rl, "no_route", T0, MIN, &held), 1);
	ck_assert_uint_eq(held, 1);
}
END_TEST

START_TEST(test_full)
{
	static struct ratelimit rl = RATELIMIT_INIT;
	char key[32];
	uint64_t held;

	for (int i = 0; i < RATELIMIT_KEYS; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_int_eq(ratelimit_pass(&rl, key, T0 + (uint64_t)i, MIN, &held), 1);
	}
	/* a new cause takes k0's entry (used longest ago); the others stay held */
	ck_assert_int_eq(ratelimit_pass(&rl, "new", T0 + 100, MIN, &held), 1);
	ck_assert_int_eq(ratelimit_pass(&rl, "new", T0 + 101, MIN, &held), 0);
	ck_assert_int_eq(ratelimit_pass(&rl, "k1", T0 + 102, MIN, &held), 0);
	ck_assert_int_eq(ratelimit_pass(&rl, "k0", T0 + 103, MIN, &held), 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ratelimit");
	TCase *tc = tcase_create("ratelimit");

	tcase_add_test(tc, test_interval);
	tcase_add_test(tc, test_full);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
