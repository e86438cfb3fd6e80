/*
 * conn.h - one outbound SMTP connection to a relay peer: connect with
 * host failover, greeting, EHLO, STARTTLS under the peer's TLS policy,
 * AUTH over TLS, and reply reading with deadlines. Knows nothing of the
 * queue.
 */
#ifndef TERN_CONN_H
#define TERN_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "conf.h"
#include "smtp_reply.h"
#include "window.h"

/* How message content leaves: sendfile(2) on plain connections, SSL_sendfile
 * over kernel TLS, else copied through SSL_write (and whenever dot-stuffed). */
enum conn_send_method { SEND_SENDFILE, SEND_KTLS, SEND_COPY };

struct conn {
	const struct conf_peer *peer;
	int fd;
	SSL *ssl;			/* NULL: plain */
	int tls_resumed;
	char host[256];			/* the host name we connected to */
	char addr[64];			/* its address, as text */
	int port;
	struct smtp_ehlo ehlo;
	struct smtp_reply_parser *parser;
	char in[8192];
	size_t in_pos, in_len;
	unsigned messages;		/* transactions that delivered on this connection */
	unsigned txns;			/* transactions started on it (conn_use) */
	unsigned gen;			/* the peer settings it was opened with (relay.c) */
	/* what its transactions came to, for relay.c: */
	unsigned failed_in_row;		/* ended in a 4xx of the peer's, one after another */
	int spent;			/* no more transactions on it: it closes when the
					 * ones in flight are answered */
	struct window_cc cc;		/* its congestion window, from its first transaction */
	int opened, busy;		/* conn_open succeeded (counted in tern_connections{state}:
					 * idle or busy; logged at close) */
	char why[512];			/* the last failure, for logs and DSNs */
	char esc[SMTP_ESC_MAX + 1];	/* its enhanced status code; "": the caller's */
	int temporary;			/* that failure is worth a retry */
	enum conn_send_method method;	/* for content that needs no dot-stuffing */
	uint64_t sent[3];		/* content octets sent, by conn_send_method */
	unsigned long waits;		/* reads that found no reply yet and waited for
					 * the peer (relay.c: did the window hold it up?) */
};

int conn_open(struct conn *c, const struct conf_peer *peer, SSL_CTX *ctx, const char *helo);
void conn_close(struct conn *c, int polite);
int conn_alive(const struct conn *c);
void conn_busy(struct conn *c, int busy);
int conn_write(struct conn *c, const void *buf, size_t len, long long timeout_ms);
ssize_t conn_send_body(struct conn *c, int fd, off_t offset, size_t len, int dotstuff,
		       long long timeout_ms);
int conn_reply(struct conn *c, struct smtp_reply *r, long long timeout_ms);
const char *conn_send_method_name(enum conn_send_method m);

#endif
