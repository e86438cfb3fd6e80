/*
 * check_ring - the bounded ring and its writer thread: items reach the
 * callback whole and in order, a full ring refuses and counts (the
 * writer logs the exact count once, in its own words), ring_stop writes what is queued,
 * and a put after the stop (or on no ring) is refused without a count.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "ring.h"
#include "tmpdir.h"
#include "unit.h"

struct item {
	unsigned seq;
	char tag[12];
};

struct sink {
	sem_t entered, go;		/* the writer holds in its first batch */
	int hold;
	unsigned got[64];
	size_t n, batches;
};

/* sink_write - record what arrives; the first batch waits for go */
static void sink_write(void *items, size_t n, void *arg)
{
	struct sink *s = arg;
	struct item *it = items;

	if (s->hold && s->batches == 0) {
		sem_post(&s->entered);
		sem_wait(&s->go);
	}
	s->batches++;
	for (size_t i = 0; i < n; i++) {
		char want[12];

		snprintf(want, sizeof(want), "item %u", it[i].seq);
		ck_assert_str_eq(it[i].tag, want);
		ck_assert_uint_lt(s->n, 64);
		s->got[s->n++] = it[i].seq;
	}
}

/* put - queue item seq */
static int put(struct ring *r, unsigned seq)
{
	struct item it = {seq, ""};

	snprintf(it.tag, sizeof(it.tag), "item %u", seq);
	return ring_put(r, &it);
}

START_TEST(test_order_and_stop)
{
	struct sink s = {0};
	struct ring *r = ring_start("test", "item", sizeof(struct item), 8, sink_write, &s);

	ck_assert_ptr_nonnull(r);
	for (unsigned i = 0; i < 40; i++)
		while (put(r, i) < 0)
			sched_yield();	/* full: the writer catches up */
	ring_stop(r);
	ck_assert_uint_eq(s.n, 40);
	for (unsigned i = 0; i < 40; i++)
		ck_assert_uint_eq(s.got[i], i);
	ck_assert_int_eq(put(r, 99), RING_STOPPED);	/* stopped: refused */
	ring_stop(r);				/* twice: nothing more */
	ring_free(&r);
	ck_assert_ptr_null(r);
	ck_assert_int_eq(put(r, 99), RING_STOPPED);	/* no ring */
	ring_free(&r);
}
END_TEST

START_TEST(test_full_drops_and_counts)
{
	struct sink s = {.hold = 1};
	char dir[256], path[300], line[512];
	struct ring *r;
	FILE *f;
	int warnings = 0;

	tmpdir_make(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/log", dir);
	ck_assert_ptr_nonnull(freopen(path, "w", stderr));	/* where log lines go */
	sem_init(&s.entered, 0, 0);
	sem_init(&s.go, 0, 0);
	r = ring_start("test", "item", sizeof(struct item), 4, sink_write, &s);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(put(r, 0), 0);
	sem_wait(&s.entered);		/* the writer holds item 0 */
	for (unsigned i = 1; i <= 4; i++)
		ck_assert_int_eq(put(r, i), 0);
	ck_assert_int_eq(put(r, 5), RING_FULL);	/* full */
	ck_assert_int_eq(put(r, 6), RING_FULL);
	ck_assert_int_eq(put(r, 7), RING_FULL);
	sem_post(&s.go);
	ring_stop(r);
	ring_free(&r);
	ck_assert_uint_eq(s.n, 5);
	for (unsigned i = 0; i <= 4; i++)
		ck_assert_uint_eq(s.got[i], i);
	ck_assert_uint_eq(s.batches, 2);	/* items 1-4 in one batch */
	fflush(stderr);
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f)) {
		ck_assert_str_eq(line, "tern: warning: test: 3 items dropped: the writer could not keep up\n");
		warnings++;
	}
	fclose(f);
	ck_assert_int_eq(warnings, 1);
	sem_destroy(&s.entered);
	sem_destroy(&s.go);
	tmpdir_remove(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("ring");

	tcase_add_test(tc, test_order_and_stop);
	tcase_add_test(tc, test_full_drops_and_counts);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
