/*
 * privs - leaving root and the terminal behind.
 *
 * Daemons open their sockets and read their keys as root, then call
 * privs_drop() before serving anyone; after it, getting root back fails.
 */
#ifndef TERN_PRIVS_H
#define TERN_PRIVS_H

#include <sys/types.h>

int privs_lookup(const char *user, uid_t *uid, gid_t *gid, char *err, size_t errlen);
int privs_drop(const char *user, char *err, size_t errlen);
int privs_daemonize(char *err, size_t errlen);
int privs_own_dir(const char *dir, uid_t uid, gid_t gid, mode_t mode, int take_root, char *err,
		  size_t errlen);

#endif
