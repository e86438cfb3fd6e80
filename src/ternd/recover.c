/*
 * recover - bring the spool in line with the queue database at start.
 *
 * First the spool log is replayed (wal.c): acknowledged messages whose
 * envelope records lie past a segment's committed length are committed.
 * If the database cannot take them (a full disk), ternd starts without
 * them and without touching the spool, and the writer replays them later.
 * Then the database is the truth. Segment bytes beyond a segment's
 * committed length (a torn tail, messages that never got 250) are cut
 * off; segment files and own files the database does not know are
 * removed; empty segments go. A committed body that is missing or short
 * is reported loudly and left for the admin: never padded, never
 * silently dropped.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "queue_ops.h"
#include "recover.h"
#include "stats.h"
#include "ternd.h"
#include "wal.h"
#include "xalloc.h"

struct seg_list {
	uint64_t *ids;
	size_t n, cap;
	int damaged;
	uint64_t *cut;			/* segments that had bytes past their end */
	size_t ncut, cutcap;
};

/* A message whose body is to be checked against its digest. */
struct check {
	struct seg_list *l;
	unsigned checked, bad;
	char (*hold)[QID_LEN + 1];
	size_t nhold, holdcap;
};

/* keep_seg - remember a segment the database knows */
static int keep_seg(const struct store_seg *seg, void *arg)
{
	struct seg_list *l = arg;
	uint64_t was = 0;
	int rc;

	l->ids = xgrowarray(l->ids, &l->cap, l->n + 1, sizeof(*l->ids));
	l->ids[l->n++] = seg->id;
	if (seg->live == 0)
		return 0;	/* removed below */
	rc = spool_seg_truncate(ternd.spool, seg->id, seg->length, &was);
	if (rc == 1) {		/* a crash during an append: check what precedes it */
		log_warning("recovery: spool segment %016" PRIx64 ": cut at offset %" PRIu64
			    ", %" PRIu64 " octet%s past its committed length dropped (a torn "
			    "tail, or mail that never got 250)", seg->id, seg->length,
			    was - seg->length, was - seg->length == 1 ? "" : "s");
		l->cut = xgrowarray(l->cut, &l->cutcap, l->ncut + 1, sizeof(*l->cut));
		l->cut[l->ncut++] = seg->id;
	}
	if (rc < 0) {
		log_error("spool segment %016" PRIx64 " is missing committed data (%s): "
			  "%u queued message%s may have lost their body", seg->id, strerror(errno),
			  seg->live, seg->live == 1 ? "" : "s");
		l->damaged = 1;
	}
	return 0;
}

/* check_one - verify the digest of a message in a segment cut at recovery */
static int check_one(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg)
{
	struct check *c = arg;
	int cut = 0;

	(void)r;
	(void)n;
	for (size_t i = 0; i < c->l->ncut && !(m->flags & QMSG_OWNFILE); i++)
		cut |= m->seg_id == c->l->cut[i];
	if (!cut)
		return 0;
	c->checked++;
	if (spool_body_digest(ternd.spool, m, NULL) != 0) {
		log_error("%s: body does not match its digest: holding it (ternq show %s)",
			  m->qid, m->qid);
		c->bad++;
		c->hold = xgrowarray(c->hold, &c->holdcap, c->nhold + 1, sizeof(*c->hold));
		memcpy(c->hold[c->nhold++], m->qid, QID_LEN + 1);
	}
	return 0;
}

/* drop_empty - forget the segments with no live message */
static int drop_empty(struct store_txn *txn, void *arg)
{
	const struct seg_list *l = arg;
	int rc = 0;

	for (size_t i = 0; i < l->n && rc == 0; i++)
		rc = store_del_seg(txn, l->ids[i]);
	return rc;
}

/* drop_empties - forget the segments with no live message, in one write.
 * One that fails (a full disk) is logged and left: an empty segment's
 * record is harmless, and the next start drops it */
static void drop_empties(const struct seg_list *empty)
{
	char err[256];

	if (empty->n && store_write(ternd.store, drop_empty, (void *)empty, err, sizeof(err)) < 0)
		log_warning("recovery: %zu empty spool segment%s left in the queue database: %s",
			    empty->n, empty->n == 1 ? "" : "s", err);
}

/* known_seg - is a segment file name one the database knows */
static int seg_file(const char *name, void *arg)
{
	struct seg_list *l = arg;
	char *end;
	uint64_t id = strtoull(name, &end, 16);

	for (size_t i = 0; *end == '\0' && i < l->n; i++)
		if (l->ids[i] == id)
			return 0;
	log_info("removing spool segment %s: no committed message in it", name);
	if (*end == '\0')
		spool_seg_remove(ternd.spool, id);
	return 0;
}

/* own_file - remove an own file whose message was never committed */
static int own_file(const char *name, void *arg)
{
	struct q_msg m;
	int rc = store_get(ternd.store, name, &m, NULL, NULL);

	(void)arg;
	if (rc == 0) {
		q_msg_clear(&m);
		return 0;
	}
	if (rc == 1) {
		log_info("removing spool file own/%s: not a committed message", name);
		spool_own_remove(ternd.spool, name);
	}
	return 0;
}

/* empty_seg - collect segments with no live message */
static int empty_seg(const struct store_seg *seg, void *arg)
{
	struct seg_list *l = arg;

	if (seg->live == 0) {
		l->ids = xgrowarray(l->ids, &l->cap, l->n + 1, sizeof(*l->ids));
		l->ids[l->n++] = seg->id;
	}
	return 0;
}

/* recover - run once at start, before the committer */
int recover(char *err, size_t errlen)
{
	struct seg_list known = {0}, empty = {0};
	uint64_t last = 0, count = 0;

	if (wal_replay(err, errlen) < 0) {
		/* A full disk: the database cannot take the log's mail yet.
		 * Start anyway (ingest is refused below the reserve); the writer
		 * replays once it can, and nothing is cut or removed from the
		 * spool until the next start, as any of it may be that mail. */
		log_error("recovery: the spool log holds acknowledged mail the queue database "
			  "cannot take yet: %s; starting without it, trying again every second, "
			  "the spool left as it is", err);
		goto counters;
	}
	if (store_foreach_seg(ternd.store, empty_seg, &empty) < 0) {
		snprintf(err, errlen, "cannot read the segment table");
		return -1;
	}
	/* Space first, then the database: on a full disk the files of empty
	 * segments (and junk) are what holds the space a write needs. */
	for (size_t i = 0; i < empty.n; i++)
		spool_seg_remove(ternd.spool, empty.ids[i]);
	store_foreach_seg(ternd.store, keep_seg, &known);
	spool_foreach_seg_file(ternd.spool, seg_file, &known);
	spool_foreach_own_file(ternd.spool, own_file, NULL);
	drop_empties(&empty);
	free(empty.ids);
	if (known.ncut) {
		struct check c = {.l = &known};

		store_foreach(ternd.store, check_one, &c);
		for (size_t i = 0; i < c.nhold; i++) {
			struct queue_op_arg a = {.op = QOP_HOLD};

			memcpy(a.qid, c.hold[i], QID_LEN + 1);
			if (store_write(ternd.store, queue_op_write, &a, err, errlen) < 0)
				return -1;
		}
		log_info("recovery: checked %u message bod%s after a crash, %u damaged", c.checked,
			 c.checked == 1 ? "y" : "ies", c.bad);
		free(c.hold);
	}
	free(known.cut);
	free(known.ids);
counters:
	if (store_get_meta(ternd.store, "last_qid", &last) < 0 || store_count(ternd.store, &count) < 0) {
		snprintf(err, errlen, "cannot read the queue database");
		return -1;
	}
	{
		uint64_t in_table = 0;

		/* Never below an id in the queue, whatever the clock says. */
		if (store_last_qid(ternd.store, &in_table) == 0 && in_table > last)
			last = in_table;
	}
	qid_gen_init(&ternd.qids, last);
	stats_queued_set(count);
	log_info("queue: %llu message%s", (unsigned long long)count, count == 1 ? "" : "s");
	return 0;
}
