/*
 * check_metrics - the metric registry and its text exposition: exact
 * output for counters, gauges and histograms (cumulative buckets, _sum,
 * _count equal to +Inf), label value and HELP escaping, updates with
 * unregistered label sets dropped, counts exact under concurrent updates,
 * series registered while updates and scrapes run (a reload's new peer),
 * labelled gauges collected at scrape time, the metrics_listen parser,
 * and the standard series (metrics_std): build info, the /proc/PID/stat
 * parser of the process metrics, the reload outcome.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "metrics_std.h"
#include "unit.h"

/* render - the exposition as a string (caller frees) */
static char *render(void)
{
	size_t len;
	char *text = metrics_render(&len);

	ck_assert_uint_eq(strlen(text), len);
	return text;
}

START_TEST(test_counter_gauge)
{
	struct metric *c = metric_new(METRIC_COUNTER, "t_sent_total", "Sent.", "peer,status", NULL, 0);
	struct metric *g = metric_new(METRIC_GAUGE, "t_queue", "Queue.", NULL, NULL, 0);
	char *text;

	metric_series(c, "a", "sent");
	metric_series(c, "b", "sent");
	metric_add(c, 2, "a", "sent");
	metric_add(c, 3, "b", "sent");
	metric_add(c, 1, "a", "sent");
	metric_add(c, 7, "a", "bounced");	/* not registered: dropped */
	metric_add(c, 7, "z", "sent");
	metric_gauge_add(g, 5);
	metric_gauge_add(g, -2);
	text = render();
	ck_assert_str_eq(text,
			 "# HELP t_sent_total Sent.\n"
			 "# TYPE t_sent_total counter\n"
			 "t_sent_total{peer=\"a\",status=\"sent\"} 3\n"
			 "t_sent_total{peer=\"b\",status=\"sent\"} 3\n"
			 "# HELP t_queue Queue.\n"
			 "# TYPE t_queue gauge\n"
			 "t_queue 3\n");
	free(text);
	metric_set(g, -4);
	text = render();
	ck_assert_ptr_nonnull(strstr(text, "\nt_queue -4\n"));
	free(text);
	metrics_reset();
}
END_TEST

START_TEST(test_escaping)
{
	struct metric *c = metric_new(METRIC_COUNTER, "t_total", "Back\\slash and\nnewline \"quoted\".",
				      "peer", NULL, 0);
	char *text;

	metric_series(c, "a\"b\\c\nd");
	metric_add(c, 1, "a\"b\\c\nd");
	text = render();
	ck_assert_str_eq(text,
			 "# HELP t_total Back\\\\slash and\\nnewline \"quoted\".\n"
			 "# TYPE t_total counter\n"
			 "t_total{peer=\"a\\\"b\\\\c\\nd\"} 1\n");
	free(text);
	metrics_reset();
}
END_TEST

START_TEST(test_histogram)
{
	static const double b[] = {0.1, 1, 10};
	struct metric *h = metric_new(METRIC_HISTOGRAM, "t_seconds", "Time.", "peer", b, 3);
	struct metric *u = metric_new(METRIC_HISTOGRAM, "t_batch", "Batch.", NULL, b, 3);
	char *text;

	metric_series(h, "a");
	metric_observe(h, 0.05, "a");
	metric_observe(h, 0.1, "a");		/* le is inclusive */
	metric_observe(h, 0.5, "a");
	metric_observe(h, 100, "a");		/* +Inf only */
	metric_observe(h, 1, "nope");		/* not registered */
	metric_observe(u, 2);
	text = render();
	ck_assert_str_eq(text,
			 "# HELP t_seconds Time.\n"
			 "# TYPE t_seconds histogram\n"
			 "t_seconds_bucket{peer=\"a\",le=\"0.1\"} 2\n"
			 "t_seconds_bucket{peer=\"a\",le=\"1\"} 3\n"
			 "t_seconds_bucket{peer=\"a\",le=\"10\"} 3\n"
			 "t_seconds_bucket{peer=\"a\",le=\"+Inf\"} 4\n"
			 "t_seconds_sum{peer=\"a\"} 100.65\n"
			 "t_seconds_count{peer=\"a\"} 4\n"
			 "# HELP t_batch Batch.\n"
			 "# TYPE t_batch histogram\n"
			 "t_batch_bucket{le=\"0.1\"} 0\n"
			 "t_batch_bucket{le=\"1\"} 0\n"
			 "t_batch_bucket{le=\"10\"} 1\n"
			 "t_batch_bucket{le=\"+Inf\"} 1\n"
			 "t_batch_sum 2\n"
			 "t_batch_count 1\n");
	free(text);
	metrics_reset();
}
END_TEST

static double forty_two(void *arg)
{
	return *(double *)arg;
}

START_TEST(test_gauge_fn)
{
	struct metric *g = metric_new(METRIC_GAUGE, "t_age_seconds", "Age.", NULL, NULL, 0);
	double v = 42.5;
	char *text;

	metric_gauge_fn(g, forty_two, &v);
	text = render();
	ck_assert_ptr_nonnull(strstr(text, "\nt_age_seconds 42.5\n"));
	free(text);
	metrics_reset();
}
END_TEST

#define THREADS 4
#define ROUNDS 100000

static struct metric *shared_c, *shared_h;

static void *hammer(void *arg)
{
	for (int i = 0; i < ROUNDS; i++) {
		metric_add(shared_c, 1, "p");
		metric_observe(shared_h, 0.5, "p");
	}
	return arg;
}

START_TEST(test_concurrent)
{
	static const double b[] = {1};
	pthread_t t[THREADS];
	char *text;

	shared_c = metric_new(METRIC_COUNTER, "t_total", "C.", "peer", NULL, 0);
	shared_h = metric_new(METRIC_HISTOGRAM, "t_seconds", "H.", "peer", b, 1);
	metric_series(shared_c, "p");
	metric_series(shared_h, "p");
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	text = render();
	ck_assert_ptr_nonnull(strstr(text, "\nt_total{peer=\"p\"} 400000\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nt_seconds_sum{peer=\"p\"} 200000\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nt_seconds_count{peer=\"p\"} 400000\n"));
	free(text);
	metrics_reset();
}
END_TEST

/* Registration while updates and scrapes run: a reload adding peers. */
static _Atomic int adding, latest, hammered, scraped;
static long per_peer[100];		/* the hammer's counts, read after join */

/* add_hammer - count into the newest series (counter and histogram)
 * until registration ends; how many times */
static void *add_hammer(void *arg)
{
	long n = 0;
	char peer[16];

	(void)arg;
	while (atomic_load(&adding)) {
		int k = atomic_load(&latest);

		snprintf(peer, sizeof(peer), "p%d", k);
		metric_add(shared_c, 1, peer);
		metric_observe(shared_h, 0.5, peer);
		per_peer[k]++;
		atomic_store(&hammered, 1);
		n++;
	}
	return (void *)n;
}

/* add_scraper - render until registration ends */
static void *add_scraper(void *arg)
{
	while (atomic_load(&adding)) {
		size_t len;

		free(metrics_render(&len));
		atomic_store(&scraped, 1);
	}
	return arg;
}

/* sum_of - the sum of the values of the lines starting with prefix */
static long sum_of(const char *text, const char *prefix)
{
	long sum = 0;

	for (const char *p = text; (p = strstr(p, prefix)) != NULL; p++)
		if (p == text || p[-1] == '\n')
			sum += strtol(strchr(p, ' ') + 1, NULL, 10);
	return sum;
}

START_TEST(test_register_later)
{
	static const double b[] = {1};

	for (int round = 0; round < 20; round++) {
		pthread_t h, r;
		void *counted;
		char *text, peer[16];

		shared_c = metric_new(METRIC_COUNTER, "t_total", "C.", "peer", NULL, 0);
		shared_h = metric_new(METRIC_HISTOGRAM, "t_seconds", "H.", "peer", b, 1);
		metric_series(shared_c, "p0");
		metric_series(shared_h, "p0");
		atomic_store(&latest, 0);
		memset(per_peer, 0, sizeof(per_peer));
		atomic_store(&hammered, 0);
		atomic_store(&scraped, 0);
		atomic_store(&adding, 1);
		ck_assert_int_eq(pthread_create(&h, NULL, add_hammer, NULL), 0);
		ck_assert_int_eq(pthread_create(&r, NULL, add_scraper, NULL), 0);
		while (!atomic_load(&hammered) || !atomic_load(&scraped))
			sched_yield();	/* both run before the first registration */
		for (int i = 1; i < 100; i++) {	/* the index grows 8 -> 128 meanwhile */
			snprintf(peer, sizeof(peer), "p%d", i);
			metric_series(shared_c, peer);
			metric_series(shared_h, peer);
			metric_series(shared_c, "p0");	/* again: nothing happens */
			atomic_store(&latest, i);
			sched_yield();
		}
		atomic_store(&adding, 0);
		pthread_join(h, &counted);
		pthread_join(r, NULL);
		ck_assert_int_gt((long)counted, 0);
		text = render();
		/* every update found its series, old index or new */
		ck_assert_int_eq(sum_of(text, "t_total{"), (long)counted);
		ck_assert_int_eq(sum_of(text, "t_seconds_count{"), (long)counted);
		for (int i = 0; i < 100; i++) {	/* each in its own series */
			char want[64];

			snprintf(want, sizeof(want), "\nt_total{peer=\"p%d\"} %ld\n", i, per_peer[i]);
			ck_assert_msg(strstr(text, want) != NULL, "want %s", want + 1);
		}
		ck_assert_ptr_nonnull(strstr(text, "\nt_total{peer=\"p99\"} "));
		ck_assert_ptr_null(strstr(strstr(text, "t_total{peer=\"p0\"}") + 1,
					  "t_total{peer=\"p0\"}"));
		free(text);
		metrics_reset();
	}
}
END_TEST

static const struct {
	const char *spec, *host;
	int port;
} listen_ok[] = {
	{"127.0.0.1:9465", "127.0.0.1", 9465},
	{"[::1]:9465", "::1", 9465},
	{"0.0.0.0:1", "0.0.0.0", 1},
	{"localhost:65535", "localhost", 65535},
};

static const char *const listen_bad[] = {
	"", "9465", ":9465", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:94x",
	"127.0.0.1:-1", "::1:9465", "[::1]9465", "[::1]", "[]:9465", "127.0.0.1: 9465",
	"[[]:1", "[127.0.0.1]:9465", "a]:1",
};

START_TEST(test_listen_ok)
{
	char host[64];
	int port = 0;

	ck_assert_int_eq(metrics_listen_parse(listen_ok[_i].spec, host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, listen_ok[_i].host);
	ck_assert_int_eq(port, listen_ok[_i].port);
}
END_TEST

START_TEST(test_listen_bad)
{
	char host[64];
	int port = 0;

	ck_assert_int_eq(metrics_listen_parse(listen_bad[_i], host, sizeof(host), &port), -1);
}
END_TEST

START_TEST(test_listen_long_host)
{
	char host[8];
	int port = 0;

	ck_assert_int_eq(metrics_listen_parse("127.0.0.1:9465", host, sizeof(host), &port), -1);
}
END_TEST

/* collect_peers - a scrape-time fn: sets one of two series */
static void collect_peers(struct metric *m, void *arg)
{
	int *calls = arg;

	(*calls)++;
	metric_set(m, 40 + *calls, "a");
}

START_TEST(test_collect)
{
	struct metric *g = metric_new(METRIC_GAUGE, "t_rcpts", "Recipients.", "peer", NULL, 0);
	int calls = 0;
	char *text;

	metric_series(g, "a");
	metric_series(g, "b");
	metric_set(g, 7, "b");	/* reset to 0 before each collection */
	metric_collect(g, collect_peers, &calls);
	text = render();
	ck_assert_str_eq(text, "# HELP t_rcpts Recipients.\n# TYPE t_rcpts gauge\n"
			 "t_rcpts{peer=\"a\"} 41\nt_rcpts{peer=\"b\"} 0\n");
	free(text);
	text = render();
	ck_assert_ptr_nonnull(strstr(text, "t_rcpts{peer=\"a\"} 42\n"));
	ck_assert_int_eq(calls, 2);
	free(text);
	metrics_reset();
}
END_TEST

/* /proc/PID/stat lines: a command name with spaces and parentheses, the
 * numbers proc(5) places at fields 14, 15, 22, 23 and 24 */
static const char stat_line[] =
	"4242 (tern (x) d) S 1 4242 4242 0 -1 4194624 1043 0 3 0 "
	"157 23 0 0 20 0 5 0 98765 123456789 3456 18446744073709551615 1 1 0 0 0 0 0 "
	"4096 0 0 0 0 17 1 0 0 0 0 0\n";

START_TEST(test_procstat)
{
	struct procstat ps;

	memset(&ps, 0xff, sizeof(ps));
	ck_assert_int_eq(procstat_parse(stat_line, &ps), 0);
	ck_assert_uint_eq(ps.utime, 157);
	ck_assert_uint_eq(ps.stime, 23);
	ck_assert_uint_eq(ps.starttime, 98765);
	ck_assert_uint_eq(ps.vsize, 123456789);
	ck_assert_uint_eq(ps.rss, 3456);
}
END_TEST

static const char *const stat_bad[] = {
	"",
	"4242 (ternd S 1 4242",					/* no ')' */
	"(ternd) S 1 4242 4242 0 -1 4194624 1043 0 3 0 157 23 0 0 20 0 5 0 98765 1 2\n",
	"4242 (ternd) S 1 4242 4242 0 -1 4194624 1043 0 3 0 157 23 0 0 20 0 5 0 98765 1\n",
	"4242 (ternd) S 1 4242 4242 0 -1 4194624 1043 0 3 0 157 x 0 0 20 0 5 0 98765 1 2\n",
	"4242 (ternd)S 1 4242 4242 0 -1 4194624 1043 0 3 0 157 23 0 0 20 0 5 0 98765 1 2\n",
	"4242 (ternd) 1 1 4242 4242 0 -1 4194624 1043 0 3 0 157 23 0 0 20 0 5 0 98765 1 2\n",
	"4242 (ternd) S 1 4242 4242 0 -1 4194624 1043 0 3 0 99999999999999999999 23 0 0 20 0 5 0 98765 1 2\n",
};

START_TEST(test_procstat_bad)
{
	struct procstat ps;

	ck_assert_int_eq(procstat_parse(stat_bad[_i], &ps), -1);
}
END_TEST

/* value_of - the value of the sample line "name value" in text, or -1 */
static double value_of(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; (p = strstr(p, name)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

START_TEST(test_std)
{
	char *text;
	double start;

	metrics_std_init();
	text = render();
	ck_assert_ptr_nonnull(strstr(text, "# TYPE tern_build_info gauge\ntern_build_info{version=\""
				     PACKAGE_VERSION "\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE process_open_fds gauge\n"));
	ck_assert(value_of(text, "process_resident_memory_bytes") > 4096);
	ck_assert(value_of(text, "process_virtual_memory_bytes") > 4096);
	ck_assert(value_of(text, "process_cpu_seconds_total") >= 0);
	/* stdin, stdout, stderr at least; not the descriptor that counts */
	ck_assert(value_of(text, "process_open_fds") >= 3);
	ck_assert(value_of(text, "process_max_fds") >= 3);
	start = value_of(text, "process_start_time_seconds");
	ck_assert(start > (double)time(NULL) - 600 && start <= (double)time(NULL) + 1);
	ck_assert(value_of(text, "tern_config_last_reload_successful") == 1);
	ck_assert(value_of(text, "tern_config_last_reload_success_timestamp_seconds")
		  >= (double)time(NULL) - 60);
	free(text);
	metrics_std_reloaded(0);
	text = render();
	ck_assert(value_of(text, "tern_config_last_reload_successful") == 0);
	ck_assert(value_of(text, "tern_config_last_reload_success_timestamp_seconds") > 0);
	free(text);
	metrics_std_reloaded(1);
	text = render();
	ck_assert(value_of(text, "tern_config_last_reload_successful") == 1);
	free(text);
	metrics_reset();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_counter_gauge);
	tcase_add_test(tc, test_escaping);
	tcase_add_test(tc, test_histogram);
	tcase_add_test(tc, test_gauge_fn);
	tcase_add_test(tc, test_concurrent);
	tcase_add_test(tc, test_register_later);
	tcase_add_loop_test(tc, test_listen_ok, 0, N_ELEMENTS(listen_ok));
	tcase_add_loop_test(tc, test_listen_bad, 0, N_ELEMENTS(listen_bad));
	tcase_add_test(tc, test_listen_long_host);
	tcase_add_test(tc, test_collect);
	tcase_add_test(tc, test_procstat);
	tcase_add_loop_test(tc, test_procstat_bad, 0, N_ELEMENTS(stat_bad));
	tcase_add_test(tc, test_std);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
