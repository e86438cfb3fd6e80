/*
 * store - ternd's queue state in LMDB. The only module that includes
 * lmdb.h (CONVENTIONS.md; tests/lmdb-include.sh checks it): everything
 * else sees messages, recipients, segments, the schedule and the
 * history through these functions. Its files: store_lmdb.c (the LMDB
 * discipline below), store_queue.c (the queue records), store_sched.c
 * (the reads of the schedule), store_hist.c (the history), sharing
 * store_priv.h, which lists the tables.
 *
 * LMDB's caveats are this module's rules: one write transaction at a
 * time (ternd's committer thread, or ternq when ternd is not running),
 * short transactions, read transactions that live for one request, never
 * MDB_NOSYNC, never across fork(). The map grows on demand: a write that
 * hits MDB_MAP_FULL is aborted, the map doubled and the write replayed
 * (like Postfix's slmdb), with readers of this process held off by a lock
 * while the map is resized.
 */
#ifndef TERN_STORE_H
#define TERN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "hist.h"
#include "queue.h"

struct store;
struct store_txn;

/* a spool segment's bookkeeping */
struct store_seg {
	uint64_t id;
	uint64_t length;		/* octets committed; beyond is garbage */
	uint32_t live;			/* messages with their body in it */
	int closed;			/* no more appends */
	uint64_t live_bytes;		/* their octets (STORE_SEG_BYTES_UNKNOWN: written
					 * by a release that did not count them) */
};
#define STORE_SEG_BYTES_UNKNOWN UINT64_MAX
void store_seg_count(struct store_seg *seg, int64_t msgs, int64_t bytes);

struct store *store_open(const char *dir, int readonly, size_t mapsize, char *err, size_t errlen);
void store_lock_share(const char *dir);
void store_close(struct store **st);
uint64_t store_rebuilt(const struct store *st);
int store_reader_check(struct store *st);
int store_map_usage(struct store *st, uint64_t *used, uint64_t *size);

/* Writes: fn builds the transaction; it is replayed after map growth.
 * Returns 0, -1, or STORE_PANIC when the database needs a restart. */
#define STORE_PANIC (-2)
typedef int (*store_write_fn)(struct store_txn *txn, void *arg);
int store_write(struct store *st, store_write_fn fn, void *arg, char *err, size_t errlen);
/* Inside a write: fn's changes kept if it returns 0, dropped otherwise
 * (see store_lmdb.c). t must have no cursor open; fn closes its own. */
#define STORE_DROPPED (-3)
int store_nested(struct store_txn *txn, store_write_fn fn, void *arg, char *err, size_t errlen);

int store_put_msg(struct store_txn *txn, const struct q_msg *m);
int store_add_msg(struct store_txn *txn, const struct q_msg *m);
int store_put_rcpt(struct store_txn *txn, const char *qid, const struct q_rcpt *r);
int store_del_msg(struct store_txn *txn, const char *qid);
int store_put_seg(struct store_txn *txn, const struct store_seg *seg);
int store_del_seg(struct store_txn *txn, uint64_t id);
int store_put_meta(struct store_txn *txn, const char *name, uint64_t value);
int store_add_meta(struct store_txn *txn, const char *name, int64_t delta);
int store_put_tls(struct store_txn *txn, const char *key, const void *blob, size_t len);
/* Notifications (DSNs) to queue: written with the bounce they report. */
#define STORE_NOTICE_ID_MAX 64
int store_put_notice(struct store_txn *txn, const char *id, const char *rcpt, uint8_t flags,
		     const char *body, size_t len);
int store_del_notice(struct store_txn *txn, const char *id);
/* 0 found, 1 not found, else an error */
int store_txn_get_msg(struct store_txn *txn, const char *qid, struct q_msg *m);
int store_txn_get_seg(struct store_txn *txn, uint64_t id, struct store_seg *seg);
int store_txn_get_rcpts(struct store_txn *txn, const char *qid, struct q_rcpt **rcpts, size_t *n);
int store_unsched_damaged(struct store_txn *txn, const char *qid, size_t *n);

/* Reads, each in its own read transaction. */
int store_get_meta(struct store *st, const char *name, uint64_t *value);
int store_last_qid(struct store *st, uint64_t *value);
int store_first_qid(struct store *st, uint64_t *value);
size_t store_get_tls(struct store *st, const char *key, void *buf, size_t cap);
/* store_get: 0 found, 1 not found, -1 on error, or STORE_DAMAGED: a
 * record of the message fails validation (q_msg_decode, q_rcpt_decode),
 * and the message must be held, never sent (queue_op_write QOP_HOLD) */
#define STORE_DAMAGED (-4)
int store_get(struct store *st, const char *qid, struct q_msg *m,
	      struct q_rcpt **rcpts, size_t *nrcpts);
typedef int (*store_msg_fn)(const struct q_msg *m, const struct q_rcpt *rcpts,
			    size_t nrcpts, void *arg);
int store_foreach(struct store *st, store_msg_fn fn, void *arg);
typedef int (*store_walk_fn)(const struct q_msg *m, void *arg);
int store_walk_msgs(struct store *st, char pos[QID_LEN + 1], size_t max, store_walk_fn fn,
		    void *arg);
typedef int (*store_seg_fn)(const struct store_seg *seg, void *arg);
int store_foreach_seg(struct store *st, store_seg_fn fn, void *arg);
/* The schedule: live recipients by peer, then due time. */
typedef int (*store_peer_fn)(const char *peer, void *arg);
int store_foreach_sched_peer(struct store *st, store_peer_fn fn, void *arg);
typedef int (*store_due_fn)(uint64_t next_us, const char *qid, uint32_t idx, void *arg);
int store_foreach_due(struct store *st, const char *peer, uint64_t until_us,
		      store_due_fn fn, void *arg);
/* A store_due_fn's return: go on after the message's other entries at
 * this due time (one seek); 0 goes on with the next entry, any other
 * value stops the walk. */
#define STORE_DUE_PASS (-6)
/* Where a bounded walk of a peer's schedule stands: after this entry. */
struct store_due_pos {
	uint64_t next_us;
	char qid[QID_LEN + 1];
	uint32_t idx;
	int set;			/* 0: at the peer's first entry */
};
int store_walk_due(struct store *st, const char *peer, uint64_t until_us,
		   struct store_due_pos *pos, size_t max, store_due_fn fn, void *arg);
/* a peer's live recipients: one lookup of the count kept with its schedule */
int store_peer_rcpts(struct store *st, const char *peer, uint64_t *n);
int store_count(struct store *st, uint64_t *messages);
int store_count_notices(struct store *st, uint64_t *notices);
int store_get_notice(struct store *st, const char *id, char **rcpt, uint8_t *flags,
		     char **body, size_t *len);
typedef int (*store_notice_fn)(const char *id, void *arg);
int store_foreach_notice(struct store *st, store_notice_fn fn, void *arg);

/* Delivery history (same environment, written with the state change;
 * its lookup index later, in batches: see store_hist.c). */
int store_hist_put(struct store_txn *txn, const struct hist_rec *h);
/* index entries one store_hist_index call adds at most (then finishes the
 * record it is at): a call stays short however big the backlog */
#define STORE_HIST_INDEX_ENTRIES 1024
int store_hist_index(struct store_txn *txn, uint64_t keep, size_t *n);
uint64_t store_hist_unindexed(struct store_txn *txn);
/* In a write that added records: past lag waiting, index down to lag
 * (or catchup below before, what waited at the write's start), in a
 * nested transaction; see store_hist.c */
int store_hist_index_over(struct store_txn *txn, uint64_t lag, uint64_t catchup, uint64_t before,
			  uint64_t *left, char *err, size_t errlen);
int store_hist_prune(struct store_txn *txn, uint64_t before_us, size_t max, size_t *n);
typedef int (*store_hist_fn)(const struct hist_rec *h, void *arg);
int store_hist_find(struct store *st, char kind, const char *value, store_hist_fn fn, void *arg);
/* records with from_us <= time_us < to_us, in time order, read in bounded
 * batches; fn's non-zero return stops. Returns that value, or -1. */
int store_hist_foreach_range(struct store *st, uint64_t from_us, uint64_t to_us,
			     store_hist_fn fn, void *arg);

#endif
