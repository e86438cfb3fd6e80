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
 *   chunk-sink [-T | -S] [-C cert.pem -K key.pem] [-o FILE] [-n NAME] [-q] ADDR:PORT
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

enum phase { PH_CMD, PH_BDAT, PH_DATA };

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
	unsigned long long msg_bytes;
	size_t rlen;
	char *wbuf;
	size_t wlen, woff, wcap;
	char rbuf[RBUF_SIZE];
};

static struct {
	struct sockaddr_in addr;
	SSL_CTX *ctx;
	int implicit_tls, starttls, quiet;
	const char *cert, *key, *out, *name;
	int ep, lfd, tfd, sfd;
	unsigned long long messages, bytes, conns, tls_full, tls_resumed, queue_id;
	long long first_us, last_us;
	unsigned long long written;	/* messages + conns at the last status write */
} g = {.name = "chunk-sink.test"};

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
	int n = snprintf(buf, size, "messages=%llu bytes=%llu connections=%llu tls_full=%llu tls_resumed=%llu "
			 "first_us=%lld last_us=%lld\n", g.messages, g.bytes, g.conns, g.tls_full,
			 g.tls_resumed, g.first_us, g.last_us);

	if (n < 0 || (size_t)n >= size)
		buf[0] = '\0';
}

/* status_write - write the counters to the -o file (atomically, by rename) */
static void status_write(void)
{
	char line[256], tmp[4096];
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
	g.written = g.messages + g.conns + g.tls_full + g.tls_resumed;
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
}

/* message_done - count a finished message and answer it */
static void message_done(struct conn *c)
{
	long long t = now_us();

	g.messages++;
	if (g.first_us == 0)
		g.first_us = t;
	g.last_us = t;
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
		reply(c, "250-SMTPUTF8");
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
			c->msg_bytes += i;
			g.bytes += i;
			c->ph = PH_CMD;
			message_done(c);
			return i;
		}
	}
	c->msg_bytes += n;
	g.bytes += n;
	return n;
}

/* parse - answer everything complete in the read buffer */
static void parse(struct conn *c)
{
	size_t pos = 0;

	while (pos < c->rlen && !c->quit && !c->tls_after_flush) {
		size_t avail = c->rlen - pos;

		if (c->ph == PH_BDAT) {
			size_t take = c->bdat_left < avail ? (size_t)c->bdat_left : avail;

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
	if (c->quit || c->tls_after_flush)
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
	char line[256];

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
	char line[256];

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
				if (g.messages + g.conns + g.tls_full + g.tls_resumed != g.written)
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

/* usage - print the synopsis and exit 2 */
static void usage(void)
{
	fprintf(stderr, "usage: chunk-sink [-T | -S] [-C cert.pem -K key.pem] [-o FILE] [-n NAME] [-q] ADDR:PORT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "TSC:K:o:n:q")) != -1) {
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
		default:
			usage();
		}
	}
	if (optind != argc - 1 || addr_parse(argv[optind], &g.addr) < 0 || (g.implicit_tls && g.starttls))
		usage();
	if (g.implicit_tls || g.starttls)
		tls_setup();
	setup();
	status_write();
	run();
	return 0;
}
