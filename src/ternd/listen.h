/* listen.h - ternd's LMTP and SMTP listeners */
#ifndef TERN_LISTEN_H
#define TERN_LISTEN_H

#include <stddef.h>
#include <sys/types.h>

int listen_open(const char *spec, uid_t uid, gid_t gid, mode_t mode, int *unix_socket, char *err,
		size_t errlen);
void listen_setup(void);
void listen_start(void);
void listen_stop(void);
int listen_sessions(void);
int listen_wait(long ms);

#endif
