/*
 * store - ternd's queue state in LMDB.
 *
 * Databases in one environment (STATE_DIR/queue):
 *   msg    qid                      -> message record (store_codec)
 *   rcpt   qid . idx(be32)          -> recipient record
 *   sched  peer . '\0' . next_us(be64) . qid . idx -> "": live recipients
 *          by peer, then due time (a peer's name has no NUL; the key must
 *          fit LMDB's 511 octets, so the name at most SCHED_PEER_MAX)
 *   seg    id(be64)                 -> segment bookkeeping
 *   meta   name                     -> u64 (last queue id, next segment,
 *          layout version, ...)
 *   tls    peer/host/port/policy    -> sealed TLS session (opaque here)
 *   hist   time_us(be64) . qid . kind . idx(be32) -> history record (store_codec)
 *   hidx   (dupsort) 'q' qid -> hist key; 't' trace id (hex) -> qid;
 *          'm' Message-ID -> qid; 'r' recipient (lower case) -> qid
 *   hpend  hist key -> "": history records not in hidx yet
 *   notice id -> flags(1) . rcpt len(be16) . rcpt . body: a non-delivery
 *          notification written with the bounce it reports, until it is
 *          queued as a message
 * Layout 1 keyed sched by next_us first; a read-write open rebuilds such a
 * schedule from the recipient records (store_open).
 * History is written in the transaction of the state change it records
 * and pruned oldest first, a bounded number of records per call. Its index
 * is not: a record's hidx entries (about three random keys, so a leaf page
 * each) would double the pages an acceptance writes. The record is noted
 * in hpend, whose keys, like hist's, mostly append; store_hist_index moves
 * pending records into hidx in batches, and lookups read all pending
 * records as well, so they find the same either way. hpend is keyed by
 * the record rather than marked by a position in hist, because records do
 * not arrive in time order (a delivery result is stamped before it is
 * committed).
 * A read-only open of a queue older than notice or hpend reads them as
 * empty.
 * Big-endian keys sort numerically. Must never hold a read transaction
 * longer than one call, and never write outside store_write().
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lmdb.h>
#include <sodium.h>

#include "store.h"
#include "store_codec.h"
#include "store_env.h"
#include "xalloc.h"

#define STORE_MAP_INITIAL (256ULL << 20)
#define STORE_MAP_MAX (1ULL << 40)
#define STORE_FOREACH_BATCH 512	/* messages read per read transaction */
#define RCPT_KEY_LEN (QID_LEN + 4)
#define STORE_LAYOUT 2			/* meta "layout": sched keyed by peer first */
#define HIST_KEY_LEN (8 + QID_LEN + 1 + 4)
#define HIDX_KEY_MAX 400		/* LMDB keys: 511 octets at most */
#define HIST_RECORD_MAX (1 << 17)

struct store {
	MDB_env *env;
	MDB_dbi msg, rcpt, sched, seg, meta, tls, hist, hidx, notice, hpend;
	size_t mapsize;
	pthread_rwlock_t resize;	/* readers share; map growth is exclusive */
	int unmapped;			/* under resize: a growth failed, LMDB has no map */
	int readonly;
	uint64_t rebuilt;		/* schedule entries store_open rebuilt */
	int no_notice, no_hpend;	/* read-only, and no such table yet */
};

struct store_txn {
	struct store *st;
	MDB_txn *txn;
};

/* be_put - big-endian integer into key bytes */
static void be_put(unsigned char *p, uint64_t v, size_t width)
{
	for (size_t i = width; i-- > 0; v >>= 8)
		p[i] = (unsigned char)(v & 0xff);
}

/* be_get - big-endian integer from key bytes */
static uint64_t be_get(const unsigned char *p, size_t width)
{
	uint64_t v = 0;

	for (size_t i = 0; i < width; i++)
		v = v << 8 | p[i];
	return v;
}

static int layout_write(struct store_txn *t, void *arg);

/* newer_table - mdb_dbi_open's rc for a table that a read-only open of an
 * older queue may not find: then 0, and *missing set */
static int newer_table(int rc, int readonly, int *missing)
{
	*missing = readonly && rc == MDB_NOTFOUND;
	return *missing ? 0 : rc;
}

/* store_lock_share - the lock file of an environment in dir: 0660 when
 * its group may read the data file (an LMDB reader, ternq run by a member
 * of admin_group, writes its slot in the reader table), else 0600 */
void store_lock_share(const char *dir)
{
	char path[4096];
	struct stat st;
	mode_t mode;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	if (stat(path, &st) < 0)
		return;
	mode = st.st_mode & S_IRGRP ? 0660 : 0600;
	snprintf(path, sizeof(path), "%s/lock.mdb", dir);
	if (chmod(path, mode) < 0)
		return;	/* readers then fail with a clear error of their own */
}

/* store_open - open (creating if allowed) the queue environment in dir;
 * a read-write open brings an older layout up to date */
struct store *store_open(const char *dir, int readonly, size_t mapsize, char *err, size_t errlen)
{
	struct store *st = xcalloc(1, sizeof(*st));
	MDB_txn *txn = NULL;
	MDB_envinfo info;
	char why[256];
	int rc;

	pthread_rwlock_init(&st->resize, NULL);
	st->readonly = readonly;
	if (!readonly && mkdir(dir, 0750) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
		goto fail;
	}
	if ((rc = mdb_env_create(&st->env)) != 0
	    || (rc = mdb_env_set_maxdbs(st->env, 16)) != 0
	    || (rc = mdb_env_set_mapsize(st->env, mapsize ? mapsize : STORE_MAP_INITIAL)) != 0
	    || (rc = store_env_open(st->env, dir, readonly)) != 0) {
		snprintf(err, errlen, "%s: cannot open queue database: %s", dir, mdb_strerror(rc));
		goto fail;
	}
	if (!readonly)
		store_lock_share(dir);
	/* Another process may have grown the map: adopt its size. */
	mdb_env_set_mapsize(st->env, 0);
	mdb_env_info(st->env, &info);
	st->mapsize = info.me_mapsize;
	if ((rc = mdb_txn_begin(st->env, NULL, readonly ? MDB_RDONLY : 0, &txn)) != 0
	    || (rc = mdb_dbi_open(txn, "msg", readonly ? 0 : MDB_CREATE, &st->msg)) != 0
	    || (rc = mdb_dbi_open(txn, "rcpt", readonly ? 0 : MDB_CREATE, &st->rcpt)) != 0
	    || (rc = mdb_dbi_open(txn, "sched", readonly ? 0 : MDB_CREATE, &st->sched)) != 0
	    || (rc = mdb_dbi_open(txn, "seg", readonly ? 0 : MDB_CREATE, &st->seg)) != 0
	    || (rc = mdb_dbi_open(txn, "meta", readonly ? 0 : MDB_CREATE, &st->meta)) != 0
	    || (rc = mdb_dbi_open(txn, "tls", readonly ? 0 : MDB_CREATE, &st->tls)) != 0
	    || (rc = mdb_dbi_open(txn, "hist", readonly ? 0 : MDB_CREATE, &st->hist)) != 0
	    || (rc = mdb_dbi_open(txn, "hidx", readonly ? MDB_DUPSORT
				  : MDB_CREATE | MDB_DUPSORT, &st->hidx)) != 0
	    || (rc = newer_table(mdb_dbi_open(txn, "notice", readonly ? 0 : MDB_CREATE,
					      &st->notice), readonly, &st->no_notice)) != 0
	    || (rc = newer_table(mdb_dbi_open(txn, "hpend", readonly ? 0 : MDB_CREATE,
					      &st->hpend), readonly, &st->no_hpend)) != 0
	    || (rc = mdb_txn_commit(txn)) != 0) {
		if (txn && rc != 0)
			mdb_txn_abort(txn);
		snprintf(err, errlen, "%s: cannot open queue tables: %s%s", dir, mdb_strerror(rc),
			 readonly && rc == MDB_NOTFOUND ? " (has ternd ever run?)" : "");
		goto fail;
	}
	store_reader_check(st);
	if (!readonly && store_write(st, layout_write, NULL, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s: cannot bring the queue tables to layout %d: %s", dir,
			 STORE_LAYOUT, why);
		goto fail;
	}
	return st;
fail:
	if (st->env)
		mdb_env_close(st->env);
	pthread_rwlock_destroy(&st->resize);
	free(st);
	return NULL;
}

/* store_rebuilt - how many schedule entries store_open rebuilt from an
 * older layout (0: none) */
uint64_t store_rebuilt(const struct store *st)
{
	return st->rebuilt;
}

/* store_close - close the environment and clear the pointer */
void store_close(struct store **stp)
{
	struct store *st = *stp;

	if (st == NULL)
		return;
	mdb_env_close(st->env);
	pthread_rwlock_destroy(&st->resize);
	free(st);
	*stp = NULL;
}

/* store_reader_check - clear reader slots of dead processes; how many */
int store_reader_check(struct store *st)
{
	int dead = 0;

	mdb_reader_check(st->env, &dead);
	return dead;
}

/* store_grow - double the map; only with no transaction of ours open.
 * MDB_MAP_FULL at the largest map; MDB_PANIC when the new map could not
 * be made (LMDB has dropped the old one by then: only a restart helps) */
static int store_grow(struct store *st, char *err, size_t errlen)
{
	size_t want = st->mapsize * 2;
	int rc;

	if (want > STORE_MAP_MAX)
		return MDB_MAP_FULL;
	pthread_rwlock_wrlock(&st->resize);
	rc = mdb_env_set_mapsize(st->env, want);
	if (rc == 0)
		st->mapsize = want;
	else
		st->unmapped = 1;	/* no one may touch the environment again */
	pthread_rwlock_unlock(&st->resize);
	if (rc == 0)
		return 0;
	snprintf(err, errlen, "queue database: cannot grow its map to %zu MB: %s", want >> 20,
		 rc > 0 ? strerror(rc) : mdb_strerror(rc));
	return MDB_PANIC;
}

/* write_error - the message for a write's result rc (none for 0) */
static void write_error(int rc, char *err, size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	if (rc != 0)
		snprintf(err, errlen, "queue database: %s", rc == STORE_DAMAGED
			 ? "a record fails validation" : rc > 0 ? strerror(rc) : mdb_strerror(rc));
}

/* store_write - run fn in a write transaction and commit it durably */
int store_write(struct store *st, store_write_fn fn, void *arg, char *err, size_t errlen)
{
	struct store_txn t = {st, NULL};
	int rc;

	if (errlen > 0)
		err[0] = '\0';
	for (;;) {
		pthread_rwlock_rdlock(&st->resize);
		if (st->unmapped) {
			pthread_rwlock_unlock(&st->resize);
			rc = MDB_PANIC;
			break;
		}
		rc = mdb_txn_begin(st->env, NULL, 0, &t.txn);
		if (rc == MDB_MAP_RESIZED) {	/* grown by another process */
			pthread_rwlock_unlock(&st->resize);
			pthread_rwlock_wrlock(&st->resize);
			mdb_env_set_mapsize(st->env, 0);
			pthread_rwlock_unlock(&st->resize);
			continue;
		}
		if (rc == 0) {
			rc = fn(&t, arg);
			if (rc == 0)
				rc = mdb_txn_commit(t.txn);	/* synchronous: data and meta synced */
			else
				mdb_txn_abort(t.txn);
		}
		pthread_rwlock_unlock(&st->resize);
		if (rc != MDB_MAP_FULL)
			break;
		if ((rc = store_grow(st, err, errlen)) != 0)
			break;
	}
	if (rc != MDB_PANIC || err[0] == '\0')
		write_error(rc, err, errlen);
	/* After a failed meta page write LMDB refuses every transaction:
	 * only a restart (and recovery) helps. */
	return rc == 0 ? 0 : rc == MDB_PANIC ? STORE_PANIC : -1;
}

/* store_nested - fn in a transaction nested in t: what it writes joins t
 * if it returns 0 and is dropped otherwise. Returns 0 (joined),
 * STORE_DROPPED (too many pages for one transaction: dropped, t goes on),
 * or fn's or LMDB's error, with the reason in err: t had better not go
 * on then, except after MDB_MAP_FULL, which store_write grows the map
 * for. */
int store_nested(struct store_txn *t, store_write_fn fn, void *arg, char *err, size_t errlen)
{
	struct store_txn child = {t->st, NULL};
	int rc;

	if ((rc = mdb_txn_begin(t->st->env, t->txn, 0, &child.txn)) == 0) {
		if ((rc = fn(&child, arg)) == 0)
			rc = mdb_txn_commit(child.txn);
		else
			mdb_txn_abort(child.txn);
	}
	write_error(rc, err, errlen);
	return rc == MDB_TXN_FULL ? STORE_DROPPED : rc;
}

/* put - one key/value in a write transaction */
static int put(struct store_txn *t, MDB_dbi dbi, const void *k, size_t klen, const void *v, size_t vlen)
{
	MDB_val key = {klen, (void *)k}, val = {vlen, (void *)v};

	return mdb_put(t->txn, dbi, &key, &val, 0);
}

/* del - delete one key; a missing key is fine */
static int del(struct store_txn *t, MDB_dbi dbi, const void *k, size_t klen)
{
	MDB_val key = {klen, (void *)k};
	int rc = mdb_del(t->txn, dbi, &key, NULL);

	return rc == MDB_NOTFOUND ? 0 : rc;
}

static int load_rcpts(struct store *st, MDB_txn *txn, const char *qid,
		      struct q_rcpt **rcpts, size_t *n, size_t *damaged);
static int read_begin(struct store *st, MDB_txn **txn);
static void read_end(struct store *st, MDB_txn *txn);
static int read_cursor(struct store *st, MDB_dbi dbi, MDB_txn **txn, MDB_cursor **cur);

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

/* sched_peer_len - the length of the peer name a schedule key starts
 * with; -1 if the key is not of this layout */
static int sched_peer_len(const MDB_val *k)
{
	const unsigned char *nul = memchr(k->mv_data, '\0', k->mv_size);
	size_t n = nul ? (size_t)(nul - (const unsigned char *)k->mv_data) : 0;

	return nul && n <= SCHED_PEER_MAX && k->mv_size == n + SCHED_TAIL_LEN ? (int)n : -1;
}

/* store_put_msg - replace a message record */
int store_put_msg(struct store_txn *t, const struct q_msg *m)
{
	unsigned char buf[STORE_RECORD_MAX];
	size_t n = q_msg_encode(m, buf, sizeof(buf));

	return n ? put(t, t->st->msg, m->qid, QID_LEN, buf, n) : EINVAL;
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
	if (read_begin(st, &txn) != 0)
		return -1;
	if (mdb_cursor_open(txn, st->msg, &cur) == 0) {
		if (mdb_cursor_get(cur, &k, &v, op) == 0 && k.mv_size == QID_LEN) {
			memcpy(qid, k.mv_data, QID_LEN);
			qid[QID_LEN] = '\0';
			qid_parse(qid, value);
		}
		mdb_cursor_close(cur);
	}
	read_end(st, txn);
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

/* sched_op - add (or delete) the schedule entry of a recipient record:
 * none unless it is live; EINVAL if its key cannot be made */
static int sched_op(struct store_txn *t, int add, const char *qid, const struct q_rcpt *r)
{
	unsigned char key[STORE_KEY_MAX];
	size_t n;

	if (!live(r->state))
		return 0;
	if ((n = sched_key(key, r->peer, r->next_us, qid, r->idx)) == 0)
		return EINVAL;
	return add ? put(t, t->st->sched, key, n, "", 0) : del(t, t->st->sched, key, n);
}

/* store_put_rcpt - add or replace a recipient, moving its schedule entry
 * from where the record it replaces had it (another time, another peer).
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
		rc = put(t, t->st->rcpt, key, sizeof(key), buf, n);
	}
	return rc != 0 ? rc : sched_op(t, 1, qid, r);
}

/* store_del_msg - remove a message, its recipients and their schedule entries */
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
	return del(t, t->st->msg, qid, QID_LEN);
}

/* sched_rebuild - the schedule anew from the recipient records */
static int sched_rebuild(struct store_txn *t)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	t->st->rebuilt = 0;	/* again from 0 if store_write retries */
	if ((rc = mdb_drop(t->txn, t->st->sched, 0)) != 0
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

/* layout_write - bring the tables up to STORE_LAYOUT and record it there.
 * Layout 1 (no "layout" in meta) keyed the schedule by due time first: it
 * is rebuilt from the recipient records in this one transaction. A new
 * store takes the same path, with nothing to rebuild. */
static int layout_write(struct store_txn *t, void *arg)
{
	static const char name[] = "layout";
	MDB_val k = {sizeof(name) - 1, (void *)name}, v;
	int rc;

	(void)arg;
	rc = mdb_get(t->txn, t->st->meta, &k, &v);
	if (rc == 0 && v.mv_size == 8 && be_get(v.mv_data, 8) >= STORE_LAYOUT)
		return 0;
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

/* seg_decode - bookkeeping from a stored value */
static int seg_decode(const MDB_val *k, const MDB_val *v, struct store_seg *seg)
{
	if (k->mv_size != 8 || v->mv_size != 13)
		return -1;
	seg->id = be_get(k->mv_data, 8);
	seg->length = be_get(v->mv_data, 8);
	seg->live = (uint32_t)be_get((const unsigned char *)v->mv_data + 8, 4);
	seg->closed = ((const unsigned char *)v->mv_data)[12] != 0;
	return 0;
}

/* store_put_seg - add or replace a segment's bookkeeping */
int store_put_seg(struct store_txn *t, const struct store_seg *seg)
{
	unsigned char key[8], val[13];

	be_put(key, seg->id, 8);
	seg_encode(seg, val);
	return put(t, t->st->seg, key, sizeof(key), val, sizeof(val));
}

/* store_del_seg - forget a segment */
int store_del_seg(struct store_txn *t, uint64_t id)
{
	unsigned char key[8];

	be_put(key, id, 8);
	return del(t, t->st->seg, key, sizeof(key));
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
	return seg_decode(&k, &v, seg) == 0 ? 0 : MDB_CORRUPTED;
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
	size_t *lens = NULL, cap = 0, lcap = 0, nkeys = 0;
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

		if ((rc = mdb_del(t->txn, t->st->sched, &sk, NULL)) == 0)
			(*n)++;
		else if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	free(keys);
	free(lens);
	return rc;
}

/* store_put_tls - keep an (already sealed) TLS session under key */
int store_put_tls(struct store_txn *t, const char *key, const void *blob, size_t len)
{
	return put(t, t->st->tls, key, strlen(key), blob, len);
}

/* store_get_tls - the sealed TLS session under key: its length, 0 if none */
size_t store_get_tls(struct store *st, const char *key, void *buf, size_t cap)
{
	MDB_txn *txn;
	MDB_val k = {strlen(key), (void *)key}, v;
	size_t n = 0;

	if (read_begin(st, &txn) != 0)
		return 0;
	if (mdb_get(txn, st->tls, &k, &v) == 0 && v.mv_size <= cap) {
		memcpy(buf, v.mv_data, v.mv_size);
		n = v.mv_size;
	}
	read_end(st, txn);
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
	return del(t, t->st->notice, id, strlen(id));
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
	if (read_begin(st, &txn) != 0)
		return -1;
	if ((rc = mdb_get(txn, st->notice, &k, &v)) != 0) {
		read_end(st, txn);
		return rc == MDB_NOTFOUND ? 1 : -1;
	}
	p = v.mv_data;
	rlen = v.mv_size >= 3 ? (size_t)be_get(p + 1, 2) : 0;
	if (v.mv_size < 3 || rlen > v.mv_size - 3) {
		read_end(st, txn);
		return 2;
	}
	*flags = p[0];
	*rcpt = xstrndup((const char *)p + 3, rlen);
	*len = v.mv_size - 3 - rlen;
	*body = xmalloc(*len + 1);
	memcpy(*body, p + 3 + rlen, *len);
	read_end(st, txn);
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
	if (read_cursor(st, st->notice, &txn, &cur) != 0)
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
	read_end(st, txn);
	return stop;
}

/* store_put_meta - set a named counter */
int store_put_meta(struct store_txn *t, const char *name, uint64_t value)
{
	unsigned char val[8];

	be_put(val, value, 8);
	return put(t, t->st->meta, name, strlen(name), val, sizeof(val));
}

/* read_begin - a read transaction, holding off map growth in this process */
static int read_begin(struct store *st, MDB_txn **txn)
{
	int rc;

	pthread_rwlock_rdlock(&st->resize);
	if (st->unmapped) {
		pthread_rwlock_unlock(&st->resize);
		return MDB_PANIC;
	}
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
	if (rc == MDB_MAP_RESIZED) {
		pthread_rwlock_unlock(&st->resize);
		pthread_rwlock_wrlock(&st->resize);
		mdb_env_set_mapsize(st->env, 0);
		pthread_rwlock_unlock(&st->resize);
		pthread_rwlock_rdlock(&st->resize);
		rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
	}
	if (rc != 0)
		pthread_rwlock_unlock(&st->resize);
	return rc;
}

/* read_end - end a read transaction */
static void read_end(struct store *st, MDB_txn *txn)
{
	mdb_txn_abort(txn);
	pthread_rwlock_unlock(&st->resize);
}

/* read_cursor - a read transaction and a cursor on dbi; -1 if either fails */
static int read_cursor(struct store *st, MDB_dbi dbi, MDB_txn **txn, MDB_cursor **cur)
{
	if (read_begin(st, txn) != 0)
		return -1;
	if (mdb_cursor_open(*txn, dbi, cur) != 0) {
		read_end(st, *txn);
		return -1;
	}
	return 0;
}

/* store_get_meta - a named counter; 0 if never set */
int store_get_meta(struct store *st, const char *name, uint64_t *value)
{
	MDB_txn *txn;
	MDB_val k = {strlen(name), (void *)name}, v;
	int rc;

	*value = 0;
	if ((rc = read_begin(st, &txn)) != 0)
		return -1;
	rc = mdb_get(txn, st->meta, &k, &v);
	if (rc == 0 && v.mv_size == 8)
		*value = be_get(v.mv_data, 8);
	read_end(st, txn);
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

/* q_rcpts_free - free an array of recipients */
void q_rcpts_free(struct q_rcpt **rcpts, size_t n)
{
	for (size_t i = 0; *rcpts && i < n; i++)
		q_rcpt_clear(&(*rcpts)[i]);
	free(*rcpts);
	*rcpts = NULL;
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
	if (read_begin(st, &txn) != 0)
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
	read_end(st, txn);
	if (rc == STORE_DAMAGED) {
		q_msg_clear(m);
		if (rcpts) {
			*rcpts = NULL;
			*n = 0;
		}
	}
	return rc == MDB_NOTFOUND ? 1 : rc == 0 || rc == STORE_DAMAGED ? rc : -1;
}

/* store_foreach - every message in queue id (arrival) order */
int store_foreach(struct store *st, store_msg_fn fn, void *arg)
{
	struct batch_item {
		struct q_msg m;
		struct q_rcpt *rcpts;
		size_t n;
	} *items = xcalloc(STORE_FOREACH_BATCH, sizeof(*items));
	char after[QID_LEN + 1] = "";
	int stop = 0, more = 1;

	/*
	 * A read transaction pins the pages it sees: held while fn writes to a
	 * slow terminal, it would make the database grow without bound. So
	 * read a batch, end the transaction, then call fn.
	 */
	while (more && !stop) {
		MDB_txn *txn;
		MDB_cursor *cur;
		MDB_val k = {QID_LEN, after}, v;
		size_t got = 0;
		int rc;

		if (read_cursor(st, st->msg, &txn, &cur) != 0) {
			free(items);
			return -1;
		}
		rc = after[0] ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
		if (rc == 0 && after[0] && k.mv_size == QID_LEN && memcmp(k.mv_data, after, QID_LEN) == 0)
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
		for (; rc == 0 && got < STORE_FOREACH_BATCH; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			struct batch_item *it = &items[got];

			if (k.mv_size == QID_LEN) {
				memcpy(after, k.mv_data, QID_LEN);
				after[QID_LEN] = '\0';
			}
			if (q_msg_decode(v.mv_data, v.mv_size, &it->m) != 0)
				continue;
			load_rcpts(st, txn, it->m.qid, &it->rcpts, &it->n, NULL);
			got++;
		}
		more = rc == 0;
		mdb_cursor_close(cur);
		read_end(st, txn);
		for (size_t i = 0; i < got; i++) {
			if (!stop)
				stop = fn(&items[i].m, items[i].rcpts, items[i].n, arg);
			q_rcpts_free(&items[i].rcpts, items[i].n);
			q_msg_clear(&items[i].m);
		}
	}
	free(items);
	return stop;
}

/* store_foreach_seg - every segment's bookkeeping */
int store_foreach_seg(struct store *st, store_seg_fn fn, void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, stop = 0;

	if (read_cursor(st, st->seg, &txn, &cur) != 0)
		return -1;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && !stop;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct store_seg seg;

		if (seg_decode(&k, &v, &seg) == 0)
			stop = fn(&seg, arg);
	}
	mdb_cursor_close(cur);
	read_end(st, txn);
	return stop;
}

/* next_sched_peer - the first peer in the schedule after peer (all of
 * whose entries sort below peer . '\1'), or the first of all when after
 * is 0: 0 found (in peer), 1 none left, -1 on error */
static int next_sched_peer(struct store *st, int after, char peer[SCHED_PEER_MAX + 1])
{
	unsigned char key[SCHED_PEER_MAX + 1];
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k = {0, key}, v;
	int rc, n = -1;

	if (read_cursor(st, st->sched, &txn, &cur) != 0)
		return -1;
	if (after) {
		k.mv_size = strlen(peer) + 1;
		memcpy(key, peer, k.mv_size - 1);
		key[k.mv_size - 1] = '\1';
	}
	for (rc = mdb_cursor_get(cur, &k, &v, after ? MDB_SET_RANGE : MDB_FIRST);
	     rc == 0 && (n = sched_peer_len(&k)) < 0;	/* not of this layout: passed over */
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
		;
	if (rc == 0) {
		memcpy(peer, k.mv_data, (size_t)n);
		peer[n] = '\0';
	}
	mdb_cursor_close(cur);
	read_end(st, txn);
	return rc == 0 ? 0 : rc == MDB_NOTFOUND ? 1 : -1;
}

/* store_foreach_sched_peer - each peer with live recipients, once, in
 * name order: one short lookup per peer, however many recipients each
 * has, and no transaction held while fn runs (fn may read the store) */
int store_foreach_sched_peer(struct store *st, store_peer_fn fn, void *arg)
{
	char peer[SCHED_PEER_MAX + 1];
	int rc, stop = 0;

	for (int after = 0; !stop; after = 1) {
		if ((rc = next_sched_peer(st, after, peer)) != 0)
			return rc < 0 ? -1 : 0;
		stop = fn(peer, arg);
	}
	return stop;
}

/* store_foreach_due - peer's live recipients due by until_us, earliest
 * first; fn's nonzero return stops the walk and is returned (-1 on error) */
int store_foreach_due(struct store *st, const char *peer, uint64_t until_us,
		      store_due_fn fn, void *arg)
{
	unsigned char key[STORE_KEY_MAX];
	size_t plen = strlen(peer);
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k = {plen + 1, key}, v;
	int rc, stop = 0;

	if (plen > SCHED_PEER_MAX)
		return 0;	/* no key can be made for it: it has no entries */
	memcpy(key, peer, plen + 1);
	if (read_cursor(st, st->sched, &txn, &cur) != 0)
		return -1;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0 && !stop;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		const unsigned char *tail;
		char qid[QID_LEN + 1];
		uint64_t next;

		if (k.mv_size < plen + 1 || memcmp(k.mv_data, key, plen + 1) != 0)
			break;	/* the next peer's */
		if (k.mv_size != plen + SCHED_TAIL_LEN)
			continue;	/* not of this layout */
		tail = (const unsigned char *)k.mv_data + plen + 1;
		if ((next = be_get(tail, 8)) > until_us)
			break;
		memcpy(qid, tail + 8, QID_LEN);
		qid[QID_LEN] = '\0';
		stop = fn(next, qid, (uint32_t)be_get(tail + 8 + QID_LEN, 4), arg);
	}
	mdb_cursor_close(cur);
	read_end(st, txn);
	return stop;
}

/* count_entries - how many records a table holds */
static int count_entries(struct store *st, MDB_dbi dbi, uint64_t *n)
{
	MDB_txn *txn;
	MDB_stat s;

	if (read_begin(st, &txn) != 0)
		return -1;
	mdb_stat(txn, dbi, &s);
	*n = s.ms_entries;
	read_end(st, txn);
	return 0;
}

/* store_count - how many messages are queued */
int store_count(struct store *st, uint64_t *messages)
{
	return count_entries(st, st->msg, messages);
}

/* store_count_notices - how many notifications wait to be queued */
int store_count_notices(struct store *st, uint64_t *notices)
{
	*notices = 0;
	return st->no_notice ? 0 : count_entries(st, st->notice, notices);
}

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
		if ((rc = put(t, t->st->hist, key, sizeof(key), buf, n)) == 0)
			rc = put(t, t->st->hpend, key, sizeof(key), "", 0);
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

#define TAKE_STOP (-1)	/* neither an errno value nor an LMDB error */

/* A step of take_front: 0 to delete the entry and go on, TAKE_STOP to
 * stop before it, else an error. */
typedef int (*front_fn)(struct store_txn *t, const MDB_val *k, const MDB_val *v, void *arg);

/* take_front - up to max entries from the front of a table, each passed
 * to fn and deleted; how many in *n */
static int take_front(struct store_txn *t, MDB_dbi dbi, size_t max, size_t *n, front_fn fn,
		      void *arg)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	*n = 0;
	if ((rc = mdb_cursor_open(t->txn, dbi, &cur)) != 0)
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	if (rc == MDB_NOTFOUND)
		rc = 0;		/* empty */
	else while (rc == 0 && *n < max) {
		if ((rc = fn(t, &k, &v, arg)) != 0 || (rc = mdb_cursor_del(cur, 0)) != 0)
			break;
		(*n)++;
		/* the next entry; after the last one was deleted, EINVAL */
		rc = mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT);
		if (rc == EINVAL || rc == MDB_NOTFOUND) {
			rc = 0;
			break;
		}
	}
	mdb_cursor_close(cur);
	return rc == TAKE_STOP ? 0 : rc;
}

/* index_pending - a pending record's index entries, until there are
 * STORE_HIST_INDEX_ENTRIES (a record pruned already has none) */
static int index_pending(struct store_txn *t, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct hidx_run *r = arg;
	MDB_val hv;
	int rc;

	(void)v;
	if (r->entries >= STORE_HIST_INDEX_ENTRIES)
		return TAKE_STOP;
	rc = mdb_get(t->txn, t->st->hist, (MDB_val *)k, &hv);
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
	return waiting > keep ? take_front(t, t->st->hpend, waiting - keep, n, index_pending, &r) : 0;
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

/* prune_record - a record older than *before_us: its index entries and
 * its pending mark, whichever it has; TAKE_STOP at the first younger one */
static int prune_record(struct store_txn *t, const MDB_val *k, const MDB_val *v, void *arg)
{
	const uint64_t *before_us = arg;
	unsigned char key[HIST_KEY_LEN];
	MDB_val pk = {HIST_KEY_LEN, key};
	struct hidx_run r = {t, 0};
	int rc;

	if (k->mv_size != HIST_KEY_LEN || be_get(k->mv_data, 8) >= *before_us)
		return TAKE_STOP;
	memcpy(key, k->mv_data, HIST_KEY_LEN);	/* LMDB's copy may move with the update */
	if ((rc = index_record(&r, &pk, v, hidx_del)) != 0)
		return rc;
	rc = mdb_del(t->txn, t->st->hpend, &pk, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* store_hist_prune - drop up to max records older than before_us; how many
 * in *n. Bounded, so that pruning never makes a long write transaction. */
int store_hist_prune(struct store_txn *t, uint64_t before_us, size_t max, size_t *n)
{
	return take_front(t, t->st->hist, max, n, prune_record, &before_us);
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
	if (read_cursor(st, st->hidx, &txn, &cur) != 0)
		return -1;
	if (!st->no_hpend && mdb_cursor_open(txn, st->hpend, &pend) != 0) {
		mdb_cursor_close(cur);
		read_end(st, txn);
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
	read_end(st, txn);
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

/* store_hist_foreach_range - the history between two times, oldest first.
 * The hist keys start with the time, so this is a cursor walk; like
 * store_foreach it reads a batch, ends the transaction, then calls fn, so
 * a slow consumer never pins pages and memory stays one batch. */
int store_hist_foreach_range(struct store *st, uint64_t from_us, uint64_t to_us,
			     store_hist_fn fn, void *arg)
{
	struct hist_rec *recs = xcalloc(STORE_FOREACH_BATCH, sizeof(*recs));
	unsigned char after[HIST_KEY_LEN];
	int stop = 0, more = 1, started = 0;

	memset(after, 0, sizeof(after));
	be_put(after, from_us, 8);
	while (more && !stop) {
		MDB_txn *txn;
		MDB_cursor *cur;
		MDB_val k = {HIST_KEY_LEN, after}, v;
		size_t got = 0;
		int rc;

		if (read_cursor(st, st->hist, &txn, &cur) != 0) {
			free(recs);
			return -1;
		}
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		if (rc == 0 && started && k.mv_size == HIST_KEY_LEN
		    && memcmp(k.mv_data, after, HIST_KEY_LEN) == 0)
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
		for (; rc == 0 && got < STORE_FOREACH_BATCH; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			if (k.mv_size != HIST_KEY_LEN)
				continue;
			if (be_get(k.mv_data, 8) >= to_us) {
				rc = MDB_NOTFOUND;
				break;
			}
			memcpy(after, k.mv_data, HIST_KEY_LEN);
			started = 1;
			if (hist_rec_decode(v.mv_data, v.mv_size, &recs[got]) == 0)
				got++;
		}
		more = rc == 0;
		mdb_cursor_close(cur);
		read_end(st, txn);
		for (size_t i = 0; i < got; i++) {
			if (!stop)
				stop = fn(&recs[i], arg);
			hist_rec_clear(&recs[i]);
		}
	}
	free(recs);
	return stop;
}
