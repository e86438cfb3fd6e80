/*
 * faultfs - an LD_PRELOAD shim that makes storage fail on demand, for the
 * durability tests: ENOSPC or EIO from write, writev, pwrite, pwritev,
 * fsync and fdatasync on files under $FAULTFS_DIR, and ENOMEM from mmap of
 * such a file (LMDB growing its map) when the length is over
 * $FAULTFS_MMAP_OVER octets (0 or unset: any length).
 *
 * ENOSPC spares an LMDB meta page (an in-place pwrite in the first two
 * pages of a data.mdb): a file system that overwrites in place needs no
 * new block for it, so a real full disk never fails it. Failing it would
 * make a fault switched on between a commit's data pages and its meta
 * page an MDB_PANIC, which is the EIO case, not the full disk's.
 *
 * The fault in force is read from the file $FAULTFS_CONTROL at every call:
 * one line "CALL=ERRNO" (e.g. "fdatasync=EIO", "write=ENOSPC", "any=EIO",
 * "mmap=ENOMEM"),
 * or empty for none. Tests flip it while the daemon runs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* fd_path - the path fd was opened as, in path; 0, or -1 if unknown */
static int fd_path(int fd, char *path, size_t size)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if ((n = readlink(link, path, size - 1)) <= 0)
		return -1;
	path[n] = '\0';
	return 0;
}

/* fault - the errno to fail call on fd with, or 0 */
static int fault(const char *call, int fd)
{
	const char *ctl = getenv("FAULTFS_CONTROL"), *dir = getenv("FAULTFS_DIR");
	char spec[64] = "", path[4096];
	ssize_t n;
	int cfd, saved = errno;

	if (ctl == NULL || dir == NULL || (cfd = open(ctl, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(cfd, spec, sizeof(spec) - 1);
	close(cfd);
	errno = saved;
	if (n <= 0)
		return 0;
	spec[n] = '\0';
	spec[strcspn(spec, "\n")] = '\0';
	char *eq = strchr(spec, '=');

	if (eq == NULL)
		return 0;
	*eq = '\0';
	if (strcmp(spec, call) != 0 && strcmp(spec, "any") != 0)
		return 0;
	if (fd_path(fd, path, sizeof(path)) < 0)
		return 0;
	errno = saved;
	if (strncmp(path, dir, strlen(dir)) != 0)
		return 0;
	return strcmp(eq + 1, "ENOSPC") == 0 ? ENOSPC : strcmp(eq + 1, "ENOMEM") == 0 ? ENOMEM : EIO;
}

/* meta_page - is this pwrite an in-place write of an LMDB meta page? */
static int meta_page(int fd, size_t n, off_t off)
{
	char path[4096];
	long page = sysconf(_SC_PAGESIZE);
	struct stat st;
	ssize_t len;

	if (fd_path(fd, path, sizeof(path)) < 0)
		return 0;
	len = (ssize_t)strlen(path) - (ssize_t)strlen("/data.mdb");
	return len > 0 && strcmp(path + len, "/data.mdb") == 0 && fstat(fd, &st) == 0
	    && off + (off_t)n <= 2 * page && off + (off_t)n <= st.st_size;
}

#define REAL(name) static __typeof__(name) *real; if (!real) real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n)
{
	int e;
	REAL(write);
	if ((e = fault("write", fd)) != 0)
		return errno = e, -1;
	return real(fd, buf, n);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	int e;
	REAL(writev);
	if ((e = fault("write", fd)) != 0)
		return errno = e, -1;
	return real(fd, iov, cnt);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	int e;
	REAL(pwrite);
	if ((e = fault("write", fd)) != 0 && !(e == ENOSPC && meta_page(fd, n, off)))
		return errno = e, -1;
	return real(fd, buf, n, off);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	int e;
	REAL(pwritev);
	if ((e = fault("write", fd)) != 0)
		return errno = e, -1;
	return real(fd, iov, cnt, off);
}

int fdatasync(int fd)
{
	int e;
	REAL(fdatasync);
	if ((e = fault("fdatasync", fd)) != 0)
		return errno = e, -1;
	return real(fd);
}

int fsync(int fd)
{
	int e;
	REAL(fsync);
	if ((e = fault("fsync", fd)) != 0)
		return errno = e, -1;
	return real(fd);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	const char *over = getenv("FAULTFS_MMAP_OVER");
	int e;
	REAL(mmap);
	if (fd >= 0 && (over == NULL || len > strtoull(over, NULL, 10)) && (e = fault("mmap", fd)) != 0)
		return errno = e, MAP_FAILED;
	return real(addr, len, prot, flags, fd, off);
}
