/*
 * check_backoff - the retry delay of a deferred recipient as it is today:
 * min_backoff doubled per attempt up to max_backoff, times a jitter of
 * 0.80 to 1.20 in steps of 0.01; and never past max_queue_lifetime, where
 * the recipient expires.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <sodium.h>

#include "backoff.h"
#include "unit.h"

#define T0 1700000000000000ULL
#define MS 1000ULL

static const struct {
	uint32_t attempts;
	long long base_ms;		/* before jitter */
} delays[] = {
	{0, 60000}, {1, 60000}, {2, 120000}, {3, 240000}, {4, 480000}, {5, 960000},
	{6, 1920000}, {7, 3600000},	/* 3840000 capped at max_backoff */
	{8, 3600000}, {100, 3600000}, {UINT32_MAX, 3600000},
};

/* conf - min_backoff 60s, max_backoff 1h, max_queue_lifetime 5d */
static void conf_init(struct conf *c)
{
	memset(c, 0, sizeof(*c));
	c->ternd.min_backoff = 60000;
	c->ternd.max_backoff = 3600000;
	c->ternd.max_queue_lifetime = 5LL * 86400 * 1000;
}

START_TEST(test_jitter)
{
	struct conf c;
	uint64_t lo = UINT64_MAX, hi = 0;
	long long base = delays[_i].base_ms;

	conf_init(&c);
	for (int k = 0; k < 4000; k++) {
		uint64_t us = backoff_us(&c, delays[_i].attempts);

		ck_assert_uint_eq(us % MS, 0);	/* whole milliseconds */
		lo = us < lo ? us : lo;
		hi = us > hi ? us : hi;
	}
	/* both ends are reached: 41 values, 4000 draws */
	ck_assert_uint_eq(lo, (uint64_t)(base * 80 / 100) * MS);
	ck_assert_uint_eq(hi, (uint64_t)(base * 120 / 100) * MS);
}
END_TEST

/* The lifetime cap: a message that arrived at T0, deferred at now after
 * its first attempt (a delay of 48 to 72 s). */
static const struct {
	uint64_t now_s;			/* after T0 */
	int expired;
	int capped;			/* next is the end of the lifetime */
} lifetime[] = {
	{1, 0, 0},
	{5 * 86400 - 73, 0, 0},		/* 72 s at most: still within */
	{5 * 86400 - 47, 0, 1},		/* 48 s at least: past it, so the end of it */
	{5 * 86400 - 1, 0, 1},
	{5 * 86400, 1, 0},		/* the lifetime is over: it expires */
	{6 * 86400, 1, 0},
};

START_TEST(test_lifetime)
{
	struct conf c;
	uint64_t now = T0 + lifetime[_i].now_s * 1000000, expire = T0 + 5ULL * 86400 * 1000000;

	conf_init(&c);
	for (int k = 0; k < 200; k++) {
		uint64_t next = 0;

		ck_assert_int_eq(backoff_next(&c, 1, T0, now, &next), lifetime[_i].expired);
		if (lifetime[_i].capped)
			ck_assert_uint_eq(next, expire);
		else
			ck_assert(next >= now + 48000 * MS && next <= now + 72000 * MS);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("backoff");
	TCase *tc = tcase_create("backoff");

	if (sodium_init() < 0)
		return 1;
	tcase_add_loop_test(tc, test_jitter, 0, N_ELEMENTS(delays));
	tcase_add_loop_test(tc, test_lifetime, 0, N_ELEMENTS(lifetime));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
