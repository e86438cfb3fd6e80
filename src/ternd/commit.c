/*
 * commit - the committer: the only writer of the queue database and the
 * only appender to spool segments.
 *
 * Group commit: it takes every job queued while it was busy, appends all
 * their small bodies to the current segment in one write, makes that data
 * durable with one fdatasync (plus one fsync of each directory that got a
 * new file), then writes every record in one LMDB transaction, committed
 * synchronously. Only then are the jobs answered, so a session says 250
 * only for a message whose body and records are on stable storage. Any
 * failure fails the whole batch (451 4.3.0) and leaves nothing visible:
 * bytes appended beyond a segment's committed length are garbage that
 * recovery truncates.
 *
 * Two threads make a pipeline of two stages: the appender writes and
 * flushes batch N+1's bodies while the writer commits batch N to LMDB, so
 * a batch costs the longer of the two flushes, not their sum. Each
 * message's body is still durable before its records. The appender starts
 * a new segment only when no batch is in flight: then no segment but the
 * current one has appends that are not committed yet, and a queue change
 * that empties an older segment may remove it (queue_ops never removes
 * the current one). Copy-forward (compact.c) adds its JOB_MOVE jobs to a
 * batch: their bodies go through the same append and flush.
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
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit.h"
#include "compact.h"
#include "log.h"
#include "queue_ops.h"
#include "relay.h"
#include "stats.h"
#include "xalloc.h"
#include "ternd.h"

#define COMMIT_BATCH_LIMIT 1024
#define HIST_RCPTS_MAX 60000		/* recipients listed in an acceptance record */
#define PRUNE_MAX 1000			/* history records dropped per pass */
#define HIST_INDEX_LAG 65536		/* history records left to index when busy */
#define HIST_INDEX_CATCHUP 256		/* past it, indexed per batch beyond its own */
#define HIST_INDEX_QUIET_MS 10		/* no batch for that long: index while idle */

static uint64_t ternd_last_qid;		/* the highest queue id recorded */
static time_t last_reader_check;
static time_t last_prune;
static time_t last_index_warning;
static int appender_waits;		/* the appender is in take_batch (ternd.lock) */
static int hist_unindexed = 1;		/* records may wait for their index (writer) */

static pthread_t appender_thread, writer_thread;

/* commit_submit - queue a job and wait until it is committed (or failed) */
int commit_submit(struct job *job)
{
	job->next = NULL;
	pthread_mutex_lock(&ternd.lock);
	if (ternd.stopping) {
		pthread_mutex_unlock(&ternd.lock);
		snprintf(job->err, sizeof(job->err), "ternd is stopping");
		return job->result = -1;
	}
	sem_init(&job->done, 0, 0);
	*ternd.tail = job;
	ternd.tail = &job->next;
	pthread_cond_signal(&ternd.work);
	pthread_mutex_unlock(&ternd.lock);
	while (sem_wait(&job->done) < 0 && errno == EINTR)
		;
	sem_destroy(&job->done);
	return job->result;
}

/* A batch as the LMDB write function sees it. */
struct batch {
	struct job *jobs[COMMIT_BATCH_LIMIT];
	size_t n;
	uint32_t appended;		/* bodies accepted into the current segment */
	uint64_t appended_bytes;	/* their octets */
	uint32_t moved;			/* bodies copied forward there (compact.c) */
	uint64_t seg_id, seg_length;	/* that segment, and its length after */
	int closes_seg;			/* it filled the segment: no more appends there */
	int in_flight;			/* handed to the writer, not finished */
	uint64_t started;		/* when the appender took it */
	uint64_t unindexed;		/* history records waiting for their index, after */
	char index_err[256];		/* why indexing in the batch failed ("": it did not) */
};

/* The hand-off between the stages: one batch waiting, one being written. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct batch *waiting;		/* appended and flushed, not yet taken */
	int in_flight;			/* batches handed over and not finished */
	int closed;			/* the appender has stopped */
} stage = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
static struct batch batches[2];

/* hist_accept - the history record of an acceptance */
static int hist_accept(struct store_txn *txn, const struct job *j)
{
	struct hist_rec h = {0};
	size_t len = 0, cap = 1;
	int rc;

	for (size_t r = 0; r < j->nrcpts; r++)
		cap += strlen(j->rcpts[r].addr) + 1;
	h.rcpt = xmalloc(cap);
	for (size_t r = 0; r < j->nrcpts; r++) {
		size_t n = strlen(j->rcpts[r].addr);

		if (len + n + 1 > HIST_RCPTS_MAX)
			break;	/* the index gets what a record holds */
		if (len)
			h.rcpt[len++] = '\n';
		memcpy(h.rcpt + len, j->rcpts[r].addr, n);
		len += n;
	}
	h.rcpt[len] = '\0';
	h.kind = HIST_ACCEPT;
	h.time_us = now_us();
	h.size = j->msg->size;
	h.nrcpt = (uint32_t)j->nrcpts;
	memcpy(h.trace_id, j->msg->trace_id, sizeof(h.trace_id));
	memcpy(h.span_id, j->msg->span_id, sizeof(h.span_id));
	memcpy(h.link_trace_id, j->msg->link_trace_id, sizeof(h.link_trace_id));
	memcpy(h.link_span_id, j->msg->link_span_id, sizeof(h.link_span_id));
	memcpy(h.qid, j->msg->qid, sizeof(h.qid));
	h.sender = j->msg->sender;
	h.msgid = (char *)(j->msgid ? j->msgid : "");
	h.client = j->msg->client;
	rc = store_hist_put(txn, &h);
	free(h.rcpt);
	return rc;
}

/* index_step - one store_hist_index call; *left: how many wait then */
static int index_step(struct store_txn *txn, void *arg)
{
	uint64_t *left = arg;
	size_t n;
	int rc = store_hist_index(txn, 0, &n);

	*left = store_hist_unindexed(txn);
	return rc;
}

/* batch_write - every record of the batch, in one transaction */
static int batch_write(struct store_txn *txn, void *arg)
{
	struct batch *b = arg;
	uint64_t last_qid = 0, v, unindexed = store_hist_unindexed(txn);
	int rc;

	b->index_err[0] = '\0';	/* the batches are reused */
	for (size_t i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];

		if (j->kind != JOB_ACCEPT) {
			if ((rc = j->write(txn, j->arg)) != 0)
				return rc;
			continue;
		}
		if ((rc = store_add_msg(txn, j->msg)) != 0)
			return rc;
		for (size_t r = 0; r < j->nrcpts; r++)
			if ((rc = store_put_rcpt(txn, j->msg->qid, &j->rcpts[r])) != 0)
				return rc;
		if ((rc = hist_accept(txn, j)) != 0)
			return rc;
		if (j->write && (rc = j->write(txn, j->arg)) != 0)
			return rc;	/* what goes with the message, atomically */
		/* Queue ids come from MAIL time, commits in any order: keep the highest. */
		if (qid_parse(j->msg->qid, &v) == 0 && v > last_qid)
			last_qid = v;
	}
	if (b->appended) {
		struct store_seg seg = {.id = b->seg_id};

		if ((rc = store_put_meta(txn, "next_seg", b->seg_id)) != 0)
			return rc;
		if ((rc = store_txn_get_seg(txn, b->seg_id, &seg)) != 0 && rc != 1)
			return rc;
		seg.id = b->seg_id;
		store_seg_count(&seg, b->appended, (int64_t)b->appended_bytes);
		seg.length = b->seg_length;
		seg.closed = b->closes_seg;
		if ((rc = store_put_seg(txn, &seg)) != 0)
			return rc;
	}
	if (last_qid > ternd_last_qid && (rc = store_put_meta(txn, "last_qid", last_qid)) != 0)
		return rc;
	rc = store_hist_index_over(txn, HIST_INDEX_LAG, HIST_INDEX_CATCHUP, unindexed,
				   &b->unindexed, b->index_err, sizeof(b->index_err));
	if (rc != 0 && rc != STORE_DROPPED)
		return rc;
	if (last_qid > ternd_last_qid)
		ternd_last_qid = last_qid;	/* the committer is the only writer */
	return 0;
}

/* append_bodies - the small bodies of the batch, in one write; 0 or -1 */
static int append_bodies(struct batch *b, int *own_files)
{
	static struct iovec iov[2 * COMMIT_BATCH_LIMIT];
	size_t total = 0;
	int n = 0;
	uint64_t seg_id, offset;

	*own_files = 0;
	for (size_t i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];

		if (j->kind == JOB_WRITE)
			continue;
		if (j->msg->flags & QMSG_OWNFILE) {
			(*own_files)++;
			continue;
		}
		j->msg->seg_id = spool_segment_id(ternd.spool);
		j->msg->offset = spool_segment_length(ternd.spool) + total;
		for (int k = 0; k < j->nbody; k++) {
			iov[n++] = j->body[k];
			total += j->body[k].iov_len;
		}
		if (j->kind == JOB_MOVE) {
			b->moved++;
			continue;
		}
		b->appended++;
		b->appended_bytes += j->msg->size;
	}
	if (n == 0)
		return 0;
	if (spool_append(ternd.spool, iov, n, total, &seg_id, &offset) < 0)
		return -1;
	b->seg_id = seg_id;
	b->seg_length = spool_segment_length(ternd.spool);
	return 0;
}

/* take_batch - dequeue up to commit_batch_max jobs (waits for one, or
 * until compaction has work); *stop: ternd is stopping */
static size_t take_batch(struct job **jobs, size_t max, int *stop)
{
	size_t n = 0;
	int ms;

	pthread_mutex_lock(&ternd.lock);
	appender_waits = 1;
	for (;;) {
		while (ternd.head == NULL && !ternd.stopping && (ms = compact_wait_ms()) > 0) {
			struct timespec t;

			clock_deadline(&t, ms);
			if (pthread_cond_timedwait(&ternd.work, &ternd.lock, &t) == ETIMEDOUT)
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
		if (ternd.head != NULL || ternd.stopping || compact_wait_ms() == 0)
			break;
	}
	while (ternd.head && n < max) {
		jobs[n++] = ternd.head;
		ternd.head = ternd.head->next;
	}
	if (ternd.head == NULL)
		ternd.tail = &ternd.head;
	*stop = ternd.stopping;
	appender_waits = 0;
	pthread_mutex_unlock(&ternd.lock);
	return n;
}

/* finish - answer every job of the batch */
static void finish(struct job **jobs, size_t n, int result, const char *err)
{
	for (size_t i = 0; i < n; i++) {
		if (jobs[i]->kind == JOB_MOVE) {
			compact_done(jobs[i], result);
			continue;
		}
		jobs[i]->result = result;
		if (result != 0)
			snprintf(jobs[i]->err, sizeof(jobs[i]->err), "%s", err);
		else if (jobs[i]->kind == JOB_ACCEPT) {
			ternd.queued++;
			stats_queue(QSTATE_GONE, QSTATE_QUEUED);
		}
		sem_post(&jobs[i]->done);	/* the job is the session's from here */
	}
	if (result == 0)
		relay_kick();	/* new mail may be due now */
}

static uint64_t last_seg;		/* the highest segment number used */

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

/* hand_over - give an appended batch to the writer */
static void hand_over(struct batch *b)
{
	pthread_mutex_lock(&stage.lock);
	stage_wait(stage.waiting == NULL);
	b->in_flight = 1;
	stage.in_flight++;
	stage.waiting = b;
	pthread_cond_broadcast(&stage.cond);
	pthread_mutex_unlock(&stage.lock);
}

/* rotate_when_idle - start a new segment once the writer has committed
 * everything appended so far */
static void rotate_when_idle(void)
{
	char err[256];

	pthread_mutex_lock(&stage.lock);
	stage_wait(stage.in_flight == 0);
	pthread_mutex_unlock(&stage.lock);
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
	for (unsigned k = 0;; k ^= 1) {
		struct batch *b = &batches[k];
		int own = 0, failed = 0, stop, drained;

		pthread_mutex_lock(&stage.lock);
		stage_wait(!b->in_flight);
		pthread_mutex_unlock(&stage.lock);
		b->n = take_batch(b->jobs, max, &stop);
		drained = 0;
		if (!stop)	/* a pass of copy-forward rides on the batch */
			b->n = compact_jobs(b->jobs, b->n, COMMIT_BATCH_LIMIT, &drained);
		if (drained)
			rotate_drained();
		if (b->n == 0 && stop)
			break;	/* stopping and drained */
		if (b->n == 0)
			continue;
		b->started = now_us();
		b->appended = b->moved = 0;
		b->appended_bytes = 0;
		b->seg_id = b->seg_length = 0;
		b->closes_seg = 0;
		if (append_bodies(b, &own) < 0) {
			failed = 1;
			snprintf(err, sizeof(err), "spool write: %s", strerror(errno));
		}
		if (!failed && spool_sync(ternd.spool) < 0) {
			failed = 1;
			snprintf(err, sizeof(err), "spool fdatasync: %s", strerror(errno));
		}
		if (!failed && own && spool_sync_owndir(ternd.spool) < 0) {
			failed = 1;
			snprintf(err, sizeof(err), "spool directory fsync: %s", strerror(errno));
		}
		if (failed) {
			log_error("commit of %zu job%s failed: %s", b->n, b->n == 1 ? "" : "s", err);
			observe(b);
			finish(b->jobs, b->n, -1, err);
			/* Never append to a segment whose state after an error is unknown. */
			spool_abandon_segment(ternd.spool);
			rotate_when_idle();
			continue;
		}
		b->closes_seg = (b->appended || b->moved) && spool_segment_full(ternd.spool);
		hand_over(b);
		if (b->closes_seg)
			rotate_when_idle();
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

	pthread_mutex_lock(&ternd.lock);
	yes = appender_waits && ternd.head == NULL && !ternd.stopping;
	pthread_mutex_unlock(&ternd.lock);
	pthread_mutex_lock(&stage.lock);
	yes = yes && stage.waiting == NULL;
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

/* writer_main - stage two: each batch's records in one LMDB transaction */
static void *writer_main(void *arg)
{
	char err[256];

	for (;;) {
		struct batch *b;
		int rc, closed, quiet = 0;

		pthread_mutex_lock(&stage.lock);
		if (hist_unindexed && stage.waiting == NULL && !stage.closed) {
			/* Records wait for their index: once no batch has come for
			 * a while. Between the batches of a busy ternd the
			 * appender may wait for jobs for a moment; indexing then
			 * would hold up the next batch. */
			struct timespec t;

			clock_deadline(&t, HIST_INDEX_QUIET_MS);
			quiet = pthread_cond_timedwait(&stage.cond, &stage.lock, &t) == ETIMEDOUT;
		} else {
			stage_wait(stage.waiting != NULL || stage.closed);
		}
		b = stage.waiting;
		stage.waiting = NULL;
		closed = stage.closed;
		pthread_cond_broadcast(&stage.cond);
		pthread_mutex_unlock(&stage.lock);
		if (b == NULL && closed)
			break;	/* the appender stopped and nothing waits */
		if (b == NULL) {
			if (quiet && idle())
				hist_unindexed = index_while_idle() > 0;
			continue;
		}
		rc = store_write(ternd.store, batch_write, b, err, sizeof(err));
		if (rc == STORE_PANIC) {
			finish(b->jobs, b->n, -1, err);
			log_fatal("%s: stopping, so that a restart can recover the queue", err);
		}
		if (rc < 0)
			log_error("commit of %zu job%s failed: %s", b->n, b->n == 1 ? "" : "s", err);
		/* The bodies stay in the segment as unreferenced bytes: it is
		 * still sound to append to. */
		observe(b);
		finish(b->jobs, b->n, rc < 0 ? -1 : 0, err);
		if (rc == 0)
			hist_unindexed = b->unindexed > 0;
		if (b->index_err[0] && time(NULL) - last_index_warning >= 60) {
			last_index_warning = time(NULL);	/* once a minute at most */
			log_warning("history indexing in a commit failed: %s", b->index_err);
		}
		if (rc == 0 && time(NULL) != last_prune) {
			size_t pruned = 0;

			last_prune = time(NULL);	/* at most once a second */
			if (store_write(ternd.store, prune, &pruned, err, sizeof(err)) < 0)
				log_warning("history pruning failed: %s", err);
		}
		pthread_mutex_lock(&stage.lock);
		b->in_flight = 0;
		stage.in_flight--;
		pthread_cond_broadcast(&stage.cond);
		pthread_mutex_unlock(&stage.lock);
	}
	return arg;
}

/* commit_start - start the committer on a fresh segment */
void commit_start(void)
{
	char err[256];

	ternd.head = NULL;
	ternd.tail = &ternd.head;
	if (store_get_meta(ternd.store, "next_seg", &last_seg) < 0
	    || store_get_meta(ternd.store, "last_qid", &ternd_last_qid) < 0)
		log_fatal("cannot read the queue counters");
	compact_start();
	if (segment_rotate(err, sizeof(err)) < 0)
		log_fatal("cannot start a spool segment: %s", err);
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

	rotate_when_idle();
	drop_if_dead(old);
}

/* commit_stop - let the committer drain its queue and stop. A drained
 * queue leaves no spool file behind: the current segment goes too when
 * nothing lives in it (while running, rotate_drained does the same). */
void commit_stop(void)
{
	pthread_mutex_lock(&ternd.lock);
	ternd.stopping = 1;
	pthread_cond_broadcast(&ternd.work);
	pthread_mutex_unlock(&ternd.lock);
	pthread_join(appender_thread, NULL);
	pthread_join(writer_thread, NULL);
	drop_if_dead(spool_segment_id(ternd.spool));
}
