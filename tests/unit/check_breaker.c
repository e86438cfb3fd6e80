/*
 * check_breaker - the circuit breaker and the token buckets under an
 * injected clock, as they behave today: consecutive failures open the
 * breaker, the cooldown doubles up to its maximum, a half-open breaker
 * lets one probe through; the error rate and the P99 latency count only
 * over breaker_window and from BREAKER_MIN_ATTEMPTS attempts on; the
 * buckets refill smoothly up to their burst.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "breaker.h"
#include "unit.h"

#define T0 1700000000000000ULL		/* any wall clock time, microseconds */
#define S 1000000ULL

/* peer - a peer's breaker settings (times in ms, as the configuration) */
static struct conf_peer peer(long long failures, long long cooldown, long long max_cooldown)
{
	struct conf_peer p;

	memset(&p, 0, sizeof(p));
	p.name = (char *)"smarthost";
	p.breaker_failures = failures;
	p.breaker_cooldown = cooldown;
	p.breaker_max_cooldown = max_cooldown;
	p.breaker_window = 60000;
	return p;
}

/* fresh - a breaker as peer_new makes it */
static void fresh(struct breaker *b, const struct conf_peer *p)
{
	memset(b, 0, sizeof(*b));
	b->cooldown_ms = p->breaker_cooldown;
}

/* One step of a breaker's life: at time at (seconds after T0), a
 * connection's result (RESULT_OK, RESULT_FAIL) or a question
 * (ALLOW); then the state, and for ALLOW the answer, expected. */
enum step_op { RESULT_OK, RESULT_FAIL, ALLOW };
static const struct step {
	enum step_op op;
	uint64_t at;
	enum breaker_state state;
	int allowed;			/* ALLOW's answer */
	uint64_t open_until;		/* seconds after T0, when open */
	long long cooldown_ms;		/* the next opening's */
} life[] = {
	{RESULT_FAIL, 0, BREAKER_CLOSED, 0, 0, 30000},
	{RESULT_FAIL, 1, BREAKER_CLOSED, 0, 0, 30000},
	{ALLOW, 1, BREAKER_CLOSED, 1, 0, 30000},
	{RESULT_FAIL, 2, BREAKER_OPEN, 0, 32, 60000},	/* the third in a row */
	{ALLOW, 31, BREAKER_OPEN, 0, 32, 60000},	/* cooling down */
	{ALLOW, 32, BREAKER_HALF_OPEN, 1, 32, 60000},	/* one probe */
	{ALLOW, 32, BREAKER_HALF_OPEN, 0, 32, 60000},	/* and only one */
	{RESULT_FAIL, 33, BREAKER_OPEN, 0, 93, 120000},	/* failed probe: twice as long */
	{ALLOW, 93, BREAKER_HALF_OPEN, 1, 93, 120000},
	{RESULT_FAIL, 94, BREAKER_OPEN, 0, 214, 150000},	/* doubled, up to the maximum */
	{ALLOW, 214, BREAKER_HALF_OPEN, 1, 214, 150000},
	{RESULT_FAIL, 215, BREAKER_OPEN, 0, 365, 150000},	/* stays at the maximum */
	{ALLOW, 365, BREAKER_HALF_OPEN, 1, 365, 150000},
	{RESULT_OK, 366, BREAKER_CLOSED, 0, 365, 30000},	/* closed: cooldown reset */
	{RESULT_FAIL, 367, BREAKER_CLOSED, 0, 365, 30000},	/* the count started again */
	{RESULT_OK, 368, BREAKER_CLOSED, 0, 365, 30000},
	{RESULT_FAIL, 369, BREAKER_CLOSED, 0, 365, 30000},
	{RESULT_FAIL, 370, BREAKER_CLOSED, 0, 365, 30000},
	{RESULT_FAIL, 371, BREAKER_OPEN, 0, 401, 60000},
};

START_TEST(test_consecutive)
{
	struct conf_peer p = peer(3, 30000, 150000);
	struct breaker b;

	fresh(&b, &p);
	for (size_t i = 0; i < N_ELEMENTS(life); i++) {
		const struct step *st = &life[i];
		uint64_t now = T0 + st->at * S;
		enum breaker_state was = b.state;

		b.changed = 0;
		if (st->op == ALLOW)
			ck_assert_int_eq(breaker_allow(&b, p.name, now), st->allowed);
		else
			breaker_result(&b, &p, NULL, st->op == RESULT_OK, "connection refused", now);
		ck_assert_msg(b.state == st->state, "step %zu: state %d, not %d", i, b.state, st->state);
		ck_assert_msg(b.cooldown_ms == st->cooldown_ms, "step %zu: cooldown %lld", i, b.cooldown_ms);
		if (st->state != BREAKER_CLOSED)
			ck_assert_uint_eq(b.open_until, T0 + st->open_until * S);
		/* the gauge is published at every setting of the state */
		if (b.state != was || st->op == RESULT_OK)
			ck_assert_int_eq(b.changed, 1);
	}
}
END_TEST

/* attempts - n transaction outcomes at now, each ms long */
static void attempts(struct breaker *b, const struct conf_peer *p, size_t n, int failed, uint32_t ms,
		     uint64_t now)
{
	for (size_t i = 0; i < n; i++)
		breaker_attempt(b, p, NULL, failed, ms, now);
}

/* The error rate: ok then failed attempts in the window, and the state
 * after them (breaker_error_rate 0.5: more than half must fail). */
static const struct {
	size_t ok, failed;
	enum breaker_state state;
} rates[] = {
	{0, 19, BREAKER_CLOSED},	/* fewer than BREAKER_MIN_ATTEMPTS: not counted */
	{0, 20, BREAKER_OPEN},
	{10, 10, BREAKER_CLOSED},	/* half is not more than half */
	{9, 11, BREAKER_OPEN},
	{100, 99, BREAKER_CLOSED},
	{100, 101, BREAKER_OPEN},
};

START_TEST(test_error_rate)
{
	struct conf_peer p = peer(1000, 30000, 600000);
	struct breaker b;

	p.breaker_error_rate = 0.5;
	fresh(&b, &p);
	attempts(&b, &p, rates[_i].ok, 0, 100, T0);
	attempts(&b, &p, rates[_i].failed, 1, 100, T0 + S);
	ck_assert_int_eq(b.state, rates[_i].state);
	if (b.state == BREAKER_OPEN) {
		ck_assert_uint_eq(b.open_until, T0 + S + 30 * S);
		ck_assert_uint_eq(b.ring_len, 0);	/* a fresh window after the cooldown */
	}
}
END_TEST

/* test_rate_ring - only the newest BREAKER_RING attempts are kept */
START_TEST(test_rate_ring)
{
	struct conf_peer p = peer(1000, 30000, 600000);
	struct breaker b;

	p.breaker_error_rate = 0.5;
	fresh(&b, &p);
	attempts(&b, &p, 300, 0, 100, T0);
	ck_assert_uint_eq(b.ring_len, BREAKER_RING);
	attempts(&b, &p, BREAKER_RING / 2, 1, 100, T0);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);	/* 128 of 256: not more than half */
	attempts(&b, &p, 1, 1, 100, T0);
	ck_assert_int_eq(b.state, BREAKER_OPEN);	/* 129 of 256 */
}
END_TEST

/* test_window - attempts older than breaker_window do not count */
START_TEST(test_window)
{
	struct conf_peer p = peer(1000, 30000, 600000);
	struct breaker b;

	p.breaker_error_rate = 0.5;
	fresh(&b, &p);
	attempts(&b, &p, 19, 1, 100, T0);
	attempts(&b, &p, 1, 1, 100, T0 + 61 * S);	/* the 19 fell out of the window */
	ck_assert_int_eq(b.state, BREAKER_CLOSED);
	attempts(&b, &p, 18, 1, 100, T0 + 62 * S);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);	/* 19 in the window */
	attempts(&b, &p, 1, 1, 100, T0 + 62 * S);
	ck_assert_int_eq(b.state, BREAKER_OPEN);	/* 20 */
	/* an open or half-open breaker keeps samples but does not judge them */
	b.state = BREAKER_HALF_OPEN;
	attempts(&b, &p, 50, 1, 100, T0 + 63 * S);
	ck_assert_int_eq(b.state, BREAKER_HALF_OPEN);
}
END_TEST

/* test_latency - the P99 transaction time over breaker_window: with
 * fewer than 100 samples it is the slowest; a sample without a
 * transaction (UINT32_MAX) counts as an attempt, not as a time */
START_TEST(test_latency)
{
	struct conf_peer p = peer(1000, 30000, 600000);
	struct breaker b;

	p.breaker_latency = 1000;
	fresh(&b, &p);
	attempts(&b, &p, 19, 0, 100, T0);
	attempts(&b, &p, 1, 0, 1000, T0);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);	/* 1000 is not over 1000 */
	attempts(&b, &p, 1, 0, 1001, T0);
	ck_assert_int_eq(b.state, BREAKER_OPEN);

	fresh(&b, &p);
	attempts(&b, &p, 99, 0, 100, T0);
	attempts(&b, &p, 1, 0, 5000, T0);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);	/* 100 samples: P99 is the second slowest */
	attempts(&b, &p, 1, 0, 5000, T0);
	ck_assert_int_eq(b.state, BREAKER_OPEN);

	fresh(&b, &p);
	attempts(&b, &p, 19, 0, 100, T0);
	attempts(&b, &p, 30, 0, UINT32_MAX, T0);	/* no transaction: no time */
	ck_assert_int_eq(b.state, BREAKER_CLOSED);
	attempts(&b, &p, 1, 0, 2000, T0);
	ck_assert_int_eq(b.state, BREAKER_OPEN);	/* 20 times, the slowest over */
}
END_TEST

/* test_failures_sample - a connection failure short of breaker_failures
 * is also a failed attempt for the error rate */
START_TEST(test_failures_sample)
{
	struct conf_peer p = peer(1000, 30000, 600000);
	struct breaker b;

	p.breaker_error_rate = 0.5;
	fresh(&b, &p);
	for (int i = 0; i < 19; i++)
		breaker_result(&b, &p, NULL, 0, "timeout", T0);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);
	ck_assert_int_eq(b.failures, 19);
	breaker_result(&b, &p, "backup", 0, "timeout", T0);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
}
END_TEST

/* Token buckets: one token per interval, at most burst. */
static const struct {
	uint64_t at_ms;			/* after T0 */
	uint64_t wait_us;		/* bucket_take's answer */
} takes[] = {
	{0, 0}, {0, 0}, {0, 0},		/* the burst */
	{0, 1000001},			/* then one per second */
	{500, 500001},
	{1000, 0},
	{1000, 1000001},
	{100000, 0}, {100000, 0}, {100000, 0},	/* a long idle spell refills only the burst */
	{100000, 1000001},
};

START_TEST(test_bucket)
{
	struct bucket b = {0};

	for (size_t i = 0; i < N_ELEMENTS(takes); i++)
		ck_assert_msg(bucket_take(&b, 1000000, 3.0, T0 + takes[i].at_ms * 1000) == takes[i].wait_us,
			      "take %zu", i);
}
END_TEST

START_TEST(test_bucket_limits)
{
	struct bucket b = {0};
	struct conf_peer p;

	for (int i = 0; i < 1000; i++)
		ck_assert_uint_eq(bucket_take(&b, 0, 1.0, T0), 0);	/* no limit */
	/* max_connection_rate: a bucket of one */
	memset(&b, 0, sizeof(b));
	ck_assert_uint_eq(bucket_take(&b, 200000, 1.0, T0), 0);
	ck_assert_uint_eq(bucket_take(&b, 200000, 1.0, T0 + 100000), 100001);
	ck_assert_uint_eq(bucket_take(&b, 200000, 1.0, T0 + 200000), 0);
	memset(&p, 0, sizeof(p));
	ck_assert(rate_burst(&p) == 1.0);	/* rate_burst 0: one */
	p.rate_burst = 5;
	ck_assert(rate_burst(&p) == 5.0);
}
END_TEST

/* test_reset - ternq peers reset closes an open breaker at once: allowed
 * again, no failures counted, the first cooldown, a fresh window; the
 * next failures open it only after breaker_failures of them */
START_TEST(test_reset)
{
	struct conf_peer p = peer(2, 30000, 150000);
	struct breaker b;

	fresh(&b, &p);
	breaker_result(&b, &p, NULL, 0, "connection refused", T0);
	breaker_result(&b, &p, NULL, 0, "connection refused", T0 + S);
	breaker_attempt(&b, &p, NULL, 1, UINT32_MAX, T0 + S);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
	ck_assert_int_eq(b.cooldown_ms, 60000);
	ck_assert_int_eq(breaker_allow(&b, p.name, T0 + 2 * S), 0);
	b.changed = 0;
	breaker_reset(&b, &p, T0 + 2 * S);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);
	ck_assert_int_eq(b.changed, 1);
	ck_assert_int_eq(b.failures, 0);
	ck_assert_uint_eq(b.open_until, 0);
	ck_assert_int_eq(b.cooldown_ms, 30000);
	ck_assert_uint_eq(b.ring_len, 0);
	ck_assert_int_eq(breaker_allow(&b, p.name, T0 + 2 * S), 1);
	breaker_result(&b, &p, NULL, 0, "connection refused", T0 + 3 * S);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);
	breaker_result(&b, &p, NULL, 0, "connection refused", T0 + 4 * S);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
	ck_assert_uint_eq(b.open_until, T0 + 34 * S);	/* the first cooldown again */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("breaker");
	TCase *tc = tcase_create("breaker");

	tcase_add_test(tc, test_consecutive);
	tcase_add_loop_test(tc, test_error_rate, 0, N_ELEMENTS(rates));
	tcase_add_test(tc, test_rate_ring);
	tcase_add_test(tc, test_window);
	tcase_add_test(tc, test_latency);
	tcase_add_test(tc, test_failures_sample);
	tcase_add_test(tc, test_bucket);
	tcase_add_test(tc, test_bucket_limits);
	tcase_add_test(tc, test_reset);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
