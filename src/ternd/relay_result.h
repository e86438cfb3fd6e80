/*
 * relay_result.h - what a delivery attempt came to: one outcome per
 * recipient, set from the peer's replies or from a failure, and the
 * record of the attempt: its outcomes applied in the committer's write
 * (recipient states, backoff and expiry, history, the DSN, the message's
 * removal), then the log lines, spans, metrics and breaker sample.
 * relay_fail is the one failure sink of a transaction over a connection.
 * relay_result_expire records ternq expire the same way.
 * Never writes to a socket, and never to the store but through the
 * committer.
 */
#ifndef TERN_RELAY_RESULT_H
#define TERN_RELAY_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "qid.h"
#include "queue.h"
#include "queue_ops.h"
#include "smtp_reply.h"
#include "store.h"

struct attempt;
struct conn;
struct notice_draft;
struct peer_rt;

/* One recipient's outcome of an attempt. */
struct outcome {
	uint32_t idx;
	uint8_t state;			/* RCPT_SENT, RCPT_DEFERRED or RCPT_BOUNCED */
	char reply[SMTP_REPLY_FORMAT_MAX];
	char esc[SMTP_ESC_MAX + 1];
	int expired;			/* bounced by max_queue_lifetime */
	int bounced;			/* the write bounced the recipient */
	int maybe_sent;			/* the peer may have it: RCPT_MAYBE_SENT */
};

/* The result of one attempt, as the committer applies it. */
struct result {
	char qid[QID_LEN + 1];
	struct outcome *out;
	size_t nout;
	uint64_t now;
	uint64_t start, connected, sending;	/* attempt begun, connection ready, MAIL sent */
	unsigned conn_use;		/* this transaction's number on its connection */
	const char *relay;		/* host[addr]:port, or "none" */
	const char *host;		/* the peer's host name (Remote-MTA), or NULL */
	uint8_t tls;			/* enum hist_tls */
	char peer_qid[SMTP_QUEUE_ID_MAX + 1];	/* from the peer's 250 to the content */
	const struct conf *conf;
	/* filled in by the write: what to do after the commit */
	struct queue_op_arg del;	/* the message left the queue */
	int removed;
	struct q_msg msg;		/* for logs and DSNs */
	struct q_rcpt *rcpts;
	size_t nrcpts;
	int was, after;			/* queue_state before and after */
	int noticed;			/* a notification waits in the queue database */
	struct notice_draft *draft;	/* the DSN, built before the write (notice.h) */
};

void set_outcome(struct outcome *o, uint32_t idx, int code, const char *esc, const char *text);
void relay_outcome(struct attempt *a, size_t i, int code, const char *esc, const char *text);
void relay_outcome_rest(struct attempt *a, int code, const char *esc, const char *text);
void relay_fail(struct conn *c, struct attempt *a, int code, const char *esc, const char *why);
struct q_rcpt *relay_result_rcpt(const struct result *res, uint32_t idx);
void relay_outcome_fate(const struct conf *conf, uint64_t arrival_us, uint32_t attempts,
			struct outcome *o, uint64_t now, uint64_t *next_us);
void relay_result_record(struct attempt *a, const struct conn *c, const struct conf *conf);
void relay_result_post(struct attempt *a, const struct conn *c, const struct conf *conf);
void relay_result_reap(struct attempt *a);
int relay_result_apply(struct store_txn *txn, void *arg);
void relay_result_done(struct result *res, const char *peer);
int relay_result_expire(const char *qid, unsigned uid, char *err, size_t len);

#endif
