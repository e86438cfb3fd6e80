/*
 * queue_ops - the changes ternq makes to the queue (hold, release,
 * delete, retry, requeue; expire is ternd's: see relay_result.h), as
 * store write functions. ternd runs them through its
 * committer (the only writer while it runs); ternq runs them directly
 * when ternd is stopped. One implementation for both.
 */
#ifndef TERN_QUEUE_OPS_H
#define TERN_QUEUE_OPS_H

#include <stdint.h>

#include "conf.h"
#include "queue.h"
#include "spool.h"
#include "store.h"

enum queue_op { QOP_HOLD, QOP_RELEASE, QOP_DELETE, QOP_RETRY, QOP_REQUEUE, QOP_EXPIRE };

struct queue_op_arg {
	enum queue_op op;
	char qid[QID_LEN + 1];
	uint64_t now_us;
	/* the segment still being appended to, never removed: ternd gives its
	 * spool, whose current segment the write reads itself (it runs in the
	 * committer, the one thread that moves it); ternq and the tests set
	 * current_seg (0: none) */
	struct spool *spool;
	uint64_t current_seg;
	const struct conf *conf;	/* requeue: the [routes] to route by */
	/* results, for the caller to act on after the commit */
	int found;
	int own_file;			/* delete: remove SPOOL/own/QID */
	uint64_t seg_to_remove;		/* delete: remove this empty segment (0: none) */
	int was, now;			/* queue_state before and after (found only) */
	int damaged;			/* hold: a record failed validation (STORE_DAMAGED) */
	size_t changed;			/* state or schedule changes made (0: unchanged) */
	size_t unrouted;		/* requeue: live recipients no route matches */
	char envelope[512];		/* "from=<S>, to=<R>, ..." for the log line */
};

/* a message's state as tern_queue_messages{state} counts it */
enum queue_state { QSTATE_GONE = -1, QSTATE_QUEUED, QSTATE_DEFERRED, QSTATE_HOLD };
int queue_state(const struct q_msg *m, const struct q_rcpt *rcpts, size_t n);
/* The queue database counts messages per state, moved in the transaction
 * that moves a message (every write that can change one calls
 * queue_count_move), so that tern_queue_messages starts without a walk. */
#define QSTATE_N 3
int queue_count_move(struct store_txn *txn, int was, int now, size_t n);
int queue_counts_get(struct store *st, uint64_t n[QSTATE_N]);
int queue_counts_put(struct store_txn *txn, void *arg);

void queue_envelope(char *out, size_t len, const struct q_msg *m, const struct q_rcpt *r, size_t n);
int queue_op_parse(const char *name, enum queue_op *op);
const char *queue_op_done(enum queue_op op);
int queue_op_write(struct store_txn *txn, void *arg);
void queue_op_warn(const struct queue_op_arg *a);
void queue_op_cleanup(struct spool *sp, const struct queue_op_arg *a);

#endif
