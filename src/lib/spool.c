/*
 * spool - message bodies on disk.
 *
 * Paths: SPOOL_DIR/seg/<16 hex digits> for segments, SPOOL_DIR/own/<QID>
 * for messages with a file of their own. Directories are fsynced after a
 * file is created in them, before the message that needs it is committed,
 * and their parents after they are made.
 * Never reads or writes message bytes through stdio.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "dir_sync.h"
#include "spool.h"
#include "xalloc.h"

#define SPOOL_IOV_MAX 1024		/* Linux's IOV_MAX */
#define SPOOL_PREALLOC (4u << 20)	/* blocks reserved ahead of a segment's appends */
#define SPOOL_SLACK (64u << 10)		/* blocks past a file's end that recovery leaves */

struct spool {
	char *dir;
	int segdir, owndir;		/* directory fds, for *at() and fsync */
	uint64_t segment_size;
	/* the segment being appended to (committer only) */
	int fd;
	uint64_t id, length;
	uint64_t prealloc;		/* blocks reserved up to here (past length) */
	int created;			/* created since the last spool_sync() */
	int trim;			/* blocks may be reserved past length */
	int full;			/* the disk had no room for a step: not in this segment */
	int no_prealloc;		/* the file system cannot reserve blocks */
};

/* open_dir - create (if missing) and open a directory */
static int open_dir(const char *path, char *err, size_t errlen)
{
	int fd;

	if (mkdir(path, 0750) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
		return -1;
	}
	/* made now or by a run a power cut cut short: its name durable first */
	if (dir_sync_parent(path) < 0) {
		snprintf(err, errlen, "%s: cannot fsync the directory holding it: %s", path,
			 strerror(errno));
		return -1;
	}
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
	return fd;
}

/* spool_open - open the spool under dir, creating its subdirectories */
struct spool *spool_open(const char *dir, uint64_t segment_size, char *err, size_t errlen)
{
	struct spool *sp = xcalloc(1, sizeof(*sp));
	char path[4096];
	int top;

	sp->dir = xstrdup(dir);
	sp->segment_size = segment_size;
	sp->fd = sp->segdir = sp->owndir = -1;
	if ((top = open_dir(dir, err, errlen)) < 0)
		goto fail;
	close(top);
	snprintf(path, sizeof(path), "%s/seg", dir);
	if ((sp->segdir = open_dir(path, err, errlen)) < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/own", dir);
	if ((sp->owndir = open_dir(path, err, errlen)) < 0)
		goto fail;
	return sp;
fail:
	spool_close(&sp);
	return NULL;
}

/*
 * reserve - blocks for the current segment's next appends, SPOOL_PREALLOC
 * at a time but not past segment_size, beyond its end: the file's size
 * stays its length. On ext4 here (bench/RESULTS.md), a 20 KB write and
 * fdatasync took 153-163 us and 58-65 us of CPU into blocks reserved this
 * way, against 169-193 us and 74-83 us when the flush also allocates
 * them. Only an optimisation: where the file system cannot reserve
 * (FUSE, some network file systems) appends allocate as before; after a
 * step the disk had no room for, so do the rest of the segment's (the
 * last free blocks are left to LMDB and own files). What a crash leaves
 * reserved, recovery gives back (spool_seg_truncate).
 */
static void reserve(struct spool *sp, uint64_t end)
{
	uint64_t from, to;

	if (sp->no_prealloc || sp->full || end <= sp->prealloc)
		return;
	to = end + SPOOL_PREALLOC;
	if (to > sp->segment_size)
		to = sp->segment_size;	/* where the segment closes */
	if (to <= end)
		return;
	from = sp->prealloc > sp->length ? sp->prealloc : sp->length;
	sp->trim = 1;	/* even a failed call may have reserved part of it */
	if (fallocate(sp->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(to - from)) == 0)
		sp->prealloc = to;
	else if (errno == EOPNOTSUPP || errno == ENOSYS)
		sp->no_prealloc = 1;
	else
		sp->full = 1;	/* what little is left is for LMDB and own files */
}

/* leave_segment - stop appending to the current segment: close it, and
 * give back the blocks reserved past its end (truncating a file to its
 * own size frees them) */
static void leave_segment(struct spool *sp)
{
	if (sp->fd >= 0) {
		if (sp->trim)
			(void)ftruncate(sp->fd, (off_t)sp->length);
		close(sp->fd);
	}
	sp->fd = -1;
	sp->prealloc = 0;
	sp->trim = 0;
	sp->full = 0;
}

/* spool_close - close everything and clear the pointer */
void spool_close(struct spool **spp)
{
	struct spool *sp = *spp;

	if (sp == NULL)
		return;
	leave_segment(sp);
	if (sp->segdir >= 0)
		close(sp->segdir);
	if (sp->owndir >= 0)
		close(sp->owndir);
	free(sp->dir);
	free(sp);
	*spp = NULL;
}

/* seg_name - the file name of segment id */
static void seg_name(uint64_t id, char name[17])
{
	snprintf(name, 17, "%016" PRIx64, id);
}

/* spool_start_segment - the next append goes to a new segment, id */
void spool_start_segment(struct spool *sp, uint64_t id)
{
	leave_segment(sp);
	sp->id = id;
	sp->length = 0;
}

/* spool_append - write a batch of bodies at the end of the current segment */
int spool_append(struct spool *sp, const struct iovec *iov, int iovcnt, size_t total,
		 uint64_t *seg_id, uint64_t *offset)
{
	size_t done = 0;
	int i = 0;

	if (sp->fd < 0) {
		char name[17];

		seg_name(sp->id, name);
		sp->fd = openat(sp->segdir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
		if (sp->fd < 0)
			return -1;
		sp->created = 1;
	}
	reserve(sp, sp->length + total);
	*seg_id = sp->id;
	*offset = sp->length;
	while (done < total) {
		struct iovec part[SPOOL_IOV_MAX];
		int n = 0;
		size_t skip = done;
		ssize_t w;

		/* Rebuild the vector from where the last short write stopped. */
		for (i = 0; i < iovcnt && skip >= iov[i].iov_len; i++)
			skip -= iov[i].iov_len;
		for (; i < iovcnt && n < SPOOL_IOV_MAX; i++, n++) {
			part[n].iov_base = (char *)iov[i].iov_base + skip;
			part[n].iov_len = iov[i].iov_len - skip;
			skip = 0;
		}
		w = pwritev(sp->fd, part, n, (off_t)(sp->length + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		done += (size_t)w;
	}
	sp->length += total;
	return 0;
}

/* spool_sync - make appended data (and a new segment's name) durable */
int spool_sync(struct spool *sp)
{
	if (sp->fd >= 0 && fdatasync(sp->fd) < 0)
		return -1;
	if (sp->created) {
		if (fsync(sp->segdir) < 0)
			return -1;
		sp->created = 0;
	}
	return 0;
}

/* spool_sync_owndir - make the names of new own files durable */
int spool_sync_owndir(struct spool *sp)
{
	return fsync(sp->owndir);
}

uint64_t spool_segment_id(const struct spool *sp)
{
	return sp->id;
}

uint64_t spool_segment_length(const struct spool *sp)
{
	return sp->length;
}

/* spool_segment_full - time to start a new segment */
int spool_segment_full(const struct spool *sp)
{
	return sp->length >= sp->segment_size;
}

/* spool_abandon_segment - after a write or sync error: append no more
 * here. 1: the segment holds appended data (or a file not made here
 * has its name), the caller starts a new one; 0: nothing was appended to
 * it yet, so the file the failed append made is removed and the segment
 * stays current, its file made again by the next append (a full disk
 * costs no new file per failed batch) */
int spool_abandon_segment(struct spool *sp)
{
	int created = sp->created;
	char name[17];

	leave_segment(sp);
	sp->created = 0;
	if (sp->length > 0)
		return 1;
	seg_name(sp->id, name);
	if (created)
		return unlinkat(sp->segdir, name, 0) < 0 && errno != ENOENT;
	return faccessat(sp->segdir, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

/* spool_own_create - a new file of its own for a large message body */
int spool_own_create(struct spool *sp, const char *qid)
{
	return openat(sp->owndir, qid, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
}

/* spool_own_write - append n octets to an own file, all or nothing said */
int spool_own_write(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* spool_own_remove - remove a message's own file */
int spool_own_remove(struct spool *sp, const char *qid)
{
	return unlinkat(sp->owndir, qid, 0) < 0 && errno != ENOENT ? -1 : 0;
}

/* spool_seg_remove - remove a segment file */
int spool_seg_remove(struct spool *sp, uint64_t id)
{
	char name[17];

	seg_name(id, name);
	return unlinkat(sp->segdir, name, 0) < 0 && errno != ENOENT ? -1 : 0;
}

/* spool_seg_truncate - cut a segment back to its committed length; a
 * segment of that length that holds blocks past it (reserved by a run
 * that stopped uncleanly) gives them back. 1: octets were cut, and *was
 * is the size the segment had */
int spool_seg_truncate(struct spool *sp, uint64_t id, uint64_t length, uint64_t *was)
{
	char name[17];
	struct stat st;
	int fd, rc = 0;

	seg_name(id, name);
	if ((fd = openat(sp->segdir, name, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	if (fstat(fd, &st) < 0)
		rc = -1;
	else if ((uint64_t)(*was = (uint64_t)st.st_size) > length)
		rc = ftruncate(fd, (off_t)length) < 0 || fdatasync(fd) < 0 ? -1 : 1;
	else if ((uint64_t)st.st_size == length && (uint64_t)st.st_blocks * 512 >= length + SPOOL_SLACK)
		(void)ftruncate(fd, (off_t)length);	/* the same size: frees the blocks past it */
	else if ((uint64_t)st.st_size < length) {
		errno = EIO;	/* committed data missing: report, never pad */
		rc = -1;
	}
	close(fd);
	return rc;
}

/* spool_open_body - open the file holding m's body; *offset is where it starts */
int spool_open_body(struct spool *sp, const struct q_msg *m, off_t *offset)
{
	char name[17];

	if (m->flags & QMSG_OWNFILE) {
		*offset = 0;
		return openat(sp->owndir, m->qid, O_RDONLY | O_CLOEXEC);
	}
	seg_name(m->seg_id, name);
	*offset = (off_t)m->offset;
	return openat(sp->segdir, name, O_RDONLY | O_CLOEXEC);
}

/* spool_body_digest - read m's body where it is stored, BLAKE2b it and
 * check it against m's digest; with copy, every octet read is written
 * there too (ternq cat). 0: whole and matching; SPOOL_BODY_SHORT: the
 * file ends (or fails) before m->size octets; SPOOL_BODY_MISMATCH; -1
 * with errno when the file cannot be opened */
int spool_body_digest(struct spool *sp, const struct q_msg *m, FILE *copy)
{
	crypto_generichash_state h;
	unsigned char digest[Q_DIGEST_BYTES], buf[65536];
	uint64_t left = m->size;
	off_t off;
	int fd = spool_open_body(sp, m, &off);

	if (fd < 0)
		return -1;
	crypto_generichash_init(&h, NULL, 0, sizeof(digest));
	while (left > 0) {
		ssize_t n = pread(fd, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf), off);

		if (n <= 0)
			break;
		crypto_generichash_update(&h, buf, (size_t)n);
		if (copy)
			fwrite(buf, 1, (size_t)n, copy);
		off += n;
		left -= (uint64_t)n;
	}
	close(fd);
	crypto_generichash_final(&h, digest, sizeof(digest));
	if (left > 0)
		return SPOOL_BODY_SHORT;
	return sodium_memcmp(digest, m->digest, sizeof(digest)) == 0 ? 0 : SPOOL_BODY_MISMATCH;
}

/* foreach_file - call fn for every regular entry of a spool directory */
static int foreach_file(int dirfd, spool_file_fn fn, void *arg)
{
	DIR *d;
	struct dirent *e;
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0), stop = 0;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(d);
	while (!stop && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			stop = fn(e->d_name, arg);
	closedir(d);
	return stop;
}

int spool_foreach_seg_file(struct spool *sp, spool_file_fn fn, void *arg)
{
	return foreach_file(sp->segdir, fn, arg);
}

int spool_foreach_own_file(struct spool *sp, spool_file_fn fn, void *arg)
{
	return foreach_file(sp->owndir, fn, arg);
}

/* What spool_usage adds up in one directory. */
struct usage {
	int dirfd;
	uint64_t *bytes, *files;
};

/* usage_file - one file's size into the sums */
static int usage_file(const char *name, void *arg)
{
	struct usage *u = arg;
	struct stat st;

	if (fstatat(u->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		*u->bytes += (uint64_t)st.st_size;
		(*u->files)++;
	}
	return 0;
}

/* spool_usage - octets and files on disk: segments, then own files */
int spool_usage(struct spool *sp, uint64_t *seg_bytes, uint64_t *segs, uint64_t *own_bytes,
		uint64_t *owns)
{
	struct usage seg = {sp->segdir, seg_bytes, segs}, own = {sp->owndir, own_bytes, owns};

	*seg_bytes = *segs = *own_bytes = *owns = 0;
	return foreach_file(sp->segdir, usage_file, &seg) < 0
	       || foreach_file(sp->owndir, usage_file, &own) < 0 ? -1 : 0;
}
