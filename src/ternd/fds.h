/* fds.h - ternd's file descriptor budget (fds.c) */
#ifndef TERN_FDS_H
#define TERN_FDS_H

#include "conf.h"

#define FDS_PER_SESSION 2	/* its socket and a large message's own spool file */
#define FDS_PER_PEER_CONN 2	/* a relay connection's socket and the spool file it sends */
#define FDS_SPARE 64		/* LMDB, log files, DNS lookups, the notify socket, ... */

struct fds_budget {
	long long limit;		/* RLIMIT_NOFILE (the soft limit, once raised) */
	long long reserve;		/* kept from inbound sessions */
	long long per_listener;		/* sessions a listener may hold */
	long long needed;		/* with max_inbound_sessions on every listener */
};

void fds_budget(const struct conf *conf, long long limit, long long open_now, int nlisteners,
		struct fds_budget *b);
void fds_check(const struct conf *conf, void (*warn)(const char *msg, void *arg), void *arg);
void fds_start(const struct conf *conf);
void fds_reload(const struct conf *conf);
long long fds_sessions_max(void);

#endif
