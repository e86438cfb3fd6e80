/*
 * metrics_std - build information, process metrics and the outcome of
 * the last configuration load, for both daemons.
 *
 * The process metrics are computed at each scrape (one read of
 * /proc/self/stat, one walk of /proc/self/fd), never on an update path.
 * The start time is the boot time (CLOCK_REALTIME less CLOCK_BOOTTIME,
 * since /proc/stat's btime is hidden by ProcSubset=pid) plus the
 * process's start in ticks after boot. A read that fails reports 0.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "metrics_std.h"

static struct metric *reload_ok, *reload_time;
static double started;			/* process_start_time_seconds: it does not change */

/* procstat_parse - the fields after "PID (COMM) ", as proc(5) numbers them */
int procstat_parse(const char *line, struct procstat *ps)
{
	const char *p = strrchr(line, ')');
	uint64_t v[22];			/* fields 3 (state) to 24 (rss) */
	char *end;

	if (p == NULL || line[0] < '0' || line[0] > '9' || p[1] != ' ')
		return -1;
	p += 2;
	if (*p < 'A' || *p > 'z' || p[1] != ' ')
		return -1;		/* the state letter */
	p += 2;
	for (size_t i = 1; i < 22; i++) {
		if (*p == '-')
			p++;		/* priority and nice may be negative: unused */
		if (*p < '0' || *p > '9')
			return -1;
		errno = 0;
		v[i] = strtoull(p, &end, 10);
		if (errno != 0 || (*end != ' ' && *end != '\n' && *end != '\0'))
			return -1;
		if (i < 21 && *end != ' ')
			return -1;	/* the line ends too soon */
		p = *end == ' ' ? end + 1 : end;
	}
	/* v[k] is field k + 3: utime 14, stime 15, starttime 22, vsize 23, rss 24 */
	ps->utime = v[11];
	ps->stime = v[12];
	ps->starttime = v[19];
	ps->vsize = v[20];
	ps->rss = v[21];
	return 0;
}

/* self_stat - this process's /proc/self/stat; 0, or -1 */
static int self_stat(struct procstat *ps)
{
	char buf[1024];
	ssize_t n;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return procstat_parse(buf, ps);
}

/* ticks - clock ticks per second */
static double ticks(void)
{
	long t = sysconf(_SC_CLK_TCK);

	return t > 0 ? (double)t : 100;
}

/* cpu_seconds - user and system time */
static double cpu_seconds(void *arg)
{
	struct procstat ps;

	(void)arg;
	return self_stat(&ps) < 0 ? 0 : (double)(ps.utime + ps.stime) / ticks();
}

/* resident_bytes - resident set size */
static double resident_bytes(void *arg)
{
	struct procstat ps;
	long page = sysconf(_SC_PAGESIZE);

	(void)arg;
	return self_stat(&ps) < 0 || page <= 0 ? 0 : (double)ps.rss * (double)page;
}

/* virtual_bytes - virtual memory size */
static double virtual_bytes(void *arg)
{
	struct procstat ps;

	(void)arg;
	return self_stat(&ps) < 0 ? 0 : (double)ps.vsize;
}

/* open_fds - entries of /proc/self/fd, less the one that reads it */
static double open_fds(void *arg)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	double n = 0;

	(void)arg;
	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			n++;
	closedir(d);
	return n;
}

/* max_fds - the soft limit on open descriptors */
static double max_fds(void *arg)
{
	struct rlimit rl;

	(void)arg;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return (double)rl.rlim_cur;
}

/* start_time - when the process started, seconds since the epoch */
static double start_time(void *arg)
{
	(void)arg;
	return started;
}

/* started_at - the boot time plus the process's start after boot */
static double started_at(void)
{
	struct timespec real, boot;
	struct procstat ps;

	if (self_stat(&ps) < 0 || clock_gettime(CLOCK_REALTIME, &real) < 0
	    || clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
		return 0;
	return (double)(real.tv_sec - boot.tv_sec) + (double)(real.tv_nsec - boot.tv_nsec) / 1e9
		+ (double)ps.starttime / ticks();
}

/* metrics_std_init - register build, process and reload series */
void metrics_std_init(void)
{
	static const struct {
		enum metric_type type;
		const char *name, *help;
		double (*fn)(void *);
	} process[] = {
		{METRIC_COUNTER, "process_cpu_seconds_total",
		 "Total user and system CPU time spent in seconds.", cpu_seconds},
		{METRIC_GAUGE, "process_resident_memory_bytes", "Resident memory size in bytes.",
		 resident_bytes},
		{METRIC_GAUGE, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
		 virtual_bytes},
		{METRIC_GAUGE, "process_open_fds", "Number of open file descriptors.", open_fds},
		{METRIC_GAUGE, "process_max_fds", "Maximum number of open file descriptors.", max_fds},
		{METRIC_GAUGE, "process_start_time_seconds",
		 "Start time of the process since unix epoch in seconds.", start_time},
	};
	struct metric *m;

	m = metric_new(METRIC_GAUGE, "tern_build_info", "The tern version running (value 1).",
		       "version", NULL, 0);
	metric_series(m, PACKAGE_VERSION);
	metric_set(m, 1, PACKAGE_VERSION);
	for (size_t i = 0; i < sizeof(process) / sizeof(process[0]); i++)
		metric_gauge_fn(metric_new(process[i].type, process[i].name, process[i].help, NULL,
					   NULL, 0), process[i].fn, NULL);
	started = started_at();
	reload_ok = metric_new(METRIC_GAUGE, "tern_config_last_reload_successful",
			       "Whether the last configuration load (start or reload) succeeded.",
			       NULL, NULL, 0);
	reload_time = metric_new(METRIC_GAUGE, "tern_config_last_reload_success_timestamp_seconds",
				 "When the configuration was last loaded successfully.", NULL, NULL, 0);
	metrics_std_reloaded(1);
}

/* metrics_std_reloaded - a load's outcome */
void metrics_std_reloaded(int ok)
{
	metric_set(reload_ok, ok ? 1 : 0);
	if (ok)
		metric_set(reload_time, (int64_t)time(NULL));
}
