/*
 * tern-report - reports from ternd's delivery history, for cron: text for
 * a mail, JSON and CSV for scripts, HTML with charts for people, and a
 * Prometheus textfile for node_exporter. --merge combines the JSON
 * reports of several nodes.
 *
 * Reads the queue database and the milter's journal read-only (read
 * transactions of one batch each, so ternd and the milter keep running
 * and their databases do not grow because of us); memory is bounded by the report's tables, not the history's size.
 * Never writes the database. Output files are replaced atomically.
 * Exit status: 0 ok, 1 the history, a merged report or the output could
 * not be read or written, 2 usage or configuration.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "log.h"
#include "privs.h"
#include "report.h"
#include "store.h"
#include "store_journal.h"
#include "units.h"
#include "xalloc.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define MERGE_FILE_MAX (64u << 20)

struct opts {
	const char *since;		/* --since, as given */
	const char *from, *to;
	const char *format;
	const char *output;
	const char *table;
	unsigned long long top;
	int quiet;
	int merge;
	int utc;
};

/* usage - print usage and exit with status: 0 (--help) on the standard
 * output, else on the standard error */
static void __attribute__((noreturn)) usage_exit(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: tern-report [-c FILE] [--since DURATION|today|yesterday|TIME | --from TIME --to TIME]\n"
		"                   [--utc]\n"
		"                   [--format text|json|csv|html|prom] [--output FILE] [--top N]\n"
		"                   [--table totals|hourly|peers|domains|reasons|queue|senders|sizes|milter]\n"
		"                   [--quiet] [--merge FILE...]\n"
		"       tern-report -h | --help | -V | --version\n");
	exit(status);
}

/* usage - print usage on the standard error and exit 2 */
static void __attribute__((noreturn)) usage(void)
{
	usage_exit(EXIT_USAGE);
}

/* die - a message and an exit status */
static void __attribute__((noreturn, format(printf, 2, 3))) die(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("tern-report: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(status);
}

/* slurp - a whole file of at most MERGE_FILE_MAX octets ("-": stdin) */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
	size_t cap = 65536, n = 0;
	char *buf;

	if (f == NULL)
		die(EXIT_FAIL, "%s: %s", path, strerror(errno));
	buf = xmalloc(cap);
	for (;;) {
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (n < cap)
			break;
		if (cap >= MERGE_FILE_MAX)
			die(EXIT_FAIL, "%s: larger than %u octets", path, MERGE_FILE_MAX);
		cap *= 2;
		buf = xreallocarray(buf, cap, 1);
	}
	if (ferror(f))
		die(EXIT_FAIL, "%s: %s", path, strerror(errno));
	if (f != stdin)
		fclose(f);
	*len = n;
	return buf;
}

/* merge - the reports in files into one */
static void merge(struct report *r, char **files, int n, int utc)
{
	uint64_t from = UINT64_MAX, to = 0;
	const char *why;
	char err[256];

	for (int i = 0; i < n; i++) {
		size_t len;
		char *buf = slurp(files[i], &len);
		uint64_t f, t;

		if (report_merge_window(buf, len, &f, &t) < 0)
			die(EXIT_FAIL, "%s: not a tern-report JSON report", files[i]);
		from = f < from ? f : from;
		to = t > to ? t : to;
		free(buf);
	}
	if (report_init_zone(r, from, to, utc, &why) < 0)
		die(EXIT_FAIL, "the merged reports' window: %s", why);
	r->nodes = 0;
	for (int i = 0; i < n; i++) {
		size_t len;
		char *buf = slurp(files[i], &len);

		if (report_merge_json(r, buf, len, err, sizeof(err)) < 0)
			die(EXIT_FAIL, "%s: %s", files[i], err);
		free(buf);
	}
}

/* from_journal - the milter's verdicts in the window, from its journal in
 * STATE_DIR/journal; none there (no milter on this node): the report has
 * no milter sections */
static void from_journal(struct report *r, const struct conf *conf, uint64_t from, uint64_t to)
{
	char path[4096], data[4200], err[1024];
	struct journal_db *jdb;
	struct privs_fs fs;
	struct stat sb;
	int missing;

	snprintf(path, sizeof(path), "%s/journal", conf->global.state_dir);
	snprintf(data, sizeof(data), "%s/data.mdb", path);
	if (privs_fs_enter_user(&fs, conf->global.user, err, sizeof(err)) < 0)
		die(EXIT_FAIL, "%s", err);
	missing = stat(data, &sb) < 0 && errno == ENOENT;
	jdb = missing ? NULL : journal_db_open(path, 1, err, sizeof(err));
	privs_fs_leave(&fs);
	if (missing)
		return;
	if (jdb == NULL)
		die(EXIT_FAIL, "%s", err);
	if (journal_db_foreach_range(jdb, from, to, report_add_journal, r) < 0)
		die(EXIT_FAIL, "%s: cannot read the milter journal", path);
	r->have_milter = 1;
	journal_db_close(&jdb);
}

/* from_history - the report of a window of this node's history */
static void from_history(struct report *r, const struct conf *conf, uint64_t from, uint64_t to,
			 uint64_t now, int utc)
{
	char path[4096], err[1024];
	struct privs_fs fs;
	struct store *st;
	const char *why;

	if (report_init_zone(r, from, to, utc, &why) < 0)
		die(EXIT_USAGE, "%s", why);
	r->generated_us = now;
	snprintf(path, sizeof(path), "%s/queue", conf->global.state_dir);
	/* as the tern user: its directory, where root makes no path operation */
	if (privs_fs_enter_user(&fs, conf->global.user, err, sizeof(err)) < 0)
		die(EXIT_FAIL, "%s", err);
	st = store_open(path, 1, 0, err, sizeof(err));
	privs_fs_leave(&fs);
	if (st == NULL)
		die(EXIT_FAIL, "%s", err);
	if (store_hist_foreach_range(st, from, to, report_add, r) < 0)
		die(EXIT_FAIL, "%s: cannot read the delivery history", path);
	r->queue.by_peer = 1;
	r->queue.now_us = r->generated_us;
	if (store_foreach(st, qshape_msg, &r->queue) < 0)
		die(EXIT_FAIL, "%s: cannot read the queue", path);
	r->have_queue = 1;
	store_close(&st);
	from_journal(r, conf, from, to);
	rpt_host_add(r, conf_hostname(conf));
}

/* emit - the report in the chosen format */
static int emit(const struct report *r, const struct opts *o, FILE *out)
{
	if (strcmp(o->format, "json") == 0)
		return report_json(r, out);
	if (strcmp(o->format, "csv") == 0)
		return report_csv(r, out, o->table, (size_t)o->top);
	if (strcmp(o->format, "html") == 0)
		return report_html(r, out, (size_t)o->top);
	if (strcmp(o->format, "prom") == 0)
		return report_prom(r, out);
	return report_text(r, out, (size_t)o->top);
}

/* write_atomic - write the report to a temporary file next to path, make
 * it durable, then rename it over path: readers (node_exporter, a web
 * server) see the old file or the new one, never a partial one */
static void write_atomic(const struct report *r, const struct opts *o)
{
	char *copy = xstrdup(o->output), *tmp;
	const char *dir = dirname(copy);
	size_t n = strlen(dir) + strlen(o->output) + 32;
	FILE *out;
	int fd;

	tmp = xmalloc(n);
	snprintf(tmp, n, "%s/.tern-report.XXXXXX", dir);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0)
		die(EXIT_FAIL, "%s: %s", tmp, strerror(errno));
	if (fchmod(fd, 0644) < 0 || (out = fdopen(fd, "we")) == NULL) {
		unlink(tmp);
		die(EXIT_FAIL, "%s: %s", tmp, strerror(errno));
	}
	if (emit(r, o, out) < 0 || fflush(out) != 0 || fsync(fd) < 0) {
		int e = errno;

		fclose(out);
		unlink(tmp);
		die(EXIT_FAIL, "%s: %s", tmp, strerror(e));
	}
	if (fclose(out) != 0 || rename(tmp, o->output) < 0) {
		int e = errno;

		unlink(tmp);
		die(EXIT_FAIL, "%s: %s", o->output, strerror(e));
	}
	/* the rename itself survives a crash once the directory is synced */
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	free(tmp);
	free(copy);
}

/* report_option - one of tern-report's own options; 1 if ch was one */
static int report_option(struct opts *o, int ch, const char *arg)
{
	const char *why;

	switch (ch) {
	case 's':
		o->since = arg;
		return 1;
	case 'u':
		o->utc = 1;
		return 1;
	case 'F':
		o->from = arg;
		return 1;
	case 'T':
		o->to = arg;
		return 1;
	case 'o':
		o->format = arg;
		return 1;
	case 'O':
		o->output = arg;
		return 1;
	case 'N':
		if (units_uint(arg, 100000, &o->top, &why) < 0)
			die(EXIT_USAGE, "--top %s: %s", arg, why);
		return 1;
	case 't':
		o->table = arg;
		return 1;
	case 'q':
		o->quiet = 1;
		return 1;
	case 'm':
		o->merge = 1;
		return 1;
	default:
		return 0;
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"since", required_argument, NULL, 's'},
		{"utc", no_argument, NULL, 'u'},
		{"from", required_argument, NULL, 'F'},
		{"to", required_argument, NULL, 'T'},
		{"format", required_argument, NULL, 'o'},
		{"output", required_argument, NULL, 'O'},
		{"top", required_argument, NULL, 'N'},
		{"table", required_argument, NULL, 't'},
		{"quiet", no_argument, NULL, 'q'},
		{"merge", no_argument, NULL, 'm'},
		CLI_LONG_OPTS,
		{NULL, 0, NULL, 0},
	};
	static const char *const formats[] = {"text", "json", "csv", "html", "prom"};
	struct opts o = {.format = "text", .table = "totals", .top = 10};
	struct report r;
	struct cli cli;
	int ch, ok = 0;

	log_init(argv[0], "tern-report");
	cli_init(&cli);
	while ((ch = getopt_long(argc, argv, CLI_COMMON_OPTS "Vh", longopts, NULL)) != -1) {
		if (cli_option(&cli, ch, optarg) || report_option(&o, ch, optarg))
			continue;
		if (ch == 'V')
			cli_version();
		usage_exit(ch == 'h' ? 0 : EXIT_USAGE);
	}
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		ok |= strcmp(o.format, formats[i]) == 0;
	if (!ok || !o.from != !o.to || (o.from && o.since)
	    || (o.merge ? optind == argc : optind != argc))
		usage();
	if (strcmp(o.format, "csv") == 0) {
		char key[40];

		/* a whole name from the list, not a piece of one */
		if (strlen(o.table) > 32)
			usage();
		snprintf(key, sizeof(key), ",%s,", o.table);
		if (strstr(",totals,hourly,peers,domains,reasons,queue,senders,sizes,milter,", key) == NULL)
			usage();
	}
	if (o.merge) {
		merge(&r, argv + optind, argc - optind, o.utc);
	} else {
		struct conf *conf = cli_load_conf(&cli);
		uint64_t now = now_us(), from, to;
		const char *why;

		if (o.from) {
			if (rpt_parse_time(o.from, o.utc, &from) < 0 || rpt_parse_time(o.to, o.utc, &to) < 0
			    || from >= UINT64_MAX / 1000000 || to >= UINT64_MAX / 1000000)
				die(EXIT_USAGE, "--from/--to: YYYY-MM-DD[THH:MM[:SS]][Z|+HH:MM] "
				    "(local time unless a zone or --utc is given) or @SECONDS");
			from *= 1000000;
			to *= 1000000;
		} else if (rpt_window(o.since ? o.since : "24h", now, o.utc, &from, &to, &why) < 0) {
			die(EXIT_USAGE, "--since %s: %s", o.since ? o.since : "24h", why);
		}
		from_history(&r, conf, from, to, now, o.utc);
		conf_free(&conf);
	}
	if (r.generated_us == 0)
		r.generated_us = now_us();
	report_finish(&r);
	if (o.quiet && !rpt_traffic(&r) && strcmp(o.format, "prom") != 0) {
		report_free(&r);
		return 0;
	}
	if (o.output) {
		write_atomic(&r, &o);
	} else if (emit(&r, &o, stdout) < 0 || fflush(stdout) != 0) {
		die(EXIT_FAIL, "cannot write the report: %s", strerror(errno));
	}
	report_free(&r);
	return 0;
}
