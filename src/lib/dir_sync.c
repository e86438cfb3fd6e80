/*
 * dir_sync - make a directory's entries durable: a file or directory just
 * created (or renamed into place) survives a power cut only once the
 * directory holding it is fsynced (POSIX promises no more; tests/fault/cutfs
 * models exactly that). Never creates or removes anything.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dir_sync.h"

/* dir_sync - fsync the directory dir; 0, or -1 with errno */
int dir_sync(const char *dir)
{
	int fd, rc, e;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	rc = fsync(fd);
	e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* dir_sync_parent - fsync the directory that holds path (the working
 * directory for a bare name); 0, or -1 with errno */
int dir_sync_parent(const char *path)
{
	char parent[4096];
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')	/* "a/b/" names b */
		n--;
	while (n > 0 && path[n - 1] != '/')
		n--;
	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n == 0)
		return dir_sync(".");
	if (n >= sizeof(parent)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(parent, path, n);
	parent[n] = '\0';
	return dir_sync(parent);
}
