/*
 * queue - the data model of ternd's queue, shared by ternd, ternq and
 * the store: a message (envelope, body location, digest, trace context)
 * and its recipients (state, schedule, last reply, peer).
 *
 * Plain data only; how it is kept is store.c's business, how it is
 * encoded is store_codec.c's.
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
};

/*
 * Delivery history (ternd) and the milter's journal: what happened, kept
 * after the message has left the queue, for ternq trace and tern-report.
 */
enum hist_kind { HIST_ACCEPT = 1, HIST_ATTEMPT = 2 };
enum hist_tls { HIST_TLS_NONE, HIST_TLS_FULL, HIST_TLS_RESUMED };
#define HIST_EXPIRED 4			/* attempt state: bounced by max_queue_lifetime */

struct hist_rec {
	uint8_t kind;			/* enum hist_kind */
	uint8_t state;			/* attempt: enum rcpt_state or HIST_EXPIRED */
	uint8_t tls;			/* attempt: enum hist_tls */
	uint16_t code;			/* attempt: reply code, 0 if none */
	uint32_t idx;			/* attempt: recipient index */
	uint32_t nrcpt;			/* acceptance: recipients */
	uint32_t conn_use;		/* attempt: transaction number on the connection */
	uint64_t time_us;
	uint64_t size;			/* acceptance */
	uint64_t delays_us[4];		/* attempt: before, rate wait, connection setup, transmission */
	unsigned char trace_id[16];
	unsigned char span_id[8];
	unsigned char link_trace_id[16];	/* acceptance: as q_msg's, zeros if none */
	unsigned char link_span_id[8];
	char qid[QID_LEN + 1];
	char *sender, *msgid, *client;	/* acceptance, else "" */
	char *rcpt;			/* attempt: the recipient; acceptance: all, one per line */
	char *peer, *relay, *dsn, *reply, *peer_qid;	/* attempt, else "" */
};

/* the milter's journal: one record per message it saw */
struct journal_rec {
	uint64_t time_us;
	unsigned char trace_id[16];
	unsigned char span_id[8];	/* the span the milter put in Traceparent */
	unsigned char parent_id[8];	/* a continued trace's previous span, or zeros */
	uint32_t nrcpt;
	char *mta_qid;			/* Postfix's {i}, or "" */
	char *client, *sender, *verdict;
};

const char *rcpt_state_name(enum rcpt_state state);
const char *hist_state_name(unsigned state);
void hist_rec_clear(struct hist_rec *h);
void journal_rec_clear(struct journal_rec *j);
void q_msg_clear(struct q_msg *m);
void q_rcpt_clear(struct q_rcpt *r);

#endif
