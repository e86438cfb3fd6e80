/*
 * slowsync - an LD_PRELOAD shim that makes the queue database's commits
 * slow: fdatasync and fsync of a file named data.mdb sleep $SLOWSYNC_MS
 * milliseconds (default 200) first. A test tool for the races of the
 * tests themselves (tests/RELIABILITY.md): a test that asserts a queue
 * record, a history record or a removal after a log line or a reply that
 * comes before its commit fails under it, where on a fast disk it passes
 * nearly always.
 *
 *     TERND_PRELOAD=tests/fault/slowsync.so make check TESTS=...
 *
 * Never built into anything installed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* slow - sleep first if fd is a data.mdb */
static void slow(int fd)
{
	static const char name[] = "/data.mdb";
	char link[64], path[4096];
	const char *ms = getenv("SLOWSYNC_MS");
	struct timespec ts;
	ssize_t n;
	long v;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if ((n = readlink(link, path, sizeof(path) - 1)) < (ssize_t)sizeof(name) - 1)
		return;
	path[n] = '\0';
	if (strcmp(path + n - (sizeof(name) - 1), name) != 0)
		return;
	v = ms ? strtol(ms, NULL, 10) : 200;
	ts.tv_sec = v / 1000;
	ts.tv_nsec = (v % 1000) * 1000000;
	nanosleep(&ts, NULL);
}

/* WRAP - name(fd): slow(fd), then the real call */
#define WRAP(name)							\
	int name(int fd)						\
	{								\
		static int (*real)(int);				\
									\
		if (real == NULL)					\
			real = (int (*)(int))dlsym(RTLD_NEXT, #name);	\
		slow(fd);						\
		return real(fd);					\
	}

WRAP(fdatasync)
WRAP(fsync)
