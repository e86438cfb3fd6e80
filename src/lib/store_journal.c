/*
 * store_journal - tern-milter's journal in LMDB.
 *
 * Databases in STATE_DIR/journal:
 *   jrnl  time_us(be64) . seq(be32)          -> journal record (store_codec)
 *   jidx  (dupsort) 't' trace id (16 octets) -> jrnl key
 *                   'q' MTA queue id         -> jrnl key
 * The map is fixed (JOURNAL_MAP): a full map refuses the batch, which the
 * caller counts; pruning (history_retention) keeps it from filling. One
 * writer (the milter's journal thread); readers hold a transaction for
 * one call only. Opening the environment and pruning its front are the
 * store's LMDB discipline (store_lmdb.c, through store_priv.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_journal.h"
#include "store_priv.h"
#include "xalloc.h"

/* 4 GB of address space; 1 GB where size_t has 32 bits (4 GB would
 * wrap to 0, and LMDB would keep its default of 10 MB) */
#define JOURNAL_MAP (SIZE_MAX > 0xffffffffu ? (size_t)4 << 30 : (size_t)1 << 30)
#define JKEY_LEN 12
#define JREAD_BATCH 512		/* records per read transaction */
#define JIDX_MAX 200
#define JREC_MAX 4096
#define JPRUNE_MAX 1000

struct journal_db {
	MDB_env *env;
	MDB_dbi jrnl, jidx;
	uint32_t seq;
};

/* journal_db_open - open (creating if allowed) the journal in dir */
struct journal_db *journal_db_open(const char *dir, int readonly, char *err, size_t errlen)
{
	struct journal_db *db = xcalloc(1, sizeof(*db));
	const struct store_table tables[] = {
		{"jrnl", 0, &db->jrnl, NULL}, {"jidx", MDB_DUPSORT, &db->jidx, NULL},
	};
	int rc;

	if (store_env_create(&db->env, dir, readonly, 4, JOURNAL_MAP, "the milter journal",
			     err, errlen) != 0) {
		free(db);
		return NULL;
	}
	rc = store_tables_open(db->env, readonly, tables, sizeof(tables) / sizeof(tables[0]));
	if (rc != 0) {
		snprintf(err, errlen, "%s: cannot open the milter journal: %s", dir,
			 mdb_strerror(rc));
		mdb_env_close(db->env);
		free(db);
		return NULL;
	}
	return db;
}

/* journal_db_close - close the environment and clear the pointer */
void journal_db_close(struct journal_db **dbp)
{
	if (*dbp == NULL)
		return;
	mdb_env_close((*dbp)->env);
	free(*dbp);
	*dbp = NULL;
}

/* jkey - time . seq, big-endian */
static void jkey(unsigned char key[JKEY_LEN], uint64_t t, uint32_t seq)
{
	be_put(key, t, 8);
	be_put(key + 8, seq, 4);
}

/* jidx_op - add or delete one index entry; an empty value has none */
static int jidx_op(MDB_txn *txn, const struct journal_db *db, int add, char kind, const void *v,
		   size_t vlen, const unsigned char key[JKEY_LEN])
{
	unsigned char ik[1 + JIDX_MAX];
	MDB_val k = {1 + (vlen < JIDX_MAX ? vlen : JIDX_MAX), ik}, d = {JKEY_LEN, (void *)key};
	int rc;

	if (vlen == 0)
		return 0;
	ik[0] = (unsigned char)kind;
	memcpy(ik + 1, v, k.mv_size - 1);
	rc = add ? mdb_put(txn, db->jidx, &k, &d, MDB_NODUPDATA) : mdb_del(txn, db->jidx, &k, &d);
	return rc == MDB_KEYEXIST || rc == MDB_NOTFOUND ? 0 : rc;
}

/* jindex - a record's index entries, added or deleted */
static int jindex(MDB_txn *txn, const struct journal_db *db, int add, const struct journal_rec *r,
		  const unsigned char key[JKEY_LEN])
{
	static const unsigned char none[sizeof(r->trace_id)];
	int rc = memcmp(r->trace_id, none, sizeof(none)) == 0 ? 0	/* trace = no */
		: jidx_op(txn, db, add, 't', r->trace_id, sizeof(r->trace_id), key);

	return rc ? rc : jidx_op(txn, db, add, 'q', r->mta_qid, strlen(r->mta_qid), key);
}

/* A prune: the journal, and the time records older than go. */
struct jprune {
	const struct journal_db *db;
	uint64_t before;
};

/* prune_record - a record older than before loses its index entries (a
 * front_fn: store_take_front deletes it); TAKE_STOP at the first younger
 * one */
static int prune_record(MDB_txn *txn, const MDB_val *k, const MDB_val *v, void *arg)
{
	const struct jprune *p = arg;
	unsigned char key[JKEY_LEN];
	struct journal_rec r;
	int rc = 0;

	if (k->mv_size != JKEY_LEN || be_get(k->mv_data, 8) >= p->before)
		return TAKE_STOP;
	memcpy(key, k->mv_data, JKEY_LEN);	/* LMDB's copy may move with the update */
	if (journal_rec_decode(v->mv_data, v->mv_size, &r) == 0) {
		rc = jindex(txn, p->db, 0, &r, key);
		journal_rec_clear(&r);
	}
	return rc;
}

/* prune - drop up to JPRUNE_MAX records older than before */
static int prune(MDB_txn *txn, const struct journal_db *db, uint64_t before)
{
	struct jprune p = {db, before};
	size_t n;

	return store_take_front(txn, db->jrnl, JPRUNE_MAX, &n, prune_record, &p);
}

/* journal_db_append - n records (and a bounded prune) in one durable commit */
int journal_db_append(struct journal_db *db, const struct journal_rec *recs, size_t n,
		      uint64_t prune_before_us, char *err, size_t errlen)
{
	unsigned char buf[JREC_MAX], key[JKEY_LEN];
	MDB_txn *txn;
	int rc;

	if ((rc = mdb_txn_begin(db->env, NULL, 0, &txn)) != 0)
		goto out;
	for (size_t i = 0; i < n && rc == 0; i++) {
		size_t len = journal_rec_encode(&recs[i], buf, sizeof(buf));
		MDB_val k = {JKEY_LEN, key}, v = {len, buf};

		if (len == 0)
			continue;	/* cannot happen with the milter's bounded fields */
		jkey(key, recs[i].time_us, db->seq++);
		if ((rc = mdb_put(txn, db->jrnl, &k, &v, 0)) == 0)
			rc = jindex(txn, db, 1, &recs[i], key);
	}
	if (rc == 0 && prune_before_us)
		rc = prune(txn, db, prune_before_us);
	if (rc == 0)
		rc = mdb_txn_commit(txn);	/* synchronous */
	else
		mdb_txn_abort(txn);
out:
	if (rc != 0)
		snprintf(err, errlen, "milter journal: %s", mdb_strerror(rc));
	return rc == 0 ? 0 : -1;
}

/* journal_db_find - the records under one index key, oldest first; how
 * many, or -1 */
int journal_db_find(struct journal_db *db, char kind, const void *key, size_t klen,
		    journal_fn fn, void *arg)
{
	unsigned char ik[1 + JIDX_MAX];
	struct journal_rec *recs = NULL;
	MDB_val k = {1 + (klen < JIDX_MAX ? klen : JIDX_MAX), ik}, v;
	MDB_cursor *cur;
	MDB_txn *txn;
	size_t n = 0, cap = 0;
	int rc, stop = 0;

	ik[0] = (unsigned char)kind;
	memcpy(ik + 1, key, k.mv_size - 1);
	if (mdb_txn_begin(db->env, NULL, MDB_RDONLY, &txn) != 0)
		return -1;
	if (mdb_cursor_open(txn, db->jidx, &cur) != 0) {
		mdb_txn_abort(txn);
		return -1;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP)) {
		MDB_val jk = v, jv;

		if (mdb_get(txn, db->jrnl, &jk, &jv) != 0)
			continue;
		recs = xgrowarray(recs, &cap, n + 1, sizeof(*recs));
		if (journal_rec_decode(jv.mv_data, jv.mv_size, &recs[n]) == 0)
			n++;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	for (size_t i = 0; i < n; i++) {
		if (!stop)
			stop = fn(&recs[i], arg);
		journal_rec_clear(&recs[i]);
	}
	free(recs);
	return (int)n;
}

/* One batch of journal_db_foreach_range. */
struct jrange {
	uint64_t to_us;
	journal_fn fn;
	void *arg;
	struct journal_rec *recs;
	size_t n;
	int stop;
};

/* jrange_step - a record of the range, decoded into the batch */
static int jrange_step(MDB_txn *txn, const MDB_val *k, const MDB_val *v, struct read_pos *pos,
		       void *arg)
{
	struct jrange *b = arg;

	(void)txn;
	(void)pos;
	if (k->mv_size != JKEY_LEN)
		return READ_SKIP;
	if (be_get(k->mv_data, 8) >= b->to_us)
		return READ_END;
	if (journal_rec_decode(v->mv_data, v->mv_size, &b->recs[b->n]) != 0)
		return READ_SKIP;
	b->n++;
	return READ_TAKE;
}

/* jrange_flush - hand the batch on, outside the read transaction */
static int jrange_flush(void *arg)
{
	struct jrange *b = arg;

	for (size_t i = 0; i < b->n; i++) {
		if (!b->stop)
			b->stop = b->fn(&b->recs[i], b->arg);
		journal_rec_clear(&b->recs[i]);
	}
	b->n = 0;
	return b->stop;
}

/* journal_db_foreach_range - the records of a time range, oldest first, in
 * batches (store_env_read_batches): a slow consumer pins no pages and
 * memory stays one batch; fn's non-zero return stops the walk */
int journal_db_foreach_range(struct journal_db *db, uint64_t from_us, uint64_t to_us,
			     journal_fn fn, void *arg)
{
	struct jrange b = {to_us, fn, arg, NULL, 0, 0};
	struct read_pos pos = {.len = JKEY_LEN, .after = 0};
	int rc;

	jkey(pos.key, from_us, 0);
	b.recs = xcalloc(JREAD_BATCH, sizeof(*b.recs));
	rc = store_env_read_batches(db->env, db->jrnl, &pos, JREAD_BATCH, jrange_step, jrange_flush,
				    &b);
	free(b.recs);
	return rc;
}
