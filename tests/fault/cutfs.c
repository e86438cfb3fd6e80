/*
 * cutfs - a power-cut simulator for the durability tests: a FUSE file
 * system (libfuse3, high-level API) over a backing directory that, on a
 * "cut", keeps only what was made durable.
 *
 *     cutfs [--torn] [--seed=N] BACKING MOUNTPOINT [fuse options]
 *
 * The model (POSIX's promise, stricter than ext4's journal):
 * - file data: writes go through to the backing file, but the bytes they
 *   overwrite are kept in an undo log per file (keyed by the backing
 *   inode, so it follows renames and unlinks). fsync or fdatasync of the
 *   file (or a write through a handle opened O_SYNC/O_DSYNC, for its own
 *   range) makes the file's current bytes and size durable and drops the
 *   log. A cut truncates each file to its durable size and plays its log
 *   back, newest first: the file is its durable image again;
 * - names: create, mknod, mkdir, symlink, link, rename, unlink and rmdir
 *   are durable only once each directory they change has been fsynced
 *   (opendir + fsync: FUSE's fsyncdir) after them. Until then an unlinked
 *   or replaced entry is kept under BACKING/.cutfs-grave (hidden), so a cut
 *   can put it back; a cut undoes the pending operations newest first;
 * - --torn: a cut keeps a random subset of what was pending (each undo
 *   record and each name operation is undone with probability 1/2, a file
 *   keeps its newer size with probability 1/2), as a disk that wrote some
 *   of its cache before the power went;
 * - metadata (mode, owner, times) is passed through, not modelled.
 *
 * SIGUSR1 cuts: under the lock that every operation takes, the backing
 * directory is rewound to its durable state, one line "cutfs: cut: ..."
 * goes to standard error, and every later operation fails with EIO, as a
 * dead disk. Unmount (fusermount3 -u) and mount again to "power on".
 * Reads of a shared mmap go through FUSE's read path, so a reader's map
 * (LMDB's data.mdb) works; writes through a shared writable map reach the
 * file only when the kernel writes the page back, and msync is not passed
 * to FUSE: a program that makes data durable with msync (LMDB with
 * MDB_WRITEMAP) is not modelled. tern does not use MDB_WRITEMAP.
 *
 * Never makes the backing files durable itself (no fsync of its own): the
 * backing directory is a test's scratch space.
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#define GRAVE ".cutfs-grave"

/* the bytes a pending write overwrote */
struct undo {
	struct undo *next;		/* older */
	off_t off;
	size_t len;
	unsigned char data[];
};

/* a backing file with pending changes or open for writing */
struct fstate {
	struct fstate *next;
	dev_t dev;
	ino_t ino;
	int fd;				/* O_RDWR on the backing file */
	int refs;			/* open handles */
	off_t durable;			/* size at the last sync */
	struct undo *undo;		/* newest first */
};

/* an open file */
struct handle {
	int fd;
	int sync;			/* opened O_SYNC or O_DSYNC */
	struct fstate *fs;		/* NULL: opened read-only */
};

/* handle_of - the handle that an open file's fh (64 bits) points to */
static struct handle *handle_of(const struct fuse_file_info *fi)
{
	return (struct handle *)(uintptr_t)fi->fh;
}

enum nskind { NS_CREATE, NS_MKDIR, NS_LINK, NS_UNLINK, NS_RENAME };

/* a name operation not yet durable */
struct nsop {
	struct nsop *next;		/* older */
	enum nskind kind;
	ino_t dir[2];			/* directories it changed (dir[1] == dir[0]: one) */
	int synced[2];
	char path[PATH_MAX];		/* the name made, removed, or renamed to */
	char from[PATH_MAX];		/* NS_RENAME: the old name */
	char grave[64];			/* entry kept for undo ("" none) */
};

static struct {
	pthread_mutex_t lock;
	int root;			/* the backing directory */
	int dead;			/* cut: everything fails */
	int torn;
	unsigned seed;
	unsigned long graves;
	struct fstate *files;
	struct nsop *ops;		/* newest first */
} cut = {.lock = PTHREAD_MUTEX_INITIALIZER, .root = -1};

/* rel - the backing-relative name of a FUSE path */
static const char *rel(const char *path)
{
	while (*path == '/')
		path++;
	return *path ? path : ".";
}

/* hidden - the path names the graveyard */
static int hidden(const char *path)
{
	const char *r = rel(path);
	size_t n = strlen(GRAVE);

	return strncmp(r, GRAVE, n) == 0 && (r[n] == '\0' || r[n] == '/');
}

/* enter - take the lock; -EIO after a cut, -ENOENT for the graveyard */
static int enter(const char *path)
{
	pthread_mutex_lock(&cut.lock);
	if (cut.dead)
		return -EIO;
	if (path && hidden(path))
		return -ENOENT;
	return 0;
}

/* leave - drop the lock and pass rc through */
static int leave(int rc)
{
	pthread_mutex_unlock(&cut.lock);
	return rc;
}

/* dir_ino - the inode of the directory holding path, or 0 */
static ino_t dir_ino(const char *path)
{
	char parent[PATH_MAX];
	const char *r = rel(path), *slash = strrchr(r, '/');
	struct stat st;

	if (slash == NULL)
		snprintf(parent, sizeof(parent), ".");
	else
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - r), r);
	return fstatat(cut.root, parent, &st, AT_SYMLINK_NOFOLLOW) < 0 ? 0 : st.st_ino;
}

/* ns_push - record a pending name operation */
static struct nsop *ns_push(enum nskind kind, const char *path, const char *from)
{
	struct nsop *op = calloc(1, sizeof(*op));

	if (op == NULL)
		abort();
	op->kind = kind;
	snprintf(op->path, sizeof(op->path), "%s", rel(path));
	op->dir[0] = op->dir[1] = dir_ino(path);
	if (from) {
		snprintf(op->from, sizeof(op->from), "%s", rel(from));
		op->dir[1] = dir_ino(from);
	}
	op->next = cut.ops;
	cut.ops = op;
	return op;
}

/* bury - move name into the graveyard; its grave name in grave, or -errno */
static int bury(const char *name, char grave[64])
{
	char to[PATH_MAX];

	snprintf(grave, 64, "%lu", ++cut.graves);
	snprintf(to, sizeof(to), GRAVE "/%s", grave);
	return renameat(cut.root, name, cut.root, to) < 0 ? -errno : 0;
}

/* rm_tree - remove name under dirfd, recursively */
static void rm_tree(int dirfd, const char *name)
{
	struct dirent *e;
	DIR *d;
	int fd;

	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return;
	if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			rm_tree(fd, e->d_name);
	closedir(d);
	unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* unbury - remove a grave for good */
static void unbury(const char *grave)
{
	char name[PATH_MAX];

	if (grave[0] == '\0')
		return;
	snprintf(name, sizeof(name), GRAVE "/%s", grave);
	rm_tree(cut.root, name);
}

/* fs_get - the state of the backing file open as fd, made if missing */
static struct fstate *fs_get(int fd)
{
	char proc[64];
	struct fstate *fs;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return NULL;
	for (fs = cut.files; fs; fs = fs->next)
		if (fs->dev == st.st_dev && fs->ino == st.st_ino)
			return fs;
	if ((fs = calloc(1, sizeof(*fs))) == NULL)
		abort();
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if ((fs->fd = open(proc, O_RDWR | O_CLOEXEC)) < 0) {
		free(fs);
		return NULL;
	}
	fs->dev = st.st_dev;
	fs->ino = st.st_ino;
	fs->durable = st.st_size;
	fs->next = cut.files;
	cut.files = fs;
	return fs;
}

/* fs_clean - forget the pending changes of fs: it is durable as it is */
static void fs_clean(struct fstate *fs)
{
	struct stat st;

	while (fs->undo) {
		struct undo *u = fs->undo;

		fs->undo = u->next;
		free(u);
	}
	if (fstat(fs->fd, &st) == 0)
		fs->durable = st.st_size;
}

/* fs_drop - free fs when no handle holds it and nothing is pending */
static void fs_drop(struct fstate *fs)
{
	struct fstate **p;
	struct stat st;

	if (fs->refs > 0 || fs->undo || fstat(fs->fd, &st) < 0 || st.st_size != fs->durable)
		return;
	for (p = &cut.files; *p; p = &(*p)->next)
		if (*p == fs) {
			*p = fs->next;
			break;
		}
	close(fs->fd);
	free(fs);
}

/* fs_save - keep the durable bytes in [off, off + len) before a change */
static int fs_save(struct fstate *fs, off_t off, size_t len)
{
	struct undo *u;
	ssize_t n;

	if (off >= fs->durable)
		return 0;
	if ((off_t)len > fs->durable - off)
		len = (size_t)(fs->durable - off);
	if ((u = malloc(sizeof(*u) + len)) == NULL)
		abort();
	if ((n = pread(fs->fd, u->data, len, off)) < 0) {
		free(u);
		return -errno;
	}
	/* Past the current end (after a truncate) the bytes were saved then. */
	u->off = off;
	u->len = (size_t)n;
	u->next = fs->undo;
	fs->undo = u;
	return 0;
}

/* fs_dsync - a write of len bytes at off through an O_DSYNC handle is durable */
static void fs_dsync(struct fstate *fs, const char *buf, size_t len, off_t off)
{
	struct undo *u;

	for (u = fs->undo; u; u = u->next) {
		off_t lo = off > u->off ? off : u->off;
		off_t hi = off + (off_t)len < u->off + (off_t)u->len ? off + (off_t)len
								      : u->off + (off_t)u->len;

		if (lo < hi)
			memcpy(u->data + (lo - u->off), buf + (lo - off), (size_t)(hi - lo));
	}
	if (off + (off_t)len > fs->durable) {
		if (off > fs->durable) {	/* a hole before it: zeros after a cut */
			size_t gap = (size_t)(off - fs->durable);

			if ((u = calloc(1, sizeof(*u) + gap)) == NULL)
				abort();
			u->off = fs->durable;
			u->len = gap;
			u->next = fs->undo;
			fs->undo = u;
		}
		fs->durable = off + (off_t)len;
	}
}

/* coin - a torn cut's choice: 1 with probability 1/2 */
static int coin(void)
{
	return cut.torn && (rand_r(&cut.seed) & 1);
}

/* rewind_files - every file back to its durable image */
static void rewind_files(unsigned *files, unsigned long *bytes)
{
	struct fstate *fs;

	for (fs = cut.files; fs; fs = fs->next) {
		struct stat st;
		off_t size = fs->durable;
		struct undo *u;

		if (fstat(fs->fd, &st) < 0)
			continue;
		if (fs->undo == NULL && st.st_size == fs->durable)
			continue;
		(*files)++;
		if (coin() && st.st_size > size)
			size = st.st_size;
		if (ftruncate(fs->fd, st.st_size > fs->durable ? st.st_size : fs->durable) < 0)
			continue;
		for (u = fs->undo; u; u = u->next) {
			if (coin())
				continue;
			if (pwrite(fs->fd, u->data, u->len, u->off) == (ssize_t)u->len)
				*bytes += u->len;
		}
		if (ftruncate(fs->fd, size) < 0)
			continue;
	}
}

/* undo_op - undo one name operation; 0 or -1 */
static int undo_op(const struct nsop *op)
{
	char grave[64], name[PATH_MAX];

	switch (op->kind) {
	case NS_CREATE:
	case NS_MKDIR:
	case NS_LINK:
		return bury(op->path, grave) < 0 ? -1 : 0;
	case NS_UNLINK:
		snprintf(name, sizeof(name), GRAVE "/%s", op->grave);
		return renameat(cut.root, name, cut.root, op->path) < 0 ? -1 : 0;
	case NS_RENAME:
		if (renameat(cut.root, op->path, cut.root, op->from) < 0)
			return -1;
		if (op->grave[0] == '\0')
			return 0;
		snprintf(name, sizeof(name), GRAVE "/%s", op->grave);
		return renameat(cut.root, name, cut.root, op->path) < 0 ? -1 : 0;
	}
	return -1;
}

/* do_cut - rewind the backing directory to its durable state, then die */
static void do_cut(void)
{
	unsigned files = 0, undone = 0, failed = 0, kept = 0;
	unsigned long bytes = 0;
	struct nsop *op;

	pthread_mutex_lock(&cut.lock);
	if (!cut.dead) {
		for (op = cut.ops; op; op = op->next) {
			if (coin())
				kept++;
			else if (undo_op(op) == 0)
				undone++;
			else
				failed++;
		}
		rewind_files(&files, &bytes);
		cut.dead = 1;
		fprintf(stderr, "cutfs: cut: %u file(s) rewound (%lu bytes restored), "
			"%u name operation(s) undone, %u kept (torn), %u failed to undo\n",
			files, bytes, undone, kept, failed);
	}
	pthread_mutex_unlock(&cut.lock);
}

/* cut_thread - wait for SIGUSR1 and cut */
static void *cut_thread(void *arg)
{
	sigset_t *set = arg;
	int sig;

	for (;;)
		if (sigwait(set, &sig) == 0 && sig == SIGUSR1)
			do_cut();
	return NULL;
}

/* chown_caller - give a new entry to the process that made it */
static void chown_caller(const char *path)
{
	struct fuse_context *c = fuse_get_context();

	if (fchownat(cut.root, rel(path), c->uid, c->gid, AT_SYMLINK_NOFOLLOW) < 0)
		fprintf(stderr, "cutfs: chown %s: %s\n", path, strerror(errno));
}

/* c_init - FUSE configuration. The kernel's page cache is never
 * invalidated behind the writer's back: FUSE drops a file's cached pages
 * when it is opened (unless kernel_cache), when a getattr reply shows a
 * new mtime (auto_inval_data, libfuse's default) or a new size (unless
 * explicit_inval_data), and a page dropped while a pwrite of it is on its
 * way to us is read again from the old bytes. LMDB reads data.mdb through
 * a map while it writes it with pwrite, and ternq opens it: those stale
 * pages made LMDB copy an old page into new transactions, and
 * power-cut.sh lost acknowledged mail that was never cut (2026-12-02).
 * Every write goes through this process, and a cut ends the mount, so a
 * cached page can never hide one. */
static void *c_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA)
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
	cfg->use_ino = 1;
	cfg->hard_remove = 1;
	cfg->direct_io = 0;
	cfg->kernel_cache = 1;
	cfg->auto_cache = 0;
	cfg->nullpath_ok = 0;
	return NULL;
}

/* c_getattr - stat */
static int c_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (fi)
		rc = fstat(handle_of(fi)->fd, st) < 0 ? -errno : 0;
	else
		rc = fstatat(cut.root, rel(path), st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	return leave(rc);
}

/* c_readlink - readlink */
static int c_readlink(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if ((n = readlinkat(cut.root, rel(path), buf, size - 1)) < 0)
		return leave(-errno);
	buf[n] = '\0';
	return leave(0);
}

/* c_mknod - mknod (FIFOs and files; devices as the kernel allows) */
static int c_mknod(const char *path, mode_t mode, dev_t dev)
{
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (mknodat(cut.root, rel(path), mode, dev) < 0)
		return leave(-errno);
	chown_caller(path);
	ns_push(NS_CREATE, path, NULL);
	return leave(0);
}

/* c_mkdir - mkdir */
static int c_mkdir(const char *path, mode_t mode)
{
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (mkdirat(cut.root, rel(path), mode) < 0)
		return leave(-errno);
	chown_caller(path);
	ns_push(NS_MKDIR, path, NULL);
	return leave(0);
}

/* c_symlink - symlink */
static int c_symlink(const char *target, const char *path)
{
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (symlinkat(target, cut.root, rel(path)) < 0)
		return leave(-errno);
	chown_caller(path);
	ns_push(NS_CREATE, path, NULL);
	return leave(0);
}

/* c_unlink - unlink, keeping the entry for a cut */
static int c_unlink(const char *path)
{
	char grave[64];
	struct stat st;
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (fstatat(cut.root, rel(path), &st, AT_SYMLINK_NOFOLLOW) < 0)
		return leave(-errno);
	if (S_ISDIR(st.st_mode))
		return leave(-EISDIR);
	if ((rc = bury(rel(path), grave)) < 0)
		return leave(rc);
	snprintf(ns_push(NS_UNLINK, path, NULL)->grave, 64, "%s", grave);
	return leave(0);
}

/* empty_dir - 1 if the backing directory name has no entries */
static int empty_dir(const char *name)
{
	struct dirent *e;
	int fd, empty = 1;
	DIR *d;

	if ((fd = openat(cut.root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -EIO;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			empty = 0;
	closedir(d);
	return empty;
}

/* c_rmdir - rmdir, keeping the directory for a cut */
static int c_rmdir(const char *path)
{
	char grave[64];
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if ((rc = empty_dir(rel(path))) <= 0)
		return leave(rc < 0 ? rc : -ENOTEMPTY);
	if ((rc = bury(rel(path), grave)) < 0)
		return leave(rc);
	snprintf(ns_push(NS_UNLINK, path, NULL)->grave, 64, "%s", grave);
	return leave(0);
}

/* c_rename - rename, keeping a replaced entry for a cut */
static int c_rename(const char *from, const char *to, unsigned int flags)
{
	char grave[64] = "";
	struct stat st;
	int rc;

	if ((rc = enter(from)) < 0 || (rc = hidden(to) ? -EACCES : 0) < 0)
		return leave(rc);
	if (flags & ~RENAME_NOREPLACE)
		return leave(-EINVAL);
	if (fstatat(cut.root, rel(from), &st, AT_SYMLINK_NOFOLLOW) < 0)
		return leave(-errno);
	if (fstatat(cut.root, rel(to), &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (flags & RENAME_NOREPLACE)
			return leave(-EEXIST);
		if (S_ISDIR(st.st_mode) && (rc = empty_dir(rel(to))) <= 0)
			return leave(rc < 0 ? rc : -ENOTEMPTY);
		if ((rc = bury(rel(to), grave)) < 0)
			return leave(rc);
	}
	if (renameat(cut.root, rel(from), cut.root, rel(to)) < 0) {
		rc = -errno;
		if (grave[0]) {
			char name[PATH_MAX];

			snprintf(name, sizeof(name), GRAVE "/%s", grave);
			if (renameat(cut.root, name, cut.root, rel(to)) < 0)
				fprintf(stderr, "cutfs: rename back %s: %s\n", to, strerror(errno));
		}
		return leave(rc);
	}
	snprintf(ns_push(NS_RENAME, to, from)->grave, 64, "%s", grave);
	return leave(0);
}

/* c_link - link */
static int c_link(const char *from, const char *to)
{
	int rc;

	if ((rc = enter(from)) < 0 || (rc = hidden(to) ? -EACCES : 0) < 0)
		return leave(rc);
	if (linkat(cut.root, rel(from), cut.root, rel(to), 0) < 0)
		return leave(-errno);
	ns_push(NS_LINK, to, NULL);
	return leave(0);
}

/* c_chmod - chmod (not modelled) */
static int c_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (fi)
		rc = fchmod(handle_of(fi)->fd, mode);
	else
		rc = fchmodat(cut.root, rel(path), mode, 0);
	return leave(rc < 0 ? -errno : 0);
}

/* c_chown - chown (not modelled) */
static int c_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (fi)
		rc = fchown(handle_of(fi)->fd, uid, gid);
	else
		rc = fchownat(cut.root, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);
	return leave(rc < 0 ? -errno : 0);
}

/* truncate_fs - change the size of the file of fs, saving what is cut off */
static int truncate_fs(struct fstate *fs, off_t size)
{
	struct stat st;
	int rc;

	if (fstat(fs->fd, &st) < 0)
		return -errno;
	if (size < st.st_size && (rc = fs_save(fs, size, (size_t)(st.st_size - size))) < 0)
		return rc;
	return ftruncate(fs->fd, size) < 0 ? -errno : 0;
}

/* c_truncate - truncate or ftruncate */
static int c_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct fstate *fs;
	int rc, fd;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (fi && handle_of(fi)->fs)
		return leave(truncate_fs(handle_of(fi)->fs, size));
	if ((fd = openat(cut.root, rel(path), O_RDWR | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return leave(-errno);
	rc = (fs = fs_get(fd)) ? truncate_fs(fs, size) : -EIO;
	close(fd);
	if (fs)
		fs_drop(fs);
	return leave(rc);
}

/* open_file - open or create the backing file; the handle in fi */
static int open_file(const char *path, mode_t mode, struct fuse_file_info *fi, int create)
{
	int flags = fi->flags & ~(O_TRUNC | O_NOFOLLOW), rc = 0;
	struct handle *h;
	int fd;

	if ((fd = openat(cut.root, rel(path), flags | O_CLOEXEC | O_NOFOLLOW, mode)) < 0)
		return -errno;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		abort();
	h->fd = fd;
	h->sync = (fi->flags & (O_SYNC | O_DSYNC)) != 0;
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		if ((h->fs = fs_get(fd)) == NULL) {
			rc = -EIO;
			goto fail;
		}
		h->fs->refs++;
		if ((fi->flags & O_TRUNC) && (rc = truncate_fs(h->fs, 0)) < 0)
			goto fail;
	}
	if (create) {
		chown_caller(path);
		ns_push(NS_CREATE, path, NULL);
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
fail:
	if (h->fs) {
		h->fs->refs--;
		fs_drop(h->fs);
	}
	close(fd);
	free(h);
	return rc;
}

/* c_create - open with O_CREAT */
static int c_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct stat st;
	int rc, existed;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	existed = fstatat(cut.root, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0;
	return leave(open_file(path, mode, fi, !existed));
}

/* c_open - open */
static int c_open(const char *path, struct fuse_file_info *fi)
{
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	return leave(open_file(path, 0, fi, 0));
}

/* c_read - pread */
static int c_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	ssize_t n;
	int rc;

	(void)path;
	if ((rc = enter(NULL)) < 0)
		return leave(rc);
	n = pread(handle_of(fi)->fd, buf, size, off);
	return leave(n < 0 ? -errno : (int)n);
}

/* c_write - pwrite, keeping the overwritten durable bytes */
static int c_write(const char *path, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct handle *h = handle_of(fi);
	ssize_t n;
	int rc;

	(void)path;
	if ((rc = enter(NULL)) < 0)
		return leave(rc);
	if (h->fs == NULL)
		return leave(-EBADF);
	if ((rc = fs_save(h->fs, off, size)) < 0)
		return leave(rc);
	if ((n = pwrite(h->fd, buf, size, off)) < 0)
		return leave(-errno);
	if (h->sync)
		fs_dsync(h->fs, buf, (size_t)n, off);
	return leave((int)n);
}

/* c_statfs - statvfs of the backing directory */
static int c_statfs(const char *path, struct statvfs *sv)
{
	int rc;

	if ((rc = enter(NULL)) < 0)
		return leave(rc);
	(void)path;
	return leave(fstatvfs(cut.root, sv) < 0 ? -errno : 0);
}

/* c_release - close */
static int c_release(const char *path, struct fuse_file_info *fi)
{
	struct handle *h = handle_of(fi);

	(void)path;
	pthread_mutex_lock(&cut.lock);
	if (h->fs) {
		h->fs->refs--;
		if (!cut.dead)
			fs_drop(h->fs);
	}
	close(h->fd);
	free(h);
	return leave(0);
}

/* c_fsync - fsync or fdatasync: the file's bytes and size are durable */
static int c_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct handle *h = handle_of(fi);
	struct fstate *fs;
	int rc;

	(void)path;
	(void)datasync;
	if ((rc = enter(NULL)) < 0)
		return leave(rc);
	if ((fs = h->fs) == NULL) {	/* read-only handle: pending writes of another */
		if ((fs = fs_get(h->fd)) == NULL)
			return leave(-EIO);
		fs_clean(fs);
		fs_drop(fs);
		return leave(0);
	}
	fs_clean(fs);
	return leave(0);
}

/* c_opendir - opendir */
static int c_opendir(const char *path, struct fuse_file_info *fi)
{
	DIR *d;
	int rc, fd;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if ((fd = openat(cut.root, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return leave(-errno);
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return leave(-errno);
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	return leave(0);
}

/* c_readdir - every entry at once (the library pages them) */
static int c_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		     struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	struct dirent *e;
	int rc, top = strcmp(rel(path), ".") == 0;

	(void)off;
	(void)flags;
	if ((rc = enter(NULL)) < 0)
		return leave(rc);
	rewinddir(d);
	while ((e = readdir(d)) != NULL) {
		struct stat st = {.st_ino = e->d_ino, .st_mode = (mode_t)DTTOIF(e->d_type)};

		if (top && strcmp(e->d_name, GRAVE) == 0)
			continue;
		if (fill(buf, e->d_name, &st, 0, 0))
			break;
	}
	return leave(0);
}

/* c_releasedir - closedir */
static int c_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	closedir((DIR *)(uintptr_t)fi->fh);
	return 0;
}

/* c_fsyncdir - the pending name operations in this directory are durable
 * (an operation on two directories once both were fsynced) */
static int c_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct nsop **p = &cut.ops;
	struct stat st;
	int rc;

	(void)path;
	(void)datasync;
	if ((rc = enter(NULL)) < 0)
		return leave(rc);
	if (fstat(dirfd((DIR *)(uintptr_t)fi->fh), &st) < 0)
		return leave(-errno);
	while (*p) {
		struct nsop *op = *p;

		if (op->dir[0] == st.st_ino)
			op->synced[0] = 1;
		if (op->dir[1] == st.st_ino)
			op->synced[1] = 1;
		if (op->synced[0] && op->synced[1]) {
			*p = op->next;
			if (op->kind == NS_UNLINK || op->kind == NS_RENAME)
				unbury(op->grave);
			free(op);
		} else {
			p = &op->next;
		}
	}
	return leave(0);
}

/* c_utimens - utimensat (not modelled) */
static int c_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	int rc;

	if ((rc = enter(path)) < 0)
		return leave(rc);
	if (fi)
		rc = futimens(handle_of(fi)->fd, tv);
	else
		rc = utimensat(cut.root, rel(path), tv, AT_SYMLINK_NOFOLLOW);
	return leave(rc < 0 ? -errno : 0);
}

/* c_fallocate - mode 0 only (allocation changes no durable byte) */
static int c_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	int rc;

	(void)path;
	if ((rc = enter(NULL)) < 0)
		return leave(rc);
	if (mode != 0)
		return leave(-EOPNOTSUPP);
	rc = posix_fallocate(handle_of(fi)->fd, off, len);
	return leave(-rc);
}

static const struct fuse_operations ops = {
	.init = c_init,
	.getattr = c_getattr,
	.readlink = c_readlink,
	.mknod = c_mknod,
	.mkdir = c_mkdir,
	.symlink = c_symlink,
	.unlink = c_unlink,
	.rmdir = c_rmdir,
	.rename = c_rename,
	.link = c_link,
	.chmod = c_chmod,
	.chown = c_chown,
	.truncate = c_truncate,
	.open = c_open,
	.read = c_read,
	.write = c_write,
	.statfs = c_statfs,
	.release = c_release,
	.fsync = c_fsync,
	.opendir = c_opendir,
	.readdir = c_readdir,
	.releasedir = c_releasedir,
	.fsyncdir = c_fsyncdir,
	.create = c_create,
	.utimens = c_utimens,
	.fallocate = c_fallocate,
};

/* main - parse our options, open the backing directory, serve */
int main(int argc, char **argv)
{
	static sigset_t set;
	char **fargv = calloc((size_t)argc + 1, sizeof(*fargv));
	const char *backing = NULL;
	int fargc = 0, i;
	pthread_t t;

	if (fargv == NULL)
		return 1;
	cut.seed = (unsigned)getpid();
	fargv[fargc++] = argv[0];
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--torn") == 0)
			cut.torn = 1;
		else if (strncmp(argv[i], "--seed=", 7) == 0)
			cut.seed = (unsigned)strtoul(argv[i] + 7, NULL, 10);
		else if (backing == NULL && argv[i][0] != '-')
			backing = argv[i];
		else
			fargv[fargc++] = argv[i];
	}
	if (backing == NULL) {
		fprintf(stderr, "usage: cutfs [--torn] [--seed=N] BACKING MOUNTPOINT [fuse options]\n");
		return 2;
	}
	if ((cut.root = open(backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "cutfs: %s: %s\n", backing, strerror(errno));
		return 1;
	}
	/* What a cut left in the graveyard was never durable. */
	rm_tree(cut.root, GRAVE);
	if (mkdirat(cut.root, GRAVE, 0700) < 0) {
		fprintf(stderr, "cutfs: %s/" GRAVE ": %s\n", backing, strerror(errno));
		return 1;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&t, NULL, cut_thread, &set) != 0)
		return 1;
	umask(0);
	return fuse_main(fargc, fargv, &ops, NULL);
}
