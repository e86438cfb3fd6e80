/*
 * check_spool - spool files: directories, appends of many vectors at
 * the right offsets (also through short and interrupted writes),
 * segment rotation, blocks reserved ahead of a segment's appends and
 * given back when it is left or by recovery (and appends where they
 * cannot be), truncation back to the committed length (never padding),
 * own files, opening bodies and checking them against their digest,
 * directory walks.
 * Each test has its own spool in a mkdtemp() directory.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <sodium.h>

#include "spool.h"
#include "tmpdir.h"
#include "unit.h"

static char dir[4096], sdir[4200];
static struct spool *sp;

/*
 * pwritev - short and interrupted writes on demand. spool.o is linked
 * from a static library, so this definition takes the C library's place.
 */
static struct {
	int eintr;			/* fail this many calls with EINTR first */
	int zero;			/* then return 0: no progress */
	int shorten;			/* write 1 + calls % shorten octets per call */
	int calls, max_iovcnt;
} pw;

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	size_t left, done = 0;

	pw.calls++;
	if (iovcnt > pw.max_iovcnt)
		pw.max_iovcnt = iovcnt;
	if (pw.eintr > 0) {
		pw.eintr--;
		errno = EINTR;
		return -1;
	}
	if (pw.zero)
		return 0;
	if (pw.shorten == 0)
		return syscall(SYS_pwritev, fd, iov, iovcnt, (long)offset, 0L);
	/* the first few octets of the vector: often ends inside an iovec */
	left = 1 + (size_t)(pw.calls % pw.shorten);
	for (int i = 0; i < iovcnt && left > 0; i++) {
		size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
		ssize_t w = pwrite(fd, iov[i].iov_base, n, offset + (off_t)done);

		if (w < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)w;
		left -= (size_t)w;
	}
	return (ssize_t)done;
}

/* fallocate - fails with fa.fail when that is set, else the C
 * library's (found past this definition) */
static struct {
	int fail;
	int calls;
} fa;

int fallocate(int fd, int mode, off_t offset, off_t len)
{
	static int (*real)(int, int, off_t, off_t);

	fa.calls++;
	if (fa.fail) {
		errno = fa.fail;
		return -1;
	}
	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "fallocate");
	ck_assert_ptr_nonnull(real);
	return real(fd, mode, offset, len);
}

/* fstat - fails with fstat_errno when that is set, else the real thing */
static int fstat_errno;

int fstat(int fd, struct stat *sb)
{
	if (fstat_errno) {
		errno = fstat_errno;
		return -1;
	}
	return fstatat(fd, "", sb, AT_EMPTY_PATH);
}

/* setup - a fresh spool in a private directory */
static void setup(void)
{
	char err[512] = "";

	memset(&pw, 0, sizeof(pw));
	memset(&fa, 0, sizeof(fa));
	fstat_errno = 0;
	tmpdir_make(dir, sizeof(dir));
	snprintf(sdir, sizeof(sdir), "%s/spool", dir);
	sp = spool_open(sdir, 1000, err, sizeof(err));
	ck_assert_msg(sp != NULL, "spool_open: %s", err);
}

/* teardown - close the spool and remove its directory */
static void teardown(void)
{
	spool_close(&sp);
	ck_assert_ptr_null(sp);
	tmpdir_remove(dir);
}

/* file_read - a whole spool file; its size in *len (-1: missing) */
static unsigned char *file_read(const char *sub, const char *name, ssize_t *len)
{
	char path[4400];
	unsigned char *buf;
	struct stat sb;
	int fd;

	snprintf(path, sizeof(path), "%s/%s/%s", sdir, sub, name);
	if ((fd = open(path, O_RDONLY)) < 0) {
		*len = -1;
		return NULL;
	}
	ck_assert_int_eq(fstat(fd, &sb), 0);
	buf = malloc((size_t)sb.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(read(fd, buf, (size_t)sb.st_size), sb.st_size);
	close(fd);
	*len = sb.st_size;
	return buf;
}

/* seg_holds - segment file name holds exactly the len octets want */
static void seg_holds(const char *name, const void *want, size_t len)
{
	ssize_t got;
	unsigned char *buf = file_read("seg", name, &got);

	ck_assert_int_eq(got, (ssize_t)len);
	ck_assert_int_eq(memcmp(buf, want, len), 0);
	free(buf);
}

/* seg_size - the size of a segment file, -1 if missing */
static off_t seg_size(const char *name)
{
	char path[4400];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/seg/%s", sdir, name);
	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* append - spool_append of iov, asserting success and the place given */
static void append(const struct iovec *iov, int n, uint64_t want_id, uint64_t want_off)
{
	uint64_t id = 99, off = 99;
	size_t total = 0;

	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	ck_assert_int_eq(spool_append(sp, iov, n, total, &id, &off), 0);
	ck_assert_uint_eq(id, want_id);
	ck_assert_uint_eq(off, want_off);
	ck_assert_uint_eq(spool_segment_length(sp), want_off + total);
}

START_TEST(test_open)
{
	char err[512] = "", path[4400];
	struct stat sb;
	struct spool *again;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/seg", sdir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert(S_ISDIR(sb.st_mode));
	snprintf(path, sizeof(path), "%s/own", sdir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert(S_ISDIR(sb.st_mode));
	/* an existing spool opens again */
	again = spool_open(sdir, 1000, err, sizeof(err));
	ck_assert_msg(again != NULL, "%s", err);
	spool_close(&again);
	ck_assert_ptr_null(again);
	spool_close(&again);		/* closing NULL is harmless */
	/* a file where a directory should be */
	snprintf(path, sizeof(path), "%s/file", dir);
	fp = fopen(path, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	snprintf(path, sizeof(path), "%s/file/spool", dir);
	ck_assert_ptr_null(spool_open(path, 1000, err, sizeof(err)));
	ck_assert_msg(strstr(err, "cannot create") != NULL, "%s", err);
	/* seg/ is a file */
	snprintf(path, sizeof(path), "%s/sp2", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sp2/seg", dir);
	fp = fopen(path, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	snprintf(path, sizeof(path), "%s/sp2", dir);
	ck_assert_ptr_null(spool_open(path, 1000, err, sizeof(err)));
	ck_assert_msg(strstr(err, "/sp2/seg: cannot open") != NULL, "%s", err);
}
END_TEST

START_TEST(test_append)
{
	struct iovec a[] = {{"hello ", 6}, {"", 0}, {"world\r\n", 7}};
	struct iovec b[] = {{"second\r\n", 8}};

	spool_start_segment(sp, 1);
	ck_assert_uint_eq(spool_segment_id(sp), 1);
	ck_assert_uint_eq(spool_segment_length(sp), 0);
	append(a, 3, 1, 0);
	append(b, 1, 1, 13);
	ck_assert_int_eq(spool_sync(sp), 0);
	ck_assert_int_eq(spool_sync(sp), 0);
	seg_holds("0000000000000001", "hello world\r\nsecond\r\n", 21);
}
END_TEST

/* append_vectors - n vectors of varying lengths (some empty); checks the file */
static void append_vectors(int n, uint64_t id)
{
	struct iovec *iov = calloc((size_t)n, sizeof(*iov));
	unsigned char *data, *buf;
	size_t total = 0, pos = 0;
	char name[17];
	ssize_t len;

	ck_assert_ptr_nonnull(iov);
	for (int i = 0; i < n; i++)
		total += (size_t)(i * 7 % 13);
	data = malloc(total + 1);
	ck_assert_ptr_nonnull(data);
	for (size_t i = 0; i < total; i++)
		data[i] = (unsigned char)(i * 31 + i / 251);
	for (int i = 0; i < n; i++) {
		iov[i].iov_base = data + pos;
		iov[i].iov_len = (size_t)(i * 7 % 13);
		pos += iov[i].iov_len;
	}
	spool_start_segment(sp, id);
	append((struct iovec[]){{"head", 4}}, 1, id, 0);
	append(iov, n, id, 4);
	append((struct iovec[]){{"tail", 4}}, 1, id, 4 + total);
	snprintf(name, sizeof(name), "%016llx", (unsigned long long)id);
	buf = file_read("seg", name, &len);
	ck_assert_int_eq(len, (ssize_t)total + 8);
	ck_assert_mem_eq(buf, "head", 4);
	ck_assert_int_eq(memcmp(buf + 4, data, total), 0);
	ck_assert_mem_eq(buf + 4 + total, "tail", 4);
	free(buf);
	free(data);
	free(iov);
}

START_TEST(test_append_many)
{
	append_vectors(1023, 1);
	append_vectors(1024, 2);
	append_vectors(1025, 3);
	append_vectors(3000, 4);
	append_vectors(5000, 5);
	ck_assert_int_eq(pw.max_iovcnt, 1024);	/* batches of IOV_MAX, never more */
}
END_TEST

/* short writes: the vector is rebuilt from where each write stopped */
START_TEST(test_append_short)
{
	pw.shorten = 11;
	append_vectors(7, 1);
	append_vectors(1500, 2);
	ck_assert_int_gt(pw.calls, 1500);
	ck_assert_int_le(pw.max_iovcnt, 1024);
}
END_TEST

START_TEST(test_append_eintr)
{
	struct iovec a[] = {{"abc", 3}, {"defg", 4}};

	spool_start_segment(sp, 1);
	pw.eintr = 3;
	append(a, 2, 1, 0);
	ck_assert_int_eq(pw.calls, 4);
	seg_holds("0000000000000001", "abcdefg", 7);
}
END_TEST

START_TEST(test_append_no_progress)
{
	struct iovec a[] = {{"abc", 3}};
	uint64_t id, off;

	spool_start_segment(sp, 1);
	append(a, 1, 1, 0);
	pw.zero = 1;
	errno = 0;
	ck_assert_int_eq(spool_append(sp, a, 1, 3, &id, &off), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_uint_eq(spool_segment_length(sp), 3);	/* not counted */
}
END_TEST

START_TEST(test_segments)
{
	struct iovec nine[] = {{"123456789", 9}}, one[] = {{"x", 1}};
	uint64_t id, off;

	spool_close(&sp);
	sp = spool_open(sdir, 10, NULL, 0);
	ck_assert_ptr_nonnull(sp);
	spool_start_segment(sp, 7);
	append(nine, 1, 7, 0);
	ck_assert_int_eq(spool_segment_full(sp), 0);
	append(one, 1, 7, 9);
	ck_assert_int_eq(spool_segment_full(sp), 1);
	spool_start_segment(sp, 8);
	ck_assert_int_eq(spool_segment_full(sp), 0);
	ck_assert_uint_eq(spool_segment_length(sp), 0);
	append(one, 1, 8, 0);
	ck_assert_int_eq(seg_size("0000000000000007"), 10);
	ck_assert_int_eq(seg_size("0000000000000008"), 1);
	/* a segment is never reopened for appending */
	spool_start_segment(sp, 7);
	errno = 0;
	ck_assert_int_eq(spool_append(sp, one, 1, 1, &id, &off), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(seg_size("0000000000000007"), 10);
	/* nor after it was abandoned */
	spool_start_segment(sp, 9);
	append(one, 1, 9, 0);
	spool_abandon_segment(sp);
	ck_assert_int_eq(spool_sync(sp), 0);	/* nothing left to sync */
	errno = 0;
	ck_assert_int_eq(spool_append(sp, one, 1, 1, &id, &off), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(seg_size("0000000000000009"), 1);
	spool_start_segment(sp, 0xabcdef0123456789ULL);
	append(one, 1, 0xabcdef0123456789ULL, 0);
	ck_assert_int_eq(seg_size("abcdef0123456789"), 1);
	ck_assert_int_eq(spool_sync(sp), 0);
}
END_TEST

/* seg_disk - the octets a segment file holds on disk, -1 if missing */
static long long seg_disk(const char *name)
{
	char path[4400];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/seg/%s", sdir, name);
	return stat(path, &sb) == 0 ? (long long)sb.st_blocks * 512 : -1;
}

/* Blocks are reserved ahead of the appends, 4 MiB at a time, past the
 * file's end; leaving the segment gives them back. */
START_TEST(test_reserve)
{
	struct iovec one[] = {{"x", 1}};

	spool_close(&sp);
	sp = spool_open(sdir, 64 << 20, NULL, 0);
	ck_assert_ptr_nonnull(sp);
	spool_start_segment(sp, 1);
	append(one, 1, 1, 0);
	ck_assert_int_eq(fa.calls, 1);
	ck_assert_int_eq(seg_size("0000000000000001"), 1);	/* its size is its length */
	ck_assert_int_ge(seg_disk("0000000000000001"), 4 << 20);
	append(one, 1, 1, 1);
	ck_assert_int_eq(fa.calls, 1);	/* inside what is reserved: no call */
	ck_assert_int_eq(spool_sync(sp), 0);
	spool_start_segment(sp, 2);
	ck_assert_int_eq(seg_size("0000000000000001"), 2);
	ck_assert_int_lt(seg_disk("0000000000000001"), 64 << 10);
	append(one, 1, 2, 0);
	ck_assert_int_eq(fa.calls, 2);
	ck_assert_int_ge(seg_disk("0000000000000002"), 4 << 20);
	spool_abandon_segment(sp);	/* given up: its blocks too */
	ck_assert_int_eq(seg_size("0000000000000002"), 1);
	ck_assert_int_lt(seg_disk("0000000000000002"), 64 << 10);
	spool_start_segment(sp, 3);
	append(one, 1, 3, 0);
	spool_close(&sp);		/* and at a stop */
	ck_assert_int_lt(seg_disk("0000000000000003"), 64 << 10);
}
END_TEST

/* Never reserved past the size at which the segment closes. */
START_TEST(test_reserve_capped)
{
	struct iovec one[] = {{"x", 1}};

	spool_start_segment(sp, 1);	/* the fixture's segments close at 1,000 */
	append(one, 1, 1, 0);
	ck_assert_int_eq(fa.calls, 1);
	ck_assert_int_lt(seg_disk("0000000000000001"), 64 << 10);
}
END_TEST

/* Where blocks cannot be reserved, appends go on as before: after a
 * full disk, without asking again in that segment (the next one asks);
 * a file system without the call is asked once. */
START_TEST(test_reserve_fails)
{
	struct iovec one[] = {{"x", 1}};

	spool_close(&sp);
	sp = spool_open(sdir, 64 << 20, NULL, 0);
	ck_assert_ptr_nonnull(sp);
	fa.fail = ENOSPC;
	spool_start_segment(sp, 1);
	append(one, 1, 1, 0);
	append(one, 1, 1, 1);
	ck_assert_int_eq(fa.calls, 1);
	ck_assert_int_eq(spool_sync(sp), 0);
	seg_holds("0000000000000001", "xx", 2);
	spool_start_segment(sp, 2);
	fa.fail = EOPNOTSUPP;
	append(one, 1, 2, 0);
	ck_assert_int_eq(fa.calls, 2);
	fa.fail = 0;
	append(one, 1, 2, 1);
	spool_start_segment(sp, 3);
	append(one, 1, 3, 0);
	ck_assert_int_eq(fa.calls, 2);
	ck_assert_int_eq(spool_sync(sp), 0);
	seg_holds("0000000000000002", "xx", 2);
	seg_holds("0000000000000003", "x", 1);
}
END_TEST

/* Blocks a run reserved and could not give back (a crash) are given
 * back by the truncation recovery makes; nothing of the data is cut. */
START_TEST(test_reserve_after_crash)
{
	char path[4400];
	uint64_t was;
	int fd;

	snprintf(path, sizeof(path), "%s/seg/0000000000000005", sdir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "committed", 9), 9);
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_KEEP_SIZE, 9, 4 << 20), 0);
	close(fd);
	ck_assert_int_ge(seg_disk("0000000000000005"), 4 << 20);
	ck_assert_int_eq(spool_seg_truncate(sp, 5, 9, &was), 0);	/* nothing cut */
	ck_assert_int_lt(seg_disk("0000000000000005"), 64 << 10);
	seg_holds("0000000000000005", "committed", 9);
}
END_TEST

/* A failed start of a segment leaves no file, and keeps its number. */
START_TEST(test_abandon_empty)
{
	struct iovec one[] = {{"x", 1}};
	uint64_t id, off;

	spool_start_segment(sp, 20);
	ck_assert_int_eq(spool_abandon_segment(sp), 0);	/* nothing made: stays current */
	ck_assert_int_eq(seg_size("0000000000000014"), -1);
	append(one, 1, 20, 0);
	ck_assert_int_eq(spool_abandon_segment(sp), 1);	/* data in it: a new one is needed */
	ck_assert_int_eq(seg_size("0000000000000014"), 1);
	/* a file of that name not made here: left alone, and a new one needed */
	spool_start_segment(sp, 20);
	errno = 0;
	ck_assert_int_eq(spool_append(sp, one, 1, 1, &id, &off), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(spool_abandon_segment(sp), 1);
	ck_assert_int_eq(seg_size("0000000000000014"), 1);
}
END_TEST

/* append_one - a segment of its own holding len octets */
static void append_one(uint64_t id, size_t len)
{
	static const char data[] = "0123456789abcdef";
	struct iovec iov = {(void *)data, len};

	ck_assert_uint_le(len, sizeof(data) - 1);
	spool_start_segment(sp, id);
	append(&iov, 1, id, 0);
	spool_abandon_segment(sp);
}

START_TEST(test_truncate)
{
	unsigned char data[100], *buf;
	struct iovec iov[] = {{data, sizeof(data)}};
	uint64_t was;
	ssize_t len;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)i;
	spool_start_segment(sp, 3);
	append(iov, 1, 3, 0);
	ck_assert_int_eq(spool_sync(sp), 0);
	spool_abandon_segment(sp);
	/* garbage past the committed length is cut */
	ck_assert_int_eq(spool_seg_truncate(sp, 3, 60, &was), 1);
	ck_assert_uint_eq(was, sizeof(data));
	ck_assert_int_eq(seg_size("0000000000000003"), 60);
	ck_assert_int_eq(spool_seg_truncate(sp, 3, 60, &was), 0);	/* nothing to do */
	ck_assert_int_eq(seg_size("0000000000000003"), 60);
	/* committed data missing: reported, never padded */
	errno = 0;
	ck_assert_int_eq(spool_seg_truncate(sp, 3, 61, &was), -1);
	ck_assert_int_eq(errno, EIO);
	errno = 0;
	ck_assert_int_eq(spool_seg_truncate(sp, 3, 1ULL << 40, &was), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_int_eq(seg_size("0000000000000003"), 60);
	buf = file_read("seg", "0000000000000003", &len);
	ck_assert_int_eq(len, 60);
	ck_assert_int_eq(memcmp(buf, data, 60), 0);
	free(buf);
	/* down to nothing */
	ck_assert_int_eq(spool_seg_truncate(sp, 3, 0, &was), 1);
	ck_assert_int_eq(seg_size("0000000000000003"), 0);
	/* a segment that cannot be examined: an error, never a guess */
	append_one(4, 5);
	fstat_errno = EOVERFLOW;
	errno = 0;
	ck_assert_int_eq(spool_seg_truncate(sp, 4, 5, &was), -1);
	ck_assert_int_eq(errno, EOVERFLOW);
	ck_assert_int_eq(spool_seg_truncate(sp, 4, 2, &was), -1);
	ck_assert_int_eq(errno, EOVERFLOW);
	fstat_errno = 0;
	ck_assert_int_eq(seg_size("0000000000000004"), 5);
	ck_assert_int_eq(spool_seg_remove(sp, 4), 0);
	/* a missing segment */
	errno = 0;
	ck_assert_int_eq(spool_seg_truncate(sp, 4, 0, &was), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(seg_size("0000000000000004"), -1);
}
END_TEST

START_TEST(test_own_files)
{
	struct q_msg m;
	char got[16];
	off_t off = 77;
	int fd, fd2;

	fd = spool_own_create(sp, "0000000000AAA");
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "own body\r\n", 10), 10);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	ck_assert_int_eq(spool_sync_owndir(sp), 0);
	errno = 0;
	ck_assert_int_eq(spool_own_create(sp, "0000000000AAA"), -1);	/* never overwritten */
	ck_assert_int_eq(errno, EEXIST);

	memset(&m, 0, sizeof(m));
	memcpy(m.qid, "0000000000AAA", QID_LEN + 1);
	m.flags = QMSG_OWNFILE | QMSG_8BIT;
	m.seg_id = 1;			/* ignored for own files */
	m.offset = 5;
	fd2 = spool_open_body(sp, &m, &off);
	ck_assert_int_ge(fd2, 0);
	ck_assert_int_eq(off, 0);
	ck_assert_int_eq(pread(fd2, got, sizeof(got), off), 10);
	ck_assert_mem_eq(got, "own body\r\n", 10);
	close(fd2);

	ck_assert_int_eq(spool_own_remove(sp, "0000000000AAA"), 0);
	ck_assert_int_eq(spool_own_remove(sp, "0000000000AAA"), 0);	/* gone: fine */
	errno = 0;
	ck_assert_int_eq(spool_open_body(sp, &m, &off), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* second_body - two bodies in segment 1f; m is the second's record */
static void second_body(struct q_msg *m)
{
	struct iovec a[] = {{"first body\r\n", 12}}, b[] = {{"second body\r\n", 13}};

	spool_start_segment(sp, 0x1f);
	append(a, 1, 0x1f, 0);
	append(b, 1, 0x1f, 12);
	memset(m, 0, sizeof(*m));
	memcpy(m->qid, "0000000000BBB", QID_LEN + 1);
	m->seg_id = 0x1f;
	m->offset = 12;
	m->size = 13;
}

START_TEST(test_open_body)
{
	struct q_msg m;
	char got[32];
	off_t off = -1;
	int fd;

	second_body(&m);
	fd = spool_open_body(sp, &m, &off);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(off, 12);
	ck_assert_int_eq(pread(fd, got, sizeof(got), off), 13);
	ck_assert_mem_eq(got, "second body\r\n", 13);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	close(fd);
	m.seg_id = 0x20;
	errno = 0;
	ck_assert_int_eq(spool_open_body(sp, &m, &off), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* A delivery that opened a body keeps reading it after copy-forward
 * removed its segment: pread (the copy path) and sendfile(2) (the
 * plain-text path) read the unlinked file through the descriptor;
 * spool_usage no longer counts it. */
START_TEST(test_open_body_removed)
{
	struct q_msg m;
	uint64_t segb, segs, ownb, owns;
	char got[32];
	off_t off = -1, at;
	int fd, sv[2];

	second_body(&m);
	ck_assert_int_eq(spool_usage(sp, &segb, &segs, &ownb, &owns), 0);
	ck_assert_uint_eq(segb, 25);
	ck_assert_uint_eq(segs, 1);
	ck_assert_uint_eq(ownb + owns, 0);
	fd = spool_open_body(sp, &m, &off);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(spool_seg_remove(sp, 0x1f), 0);
	ck_assert_int_eq(seg_size("000000000000001f"), -1);
	ck_assert_int_eq(spool_usage(sp, &segb, &segs, &ownb, &owns), 0);
	ck_assert_uint_eq(segb + segs, 0);
	ck_assert_int_eq(pread(fd, got, sizeof(got), off), 13);
	ck_assert_mem_eq(got, "second body\r\n", 13);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	at = off;
	ck_assert_int_eq(sendfile(sv[0], fd, &at, 13), 13);
	ck_assert_int_eq(read(sv[1], got, sizeof(got)), 13);
	ck_assert_mem_eq(got, "second body\r\n", 13);
	close(sv[0]);
	close(sv[1]);
	close(fd);
	errno = 0;
	ck_assert_int_eq(spool_open_body(sp, &m, &off), -1);	/* a later open: gone */
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(test_body_digest)
{
	struct q_msg m;
	char *copied = NULL;
	size_t copied_len = 0;
	FILE *copy;

	second_body(&m);
	crypto_generichash(m.digest, sizeof(m.digest), (const unsigned char *)"second body\r\n", 13,
			   NULL, 0);
	ck_assert_int_eq(spool_body_digest(sp, &m, NULL), 0);
	/* ternq cat: the octets go to copy as they are hashed */
	ck_assert_ptr_nonnull(copy = open_memstream(&copied, &copied_len));
	ck_assert_int_eq(spool_body_digest(sp, &m, copy), 0);
	fclose(copy);
	ck_assert_uint_eq(copied_len, 13);
	ck_assert_mem_eq(copied, "second body\r\n", 13);
	free(copied);
	m.digest[0] ^= 1;
	ck_assert_int_eq(spool_body_digest(sp, &m, NULL), SPOOL_BODY_MISMATCH);
	m.digest[0] ^= 1;
	m.size = 14;		/* one octet past the segment's end */
	ck_assert_int_eq(spool_body_digest(sp, &m, NULL), SPOOL_BODY_SHORT);
	m.size = 12;		/* a prefix: hashed, and not the digest */
	ck_assert_int_eq(spool_body_digest(sp, &m, NULL), SPOOL_BODY_MISMATCH);
	m.seg_id = 0x20;
	errno = 0;
	ck_assert_int_eq(spool_body_digest(sp, &m, NULL), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

struct names {
	char name[8][32];
	int n, stop_after;
};

/* collect - spool_foreach_*_file callback */
static int collect(const char *name, void *arg)
{
	struct names *l = arg;

	ck_assert_int_lt(l->n, 8);
	ck_assert_uint_lt(strlen(name), sizeof(l->name[0]));
	strcpy(l->name[l->n++], name);
	return l->stop_after && l->n == l->stop_after ? 5 : 0;
}

/* cmp_name - qsort order of collected names */
static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

START_TEST(test_foreach)
{
	static const uint64_t ids[] = {1, 0x1f, 0xabcdef0123456789ULL};
	static const char *const seg_names[] = {"000000000000001f", "0000000000000001",
						"abcdef0123456789"};
	struct iovec one[] = {{"x", 1}};
	struct names l = {.n = 0};
	char path[4400];
	int fd;

	ck_assert_int_eq(spool_foreach_seg_file(sp, collect, &l), 0);
	ck_assert_int_eq(spool_foreach_own_file(sp, collect, &l), 0);
	ck_assert_int_eq(l.n, 0);
	for (size_t i = 0; i < N_ELEMENTS(ids); i++) {
		spool_start_segment(sp, ids[i]);
		append(one, 1, ids[i], 0);
	}
	for (int i = 0; i < 2; i++) {
		fd = spool_own_create(sp, i ? "0000000000BBB" : "0000000000AAA");
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	/* dot files (editor leftovers, "." and "..") are not listed */
	snprintf(path, sizeof(path), "%s/seg/.tmp", sdir);
	ck_assert_int_ge(fd = open(path, O_WRONLY | O_CREAT, 0600), 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/own/.x", sdir);
	ck_assert_int_ge(fd = open(path, O_WRONLY | O_CREAT, 0600), 0);
	close(fd);

	ck_assert_int_eq(spool_foreach_seg_file(sp, collect, &l), 0);
	ck_assert_int_eq(l.n, 3);
	qsort(l.name, (size_t)l.n, sizeof(l.name[0]), cmp_name);
	ck_assert_str_eq(l.name[0], seg_names[1]);
	ck_assert_str_eq(l.name[1], seg_names[0]);
	ck_assert_str_eq(l.name[2], seg_names[2]);
	/* twice in a row: the walk starts from the beginning each time */
	l.n = 0;
	ck_assert_int_eq(spool_foreach_seg_file(sp, collect, &l), 0);
	ck_assert_int_eq(l.n, 3);

	l.n = 0;
	ck_assert_int_eq(spool_foreach_own_file(sp, collect, &l), 0);
	ck_assert_int_eq(l.n, 2);
	qsort(l.name, (size_t)l.n, sizeof(l.name[0]), cmp_name);
	ck_assert_str_eq(l.name[0], "0000000000AAA");
	ck_assert_str_eq(l.name[1], "0000000000BBB");

	/* a callback's nonzero return stops the walk and is returned */
	l.n = 0;
	l.stop_after = 2;
	ck_assert_int_eq(spool_foreach_seg_file(sp, collect, &l), 5);
	ck_assert_int_eq(l.n, 2);

	/* removal */
	ck_assert_int_eq(spool_seg_remove(sp, 0x1f), 0);
	ck_assert_int_eq(spool_seg_remove(sp, 0x1f), 0);	/* gone: fine */
	ck_assert_int_eq(seg_size("000000000000001f"), -1);
	l.n = 0;
	l.stop_after = 0;
	ck_assert_int_eq(spool_foreach_seg_file(sp, collect, &l), 0);
	ck_assert_int_eq(l.n, 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("spool");
	TCase *tc = tcase_create("spool");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_open);
	tcase_add_test(tc, test_append);
	tcase_add_test(tc, test_append_many);
	tcase_add_test(tc, test_append_short);
	tcase_add_test(tc, test_append_eintr);
	tcase_add_test(tc, test_append_no_progress);
	tcase_add_test(tc, test_segments);
	tcase_add_test(tc, test_reserve);
	tcase_add_test(tc, test_reserve_capped);
	tcase_add_test(tc, test_reserve_fails);
	tcase_add_test(tc, test_reserve_after_crash);
	tcase_add_test(tc, test_abandon_empty);
	tcase_add_test(tc, test_truncate);
	tcase_add_test(tc, test_own_files);
	tcase_add_test(tc, test_open_body);
	tcase_add_test(tc, test_open_body_removed);
	tcase_add_test(tc, test_body_digest);
	tcase_add_test(tc, test_foreach);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
