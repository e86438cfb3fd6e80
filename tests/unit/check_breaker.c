/*
 * check_breaker - the circuit breaker and the token buckets under an
 * injected clock: consecutive failures open the breaker; results of
 * attempts let through before it opened neither close it nor open it
 * again, so concurrent failures give one cooldown; a half-open breaker
 * lets exactly one probe through, judged by its connection and its
 * transaction; the cooldown doubles per failed probe up to its maximum;
 * the error rate and the P99 latency count only over breaker_window and
 * from BREAKER_MIN_ATTEMPTS attempts on, transactions still running past
 * breaker_latency as slow ones; the buckets refill smoothly up to their
 * burst.
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

/* One step of a breaker's life: at time at (seconds after T0), with
 * pass number k: ALLOW asks for it; CONN_OK and CONN_FAIL give its
 * connection's result, TX_OK and TX_FAIL its transaction's; CANCEL ends
 * it with nothing tried; DUE asks what the scheduler may offer. Then the
 * state, the answer (ALLOW's, or DUE's offer), the end of the opening
 * and its cooldown expected. */
enum step_op { ALLOW, CONN_OK, CONN_FAIL, TX_OK, TX_FAIL, CANCEL, DUE };
static const struct step {
	enum step_op op;
	int k;
	uint64_t at;
	enum breaker_state state;
	int answer;
	uint64_t open_until;		/* seconds after T0, when not closed */
	long long cooldown_ms;
} life[] = {
	{ALLOW, 0, 0, BREAKER_CLOSED, 1, 0, 30000},
	{ALLOW, 1, 0, BREAKER_CLOSED, 1, 0, 30000},
	{ALLOW, 2, 0, BREAKER_CLOSED, 1, 0, 30000},
	{ALLOW, 3, 0, BREAKER_CLOSED, 1, 0, 30000},
	{DUE, 0, 0, BREAKER_CLOSED, BREAKER_GO, 0, 30000},
	{CONN_FAIL, 0, 1, BREAKER_CLOSED, 0, 0, 30000},
	{CONN_FAIL, 1, 1, BREAKER_CLOSED, 0, 0, 30000},
	{CONN_FAIL, 2, 2, BREAKER_OPEN, 0, 32, 30000},	/* the third in a row */
	{CONN_OK, 3, 3, BREAKER_OPEN, 0, 32, 30000},	/* let through before: no close */
	{TX_OK, 3, 3, BREAKER_OPEN, 0, 32, 30000},	/* nor by its transaction */
	{DUE, 0, 31, BREAKER_OPEN, BREAKER_HOLD, 32, 30000},	/* cooling down: held */
	{ALLOW, 4, 31, BREAKER_OPEN, 0, 32, 30000},
	{DUE, 0, 32, BREAKER_OPEN, BREAKER_PROBE, 32, 30000},	/* one job, for the probe */
	{ALLOW, 4, 32, BREAKER_HALF_OPEN, 1, 32, 30000},	/* the probe */
	{ALLOW, 5, 32, BREAKER_HALF_OPEN, 0, 32, 30000},	/* and only one */
	{DUE, 0, 32, BREAKER_HALF_OPEN, BREAKER_HOLD, 32, 30000},
	{CONN_FAIL, 4, 33, BREAKER_OPEN, 0, 93, 60000},	/* failed probe: twice as long */
	{CONN_FAIL, 4, 33, BREAKER_OPEN, 0, 93, 60000},	/* one verdict per pass */
	{ALLOW, 4, 93, BREAKER_HALF_OPEN, 1, 93, 60000},
	{CANCEL, 4, 93, BREAKER_HALF_OPEN, 0, 93, 60000},	/* nothing tried: no verdict */
	{DUE, 0, 93, BREAKER_HALF_OPEN, BREAKER_PROBE, 93, 60000},
	{ALLOW, 4, 93, BREAKER_HALF_OPEN, 1, 93, 60000},	/* another probe */
	{CONN_OK, 4, 94, BREAKER_HALF_OPEN, 0, 93, 60000},	/* it waits for its transaction */
	{TX_FAIL, 4, 94, BREAKER_OPEN, 0, 214, 120000},	/* 421 after DATA: a failed probe */
	{ALLOW, 4, 214, BREAKER_HALF_OPEN, 1, 214, 120000},
	{TX_FAIL, 4, 215, BREAKER_OPEN, 0, 365, 150000},	/* doubled, up to the maximum */
	{ALLOW, 4, 365, BREAKER_HALF_OPEN, 1, 365, 150000},
	{CONN_FAIL, 4, 366, BREAKER_OPEN, 0, 516, 150000},	/* stays at the maximum */
	{ALLOW, 4, 516, BREAKER_HALF_OPEN, 1, 516, 150000},
	{CONN_OK, 4, 517, BREAKER_HALF_OPEN, 0, 516, 150000},
	{TX_OK, 4, 517, BREAKER_CLOSED, 0, 0, 30000},	/* closed: cooldown reset */
	{DUE, 0, 517, BREAKER_CLOSED, BREAKER_GO, 0, 30000},
	{CONN_FAIL, 3, 518, BREAKER_CLOSED, 0, 0, 30000},	/* from before: not counted */
	{ALLOW, 0, 518, BREAKER_CLOSED, 1, 0, 30000},
	{CONN_FAIL, 0, 518, BREAKER_CLOSED, 0, 0, 30000},
	{ALLOW, 1, 519, BREAKER_CLOSED, 1, 0, 30000},
	{CONN_OK, 1, 519, BREAKER_CLOSED, 0, 0, 30000},	/* the count starts again */
	{ALLOW, 0, 520, BREAKER_CLOSED, 1, 0, 30000},
	{ALLOW, 1, 520, BREAKER_CLOSED, 1, 0, 30000},
	{ALLOW, 2, 520, BREAKER_CLOSED, 1, 0, 30000},
	{CONN_FAIL, 0, 520, BREAKER_CLOSED, 0, 0, 30000},
	{CONN_FAIL, 1, 520, BREAKER_CLOSED, 0, 0, 30000},
	{CONN_FAIL, 2, 520, BREAKER_OPEN, 0, 550, 30000},	/* from the minimum again */
};

START_TEST(test_life)
{
	struct conf_peer p = peer(3, 30000, 150000);
	struct breaker_pass pass[6];
	struct breaker b;
	unsigned changes = 0;

	fresh(&b, &p);
	for (size_t i = 0; i < N_ELEMENTS(life); i++) {
		const struct step *st = &life[i];
		uint64_t now = T0 + st->at * S;
		struct breaker_pass *ps = &pass[st->k];
		enum breaker_state was = b.state;
		int answer = 0;

		b.changed = 0;
		switch (st->op) {
		case ALLOW:
			answer = breaker_allow(&b, &p, now, ps);
			break;
		case CONN_OK:
		case CONN_FAIL:
			breaker_result(&b, &p, NULL, ps, st->op == CONN_OK, "connection refused", now);
			break;
		case TX_OK:
		case TX_FAIL:
			breaker_attempt(&b, &p, NULL, ps, st->op == TX_FAIL, 100, now);
			break;
		case CANCEL:
			breaker_cancel(&b, ps);
			break;
		case DUE:
			answer = (int)breaker_due(&b, &p, NULL, now);
			break;
		}
		ck_assert_msg(b.state == st->state, "step %zu: state %d, not %d", i, b.state, st->state);
		ck_assert_msg(answer == st->answer, "step %zu: answer %d, not %d", i, answer, st->answer);
		ck_assert_msg(b.cooldown_ms == st->cooldown_ms, "step %zu: cooldown %lld", i, b.cooldown_ms);
		if (st->state != BREAKER_CLOSED)
			ck_assert_uint_eq(b.open_until, T0 + st->open_until * S);
		/* the gauge is published at each change of state, and only then */
		ck_assert_msg(b.changed == (b.state != was), "step %zu: changed %d", i, b.changed);
		changes += b.state != was;
	}
	ck_assert_uint_eq(b.epoch, changes);	/* one epoch per change */
}
END_TEST

/* test_concurrent - 16 connections tried together all fail: the breaker
 * opens once, with one cooldown; the stragglers change nothing */
START_TEST(test_concurrent)
{
	struct conf_peer p = peer(5, 10000, 600000);
	struct breaker_pass pass[16];
	struct breaker b;

	fresh(&b, &p);
	for (int i = 0; i < 16; i++)
		ck_assert_int_eq(breaker_allow(&b, &p, T0, &pass[i]), 1);
	for (int i = 0; i < 16; i++)
		breaker_result(&b, &p, NULL, &pass[i], 0, "timeout", T0 + S + (uint64_t)i);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
	ck_assert_uint_eq(b.epoch, 1);
	ck_assert_int_eq(b.cooldown_ms, 10000);
	ck_assert_uint_eq(b.open_until, T0 + S + 4 + 10 * S);	/* from the fifth */
	/* the probe fails: the cooldown doubles once */
	ck_assert_int_eq(breaker_allow(&b, &p, T0 + 12 * S, &pass[0]), 1);
	breaker_result(&b, &p, NULL, &pass[0], 0, "timeout", T0 + 13 * S);
	ck_assert_int_eq(b.cooldown_ms, 20000);
	ck_assert_uint_eq(b.epoch, 3);
}
END_TEST

/* attempts - n transaction outcomes at now, each ms long, each with a
 * pass of its own (none once the breaker refuses) */
static void attempts(struct breaker *b, const struct conf_peer *p, size_t n, int failed, uint32_t ms,
		     uint64_t now)
{
	for (size_t i = 0; i < n; i++) {
		struct breaker_pass pass;

		if (breaker_allow(b, p, now, &pass))
			breaker_attempt(b, p, NULL, &pass, failed, ms, now);
	}
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
	ck_assert_uint_eq(b.ring_len, 0);
	/* an open breaker lets nothing through, so keeps nothing */
	attempts(&b, &p, 50, 1, 100, T0 + 63 * S);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
	ck_assert_uint_eq(b.ring_len, 0);
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
	struct breaker_pass pass;
	struct breaker b;

	p.breaker_error_rate = 0.5;
	fresh(&b, &p);
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(b.state, BREAKER_CLOSED);
		ck_assert_int_eq(b.failures, i);
		ck_assert_int_eq(breaker_allow(&b, &p, T0, &pass), 1);
		breaker_result(&b, &p, "backup", &pass, 0, "timeout", T0);
	}
	ck_assert_int_eq(b.state, BREAKER_OPEN);	/* 20 of 20 failed */
}
END_TEST

/* test_running - transactions still running past breaker_latency count
 * as slow: with fewer than BREAKER_MIN_ATTEMPTS in the window, one
 * running over it opens the breaker when none in the window was faster;
 * with more, at its time so far in the P99. Their slots are freed by
 * their verdict; those begun before the breaker's latest change of state
 * do not count. */
START_TEST(test_running)
{
	struct conf_peer p = peer(1000, 30000, 600000);
	struct breaker_pass pass[32];
	struct breaker b;

	p.breaker_latency = 1000;
	fresh(&b, &p);
	for (int i = 0; i < 4; i++) {	/* four connections, minutes each */
		ck_assert_int_eq(breaker_allow(&b, &p, T0, &pass[i]), 1);
		breaker_begin(&b, &pass[i], T0);
		ck_assert_int_eq(pass[i].slot, i);
	}
	ck_assert_int_eq(breaker_due(&b, &p, NULL, T0 + 1000 * 1000), BREAKER_GO);	/* 1000 is not over */
	ck_assert_int_eq(breaker_due(&b, &p, NULL, T0 + 1001 * 1000), BREAKER_HOLD);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
	for (int i = 0; i < 4; i++)	/* they end, late: stale, but their slots are freed */
		breaker_attempt(&b, &p, NULL, &pass[i], 0, 200000, T0 + 200 * S);
	for (int i = 0; i < BREAKER_INFLIGHT; i++)
		ck_assert_uint_eq(b.inflight[i].start, 0);
	ck_assert_int_eq(b.state, BREAKER_OPEN);

	/* one fast transaction in the window: one running slow is not enough */
	fresh(&b, &p);
	attempts(&b, &p, 1, 0, 100, T0);
	ck_assert_int_eq(breaker_allow(&b, &p, T0, &pass[0]), 1);
	breaker_begin(&b, &pass[0], T0);
	ck_assert_int_eq(breaker_due(&b, &p, NULL, T0 + 5 * S), BREAKER_GO);
	/* 19 fast and one running slow: 20, and the P99 is the running one */
	attempts(&b, &p, 18, 0, 100, T0);
	ck_assert_int_eq(breaker_due(&b, &p, NULL, T0 + 5 * S), BREAKER_HOLD);

	/* begun before an opening: not counted once the probe closed it */
	fresh(&b, &p);
	p.breaker_failures = 1;
	ck_assert_int_eq(breaker_allow(&b, &p, T0, &pass[0]), 1);
	breaker_begin(&b, &pass[0], T0);	/* it hangs */
	ck_assert_int_eq(breaker_allow(&b, &p, T0, &pass[1]), 1);
	breaker_result(&b, &p, NULL, &pass[1], 0, "refused", T0);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
	ck_assert_int_eq(breaker_allow(&b, &p, T0 + 30 * S, &pass[1]), 1);
	breaker_attempt(&b, &p, NULL, &pass[1], 0, 100, T0 + 30 * S);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);
	ck_assert_int_eq(breaker_due(&b, &p, NULL, T0 + 60 * S), BREAKER_GO);

	/* no room to keep more: not kept, nothing breaks */
	fresh(&b, &p);
	for (int i = 0; i < BREAKER_INFLIGHT; i++)
		b.inflight[i].start = T0;
	ck_assert_int_eq(breaker_allow(&b, &p, T0, &pass[0]), 1);
	breaker_begin(&b, &pass[0], T0);
	ck_assert_int_eq(pass[0].slot, -1);
	breaker_attempt(&b, &p, NULL, &pass[0], 0, 100, T0);
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
	struct breaker_pass pass[4];
	struct breaker b;
	unsigned epoch;

	fresh(&b, &p);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(breaker_allow(&b, &p, T0, &pass[i]), 1);
	breaker_result(&b, &p, NULL, &pass[0], 0, "connection refused", T0);
	breaker_result(&b, &p, NULL, &pass[1], 0, "connection refused", T0 + S);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
	ck_assert_int_eq(breaker_allow(&b, &p, T0 + 2 * S, &pass[2]), 0);
	b.changed = 0;
	epoch = b.epoch;
	breaker_reset(&b, &p, T0 + 2 * S);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);
	ck_assert_int_eq(b.changed, 1);
	ck_assert_uint_gt(b.epoch, epoch);	/* what was under way counts for nothing */
	ck_assert_int_eq(b.probing, 0);
	ck_assert_int_eq(b.failures, 0);
	ck_assert_uint_eq(b.open_until, 0);
	ck_assert_int_eq(b.cooldown_ms, 30000);
	ck_assert_uint_eq(b.ring_len, 0);
	/* closed: attempts go through, and two new failures open it again with
	 * the first cooldown */
	ck_assert_int_eq(breaker_allow(&b, &p, T0 + 2 * S, &pass[2]), 1);
	ck_assert_int_eq(breaker_allow(&b, &p, T0 + 2 * S, &pass[3]), 1);
	breaker_result(&b, &p, NULL, &pass[2], 0, "connection refused", T0 + 3 * S);
	ck_assert_int_eq(b.state, BREAKER_CLOSED);
	breaker_result(&b, &p, NULL, &pass[3], 0, "connection refused", T0 + 4 * S);
	ck_assert_int_eq(b.state, BREAKER_OPEN);
	ck_assert_uint_eq(b.open_until, T0 + 34 * S);	/* the first cooldown again */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("breaker");
	TCase *tc = tcase_create("breaker");

	tcase_add_test(tc, test_life);
	tcase_add_test(tc, test_concurrent);
	tcase_add_loop_test(tc, test_error_rate, 0, N_ELEMENTS(rates));
	tcase_add_test(tc, test_rate_ring);
	tcase_add_test(tc, test_window);
	tcase_add_test(tc, test_latency);
	tcase_add_test(tc, test_failures_sample);
	tcase_add_test(tc, test_running);
	tcase_add_test(tc, test_bucket);
	tcase_add_test(tc, test_bucket_limits);
	tcase_add_test(tc, test_reset);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
