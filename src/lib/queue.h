/*
 * queue - the data model of ternd's queue, shared by ternd, ternq and
 * the store: a message (envelope, body location, digest, trace context)
 * and its recipients (state, schedule, last reply, peer).
 *
 * Plain data, and the helpers that free and name it (queue.c); how it is
 * kept is store_queue.c's business, how it is encoded is store_codec.c's.
 * What happened to a message after it left the queue is hist.h's.
 */
#ifndef TERN_QUEUE_H
#define TERN_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "qid.h"

#define Q_DIGEST_BYTES 32

/* message flags */
#define QMSG_DOTLINES 0x0001		/* a body line starts with '.': dot-stuff on DATA */
#define QMSG_8BIT 0x0002		/* the body has octets above 127 */
#define QMSG_SMTPUTF8 0x0004		/* MAIL ... SMTPUTF8 */
#define QMSG_HOLD 0x0008		/* on hold: not delivered until released */
#define QMSG_OWNFILE 0x0010		/* body in a file of its own, not a segment */
#define QMSG_LMTP 0x0020		/* received over LMTP (else ESMTP) */

#define Q_NEXT_HELD (UINT64_MAX / 2)	/* next attempt of held mail: never due */
#define Q_CLIENT_MAX 79			/* "[address]" or "local" */

enum rcpt_state { RCPT_QUEUED, RCPT_DEFERRED, RCPT_SENT, RCPT_BOUNCED };

struct q_msg {
	char qid[QID_LEN + 1];
	uint64_t arrival_us;
	uint64_t size;			/* canonical body octets, Received: included */
	uint32_t flags;
	uint8_t body_type;		/* enum smtp_body */
	uint8_t ret;			/* enum smtp_ret */
	uint32_t nrcpt;			/* recipients at acceptance */
	uint32_t nlive;			/* recipients not yet final */
	uint64_t seg_id;		/* segment number (not with QMSG_OWNFILE) */
	uint64_t offset;		/* where the body starts in the segment */
	unsigned char digest[Q_DIGEST_BYTES];	/* BLAKE2b-256 of the body */
	unsigned char trace_id[16];
	unsigned char span_id[8];
	/* a Traceparent that came with the message but did not verify as
	 * ours: kept as a link, never as the parent; zeros if none */
	unsigned char link_trace_id[16];
	unsigned char link_span_id[8];
	char *sender;			/* "" for the null sender */
	char *envid;			/* DSN ENVID, or "" */
	char *helo;
	char *client;			/* client address, or "local" */
};

struct q_rcpt {
	uint32_t idx;
	uint8_t state;			/* enum rcpt_state */
	uint8_t notify;			/* NOTIFY_* bits */
	uint32_t attempts;
	uint64_t next_us;		/* next attempt */
	char *addr;
	char *orcpt;			/* "type;xtext", or "" */
	char *peer;			/* route at acceptance */
	char *reply;			/* last reply (delay reason), or "" */
	uint8_t flags;			/* RCPT_MAYBE_SENT */
};

/* q_rcpt flags. RCPT_MAYBE_SENT: an attempt's content went out whole and
 * its final reply was never read, so the peer may have the message
 * already: its next attempt goes alone on its connection (ternd(8),
 * possible duplicates); kept until the recipient is final. */
#define RCPT_MAYBE_SENT 0x01
#define RCPT_FLAGS_ALL RCPT_MAYBE_SENT

const char *rcpt_state_name(enum rcpt_state state);
void q_msg_clear(struct q_msg *m);
void q_rcpt_clear(struct q_rcpt *r);
void q_rcpts_free(struct q_rcpt **rcpts, size_t n);

#endif
