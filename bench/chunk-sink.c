/*
 * chunk-sink - a fast SMTP sink that offers PIPELINING and CHUNKING.
 *
 * A peer for relay benchmarks that must not be the bottleneck and must let
 * a client keep many BDAT transactions in flight (smtp-sink offers no
 * CHUNKING). It accepts EHLO/HELO, MAIL, RCPT, DATA, BDAT, RSET, NOOP,
 * QUIT and, with -S, STARTTLS; it offers PIPELINING, CHUNKING, 8BITMIME,
 * SMTPUTF8, SIZE and ENHANCEDSTATUSCODES. It stores nothing: it counts
 * messages (a BDAT ... LAST or a DATA terminator with a transaction behind
 * it) and content bytes.
 *
 *   chunk-sink [-T | -S] [-C cert.pem -K key.pem] [-o FILE] [-n NAME] [-q]
 *              [-x] [-i LEDGER] [-f MODE:N [-p PIDFILE] [-r]] ADDR:PORT
 *
 * -T: implicit TLS on every connection (what stunnel or smtps gives);
 * -S: plain SMTP offering STARTTLS. Both need -C (certificate chain, PEM)
 * and -K (its key). Session resumption (session cache and tickets) is
 * OpenSSL's default; full and resumed handshakes are counted.
 *
 * Replies are written in order, in batches: each wake-up reads what the
 * socket holds, answers every complete command in it into one buffer and
 * writes that buffer once. So a pipelining client gets one segment for
 * a whole batch of transactions. One thread, level-triggered epoll,
 * non-blocking sockets (and non-blocking TLS); every connection is
 * independent. Reading stops while a connection has more than
 * WBUF_HIGH bytes of replies unsent (a client that never reads).
 *
 * Counters: "messages=N bytes=N connections=N tls_full=N tls_resumed=N
 * first_us=T last_us=T" (T: CLOCK_REALTIME in microseconds of the first
 * and the last message, 0 before any). With -o FILE that line is written
 * to FILE (through FILE.tmp and rename) every 100 ms when it changed, and
 * at exit. SIGUSR1 prints it on stdout; SIGTERM or SIGINT writes the file,
 * prints it on stderr (unless -q) and exits 0.
 *
 * -x: a serial peer: PIPELINING without CHUNKING (DATA only; a BDAT
 * gets 502 and ends the connection), for a side-by-side run.
 *
 * -i LEDGER: one line per message taken (the end of BDAT ... LAST, or the
 * DATA terminator, of a transaction with a recipient), appended with one
 * write(2) before its reply is queued, so the ledger is complete whatever
 * happens to the client afterwards. The line is the message's Message-ID
 * value (unfolded, white space and control characters dropped, at most
 * ID_MAX octets), found by a scan of the first HDR_SCAN octets of the
 * content that stops at the header's end; "-" when none was found there.
 * Copies per message are then "sort LEDGER | uniq -c".
 *
 * -f MODE:N: a fault on every Nth message taken in the whole run (counted
 * over all connections), which ends that connection with a TCP reset
 * (SO_LINGER 0) after writing what MODE says; nothing more is read from it
 * (commands already read behind the message are dropped unanswered):
 *
 *   reset250:N   the message's 250 is written, then the reset
 *   takereset:N  the message is taken (ledger line), its 250 is not
 *                written (the replies before it are), then the reset
 *   kill250:N    the 250 is written, then SIGKILL to the pid read from
 *                -p PIDFILE at that moment (the client's pid file, e.g.
 *                ternd's RUN_DIR/ternd.pid), then the reset; a pid it
 *                killed already is not killed again (a stale pid file
 *                while the client restarts), the fault still counts
 *
 * -r: the rest of what the sink had read from that connection when the
 * fault came (up to RBUF_SIZE octets of pipelined commands and content)
 * is still processed: its complete messages are taken (ledger lines)
 * but none of their replies is written. A peer that goes on with the
 * input it holds while its replies are lost: a reset by a firewall, or a
 * server that flushes its replies once per batch (as Postfix's smtpd
 * does while pipelined input is pending) and dies before the flush.
 *
 * Faults need plain SMTP (no -T or -S). The status line then also has
 * "faults=N kills=N".
 *
 * It never delays a reply, never stores content, never blocks on one
 * connection. It is a benchmark tool: it trusts its command line and is
 * meant for 127.0.0.0/8; the command parser is minimal (no address
 * syntax), but bounded: a line longer than CMD_MAX ends the connection.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE			/* accept4 */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"

#define RBUF_SIZE 65536
#define CMD_MAX 4096
#define WBUF_HIGH (256 * 1024)
#define STATUS_MS 100
#define HDR_SCAN 16384			/* content octets searched for Message-ID */
#define ID_MAX 255			/* longest Message-ID value in the ledger */

enum phase { PH_CMD, PH_BDAT, PH_DATA };
enum fault { F_NONE, F_RESET250, F_TAKERESET, F_KILL250 };

struct conn {
	int fd;
	SSL *ssl;
	int handshaking;		/* SSL_do_handshake has not completed */
	int tls_after_flush;		/* STARTTLS answered: start TLS once sent */
	int quit;			/* close once the replies are sent */
	int eof;			/* the client closed its side */
	uint32_t events;		/* current epoll interest */
	enum phase ph;
	unsigned long long bdat_left;	/* content bytes of this chunk still to come */
	int bdat_last, bdat_bad;
	int dot;			/* DATA terminator matcher state */
	int mail, rcpts;
	enum fault fault;		/* a fault is due: answer nothing more */
	size_t wcut;			/* then wbuf's octets to write before the reset */
	unsigned long long msg_bytes;
	size_t hlen;			/* octets of the message's start in hdr */
	char hdr[HDR_SCAN];
	size_t rlen;
	char *wbuf;
	size_t wlen, woff, wcap;
	char rbuf[RBUF_SIZE];
};

static struct {
	struct sockaddr_in addr;
	SSL_CTX *ctx;
	int implicit_tls, starttls, quiet, serial, rest;
	const char *cert, *key, *out, *name, *pidfile;
	int ep, lfd, tfd, sfd, ledger;
	enum fault fault;
	unsigned long long fault_every, faults, kills;
	long last_killed;
	unsigned long long messages, bytes, conns, tls_full, tls_resumed, queue_id;
	long long first_us, last_us;
	unsigned long long written;	/* messages + conns at the last status write */
} g = {.name = "chunk-sink.test", .ledger = -1};

/* die - print a message (with errno's text if set) and exit 1 */
static void die(const char *what)
{
	fprintf(stderr, "chunk-sink: %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
	exit(1);
}

/* now_us - CLOCK_REALTIME in microseconds */
static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* status_line - format the counters into buf */
static void status_line(char *buf, size_t size)
{
	char faults[64] = "";
	int n;

	if (g.fault != F_NONE)
		snprintf(faults, sizeof(faults), " faults=%llu kills=%llu", g.faults, g.kills);
	n = snprintf(buf, size, "messages=%llu bytes=%llu connections=%llu tls_full=%llu tls_resumed=%llu "
		     "first_us=%lld last_us=%lld%s\n", g.messages, g.bytes, g.conns, g.tls_full,
		     g.tls_resumed, g.first_us, g.last_us, faults);
	if (n < 0 || (size_t)n >= size)
		buf[0] = '\0';
}

/* status_write - write the counters to the -o file (atomically, by rename) */
static void status_write(void)
{
	char line[320], tmp[4096];
	FILE *f;
	int n;

	if (g.out == NULL)
		return;
	n = snprintf(tmp, sizeof(tmp), "%s.tmp", g.out);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return;
	status_line(line, sizeof(line));
	if ((f = fopen(tmp, "w")) == NULL)
		return;
	fputs(line, f);
	if (fclose(f) == 0)
		(void)rename(tmp, g.out);
	g.written = g.messages + g.conns + g.tls_full + g.tls_resumed + g.faults;
}

/* reply - append a formatted reply line (CRLF added) to c's output buffer */
static void reply(struct conn *c, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = c->wcap - c->wlen;

		va_start(ap, fmt);
		n = vsnprintf(c->wbuf + c->wlen, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n + 2 < room) {
			c->wlen += (size_t)n;
			c->wbuf[c->wlen++] = '\r';
			c->wbuf[c->wlen++] = '\n';
			return;
		}
		c->wcap = c->wcap * 2 + (size_t)n + 2;
		if ((c->wbuf = realloc(c->wbuf, c->wcap)) == NULL)
			die("out of memory");
	}
}

/* txn_reset - forget the transaction in progress */
static void txn_reset(struct conn *c)
{
	c->mail = 0;
	c->rcpts = 0;
	c->msg_bytes = 0;
	c->hlen = 0;
}

/* hdr_keep - keep the first HDR_SCAN octets of the message's content */
static void hdr_keep(struct conn *c, const char *buf, size_t n)
{
	size_t room = sizeof(c->hdr) - c->hlen;

	if (n > room)
		n = room;
	memcpy(c->hdr + c->hlen, buf, n);
	c->hlen += n;
}

/* msgid_find - copy the Message-ID value of the header kept in hdr into
 * out (printable octets only, unfolded); "-" when the scanned part holds
 * none before the header's end */
static void msgid_find(const char *hdr, size_t len, char *out, size_t size)
{
	const char *p = hdr, *end = hdr + len;
	size_t o = 0;

	while (p < end && *p != '\r' && *p != '\n') {		/* an empty line ends the header */
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (eol == NULL)
			break;			/* the field goes beyond the scan */
		if ((size_t)(eol - p) >= 11 && strncasecmp(p, "Message-ID:", 11) == 0) {
			/* the field's value: this line and its continuation lines */
			for (p += 11; p < end; p++) {
				if (*p == '\n' && (p + 1 >= end || (p[1] != ' ' && p[1] != '\t')))
					break;
				if (*p > ' ' && *p < 0x7f && o + 1 < size)
					out[o++] = *p;
			}
			break;
		}
		p = eol + 1;
	}
	if (o == 0)
		out[o++] = '-';
	out[o] = '\0';
}

/* ledger_add - append the taken message's line to the -i ledger */
static void ledger_add(struct conn *c)
{
	char line[ID_MAX + 2];
	size_t n, off = 0;

	if (g.ledger < 0)
		return;
	msgid_find(c->hdr, c->hlen, line, ID_MAX + 1);
	n = strlen(line);
	line[n++] = '\n';
	while (off < n) {
		ssize_t w = write(g.ledger, line + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("ledger write");
		off += (size_t)w;
	}
}

/* message_done - take a finished message (count, ledger) and answer
 * it, unless a fault is due on it (-f) */
static void message_done(struct conn *c)
{
	long long t = now_us();

	g.messages++;
	if (g.first_us == 0)
		g.first_us = t;
	g.last_us = t;
	ledger_add(c);
	if (g.fault != F_NONE && g.messages % g.fault_every == 0) {
		g.faults++;		/* with -r, perhaps on a connection faulted already */
		if (c->fault == F_NONE) {
			c->fault = g.fault;
			if (c->fault != F_TAKERESET)
				reply(c, "250 2.0.0 Ok: %llu octets queued as S%llu", c->msg_bytes, ++g.queue_id);
			c->wcut = c->wlen;	/* what the fault lets out */
			txn_reset(c);
			return;
		}
	}
	reply(c, "250 2.0.0 Ok: %llu octets queued as S%llu", c->msg_bytes, ++g.queue_id);
	txn_reset(c);
}

/* verb_is - the command line starts with VERB followed by a space or its end */
static int verb_is(const char *line, size_t len, const char *verb)
{
	size_t n = strlen(verb);

	return len >= n && strncasecmp(line, verb, n) == 0 && (len == n || line[n] == ' ');
}

/* cmd_bdat - "BDAT size [LAST]": start consuming the chunk; -1: malformed */
static int cmd_bdat(struct conn *c, const char *line, size_t len)
{
	char arg[64], *end;
	size_t n = len - 5;

	if (len <= 5 || n >= sizeof(arg))
		return -1;
	memcpy(arg, line + 5, n);
	arg[n] = '\0';
	if (arg[0] < '0' || arg[0] > '9')
		return -1;
	errno = 0;
	c->bdat_left = strtoull(arg, &end, 10);
	if (errno != 0)
		return -1;
	c->bdat_last = 0;
	if (strcasecmp(end, " LAST") == 0)
		c->bdat_last = 1;
	else if (*end != '\0')
		return -1;
	c->bdat_bad = !c->mail || c->rcpts == 0;
	c->ph = PH_BDAT;
	return 0;
}

/* bdat_done - the chunk's content is read: answer it */
static void bdat_done(struct conn *c)
{
	c->ph = PH_CMD;
	if (c->bdat_bad)
		reply(c, "503 5.5.1 Error: no valid recipients");
	else if (c->bdat_last)
		message_done(c);
	else
		reply(c, "250 2.0.0 Ok: %llu octets received", c->msg_bytes);
}

/* command - answer one command line (without its CRLF); 1: stop parsing
 * what follows in the buffer (STARTTLS, QUIT) */
static int command(struct conn *c, char *line, size_t len)
{
	if (len > 0 && line[len - 1] == '\r')
		line[--len] = '\0';
	if (verb_is(line, len, "EHLO")) {
		txn_reset(c);
		reply(c, "250-%s", g.name);
		reply(c, "250-PIPELINING");
		reply(c, "250-SIZE 104857600");
		if (g.starttls && c->ssl == NULL)
			reply(c, "250-STARTTLS");
		reply(c, "250-ENHANCEDSTATUSCODES");
		reply(c, "250-8BITMIME");
		reply(c, g.serial ? "250 SMTPUTF8" : "250-SMTPUTF8");
		if (!g.serial)
			reply(c, "250 CHUNKING");
	} else if (verb_is(line, len, "HELO")) {
		txn_reset(c);
		reply(c, "250 %s", g.name);
	} else if (verb_is(line, len, "MAIL")) {
		if (c->mail) {
			reply(c, "503 5.5.1 Error: nested MAIL command");
		} else {
			c->mail = 1;
			reply(c, "250 2.1.0 Ok");
		}
	} else if (verb_is(line, len, "RCPT")) {
		if (!c->mail) {
			reply(c, "503 5.5.1 Error: need MAIL command");
		} else {
			c->rcpts++;
			reply(c, "250 2.1.5 Ok");
		}
	} else if (verb_is(line, len, "DATA")) {
		if (!c->mail || c->rcpts == 0) {
			reply(c, "503 5.5.1 Error: no valid recipients");
		} else {
			c->ph = PH_DATA;
			c->dot = 2;	/* as if just after a CRLF */
			reply(c, "354 End data with <CR><LF>.<CR><LF>");
		}
	} else if (verb_is(line, len, "BDAT")) {
		if (g.serial) {
			/* not offered: the chunk's bytes would be read as commands */
			reply(c, "502 5.5.1 Error: CHUNKING not offered");
			c->quit = 1;
			return 1;
		}
		if (cmd_bdat(c, line, len) < 0) {
			/* the chunk's size is unknown: its bytes cannot be skipped */
			reply(c, "501 5.5.4 Syntax: BDAT size [LAST]");
			c->quit = 1;
			return 1;
		}
		if (c->bdat_left == 0)
			bdat_done(c);
	} else if (verb_is(line, len, "RSET")) {
		txn_reset(c);
		reply(c, "250 2.0.0 Ok");
	} else if (verb_is(line, len, "NOOP")) {
		reply(c, "250 2.0.0 Ok");
	} else if (verb_is(line, len, "QUIT")) {
		reply(c, "221 2.0.0 Bye");
		c->quit = 1;
		return 1;
	} else if (verb_is(line, len, "STARTTLS")) {
		if (!g.starttls || c->ssl != NULL) {
			reply(c, "502 5.5.1 Error: command not implemented");
		} else {
			reply(c, "220 2.0.0 Ready to start TLS");
			c->tls_after_flush = 1;
			return 1;	/* RFC 3207: what follows in plain text is discarded */
		}
	} else {
		reply(c, "502 5.5.2 Error: command not recognized");
	}
	return 0;
}

/* data_scan - consume DATA content from buf; returns bytes used (the
 * terminator included when found, then the phase is back to commands) */
static size_t data_scan(struct conn *c, const char *buf, size_t n)
{
	static const char term[] = "\r\n.\r\n";
	size_t i;

	for (i = 0; i < n; i++) {
		char ch = buf[i];

		if (ch == term[c->dot])
			c->dot++;
		else
			c->dot = ch == '\r' ? 1 : 0;
		if (c->dot == 5) {
			i++;
			hdr_keep(c, buf, i);
			c->msg_bytes += i;
			g.bytes += i;
			c->ph = PH_CMD;
			message_done(c);
			return i;
		}
	}
	hdr_keep(c, buf, n);
	c->msg_bytes += n;
	g.bytes += n;
	return n;
}

/* parse - answer everything complete in the read buffer */
static void parse(struct conn *c)
{
	size_t pos = 0;

	while (pos < c->rlen && !c->quit && !c->tls_after_flush && (c->fault == F_NONE || g.rest)) {
		size_t avail = c->rlen - pos;

		if (c->ph == PH_BDAT) {
			size_t take = c->bdat_left < avail ? (size_t)c->bdat_left : avail;

			if (!c->bdat_bad)
				hdr_keep(c, c->rbuf + pos, take);
			pos += take;
			c->bdat_left -= take;
			c->msg_bytes += take;
			g.bytes += take;
			if (c->bdat_left == 0)
				bdat_done(c);
		} else if (c->ph == PH_DATA) {
			pos += data_scan(c, c->rbuf + pos, avail);
		} else {
			char *nl = memchr(c->rbuf + pos, '\n', avail);

			if (nl == NULL) {
				if (avail >= CMD_MAX) {
					reply(c, "500 5.5.2 Error: line too long");
					c->quit = 1;
				}
				break;
			}
			*nl = '\0';
			if (command(c, c->rbuf + pos, (size_t)(nl - (c->rbuf + pos))))
				pos = c->rlen;	/* STARTTLS, QUIT: drop the rest */
			else
				pos = (size_t)(nl - c->rbuf) + 1;
		}
	}
	if (c->quit || c->tls_after_flush || c->fault != F_NONE)
		pos = c->rlen;
	memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
	c->rlen -= pos;
}

/* tls_start - put c's socket under TLS (server side, non-blocking) */
static int tls_start(struct conn *c)
{
	if ((c->ssl = SSL_new(g.ctx)) == NULL || SSL_set_fd(c->ssl, c->fd) != 1)
		return -1;
	SSL_set_accept_state(c->ssl);
	c->handshaking = 1;
	return 0;
}

/* tls_want - map an SSL error to 0 (retry later, interest set) or -1 */
static int tls_want(struct conn *c, int ret, uint32_t *want)
{
	switch (SSL_get_error(c->ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		return 0;
	case SSL_ERROR_WANT_WRITE:
		*want |= EPOLLOUT;
		return 0;
	default:
		ERR_clear_error();
		return -1;
	}
}

/* conn_read - fill the read buffer: >0 bytes read, 0 nothing now, -1 error;
 * sets c->eof at the end of the stream */
static ssize_t conn_read(struct conn *c, uint32_t *want)
{
	size_t room = sizeof(c->rbuf) - c->rlen;
	ssize_t n;

	if (room == 0 || c->eof)
		return 0;
	if (c->ssl != NULL) {
		int r = SSL_read(c->ssl, c->rbuf + c->rlen, (int)room);

		if (r > 0) {
			c->rlen += (size_t)r;
			return r;
		}
		if (SSL_get_error(c->ssl, r) == SSL_ERROR_ZERO_RETURN) {
			c->eof = 1;
			return 0;
		}
		return tls_want(c, r, want);
	}
	n = recv(c->fd, c->rbuf + c->rlen, room, 0);
	if (n > 0) {
		c->rlen += (size_t)n;
		return n;
	}
	if (n == 0) {
		c->eof = 1;
		return 0;
	}
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

/* conn_flush - write what the reply buffer holds; -1: error */
static int conn_flush(struct conn *c, uint32_t *want)
{
	while (c->woff < c->wlen) {
		size_t n = c->wlen - c->woff;

		if (c->ssl != NULL) {
			int r = SSL_write(c->ssl, c->wbuf + c->woff, (int)n);

			if (r <= 0)
				return tls_want(c, r, want) < 0 ? -1 : (*want |= EPOLLOUT, 0);
			c->woff += (size_t)r;
		} else {
			ssize_t w = send(c->fd, c->wbuf + c->woff, n, MSG_NOSIGNAL);

			if (w < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					*want |= EPOLLOUT;
					return 0;
				}
				return -1;
			}
			c->woff += (size_t)w;
		}
	}
	c->woff = c->wlen = 0;
	return 0;
}

/* conn_close - close a connection and free it */
static void conn_close(struct conn *c)
{
	if (c->ssl != NULL)
		SSL_free(c->ssl);
	close(c->fd);			/* also leaves the epoll set */
	free(c->wbuf);
	free(c);
}

/* kill_client - SIGKILL to the pid in the -p file, unless it was killed
 * already (the file is stale until the client has started again) */
static void kill_client(void)
{
	char buf[32];
	long pid;
	ssize_t n;
	int fd = open(g.pidfile, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	pid = strtol(buf, NULL, 10);
	if (pid <= 1 || pid == (long)getpid() || pid == g.last_killed)
		return;
	if (kill((pid_t)pid, SIGKILL) == 0) {
		g.kills++;
		g.last_killed = pid;
	}
}

/* fault_end - the fault due on c: write the replies queued (blocking,
 * up to a second per wait), kill the client for kill250, then reset
 * the connection; frees c */
static void fault_end(struct conn *c)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	while (c->woff < c->wlen) {
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		ssize_t w = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);

		if (w > 0)
			c->woff += (size_t)w;
		else if (w < 0 && errno == EINTR)
			continue;
		else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && poll(&p, 1, 1000) > 0)
			continue;
		else
			break;
	}
	if (c->fault == F_KILL250)
		kill_client();
	(void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	conn_close(c);
}

/* handshake - advance the TLS handshake; 1 done, 0 not yet, -1 failed */
static int handshake(struct conn *c, uint32_t *want)
{
	int r = SSL_do_handshake(c->ssl);

	if (r != 1)
		return tls_want(c, r, want) < 0 ? -1 : 0;
	c->handshaking = 0;
	if (SSL_session_reused(c->ssl))
		g.tls_resumed++;
	else
		g.tls_full++;
	return 1;
}

/* conn_event - do what can be done on c now; may free c */
static void conn_event(struct conn *c)
{
	uint32_t want = 0, ev;

	for (;;) {
		if (c->handshaking) {
			int h = handshake(c, &want);

			if (h < 0)
				goto dead;
			if (h == 0)
				break;
		}
		/* read and answer until the socket (and TLS) is empty */
		while (c->wlen - c->woff < WBUF_HIGH && !c->quit && !c->tls_after_flush) {
			ssize_t n = conn_read(c, &want);

			if (n < 0)
				goto dead;
			parse(c);
			if (c->fault != F_NONE) {
				c->wlen = c->wcut;	/* -r: the replies behind it are lost */
				fault_end(c);
				return;
			}
			if (n == 0)
				break;
		}
		if (conn_flush(c, &want) < 0)
			goto dead;
		if (c->wlen > 0)
			break;
		if (c->quit || (c->eof && c->ph == PH_CMD) || (c->eof && c->rlen == 0))
			goto dead;
		if (!c->tls_after_flush)
			break;
		c->tls_after_flush = 0;
		txn_reset(c);
		c->rlen = 0;
		if (tls_start(c) < 0)
			goto dead;
	}
	if (c->eof && c->wlen == 0)
		goto dead;
	ev = want;
	if (c->wlen - c->woff < WBUF_HIGH && !c->quit && !c->eof && c->rlen < sizeof(c->rbuf))
		ev |= EPOLLIN;
	if (c->wlen > 0 && !c->handshaking)	/* the greeting waits for the handshake */
		ev |= EPOLLOUT;
	if (ev != c->events) {
		struct epoll_event e = {.events = ev, .data.ptr = c};

		if (epoll_ctl(g.ep, EPOLL_CTL_MOD, c->fd, &e) < 0)
			goto dead;
		c->events = ev;
	}
	return;
dead:
	conn_close(c);
}

/* on_accept - accept every pending connection and greet it */
static void on_accept(void)
{
	for (;;) {
		int one = 1, fd = accept4(g.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;
		struct epoll_event e = {.events = EPOLLIN};

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && !g.quiet)
				fprintf(stderr, "chunk-sink: accept: %s\n", strerror(errno));
			return;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if ((c = calloc(1, sizeof(*c))) == NULL || (c->wbuf = malloc(4096)) == NULL)
			die("out of memory");
		c->fd = fd;
		c->wcap = 4096;
		c->events = EPOLLIN;
		g.conns++;
		reply(c, "220 %s ESMTP chunk-sink", g.name);
		e.data.ptr = c;
		if ((g.implicit_tls && tls_start(c) < 0) || epoll_ctl(g.ep, EPOLL_CTL_ADD, fd, &e) < 0) {
			conn_close(c);
			continue;
		}
		conn_event(c);
	}
}

/* tls_setup - the server context from -C and -K */
static void tls_setup(void)
{
	if (g.cert == NULL || g.key == NULL) {
		errno = 0;
		die("-T and -S need -C cert.pem and -K key.pem");
	}
	if ((g.ctx = SSL_CTX_new(TLS_server_method())) == NULL ||
	    SSL_CTX_set_min_proto_version(g.ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_use_certificate_chain_file(g.ctx, g.cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(g.ctx, g.key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(g.ctx) != 1 ||
	    SSL_CTX_set_session_id_context(g.ctx, (const unsigned char *)"chunk-sink", 10) != 1) {
		ERR_print_errors_fp(stderr);
		errno = 0;
		die("cannot set up TLS");
	}
	SSL_CTX_set_mode(g.ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

static int tag_listen, tag_timer, tag_signal;	/* epoll data of the non-connections */

/* setup - listener, status timer, signals, epoll */
static void setup(void)
{
	int one = 1;
	sigset_t set;
	struct itimerspec its = {{0, STATUS_MS * 1000000L}, {0, STATUS_MS * 1000000L}};
	struct epoll_event ev[] = {
		{.events = EPOLLIN, .data.ptr = &tag_listen},
		{.events = EPOLLIN, .data.ptr = &tag_timer},
		{.events = EPOLLIN, .data.ptr = &tag_signal},
	};

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		die("sigprocmask");
	signal(SIGPIPE, SIG_IGN);
	if ((g.ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (g.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
	    (g.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0 ||
	    timerfd_settime(g.tfd, 0, &its, NULL) < 0)
		die("epoll, signalfd or timerfd");
	if ((g.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		die("socket");
	(void)setsockopt(g.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(g.lfd, (struct sockaddr *)&g.addr, sizeof(g.addr)) < 0)
		die("bind");
	if (listen(g.lfd, 512) < 0)
		die("listen");
	int fds[] = {g.lfd, g.tfd, g.sfd};

	for (int i = 0; i < 3; i++)
		if (epoll_ctl(g.ep, EPOLL_CTL_ADD, fds[i], &ev[i]) < 0)
			die("epoll_ctl");
}

/* on_signal - SIGUSR1: print the counters; 1 for SIGTERM/SIGINT */
static int on_signal(void)
{
	struct signalfd_siginfo si;
	char line[320];

	while (read(g.sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo != SIGUSR1)
			return 1;
		status_line(line, sizeof(line));
		fputs(line, stdout);
		fflush(stdout);
	}
	return 0;
}

/* run - the event loop, until SIGTERM or SIGINT */
static void run(void)
{
	char line[320];

	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(g.ep, evs, 64, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			void *ptr = evs[i].data.ptr;

			if (ptr == &tag_listen) {
				on_accept();
			} else if (ptr == &tag_timer) {
				uint64_t expirations;

				(void)read(g.tfd, &expirations, sizeof(expirations));
				if (g.messages + g.conns + g.tls_full + g.tls_resumed + g.faults != g.written)
					status_write();
			} else if (ptr == &tag_signal) {
				if (on_signal()) {
					status_write();
					status_line(line, sizeof(line));
					if (!g.quiet)
						fputs(line, stderr);
					return;
				}
			} else {
				conn_event(ptr);
			}
		}
	}
}

/* fault_parse - "-f MODE:N" into g.fault and g.fault_every; -1: invalid */
static int fault_parse(const char *arg)
{
	static const struct {
		const char *name;
		enum fault f;
	} modes[] = {{"reset250:", F_RESET250}, {"takereset:", F_TAKERESET}, {"kill250:", F_KILL250}};
	char *end;

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		size_t n = strlen(modes[i].name);

		if (strncmp(arg, modes[i].name, n) != 0)
			continue;
		if (arg[n] < '1' || arg[n] > '9')
			return -1;
		errno = 0;
		g.fault_every = strtoull(arg + n, &end, 10);
		if (errno != 0 || *end != '\0')
			return -1;
		g.fault = modes[i].f;
		return 0;
	}
	return -1;
}

/* usage - print the synopsis and exit 2 */
static void usage(void)
{
	fprintf(stderr, "usage: chunk-sink [-T | -S] [-C cert.pem -K key.pem] [-o FILE] [-n NAME] [-q]\n"
		"                  [-x] [-i LEDGER] [-f reset250|takereset|kill250:N [-p PIDFILE] [-r]] ADDR:PORT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "TSC:K:o:n:qxi:f:p:r")) != -1) {
		switch (opt) {
		case 'T':
			g.implicit_tls = 1;
			break;
		case 'S':
			g.starttls = 1;
			break;
		case 'C':
			g.cert = optarg;
			break;
		case 'K':
			g.key = optarg;
			break;
		case 'o':
			g.out = optarg;
			break;
		case 'n':
			g.name = optarg;
			break;
		case 'q':
			g.quiet = 1;
			break;
		case 'x':
			g.serial = 1;
			break;
		case 'i':
			if ((g.ledger = open(optarg, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
				die(optarg);
			break;
		case 'f':
			if (fault_parse(optarg) < 0)
				usage();
			break;
		case 'p':
			g.pidfile = optarg;
			break;
		case 'r':
			g.rest = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || addr_parse(argv[optind], &g.addr) < 0 || (g.implicit_tls && g.starttls) ||
	    (g.fault != F_NONE && (g.implicit_tls || g.starttls)) || ((g.fault == F_KILL250) != (g.pidfile != NULL)))
		usage();
	if (g.implicit_tls || g.starttls)
		tls_setup();
	setup();
	status_write();
	run();
	return 0;
}
