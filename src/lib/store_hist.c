/*
 * store_hist - ternd's delivery history in the store (tables hist, hidx,
 * hpend: store_priv.h), over the LMDB discipline of store_lmdb.c; the
 * record types are hist.h's.
 *
 * History is written in the transaction of the state change it records
 * and pruned oldest first, a bounded number of records per call. Its index
 * is not: a record's hidx entries (about three random keys, so a leaf page
 * each) would double the pages an acceptance writes. The record is noted
 * in hpend, whose keys, like hist's, mostly append; store_hist_index moves
 * pending records into hidx in batches, and lookups read all pending
 * records as well, so they find the same either way. hpend is keyed by
 * the record rather than marked by a position in hist, because records do
 * not arrive in time order (a delivery result is stamped before it is
 * committed). Must never hold a read transaction longer than one call,
 * never write outside store_write(), and never touch the queue's tables.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "store_priv.h"
#include "xalloc.h"

#define HIST_KEY_LEN (8 + QID_LEN + 1 + 4)
#define HIDX_KEY_MAX 400		/* LMDB keys: 511 octets at most */
#define HIST_RECORD_MAX (1 << 17)

/* hidx_key - an index key: kind, then the value (lower case for 'r'), cut */
static size_t hidx_key(unsigned char key[HIDX_KEY_MAX], char kind, const char *value)
{
	size_t n = strlen(value);

	if (n > HIDX_KEY_MAX - 1)
		n = HIDX_KEY_MAX - 1;
	key[0] = (unsigned char)kind;
	for (size_t i = 0; i < n; i++)
		key[1 + i] = kind == 'r' && value[i] >= 'A' && value[i] <= 'Z'
			? (unsigned char)(value[i] - 'A' + 'a') : (unsigned char)value[i];
	return n + 1;
}

/* An index entry of a history record: kind, the value it is found by,
 * and what the entry holds. */
typedef int (*hidx_fn)(void *arg, char kind, const char *value, const void *data, size_t dlen);

/* hist_entries - call fn for each index entry of h (hkey is its hist key);
 * stops at fn's first non-zero return and returns it */
static int hist_entries(const struct hist_rec *h, const unsigned char hkey[HIST_KEY_LEN],
			hidx_fn fn, void *arg)
{
	char tid[2 * sizeof(h->trace_id) + 1];
	int rc;

	if ((rc = fn(arg, 'q', h->qid, hkey, HIST_KEY_LEN)) != 0 || h->kind != HIST_ACCEPT)
		return rc;
	sodium_bin2hex(tid, sizeof(tid), h->trace_id, sizeof(h->trace_id));
	if ((rc = fn(arg, 't', tid, h->qid, QID_LEN)) != 0
	    || (rc = fn(arg, 'm', h->msgid, h->qid, QID_LEN)) != 0)
		return rc;
	for (const char *p = h->rcpt; *p;) {
		size_t n = strcspn(p, "\n");
		char addr[HIDX_KEY_MAX];

		snprintf(addr, sizeof(addr), "%.*s", (int)n, p);
		if ((rc = fn(arg, 'r', addr, h->qid, QID_LEN)) != 0)
			return rc;
		p += n + (p[n] == '\n');
	}
	return 0;
}

/* Index entries being added or deleted, and how many so far. */
struct hidx_run {
	struct store_txn *t;
	size_t entries;
};

/* hidx_op - one index entry into or out of hidx; one already there, or
 * already gone, is no error */
static int hidx_op(struct hidx_run *r, int add, char kind, const char *value,
		   const void *data, size_t dlen)
{
	unsigned char key[HIDX_KEY_MAX];
	MDB_val k = {hidx_key(key, kind, value), key}, v = {dlen, (void *)data};
	int rc;

	if (value[0] == '\0')
		return 0;
	r->entries++;
	if (add)
		rc = mdb_put(r->t->txn, r->t->st->hidx, &k, &v, MDB_NODUPDATA);
	else
		rc = mdb_del(r->t->txn, r->t->st->hidx, &k, &v);
	return rc == MDB_KEYEXIST || rc == MDB_NOTFOUND ? 0 : rc;
}

/* hidx_add - hidx_op adding (a hidx_fn; arg: the struct hidx_run) */
static int hidx_add(void *arg, char kind, const char *value, const void *data, size_t dlen)
{
	return hidx_op(arg, 1, kind, value, data, dlen);
}

/* hidx_del - hidx_op deleting (a hidx_fn; arg: the struct hidx_run) */
static int hidx_del(void *arg, char kind, const char *value, const void *data, size_t dlen)
{
	return hidx_op(arg, 0, kind, value, data, dlen);
}

/* store_hist_put - record an acceptance or an attempt; its index entries
 * follow with store_hist_index */
int store_hist_put(struct store_txn *t, const struct hist_rec *h)
{
	/* LMDB runs one write transaction at a time: one buffer serves them */
	static unsigned char buf[HIST_RECORD_MAX];
	unsigned char key[HIST_KEY_LEN];
	size_t n = hist_rec_encode(h, buf, sizeof(buf));
	int rc = EINVAL;

	if (n) {
		be_put(key, h->time_us, 8);
		memcpy(key + 8, h->qid, QID_LEN);
		key[8 + QID_LEN] = h->kind;
		be_put(key + 8 + QID_LEN + 1, h->idx, 4);
		if ((rc = store_kv_put(t, t->st->hist, key, sizeof(key), buf, n)) == 0)
			rc = store_kv_put(t, t->st->hpend, key, sizeof(key), "", 0);
	}
	return rc;
}

/* index_record - fn (hidx_add or hidx_del) for each index entry of the
 * history record in hv, under hist key k; a record that does not decode
 * has none */
static int index_record(struct hidx_run *r, const MDB_val *k, const MDB_val *hv, hidx_fn fn)
{
	unsigned char key[HIST_KEY_LEN];
	struct hist_rec h;
	int rc;

	if (k->mv_size != HIST_KEY_LEN || hist_rec_decode(hv->mv_data, hv->mv_size, &h) != 0)
		return 0;
	memcpy(key, k->mv_data, HIST_KEY_LEN);
	rc = hist_entries(&h, key, fn, r);
	hist_rec_clear(&h);
	return rc;
}

/* index_pending - a pending record's index entries, until there are
 * STORE_HIST_INDEX_ENTRIES (a record pruned already has none) */
static int index_pending(MDB_txn *txn, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct hidx_run *r = arg;
	MDB_val hv;
	int rc;

	(void)v;
	if (r->entries >= STORE_HIST_INDEX_ENTRIES)
		return TAKE_STOP;
	rc = mdb_get(txn, r->t->st->hist, (MDB_val *)k, &hv);
	return rc == MDB_NOTFOUND ? 0 : rc != 0 ? rc : index_record(r, k, &hv, hidx_add);
}

/* store_hist_index - add the index entries of the oldest pending records
 * until at most keep wait, or STORE_HIST_INDEX_ENTRIES were added; how
 * many records in *n */
int store_hist_index(struct store_txn *t, uint64_t keep, size_t *n)
{
	struct hidx_run r = {t, 0};
	uint64_t waiting = store_hist_unindexed(t);

	*n = 0;
	return waiting > keep
	       ? store_take_front(t->txn, t->st->hpend, waiting - keep, n, index_pending, &r) : 0;
}

/* index_down - store_hist_index until at most *keep wait (or nothing
 * more was indexed); *keep becomes how many wait then */
static int index_down(struct store_txn *t, void *arg)
{
	uint64_t *keep = arg;
	size_t n = 1;
	int rc = 0;

	while (rc == 0 && n > 0 && store_hist_unindexed(t) > *keep)
		rc = store_hist_index(t, *keep, &n);
	*keep = store_hist_unindexed(t);
	return rc;
}

/*
 * store_hist_index_over - the backlog bound under load that never pauses.
 * In a write that added history records, when more than lag wait for
 * their index: index the oldest down to lag, or, when more than lag +
 * catchup waited before (what store_hist_unindexed said at the write's
 * start), down to before - catchup, so that a backlog shrinks by catchup
 * a write. In a transaction nested in t, so that it costs no extra flush:
 * *left is how many wait then. Returns 0; STORE_DROPPED when it was too
 * big for one transaction (nothing indexed, err says so, t goes on); or
 * an error (err), after which t had better not go on (MDB_MAP_FULL
 * excepted: store_write grows the map and replays t).
 */
int store_hist_index_over(struct store_txn *t, uint64_t lag, uint64_t catchup, uint64_t before,
			  uint64_t *left, char *err, size_t errlen)
{
	uint64_t keep = lag;
	int rc;

	if (errlen > 0)
		err[0] = '\0';
	if ((*left = store_hist_unindexed(t)) <= lag)
		return 0;
	if (before > lag + catchup)
		keep = before - catchup;
	if ((rc = store_nested(t, index_down, &keep, err, errlen)) == 0)
		*left = keep;
	return rc;
}

/* store_hist_unindexed - how many records wait for store_hist_index */
uint64_t store_hist_unindexed(struct store_txn *t)
{
	MDB_stat s;

	return mdb_stat(t->txn, t->st->hpend, &s) == 0 ? s.ms_entries : 0;
}

/* A prune: its transaction, and the time records older than go. */
struct prune_run {
	struct store_txn *t;
	uint64_t before_us;
};

/* prune_record - a record older than before_us: its index entries and
 * its pending mark, whichever it has; TAKE_STOP at the first younger one */
static int prune_record(MDB_txn *txn, const MDB_val *k, const MDB_val *v, void *arg)
{
	const struct prune_run *p = arg;
	unsigned char key[HIST_KEY_LEN];
	MDB_val pk = {HIST_KEY_LEN, key};
	struct hidx_run r = {p->t, 0};
	int rc;

	if (k->mv_size != HIST_KEY_LEN || be_get(k->mv_data, 8) >= p->before_us)
		return TAKE_STOP;
	memcpy(key, k->mv_data, HIST_KEY_LEN);	/* LMDB's copy may move with the update */
	if ((rc = index_record(&r, &pk, v, hidx_del)) != 0)
		return rc;
	rc = mdb_del(txn, p->t->st->hpend, &pk, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* store_hist_prune - drop up to max records older than before_us; how many
 * in *n. Bounded, so that pruning never makes a long write transaction. */
int store_hist_prune(struct store_txn *t, uint64_t before_us, size_t max, size_t *n)
{
	struct prune_run p = {t, before_us};

	return store_take_front(t->txn, t->st->hist, max, n, prune_record, &p);
}

/* A lookup: the index key sought, and the queue ids found. */
struct hist_query {
	unsigned char key[HIDX_KEY_MAX];
	size_t klen;
	char (*qids)[QID_LEN + 1];
	size_t nqids, cap;
};

/* qid_add - add a queue id to the lookup's list */
static void qid_add(struct hist_query *q, const void *qid)
{
	q->qids = xgrowarray(q->qids, &q->cap, q->nqids + 1, sizeof(*q->qids));
	memcpy(q->qids[q->nqids], qid, QID_LEN);
	q->qids[q->nqids++][QID_LEN] = '\0';
}

/* query_match - an index entry of a pending record: is it the one sought? */
static int query_match(void *arg, char kind, const char *value, const void *data, size_t dlen)
{
	struct hist_query *q = arg;
	unsigned char key[HIDX_KEY_MAX];

	(void)data, (void)dlen;
	return value[0] != '\0' && hidx_key(key, kind, value) == q->klen
	       && memcmp(key, q->key, q->klen) == 0;
}

/* qid_cmp - queue ids in order (qsort, bsearch) */
static int qid_cmp(const void *a, const void *b)
{
	return memcmp(a, b, QID_LEN);
}

/* hkey_cmp - hist keys by message, then in time order (qsort) */
static int hkey_cmp(const void *a, const void *b)
{
	int c = memcmp((const unsigned char *)a + 8, (const unsigned char *)b + 8, QID_LEN);

	return c ? c : memcmp(a, b, HIST_KEY_LEN);
}

/* hkey_add - one more hist key */
static void hkey_add(unsigned char (**keys)[HIST_KEY_LEN], size_t *n, size_t *cap, const void *key)
{
	*keys = xgrowarray(*keys, cap, *n + 1, sizeof(**keys));
	memcpy((*keys)[(*n)++], key, HIST_KEY_LEN);
}

/* store_hist_find - the history of the messages that kind ('q' queue id,
 * 't' trace id, 'm' Message-ID, 'r' recipient) and value name, message by
 * message in queue id order, each one's records in time order; fn's
 * non-zero return stops. Records still pending are found by a pass over
 * them all (decoding each, unless kind is 'q'). Returns the number of
 * records, or -1. */
int store_hist_find(struct store *st, char kind, const char *value, store_hist_fn fn, void *arg)
{
	struct hist_query q = {.nqids = 0};
	unsigned char (*hkeys)[HIST_KEY_LEN] = NULL;
	struct hist_rec *recs = NULL;
	size_t nrecs = 0, rcap = 0, nkeys = 0, kcap = 0;
	MDB_txn *txn;
	MDB_cursor *cur, *pend = NULL;
	MDB_val k, v, hv;
	int rc, stop = 0;

	q.klen = hidx_key(q.key, kind, value);
	if (store_read_cursor(st, st->hidx, &txn, &cur) != 0)
		return -1;
	if (!st->no_hpend && mdb_cursor_open(txn, st->hpend, &pend) != 0) {
		mdb_cursor_close(cur);
		store_read_end(st, txn);
		return -1;
	}
	if (kind == 'q') {
		qid_add(&q, value);
	} else {
		k.mv_size = q.klen;
		k.mv_data = q.key;
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY); rc == 0;
		     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP))
			if (v.mv_size == QID_LEN)
				qid_add(&q, v.mv_data);
		for (rc = pend ? mdb_cursor_get(pend, &k, &v, MDB_FIRST) : MDB_NOTFOUND; rc == 0;
		     rc = mdb_cursor_get(pend, &k, &v, MDB_NEXT)) {
			struct hist_rec h;

			if (k.mv_size != HIST_KEY_LEN || mdb_get(txn, st->hist, &k, &hv) != 0
			    || hist_rec_decode(hv.mv_data, hv.mv_size, &h) != 0)
				continue;
			if (hist_entries(&h, k.mv_data, query_match, &q))
				qid_add(&q, h.qid);
			hist_rec_clear(&h);
		}
	}
	if (q.nqids > 1) {	/* in order, each once */
		size_t u = 1;

		qsort(q.qids, q.nqids, sizeof(*q.qids), qid_cmp);
		for (size_t i = 1; i < q.nqids; i++)
			if (qid_cmp(q.qids[i], q.qids[u - 1]) != 0)
				memcpy(q.qids[u++], q.qids[i], sizeof(*q.qids));
		q.nqids = u;
	}
	/* The messages' records: the indexed ones, then the pending ones. */
	for (size_t i = 0; i < q.nqids; i++) {
		unsigned char key[HIDX_KEY_MAX];

		k.mv_size = hidx_key(key, 'q', q.qids[i]);
		k.mv_data = key;
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY); rc == 0;
		     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP))
			if (v.mv_size == HIST_KEY_LEN)
				hkey_add(&hkeys, &nkeys, &kcap, v.mv_data);
	}
	for (rc = pend && q.nqids ? mdb_cursor_get(pend, &k, &v, MDB_FIRST) : MDB_NOTFOUND;
	     rc == 0; rc = mdb_cursor_get(pend, &k, &v, MDB_NEXT))
		if (k.mv_size == HIST_KEY_LEN
		    && bsearch((const char *)k.mv_data + 8, q.qids, q.nqids, sizeof(*q.qids), qid_cmp))
			hkey_add(&hkeys, &nkeys, &kcap, k.mv_data);
	if (nkeys > 1)
		qsort(hkeys, nkeys, sizeof(*hkeys), hkey_cmp);
	for (size_t i = 0; i < nkeys; i++) {
		MDB_val hk = {HIST_KEY_LEN, hkeys[i]};

		if (i > 0 && memcmp(hkeys[i], hkeys[i - 1], HIST_KEY_LEN) == 0)
			continue;	/* indexed and still marked pending: once */
		if (mdb_get(txn, st->hist, &hk, &hv) != 0)
			continue;
		recs = xgrowarray(recs, &rcap, nrecs + 1, sizeof(*recs));
		if (hist_rec_decode(hv.mv_data, hv.mv_size, &recs[nrecs]) == 0)
			nrecs++;
	}
	if (pend)
		mdb_cursor_close(pend);
	mdb_cursor_close(cur);
	store_read_end(st, txn);
	/* Everything is read and the transaction ended: now call fn (see store_foreach). */
	for (size_t i = 0; i < nrecs; i++) {
		if (!stop)
			stop = fn(&recs[i], arg);
		hist_rec_clear(&recs[i]);
	}
	free(recs);
	free(hkeys);
	free(q.qids);
	return (int)nrecs;
}

/* A batch of history records store_hist_foreach_range read, the time it
 * ends at, and whom to hand them to. */
struct hist_batch {
	uint64_t to_us;
	store_hist_fn fn;
	void *arg;
	int stop;
	size_t got;
	struct hist_rec *recs;
};

/* hist_step - a record before the end of the range into the batch (a
 * read_step_fn); one that fails validation is passed over */
static int hist_step(MDB_txn *txn, const MDB_val *k, const MDB_val *v, struct read_pos *pos,
		     void *arg)
{
	struct hist_batch *b = arg;

	(void)txn, (void)pos;
	if (k->mv_size != HIST_KEY_LEN)
		return READ_SKIP;
	if (be_get(k->mv_data, 8) >= b->to_us)
		return READ_END;
	if (hist_rec_decode(v->mv_data, v->mv_size, &b->recs[b->got]) != 0)
		return READ_SKIP;
	b->got++;
	return READ_TAKE;
}

/* hist_flush - hand a batch of records on, until fn stops (a
 * read_flush_fn); frees them either way */
static int hist_flush(void *arg)
{
	struct hist_batch *b = arg;

	for (size_t i = 0; i < b->got; i++) {
		if (!b->stop)
			b->stop = b->fn(&b->recs[i], b->arg);
		hist_rec_clear(&b->recs[i]);
	}
	b->got = 0;
	return b->stop;
}

/* store_hist_foreach_range - the history between two times, oldest first.
 * The hist keys start with the time, so this is a cursor walk from the
 * first key of from_us, in batches (store_read_batches) like
 * store_foreach: a slow consumer never pins pages and memory stays one
 * batch. */
int store_hist_foreach_range(struct store *st, uint64_t from_us, uint64_t to_us,
			     store_hist_fn fn, void *arg)
{
	struct hist_batch b = {to_us, fn, arg, 0, 0, NULL};
	struct read_pos pos = {.len = HIST_KEY_LEN, .after = 0};
	int rc;

	memset(pos.key, 0, HIST_KEY_LEN);
	be_put(pos.key, from_us, 8);
	b.recs = xcalloc(STORE_FOREACH_BATCH, sizeof(*b.recs));
	rc = store_read_batches(st, st->hist, &pos, STORE_FOREACH_BATCH, hist_step, hist_flush, &b);
	free(b.recs);
	return rc;
}
