/*
 * privs - leaving root and the terminal behind.
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
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* make_owned - create dir already owned by uid:gid: made under another
 * name, given away, then renamed into place unless dir exists by then, so
 * that another daemon creating it at the same moment never sees it owned
 * by root; -1 with errno (EEXIST: someone else made it) */
static int make_owned(const char *dir, uid_t uid, gid_t gid, mode_t mode)
{
	char tmp[4096];
	int e;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new.%ld", dir, (long)getpid()) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	rmdir(tmp);	/* left by a crash of a process with our pid, if empty */
	if (mkdir(tmp, mode) < 0)
		return -1;
	if ((geteuid() != 0 || chown(tmp, uid, gid) == 0)
	    && renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_NOREPLACE) == 0)
		return 0;
	e = errno;
	rmdir(tmp);
	errno = e;
	return -1;
}

/* privs_own_dir - create dir for the daemon user (uid, gid), or check that
 * it owns it; a root-owned one is taken over when take_root is set (a
 * RUN_DIR made by a service manager); -1 with err otherwise */
int privs_own_dir(const char *dir, uid_t uid, gid_t gid, mode_t mode, int take_root, char *err,
		  size_t errlen)
{
	struct stat st;

	if (make_owned(dir, uid, gid, mode) == 0)
		return 0;
	if (errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
		return -1;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: not a directory", dir);
		return -1;
	}
	if (st.st_uid == 0 && take_root && geteuid() == 0 && uid != 0) {
		if (chown(dir, uid, gid) < 0 || chmod(dir, mode) < 0) {
			snprintf(err, errlen, "%s: cannot give it to the tern user: %s", dir,
				 strerror(errno));
			return -1;
		}
		return 0;
	}
	if (st.st_uid != uid) {
		snprintf(err, errlen,
			 "%s is owned by uid %u, not by the tern user (uid %u): refusing to use it", dir,
			 (unsigned)st.st_uid, (unsigned)uid);
		return -1;
	}
	return 0;
}
