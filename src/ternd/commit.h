/*
 * commit.h - the committer: the only writer of the queue database and the
 * only appender to spool segments. Every other thread changes the queue
 * by submitting a job and waiting for its answer (commit_submit), or, a
 * delivery thread that reads on meanwhile, by posting it and taking the
 * answer later (commit_post, then commit_poll or commit_wait); none opens
 * a write transaction of its own. A job's write function runs inside the
 * committer's transaction: it must be short, never block on I/O or a lock
 * another job's thread may hold, and never submit a job.
 */
#ifndef TERN_COMMIT_H
#define TERN_COMMIT_H

#include <semaphore.h>
#include <stddef.h>
#include <sys/uio.h>

#include "queue.h"
#include "store.h"

/* One unit of work for the committer, which is the only LMDB writer. */
/* JOB_MOVE: a live body copied forward (compact.c), appended like an
 * acceptance's; its write points the message at the copy */
enum job_kind { JOB_ACCEPT, JOB_WRITE, JOB_MOVE };

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
	/* result, answered by job_answer: each job its own, so that
	 * answering a batch wakes its sessions and no other, without the
	 * shared lock; a session's fiber is woken, a thread posted done */
	struct fiber *fiber;
	sem_t done;
	int result;			/* 0, or -1 with err */
	int posted;			/* queued, not yet taken back (commit_wait) */
	char err[256];
};

void commit_on_ready(void (*fn)(void));
void commit_ready(void);
void commit_start(void);
void commit_draining(void);
void commit_stop(void);
int commit_stopped(void);
int commit_submit(struct job *job);
int commit_post(struct job *job);
int commit_poll(struct job *job);
int commit_wait(struct job *job);
void job_answer(struct job *job);

#endif
