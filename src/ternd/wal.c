/*
 * wal - the spool segment as ternd's write-ahead log.
 *
 * Every accepted message with its body in memory or in a file of its own
 * gets an envelope record (wal_codec.h: what its queue database records
 * will hold) written before its body in the committer's one write to the
 * current segment. Once that write is fdatasynced (and a new file's
 * directory fsynced), the message is on stable storage whole: the session
 * is answered then (wal_answer). The LMDB transaction that records the
 * batch (wal_apply) follows off the reply path, synchronously as ever, and
 * moves the segment's committed length: that length is the checkpoint,
 * the log up to it is in the database. At start, before anything else
 * looks at the spool, wal_replay reads each segment past its checkpoint,
 * record by record, and commits what the database lacks; the first record
 * whose header, check or body does not verify ends the log (a torn tail),
 * and recovery cuts it off.
 *
 * An acceptance that carries a queue change of its own (a notification,
 * which drops its notice in the same transaction) is not answered from
 * the log: its record says "no replay" and its job waits for LMDB, as every
 * other queue change does. A segment given up after a failed write or
 * sync is marked closed (wal_abandon): its records past the checkpoint were
 * never acknowledged (451) and are never replayed.
 *
 * A body copied forward (compact.c, a JOB_MOVE job) rides in the same
 * write behind a fill record (WAL_FILL: no envelope): the log reads on
 * past it, and replay skips it, since the move is the database's to record
 * (its old copy stays until that commit).
 *
 * Must never answer a job before its record and body are durable, never
 * let the database's checkpoint pass a record that is not in it, never
 * touch a job it answered.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "queue_ops.h"
#include "ternd.h"
#include "wal.h"
#include "xalloc.h"

#define HIST_RCPTS_MAX 60000		/* recipients listed in an acceptance record */

/* wal_reset - forget the batch's records (the next wal_append does it too) */
void wal_reset(struct wal_batch *w)
{
	for (size_t i = 0; i < w->n; i++)
		wal_rec_clear(&w->recs[i]);
	w->n = w->len = 0;
	w->bodies = 0;
	w->body_bytes = 0;
	w->acked = 0;
}

/* job_rec - the record of an acceptance job (pointing into the job), or
 * the fill record of a body moved */
static struct wal_rec job_rec(const struct job *j)
{
	struct wal_rec r = {0};

	if (j->kind == JOB_MOVE) {
		r.flags = WAL_FILL;
		for (int k = 0; k < j->nbody; k++)
			r.body_len += j->body[k].iov_len;
		return r;
	}
	r.flags = j->write ? 0 : WAL_REPLAY;
	r.msg = *j->msg;
	r.rcpts = j->rcpts;
	r.nrcpts = j->nrcpts;
	r.msgid = (char *)(j->msgid ? j->msgid : "");
	if (!(j->msg->flags & QMSG_OWNFILE))
		for (int k = 0; k < j->nbody; k++)
			r.body_len += j->body[k].iov_len;
	return r;
}

/* add_rec - encode job j's record at the end of w->buf, its body at pos
 * past the record; the record's length, 0 if it cannot be one */
static size_t add_rec(struct wal_batch *w, const struct job *j, uint64_t seg_id, uint64_t pos)
{
	struct wal_rec r = job_rec(j);
	size_t need = wal_rec_encode(&r, NULL, 0);

	if (need == 0)
		return 0;
	if (!(r.msg.flags & QMSG_OWNFILE)) {
		r.msg.seg_id = seg_id;
		r.msg.offset = pos + need;	/* the length does not depend on it */
	}
	w->buf = xgrowarray(w->buf, &w->cap, w->len + need, 1);
	if (wal_rec_encode(&r, w->buf + w->len, need) != need)
		return 0;
	w->recs = xgrowarray(w->recs, &w->ncap, w->n + 1, sizeof(*w->recs));
	w->pos = xgrowarray(w->pos, &w->poscap, w->n + 1, sizeof(*w->pos));
	/* what the database transaction gets: checked as recovery checks it */
	if (wal_rec_decode(w->buf + w->len, need, &w->recs[w->n]) < 0)
		return 0;
	w->pos[w->n].len = need;
	w->pos[w->n++].body_at = pos + need;
	w->len += need;
	return need;
}

/*
 * wal_append - the batch's records and small bodies at the end of the
 * current segment, in one write (spool_append); 0, or -1 with err. Nothing
 * is durable before spool_sync.
 */
int wal_append(struct wal_batch *w, struct job **jobs, size_t n, char *err, size_t errlen)
{
	uint64_t seg_id = spool_segment_id(ternd.spool), base = spool_segment_length(ternd.spool);
	uint64_t pos = base, id, off;
	size_t niov = 0, at = 0, r = 0;

	wal_reset(w);
	for (size_t i = 0; i < n; i++) {
		struct job *j = jobs[i];
		size_t len;

		if (j->kind == JOB_WRITE)
			continue;
		if ((len = add_rec(w, j, seg_id, pos)) == 0) {
			snprintf(err, errlen, "%s: its envelope record does not validate", j->msg->qid);
			errno = EINVAL;
			return -1;
		}
		j->msg->seg_id = seg_id;
		j->msg->offset = pos + len;
		pos += len + w->recs[w->n - 1].body_len;
		if (j->kind == JOB_ACCEPT && !(j->msg->flags & QMSG_OWNFILE)) {
			w->bodies++;
			w->body_bytes += j->msg->size;
		}
	}
	if (w->n == 0)
		return 0;
	/* the vector, now that buf has stopped moving: record, body, record, ... */
	w->iov = xgrowarray(w->iov, &w->iovcap, 3 * w->n, sizeof(*w->iov));
	for (size_t i = 0; i < n; i++) {
		struct job *j = jobs[i];

		if (j->kind == JOB_WRITE)
			continue;
		w->iov[niov].iov_base = w->buf + at;
		w->iov[niov++].iov_len = w->pos[r].len;
		at += w->pos[r++].len;
		if (!(j->msg->flags & QMSG_OWNFILE))
			for (int k = 0; k < j->nbody; k++)
				w->iov[niov++] = j->body[k];
	}
	if (spool_append(ternd.spool, w->iov, (int)niov, (size_t)(pos - base), &id, &off) < 0) {
		snprintf(err, errlen, "spool write: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* wal_answer - after the batch's sync: answer every job its record makes
 * durable (a plain acceptance) and take it out of jobs (NULL): from here
 * it is its session's; how many */
size_t wal_answer(struct wal_batch *w, struct job **jobs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct job *j = jobs[i];

		if (j == NULL || j->kind != JOB_ACCEPT || j->write != NULL)
			continue;
		jobs[i] = NULL;
		j->result = 0;
		job_answer(j);
		w->acked++;
	}
	return w->acked;
}

/* hist_accept - the history record of an acceptance */
static int hist_accept(struct store_txn *txn, const struct wal_rec *r)
{
	struct hist_rec h = {0};
	size_t len = 0, cap = 1;
	int rc;

	for (size_t i = 0; i < r->nrcpts; i++)
		cap += strlen(r->rcpts[i].addr) + 1;
	h.rcpt = xmalloc(cap);
	for (size_t i = 0; i < r->nrcpts; i++) {
		size_t n = strlen(r->rcpts[i].addr);

		if (len + n + 1 > HIST_RCPTS_MAX)
			break;	/* the index gets what a record holds */
		if (len)
			h.rcpt[len++] = '\n';
		memcpy(h.rcpt + len, r->rcpts[i].addr, n);
		len += n;
	}
	h.rcpt[len] = '\0';
	h.kind = HIST_ACCEPT;
	h.time_us = now_us();
	h.size = r->msg.size;
	h.nrcpt = (uint32_t)r->nrcpts;
	memcpy(h.trace_id, r->msg.trace_id, sizeof(h.trace_id));
	memcpy(h.span_id, r->msg.span_id, sizeof(h.span_id));
	memcpy(h.link_trace_id, r->msg.link_trace_id, sizeof(h.link_trace_id));
	memcpy(h.link_span_id, r->msg.link_span_id, sizeof(h.link_span_id));
	memcpy(h.qid, r->msg.qid, sizeof(h.qid));
	h.sender = r->msg.sender;
	h.msgid = r->msgid;
	h.client = r->msg.client;
	rc = store_hist_put(txn, &h);
	free(h.rcpt);
	return rc;
}

/* apply_rec - a record's message, recipients and history, its body at
 * body_at in segment seg_id (unless it has a file of its own) */
static int apply_rec(struct store_txn *txn, const struct wal_rec *r, uint64_t seg_id,
		     uint64_t body_at, uint64_t *last_qid)
{
	struct q_msg m = r->msg;
	uint64_t v;
	int rc;

	if (!(m.flags & QMSG_OWNFILE)) {
		m.seg_id = seg_id;
		m.offset = body_at;
	}
	if ((rc = store_add_msg(txn, &m)) != 0)
		return rc;
	for (size_t i = 0; i < r->nrcpts; i++)
		if ((rc = store_put_rcpt(txn, m.qid, &r->rcpts[i])) != 0)
			return rc;
	if ((rc = hist_accept(txn, r)) != 0)
		return rc;
	/* Queue ids come from MAIL time, commits in any order: keep the highest. */
	if (qid_parse(m.qid, &v) == 0 && v > *last_qid)
		*last_qid = v;
	return 0;
}

/* wal_apply - in the committer's transaction: every record of the batch
 * (bodies in segment seg_id); *last_qid rises to the highest queue id */
int wal_apply(struct store_txn *txn, const struct wal_batch *w, uint64_t seg_id,
	      uint64_t *last_qid)
{
	size_t added = 0;
	int rc;

	for (size_t i = 0; i < w->n; i++) {
		if (w->recs[i].flags & WAL_FILL)
			continue;
		if ((rc = apply_rec(txn, &w->recs[i], seg_id, w->pos[i].body_at, last_qid)) != 0)
			return rc;
		added++;
	}
	/* new messages are queued: one move of the count for the batch */
	return queue_count_move(txn, QSTATE_GONE, QSTATE_QUEUED, added);
}

/* mark_closed - a given-up segment: closed, nothing past its length replayed */
static int mark_closed(struct store_txn *txn, void *arg)
{
	struct store_seg seg = {0};
	uint64_t id = *(uint64_t *)arg;
	int rc = store_txn_get_seg(txn, id, &seg);

	if (rc != 0 && rc != 1)
		return rc;
	seg.id = id;
	seg.closed = 1;
	return store_put_seg(txn, &seg);
}

/* wal_abandon - after a failed write or sync, once every batch before it
 * is committed: what the segment holds past its committed length got 451,
 * and is never replayed */
int wal_abandon(uint64_t seg_id, char *err, size_t errlen)
{
	return store_write(ternd.store, mark_closed, &seg_id, err, errlen);
}

/* A segment to replay: its number, and what the replay found. */
struct replay {
	uint64_t id;
	int known;			/* the database has its bookkeeping */
	unsigned replayed, skipped;
	uint64_t from, to;		/* the log past the checkpoint, replayed */
	unsigned char *buf;
	size_t cap;
};

/* body_ok - a record's body (at body_at in segment seg_id, or in its own
 * file) is there, whole, and matches its digest */
static int body_ok(const struct wal_rec *r, uint64_t seg_id, uint64_t body_at)
{
	struct q_msg m = r->msg;

	if (!(m.flags & QMSG_OWNFILE)) {
		m.seg_id = seg_id;
		m.offset = body_at;
	}
	return spool_body_digest(ternd.spool, &m, NULL) == 0;
}

/* read_rec - the record at pos, decoded into r; its length, 0 at the log's end */
static size_t read_rec(int fd, struct replay *p, uint64_t pos, struct wal_rec *r)
{
	unsigned char hdr[WAL_HDR_LEN];
	struct wal_hdr h;
	size_t len;

	if (pread(fd, hdr, sizeof(hdr), (off_t)pos) != (ssize_t)sizeof(hdr)
	    || wal_hdr_decode(hdr, sizeof(hdr), &h) < 0)
		return 0;
	len = WAL_HDR_LEN + (size_t)h.payload_len;
	p->buf = xgrowarray(p->buf, &p->cap, len, 1);
	if (pread(fd, p->buf, len, (off_t)pos) != (ssize_t)len || wal_rec_decode(p->buf, len, r) < 0)
		return 0;
	return len;
}

/* replay_write - one segment's log past its checkpoint, into the database */
static int replay_write(struct store_txn *txn, void *arg)
{
	struct replay *p = arg;
	struct store_seg seg = {0};
	struct q_msg m0 = {0}, found;
	uint64_t pos, last_qid = 0;
	off_t dummy;
	struct stat st;
	int fd, rc = store_txn_get_seg(txn, p->id, &seg);

	p->replayed = p->skipped = 0;
	if (rc != 0 && rc != 1)
		return rc;
	seg.id = p->id;
	if (seg.closed)
		return 0;	/* given up after an error, or full and committed */
	m0.seg_id = p->id;
	if ((fd = spool_open_body(ternd.spool, &m0, &dummy)) < 0)
		return 0;	/* missing: recovery reports it */
	p->from = pos = seg.length;
	for (;;) {
		struct wal_rec r;
		size_t len = read_rec(fd, p, pos, &r);

		if (len == 0)
			break;
		if (r.flags & WAL_FILL) {	/* a body moved: the move's commit is lost */
			if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < pos + len + r.body_len)
				break;	/* torn: the log ends here */
			pos += len + r.body_len;
			wal_rec_clear(&r);
			continue;
		}
		if (!body_ok(&r, p->id, pos + len)) {
			wal_rec_clear(&r);
			break;	/* torn: the log ends here */
		}
		rc = 1;
		if ((r.flags & WAL_REPLAY) && (rc = store_txn_get_msg(txn, r.msg.qid, &found)) == 0)
			q_msg_clear(&found);
		if (rc == STORE_DAMAGED)
			rc = 0;	/* there, if damaged: recovery holds it */
		if (rc == 1 && (r.flags & WAL_REPLAY)) {
			if ((rc = apply_rec(txn, &r, p->id, pos + len, &last_qid)) != 0
			    || (rc = queue_count_move(txn, QSTATE_GONE, QSTATE_QUEUED, 1)) != 0) {
				wal_rec_clear(&r);
				close(fd);
				return rc;
			}
			p->replayed++;
			if (!(r.msg.flags & QMSG_OWNFILE))
				store_seg_count(&seg, 1, (int64_t)r.msg.size);
		} else if (rc != 0 && rc != 1) {
			wal_rec_clear(&r);
			close(fd);
			return rc;
		} else {
			p->skipped++;
		}
		pos += len + r.body_len;
		wal_rec_clear(&r);
	}
	close(fd);
	p->to = pos;
	if (pos == seg.length && p->known)
		return 0;
	seg.length = pos;
	if ((rc = store_put_seg(txn, &seg)) != 0)
		return rc;
	/* a segment the database did not know: its number is used */
	return p->known ? 0 : store_put_meta(txn, "next_seg", p->id);
}

/* The segments to replay. */
struct replay_list {
	struct replay *s;
	size_t n, cap;
	uint64_t next_seg;		/* the highest segment number recorded */
};

/* add_seg - a segment to replay */
static void add_seg(struct replay_list *l, uint64_t id, int known)
{
	l->s = xgrowarray(l->s, &l->cap, l->n + 1, sizeof(*l->s));
	memset(&l->s[l->n], 0, sizeof(l->s[l->n]));
	l->s[l->n].id = id;
	l->s[l->n++].known = known;
}

/* known_seg - a segment the database knows */
static int known_seg(const struct store_seg *seg, void *arg)
{
	add_seg(arg, seg->id, 1);
	return 0;
}

/* unknown_seg - a segment file the database does not know: replayed from
 * its start if its number was never recorded (a segment whose start could
 * not be recorded still took acknowledged mail); one with a number below
 * was emptied and forgotten, and recovery removes it */
static int unknown_seg(const char *name, void *arg)
{
	struct replay_list *l = arg;
	char *end;
	uint64_t id = strtoull(name, &end, 16);

	if (*end != '\0' || end == name || id <= l->next_seg)
		return 0;
	for (size_t i = 0; i < l->n; i++)
		if (l->s[i].id == id)
			return 0;
	add_seg(l, id, 0);
	return 0;
}

static _Atomic int replay_pending;	/* acknowledged mail in the log, not in LMDB */

/* wal_replay - every segment's log past its checkpoint into the database:
 * at start, before the rest of recovery, and, if that failed, by the
 * writer until it works (wal_retry), for the segments below the first of
 * this run; 0 with *replayed, or -1 with err */
static int replay(uint64_t below, unsigned *replayed, char *err, size_t errlen)
{
	struct replay_list l = {0};
	int rc = 0;

	*replayed = 0;
	if (store_foreach_seg(ternd.store, known_seg, &l) < 0
	    || store_get_meta(ternd.store, "next_seg", &l.next_seg) < 0) {
		snprintf(err, errlen, "cannot read the segment table");
		free(l.s);
		return -1;
	}
	spool_foreach_seg_file(ternd.spool, unknown_seg, &l);
	for (size_t i = 0; i < l.n && rc == 0; i++) {
		struct replay *p = &l.s[i];

		if (below && p->id >= below)
			continue;	/* this run's: the writer records them */
		if ((rc = store_write(ternd.store, replay_write, p, err, errlen)) < 0)
			break;
		*replayed += p->replayed;
		if (p->replayed || p->skipped)
			log_info("recovery: spool segment %016" PRIx64 ": %u message%s replayed "
				 "from its log (octets %" PRIu64 " to %" PRIu64 "), %u already queued "
				 "or never acknowledged", p->id, p->replayed,
				 p->replayed == 1 ? "" : "s", p->from, p->to, p->skipped);
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.s[i].buf);
	free(l.s);
	return rc < 0 ? -1 : 0;
}

/* wal_replay - at start: replay the log; when the database cannot take it
 * (a full disk), ternd starts anyway and the writer tries again
 * (wal_retry): nothing is cleaned up from the spool meanwhile. 0, or -1
 * with err: the log waits (wal_pending) */
int wal_replay(char *err, size_t errlen)
{
	unsigned n;

	if (replay(0, &n, err, errlen) == 0)
		return 0;
	replay_pending = 1;
	return -1;
}

/* wal_pending - does the log hold acknowledged mail the database lacks? */
int wal_pending(void)
{
	return replay_pending;
}

/* wal_set_pending - the writer gave up recording acknowledged mail (at a
 * stop): the log holds it, and nothing may remove its segment */
void wal_set_pending(void)
{
	replay_pending = 1;
}

/* wal_retry - the writer, once a second while the log waits: replay the
 * segments below the first of this run; how many messages it recorded */
unsigned wal_retry(uint64_t below)
{
	static uint64_t last_line;
	char err[256];
	unsigned n = 0;

	if (replay(below, &n, err, sizeof(err)) == 0) {
		replay_pending = 0;
		log_info("recovery: the spool log is replayed: %u acknowledged message%s recorded",
			 n, n == 1 ? "" : "s");
		return n;
	}
	if (now_us() - last_line >= 60000000) {	/* once a minute */
		last_line = now_us();
		log_error("recovery: the spool log still holds acknowledged mail the queue "
			  "database cannot take: %s; trying again every second", err);
	}
	return 0;
}
