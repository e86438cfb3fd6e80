/*
 * relay_proto.h - one SMTP client transaction over a connection, the
 * counterpart of Postfix's smtp_proto.c: MAIL, RCPT..., DATA or BDAT,
 * pipelined when offered, written behind the previous transaction's end
 * of data where RFC 2920 allows (with BDAT, behind many: window.h), then
 * its replies, final reply and RSET.
 * Each step sets recipients' outcomes from the replies; a lost
 * connection goes to relay_fail. Never reads or writes the store, never
 * decides on retries or the breaker, never opens a connection.
 */
#ifndef TERN_RELAY_PROTO_H
#define TERN_RELAY_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "breaker.h"
#include "commit.h"
#include "conn.h"
#include "qid.h"
#include "queue.h"
#include "relay_result.h"

/*
 * One message's attempt over a connection, from the write of its commands
 * to its final reply. With cross-transaction pipelining a delivery thread
 * has several open: the oldest waits for its final reply while the next
 * ones' commands (with DATA one, its content waiting for 354; with BDAT up
 * to max_pipeline_depth, their content too) are already on the wire.
 */
#define TX_DRAIN_MS 1000		/* after a failed write or a 421: replies still read */

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

int tx_start(struct conn *c, struct attempt *a, const char *lead);
int tx_replies(struct conn *c, struct attempt *a);
int tx_final(struct conn *c, struct attempt *a);
int tx_rset(struct conn *c, int clean);
int tx_twice(const struct attempt *a);
void tx_lost(struct conn *c, struct attempt *a);

#endif
