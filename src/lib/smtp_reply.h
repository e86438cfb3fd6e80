/*
 * smtp_reply - the relay client's reader of SMTP server replies (RFC 5321
 * 4.2, RFC 2034 enhanced status codes, RFC 2920 pipelined replies), as
 * an incremental parser: the caller pushes octets as they come off the
 * socket, cut anywhere, and takes complete replies one at a time.
 *
 * Pure and bounded: no I/O, no globals, and no allocation but the parser
 * itself, whose size is fixed. A reply has at most SMTP_REPLY_LINES_MAX
 * lines, SMTP_REPLY_TEXT_MAX octets of text and lines of at most
 * SMTP_REPLY_LINE_MAX octets; anything more is a protocol error the
 * moment the limit is passed, never buffered. Errors are sticky: after
 * one, the parser swallows all input and smtp_reply_next() fails until
 * smtp_reply_reset().
 *
 * Typical use, one socket read at a time (push stops after each complete
 * reply, so pipelined replies never pile up inside the parser):
 *
 *	while (len > 0) {
 *		ssize_t n = smtp_reply_push(p, buf, len);
 *		buf += n, len -= n;
 *		while ((rc = smtp_reply_next(p, &reply)) == 1)
 *			handle(&reply);
 *		if (rc < 0)
 *			return relay_conn_fail(conn, smtp_reply_error(p));
 *	}
 *
 * STARTTLS: whatever is left in buf after the 220 reply to STARTTLS was
 * sent before the handshake and must be dropped (with smtp_reply_reset()).
 */
#ifndef TERN_SMTP_REPLY_H
#define TERN_SMTP_REPLY_H

#include <stddef.h>
#include <sys/types.h>

#define SMTP_REPLY_LINES_MAX 64		/* lines in one reply */
#define SMTP_REPLY_TEXT_MAX 4096	/* octets of text in one reply, all lines */
#define SMTP_REPLY_LINE_MAX 2048	/* octets of one line, its CRLF or LF excluded */
#define SMTP_ESC_MAX 9			/* "5.999.999" (RFC 3463) */
#define SMTP_QUEUE_ID_MAX 64		/* a peer's queue id, as smtp_reply_queue_id keeps it */
#define SMTP_REPLY_FORMAT_MAX 1024	/* a good size for smtp_reply_format's out */

/*
 * One complete reply. The text of line i (what follows "250-" or "250 ",
 * less a leading enhanced status code) is smtp_reply_line(r, i): line 0
 * is the first line's text, lines 1.. of an EHLO reply its keywords. The
 * struct holds no pointers, so it may be copied by assignment.
 */
struct smtp_reply {
	int code;			/* 200..599 */
	char esc[SMTP_ESC_MAX + 1];	/* "5.1.1", or "" (absent, or class != code's) */
	size_t nlines;			/* 1..SMTP_REPLY_LINES_MAX */
	size_t textlen;			/* octets of text, all lines */
	unsigned short off[SMTP_REPLY_LINES_MAX];	/* line i starts at text + off[i] */
	unsigned short len[SMTP_REPLY_LINES_MAX];	/* and is len[i] octets, no NUL in it */
	char text[SMTP_REPLY_TEXT_MAX + SMTP_REPLY_LINES_MAX];	/* each line NUL-terminated */
};

struct smtp_reply_parser;

struct smtp_reply_parser *smtp_reply_new(void);
void smtp_reply_reset(struct smtp_reply_parser *p);

/*
 * smtp_reply_push - feed octets from the server. Returns how many were
 * used: all of them, or fewer when a complete reply ends inside buf (the
 * rest is for after smtp_reply_next()). After a protocol error, all of
 * them. -1 with errno EALREADY when a complete reply is still waiting for
 * smtp_reply_next(), EINVAL when len exceeds SSIZE_MAX.
 */
ssize_t smtp_reply_push(struct smtp_reply_parser *p, const char *buf, size_t len);

/*
 * smtp_reply_next - take the complete reply: 1 (copied to *r), 0 (more
 * octets needed), or -1 with errno EPROTO on a protocol error.
 */
int smtp_reply_next(struct smtp_reply_parser *p, struct smtp_reply *r);

/* smtp_reply_error - what the protocol error was (static text), or NULL */
const char *smtp_reply_error(const struct smtp_reply_parser *p);

/* smtp_reply_buffered - octets of an incomplete reply held (bounded) */
size_t smtp_reply_buffered(const struct smtp_reply_parser *p);

void smtp_reply_free(struct smtp_reply_parser **p);

/* smtp_reply_line - the text of line i, "" when there is no such line */
const char *smtp_reply_line(const struct smtp_reply *r, size_t i);

/*
 * smtp_reply_format - the reply as one log-safe line: "550 5.1.1 text",
 * the lines' texts joined by one space, runs of white space collapsed,
 * any octet outside printable ASCII shown as '?'; cut with "..." when out
 * is too small. Returns strlen(out); out is always terminated (outlen>0).
 */
size_t smtp_reply_format(const struct smtp_reply *r, char *out, size_t outlen);

/* EHLO extensions the relay client uses (smtp_ehlo.flags) */
#define SMTP_EXT_PIPELINING 0x0001
#define SMTP_EXT_CHUNKING 0x0002
#define SMTP_EXT_8BITMIME 0x0004
#define SMTP_EXT_SMTPUTF8 0x0008
#define SMTP_EXT_DSN 0x0010
#define SMTP_EXT_ENHANCEDSTATUSCODES 0x0020
#define SMTP_EXT_STARTTLS 0x0040
#define SMTP_EXT_SIZE 0x0080
#define SMTP_EXT_AUTH 0x0100

/* AUTH mechanisms (smtp_ehlo.auth) */
#define SMTP_AUTH_PLAIN 0x01
#define SMTP_AUTH_LOGIN 0x02

struct smtp_ehlo {
	unsigned flags;			/* SMTP_EXT_* */
	unsigned long long size;	/* SIZE's number; 0 if none or not a number */
	unsigned auth;			/* SMTP_AUTH_* offered */
};

/*
 * smtp_reply_ehlo - the extensions a 250 reply to EHLO offers: keywords
 * and mechanisms case-insensitive, unknown ones ignored, "AUTH=" (the
 * historic form) read as AUTH. -1 with errno EINVAL (and *e zeroed) when
 * the code is not 250.
 */
int smtp_reply_ehlo(const struct smtp_reply *r, struct smtp_ehlo *e);

/*
 * smtp_reply_queue_id - the peer's queue id in a 2xx reply to the end of
 * data, in Postfix's ("queued as ID"), Exim's ("id=ID") or Sendmail's
 * ("ID Message accepted for delivery") form. Returns strlen(out): 0 and
 * "" when there is none, or when it is longer than SMTP_QUEUE_ID_MAX or
 * outlen - 1 (never cut).
 */
size_t smtp_reply_queue_id(const struct smtp_reply *r, char *out, size_t outlen);

/*
 * smtp_esc_label - an enhanced status code as a metric label from a
 * bounded set: the code itself when RFC 3463 defines it (class 2, 4 or
 * 5; X.0.0, X.1.0-8, X.2.0-4, X.3.0-5, X.4.0-7, X.5.0-5, X.6.0-5,
 * X.7.0-7, one digit each), else "other" (later registrations, a code
 * like "5.1.10", "", junk). Writes SMTP_ESC_LABEL_MAX octets at most
 * (NUL included) to out and returns out.
 */
#define SMTP_ESC_LABEL_MAX 6		/* "5.1.1" or "other" */
const char *smtp_esc_label(const char *esc, char out[SMTP_ESC_LABEL_MAX]);

#endif
