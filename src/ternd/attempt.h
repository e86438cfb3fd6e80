/*
 * attempt.h - one message's delivery attempt as the scheduler hands it
 * to a delivery thread (sched_load) and takes it back (sched_release,
 * sched_requeue): the job's message and this peer's recipients due now,
 * the transaction's state on its connection (relay_proto.c), and its
 * result, one outcome per recipient, as the committer records it
 * (relay_result.c). attempt.c sets outcomes; nothing here does I/O.
 */
#ifndef TERN_ATTEMPT_H
#define TERN_ATTEMPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "breaker.h"
#include "commit.h"
#include "conf.h"
#include "qid.h"
#include "queue.h"
#include "queue_ops.h"
#include "smtp_reply.h"

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

/*
 * One message's attempt over a connection, from the write of its commands
 * to its final reply. With cross-transaction pipelining a delivery thread
 * has several open: the oldest waits for its final reply while the next
 * ones' commands (with DATA one, its content waiting for 354; with BDAT up
 * to max_pipeline_depth, their content too) are already on the wire.
 */
struct attempt {
	struct peer_rt *home;		/* whose job it is: released there */
	struct peer_rt *to;		/* where it goes: home, or home's backup */
	char qid[QID_LEN + 1];
	int loaded;
	struct q_msg m;
	struct q_rcpt *rcpts;
	size_t n;
	const struct q_rcpt **todo;	/* this peer's recipients due now */
	size_t ntodo;
	int *ok;			/* per todo: RCPT accepted */
	char *told;			/* per todo: it has an outcome */
	size_t accepted;
	int fd;				/* the spool body, once open */
	off_t off;
	int rset;			/* a pipelined RSET went before its MAIL */
	int dot;			/* DATA: the end of data is yet to be written */
	int body_sent;			/* its content went out (without DATA's end) */
	int final_sent;			/* its end of data went out (BDAT LAST's last
					 * octet, or DATA's dot): a lost final reply
					 * may mean delivered */
	int solo;			/* a possible duplicate: nothing goes with it */
	int refused_reuse;		/* a 4xx to its MAIL on a reused connection:
					 * not sent, tried again on a new one */
	int clean;			/* ended in 2xx: no RSET needed */
	int behind;			/* written behind another attempt's final reply */
	int replied;			/* a reply of its own was read */
	int closing;			/* a reply of its own was 421: nothing more is written */
	long long drain;		/* replies are read until this deadline (deadline.h);
					 * 0: within the peer's timeouts */
	uint64_t t0;			/* its commands were written: transmission began */
	struct breaker_pass pass;	/* its peer's breaker let it go (relay.c) */
	struct result res;
	struct job job;			/* res on its way to the committer (relay_result_post) */
	char relay_host[400];
};

void outcome_set(struct outcome *o, uint32_t idx, int code, const char *esc, const char *text);
void attempt_outcome(struct attempt *a, size_t i, int code, const char *esc, const char *text);
void attempt_outcome_rest(struct attempt *a, int code, const char *esc, const char *text);

#endif
