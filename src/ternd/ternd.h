/*
 * ternd.h - what ternd's threads share: the configuration, the store, the
 * spool, the queue id generator, the committer's job queue (its jobs are
 * commit.h's) and the count of inbound sessions.
 */
#ifndef TERN_TERND_H
#define TERN_TERND_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "clock.h"
#include "conf.h"
#include "qid.h"
#include "queue.h"
#include "spool.h"
#include "store.h"

struct job;

struct ternd {
	struct conf *conf;
	struct store *store;
	struct spool *spool;
	struct qid_gen qids;
	const char *hostname;
	/* who is who (main.c, before dropping privileges): the tern user, its
	 * group, the LMTP socket's group and admin_group when set */
	uid_t uid;
	gid_t gid, lmtp_gid, admin_gid;
	int admin;
	/* committer queue */
	pthread_mutex_t lock;
	pthread_cond_t work, ended;	/* ended: a session has ended */
	struct job *head, **tail;
	/* How far a stop has gone, one stage after the other (written under
	 * lock, read with or without it): TERND_DRAINING from SIGTERM, while
	 * the sessions and the relay end (a failed commit of acknowledged
	 * mail leaves it in the log for the next start rather than hold them
	 * up), TERND_STOPPED from commit_stop (no new job; the committer
	 * drains its queue and ends) */
	_Atomic int stop;
	/* inbound sessions */
	int sessions;
	_Atomic uint64_t queued;	/* messages in the queue */
};

enum { TERND_RUNNING, TERND_DRAINING, TERND_STOPPED };

extern struct ternd ternd;

/* ternd_conf - the current configuration (SIGHUP may replace it; old ones
 * stay allocated until exit, so a pointer taken here stays valid) */
static inline const struct conf *ternd_conf(void)
{
	return __atomic_load_n(&ternd.conf, __ATOMIC_ACQUIRE);
}


#endif
