/*
 * compact - copy-forward of spool segments, so that a few long-deferred
 * messages never pin the segments they came in with.
 *
 * Each segment's record counts its live messages and their octets
 * (store_seg: live, live_bytes), moved by every commit that adds or
 * removes a body. About once a second after a batch, the appender reads
 * the segment table (a record per segment, never the queue); a segment
 * other than the current one whose live octets fall under
 * spool_compact_threshold of its length is a victim. Its live messages
 * are found by a walk over the message table in queue id order (the
 * oldest segments hold the oldest mail, so the walk is short for them),
 * at most COMPACT_WALK records read and COMPACT_PASS_BYTES or
 * COMPACT_PASS_MSGS bodies copied per pass: a pass rides on one group
 * commit, so acceptance waits for one pass at most.
 *
 * A pass is a set of JOB_MOVE jobs added to a batch: each body, read from
 * its old place and checked against its digest, is appended to the
 * current segment by the committer's own append path and made durable by
 * the batch's fdatasync; the batch's LMDB transaction then points the
 * message at its new place (move_write), only if it is still where the
 * pass read it. A crash before that commit leaves the copy as bytes past
 * the segment's committed length (recovery cuts them); after it, the old
 * segment's record is gone when nothing lives in it, and its file is
 * removed after the commit (or by recovery, which removes files the
 * database does not know). A relay worker that has the old file open
 * keeps reading it through its descriptor; one that opens it after it
 * went reads the message's record again (compact_open_body).
 *
 * When the queue drains the current segment is rotated away (the
 * appender's rotate_drained): a drained queue keeps no delivered mail.
 *
 * Must never write to the spool or the database outside the committer's
 * batch (the appender's thread builds passes, the writer's finishes
 * them), never move a message whose record changed since the pass read
 * it, and never remove a segment file a committed record points into.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "commit.h"
#include "compact.h"
#include "metrics.h"
#include "log.h"
#include "ternd.h"
#include "xalloc.h"

#define COMPACT_PASS_BYTES (2u << 20)	/* body octets copied per pass */
#define COMPACT_PASS_MSGS 256		/* messages moved per pass */
#define COMPACT_WALK 4096		/* message records read per pass */
#define COMPACT_VICTIMS 64		/* segments a walk empties at most */
#define COMPACT_STUCK 16		/* segments left alone (a damaged body) */
#define COMPACT_SCAN_MS 1000		/* the segment table read at most this often */
#define COMPACT_POLL_MS 2		/* a walk under way: next pass after its commit */

/* One message of a pass: where it was, and what its commit did. */
struct move {
	char qid[QID_LEN + 1];
	uint64_t seg_id, offset, size;	/* where the pass read it */
	unsigned char digest[Q_DIGEST_BYTES];
	struct q_msg *to;		/* its job's message: the new place */
	int applied;			/* move_write pointed it there */
	int freed;			/* ... and nothing lives in seg_id any more */
};

static struct {
	/* the appender's, while no pass is in flight */
	struct job jobs[COMPACT_PASS_MSGS];
	struct q_msg msgs[COMPACT_PASS_MSGS];
	struct move moves[COMPACT_PASS_MSGS];
	unsigned char *buf;
	size_t cap, used, n;
	uint64_t victims[COMPACT_VICTIMS];
	uint32_t left[COMPACT_VICTIMS];	/* their live messages not yet taken */
	size_t nvictims;
	uint64_t stuck[COMPACT_STUCK];
	size_t nstuck;
	char pos[QID_LEN + 1];		/* where the walk is */
	int walking, dirty;
	long long last_scan_ms;
	/* the writer's, while a pass is in flight */
	size_t finished;
	atomic_int in_flight;
} pass;

/* threshold - spool_compact_threshold; 0: off */
static double threshold(void)
{
	return ternd_conf()->ternd.spool_compact_threshold;
}

/* victim_index - the victim slot of a segment, or -1 */
static int victim_index(uint64_t id)
{
	for (size_t i = 0; i < pass.nvictims; i++)
		if (pass.victims[i] == id)
			return (int)i;
	return -1;
}

/* stuck - is a segment left alone */
static int stuck(uint64_t id)
{
	for (size_t i = 0; i < pass.nstuck; i++)
		if (pass.stuck[i] == id)
			return 1;
	return 0;
}

/* A scan of the segment table. */
struct scan {
	uint64_t current;
	int current_dead;		/* the current segment's record says: none live */
};

/* scan_seg - pick a segment as a victim, note the current one's state */
static int scan_seg(const struct store_seg *seg, void *arg)
{
	struct scan *s = arg;
	double t = threshold();

	if (seg->id == s->current) {
		s->current_dead = seg->live == 0;
		return 0;
	}
	if (t <= 0 || seg->live == 0 || seg->length == 0 || stuck(seg->id)
	    || seg->live_bytes == STORE_SEG_BYTES_UNKNOWN
	    || (double)seg->live_bytes >= t * (double)seg->length)
		return 0;
	pass.victims[pass.nvictims] = seg->id;
	pass.left[pass.nvictims] = seg->live;
	return ++pass.nvictims == COMPACT_VICTIMS;
}

/* take - a walk step: a message of a victim goes into the pass; stops
 * before the one that would not fit */
static int take(const struct q_msg *m, void *arg)
{
	int v = (m->flags & QMSG_OWNFILE) ? -1 : victim_index(m->seg_id);
	struct move *mv;

	(void)arg;
	if (v < 0)
		return 0;
	if (pass.n == COMPACT_PASS_MSGS
	    || (pass.n > 0 && pass.used + m->size > COMPACT_PASS_BYTES))
		return 1;
	mv = &pass.moves[pass.n++];
	memcpy(mv->qid, m->qid, sizeof(mv->qid));
	mv->seg_id = m->seg_id;
	mv->offset = m->offset;
	mv->size = m->size;
	memcpy(mv->digest, m->digest, sizeof(mv->digest));
	pass.used += m->size;
	if (pass.left[v] > 0)
		pass.left[v]--;
	return 0;
}

/* walk_done - every victim's live messages taken */
static int walk_done(void)
{
	for (size_t i = 0; i < pass.nvictims; i++)
		if (pass.left[i] > 0)
			return 0;
	return 1;
}

/* read_body - a move's body from its old place into buf; 0, or -1 when
 * it is gone (moved or delivered meanwhile) or does not match its digest */
static int read_body(struct move *mv, unsigned char *buf)
{
	unsigned char digest[Q_DIGEST_BYTES];
	struct q_msg m = {.seg_id = mv->seg_id, .offset = mv->offset};
	uint64_t got = 0;
	off_t off;
	int fd = spool_open_body(ternd.spool, &m, &off);

	if (fd < 0)
		return -1;
	while (got < mv->size) {
		ssize_t n = pread(fd, buf + got, mv->size - got, off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (uint64_t)n;
	}
	close(fd);
	if (got < mv->size)
		return -1;
	crypto_generichash(digest, sizeof(digest), buf, mv->size, NULL, 0);
	if (sodium_memcmp(digest, mv->digest, sizeof(digest)) != 0) {
		if (pass.nstuck < COMPACT_STUCK) {
			pass.stuck[pass.nstuck++] = mv->seg_id;
			log_error("%s: body does not match its digest: spool segment %016" PRIx64
				  " is not compacted", mv->qid, mv->seg_id);
		}
		return -1;
	}
	return 0;
}

/* move_write - in the batch's transaction: point a message at its copy,
 * if it is still where the pass read it, and move the segments' counts */
static int move_write(struct store_txn *txn, void *arg)
{
	struct move *mv = arg;
	struct store_seg from = {.id = mv->seg_id}, to = {.id = mv->to->seg_id};
	struct q_msg m;
	int rc;

	mv->applied = mv->freed = 0;	/* a replayed transaction starts over */
	if ((rc = store_txn_get_msg(txn, mv->qid, &m)) != 0)
		return rc == 1 || rc == STORE_DAMAGED ? 0 : rc;	/* gone, or not ours to move */
	if ((m.flags & QMSG_OWNFILE) || m.seg_id != mv->seg_id || m.offset != mv->offset
	    || m.size != mv->size) {
		q_msg_clear(&m);
		return 0;
	}
	m.seg_id = mv->to->seg_id;
	m.offset = mv->to->offset;
	rc = store_put_msg(txn, &m);
	q_msg_clear(&m);
	if (rc != 0)
		return rc;
	if ((rc = store_txn_get_seg(txn, from.id, &from)) != 0 && rc != 1)
		return rc;
	if (rc == 0) {
		store_seg_count(&from, -1, -(int64_t)mv->size);
		if (from.live == 0 && from.id != spool_segment_id(ternd.spool)) {
			if ((rc = store_del_seg(txn, from.id)) != 0)
				return rc;
			mv->freed = 1;
		} else if ((rc = store_put_seg(txn, &from)) != 0) {
			return rc;
		}
	}
	if ((rc = store_txn_get_seg(txn, to.id, &to)) != 0 && rc != 1)
		return rc;
	to.id = mv->to->seg_id;
	store_seg_count(&to, 1, (int64_t)mv->size);
	if (to.length < mv->to->offset + mv->size)
		to.length = mv->to->offset + mv->size;	/* a batch of moves only */
	if ((rc = store_put_seg(txn, &to)) != 0)
		return rc;
	mv->applied = 1;
	return 0;
}

/* scan - read the segment table: the victims, and whether the current
 * segment is drained */
static void scan(int idle, int *drained)
{
	struct scan s = {.current = spool_segment_id(ternd.spool)};

	pass.nvictims = 0;
	pass.last_scan_ms = ms_now();
	pass.dirty = 0;
	if (store_foreach_seg(ternd.store, scan_seg, &s) < 0)
		return;
	*drained = idle && s.current_dead && spool_segment_length(ternd.spool) > 0;
	if (pass.nvictims > 0) {
		pass.walking = 1;
		pass.pos[0] = '\0';
	}
}

/* fill - the next pass of the walk: its moves, bodies read; how many */
static size_t fill(void)
{
	size_t k = 0;
	int end = store_walk_msgs(ternd.store, pass.pos, COMPACT_WALK, take, NULL);

	if (end != 0 || walk_done())
		pass.walking = 0;	/* at the end (or an error): the next scan says */
	if (pass.n == 0)
		return 0;
	if (pass.cap < pass.used) {
		free(pass.buf);
		pass.cap = pass.used > COMPACT_PASS_BYTES ? pass.used : COMPACT_PASS_BYTES;
		pass.buf = xmalloc(pass.cap);
	}
	pass.used = 0;
	for (size_t i = 0; i < pass.n; i++) {
		struct move *mv = &pass.moves[i];

		if (read_body(mv, pass.buf + pass.used) < 0)
			continue;
		pass.moves[k] = *mv;
		pass.used += mv->size;
		k++;
	}
	pass.n = k;
	return k;
}

/* compact_jobs - the appender, after taking jobs[0..n): add a pass of
 * JOB_MOVE jobs when one is due (up to max jobs in all); *drained: the
 * batch is empty and nothing lives in the current segment, which should
 * be rotated away. The new count of jobs. */
size_t compact_jobs(struct job **jobs, size_t n, size_t max, int *drained)
{
	size_t k, used = 0;

	*drained = 0;
	if (n > 0)
		pass.dirty = 1;
	if (atomic_load_explicit(&pass.in_flight, memory_order_acquire))
		return n;
	if (!pass.walking && (pass.dirty || n == 0) && ms_now() - pass.last_scan_ms >= COMPACT_SCAN_MS)
		scan(n == 0, drained);
	if (!pass.walking || threshold() <= 0)
		return n;
	pass.n = pass.used = 0;
	if ((k = fill()) > max - n)
		k = pass.n = max - n;	/* the rest waits for the next walk */
	if (k == 0)
		return n;
	for (size_t i = 0; i < k; i++) {
		struct job *j = &pass.jobs[i];
		struct move *mv = &pass.moves[i];

		memset(j, 0, sizeof(*j));
		memset(&pass.msgs[i], 0, sizeof(pass.msgs[i]));
		memcpy(pass.msgs[i].qid, mv->qid, sizeof(mv->qid));
		pass.msgs[i].size = mv->size;
		j->kind = JOB_MOVE;
		j->msg = mv->to = &pass.msgs[i];
		j->body[0].iov_base = pass.buf + used;
		j->body[0].iov_len = mv->size;
		j->nbody = 1;
		j->write = move_write;
		j->arg = mv;
		used += mv->size;
		jobs[n++] = j;
	}
	pass.finished = 0;
	atomic_store_explicit(&pass.in_flight, 1, memory_order_release);
	return n;
}

/* compact_wait_ms - how long the idle appender may wait for jobs before
 * compact_jobs has something to do (0: now) */
int compact_wait_ms(void)
{
	long long since;

	if (pass.walking)
		return atomic_load_explicit(&pass.in_flight, memory_order_acquire) ? COMPACT_POLL_MS : 0;
	if (!pass.dirty)
		return 60000;
	since = ms_now() - pass.last_scan_ms;
	return since >= COMPACT_SCAN_MS ? 0 : (int)(COMPACT_SCAN_MS - since);
}

/* compact_done - a JOB_MOVE job's batch has finished (committed when
 * result is 0): once the whole pass has, remove the segment files it
 * emptied and let the appender build the next */
void compact_done(struct job *j, int result)
{
	struct move *mv = j->arg;

	if (result == 0 && mv->applied && mv->freed) {
		if (spool_seg_remove(ternd.spool, mv->seg_id) < 0)
			log_warning("cannot remove spool segment %016" PRIx64 ": %s", mv->seg_id,
				    strerror(errno));
		else
			log_info("spool segment %016" PRIx64 ": live messages copied forward, removed",
				 mv->seg_id);
	}
	if (++pass.finished == pass.n)
		atomic_store_explicit(&pass.in_flight, 0, memory_order_release);
}

/* compact_open_body - spool_open_body, and when the file has gone (a
 * pass moved the message and removed it), once more where the message's
 * record says it is now; m is updated */
int compact_open_body(struct q_msg *m, off_t *offset)
{
	struct q_msg now;
	int fd = spool_open_body(ternd.spool, m, offset), e = errno;

	if (fd >= 0 || e != ENOENT || (m->flags & QMSG_OWNFILE))
		return fd;
	if (store_get(ternd.store, m->qid, &now, NULL, NULL) != 0) {
		errno = e;
		return -1;
	}
	if (now.seg_id != m->seg_id || now.offset != m->offset) {
		m->seg_id = now.seg_id;
		m->offset = now.offset;
		fd = spool_open_body(ternd.spool, m, offset);
	} else {
		errno = e;
	}
	q_msg_clear(&now);
	return fd;
}

/* Segments of the older record layout, and their live octets counted. */
struct recount {
	uint64_t *ids, *bytes;
	size_t n, cap, bcap;
};

/* uncounted - collect a segment whose record does not count its octets */
static int uncounted(const struct store_seg *seg, void *arg)
{
	struct recount *r = arg;

	if (seg->live_bytes != STORE_SEG_BYTES_UNKNOWN)
		return 0;
	r->ids = xgrowarray(r->ids, &r->cap, r->n + 1, sizeof(*r->ids));
	r->bytes = xgrowarray(r->bytes, &r->bcap, r->n + 1, sizeof(*r->bytes));
	r->ids[r->n] = seg->id;
	r->bytes[r->n++] = 0;
	return 0;
}

/* count_msg - a message's octets to its segment, if it is being counted */
static int count_msg(const struct q_msg *m, const struct q_rcpt *rcpts, size_t n, void *arg)
{
	struct recount *r = arg;

	(void)rcpts, (void)n;
	for (size_t i = 0; i < r->n && !(m->flags & QMSG_OWNFILE); i++)
		if (r->ids[i] == m->seg_id)
			r->bytes[i] += m->size;
	return 0;
}

/* put_counts - the counted octets into the records still without them */
static int put_counts(struct store_txn *txn, void *arg)
{
	struct recount *r = arg;
	int rc;

	for (size_t i = 0; i < r->n; i++) {
		struct store_seg seg;

		if ((rc = store_txn_get_seg(txn, r->ids[i], &seg)) == 1)
			continue;
		if (rc != 0)
			return rc;
		if (seg.live_bytes != STORE_SEG_BYTES_UNKNOWN)
			continue;
		seg.live_bytes = r->bytes[i];
		if ((rc = store_put_seg(txn, &seg)) != 0)
			return rc;
	}
	return 0;
}

/* compact_start - before the committer: count the live octets of
 * segments recorded by a release that did not (one walk over the queue,
 * once); until then they are never compacted */
void compact_start(void)
{
	struct recount r = {0};
	char err[256];

	if (store_foreach_seg(ternd.store, uncounted, &r) < 0 || r.n == 0)
		goto out;
	if (store_foreach(ternd.store, count_msg, &r) < 0
	    || store_write(ternd.store, put_counts, &r, err, sizeof(err)) < 0)
		log_warning("cannot count the live octets of %zu spool segment%s: they are not "
			    "compacted", r.n, r.n == 1 ? "" : "s");
	else
		log_info("counted the live octets of %zu spool segment%s", r.n, r.n == 1 ? "" : "s");
out:
	free(r.ids);
	free(r.bytes);
}

/* A sum over the segment table. */
struct usage {
	uint64_t live, length;
};

/* add_usage - one segment into the sums */
static int add_usage(const struct store_seg *seg, void *arg)
{
	struct usage *u = arg;

	u->length += seg->length;
	if (seg->live_bytes != STORE_SEG_BYTES_UNKNOWN)
		u->live += seg->live_bytes;
	return 0;
}

/* compact_usage - octets committed in shared segments, and how many of
 * them are live (one read of the segment table) */
void compact_usage(uint64_t *live, uint64_t *length)
{
	struct usage u = {0, 0};

	store_foreach_seg(ternd.store, add_usage, &u);
	*live = u.live;
	*length = u.length;
}

/* spool_bytes, spool_live - octets committed in shared spool segments,
 * and those of queued messages (one read of the segment table) */
static double spool_bytes(void *arg)
{
	uint64_t live, length;

	(void)arg;
	compact_usage(&live, &length);
	return (double)length;
}

static double spool_live(void *arg)
{
	uint64_t live, length;

	(void)arg;
	compact_usage(&live, &length);
	return (double)live;
}

/* compact_metrics - register the spool's gauges (main, after stats_init) */
void compact_metrics(void)
{
	metric_gauge_fn(metric_new(METRIC_GAUGE, "tern_spool_bytes",
				   "Octets committed in the shared spool segments.", NULL, NULL, 0),
			spool_bytes, NULL);
	metric_gauge_fn(metric_new(METRIC_GAUGE, "tern_spool_live_bytes",
				   "Octets of queued messages in the shared spool segments "
				   "(copy-forward keeps tern_spool_bytes near them).", NULL, NULL, 0),
			spool_live, NULL);
}
