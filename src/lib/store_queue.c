/*
 * store_queue - ternd's queue records in the store: messages, recipients
 * and their schedule, segments, named counters, sealed TLS sessions and
 * the notifications waiting to be queued (tables: store_priv.h), over the
 * LMDB discipline of store_lmdb.c.
 *
 * A recipient's schedule entry is written and deleted with its record,
 * so that the schedule always names live recipients whose records decode
 * (store_put_rcpt, store_del_msg, store_unsched_damaged). Records read
 * back are validated (store_codec): one that fails is damaged, never
 * trusted. Must never hold a read transaction longer than one call,
 * never write outside store_write(), and never include the history's
 * tables (store_hist.c).
 *
 * The schedule index, its per-peer counts and the recipient records
 * change together in one transaction through static helpers (sched_op,
 * rcount_add) that no other file may call; the reads of the schedule are
 * store_sched.c's.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_priv.h"
#include "xalloc.h"

#define RCPT_KEY_LEN (QID_LEN + 4)

static int load_rcpts(struct store *st, MDB_txn *txn, const char *qid,
		      struct q_rcpt **rcpts, size_t *n, size_t *damaged);

/* rcpt_key - qid . idx */
static void rcpt_key(unsigned char key[RCPT_KEY_LEN], const char *qid, uint32_t idx)
{
	memcpy(key, qid, QID_LEN);
	be_put(key + QID_LEN, idx, 4);
}

/* sched_key - peer . '\0' . next_us . qid . idx; its length, or 0 when
 * the peer's name is too long for an LMDB key (never cut: two peers
 * would share entries) */
static size_t sched_key(unsigned char key[STORE_KEY_MAX], const char *peer, uint64_t next_us,
			const char *qid, uint32_t idx)
{
	size_t n = strlen(peer);

	if (n > SCHED_PEER_MAX)
		return 0;
	memcpy(key, peer, n + 1);
	be_put(key + n + 1, next_us, 8);
	memcpy(key + n + 9, qid, QID_LEN);
	be_put(key + n + 9 + QID_LEN, idx, 4);
	return n + SCHED_TAIL_LEN;
}

/* store_put_msg - replace a message record */
int store_put_msg(struct store_txn *t, const struct q_msg *m)
{
	unsigned char buf[STORE_RECORD_MAX];
	size_t n = q_msg_encode(m, buf, sizeof(buf));

	return n ? store_kv_put(t, t->st->msg, m->qid, QID_LEN, buf, n) : EINVAL;
}

/* store_add_msg - add a new message record; an existing one is an error
 * (MDB_KEYEXIST), never silently replaced */
int store_add_msg(struct store_txn *t, const struct q_msg *m)
{
	unsigned char buf[STORE_RECORD_MAX];
	size_t n = q_msg_encode(m, buf, sizeof(buf));
	MDB_val key = {QID_LEN, (void *)m->qid}, val = {n, buf};

	return n ? mdb_put(t->txn, t->st->msg, &key, &val, MDB_NOOVERWRITE) : EINVAL;
}

/* edge_qid - the first or last queue id in the message table, or 0 */
static int edge_qid(struct store *st, MDB_cursor_op op, uint64_t *value)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	char qid[QID_LEN + 1];

	*value = 0;
	if (store_read_begin(st, &txn) != 0)
		return -1;
	if (mdb_cursor_open(txn, st->msg, &cur) == 0) {
		if (mdb_cursor_get(cur, &k, &v, op) == 0 && k.mv_size == QID_LEN) {
			memcpy(qid, k.mv_data, QID_LEN);
			qid[QID_LEN] = '\0';
			qid_parse(qid, value);
		}
		mdb_cursor_close(cur);
	}
	store_read_end(st, txn);
	return 0;
}

/* store_last_qid - the highest queue id in the message table, or 0 */
int store_last_qid(struct store *st, uint64_t *value)
{
	return edge_qid(st, MDB_LAST, value);
}

/* store_first_qid - the lowest (oldest) queue id in the message table, or 0 */
int store_first_qid(struct store *st, uint64_t *value)
{
	return edge_qid(st, MDB_FIRST, value);
}

/* live - does a recipient in this state still need delivery */
static int live(uint8_t state)
{
	return state == RCPT_QUEUED || state == RCPT_DEFERRED;
}

/* counter_add - move the big-endian 64-bit count at key in dbi by delta,
 * never below 0; one that reaches 0 is deleted when drop_zero */
static int counter_add(struct store_txn *t, MDB_dbi dbi, const void *key, size_t klen,
		       int64_t delta, int drop_zero)
{
	MDB_val k = {klen, (void *)key}, v;
	unsigned char buf[8];
	uint64_t c = 0;
	int rc;

	rc = mdb_get(t->txn, dbi, &k, &v);
	if (rc == 0 && v.mv_size == 8)
		c = be_get(v.mv_data, 8);
	else if (rc != 0 && rc != MDB_NOTFOUND)
		return rc;
	if (delta < 0 && c == 0)
		return 0;	/* never below 0 */
	c = delta < 0 && (uint64_t)-delta > c ? 0 : c + (uint64_t)delta;
	if (c == 0 && drop_zero)
		return store_kv_del(t, dbi, key, klen);
	be_put(buf, c, 8);
	return store_kv_put(t, dbi, key, klen, buf, sizeof(buf));
}

/* rcount_add - move a peer's count of schedule entries by delta (+1 or
 * -1); a count that reaches 0 is deleted. The key is the name with its
 * NUL (a peer may be named ""); EINVAL if it cannot be made (as for the
 * entry) */
static int rcount_add(struct store_txn *t, const char *peer, int delta)
{
	size_t n = strlen(peer) + 1;

	if (n > SCHED_PEER_MAX + 1)
		return EINVAL;
	return counter_add(t, t->st->rcount, peer, n, delta, 1);
}

/* sched_op - add (or delete) the schedule entry of a recipient record,
 * and move its peer's count by the entry that was added (deleted): none
 * unless it is live; EINVAL if its key cannot be made */
static int sched_op(struct store_txn *t, int add, const char *qid, const struct q_rcpt *r)
{
	unsigned char key[STORE_KEY_MAX];
	MDB_val k = {0, key}, v = {0, ""};
	int rc;

	if (!live(r->state))
		return 0;
	if ((k.mv_size = sched_key(key, r->peer, r->next_us, qid, r->idx)) == 0)
		return EINVAL;
	rc = add ? mdb_put(t->txn, t->st->sched, &k, &v, MDB_NOOVERWRITE)
		 : mdb_del(t->txn, t->st->sched, &k, NULL);
	if (rc == MDB_KEYEXIST || rc == MDB_NOTFOUND)
		return 0;	/* there already (not there): the count has it (not) */
	return rc != 0 ? rc : rcount_add(t, r->peer, add ? 1 : -1);
}

/* store_put_rcpt - add or replace a recipient, moving its schedule entry
 * from where the record it replaces had it (another time, another peer),
 * and the peers' counts with it.
 * A new recipient (every one at acceptance) costs one lookup: the first
 * put finds the record it would replace, if any */
int store_put_rcpt(struct store_txn *t, const char *qid, const struct q_rcpt *r)
{
	unsigned char buf[STORE_RECORD_MAX], key[RCPT_KEY_LEN];
	size_t n = q_rcpt_encode(r, buf, sizeof(buf));
	MDB_val k = {sizeof(key), key}, v = {n, buf};
	struct q_rcpt old;
	int rc;

	if (n == 0)
		return EINVAL;
	rcpt_key(key, qid, r->idx);
	rc = mdb_put(t->txn, t->st->rcpt, &k, &v, MDB_NOOVERWRITE);
	if (rc == MDB_KEYEXIST) {	/* v is the stored record now */
		/* one that does not decode has no entry: store_del_msg agrees */
		if (q_rcpt_decode(v.mv_data, v.mv_size, &old) == 0) {
			rc = sched_op(t, 0, qid, &old);
			q_rcpt_clear(&old);
			if (rc != 0)
				return rc;
		}
		rc = store_kv_put(t, t->st->rcpt, key, sizeof(key), buf, n);
	}
	return rc != 0 ? rc : sched_op(t, 1, qid, r);
}

/* store_del_msg - remove a message, its recipients and their schedule
 * entries (and count) */
int store_del_msg(struct store_txn *t, const char *qid)
{
	unsigned char key[RCPT_KEY_LEN];
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, t->st->rcpt, &cur)) != 0)
		return rc;
	rcpt_key(key, qid, 0);
	k.mv_size = sizeof(key);
	k.mv_data = key;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size == RCPT_KEY_LEN && memcmp(k.mv_data, qid, QID_LEN) == 0) {
		struct q_rcpt r;

		if (q_rcpt_decode(v.mv_data, v.mv_size, &r) == 0) {
			rc = sched_op(t, 0, qid, &r);
			q_rcpt_clear(&r);
			if (rc != 0)
				break;
		}
		if ((rc = mdb_cursor_del(cur, 0)) != 0)
			break;
		/* After a delete the cursor stands on the next record, if any. */
		rc = mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT);
		if (rc == EINVAL)
			rc = MDB_NOTFOUND;
	}
	mdb_cursor_close(cur);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return rc;
	return store_kv_del(t, t->st->msg, qid, QID_LEN);
}

/* sched_rebuild - the schedule and the peers' counts anew from the
 * recipient records */
static int sched_rebuild(struct store_txn *t)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	t->st->rebuilt = 0;	/* again from 0 if store_write retries */
	if ((rc = mdb_drop(t->txn, t->st->sched, 0)) != 0
	    || (rc = mdb_drop(t->txn, t->st->rcount, 0)) != 0
	    || (rc = mdb_cursor_open(t->txn, t->st->rcpt, &cur)) != 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		char qid[QID_LEN + 1];
		struct q_rcpt r;

		if (k.mv_size != RCPT_KEY_LEN || q_rcpt_decode(v.mv_data, v.mv_size, &r) != 0)
			continue;
		memcpy(qid, k.mv_data, QID_LEN);
		qid[QID_LEN] = '\0';
		if ((rc = sched_op(t, 1, qid, &r)) == 0 && live(r.state))
			t->st->rebuilt++;
		q_rcpt_clear(&r);
		if (rc != 0)
			break;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* counts_agree - do the peers' counts add up to the schedule's entries? A
 * ternd older than the counts (layout 2) takes a layout-3 queue as its own
 * and moves entries without them: after such a downgrade the counts are
 * wrong until rebuilt. One look at the schedule's size and one row per
 * peer. 1 yes, 2 no, or an LMDB error */
static int counts_agree(struct store_txn *t)
{
	MDB_stat ms;
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t sum = 0;
	int rc;

	if ((rc = mdb_stat(t->txn, t->st->sched, &ms)) != 0
	    || (rc = mdb_cursor_open(t->txn, t->st->rcount, &cur)) != 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
		if (v.mv_size == 8)
			sum += be_get(v.mv_data, 8);
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND)
		return rc;
	return sum == (uint64_t)ms.ms_entries ? 1 : 2;
}

/* store_queue_layout - bring the tables up to STORE_LAYOUT and record it there.
 * Layout 1 (no "layout" in meta) keyed the schedule by due time first,
 * layout 2 had no counts: both are rebuilt from the recipient records in
 * this one transaction, as they are when the counts do not add up to the
 * schedule (counts_agree). A new store takes the same path, with nothing
 * to rebuild. */
int store_queue_layout(struct store_txn *t, void *arg)
{
	static const char name[] = "layout";
	MDB_val k = {sizeof(name) - 1, (void *)name}, v;
	int rc;

	(void)arg;
	rc = mdb_get(t->txn, t->st->meta, &k, &v);
	if (rc == 0 && v.mv_size == 8 && be_get(v.mv_data, 8) >= STORE_LAYOUT) {
		if ((rc = counts_agree(t)) != 2)
			return rc == 1 ? 0 : rc;
		rc = 0;	/* rebuilt, as after an upgrade */
	}
	if ((rc != 0 && rc != MDB_NOTFOUND) || (rc = sched_rebuild(t)) != 0)
		return rc;
	return store_put_meta(t, name, STORE_LAYOUT);
}

/* seg_encode - a segment's bookkeeping as 13 octets */
static void seg_encode(const struct store_seg *seg, unsigned char buf[13])
{
	be_put(buf, seg->length, 8);
	be_put(buf + 8, seg->live, 4);
	buf[12] = seg->closed ? 1 : 0;
}

/* seg_decode - bookkeeping from a stored value (its octets: seg_bytes) */
static int seg_decode(const MDB_val *k, const MDB_val *v, struct store_seg *seg)
{
	if (k->mv_size != 8 || v->mv_size != 13)
		return -1;
	seg->id = be_get(k->mv_data, 8);
	seg->length = be_get(v->mv_data, 8);
	seg->live = (uint32_t)be_get((const unsigned char *)v->mv_data + 8, 4);
	seg->closed = ((const unsigned char *)v->mv_data)[12] != 0;
	seg->live_bytes = STORE_SEG_BYTES_UNKNOWN;
	return 0;
}

/* bytes_key - the key of a segment's live octets: id . 'b', next to its
 * record and apart from it, so that a release that reads only the
 * 13-octet record (and skips keys of other lengths) still knows every
 * segment */
static void bytes_key(unsigned char key[9], uint64_t id)
{
	be_put(key, id, 8);
	key[8] = 'b';
}

/* seg_bytes - a decoded segment's live octets from its second key;
 * STORE_SEG_BYTES_UNKNOWN when there is none (a release that did not
 * count them wrote the record) */
static void seg_bytes(MDB_txn *txn, MDB_dbi dbi, struct store_seg *seg)
{
	unsigned char kb[9];
	MDB_val k = {9, kb}, v;

	bytes_key(kb, seg->id);
	if (mdb_get(txn, dbi, &k, &v) == 0 && v.mv_size == 8)
		seg->live_bytes = be_get(v.mv_data, 8);
}

/* store_seg_count - msgs messages of bytes octets in all came into a
 * segment (or left it, negative); never below 0, and an uncounted
 * record's octets stay uncounted */
void store_seg_count(struct store_seg *seg, int64_t msgs, int64_t bytes)
{
	if (msgs < 0 && (uint64_t)-msgs > seg->live)
		seg->live = 0;
	else
		seg->live = (uint32_t)((int64_t)seg->live + msgs);
	if (seg->live_bytes == STORE_SEG_BYTES_UNKNOWN)
		return;
	if (bytes < 0 && (uint64_t)-bytes > seg->live_bytes)
		seg->live_bytes = 0;
	else
		seg->live_bytes = (uint64_t)((int64_t)seg->live_bytes + bytes);
}

/* store_put_seg - add or replace a segment's bookkeeping */
int store_put_seg(struct store_txn *t, const struct store_seg *seg)
{
	unsigned char key[8], bkey[9], val[13], bytes[8];
	int rc;

	be_put(key, seg->id, 8);
	seg_encode(seg, val);
	bytes_key(bkey, seg->id);
	if ((rc = store_kv_put(t, t->st->seg, key, sizeof(key), val, sizeof(val))) != 0)
		return rc;
	if (seg->live_bytes == STORE_SEG_BYTES_UNKNOWN)
		return store_kv_del(t, t->st->seg, bkey, sizeof(bkey));	/* stays uncounted */
	be_put(bytes, seg->live_bytes, 8);
	return store_kv_put(t, t->st->seg, bkey, sizeof(bkey), bytes, sizeof(bytes));
}

/* store_del_seg - forget a segment */
int store_del_seg(struct store_txn *t, uint64_t id)
{
	unsigned char key[8], bkey[9];
	int rc;

	be_put(key, id, 8);
	bytes_key(bkey, id);
	if ((rc = store_kv_del(t, t->st->seg, bkey, sizeof(bkey))) != 0)
		return rc;
	return store_kv_del(t, t->st->seg, key, sizeof(key));
}

/* store_txn_get_seg - a segment's bookkeeping inside a write transaction */
int store_txn_get_seg(struct store_txn *t, uint64_t id, struct store_seg *seg)
{
	unsigned char kb[8];
	MDB_val k = {8, kb}, v;
	int rc;

	be_put(kb, id, 8);
	if ((rc = mdb_get(t->txn, t->st->seg, &k, &v)) != 0)
		return rc == MDB_NOTFOUND ? 1 : rc;
	if (seg_decode(&k, &v, seg) != 0)
		return MDB_CORRUPTED;
	seg_bytes(t->txn, t->st->seg, seg);
	return 0;
}

/* store_txn_get_msg - a message record inside a write transaction;
 * STORE_DAMAGED if it fails validation */
int store_txn_get_msg(struct store_txn *t, const char *qid, struct q_msg *m)
{
	MDB_val k = {QID_LEN, (void *)qid}, v;
	int rc;

	if ((rc = mdb_get(t->txn, t->st->msg, &k, &v)) != 0)
		return rc == MDB_NOTFOUND ? 1 : rc;
	return q_msg_decode(v.mv_data, v.mv_size, m) == 0 ? 0 : STORE_DAMAGED;
}

/* store_txn_get_rcpts - a message's recipients inside a write transaction */
int store_txn_get_rcpts(struct store_txn *t, const char *qid, struct q_rcpt **rcpts, size_t *n)
{
	return load_rcpts(t->st, t->txn, qid, rcpts, n, NULL);
}

/* store_unsched_damaged - remove the schedule entries of qid's recipient
 * records that fail validation (found from their layout), so that what
 * the scheduler offers always decodes: store_put_rcpt and store_del_msg
 * take such a record to have none. *n is how many went */
int store_unsched_damaged(struct store_txn *t, const char *qid, size_t *n)
{
	unsigned char key[RCPT_KEY_LEN];
	unsigned char (*keys)[STORE_KEY_MAX] = NULL;
	size_t *lens = NULL, cap = 0, lcap = 0, nkeys = 0, plen;
	MDB_cursor *cur;
	MDB_val k = {sizeof(key), key}, v;
	int rc;

	*n = 0;
	if ((rc = mdb_cursor_open(t->txn, t->st->rcpt, &cur)) != 0)
		return rc;
	rcpt_key(key, qid, 0);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	     rc == 0 && k.mv_size == RCPT_KEY_LEN && memcmp(k.mv_data, qid, QID_LEN) == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct q_rcpt r;
		size_t len;

		if (q_rcpt_decode(v.mv_data, v.mv_size, &r) == 0) {
			q_rcpt_clear(&r);
			continue;
		}
		if (q_rcpt_decode_layout(v.mv_data, v.mv_size, &r) != 0)
			continue;	/* no key to be had from it */
		keys = xgrowarray(keys, &cap, nkeys + 1, sizeof(*keys));
		lens = xgrowarray(lens, &lcap, nkeys + 1, sizeof(*lens));
		len = sched_key(keys[nkeys], r.peer, r.next_us, qid, r.idx);
		q_rcpt_clear(&r);
		if (len > 0)
			lens[nkeys++] = len;
	}
	mdb_cursor_close(cur);
	rc = rc == MDB_NOTFOUND ? 0 : rc;
	for (size_t i = 0; i < nkeys && rc == 0; i++) {
		MDB_val sk = {lens[i], keys[i]};

		char peer[SCHED_PEER_MAX + 1];

		if ((rc = mdb_del(t->txn, t->st->sched, &sk, NULL)) == 0) {
			(*n)++;
			plen = lens[i] - SCHED_TAIL_LEN;	/* the key starts with the peer */
			memcpy(peer, keys[i], plen);
			peer[plen] = '\0';
			rc = rcount_add(t, peer, -1);
		} else if (rc == MDB_NOTFOUND) {
			rc = 0;
		}
	}
	free(keys);
	free(lens);
	return rc;
}

/* store_put_tls - keep an (already sealed) TLS session under key */
int store_put_tls(struct store_txn *t, const char *key, const void *blob, size_t len)
{
	return store_kv_put(t, t->st->tls, key, strlen(key), blob, len);
}

/* store_get_tls - the sealed TLS session under key: its length, 0 if none */
size_t store_get_tls(struct store *st, const char *key, void *buf, size_t cap)
{
	MDB_txn *txn;
	MDB_val k = {strlen(key), (void *)key}, v;
	size_t n = 0;

	if (store_read_begin(st, &txn) != 0)
		return 0;
	if (mdb_get(txn, st->tls, &k, &v) == 0 && v.mv_size <= cap) {
		memcpy(buf, v.mv_data, v.mv_size);
		n = v.mv_size;
	}
	store_read_end(st, txn);
	return n;
}

/* store_put_notice - keep a notification to queue: to rcpt, with flags */
int store_put_notice(struct store_txn *t, const char *id, const char *rcpt, uint8_t flags,
		     const char *body, size_t len)
{
	size_t rlen = strlen(rcpt), klen = strlen(id);
	MDB_val key = {klen, (void *)id}, val = {3 + rlen + len, NULL};
	unsigned char *p;
	int rc;

	if (rlen > 0xffff || klen == 0 || klen > STORE_NOTICE_ID_MAX)
		return EINVAL;
	/* MDB_RESERVE: the body is copied once, straight into the page */
	if ((rc = mdb_put(t->txn, t->st->notice, &key, &val, MDB_RESERVE)) != 0)
		return rc;
	p = val.mv_data;
	p[0] = flags;
	be_put(p + 1, rlen, 2);
	memcpy(p + 3, rcpt, rlen);
	memcpy(p + 3 + rlen, body, len);
	return 0;
}

/* store_del_notice - forget a notification (queued, or given up) */
int store_del_notice(struct store_txn *t, const char *id)
{
	return store_kv_del(t, t->st->notice, id, strlen(id));
}

/* store_get_notice - a notification: its recipient and body (the
 * caller frees both); 0, 1 when there is none, 2 when it is malformed,
 * or -1 */
int store_get_notice(struct store *st, const char *id, char **rcpt, uint8_t *flags,
		     char **body, size_t *len)
{
	MDB_txn *txn;
	MDB_val k = {strlen(id), (void *)id}, v;
	const unsigned char *p;
	size_t rlen;
	int rc;

	if (st->no_notice)
		return 1;
	if (store_read_begin(st, &txn) != 0)
		return -1;
	if ((rc = mdb_get(txn, st->notice, &k, &v)) != 0) {
		store_read_end(st, txn);
		return rc == MDB_NOTFOUND ? 1 : -1;
	}
	p = v.mv_data;
	rlen = v.mv_size >= 3 ? (size_t)be_get(p + 1, 2) : 0;
	if (v.mv_size < 3 || rlen > v.mv_size - 3) {
		store_read_end(st, txn);
		return 2;
	}
	*flags = p[0];
	*rcpt = xstrndup((const char *)p + 3, rlen);
	*len = v.mv_size - 3 - rlen;
	*body = xmalloc(*len + 1);
	memcpy(*body, p + 3 + rlen, *len);
	store_read_end(st, txn);
	return 0;
}

/* store_foreach_notice - the ids of waiting notifications, oldest first,
 * until fn returns nonzero */
int store_foreach_notice(struct store *st, store_notice_fn fn, void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, stop = 0;

	if (st->no_notice)
		return 0;
	if (store_read_cursor(st, st->notice, &txn, &cur) != 0)
		return -1;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && !stop;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		char id[STORE_NOTICE_ID_MAX + 1];

		if (k.mv_size == 0 || k.mv_size > STORE_NOTICE_ID_MAX)
			continue;
		memcpy(id, k.mv_data, k.mv_size);
		id[k.mv_size] = '\0';
		stop = fn(id, arg);
	}
	mdb_cursor_close(cur);
	store_read_end(st, txn);
	return stop;
}

/* store_put_meta - set a named counter */
int store_put_meta(struct store_txn *t, const char *name, uint64_t value)
{
	unsigned char val[8];

	be_put(val, value, 8);
	return store_kv_put(t, t->st->meta, name, strlen(name), val, sizeof(val));
}

/* store_add_meta - move a named counter by delta in this transaction;
 * never below 0 */
int store_add_meta(struct store_txn *t, const char *name, int64_t delta)
{
	return counter_add(t, t->st->meta, name, strlen(name), delta, 0);
}

/* store_get_meta - a named counter; 0 if never set */
int store_get_meta(struct store *st, const char *name, uint64_t *value)
{
	MDB_txn *txn;
	MDB_val k = {strlen(name), (void *)name}, v;
	int rc;

	*value = 0;
	if ((rc = store_read_begin(st, &txn)) != 0)
		return -1;
	rc = mdb_get(txn, st->meta, &k, &v);
	if (rc == 0 && v.mv_size == 8)
		*value = be_get(v.mv_data, 8);
	store_read_end(st, txn);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : -1;
}

/* load_rcpts - the recipients of qid, in index order; those that fail
 * validation, or whose key does not name their index, are left out and
 * counted in *damaged (if not NULL) */
static int load_rcpts(struct store *st, MDB_txn *txn, const char *qid,
		      struct q_rcpt **rcpts, size_t *n, size_t *damaged)
{
	unsigned char key[RCPT_KEY_LEN];
	MDB_cursor *cur;
	MDB_val k = {sizeof(key), key}, v;
	size_t cap = 0;
	int rc;

	*rcpts = NULL;
	*n = 0;
	rcpt_key(key, qid, 0);
	if (mdb_cursor_open(txn, st->rcpt, &cur) != 0)
		return -1;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	     rc == 0 && k.mv_size == RCPT_KEY_LEN && memcmp(k.mv_data, qid, QID_LEN) == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct q_rcpt *r;

		*rcpts = xgrowarray(*rcpts, &cap, *n + 1, sizeof(**rcpts));
		r = &(*rcpts)[*n];
		if (q_rcpt_decode(v.mv_data, v.mv_size, r) != 0) {
			if (damaged)
				(*damaged)++;
		} else if (be_get((const unsigned char *)k.mv_data + QID_LEN, 4) != r->idx) {
			q_rcpt_clear(r);
			if (damaged)
				(*damaged)++;
		} else {
			(*n)++;
		}
	}
	mdb_cursor_close(cur);
	return 0;
}

/* store_get - one message and its recipients; 1 if not found,
 * STORE_DAMAGED if its record or one of its recipients' fails validation
 * (nothing returned then), -1 on error */
int store_get(struct store *st, const char *qid, struct q_msg *m, struct q_rcpt **rcpts, size_t *n)
{
	MDB_txn *txn;
	MDB_val k = {QID_LEN, (void *)qid}, v;
	size_t damaged = 0;
	int rc;

	if (strlen(qid) != QID_LEN)
		return 1;
	if (store_read_begin(st, &txn) != 0)
		return -1;
	rc = mdb_get(txn, st->msg, &k, &v);
	if (rc == 0 && (q_msg_decode(v.mv_data, v.mv_size, m) != 0 || memcmp(m->qid, qid, QID_LEN)))
		rc = STORE_DAMAGED;
	if (rc == 0 && rcpts) {
		load_rcpts(st, txn, qid, rcpts, n, &damaged);
		for (size_t i = 0; i < *n; i++)
			damaged += (*rcpts)[i].idx >= m->nrcpt;	/* more than it was given */
		if (damaged > 0) {
			q_rcpts_free(rcpts, *n);
			*n = 0;
			rc = STORE_DAMAGED;
		}
	}
	store_read_end(st, txn);
	if (rc == STORE_DAMAGED) {
		q_msg_clear(m);
		if (rcpts) {
			*rcpts = NULL;
			*n = 0;
		}
	}
	return rc == MDB_NOTFOUND ? 1 : rc == 0 || rc == STORE_DAMAGED ? rc : -1;
}

/* A batch of messages store_foreach read, and whom to hand them to. */
struct msg_batch {
	struct store *st;
	store_msg_fn fn;
	void *arg;
	int stop;
	size_t got;
	struct msg_item {
		struct q_msg m;
		struct q_rcpt *rcpts;
		size_t n;
	} *items;
};

/* msg_step - a message record and its recipients into the batch (a
 * read_step_fn); one that fails validation is passed over */
static int msg_step(MDB_txn *txn, const MDB_val *k, const MDB_val *v, struct read_pos *pos,
		    void *arg)
{
	struct msg_batch *b = arg;
	struct msg_item *it = &b->items[b->got];

	(void)k, (void)pos;
	if (q_msg_decode(v->mv_data, v->mv_size, &it->m) != 0)
		return READ_SKIP;
	load_rcpts(b->st, txn, it->m.qid, &it->rcpts, &it->n, NULL);
	b->got++;
	return READ_TAKE;
}

/* msg_flush - hand a batch of messages on, until fn stops (a
 * read_flush_fn); frees them either way */
static int msg_flush(void *arg)
{
	struct msg_batch *b = arg;

	for (size_t i = 0; i < b->got; i++) {
		struct msg_item *it = &b->items[i];

		if (!b->stop)
			b->stop = b->fn(&it->m, it->rcpts, it->n, b->arg);
		q_rcpts_free(&it->rcpts, it->n);
		q_msg_clear(&it->m);
	}
	b->got = 0;
	return b->stop;
}

/* store_foreach - every message in queue id (arrival) order, read in
 * batches (store_read_batches): fn runs with no transaction open */
int store_foreach(struct store *st, store_msg_fn fn, void *arg)
{
	struct msg_batch b = {st, fn, arg, 0, 0, NULL};
	struct read_pos pos = {.len = 0};
	int rc;

	b.items = xcalloc(STORE_FOREACH_BATCH, sizeof(*b.items));
	rc = store_read_batches(st, st->msg, &pos, STORE_FOREACH_BATCH, msg_step, msg_flush, &b);
	free(b.items);
	return rc;
}

/* store_walk_msgs - message records (no recipients) in queue id order
 * from after pos ("" from the first), at most max of them, in one read
 * transaction; fn sees each inside it (it must only copy), and its
 * non-zero return stops the walk before that one. pos becomes the last
 * one fn was done with, or "" at the end of the table. 1 at the end, 0
 * when stopped or max were read, -1 */
int store_walk_msgs(struct store *st, char pos[QID_LEN + 1], size_t max, store_walk_fn fn,
		    void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k = {strlen(pos), pos}, v;
	size_t seen = 0;
	int rc, stop = 0;

	if (store_read_cursor(st, st->msg, &txn, &cur) != 0)
		return -1;
	rc = k.mv_size ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE)
		: mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	if (rc == 0 && k.mv_size == strlen(pos) && memcmp(k.mv_data, pos, k.mv_size) == 0)
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);	/* after it */
	for (; rc == 0 && !stop && seen < max; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct q_msg m;

		seen++;
		if (q_msg_decode(v.mv_data, v.mv_size, &m) == 0) {
			stop = fn(&m, arg);
			q_msg_clear(&m);
		}
		if (stop)
			break;	/* before it: the next walk starts there */
		if (k.mv_size == QID_LEN) {
			memcpy(pos, k.mv_data, QID_LEN);
			pos[QID_LEN] = '\0';
		}
	}
	mdb_cursor_close(cur);
	store_read_end(st, txn);
	if (rc == MDB_NOTFOUND) {
		pos[0] = '\0';
		return 1;
	}
	return rc == 0 ? 0 : -1;
}

/* store_foreach_seg - every segment's bookkeeping */
int store_foreach_seg(struct store *st, store_seg_fn fn, void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, stop = 0;

	if (store_read_cursor(st, st->seg, &txn, &cur) != 0)
		return -1;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && !stop;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct store_seg seg;

		if (seg_decode(&k, &v, &seg) != 0)
			continue;	/* a segment's octets, or not of this layout */
		seg_bytes(txn, st->seg, &seg);
		stop = fn(&seg, arg);
	}
	mdb_cursor_close(cur);
	store_read_end(st, txn);
	return stop;
}

/* store_count - how many messages are queued */
int store_count(struct store *st, uint64_t *messages)
{
	return store_count_entries(st, st->msg, messages);
}

/* store_count_notices - how many notifications wait to be queued */
int store_count_notices(struct store *st, uint64_t *notices)
{
	*notices = 0;
	return st->no_notice ? 0 : store_count_entries(st, st->notice, notices);
}
