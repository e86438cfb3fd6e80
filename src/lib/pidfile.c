/*
 * pidfile - a daemon's pid file in RUN_DIR (pidfile.h).
 *
 * Never: follow a link or write into a file with other names
 * (privs_open_file), or remove a file this process has not locked.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "pidfile.h"
#include "privs.h"

/* pidfile_lock - open path and lock it; the descriptor, or -1 with err
 * (errno EWOULDBLOCK and the pid it holds when another process has it) */
int pidfile_lock(const char *path, char *err, size_t errlen)
{
	char pid[32] = "";
	ssize_t n;
	int fd;

	if ((fd = privs_open_file(path, O_RDWR | O_CREAT, 0644, err, errlen)) < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	n = read(fd, pid, sizeof(pid) - 1);
	pid[n > 0 ? n : 0] = '\0';
	pid[strcspn(pid, "\n")] = '\0';
	snprintf(err, errlen, "pid %s, %s is locked", pid[0] ? pid : "unknown", path);
	close(fd);
	errno = EWOULDBLOCK;
	return -1;
}

/* pidfile_write - our pid into the locked file (after detaching); 0 or -1 */
int pidfile_write(int fd)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

	return ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n ? -1 : 0;
}

/* pidfile_remove - a clean stop: remove the file while it is still
 * locked, then let go of it */
void pidfile_remove(const char *path, int *fd)
{
	if (*fd < 0)
		return;
	unlink(path);
	close(*fd);
	*fd = -1;
}
