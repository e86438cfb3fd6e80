/*
 * commit - the committer: the only writer of the queue database and the
 * only appender to spool segments.
 *
 * Group commit, one flush per batch on the acceptance path: the segment is
 * the write-ahead log (wal.c). The appender takes every job queued while it
 * was busy and appends, in one write to the current segment, each accepted
 * message's envelope record (what its LMDB records will hold) followed by
 * its small body; one fdatasync (plus one fsync of each directory that got
 * a new file) makes the batch durable, and its plain acceptances are
 * answered then: a session says 250 only for a message whose body and
 * records are on stable storage, in the log. A failure there fails the
 * batch's acceptances (451 4.3.0; its queue changes need no spool and go
 * on to the writer); the segment is given up and marked closed, so that
 * its records past the checkpoint, never acknowledged, are never replayed,
 * or removed if nothing in it was committed.
 *
 * The writer then records the batch in LMDB, synchronously as ever (the
 * store never runs with MDB_NOSYNC: on a file system that does not keep
 * write order, pages freed and reused could be lost under a durable meta
 * page), but off the reply path, and with every batch that waits for it in
 * the same transaction: at most COMMIT_SLOTS batches are in flight. As
 * their mail is safe in the log, the writer lets them gather (lag_wait:
 * COMMIT_GROUP batches, or COMMIT_LAG_US for the oldest) while mail
 * keeps coming (no pause of COMMIT_IDLE_US), unless a job waits for its
 * answer, the appender waits to rotate, or ternd stops. That transaction
 * moves the segment's committed length, the log's checkpoint;
 * recovery replays the records past it. The relay learns of a message only
 * from LMDB (commit_ready after the commit), so nothing is delivered, and no
 * queue change meets a message, before it is recorded. Jobs that are not
 * plain acceptances (delivery outcomes, ternq operations, notifications
 * that drop their notice) are answered after the LMDB commit, as before. A
 * failed LMDB write of batches that hold acknowledged messages is tried
 * again once a second until it works (a full disk: the storage state, the
 * reserve and the paused relay are storage.c's), or until ternd stops,
 * when the log keeps them for the next start; the checkpoint never passes
 * a record that is not in the database. A start whose replay failed (wal.c)
 * has the writer try it again once a second, for the segments before this
 * run's.
 *
 * The appender starts a new segment only when no batch is in flight: then
 * no segment but the current one has appends that are not committed yet,
 * and a queue change that empties an older segment may remove it
 * (queue_ops never removes the current one). Copy-forward (compact.c)
 * adds its JOB_MOVE jobs to a batch: their bodies go through the same
 * append and flush, each behind a fill record (wal.c), so the log reads on.
 *
 * History records are written with the batch; their lookup index is not
 * (see store_hist.c). The writer adds it when it would otherwise wait: once no
 * batch has come for HIST_INDEX_QUIET_MS, and while no job is queued, one
 * bounded transaction at a time, so that mail arriving meanwhile waits for
 * one at most (segment_rotate's transaction may run alongside: LMDB takes
 * them in turn). Under load that never pauses, once
 * more than HIST_INDEX_LAG records wait, each batch indexes as many as it
 * added, and HIST_INDEX_CATCHUP more, in a transaction nested in its own:
 * the backlog stays bounded and no extra flush is paid. A nested
 * transaction too big for LMDB is dropped and logged; a full map grows it
 * as for any batch; any other error fails the batch, as LMDB may have
 * left the batch's transaction unusable.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commit.h"
#include "compact.h"
#include "fiber.h"
#include "log.h"
#include "queue_ops.h"
#include "ratelimit.h"
#include "stats.h"
#include "storage.h"
#include "wal.h"
#include "xalloc.h"
#include "ternd.h"

#define COMMIT_BATCH_LIMIT 1024
#define COMMIT_SLOTS 16			/* batches in flight: appended, not yet in LMDB */
#define COMMIT_GROUP 12			/* batches waiting that the writer takes at once */
#define COMMIT_LAG_US 25000		/* or once the oldest has waited that long */
#define COMMIT_IDLE_US 2000		/* or once no job has come for that long */
#define COMMIT_RETRY_LINE 60		/* failed LMDB writes of acknowledged mail per log line */
#define PRUNE_MAX 1000			/* history records dropped per pass */
#define HIST_INDEX_LAG 65536		/* history records left to index when busy */
#define HIST_INDEX_CATCHUP 256		/* past it, indexed per batch beyond its own */
#define HIST_INDEX_QUIET_MS 10		/* no batch for that long: index while idle */

/* The committer's queue, and how far a stop has gone, one stage after
 * the other (written under lock, read with or without it): DRAINING from
 * SIGTERM, while the sessions and the relay end (a failed commit of
 * acknowledged mail leaves it in the log for the next start rather than
 * hold them up), STOPPED from commit_stop (no new job; the committer
 * drains its queue and ends). */
enum { TERND_RUNNING, TERND_DRAINING, TERND_STOPPED };
static struct {
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct job *head, **tail;
	_Atomic int stop;
} cq = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};

static uint64_t ternd_last_qid;		/* the highest queue id recorded */
static time_t last_reader_check;
static time_t last_prune;
static time_t last_index_warning;
static int appender_waits;		/* the appender is in take_batch (cq.lock) */
static _Atomic uint64_t appender_idle;	/* since when it waits for jobs, or 0 (cq.lock) */
static int hist_unindexed = 1;		/* records may wait for their index (writer) */

static pthread_t appender_thread, writer_thread;
static struct ratelimit spool_errors = RATELIMIT_INIT;	/* the appender's error lines */

/* the function commit_ready calls (commit_on_ready) */
static void (*ready_fn)(void);

/* commit_on_ready - fn is called after each commit that may have made
 * mail due (the scheduler's sched_kick, registered by main before
 * commit_start): the queue core tells the layer above, never calls it */
void commit_on_ready(void (*fn)(void))
{
	ready_fn = fn;
}

/* commit_ready - a commit may have made mail due: tell the one above */
void commit_ready(void)
{
	if (ready_fn != NULL)
		ready_fn();
}

/* commit_stopped - has commit_stop begun? No job is taken from then on */
int commit_stopped(void)
{
	return cq.stop == TERND_STOPPED;
}

/* commit_post - queue a job without waiting for it: commit_wait (or
 * commit_poll) gives its answer. A session's fiber waits in commit_submit
 * alone; this is for threads. -1 at once when ternd has stopped. */
int commit_post(struct job *job)
{
	job->next = NULL;
	job->posted = 0;
	pthread_mutex_lock(&cq.lock);
	if (cq.stop == TERND_STOPPED) {
		pthread_mutex_unlock(&cq.lock);
		snprintf(job->err, sizeof(job->err), "ternd is stopping");
		return job->result = -1;
	}
	if ((job->fiber = fiber_self()) == NULL)
		sem_init(&job->done, 0, 0);
	job->posted = 1;
	*cq.tail = job;
	cq.tail = &job->next;
	pthread_cond_signal(&cq.work);
	pthread_mutex_unlock(&cq.lock);
	return 0;
}

/* commit_poll - has a posted job been answered? 1 (its result in
 * job->result, the job the caller's again), 0 not yet; a thread's only */
int commit_poll(struct job *job)
{
	if (!job->posted)
		return 1;	/* refused by commit_post */
	if (sem_trywait(&job->done) < 0)
		return 0;
	sem_destroy(&job->done);
	job->posted = 0;
	return 1;
}

/* commit_wait - wait for a posted job's answer; its result */
int commit_wait(struct job *job)
{
	if (!job->posted)
		return job->result;
	if (job->fiber != NULL) {
		fiber_park();	/* its loop serves other sessions meanwhile */
	} else {
		while (sem_wait(&job->done) < 0 && errno == EINTR)
			;
		sem_destroy(&job->done);
	}
	job->posted = 0;
	return job->result;
}

/* commit_submit - queue a job and wait until it is committed (or failed) */
int commit_submit(struct job *job)
{
	if (commit_post(job) < 0)
		return -1;
	return commit_wait(job);
}

/* job_answer - give a finished job back to its submitter, which may
 * free it at once */
void job_answer(struct job *job)
{
	struct fiber *f = job->fiber;

	if (f != NULL)
		fiber_wake(f);
	else
		sem_post(&job->done);
}

/* A batch as the LMDB write function sees it. */
struct batch {
	struct job *jobs[COMMIT_BATCH_LIMIT];
	size_t n;
	struct wal_batch wal;		/* its envelope records */
	uint64_t seg_id, seg_length;	/* the segment logged to, and its length after */
	int closes_seg;			/* it filled the segment: no more appends there */
	int in_flight;			/* handed to the writer, not finished */
	uint64_t started;		/* when the appender took it */
	uint64_t handed;		/* when it was handed to the writer */
	int waits;			/* a job of it waits for the LMDB commit */
};

/* The batches the writer records in one transaction. */
struct group {
	struct batch *b[COMMIT_SLOTS];
	size_t n;
	size_t acked;			/* messages answered from the log */
	uint64_t unindexed;		/* history records waiting for their index, after */
	char index_err[256];		/* why indexing in the batch failed ("": it did not) */
};

/* The hand-off between the stages: batches waiting, in order. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct batch *waiting[COMMIT_SLOTS];	/* appended and flushed, not yet taken */
	size_t nwaiting;
	int in_flight;			/* batches handed over and not finished */
	int rotating;			/* the appender waits for in_flight == 0 */
	int closed;			/* the appender has stopped */
} stage = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
static struct batch batches[COMMIT_SLOTS];

/* index_step - one store_hist_index call; *left: how many wait then */
static int index_step(struct store_txn *txn, void *arg)
{
	uint64_t *left = arg;
	size_t n;
	int rc = store_hist_index(txn, 0, &n);

	*left = store_hist_unindexed(txn);
	return rc;
}

/* batch_write - every record of one batch */
static int batch_write(struct store_txn *txn, struct batch *b, uint64_t *last_qid)
{
	int rc;

	for (size_t i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];

		if (j != NULL && j->write && (rc = j->write(txn, j->arg)) != 0)
			return rc;	/* a queue change, or what goes with a message */
	}
	if ((rc = wal_apply(txn, &b->wal, b->seg_id, last_qid)) != 0)
		return rc;
	if (b->wal.n) {
		struct store_seg seg = {.id = b->seg_id};

		if ((rc = store_put_meta(txn, "next_seg", b->seg_id)) != 0)
			return rc;
		if ((rc = store_txn_get_seg(txn, b->seg_id, &seg)) != 0 && rc != 1)
			return rc;
		seg.id = b->seg_id;
		store_seg_count(&seg, b->wal.bodies, (int64_t)b->wal.body_bytes);
		seg.length = b->seg_length;	/* the log's checkpoint */
		seg.closed = b->closes_seg;
		if ((rc = store_put_seg(txn, &seg)) != 0)
			return rc;
	}
	return 0;
}

/* group_write - every batch of the group, in one transaction */
static int group_write(struct store_txn *txn, void *arg)
{
	struct group *g = arg;
	uint64_t last_qid = 0, unindexed = store_hist_unindexed(txn);
	int rc;

	g->index_err[0] = '\0';	/* the groups are reused */
	for (size_t i = 0; i < g->n; i++)
		if ((rc = batch_write(txn, g->b[i], &last_qid)) != 0)
			return rc;
	if (last_qid > ternd_last_qid && (rc = store_put_meta(txn, "last_qid", last_qid)) != 0)
		return rc;
	rc = store_hist_index_over(txn, HIST_INDEX_LAG, HIST_INDEX_CATCHUP, unindexed,
				   &g->unindexed, g->index_err, sizeof(g->index_err));
	if (rc != 0 && rc != STORE_DROPPED)
		return rc;
	if (last_qid > ternd_last_qid)
		ternd_last_qid = last_qid;	/* the committer is the only writer */
	return 0;
}

/* take_batch - dequeue up to commit_batch_max jobs (waits for one, or
 * until compaction has work); *stop: ternd is stopping */
static size_t take_batch(struct job **jobs, size_t max, int *stop)
{
	size_t n = 0;
	int ms;

	pthread_mutex_lock(&cq.lock);
	appender_waits = 1;
	for (;;) {
		while (cq.head == NULL && cq.stop != TERND_STOPPED
		       && (ms = compact_wait_ms()) > 0) {
			struct timespec t;

			if (!appender_idle) {
				/* no more mail for now: the writer need not wait for it */
				pthread_mutex_lock(&stage.lock);
				appender_idle = now_us();
				pthread_cond_broadcast(&stage.cond);
				pthread_mutex_unlock(&stage.lock);
			}
			clock_deadline(&t, ms);
			if (clock_cond_wait(&cq.work, &cq.lock, &t) == ETIMEDOUT)
				break;
		}
		if (time(NULL) - last_reader_check >= 60) {
			/* Free the reader slots of dead ternq processes, busy or not. */
			int dead = store_reader_check(ternd.store);

			last_reader_check = time(NULL);
			if (dead)
				log_info("cleared %d stale queue database reader%s", dead,
					 dead == 1 ? "" : "s");
		}
		if (cq.head != NULL || cq.stop == TERND_STOPPED || compact_wait_ms() == 0)
			break;
	}
	while (cq.head && n < max) {
		jobs[n++] = cq.head;
		cq.head = cq.head->next;
	}
	if (cq.head == NULL)
		cq.tail = &cq.head;
	*stop = cq.stop == TERND_STOPPED;
	appender_waits = 0;
	appender_idle = 0;
	pthread_mutex_unlock(&cq.lock);
	return n;
}

/* finish - answer every job of the batch not answered yet (NULL: it was,
 * from the log) */
static void finish(struct job **jobs, size_t n, int result, const char *err)
{
	for (size_t i = 0; i < n; i++) {
		if (jobs[i] == NULL)
			continue;
		if (jobs[i]->kind == JOB_MOVE) {
			compact_done(jobs[i], result);
			continue;
		}
		jobs[i]->result = result;
		if (result != 0)
			snprintf(jobs[i]->err, sizeof(jobs[i]->err), "%s", err);
		else if (jobs[i]->kind == JOB_ACCEPT) {
			stats_queued_add(1);
			stats_queue(QSTATE_GONE, QSTATE_QUEUED);
		}
		job_answer(jobs[i]);	/* the job is the session's from here */
	}
	if (result == 0)
		commit_ready();	/* new mail may be due now */
}

static uint64_t last_seg;		/* the highest segment number used */
static uint64_t seg_committed;		/* the last segment a batch committed data in (writer) */
static uint64_t first_seg;		/* the first segment of this run */
static time_t last_replay;		/* when the writer last tried the log's replay */

/* put_next_seg - record a new segment's number and its (empty) bookkeeping */
static int put_next_seg(struct store_txn *txn, void *arg)
{
	const struct store_seg *seg = arg;
	int rc;

	if ((rc = store_put_meta(txn, "next_seg", seg->id)) != 0)
		return rc;
	return store_put_seg(txn, seg);
}

/*
 * segment_rotate - start a fresh segment. Its number is used even if
 * recording it fails (the next batch records it again): a number is never
 * handed out twice, so a new segment file never meets an old one.
 */
static int segment_rotate(char *err, size_t errlen)
{
	struct store_seg seg = {0};

	seg.id = ++last_seg;
	spool_start_segment(ternd.spool, seg.id);
	return store_write(ternd.store, put_next_seg, &seg, err, errlen);
}

/* prune - drop history older than history_retention, a bounded amount */
static int prune(struct store_txn *txn, void *arg)
{
	size_t *n = arg;
	uint64_t keep = (uint64_t)ternd_conf()->ternd.history_retention * 1000, now = now_us();

	return store_hist_prune(txn, now > keep ? now - keep : 0, PRUNE_MAX, n);
}

/* stage_wait - under stage.lock, wait until PRED holds */
#define stage_wait(pred) \
	do { \
		while (!(pred)) \
			pthread_cond_wait(&stage.cond, &stage.lock); \
	} while (0)

/* observe - the batch's metrics: its size and the time from take to answer */
static void observe(const struct batch *b)
{
	metric_observe(stats.commit_seconds, (double)(now_us() - b->started) / 1e6);
	metric_observe(stats.batch, (double)b->n);
}

/* fail_accepts - after the spool failed: answer the batch's acceptances
 * (and end its moves) with err, and keep its queue changes (they need no spool, and have no
 * record in the log) for the writer */
static void fail_accepts(struct batch *b, const char *err)
{
	size_t kept = 0;

	for (size_t i = 0; i < b->n; i++)
		if (b->jobs[i]->kind != JOB_WRITE)	/* an acceptance, or a body moved */
			finish(&b->jobs[i], 1, -1, err);
		else
			b->jobs[kept++] = b->jobs[i];
	b->n = kept;
	wal_reset(&b->wal);	/* no record of it is applied */
}

/* hand_over - give an appended batch to the writer */
static void hand_over(struct batch *b)
{
	b->handed = now_us();
	b->waits = 0;
	for (size_t i = 0; i < b->n; i++)
		b->waits |= b->jobs[i] != NULL;	/* not answered from the log */
	pthread_mutex_lock(&stage.lock);
	b->in_flight = 1;	/* a slot free for it: never more waiting than slots */
	stage.in_flight++;
	stage.waiting[stage.nwaiting++] = b;
	pthread_cond_broadcast(&stage.cond);
	pthread_mutex_unlock(&stage.lock);
}

/* rotate_when_idle - start a new segment once the writer has committed
 * everything appended so far; abandoned: the old one failed, and what it
 * holds past its committed length is never replayed */
static void rotate_when_idle(int abandoned)
{
	uint64_t old = spool_segment_id(ternd.spool);
	char err[256];

	pthread_mutex_lock(&stage.lock);
	stage.rotating = 1;	/* the writer commits at once */
	pthread_cond_broadcast(&stage.cond);
	stage_wait(stage.in_flight == 0);
	stage.rotating = 0;
	pthread_mutex_unlock(&stage.lock);
	if (abandoned && old != seg_committed)
		spool_seg_remove(ternd.spool, old);	/* nothing in it was committed */
	else if (abandoned && wal_abandon(old, err, sizeof(err)) < 0)
		log_error("cannot close spool segment %016" PRIx64 ": %s", old, err);
	if (segment_rotate(err, sizeof(err)) < 0)
		log_error("cannot start a new spool segment: %s", err);
}

static void rotate_drained(void);

/* appender_main - stage one: bodies appended and flushed, batch by batch */
static void *appender_main(void *arg)
{
	size_t max = (size_t)ternd_conf()->ternd.commit_batch_max;
	char err[256];

	if (max > COMMIT_BATCH_LIMIT)
		max = COMMIT_BATCH_LIMIT;
	if (max < 1)
		max = 1;
	for (unsigned k = 0;; k = (k + 1) % COMMIT_SLOTS) {
		struct batch *b = &batches[k];
		int own = 0, failed = 0, stop, drained;

		pthread_mutex_lock(&stage.lock);
		stage_wait(!b->in_flight);
		pthread_mutex_unlock(&stage.lock);
		b->n = take_batch(b->jobs, max, &stop);
		drained = 0;
		if (!stop && !wal_pending())	/* a pass of copy-forward rides on the batch */
			b->n = compact_jobs(b->jobs, b->n, COMMIT_BATCH_LIMIT, &drained);
		if (drained)
			rotate_drained();
		if (b->n == 0 && stop)
			break;	/* stopping and drained */
		if (b->n == 0)
			continue;
		b->started = now_us();
		b->closes_seg = 0;
		b->seg_id = spool_segment_id(ternd.spool);
		for (size_t i = 0; i < b->n; i++)
			own += b->jobs[i]->kind == JOB_ACCEPT && (b->jobs[i]->msg->flags & QMSG_OWNFILE);
		if (wal_append(&b->wal, b->jobs, b->n, err, sizeof(err)) < 0)
			failed = 1;
		b->seg_length = spool_segment_length(ternd.spool);
		if (!failed && spool_sync(ternd.spool) < 0) {
			failed = 1;
			snprintf(err, sizeof(err), "spool fdatasync: %s", strerror(errno));
		}
		if (!failed && own && spool_sync_owndir(ternd.spool) < 0) {
			failed = 1;
			snprintf(err, sizeof(err), "spool directory fsync: %s", strerror(errno));
		}
		if (failed) {
			uint64_t held;

			/* once a minute per cause: a full disk fails every batch */
			if (ratelimit_pass(&spool_errors, err, now_us(), RATELIMIT_MINUTE, &held))
				log_error("commit of %zu job%s failed: %s (%" PRIu64 " more failed "
					  "batches since the last such line)", b->n, b->n == 1 ? "" : "s",
					  err, held);
			observe(b);
			fail_accepts(b, err);
			/* Never append to a segment whose state after an error is
			 * unknown; one still empty stays (spool_abandon_segment). */
			if (spool_abandon_segment(ternd.spool))
				rotate_when_idle(1);
			if (b->n)
				hand_over(b);	/* queue changes need no spool */
			continue;
		}
		/* The batch is in the log, durable: its plain acceptances are
		 * answered now, the LMDB commit follows off the reply path. */
		if (wal_answer(&b->wal, b->jobs, b->n))
			observe(b);
		b->closes_seg = b->wal.n && spool_segment_full(ternd.spool);
		hand_over(b);
		if (b->closes_seg)
			rotate_when_idle(0);
	}
	pthread_mutex_lock(&stage.lock);
	stage.closed = 1;
	pthread_cond_broadcast(&stage.cond);
	pthread_mutex_unlock(&stage.lock);
	return arg;
}

/* idle - no job queued or being appended, no batch waiting: ternd would
 * otherwise wait for mail */
static int idle(void)
{
	int yes;

	pthread_mutex_lock(&cq.lock);
	yes = appender_waits && cq.head == NULL && cq.stop != TERND_STOPPED;
	pthread_mutex_unlock(&cq.lock);
	pthread_mutex_lock(&stage.lock);
	yes = yes && stage.nwaiting == 0;
	pthread_mutex_unlock(&stage.lock);
	return yes;
}

/* index_while_idle - index history records, a transaction at a time,
 * for as long as idle() holds; how many wait then, 0 after an error
 * (logged: tried again after the next batch) */
static uint64_t index_while_idle(void)
{
	uint64_t left = UINT64_MAX;
	char err[256];
	int rc;

	while (left > 0 && idle()) {
		if ((rc = store_write(ternd.store, index_step, &left, err, sizeof(err))) == STORE_PANIC)
			log_fatal("%s: stopping, so that a restart can recover the queue", err);
		if (rc < 0) {
			log_warning("history indexing failed: %s", err);
			return 0;
		}
	}
	return left;
}

/* commit_now - under stage.lock: the batches waiting are recorded now */
static int commit_now(void)
{
	uint64_t idle = appender_idle;

	if (stage.nwaiting == 0 || stage.nwaiting >= COMMIT_GROUP || stage.closed || stage.rotating
	    || (idle && now_us() - idle >= COMMIT_IDLE_US))
		return 1;	/* idle: no batch is coming to join them soon */
	for (size_t i = 0; i < stage.nwaiting; i++)
		if (stage.waiting[i]->waits)
			return 1;	/* a queue change, or a notification: not from the log */
	return now_us() - stage.waiting[0]->handed >= COMMIT_LAG_US;
}

/*
 * lag_wait - under stage.lock: the acknowledged mail of the batches
 * waiting is safe in the log, so their LMDB transaction may wait for more
 * of them (COMMIT_GROUP, or COMMIT_LAG_US) while more are coming: fewer
 * flushes per message under load, at the cost of the relay seeing the
 * mail that much later. Nothing that waits for its answer is held up, and
 * an idle ternd commits after COMMIT_IDLE_US.
 */
static void lag_wait(void)
{
	while (!commit_now()) {
		uint64_t waited = now_us() - stage.waiting[0]->handed;
		struct timespec t;

		clock_deadline(&t, appender_idle ? 1 + COMMIT_IDLE_US / 1000
			       : 1 + (long long)((COMMIT_LAG_US - waited) / 1000));
		clock_cond_wait(&stage.cond, &stage.lock, &t);
	}
}

/* commit_draining - SIGTERM: from now on, mail the database cannot take is
 * left in the log for the next start, so that the sessions and the relay
 * waiting for the committer can end */
void commit_draining(void)
{
	pthread_mutex_lock(&cq.lock);
	if (cq.stop == TERND_RUNNING)
		cq.stop = TERND_DRAINING;
	pthread_mutex_unlock(&cq.lock);
}

/* stopping - has ternd been asked to stop? */
static int stopping(void)
{
	return cq.stop != TERND_RUNNING;
}

/* group_commit - the group's LMDB transaction; a group holding
 * acknowledged mail is tried again, once a second, until it is in or
 * ternd stops (the log keeps it for the next start) */
static int group_commit(struct group *g, char *err, size_t errlen)
{
	size_t jobs = 0;
	int rc;

	for (size_t i = 0; i < g->n; i++)
		jobs += g->b[i]->n;
	for (unsigned tries = 1;; tries++) {
		rc = store_write(ternd.store, group_write, g, err, errlen);
		if (rc == STORE_PANIC) {
			for (size_t i = 0; i < g->n; i++)
				finish(g->b[i]->jobs, g->b[i]->n, -1, err);
			log_fatal("%s: stopping, so that a restart can recover the queue", err);
		}
		if (rc == 0)
			return 0;
		if (g->acked == 0) {
			log_error("commit of %zu job%s failed: %s", jobs, jobs == 1 ? "" : "s", err);
			return rc;
		}
		if (stopping()) {	/* the log keeps it, and the next start replays it */
			wal_set_pending();
			log_warning("commit of %zu job%s failed: %s; %zu acknowledged message%s left "
				    "in the spool log for the next start", jobs, jobs == 1 ? "" : "s",
				    err, g->acked, g->acked == 1 ? "" : "s");
			return rc;
		}
		if (tries % COMMIT_RETRY_LINE == 1)	/* a full disk may last: once a minute */
			log_error("commit of %zu job%s failed: %s; %zu acknowledged message%s only in "
				  "the spool log: trying again every second (%u tries)", jobs,
				  jobs == 1 ? "" : "s", err, g->acked, g->acked == 1 ? "" : "s", tries);
		sleep(1);
	}
}

/* writer_main - stage two: the batches that wait, in one LMDB transaction */
static void *writer_main(void *arg)
{
	static struct group g;
	char err[256];

	for (;;) {
		int rc, closed, quiet = 0;

		pthread_mutex_lock(&stage.lock);
		if (hist_unindexed && stage.nwaiting == 0 && !stage.closed) {
			/* Records wait for their index: once no batch has come for
			 * a while. Between the batches of a busy ternd the
			 * appender may wait for jobs for a moment; indexing then
			 * would hold up the next batch. */
			struct timespec t;

			clock_deadline(&t, HIST_INDEX_QUIET_MS);
			quiet = clock_cond_wait(&stage.cond, &stage.lock, &t) == ETIMEDOUT;
		} else if (wal_pending() && stage.nwaiting == 0 && !stage.closed) {
			struct timespec t;	/* the log waits for its replay: once a second */

			clock_deadline(&t, 1000);
			clock_cond_wait(&stage.cond, &stage.lock, &t);
		} else {
			stage_wait(stage.nwaiting > 0 || stage.closed);
		}
		lag_wait();
		g.n = g.acked = 0;
		for (size_t i = 0; i < stage.nwaiting; i++) {
			g.b[g.n++] = stage.waiting[i];
			g.acked += stage.waiting[i]->wal.acked;
		}
		stage.nwaiting = 0;
		closed = stage.closed;
		pthread_cond_broadcast(&stage.cond);
		pthread_mutex_unlock(&stage.lock);
		if (wal_pending() && !closed && (g.n > 0 || time(NULL) != last_replay)) {
			unsigned n;

			last_replay = time(NULL);	/* before this run's batches */
			if ((n = wal_retry(first_seg)) > 0) {
				for (unsigned i = 0; i < n; i++)
					stats_queue(QSTATE_GONE, QSTATE_QUEUED);
				stats_queued_add(n);
				commit_ready();
			}
		}
		if (g.n == 0 && closed)
			break;	/* the appender stopped and nothing waits */
		if (g.n == 0) {
			if (quiet && idle())
				hist_unindexed = index_while_idle() > 0;
			continue;
		}
		/* On a failure the bodies stay in the segment as unreferenced
		 * bytes: it is still sound to append to. */
		rc = group_commit(&g, err, sizeof(err));
		for (size_t i = 0; i < g.n; i++) {
			if (g.b[i]->wal.acked == 0)
				observe(g.b[i]);
			finish(g.b[i]->jobs, g.b[i]->n, rc < 0 ? -1 : 0, err);
		}
		if (rc == 0) {
			for (size_t i = 0; i < g.acked; i++)
				stats_queue(QSTATE_GONE, QSTATE_QUEUED);
			stats_queued_add(g.acked);
			if (g.acked)
				commit_ready();	/* in LMDB now: the relay may see it */
			hist_unindexed = g.unindexed > 0;
			for (size_t i = 0; i < g.n; i++)
				if (g.b[i]->wal.n)
					seg_committed = g.b[i]->seg_id;
			storage_committed();	/* a failing storage state ends */
		}
		if (g.index_err[0] && time(NULL) - last_index_warning >= 60) {
			last_index_warning = time(NULL);	/* once a minute at most */
			log_warning("history indexing in a commit failed: %s", g.index_err);
		}
		if (rc == 0 && time(NULL) != last_prune) {
			size_t pruned = 0;

			last_prune = time(NULL);	/* at most once a second */
			if (store_write(ternd.store, prune, &pruned, err, sizeof(err)) < 0)
				log_warning("history pruning failed: %s", err);
		}
		pthread_mutex_lock(&stage.lock);
		for (size_t i = 0; i < g.n; i++)
			g.b[i]->in_flight = 0;
		stage.in_flight -= (int)g.n;
		pthread_cond_broadcast(&stage.cond);
		pthread_mutex_unlock(&stage.lock);
	}
	return arg;
}

/* highest_seg - raise *arg to a segment file's number (a spool_file_fn) */
static int highest_seg(const char *name, void *arg)
{
	uint64_t *top = arg, id;
	char *end;

	id = strtoull(name, &end, 16);
	if (*end == '\0' && end != name && id > *top)
		*top = id;
	return 0;
}

/* commit_start - start the committer on a fresh segment */
void commit_start(void)
{
	char err[256];

	cq.head = NULL;
	cq.tail = &cq.head;
	if (store_get_meta(ternd.store, "next_seg", &last_seg) < 0
	    || store_get_meta(ternd.store, "last_qid", &ternd_last_qid) < 0)
		log_fatal("cannot read the queue counters");
	/* Never a number a file has: a log whose replay waits may hold
	 * segments the database never recorded. */
	spool_foreach_seg_file(ternd.spool, highest_seg, &last_seg);
	first_seg = last_seg + 1;
	compact_start();
	if (segment_rotate(err, sizeof(err)) < 0)	/* a full disk: the first batch records it */
		log_warning("cannot record a new spool segment: %s", err);
	if (pthread_create(&writer_thread, NULL, writer_main, NULL) != 0
	    || pthread_create(&appender_thread, NULL, appender_main, NULL) != 0)
		log_fatal("cannot start the committer threads");
}

/* drop_dead_seg - forget the current segment if no message lives in it;
 * seg->id becomes 0 when it stays */
static int drop_dead_seg(struct store_txn *txn, void *arg)
{
	struct store_seg *seg = arg;
	uint64_t id = seg->id;
	int rc = store_txn_get_seg(txn, id, seg);

	if (rc != 0 || seg->live > 0) {
		seg->id = 0;
		return rc == 1 ? 0 : rc;
	}
	return store_del_seg(txn, id);
}

/* drop_if_dead - remove a segment that is not the current one (any
 * more) if no message lives in it */
static void drop_if_dead(uint64_t id)
{
	struct store_seg seg = {.id = id};
	char err[256];

	if (store_write(ternd.store, drop_dead_seg, &seg, err, sizeof(err)) == 0 && seg.id != 0)
		spool_seg_remove(ternd.spool, seg.id);
}

/* rotate_drained - nothing lives in the current segment: a new one, and
 * the old one goes (compact_jobs says when) */
static void rotate_drained(void)
{
	uint64_t old = spool_segment_id(ternd.spool);

	rotate_when_idle(0);
	if (!wal_pending())	/* else the log may hold mail the database lacks */
		drop_if_dead(old);
}

/* commit_stop - let the committer drain its queue and stop. A drained
 * queue leaves no spool file behind: the current segment goes too when
 * nothing lives in it (while running, rotate_drained does the same). */
void commit_stop(void)
{
	pthread_mutex_lock(&cq.lock);
	cq.stop = TERND_STOPPED;
	pthread_cond_broadcast(&cq.work);
	pthread_mutex_unlock(&cq.lock);
	pthread_join(appender_thread, NULL);
	pthread_join(writer_thread, NULL);
	if (!wal_pending())	/* else the log may hold mail the database lacks */
		drop_if_dead(spool_segment_id(ternd.spool));
}
