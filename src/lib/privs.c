/*
 * privs - leaving root and the terminal behind, and the few path
 * operations a daemon makes as root.
 *
 * The rule: no path operation as root in a directory another user can
 * write. A socket or pid file in RUN_DIR (the tern user's) is made with
 * the file system identity of that user (setfsuid/setfsgid, per thread),
 * its mode from the umask, so root's privileges never meet a name the
 * tern user controls; a directory is created and given away through a
 * descriptor, never by name; a file opened as root is refused unless it
 * is a regular file with one link.
 *
 * Never called after threads that hold credentials-sensitive state have
 * started: setuid() in glibc applies to all threads, but only threads
 * created after daemonizing survive the fork.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dir_sync.h"
#include "privs.h"

/* privs_lookup - uid and primary gid of user */
int privs_lookup(const char *user, uid_t *uid, gid_t *gid, char *err, size_t errlen)
{
	struct passwd *pw;

	errno = 0;
	if ((pw = getpwnam(user)) == NULL) {
		snprintf(err, errlen, "user \"%s\" does not exist: create it "
			 "(useradd --system --user-group %s) or set user in [global]", user, user);
		return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

/* privs_group - gid of a group name */
int privs_group(const char *group, gid_t *gid, char *err, size_t errlen)
{
	struct group *gr;

	errno = 0;
	if ((gr = getgrnam(group)) == NULL) {
		snprintf(err, errlen, "group \"%s\" does not exist", group);
		return -1;
	}
	*gid = gr->gr_gid;
	return 0;
}

/* privs_fs_enter - make path operations as uid:gid (root only; a no-op
 * otherwise), with umask mask; undone by privs_fs_leave */
int privs_fs_enter(struct privs_fs *save, uid_t uid, gid_t gid, mode_t mask)
{
	save->umask = umask(mask);
	save->active = geteuid() == 0;
	if (!save->active)
		return 0;
	/* setfsgid first: once the fs uid is not 0, it may no longer be set */
	save->gid = (gid_t)setfsgid(gid);
	save->uid = (uid_t)setfsuid(uid);
	if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid) {
		privs_fs_leave(save);
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* privs_fs_enter_user - privs_fs_enter as user, looked up when root: a
 * tool run by root opens the tern user's files as that user */
int privs_fs_enter_user(struct privs_fs *save, const char *user, char *err, size_t errlen)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (uid == 0 && privs_lookup(user, &uid, &gid, err, errlen) < 0)
		return -1;
	if (privs_fs_enter(save, uid, gid, 077) < 0) {
		snprintf(err, errlen, "cannot take the identity of user \"%s\": %s", user,
			 strerror(errno));
		return -1;
	}
	return 0;
}

/* privs_fs_leave - back to the identity and umask before privs_fs_enter */
void privs_fs_leave(struct privs_fs *save)
{
	if (save->active) {
		setfsuid(save->uid);
		setfsgid(save->gid);
		save->active = 0;
	}
	umask(save->umask);
}

/* privs_bind_unix - bind fd to a unix socket at path, owned by uid:gid
 * with mode: made as that user (see the module comment), a stale socket
 * removed first; anything else at path is an error */
int privs_bind_unix(int fd, const char *path, uid_t uid, gid_t gid, mode_t mode, char *err,
		    size_t errlen)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct privs_fs fs;
	struct stat st;
	size_t len = strlen(path);
	int rc = -1, e = 0;

	if (len >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "%s: socket path too long", path);
		return -1;
	}
	memcpy(sun.sun_path, path, len + 1);
	if (privs_fs_enter(&fs, uid, gid, ~mode & 0777) < 0) {
		snprintf(err, errlen, "%s: cannot take the identity of uid %u: %s", path,
			 (unsigned)uid, strerror(errno));
		return -1;
	}
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s: exists and is not a socket: refusing to remove it", path);
		goto out;
	}
	if ((unlink(path) < 0 && errno != ENOENT) || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		e = errno;
		snprintf(err, errlen, "%s: %s%s", path, strerror(e), e == EACCES && fs.active
			 ? " (the socket is made as the tern user: its directory must be writable by it)"
			 : "");
		goto out;
	}
	rc = 0;
out:
	privs_fs_leave(&fs);
	/* Not root: our own socket, in a group we are in; no privilege used. */
	if (rc == 0 && !fs.active && gid != getegid() && lchown(path, (uid_t)-1, gid) < 0) {
		snprintf(err, errlen, "%s: cannot give it to group %u: %s", path, (unsigned)gid,
			 strerror(errno));
		rc = -1;
	}
	return rc;
}

/* privs_open_file - open path (flags with O_CREAT, mode) refusing a link,
 * a FIFO or device (it would block or misbehave) and a file with other
 * names (a hard link to someone else's file) */
int privs_open_file(const char *path, int flags, mode_t mode, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if ((fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode)) < 0) {
		/* ENXIO: a FIFO that nobody reads (O_NONBLOCK kept us from waiting) */
		snprintf(err, errlen, "%s: %s", path, errno == ELOOP
			 ? "is a symbolic link: refusing to follow it" : errno == ENXIO
			 ? "not a regular file: refusing to use it" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		snprintf(err, errlen, "%s: %s", path, !S_ISREG(st.st_mode)
			 ? "not a regular file: refusing to use it"
			 : "has more than one name (a hard link): refusing to use it");
		close(fd);
		return -1;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* privs_drop - become user (and its groups) if we are root; refuse to stay root */
int privs_drop(const char *user, char *err, size_t errlen)
{
	uid_t uid;
	gid_t gid;

	if (geteuid() != 0)
		return 0;
	if (privs_lookup(user, &uid, &gid, err, errlen) < 0)
		return -1;
	if (uid == 0) {
		snprintf(err, errlen, "user \"%s\" is root: set user to an unprivileged account", user);
		return -1;
	}
	if (initgroups(user, gid) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
		snprintf(err, errlen, "cannot become user \"%s\": %s", user, strerror(errno));
		return -1;
	}
	if (setuid(0) == 0) {
		snprintf(err, errlen, "could regain root after dropping privileges");
		return -1;
	}
	return 0;
}

/*
 * privs_signals_block - block the signals a daemon takes with sigwait()
 * (SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2; set: them) and ignore
 * SIGPIPE. First thing in main(), before anything is opened: an admin's
 * reload or a service manager's stop sent once the socket exists must wait
 * for the daemon to take it, not kill it with the default action (status
 * 129, 138). Threads inherit the mask; a fork (privs_daemonize) keeps it.
 */
void privs_signals_block(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGUSR1);
	sigaddset(set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* privs_daemonize - detach from the terminal; the parent exits */
int privs_daemonize(char *err, size_t errlen)
{
	pid_t pid;
	int fd;

	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid > 0)
		_exit(0);
	if (setsid() < 0) {
		snprintf(err, errlen, "setsid: %s", strerror(errno));
		return -1;
	}
	if (chdir("/") < 0 || (fd = open("/dev/null", O_RDWR)) < 0) {
		snprintf(err, errlen, "cannot detach: %s", strerror(errno));
		return -1;
	}
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	return 0;
}

/* make_owned - create dir already owned by uid:gid with mode: made under
 * another name, given away through its descriptor, then renamed into place
 * unless dir exists by then, so that another daemon creating it at the same
 * moment never sees it owned by root; -1 with errno (EEXIST: someone else
 * made it) */
static int make_owned(const char *dir, uid_t uid, gid_t gid, mode_t mode)
{
	char tmp[4096];
	int e, fd = -1;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new.%ld", dir, (long)getpid()) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	rmdir(tmp);	/* left by a crash of a process with our pid, if empty */
	if (mkdir(tmp, 0700) < 0)
		return -1;
	if ((fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0
	    && (geteuid() != 0 || fchown(fd, uid, gid) == 0) && fchmod(fd, mode) == 0
	    && renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_NOREPLACE) == 0) {
		close(fd);
		return 0;
	}
	e = errno;
	if (fd >= 0)
		close(fd);
	rmdir(tmp);
	errno = e;
	return -1;
}

/* privs_own_dir - create dir for the daemon user (uid, gid) with mode, or
 * check that it owns it and give it that group and mode; a root-owned one
 * is taken over when take_root is set (a RUN_DIR made by a service
 * manager). 0, or 1 when an existing directory's group or mode changed
 * (err then says from what), or -1 with err. Every change is made through
 * a descriptor, never by name. */
int privs_own_dir(const char *dir, uid_t uid, gid_t gid, mode_t mode, int take_root, char *err,
		  size_t errlen)
{
	struct stat st;
	int fd, rc = 0, root = geteuid() == 0;

	if (make_owned(dir, uid, gid, mode) == 0)
		return 0;
	if (errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
		return -1;
	}
	/* Following a link is fine only into a directory the user owns:
	 * taking over a root-owned one is done on no link at all. */
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: not a directory", dir);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st.st_uid == 0 && take_root && root && uid != 0) {
		close(fd);
		if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0
		    || fstat(fd, &st) < 0 || st.st_uid != 0 || fchown(fd, uid, gid) < 0
		    || fchmod(fd, mode) < 0) {
			snprintf(err, errlen, "%s: cannot give it to the tern user: %s", dir,
				 errno == ELOOP ? "a symbolic link" : strerror(errno));
			rc = -1;
		}
	} else if (st.st_uid != uid) {
		snprintf(err, errlen,
			 "%s is owned by uid %u, not by the tern user (uid %u): refusing to use it", dir,
			 (unsigned)st.st_uid, (unsigned)uid);
		rc = -1;
	} else if ((st.st_mode & 07777) != mode || st.st_gid != gid) {
		snprintf(err, errlen, "%s: was mode %04o group %u, now %04o group %u", dir,
			 (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid, (unsigned)mode,
			 (unsigned)gid);
		if ((st.st_gid != gid && fchown(fd, (uid_t)-1, gid) < 0) || fchmod(fd, mode) < 0) {
			snprintf(err, errlen, "%s: cannot set group %u and mode %04o: %s", dir,
				 (unsigned)gid, (unsigned)mode, strerror(errno));
			rc = -1;
		} else {
			rc = 1;
		}
	}
	close(fd);
	return rc;
}

/* privs_own_queue_dir - STATE_DIR or SPOOL_DIR, made or checked like
 * privs_own_dir: mode 0700, or 2750 to admin_gid when admin is set (its
 * files, made under umask 027, then inherit that group); rc 1's err says
 * what changed and what it means */
int privs_own_queue_dir(const char *dir, uid_t uid, gid_t gid, int admin, gid_t admin_gid,
			char *err, size_t errlen)
{
	char what[600];
	int rc = privs_own_dir(dir, uid, admin ? admin_gid : gid, admin ? 02750 : 0700, 0, what,
			       sizeof(what));

	/* Its name, just made or made by a run the power cut short, durable
	 * before anything in it is promised. */
	if (rc >= 0 && dir_sync_parent(dir) < 0) {
		snprintf(err, errlen, "%s: cannot fsync the directory holding it: %s", dir,
			 strerror(errno));
		return -1;
	}
	if (rc == 1)
		snprintf(err, errlen, "%s (%s)", what, admin
			 ? "admin_group reads the queue: if an older release made what is "
			 "below it, give that to the group too: chgrp -R, chmod -R g+rX,g-w"
			 : "only root and the tern user reach the queue now; set admin_group "
			 "to let a group read and administer it");
	else
		snprintf(err, errlen, "%s", what);
	return rc;
}
