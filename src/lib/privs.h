/*
 * privs - leaving root and the terminal behind.
 *
 * Daemons open their sockets and read their keys as root, then call
 * privs_drop() before serving anyone; after it, getting root back fails.
 * What they create as root in a directory the tern user can write, they
 * create with that user's file system identity (privs_bind_unix,
 * privs_fs_enter) or through a descriptor (privs_own_dir). Before
 * anything, they block the signals they take with sigwait()
 * (privs_signals_block).
 */
#ifndef TERN_PRIVS_H
#define TERN_PRIVS_H

#include <signal.h>
#include <sys/types.h>

/* a saved file system identity and umask (privs_fs_enter/leave) */
struct privs_fs {
	uid_t uid;
	gid_t gid;
	mode_t umask;
	int active;
};

int privs_lookup(const char *user, uid_t *uid, gid_t *gid, char *err, size_t errlen);
int privs_group(const char *group, gid_t *gid, char *err, size_t errlen);
int privs_fs_enter(struct privs_fs *save, uid_t uid, gid_t gid, mode_t mask);
int privs_fs_enter_user(struct privs_fs *save, const char *user, char *err, size_t errlen);
void privs_fs_leave(struct privs_fs *save);
int privs_bind_unix(int fd, const char *path, uid_t uid, gid_t gid, mode_t mode, char *err,
		    size_t errlen);
int privs_open_file(const char *path, int flags, mode_t mode, char *err, size_t errlen);
int privs_drop(const char *user, char *err, size_t errlen);
int privs_own_queue_dir(const char *dir, uid_t uid, gid_t gid, int admin, gid_t admin_gid,
			char *err, size_t errlen);
void privs_signals_block(sigset_t *set);
int privs_daemonize(char *err, size_t errlen);
int privs_own_dir(const char *dir, uid_t uid, gid_t gid, mode_t mode, int take_root, char *err,
		  size_t errlen);

#endif
