/*
 * store_sched - the scheduler's reads of the schedule index (layout:
 * store_priv.h): the peers with live recipients, a peer's recipients due
 * by a time, in bounded walks that go on where the last one stopped, and
 * a peer's count of them. Read transactions only, each within one call;
 * the index is written with the recipient records, in store_queue.c.
 */
#include "config.h"

#include <string.h>

#include "store_priv.h"

/* sched_peer_len - the length of the peer name a schedule key starts
 * with; -1 if the key is not of this layout */
static int sched_peer_len(const MDB_val *k)
{
	const unsigned char *nul = memchr(k->mv_data, '\0', k->mv_size);
	size_t n = nul ? (size_t)(nul - (const unsigned char *)k->mv_data) : 0;

	return nul && n <= SCHED_PEER_MAX && k->mv_size == n + SCHED_TAIL_LEN ? (int)n : -1;
}

/* The walk over the schedule's peers: the peer found, and whom to tell. */
struct peer_walk {
	store_peer_fn fn;
	void *arg;
	int found;
	char peer[SCHED_PEER_MAX + 1];
};

/* peer_step - the first schedule entry at or after pos is a peer's first
 * (a read_step_fn): take the peer, and go on at the next one, after all
 * of its entries (peer . '\1'); entries not of this layout are passed
 * over */
static int peer_step(MDB_txn *txn, const MDB_val *k, const MDB_val *v, struct read_pos *pos,
		     void *arg)
{
	struct peer_walk *w = arg;
	int n = sched_peer_len(k);

	(void)txn, (void)v;
	if (n < 0)
		return READ_SKIP;
	memcpy(w->peer, k->mv_data, (size_t)n);
	w->peer[n] = '\0';
	w->found = 1;
	memcpy(pos->key, w->peer, (size_t)n);
	pos->key[n] = '\1';
	pos->len = (size_t)n + 1;
	pos->after = 0;
	return READ_JUMP;
}

/* peer_flush - tell fn the peer found, if one was (a read_flush_fn) */
static int peer_flush(void *arg)
{
	struct peer_walk *w = arg;

	if (!w->found)
		return 0;
	w->found = 0;
	return w->fn(w->peer, w->arg);
}

/* store_foreach_sched_peer - each peer with live recipients, once, in
 * name order: one short lookup per peer (a batch of one), however many
 * recipients each has, and no transaction held while fn runs (fn may
 * read the store) */
int store_foreach_sched_peer(struct store *st, store_peer_fn fn, void *arg)
{
	struct peer_walk w = {fn, arg, 0, ""};
	struct read_pos pos = {.len = 0};

	return store_read_batches(st, st->sched, &pos, 1, peer_step, peer_flush, &w);
}

/* due_seek - the cursor at a peer's first schedule entry after pos (a
 * pass over a message sets pos->idx to UINT32_MAX: after all of its
 * entries at that time), or at its first one without pos */
static int due_seek(MDB_cursor *cur, unsigned char key[STORE_KEY_MAX], size_t plen,
		    const struct store_due_pos *pos, MDB_val *k, MDB_val *v)
{
	int rc;

	k->mv_data = key;
	k->mv_size = plen + 1;
	if (pos == NULL || !pos->set)
		return mdb_cursor_get(cur, k, v, MDB_SET_RANGE);
	be_put(key + plen + 1, pos->next_us, 8);
	memcpy(key + plen + 9, pos->qid, QID_LEN);
	be_put(key + plen + 9 + QID_LEN, pos->idx, 4);
	k->mv_size = plen + SCHED_TAIL_LEN;
	if ((rc = mdb_cursor_get(cur, k, v, MDB_SET_RANGE)) == 0 && k->mv_size == plen + SCHED_TAIL_LEN
	    && memcmp(k->mv_data, key, k->mv_size) == 0)
		rc = mdb_cursor_get(cur, k, v, MDB_NEXT);	/* pos itself was seen */
	return rc;
}

/* store_walk_due - peer's live recipients due by until_us, earliest
 * first, from after *pos (NULL, or not set: from the first), at most max
 * of them (0: all). fn returns 0 to go on, STORE_DUE_PASS to go on after
 * the message's other entries at that time (a seek, not a read of each),
 * else a value that stops the walk and is returned, *pos left before
 * that entry. Returns 0 with pos->set when max were seen (pos at the
 * last: the next call goes on from there), 0 with it cleared when the
 * walk reached until_us or the peer's last entry; -1 on error */
int store_walk_due(struct store *st, const char *peer, uint64_t until_us,
		   struct store_due_pos *pos, size_t max, store_due_fn fn, void *arg)
{
	unsigned char key[STORE_KEY_MAX];
	size_t plen = strlen(peer), seen = 0;
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, stop = 0;

	if (plen > SCHED_PEER_MAX)
		return 0;	/* no key can be made for it: it has no entries */
	memcpy(key, peer, plen + 1);
	if (store_read_cursor(st, st->sched, &txn, &cur) != 0)
		return -1;
	for (rc = due_seek(cur, key, plen, pos, &k, &v); rc == 0 && !stop;) {
		const unsigned char *tail;
		struct store_due_pos at;

		if (k.mv_size < plen + 1 || memcmp(k.mv_data, key, plen + 1) != 0)
			break;	/* the next peer's */
		if (k.mv_size != plen + SCHED_TAIL_LEN) {
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
			continue;	/* not of this layout */
		}
		tail = (const unsigned char *)k.mv_data + plen + 1;
		if ((at.next_us = be_get(tail, 8)) > until_us)
			break;	/* nothing more due: the end, even at the bound */
		if (max > 0 && seen == max) {
			stop = STORE_DUE_PASS;	/* more to see: pos stays set */
			break;
		}
		memcpy(at.qid, tail + 8, QID_LEN);
		at.qid[QID_LEN] = '\0';
		at.idx = (uint32_t)be_get(tail + 8 + QID_LEN, 4);
		at.set = 1;
		seen++;
		if ((stop = fn(at.next_us, at.qid, at.idx, arg)) != 0 && stop != STORE_DUE_PASS)
			break;
		if (stop == STORE_DUE_PASS)
			at.idx = UINT32_MAX;
		stop = 0;
		if (pos)
			*pos = at;
		rc = at.idx == UINT32_MAX ? due_seek(cur, key, plen, &at, &k, &v)
					  : mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	store_read_end(st, txn);
	if (stop == STORE_DUE_PASS)
		return 0;
	if (pos && stop == 0)
		pos->set = 0;	/* the end: the next walk starts at the first entry */
	return stop;
}

/* store_foreach_due - peer's live recipients due by until_us, earliest
 * first; fn's nonzero return stops the walk and is returned (but
 * STORE_DUE_PASS, see store_walk_due), -1 on error */
int store_foreach_due(struct store *st, const char *peer, uint64_t until_us,
		      store_due_fn fn, void *arg)
{
	return store_walk_due(st, peer, until_us, NULL, 0, fn, arg);
}

/* store_peer_rcpts - a peer's live recipients (its schedule entries):
 * one lookup of its count, however many they are */
int store_peer_rcpts(struct store *st, const char *peer, uint64_t *n)
{
	size_t plen = strlen(peer);
	MDB_txn *txn;
	MDB_val k = {plen + 1, (void *)peer}, v;	/* as rcount_add */
	int rc;

	*n = 0;
	if (st->no_rcount || plen > SCHED_PEER_MAX)
		return 0;	/* none counted (an older queue, read-only), or none can be */
	if (store_read_begin(st, &txn) != 0)
		return -1;
	rc = mdb_get(txn, st->rcount, &k, &v);
	if (rc == 0 && v.mv_size == 8)
		*n = be_get(v.mv_data, 8);
	store_read_end(st, txn);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : -1;
}
