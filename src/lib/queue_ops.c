/*
 * queue_ops - hold, release, delete, retry and requeue, as store write
 * functions. Expire is named here (ternq's command, the log's past
 * tense) but written by ternd alone (relay_result_expire): it queues a
 * DSN, which needs ternd's notice code; queue_op_write refuses it.
 *
 * Files are removed only after the transaction that forgot them has
 * committed (queue_op_cleanup), never before: a crash in between leaves
 * an orphan file, which recovery removes, never a record without a body.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "queue_ops.h"
#include "smtp_cmd.h"
#include "textesc.h"
#include "xalloc.h"

/* queue_op_parse - the operation named by a ternq command */
int queue_op_parse(const char *name, enum queue_op *op)
{
	static const char *const names[] = {"hold", "release", "delete", "retry", "requeue",
					    "expire"};

	for (int i = 0; i < 6; i++)
		if (strcmp(name, names[i]) == 0)
			return *op = (enum queue_op)i, 0;
	return -1;
}

/* queue_op_done - the operation in the past tense, for log lines */
const char *queue_op_done(enum queue_op op)
{
	static const char *const done[] = {"held", "released", "removed", "scheduled for retry",
					   "requeued", "expired by admin"};

	return done[op];
}

/* queue_envelope - "from=<S>, to=<R1>, to=<R2>" of the recipients still
 * to be delivered, cut with ", ..." where it would not fit */
void queue_envelope(char *out, size_t len, const struct q_msg *m, const struct q_rcpt *r, size_t n)
{
	char ea[TEXTESC_SIZE(SMTP_ADDR_MAX)];
	size_t used = (size_t)snprintf(out, len, "from=<%s>",
				       textesc(ea, sizeof(ea), m->sender, TEXTESC_ADDR));

	for (size_t i = 0; i < n && used < len; i++) {
		int k;

		if (r[i].state != RCPT_QUEUED && r[i].state != RCPT_DEFERRED)
			continue;
		/* escaped as in every log line: an address cannot add a field */
		k = snprintf(out + used, len - used, ", to=<%s>",
			     textesc(ea, sizeof(ea), r[i].addr, TEXTESC_ADDR));
		if (k < 0 || (size_t)k >= len - used) {
			out[used] = '\0';
			if (used + 6 <= len)
				memcpy(out + used, ", ...", 6);
			return;
		}
		used += (size_t)k;
	}
}

/* queue_state - what tern_queue_messages{state} counts a message as:
 * held, deferred (a live recipient has been tried), or queued */
int queue_state(const struct q_msg *m, const struct q_rcpt *rcpts, size_t n)
{
	if (m->flags & QMSG_HOLD)
		return QSTATE_HOLD;
	for (size_t i = 0; i < n; i++)
		if (rcpts[i].state == RCPT_DEFERRED)
			return QSTATE_DEFERRED;
	return QSTATE_QUEUED;
}

/* The queue database's names of the per-state counts, by enum queue_state */
static const char *const count_name[QSTATE_N] = {"msgs_queued", "msgs_deferred", "msgs_held"};

/* queue_count_move - n messages go from state was to state now in this
 * transaction (QSTATE_GONE: not in the queue before, or no longer) */
int queue_count_move(struct store_txn *txn, int was, int now, size_t n)
{
	int rc = 0;

	if (was == now || n == 0)
		return 0;
	if (was >= 0 && was < QSTATE_N)
		rc = store_add_meta(txn, count_name[was], -(int64_t)n);
	if (rc == 0 && now >= 0 && now < QSTATE_N)
		rc = store_add_meta(txn, count_name[now], (int64_t)n);
	return rc;
}

/* queue_counts_get - the per-state counts; 0 if they add up to the
 * messages in the queue, 1 if they do not (never written: a queue of an
 * older ternd; or a record that failed validation since, which no state
 * counts), -1 on an error */
int queue_counts_get(struct store *st, uint64_t n[QSTATE_N])
{
	uint64_t sum = 0, total = 0;

	for (int i = 0; i < QSTATE_N; i++) {
		if (store_get_meta(st, count_name[i], &n[i]) < 0)
			return -1;
		sum += n[i];
	}
	if (store_count(st, &total) < 0)
		return -1;
	return sum == total ? 0 : 1;
}

/* queue_counts_put - set the per-state counts to arg's (uint64_t
 * [QSTATE_N]), as counted by a walk of the queue */
int queue_counts_put(struct store_txn *txn, void *arg)
{
	const uint64_t *n = arg;
	int rc = 0;

	for (int i = 0; i < QSTATE_N && rc == 0; i++)
		rc = store_put_meta(txn, count_name[i], n[i]);
	return rc;
}

/* op_delete - forget a message; note the files to remove after commit */
static int op_delete(struct store_txn *txn, struct queue_op_arg *a, const struct q_msg *m)
{
	struct store_seg seg;
	int rc;

	if ((rc = store_del_msg(txn, a->qid)) != 0)
		return rc;
	if (m->flags & QMSG_OWNFILE) {
		a->own_file = 1;
		return 0;
	}
	if ((rc = store_txn_get_seg(txn, m->seg_id, &seg)) == 1)
		return 0;	/* no bookkeeping: recovery sorts it out */
	if (rc != 0)
		return rc;
	store_seg_count(&seg, -1, -(int64_t)m->size);
	if (seg.live == 0 && seg.id != a->current_seg) {
		a->seg_to_remove = seg.id;
		return store_del_seg(txn, seg.id);
	}
	return store_put_seg(txn, &seg);
}

/* op_requeue - route every live recipient again by the current [routes]
 * and make it due now (postsuper -r); held mail is routed but stays
 * parked until released. A recipient no route matches keeps its peer
 * and its schedule (counted in unrouted, for the caller to log). */
static int op_requeue(struct store_txn *txn, struct queue_op_arg *a, const struct q_msg *m,
		      struct q_rcpt *rcpts, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		struct q_rcpt *r = &rcpts[i];
		const char *to;
		int moved = 0;

		if (r->state != RCPT_QUEUED && r->state != RCPT_DEFERRED)
			continue;
		if ((to = a->conf ? conf_route(a->conf, r->addr) : NULL) == NULL) {
			a->unrouted++;
			continue;
		}
		if (strcmp(to, r->peer) != 0) {
			char *old = r->peer;

			/* store_put_rcpt moves the schedule entry to the new peer */
			r->peer = xstrdup(to);
			free(old);
			moved = 1;
		}
		if (!(m->flags & QMSG_HOLD) && r->next_us > a->now_us) {
			r->next_us = a->now_us;
			moved = 1;
		}
		if (moved) {
			a->changed++;
			rc = store_put_rcpt(txn, a->qid, r);
		}
	}
	return rc;
}

/* queue_op_write - apply one operation to one message. A hold works on
 * a message whose records fail validation too (STORE_DAMAGED): what
 * decodes is parked as for any hold, what does not loses its schedule
 * entry, so that nothing offers the message again; nothing else does. */
int queue_op_write(struct store_txn *txn, void *arg)
{
	struct queue_op_arg *a = arg;
	struct q_msg m;
	struct q_rcpt *rcpts = NULL;
	size_t n = 0;
	int rc;

	a->found = 0;
	a->own_file = 0;
	a->seg_to_remove = 0;
	if (a->spool)
		a->current_seg = spool_segment_id(a->spool);
	a->changed = 0;
	a->unrouted = 0;
	if (a->op == QOP_EXPIRE)
		return -1;	/* ternd's: relay_result_expire */
	if ((rc = store_txn_get_msg(txn, a->qid, &m)) == 1)
		return 0;
	a->damaged = rc == STORE_DAMAGED;
	if (rc != 0 && !(a->damaged && a->op == QOP_HOLD))
		return rc;
	a->found = 1;
	if (a->op == QOP_HOLD && (rc = store_unsched_damaged(txn, a->qid, &a->changed)) != 0)
		return rc;
	store_txn_get_rcpts(txn, a->qid, &rcpts, &n);
	/* a damaged message is in no count (stats.c reads what decodes) */
	a->was = a->damaged ? QSTATE_GONE : queue_state(&m, rcpts, n);
	if (a->damaged)
		snprintf(a->envelope, sizeof(a->envelope), "(a record fails validation)");
	else
		queue_envelope(a->envelope, sizeof(a->envelope), &m, rcpts, n);
	switch (a->op) {
	case QOP_HOLD:
	case QOP_RELEASE:
		/* nothing to do for one already in the state asked for */
		if (!a->damaged) {
			if ((a->op == QOP_HOLD) == ((m.flags & QMSG_HOLD) != 0))
				break;
			a->changed++;
		}
		if (a->op == QOP_HOLD)
			m.flags |= QMSG_HOLD;
		else
			m.flags &= ~(uint32_t)QMSG_HOLD;
		if (!a->damaged && (rc = store_put_msg(txn, &m)) != 0)
			break;
		/* Held mail is parked in the schedule, so nothing looks at it;
		 * released mail is due at once. */
		for (size_t i = 0; i < n && rc == 0; i++) {
			uint64_t next = a->op == QOP_HOLD ? Q_NEXT_HELD : a->now_us;

			if (rcpts[i].state != RCPT_QUEUED && rcpts[i].state != RCPT_DEFERRED)
				continue;
			a->changed += rcpts[i].next_us != next;
			rcpts[i].next_us = next;
			rc = store_put_rcpt(txn, a->qid, &rcpts[i]);
		}
		break;
	case QOP_DELETE:
		a->changed++;
		rc = op_delete(txn, a, &m);
		break;
	case QOP_RETRY:
		/* held mail stays parked until released */
		for (size_t i = 0; i < n && rc == 0 && !(m.flags & QMSG_HOLD); i++) {
			if (rcpts[i].state != RCPT_QUEUED && rcpts[i].state != RCPT_DEFERRED)
				continue;
			if (rcpts[i].next_us <= a->now_us)
				continue;	/* due already */
			a->changed++;
			rcpts[i].next_us = a->now_us;
			rc = store_put_rcpt(txn, a->qid, &rcpts[i]);
		}
		break;
	case QOP_REQUEUE:
		rc = op_requeue(txn, a, &m, rcpts, n);
		break;
	case QOP_EXPIRE:
		break;	/* refused above */
	}
	a->now = a->op == QOP_DELETE || a->damaged ? QSTATE_GONE : queue_state(&m, rcpts, n);
	if (rc == 0)
		rc = queue_count_move(txn, a->was, a->now, 1);
	q_rcpts_free(&rcpts, n);
	q_msg_clear(&m);
	return rc;
}

/* queue_op_cleanup - after the commit: remove the files a delete freed */
void queue_op_cleanup(struct spool *sp, const struct queue_op_arg *a)
{
	if (a->own_file)
		spool_own_remove(sp, a->qid);
	if (a->seg_to_remove)
		spool_seg_remove(sp, a->seg_to_remove);
}

/* queue_op_warn - after the commit: log what a requeue could not route */
void queue_op_warn(const struct queue_op_arg *a)
{
	if (a->unrouted)
		log_warning("%s: requeue: %zu recipient%s match no route in [routes]: %s their peer",
			    a->qid, a->unrouted, a->unrouted == 1 ? "" : "s",
			    a->unrouted == 1 ? "it keeps" : "they keep");
}
