/*
 * ternd.h - what ternd's threads share, set up by main: the configuration,
 * the store, the spool, the queue id generator, the host name and the
 * identities.
 */
#ifndef TERN_TERND_H
#define TERN_TERND_H

#include <stdint.h>
#include <sys/types.h>

#include "clock.h"
#include "conf.h"
#include "qid.h"
#include "queue.h"
#include "spool.h"
#include "store.h"

/* Set by main at start (conf again by a reload), read by every layer;
 * what a layer changes at run time is its own (the committer's queue and
 * stop state: commit.c; the inbound sessions: listen.c; the count of
 * queued messages: stats.c). */
struct ternd {
	struct conf *conf;
	struct store *store;
	struct spool *spool;
	struct qid_gen qids;		/* the queue ids (qid.h: its own lock) */
	const char *hostname;
	/* who is who (main.c, before dropping privileges): the tern user, its
	 * group, the LMTP socket's group and admin_group when set */
	uid_t uid;
	gid_t gid, lmtp_gid, admin_gid;
	int admin;
};

extern struct ternd ternd;

/* ternd_conf - the current configuration (SIGHUP may replace it; old ones
 * stay allocated until exit, so a pointer taken here stays valid) */
static inline const struct conf *ternd_conf(void)
{
	return __atomic_load_n(&ternd.conf, __ATOMIC_ACQUIRE);
}


#endif
