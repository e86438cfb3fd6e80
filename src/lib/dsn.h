/*
 * dsn - the failure notification (RFC 3464 delivery status notification,
 * "bounce") that ternd sends to the envelope sender when recipients could
 * not be delivered: multipart/report with a human-readable part, a
 * message/delivery-status part and the returned headers or message.
 *
 * A pure function of its inputs: no I/O, no clock, no randomness, no
 * globals. The caller passes the time and a unique id; the Message-ID and
 * the MIME boundary are derived from them. The output is canonical (CRLF
 * lines, never a bare CR or LF) and every field that came from outside
 * (addresses, ORCPT, ENVID, reply text, host names) is sanitized so that
 * it cannot start a header field or a MIME part.
 *
 * It refuses the null sender (-1, errno EDESTADDRREQ): no DSN is ever
 * sent to <>.
 */
#ifndef TERN_DSN_H
#define TERN_DSN_H

#include <stddef.h>
#include <time.h>

#include "smtp_cmd.h"

#define DSN_HEADERS_MAX 102400		/* octets of original headers returned (cut at a line) */
#define DSN_FULL_MAX 50000		/* default RET=FULL limit (Postfix's bounce_size_limit) */
#define DSN_DIAG_MAX 1000		/* octets of a diagnostic shown, then "..." */
#define DSN_ADDR_MAX 512		/* octets of an address as shown, then "..." */
#define DSN_ID_MAX 64			/* octets of unique_id */

/* dsn_build's result bits: what the relay must ask for to send the DSN */
#define DSN_8BIT 0x01			/* 8-bit octets in the body: BODY=8BITMIME */
#define DSN_SMTPUTF8 0x02		/* UTF-8 in the To: header: SMTPUTF8 */

/* A growable output buffer: zero it before first use, dsn_buf_free at the end. */
struct dsn_buf {
	char *data;			/* NUL-terminated after dsn_build (not counted in len) */
	size_t len;
	size_t cap;
};

struct dsn_rcpt {
	const char *addr;		/* final recipient (the envelope address) */
	const char *orcpt;		/* ORCPT "rfc822;xtext" or "utf-8;..." as received, or NULL */
	const char *status;		/* "5.1.1"; "5.0.0" if NULL or not a 4.x.x/5.x.x code */
	const char *remote_mta;		/* the peer's host name, or NULL */
	const char *diagnostic;		/* the peer's reply ("550 5.1.1 ..."), other text, or NULL */
	time_t last_attempt;		/* Last-Attempt-Date; 0: none */
};

struct dsn_msg {
	const char *reporting_mta;	/* our host name: Reporting-MTA, From:, Message-ID */
	const char *unique_id;		/* [A-Za-z0-9_-] and inner dots, 1..DSN_ID_MAX, unique */
	time_t now;			/* Date: */
	const char *qid;		/* our queue id of the original (X-Tern-Queue-ID), or NULL */
	const char *sender;		/* the original's envelope sender; "" (<>) is refused */
	const char *envid;		/* ENVID xtext as received, or NULL */
	time_t arrival;			/* Arrival-Date; 0: none */
	const struct dsn_rcpt *rcpt;	/* the failed recipients */
	size_t nrcpt;			/* at least one */
	enum smtp_ret ret;		/* RET_FULL: the whole message; else headers only */
	const char *content;		/* the original message (CRLF lines); NULL: no third part */
	size_t content_len;
	size_t full_max;		/* RET=FULL only up to this size; 0: DSN_FULL_MAX */
};

/*
 * dsn_build - the DSN for m into out (replacing what out held). Returns
 * DSN_* bits (>= 0), or -1 with errno EDESTADDRREQ for the null sender,
 * EINVAL for a bad reporting_mta, unique_id, time or recipient list
 * (then out->len is 0).
 */
int dsn_build(const struct dsn_msg *m, struct dsn_buf *out);

/* dsn_buf_free - release the buffer's memory; it may be used again */
void dsn_buf_free(struct dsn_buf *b);

#endif
