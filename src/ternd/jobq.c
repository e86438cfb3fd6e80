/*
 * jobq - a relayed peer's job queue and busy set (see jobq.h).
 *
 * The busy set is an open-addressing hash table (FNV-1a, linear
 * probing) at most a quarter full; a deletion moves up the entries after
 * the hole that probing would no longer find, so that no tombstones pile
 * up under a steady stream of messages.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "jobq.h"
#include "xalloc.h"

/* jobq_init - an empty queue */
void jobq_init(struct jobq *q)
{
	memset(q, 0, sizeof(*q));
	q->jobs = xcalloc(JOBQ_MAX, sizeof(*q->jobs));
	q->busy = xcalloc(JOBQ_BUSY_SLOTS, sizeof(*q->busy));
}

/* jobq_free - release the queue's memory */
void jobq_free(struct jobq *q)
{
	free(q->jobs);
	free(q->busy);
	q->jobs = q->busy = NULL;
}

/* jobq_slot - where qid is in the busy set, or the free slot where it
 * would go */
static size_t jobq_slot(const struct jobq *q, const char *qid)
{
	uint32_t h = 2166136261u;	/* FNV-1a */
	size_t i;

	for (size_t k = 0; k < QID_LEN; k++)
		h = (h ^ (unsigned char)qid[k]) * 16777619u;
	for (i = h & (JOBQ_BUSY_SLOTS - 1); q->busy[i][0] && memcmp(q->busy[i], qid, QID_LEN) != 0;
	     i = (i + 1) & (JOBQ_BUSY_SLOTS - 1))
		;
	return i;
}

/* jobq_offer - queue a message, once: 1 queued now, 0 queued or being
 * delivered already, -1 the queue is full */
int jobq_offer(struct jobq *q, const char *qid)
{
	size_t slot = jobq_slot(q, qid);

	if (q->busy[slot][0] != '\0')
		return 0;
	if (q->nbusy == JOBQ_MAX)
		return -1;
	memcpy(q->busy[slot], qid, QID_LEN + 1);
	q->nbusy++;
	memcpy(q->jobs[(q->head + q->count) % JOBQ_MAX], qid, QID_LEN + 1);
	q->count++;
	return 1;
}

/* jobq_take - the oldest waiting job into qid (still busy until
 * jobq_done); 0 when none waits */
int jobq_take(struct jobq *q, char qid[QID_LEN + 1])
{
	if (q->count == 0)
		return 0;
	memcpy(qid, q->jobs[q->head], QID_LEN + 1);
	q->head = (q->head + 1) % JOBQ_MAX;
	q->count--;
	return 1;
}

/* jobq_done - a message's delivery attempt is over: take it out of the
 * busy set (empty its slot and move up the entries after it that probing
 * would no longer find), so that it may be offered again */
void jobq_done(struct jobq *q, const char *qid)
{
	size_t i = jobq_slot(q, qid), j = i;

	if (q->busy[i][0] == '\0')
		return;
	q->busy[i][0] = '\0';
	q->nbusy--;
	for (;;) {
		size_t home;

		j = (j + 1) & (JOBQ_BUSY_SLOTS - 1);
		if (q->busy[j][0] == '\0')
			return;
		home = jobq_slot(q, q->busy[j]);
		if (home != j) {	/* its probe now stops at the hole: fill it */
			memcpy(q->busy[home], q->busy[j], QID_LEN + 1);
			q->busy[j][0] = '\0';
		}
	}
}

/* jobq_requeue - a job taken but not attempted goes back to the front,
 * still busy */
void jobq_requeue(struct jobq *q, const char *qid)
{
	q->head = (q->head + JOBQ_MAX - 1) % JOBQ_MAX;
	memcpy(q->jobs[q->head], qid, QID_LEN + 1);
	q->count++;
}

/* jobq_due - the recipients of a message due for peer now, in index
 * order, at most max, into todo (room for n); their number */
size_t jobq_due(struct q_rcpt *rcpts, size_t n, const char *peer, uint64_t now, size_t max,
		const struct q_rcpt **todo)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < max; i++)
		if ((rcpts[i].state == RCPT_QUEUED || rcpts[i].state == RCPT_DEFERRED)
		    && rcpts[i].next_us <= now && strcmp(rcpts[i].peer, peer) == 0)
			todo[k++] = &rcpts[i];
	return k;
}
