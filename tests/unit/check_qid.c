/*
 * check_qid - queue ids: exact formatting, parsing and its rejections,
 * sort order, the logical clock (standing still, going backwards,
 * resuming after the last stored id) and uniqueness across threads.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qid.h"
#include "unit.h"

#define T0 1700000000000000ULL		/* a plausible now, in microseconds */

static const struct {
	uint64_t value;
	const char *qid;
} fmt_cases[] = {
	{0, "0000000000000"},
	{1, "0000000000001"},
	{31, "000000000000Z"},
	{32, "0000000000010"},
	{4096, "0000000000400"},
	{(uint64_t)10 << 20 | 17 << 15 | 18 << 10 | 21 << 5 | 27, "00000000AHJNV"},
	{0x0123456789ABCDEFULL, "028T5CY4TQKFF"},
	{T0 << 12, "618J1G7J00000"},
	{(uint64_t)1 << 63, "8000000000000"},
	{UINT64_MAX, "FZZZZZZZZZZZZ"},
};

START_TEST(test_format_parse)
{
	char out[QID_LEN + 1];
	uint64_t v = 12345;

	memset(out, 'x', sizeof(out));
	qid_format(fmt_cases[_i].value, out);
	ck_assert_str_eq(out, fmt_cases[_i].qid);
	ck_assert_int_eq(qid_parse(fmt_cases[_i].qid, &v), 0);
	ck_assert_uint_eq(v, fmt_cases[_i].value);
}
END_TEST

static const char *const bad_ids[] = {
	"",
	"000000000000",			/* 12 characters */
	"00000000000000",		/* 14 characters */
	"0000000000000 ",
	" 000000000000",
	"G000000000000",		/* first character > F: 65 bits */
	"Z000000000000",
	"0000000000I00",		/* not in the alphabet */
	"0000000000L00",
	"0000000000O00",
	"0000000000U00",
	"000000000000a",		/* lower case */
	"a000000000000",
	"000000-000000",
	"000000\303\25100000",	/* U+00E9 in UTF-8 */
	"00000000000\n0",
};

START_TEST(test_parse_rejects)
{
	uint64_t v = 777;

	ck_assert_int_eq(qid_parse(bad_ids[_i], &v), -1);
	ck_assert_uint_eq(v, 777);	/* untouched */
}
END_TEST

START_TEST(test_time)
{
	char out[QID_LEN + 1];
	struct qid_gen g;
	uint64_t v;

	qid_gen_init(&g, 0);
	v = qid_next(&g, T0, out);
	ck_assert_uint_eq(v, T0 << 12);
	ck_assert_uint_eq(qid_time_us(v), T0);
	ck_assert_str_eq(out, "618J1G7J00000");
	v = qid_next(&g, T0, out);
	ck_assert_uint_eq(qid_time_us(v), T0);
	ck_assert_str_eq(out, "618J1G7J00001");
}
END_TEST

/* xorshift64 - a deterministic sequence of test values */
static uint64_t xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

START_TEST(test_sortable_values)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL;

	for (int i = 0; i < 100000; i++) {
		uint64_t a = xorshift64(&seed), b = xorshift64(&seed);
		char qa[QID_LEN + 1], qb[QID_LEN + 1];
		int c;

		if (i % 3 == 0)
			b = a + (b & 0xfff);	/* near neighbours */
		qid_format(a, qa);
		qid_format(b, qb);
		c = strcmp(qa, qb);
		/* ck_assert costs a write to the runner per call: test first */
		if (!((a < b && c < 0) || (a == b && c == 0) || (a > b && c > 0)))
			ck_abort_msg("%llx %s vs %llx %s", (unsigned long long)a, qa,
				     (unsigned long long)b, qb);
	}
}
END_TEST

START_TEST(test_sortable_times)
{
	struct qid_gen g;
	char prev[QID_LEN + 1], cur[QID_LEN + 1];
	uint64_t now = T0;

	qid_gen_init(&g, 0);
	qid_next(&g, now, prev);
	for (int i = 0; i < 20000; i++) {
		now += 1 + (uint64_t)(i % 37) * 1000;	/* crosses digit boundaries */
		qid_next(&g, now, cur);
		if (strcmp(prev, cur) >= 0)
			ck_abort_msg("%s !< %s", prev, cur);
		memcpy(prev, cur, sizeof(cur));
	}
}
END_TEST

START_TEST(test_clock_still)
{
	struct qid_gen g;
	char prev[QID_LEN + 1], cur[QID_LEN + 1];
	uint64_t v;

	qid_gen_init(&g, 0);
	qid_next(&g, T0, prev);
	/* more than the 4096 a microsecond's counter holds */
	for (uint64_t i = 1; i < 10000; i++) {
		v = qid_next(&g, T0, cur);
		if (v != (T0 << 12) + i || strcmp(prev, cur) >= 0)
			ck_abort_msg("id %llu: %llx %s after %s", (unsigned long long)i,
				     (unsigned long long)v, cur, prev);
		memcpy(prev, cur, sizeof(cur));
	}
	ck_assert_uint_eq(qid_time_us(v), T0 + 2);	/* the logical clock ran ahead */
	/* the real clock catches up: back to time-based ids */
	ck_assert_uint_eq(qid_next(&g, T0 + 3, cur), (T0 + 3) << 12);
}
END_TEST

START_TEST(test_clock_backwards)
{
	struct qid_gen g;
	char a[QID_LEN + 1], b[QID_LEN + 1], c[QID_LEN + 1];
	uint64_t va, vb, vc;

	qid_gen_init(&g, 0);
	va = qid_next(&g, T0 + 1000000, a);
	vb = qid_next(&g, T0, b);		/* clock stepped back a second */
	vc = qid_next(&g, 1, c);
	ck_assert_uint_eq(vb, va + 1);
	ck_assert_uint_eq(vc, va + 2);
	ck_assert_int_lt(strcmp(a, b), 0);
	ck_assert_int_lt(strcmp(b, c), 0);
}
END_TEST

START_TEST(test_resume)
{
	struct qid_gen g;
	char out[QID_LEN + 1], last[QID_LEN + 1];
	uint64_t stored = ((T0 + 5000000) << 12) + 7;	/* issued by a clock ahead of ours */

	qid_format(stored, last);
	qid_gen_init(&g, stored);
	ck_assert_uint_eq(qid_next(&g, T0, out), stored + 1);
	ck_assert_int_lt(strcmp(last, out), 0);
	ck_assert_uint_eq(qid_next(&g, T0 + 5000000, out), stored + 2);
	ck_assert_uint_eq(qid_next(&g, T0 + 5000001, out), (T0 + 5000001) << 12);

	/* an old stored id does not hold a correct clock back */
	qid_gen_init(&g, (T0 - 1) << 12);
	ck_assert_uint_eq(qid_next(&g, T0, out), T0 << 12);
}
END_TEST

#define NTHREADS 8
#define PER_THREAD 20000

struct worker {
	struct qid_gen *gen;
	uint64_t values[PER_THREAD];
	int bad;			/* out of order, or string and value disagree */
};

/* worker - take ids as fast as possible, all at the same clock reading */
static void *worker(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < PER_THREAD; i++) {
		char out[QID_LEN + 1], again[QID_LEN + 1];
		uint64_t v = qid_next(w->gen, T0, out);

		qid_format(v, again);
		if (strcmp(out, again) != 0 || (i > 0 && v <= w->values[i - 1]))
			w->bad++;
		w->values[i] = v;
	}
	return NULL;
}

/* cmp_u64 - qsort order of uint64_t */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

START_TEST(test_threads)
{
	struct qid_gen g;
	struct worker *w = calloc(NTHREADS, sizeof(*w));
	uint64_t *all = malloc(sizeof(*all) * NTHREADS * PER_THREAD);
	pthread_t tid[NTHREADS];

	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_nonnull(all);
	qid_gen_init(&g, 0);
	for (int t = 0; t < NTHREADS; t++) {
		w[t].gen = &g;
		ck_assert_int_eq(pthread_create(&tid[t], NULL, worker, &w[t]), 0);
	}
	for (int t = 0; t < NTHREADS; t++) {
		ck_assert_int_eq(pthread_join(tid[t], NULL), 0);
		ck_assert_int_eq(w[t].bad, 0);
		memcpy(all + t * PER_THREAD, w[t].values, sizeof(w[t].values));
	}
	qsort(all, NTHREADS * PER_THREAD, sizeof(*all), cmp_u64);
	/* distinct and, since the clock stood still, exactly consecutive */
	for (size_t i = 0; i < NTHREADS * PER_THREAD; i++)
		if (all[i] != (T0 << 12) + i)
			ck_abort_msg("sorted id %zu is %llx, want %llx", i, (unsigned long long)all[i],
				     (unsigned long long)((T0 << 12) + i));
	free(all);
	free(w);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("qid");
	TCase *tc = tcase_create("qid");

	tcase_add_loop_test(tc, test_format_parse, 0, N_ELEMENTS(fmt_cases));
	tcase_add_loop_test(tc, test_parse_rejects, 0, N_ELEMENTS(bad_ids));
	tcase_add_test(tc, test_time);
	tcase_add_test(tc, test_sortable_values);
	tcase_add_test(tc, test_sortable_times);
	tcase_add_test(tc, test_clock_still);
	tcase_add_test(tc, test_clock_backwards);
	tcase_add_test(tc, test_resume);
	tcase_add_test(tc, test_threads);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
