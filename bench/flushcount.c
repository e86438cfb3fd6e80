/*
 * flushcount - an LD_PRELOAD shim that counts a process's flushes to
 * stable storage, for bench/ingest.sh: fsync, fdatasync, msync, and
 * pwrite to a file opened with O_DSYNC or O_SYNC (LMDB writes its meta
 * page so: a flush without a sync call; write(2) is left alone, it is
 * what sessions answer with). The counters live in the file
 * $FLUSHCOUNT_FILE, mapped shared at start (before ternd drops its
 * privileges), four little-endian 64-bit integers in that order, so that
 * the benchmark reads them at any moment, whatever way the process ends.
 * Without FLUSHCOUNT_FILE it counts nothing and changes nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <unistd.h>

enum { C_FSYNC, C_FDATASYNC, C_MSYNC, C_DSYNC_WRITE, C_N };

static _Atomic uint64_t *counts;

/* flushcount_init - map the counter file */
__attribute__((constructor)) static void flushcount_init(void)
{
	const char *path = getenv("FLUSHCOUNT_FILE");
	int fd;
	void *p;

	if (path == NULL || (fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		return;
	p = mmap(NULL, C_N * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		counts = p;
}

/* count - one more of kind k */
static void count(int k)
{
	if (counts)
		counts[k]++;
}

/* dsync - fd was opened to write synchronously */
static void dsync(int fd)
{
	int fl;

	if (counts && (fl = fcntl(fd, F_GETFL)) >= 0 && (fl & (O_DSYNC | O_SYNC)))
		count(C_DSYNC_WRITE);
}

/* next - the C library's definition of name */
static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

int fsync(int fd)
{
	static int (*real)(int);

	if (real == NULL)
		real = next("fsync");
	count(C_FSYNC);
	return real(fd);
}

int fdatasync(int fd)
{
	static int (*real)(int);

	if (real == NULL)
		real = next("fdatasync");
	count(C_FDATASYNC);
	return real(fd);
}

int msync(void *addr, size_t len, int flags)
{
	static int (*real)(void *, size_t, int);

	if (real == NULL)
		real = next("msync");
	if (flags & MS_SYNC)
		count(C_MSYNC);
	return real(addr, len, flags);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	static ssize_t (*real)(int, const void *, size_t, off_t);

	if (real == NULL)
		real = next("pwrite");
	dsync(fd);
	return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	static ssize_t (*real)(int, const void *, size_t, off_t);

	if (real == NULL)
		real = next("pwrite64");
	dsync(fd);
	return real(fd, buf, n, off);
}
