/*
 * metrics_std - the series every tern daemon serves besides its own:
 * tern_build_info{version}, the process metrics of the Prometheus client
 * libraries (process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds,
 * process_start_time_seconds), read from /proc/self at each scrape, and
 * the outcome of the last configuration load
 * (tern_config_last_reload_successful and its timestamp).
 *
 * procstat_parse is pure (a /proc/PID/stat line in, numbers out) so that
 * it is unit-tested; the rest reads /proc/self/stat and /proc/self/fd,
 * which ProtectProc=invisible and ProcSubset=pid leave visible.
 */
#ifndef TERN_METRICS_STD_H
#define TERN_METRICS_STD_H

#include <stdint.h>

/* The fields of /proc/PID/stat the process metrics use (proc(5)). */
struct procstat {
	uint64_t utime, stime;		/* clock ticks in user and kernel mode */
	uint64_t starttime;		/* clock ticks after boot when it started */
	uint64_t vsize;			/* octets of virtual memory */
	uint64_t rss;			/* pages resident */
};

/* procstat_parse - one /proc/PID/stat line; 0, or -1 when it is not one
 * (the command name may hold spaces and parentheses: the last ')' ends it) */
int procstat_parse(const char *line, struct procstat *ps);

/* metrics_std_init - register the series (with the daemon's other
 * metrics, before the endpoint starts); the configuration just loaded
 * counts as a successful load */
void metrics_std_init(void);

/* metrics_std_reloaded - a reload's outcome: ok 1 (its time is kept) or 0 */
void metrics_std_reloaded(int ok);

#endif
