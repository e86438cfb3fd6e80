/*
 * ternd.h - what ternd's threads share: the configuration, the store, the
 * spool, the queue id generator and the committer's job queue.
 */
#ifndef TERN_TERND_H
#define TERN_TERND_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "clock.h"
#include "conf.h"
#include "qid.h"
#include "queue.h"
#include "spool.h"
#include "store.h"

/* One unit of work for the committer, which is the only LMDB writer. */
enum job_kind { JOB_ACCEPT, JOB_WRITE };

struct job {
	enum job_kind kind;
	struct job *next;
	/* JOB_ACCEPT: a received message; body in memory or in its own file */
	struct q_msg *msg;
	struct q_rcpt *rcpts;
	size_t nrcpts;
	struct iovec body[2];		/* Received: header, then content */
	int nbody;
	const char *msgid;		/* its Message-ID, or "", for the history */
	/* JOB_WRITE: a queue change; JOB_ACCEPT: an optional change made in
	 * the transaction that records the message (write may be NULL) */
	store_write_fn write;
	void *arg;
	/* result, posted on done: each job its own, so that answering a
	 * batch wakes its sessions and no other, without the shared lock */
	sem_t done;
	int result;			/* 0, or -1 with err */
	char err[256];
};

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
	int stopping;
	/* inbound sessions */
	int sessions;
	_Atomic uint64_t queued;	/* messages in the queue */
};

extern struct ternd ternd;

/* ternd_conf - the current configuration (SIGHUP may replace it; old ones
 * stay allocated until exit, so a pointer taken here stays valid) */
static inline const struct conf *ternd_conf(void)
{
	return __atomic_load_n(&ternd.conf, __ATOMIC_ACQUIRE);
}

void commit_start(void);
void commit_stop(void);
int commit_submit(struct job *job);

void listen_start(void);
void listen_stop(void);
void control_setup(void);
void control_start(void);
int recover(char *err, size_t errlen);

#endif
