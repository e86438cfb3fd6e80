/*
 * pidfile - RUN_DIR/NAME.pid: locked (flock) for the daemon's life, its
 * pid in it, removed at a clean stop.
 *
 * The lock is what says the daemon runs: a file left by a crash is not
 * locked, so that a reader (contrib/logrotate/tern, with flock(1)) can
 * tell a live pid from a stale one. Opened as the tern user (RUN_DIR is
 * its): the caller is that user already, or inside privs_fs_enter.
 */
#ifndef TERN_PIDFILE_H
#define TERN_PIDFILE_H

#include <stddef.h>

int pidfile_lock(const char *path, char *err, size_t errlen);
int pidfile_write(int fd);
void pidfile_remove(const char *path, int *fd);

#endif
