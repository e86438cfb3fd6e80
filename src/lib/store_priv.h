/*
 * store_priv - what the store's own files share, and nothing else may
 * include: store_lmdb.c (the LMDB discipline), store_queue.c (the queue
 * records), store_sched.c (the reads of the schedule), store_hist.c (the
 * delivery history) and store_journal.c (the milter's journal, an
 * environment of its own). Everything else sees
 * store.h and store_journal.h; only these files include lmdb.h
 * (tests/lmdb-include.sh checks it).
 *
 * Databases in one environment (STATE_DIR/queue):
 *   msg    qid                      -> message record (store_codec)
 *   rcpt   qid . idx(be32)          -> recipient record
 *   sched  peer . '\0' . next_us(be64) . qid . idx -> "": live recipients
 *          by peer, then due time (a peer's name has no NUL; the key must
 *          fit LMDB's 511 octets, so the name at most SCHED_PEER_MAX)
 *   rcount peer . '\0'              -> u64 (be64): the peer's schedule entries,
 *          moved in the transaction that adds or deletes one (sched_op),
 *          so that counting a peer's recipients is one lookup; no key for
 *          a peer with none
 *   seg    id(be64)                 -> segment bookkeeping (13 octets)
 *          id(be64) . 'b'           -> u64: its live messages' octets (a
 *          key of its own: releases before it read the record alone)
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
 * The first seven are store_queue.c's (store_sched.c reads sched and rcount),
 * hist, hidx and hpend store_hist.c's.
 * Layout 1 keyed sched by next_us first, layout 2 had no rcount; a
 * read-write open rebuilds both from the recipient records of such a
 * queue (store_open, store_queue_layout). A read-only open of a queue
 * older than notice, hpend or rcount reads them as empty. Big-endian keys
 * sort numerically.
 */
#ifndef TERN_STORE_PRIV_H
#define TERN_STORE_PRIV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <lmdb.h>

#include "store.h"
#include "store_codec.h"

#define STORE_LAYOUT 3			/* meta "layout": sched keyed by peer first, rcount */
#define STORE_FOREACH_BATCH 512		/* records read per read transaction */

struct store {
	MDB_env *env;
	MDB_dbi msg, rcpt, sched, rcount, seg, meta, tls, hist, hidx, notice, hpend;
	size_t mapsize;
	pthread_rwlock_t resize;	/* readers share; map growth is exclusive */
	int unmapped;			/* under resize: a growth failed, LMDB has no map */
	int readonly;
	uint64_t rebuilt;		/* schedule entries store_open rebuilt */
	int no_notice, no_hpend, no_rcount; /* read-only, and no such table yet */
};

struct store_txn {
	struct store *st;
	MDB_txn *txn;
};

/* be_put - big-endian integer into key bytes */
static inline void be_put(unsigned char *p, uint64_t v, size_t width)
{
	for (size_t i = width; i-- > 0; v >>= 8)
		p[i] = (unsigned char)(v & 0xff);
}

/* be_get - big-endian integer from key bytes */
static inline uint64_t be_get(const unsigned char *p, size_t width)
{
	uint64_t v = 0;

	for (size_t i = 0; i < width; i++)
		v = v << 8 | p[i];
	return v;
}

/* An environment's table: its name, its flags beyond MDB_CREATE, where
 * its handle goes, and (if not NULL) where to note that a read-only open
 * found no such table (a queue older than the table): then it reads as
 * empty rather than failing the open. */
struct store_table {
	const char *name;
	unsigned flags;
	MDB_dbi *dbi;
	int *missing;
};

int store_env_create(MDB_env **env, const char *dir, int readonly, unsigned maxdbs,
		     size_t mapsize, const char *what, char *err, size_t errlen);
int store_tables_open(MDB_env *env, int readonly, const struct store_table *tables, size_t n);
int store_queue_layout(struct store_txn *t, void *arg);

/* Reads: a transaction that holds off map growth in this process. */
int store_read_begin(struct store *st, MDB_txn **txn);
void store_read_end(struct store *st, MDB_txn *txn);
int store_read_cursor(struct store *st, MDB_dbi dbi, MDB_txn **txn, MDB_cursor **cur);
int store_count_entries(struct store *st, MDB_dbi dbi, uint64_t *n);

/*
 * store_read_batches - a walk over a table that never pins pages for
 * long: up to batch entries read in one read transaction, which then
 * ends before they are handed on. A step sees each entry (in the
 * transaction) and says what it did with it; after each batch, with no
 * transaction open, flush hands on what was taken (maybe nothing), and
 * its non-zero return stops the walk. Each batch starts where pos says:
 * after the last entry a step saw, or where a step that returned
 * READ_JUMP set it.
 */
enum {
	READ_TAKE,			/* took it: one more in the batch */
	READ_SKIP,			/* passed over it */
	READ_END,			/* past the end: the walk ends before it */
	READ_JUMP			/* took it, and set pos: the batch ends */
};
struct read_pos {
	unsigned char key[STORE_KEY_MAX];
	size_t len;			/* 0: from the first entry */
	int after;			/* start after key (else at it, or beyond) */
};
typedef int (*read_step_fn)(MDB_txn *txn, const MDB_val *k, const MDB_val *v,
			    struct read_pos *pos, void *arg);
typedef int (*read_flush_fn)(void *arg);
int store_read_batches(struct store *st, MDB_dbi dbi, struct read_pos *pos, size_t batch,
		       read_step_fn step, read_flush_fn flush, void *arg);
int store_env_read_batches(MDB_env *env, MDB_dbi dbi, struct read_pos *pos, size_t batch,
			   read_step_fn step, read_flush_fn flush, void *arg);

/* Writes, inside store_write's transaction. */
int store_kv_put(struct store_txn *t, MDB_dbi dbi, const void *k, size_t klen,
		 const void *v, size_t vlen);
int store_kv_del(struct store_txn *t, MDB_dbi dbi, const void *k, size_t klen);
#define TAKE_STOP (-1)	/* neither an errno value nor an LMDB error */
/* A step of store_take_front: 0 to delete the entry and go on,
 * TAKE_STOP to stop before it, else an error. */
typedef int (*front_fn)(MDB_txn *txn, const MDB_val *k, const MDB_val *v, void *arg);
int store_take_front(MDB_txn *txn, MDB_dbi dbi, size_t max, size_t *n, front_fn fn, void *arg);

#endif
