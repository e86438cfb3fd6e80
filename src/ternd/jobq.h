/*
 * jobq.h - a relayed peer's job queue: a ring of the queue ids waiting
 * for its delivery threads and the set of those queued or being
 * delivered, so that the scheduler never offers a message twice; and the
 * choice of a message's recipients due for the peer now. Bounded: at
 * most JOBQ_MAX jobs, what does not fit waits in LMDB. Pure: the caller
 * holds the peer's lock; never locks, sleeps, or reads a clock or the
 * store.
 */
#ifndef TERN_JOBQ_H
#define TERN_JOBQ_H

#include <stddef.h>
#include <stdint.h>

#include "qid.h"
#include "queue.h"

#define JOBQ_MAX 1024			/* jobs queued or in delivery, per peer */
#define JOBQ_BUSY_SLOTS (4 * JOBQ_MAX)	/* the busy set's hash table: a power of two */

struct jobq {
	char (*jobs)[QID_LEN + 1];	/* ring of queue ids waiting */
	size_t head, count;
	char (*busy)[QID_LEN + 1];	/* queued or being delivered: not again; a hash
					 * set of JOBQ_BUSY_SLOTS, "" for a free slot */
	size_t nbusy;
};

void jobq_init(struct jobq *q);
void jobq_free(struct jobq *q);
int jobq_offer(struct jobq *q, const char *qid);
int jobq_take(struct jobq *q, char qid[QID_LEN + 1]);
void jobq_done(struct jobq *q, const char *qid);
void jobq_requeue(struct jobq *q, const char *qid);
size_t jobq_due(struct q_rcpt *rcpts, size_t n, const char *peer, uint64_t now, size_t max,
		const struct q_rcpt **todo);

#endif
