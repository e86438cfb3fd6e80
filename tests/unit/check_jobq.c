/*
 * check_jobq - a peer's job queue as the scheduler and the delivery
 * threads use it: a message is queued once while it is busy, the queue
 * is first in first out and bounded, a job given back goes first, the
 * busy set forgets exactly what is done (also along probe chains), and
 * the recipients due for a peer are chosen by state, time and peer, in
 * order, at most max_rcpts_per_transaction.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "jobq.h"
#include "unit.h"

/* qid - a queue id of QID_LEN characters for n */
static void qid(unsigned n, char out[QID_LEN + 1])
{
	snprintf(out, QID_LEN + 1, "%0*u", QID_LEN, n);
}

START_TEST(test_offer_take)
{
	struct jobq q;
	char a[QID_LEN + 1], b[QID_LEN + 1], got[QID_LEN + 1];

	jobq_init(&q);
	qid(1, a);
	qid(2, b);
	ck_assert_int_eq(jobq_offer(&q, a), 1);
	ck_assert_int_eq(jobq_offer(&q, a), 0);	/* once */
	ck_assert_int_eq(jobq_offer(&q, b), 1);
	ck_assert_uint_eq(q.count, 2);
	ck_assert_int_eq(jobq_take(&q, got), 1);
	ck_assert_str_eq(got, a);			/* first in, first out */
	ck_assert_int_eq(jobq_offer(&q, a), 0);	/* still busy while delivered */
	jobq_done(&q, a);
	ck_assert_int_eq(jobq_offer(&q, a), 1);	/* done: may come again */
	ck_assert_int_eq(jobq_take(&q, got), 1);
	ck_assert_str_eq(got, b);
	jobq_requeue(&q, b);				/* given back: first again */
	ck_assert_int_eq(jobq_take(&q, got), 1);
	ck_assert_str_eq(got, b);
	ck_assert_int_eq(jobq_take(&q, got), 1);
	ck_assert_str_eq(got, a);
	ck_assert_int_eq(jobq_take(&q, got), 0);
	jobq_free(&q);
}
END_TEST

START_TEST(test_bound)
{
	struct jobq q;
	char id[QID_LEN + 1], got[QID_LEN + 1];

	jobq_init(&q);
	for (unsigned i = 0; i < JOBQ_MAX; i++) {
		qid(i, id);
		ck_assert_int_eq(jobq_offer(&q, id), 1);
	}
	qid(JOBQ_MAX, id);
	ck_assert_int_eq(jobq_offer(&q, id), -1);	/* full: it waits in LMDB */
	qid(7, id);
	ck_assert_int_eq(jobq_offer(&q, id), 0);	/* one it has: not "full" */
	/* taken jobs stay busy: still full */
	for (unsigned i = 0; i < JOBQ_MAX; i++) {
		ck_assert_int_eq(jobq_take(&q, got), 1);
		qid(i, id);
		ck_assert_str_eq(got, id);
	}
	qid(JOBQ_MAX, id);
	ck_assert_int_eq(jobq_offer(&q, id), -1);
	qid(0, got);
	jobq_done(&q, got);
	ck_assert_int_eq(jobq_offer(&q, id), 1);
	jobq_free(&q);
}
END_TEST

/* test_busy_set - done in a scrambled order: what is left is still
 * found (none lost by the shifts that fill a hole), what is done is not */
START_TEST(test_busy_set)
{
	struct jobq q;
	char id[QID_LEN + 1], got[QID_LEN + 1];
	static char isdone[JOBQ_MAX];

	jobq_init(&q);
	memset(isdone, 0, sizeof(isdone));
	for (unsigned i = 0; i < JOBQ_MAX; i++) {
		qid(i * 7919u, id);
		jobq_offer(&q, id);
	}
	while (jobq_take(&q, got))
		;
	for (unsigned k = 0; k < JOBQ_MAX; k++) {
		unsigned i = (k * 389u) % JOBQ_MAX;	/* 389 is prime to 1024: each once */

		qid(i * 7919u, id);
		jobq_done(&q, id);
		isdone[i] = 1;
		ck_assert_uint_eq(q.nbusy, JOBQ_MAX - k - 1);
		if (k % 97 == 0)
			for (unsigned j = 0; j < JOBQ_MAX; j++) {
				int rc;

				qid(j * 7919u, id);
				rc = jobq_offer(&q, id);
				ck_assert_int_eq(rc, isdone[j] ? 1 : 0);
				if (rc == 1) {	/* undo */
					jobq_take(&q, got);
					jobq_done(&q, id);
				}
			}
	}
	ck_assert_uint_eq(q.nbusy, 0);
	jobq_free(&q);
}
END_TEST

/* What is due: recipients in index order, and which of them go. */
static struct q_rcpt due_rcpts[] = {
	{.idx = 0, .state = RCPT_QUEUED, .next_us = 100, .peer = (char *)"a"},
	{.idx = 1, .state = RCPT_DEFERRED, .next_us = 200, .peer = (char *)"a"},
	{.idx = 2, .state = RCPT_DEFERRED, .next_us = 201, .peer = (char *)"a"},	/* later */
	{.idx = 3, .state = RCPT_SENT, .next_us = 0, .peer = (char *)"a"},
	{.idx = 4, .state = RCPT_BOUNCED, .next_us = 0, .peer = (char *)"a"},
	{.idx = 5, .state = RCPT_QUEUED, .next_us = 0, .peer = (char *)"b"},	/* another peer's */
	{.idx = 6, .state = RCPT_QUEUED, .next_us = 200, .peer = (char *)"a"},
};

static const struct {
	const char *peer;
	uint64_t now;
	size_t max;
	const char *want;		/* the indexes chosen */
} dues[] = {
	{"a", 200, 100, "016"},
	{"a", 201, 100, "0126"},
	{"a", 99, 100, ""},
	{"a", 200, 2, "01"},		/* max_rcpts_per_transaction */
	{"b", 200, 100, "5"},
	{"c", 1000, 100, ""},
};

START_TEST(test_due)
{
	const struct q_rcpt *todo[N_ELEMENTS(due_rcpts)];
	char got[N_ELEMENTS(due_rcpts) + 1];
	size_t n = jobq_due(due_rcpts, N_ELEMENTS(due_rcpts), dues[_i].peer, dues[_i].now,
			    dues[_i].max, todo);

	for (size_t k = 0; k < n; k++)
		got[k] = (char)('0' + todo[k]->idx);
	got[n] = '\0';
	ck_assert_str_eq(got, dues[_i].want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jobq");
	TCase *tc = tcase_create("jobq");

	tcase_add_test(tc, test_offer_take);
	tcase_add_test(tc, test_bound);
	tcase_add_test(tc, test_busy_set);
	tcase_add_loop_test(tc, test_due, 0, N_ELEMENTS(dues));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
