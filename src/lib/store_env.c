/*
 * store_env - opening an LMDB environment the way every tern store does.
 *
 * LMDB 0.9 (Debian 12: 0.9.24) opens its lock file and its meta-page
 * descriptor close-on-exec, but not the data file (data.mdb): without
 * help, that descriptor is inherited by anything the process runs. Must
 * never leave an environment open with an inheritable descriptor.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>

#include "store_env.h"

/* store_env_open - mdb_env_open without locking threads to readers (MDB_NOTLS),
 * files 0660, and the data file close-on-exec; an LMDB or errno code */
int store_env_open(MDB_env *env, const char *dir, int readonly)
{
	mdb_filehandle_t fd;
	int rc;

	if ((rc = mdb_env_open(env, dir, MDB_NOTLS | (readonly ? MDB_RDONLY : 0), 0660)) != 0)
		return rc;
	if ((rc = mdb_env_get_fd(env, &fd)) != 0)
		return rc;
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return errno;
	return 0;
}
