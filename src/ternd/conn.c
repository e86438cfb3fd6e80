/*
 * conn - one outbound SMTP connection to a relay peer.
 *
 * Every read and write has an absolute deadline (deadline.h: poll on a
 * non-blocking socket, the timeout counted from the start of the
 * operation, never restarted by a partial read or write), so a stalled
 * or trickling peer costs its own connection and nothing else. A closed
 * connection (conn_close, relay_fail) fails every call at once and keeps
 * why it failed. Under
 * tls = encrypt or verify nothing but EHLO and STARTTLS is ever sent in
 * clear: no STARTTLS offered, a failed handshake or a certificate that
 * does not verify fails the connection. Whatever the server sent before
 * the handshake is thrown away, and EHLO is repeated after it.
 *
 * AUTH (auth_user) is only ever sent over TLS: a connection that is not
 * encrypted fails before AUTH or MAIL. The password lives in locked,
 * read-only sodium memory with the peer's TLS context; copies of it (and
 * the AUTH payload) are wiped after use and never logged.
 * Message content goes out by sendfile(2) on plain connections. TLS
 * connections ask OpenSSL for kernel TLS (SSL_OP_ENABLE_KTLS); when the
 * kernel took the send side after the handshake, content goes out by
 * SSL_sendfile, else it is read from the spool and written with
 * SSL_write (the copy path: kernels without the tls module). TLS
 * contexts, the session cache and the AUTH password are tls_cache.c's.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "clock.h"
#include "conn.h"
#include "deadline.h"
#include "log.h"
#include "stats.h"
#include "tls_cache.h"
#include "xalloc.h"

/* conn_fail - note why the connection failed; returns -1 */
static int __attribute__((format(printf, 3, 4))) conn_fail(struct conn *c, int temporary, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	c->temporary = temporary;
	return -1;
}

/* ssl_wait - after an SSL call wants I/O, wait for it */
static int ssl_wait(struct conn *c, int rc, long long deadline)
{
	switch (SSL_get_error(c->ssl, rc)) {
	case SSL_ERROR_WANT_READ:
		return deadline_wait(c->fd, POLLIN, deadline);
	case SSL_ERROR_WANT_WRITE:
		return deadline_wait(c->fd, POLLOUT, deadline);
	default:
		return -1;
	}
}

/* io_write - all of buf, by the deadline */
static int io_write(struct conn *c, const char *buf, size_t len, long long deadline)
{
	while (len > 0) {
		ssize_t n;

		if (c->ssl) {
			int rc = SSL_write(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);

			if (rc <= 0) {
				if (ssl_wait(c, rc, deadline) < 0)
					return -1;
				continue;
			}
			n = rc;
		} else {
			n = send(c->fd, buf, len, MSG_NOSIGNAL);
			if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
				if (deadline_wait(c->fd, POLLOUT, deadline) < 0)
					return -1;
				continue;
			}
			if (n <= 0)
				return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* io_read - some octets into c->in, by the deadline; 0 on EOF/error/timeout */
static int io_read(struct conn *c, long long deadline)
{
	c->in_pos = c->in_len = 0;
	for (;;) {
		ssize_t n;

		if (c->ssl) {
			int rc = SSL_read(c->ssl, c->in, sizeof(c->in));

			if (rc <= 0) {
				c->waits++;
				if (ssl_wait(c, rc, deadline) < 0)
					return 0;
				continue;
			}
			n = rc;
		} else {
			n = recv(c->fd, c->in, sizeof(c->in), 0);
			if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
				c->waits++;
				if (deadline_wait(c->fd, POLLIN, deadline) < 0)
					return 0;
				continue;
			}
			if (n <= 0)
				return 0;
		}
		c->in_len = (size_t)n;
		return 1;
	}
}

/* conn_write - send buf with a deadline */
int conn_write(struct conn *c, const void *buf, size_t len, long long timeout_ms)
{
	if (c->fd < 0)
		return -1;	/* closed: why is kept */
	if (io_write(c, buf, len, deadline_after(timeout_ms)) < 0)
		return conn_fail(c, 1, "lost connection with %s[%s] while sending commands", c->host, c->addr);
	return 0;
}

/* conn_reply - the next complete reply, by the deadline */
int conn_reply(struct conn *c, struct smtp_reply *r, long long timeout_ms)
{
	long long deadline = deadline_after(timeout_ms);

	if (c->fd < 0)
		return -1;	/* closed: why is kept */
	for (;;) {
		int rc = smtp_reply_next(c->parser, r);

		if (rc == 1)
			return 0;
		if (rc < 0)
			return conn_fail(c, 1, "protocol error from %s[%s]: %s", c->host, c->addr,
					 smtp_reply_error(c->parser));
		if (c->in_pos == c->in_len && !io_read(c, deadline))
			return conn_fail(c, 1, "%s with %s[%s] while receiving the reply",
					 deadline_passed(deadline) ? "conversation timed out" : "lost connection",
					 c->host, c->addr);
		ssize_t n = smtp_reply_push(c->parser, c->in + c->in_pos, c->in_len - c->in_pos);

		if (n < 0)
			return conn_fail(c, 1, "reply parser misuse");
		c->in_pos += (size_t)n;
	}
}

/* conn_send_method_name - a method's name, for logs and metrics (stats.c
 * holds the names, in the enum's order, for tern_bytes_sent_total) */
_Static_assert(SEND_COPY + 1 == sizeof(stats_send_methods) / sizeof(stats_send_methods[0]),
	       "a name in stats_send_methods for each conn_send_method");
const char *conn_send_method_name(enum conn_send_method m)
{
	return stats_send_methods[m];
}

/* send_file - the stored body as it is: sendfile(2), or SSL_sendfile over
 * kernel TLS */
static int send_file(struct conn *c, int fd, off_t offset, size_t len, long long deadline)
{
	while (len > 0) {
		ssize_t n;

		if (c->method == SEND_KTLS) {
			n = SSL_sendfile(c->ssl, fd, offset, len, 0);
			if (n <= 0) {
				if (ssl_wait(c, (int)n, deadline) < 0)
					return -1;
				continue;
			}
			offset += n;
		} else {
			n = sendfile(c->fd, fd, &offset, len);	/* moves offset */
			if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
				if (deadline_wait(c->fd, POLLOUT, deadline) < 0)
					return -1;
				continue;
			}
			if (n <= 0)
				return -1;
		}
		len -= (size_t)n;
		c->sent[c->method] += (uint64_t)n;
	}
	return 0;
}

/* conn_send_body - the stored body: sendfile (kernel or kTLS) when it goes
 * out as it is, else read and (for DATA) dot-stuff it; then nothing else */
ssize_t conn_send_body(struct conn *c, int fd, off_t offset, size_t len, int dotstuff,
		       long long timeout_ms)
{
	long long deadline = deadline_after(timeout_ms);
	char in[65536], out[2 * 65536];
	size_t left = len;
	int bol = 1;

	if (c->fd < 0)
		return -1;	/* closed: why is kept */
	if (!dotstuff && c->method != SEND_COPY) {
		if (send_file(c, fd, offset, len, deadline) < 0)
			return conn_fail(c, 1, "%s with %s[%s] while sending the message",
					 deadline_passed(deadline) ? "conversation timed out" : "lost connection",
					 c->host, c->addr);
		metric_add(stats.bytes, len, c->peer->name, conn_send_method_name(c->method));
		return (ssize_t)len;
	}
	while (left > 0) {
		ssize_t n = pread(fd, in, left < sizeof(in) ? left : sizeof(in), offset);
		size_t o = 0;

		if (n <= 0)
			return conn_fail(c, 1, "spool file is short (%zu octets missing)", left);
		for (ssize_t i = 0; i < n; i++) {
			if (dotstuff && bol && in[i] == '.')
				out[o++] = '.';
			out[o++] = in[i];
			bol = in[i] == '\n';
		}
		if (io_write(c, out, o, deadline) < 0)
			return conn_fail(c, 1, "lost connection with %s[%s] while sending the message",
					 c->host, c->addr);
		c->sent[SEND_COPY] += o;
		metric_add(stats.bytes, o, c->peer->name, conn_send_method_name(SEND_COPY));
		offset += n;
		left -= (size_t)n;
	}
	return (ssize_t)len;
}

/* addr_text - an address as text (no port) */
static void addr_text(const struct addrinfo *a, char *buf, size_t len)
{
	if (a->ai_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)a->ai_addr)->sin6_addr, buf, len);
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)a->ai_addr)->sin_addr, buf, len);
}

/* connect_addr - one address connected by the deadline: the socket, or -1
 * with the cause in *err (ETIMEDOUT when the deadline passed) */
static int connect_addr(const struct addrinfo *a, long long deadline, int *err)
{
	int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	socklen_t elen = sizeof(*err);

	if (fd < 0) {
		*err = errno;
		return -1;
	}
	if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS)
		*err = errno;
	else if (deadline_wait(fd, POLLOUT, deadline) < 0)
		*err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &elen) < 0)
		*err = errno;
	if (*err == 0)
		return fd;
	close(fd);
	return -1;
}

/* tcp_connect - a connected non-blocking socket to host:port, or -1 with
 * the cause as Postfix words it: the name service's answer, or the last
 * address's connect error */
static int tcp_connect(struct conn *c, const char *host, int port, long long deadline)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai, *a;
	char name[256], portstr[16], addr[sizeof(c->addr)] = "", ebuf[128];
	size_t len = strlen(host);
	int fd = -1, one = 1, err = 0, rc;

	if (host[0] == '[' && len > 2 && host[len - 1] == ']') {
		snprintf(name, sizeof(name), "%.*s", (int)(len - 2), host + 1);
		hints.ai_flags = AI_NUMERICHOST;
	} else {
		snprintf(name, sizeof(name), "%s", host);
	}
	snprintf(portstr, sizeof(portstr), "%d", port);
	/* DNS in this thread: it blocks only this connection. */
	if ((rc = getaddrinfo(name, portstr, &hints, &ai)) != 0) {
		snprintf(c->esc, sizeof(c->esc), rc == EAI_AGAIN ? "4.4.3" : "4.4.4");
		return conn_fail(c, 1, "Host or domain name not found. Name service error for name=%s type=A: %s",
				 name, rc == EAI_NONAME || rc == EAI_NODATA ? "Host not found"
				 : rc == EAI_AGAIN ? "Host not found, try again" : gai_strerror(rc));
	}
	for (a = ai; a && fd < 0; a = a->ai_next) {
		addr_text(a, addr, sizeof(addr));
		metric_add(stats.conns_tried, 1, c->peer->name);
		fd = connect_addr(a, deadline, &err);
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return conn_fail(c, 1, "connect to %s[%s]:%d: %s", name, addr, port,
				 strerror_r(err, ebuf, sizeof(ebuf)));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	snprintf(c->host, sizeof(c->host), "%s", name);
	c->port = port;
	return fd;
}

/* ehlo - send EHLO, take the extensions */
static int ehlo(struct conn *c, const char *helo, long long timeout)
{
	struct smtp_reply r;
	char cmd[300];
	int n = snprintf(cmd, sizeof(cmd), "EHLO %s\r\n", helo);

	if (conn_write(c, cmd, (size_t)n, timeout) < 0 || conn_reply(c, &r, timeout) < 0)
		return -1;
	if (smtp_reply_ehlo(&r, &c->ehlo) < 0) {
		char text[SMTP_REPLY_FORMAT_MAX];

		smtp_reply_format(&r, text, sizeof(text));
		return conn_fail(c, r.code < 500, "host %s[%s] refused EHLO: %s", c->host, c->addr, text);
	}
	return 0;
}

/* tls_cause - why a handshake stopped: the alert the server sent, the
 * library's reason, the socket's error, a timeout or the server's close;
 * the thread's OpenSSL error queue is left empty */
static const char *tls_cause(int sslerr, int sys, long long deadline, char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	int reason = ERR_GET_REASON(e);

	ERR_clear_error();
	if (e != 0 && ERR_GET_LIB(e) == ERR_LIB_SSL && reason > SSL_AD_REASON_OFFSET
	    && reason < SSL_AD_REASON_OFFSET + 256) {
		snprintf(buf, len, "alert received: %s", SSL_alert_desc_string_long(reason - SSL_AD_REASON_OFFSET));
		return buf;
	}
	if (e != 0 && ERR_reason_error_string(e))
		return ERR_reason_error_string(e);
	if (sslerr == SSL_ERROR_WANT_READ || sslerr == SSL_ERROR_WANT_WRITE)
		return deadline_passed(deadline) ? "timed out" : "poll failed";
	if (sslerr == SSL_ERROR_SYSCALL && sys != 0)
		return strerror_r(sys, buf, len);
	return "lost connection";
}

/* handshake - TLS on the connected socket, with the peer's verification */
static int handshake(struct conn *c, SSL_CTX *ctx, long long timeout)
{
	const struct conf_peer *p = c->peer;
	const char *name = p->tls_servername[0] ? p->tls_servername : c->host;
	long long deadline, started;
	char buf[160];
	long verify;

	if ((c->ssl = SSL_new(ctx)) == NULL || !SSL_set_fd(c->ssl, c->fd))
		return conn_fail(c, 1, "cannot start TLS");
	SSL_set_tlsext_host_name(c->ssl, name);
	tls_cache_offer(c->ssl);
	if (p->tls == TLS_VERIFY && !SSL_set1_host(c->ssl, name))
		return conn_fail(c, 1, "cannot set the TLS host name to verify");
	deadline = deadline_after(timeout);
	started = ms_now();
	ERR_clear_error();
	for (;;) {
		int rc = SSL_connect(c->ssl), err, sys;

		if (rc == 1)
			break;
		sys = errno;
		err = SSL_get_error(c->ssl, rc);
		if ((err == SSL_ERROR_WANT_READ && deadline_wait(c->fd, POLLIN, deadline) == 0)
		    || (err == SSL_ERROR_WANT_WRITE && deadline_wait(c->fd, POLLOUT, deadline) == 0))
			continue;
		/* under tls = encrypt the result was never enforced: not the cause */
		verify = SSL_get_verify_result(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
		metric_add(stats.tls_handshakes, 1, p->name, "failed", "no");
		if (p->tls == TLS_VERIFY && verify != X509_V_OK) {
			ERR_clear_error();
			return conn_fail(c, 1, "TLS certificate of %s[%s]:%d does not verify for %s: %s",
					 c->host, c->addr, c->port, name, X509_verify_cert_error_string(verify));
		}
		return conn_fail(c, 1, "TLS handshake with %s[%s]:%d failed: %s", c->host, c->addr, c->port,
				 tls_cause(err, sys, deadline, buf, sizeof(buf)));
	}
	c->tls_resumed = SSL_session_reused(c->ssl);
	metric_add(stats.tls_handshakes, 1, p->name, "ok", c->tls_resumed ? "yes" : "no");
	metric_observe(stats.tls_seconds, (double)(ms_now() - started) / 1e3, p->name);
	return 0;
}

/* starttls - STARTTLS, handshake, verification, EHLO again */
static int starttls(struct conn *c, SSL_CTX *ctx, const char *helo, long long timeout)
{
	struct smtp_reply r;

	if (conn_write(c, "STARTTLS\r\n", 10, timeout) < 0 || conn_reply(c, &r, timeout) < 0)
		return -1;
	if (r.code != 220)
		return conn_fail(c, 1, "host %s[%s] refused STARTTLS (%d)", c->host, c->addr, r.code);
	/* Anything the server sent after its 220 came before the handshake. */
	c->in_pos = c->in_len = 0;
	smtp_reply_reset(c->parser);
	if (handshake(c, ctx, timeout) < 0)
		return -1;
	return ehlo(c, helo, timeout);
}

/* b64_line - "PREFIX" base64(bin) CRLF into out: its length, 0 if too long */
static size_t b64_line(char *out, size_t outlen, const char *prefix, const unsigned char *bin,
		       size_t binlen)
{
	size_t p = strlen(prefix), b = sodium_base64_ENCODED_LEN(binlen, sodium_base64_VARIANT_ORIGINAL);

	if (p + b + 2 > outlen)
		return 0;
	memcpy(out, prefix, p);
	sodium_bin2base64(out + p, b, bin, binlen, sodium_base64_VARIANT_ORIGINAL);
	memcpy(out + p + b - 1, "\r\n", 2);	/* b counted the NUL */
	return p + b + 1;
}

/* auth_step - one line of the AUTH exchange, wiped once sent; the reply */
static int auth_step(struct conn *c, char *line, size_t len, struct smtp_reply *r, long long timeout)
{
	int rc = len == 0 || conn_write(c, line, len, timeout) < 0 || conn_reply(c, r, timeout) < 0;

	sodium_memzero(line, len);
	return rc ? -1 : 0;
}

/* auth - AUTH PLAIN (RFC 4616) when offered, else LOGIN; over TLS only */
static int auth(struct conn *c, SSL_CTX *ctx, long long timeout)
{
	const struct conf_peer *p = c->peer;
	const char *pw = tls_cache_password(ctx);
	size_t ulen = strlen(p->auth_user), plen = pw ? strlen(pw) : 0, len;
	unsigned char raw[2 + 256 + 512];
	char line[1200], text[SMTP_REPLY_FORMAT_MAX];
	struct smtp_reply r;
	int rc;

	snprintf(c->esc, sizeof(c->esc), "4.7.0");
	if (c->ssl == NULL)
		return conn_fail(c, 1, "auth_user is set, but the connection to %s[%s] is not encrypted%s: "
				 "AUTH and mail go only over TLS", c->host, c->addr,
				 c->ehlo.flags & SMTP_EXT_STARTTLS ? "" : " (no STARTTLS offered)");
	if (pw == NULL || ulen > 256)
		return conn_fail(c, 1, "[peer %s] %s", p->name, pw ? "auth_user is longer than 256 octets"
				 : "auth_password_file was not read at start: restart ternd");
	if (!(c->ehlo.flags & SMTP_EXT_AUTH) || !(c->ehlo.auth & (SMTP_AUTH_PLAIN | SMTP_AUTH_LOGIN)))
		return conn_fail(c, 1, "peer offers no AUTH (PLAIN or LOGIN): %s[%s], and auth_user is set",
				 c->host, c->addr);
	if (c->ehlo.auth & SMTP_AUTH_PLAIN) {
		/* authzid (empty) NUL authcid NUL passwd */
		raw[0] = '\0';
		memcpy(raw + 1, p->auth_user, ulen);
		raw[1 + ulen] = '\0';
		memcpy(raw + 2 + ulen, pw, plen);
		len = b64_line(line, sizeof(line), "AUTH PLAIN ", raw, 2 + ulen + plen);
		sodium_memzero(raw, sizeof(raw));
		rc = auth_step(c, line, len, &r, timeout);
	} else {
		/* LOGIN: the server asks for the user name, then the password */
		memcpy(line, "AUTH LOGIN\r\n", 12);
		rc = auth_step(c, line, 12, &r, timeout);
		if (rc == 0 && r.code == 334)
			rc = auth_step(c, line, b64_line(line, sizeof(line), "",
							 (const unsigned char *)p->auth_user, ulen), &r, timeout);
		if (rc == 0 && r.code == 334)
			rc = auth_step(c, line, b64_line(line, sizeof(line), "",
							 (const unsigned char *)pw, plen), &r, timeout);
	}
	if (rc < 0)
		return -1;	/* why is set */
	if (r.code != 235) {
		smtp_reply_format(&r, text, sizeof(text));
		return conn_fail(c, 1, "SASL authentication failed; server %s[%s] said: %s", c->host,
				 c->addr, text);
	}
	c->esc[0] = '\0';
	return 0;
}

/* open_host - one host: connect, greeting, EHLO, TLS by policy, AUTH */
static int open_host(struct conn *c, const char *host, SSL_CTX *ctx, const char *helo, int use_tls)
{
	const struct conf_peer *p = c->peer;
	long long deadline = deadline_after(p->connect_timeout);
	struct smtp_reply r;

	smtp_reply_reset(c->parser);
	c->in_pos = c->in_len = 0;
	c->esc[0] = '\0';
	if ((c->fd = tcp_connect(c, host, (int)p->port, deadline)) < 0)
		return -1;
	/* tls_wrapper: implicit TLS, before anything else (port 465) */
	if (p->tls_wrapper && use_tls && handshake(c, ctx, p->connect_timeout) < 0)
		return -1;
	if (conn_reply(c, &r, p->connect_timeout) < 0)
		return -1;	/* why is set */
	if (r.code != 220) {
		char text[SMTP_REPLY_FORMAT_MAX];

		smtp_reply_format(&r, text, sizeof(text));
		return conn_fail(c, r.code < 500, "host %s[%s] refused to talk to me: %s",
				 c->host, c->addr, text);
	}
	if (ehlo(c, helo, p->command_timeout) < 0)
		return -1;
	/* STARTTLS unless plain or already TLS (tls_wrapper) */
	if (use_tls && !c->ssl && !(c->ehlo.flags & SMTP_EXT_STARTTLS) && p->tls != TLS_MAY)
		return conn_fail(c, 1, "TLS is required (tls = %s) but %s[%s] does not offer STARTTLS",
				 conf_tls_name(p->tls), c->host, c->addr);
	if (use_tls && !c->ssl && (c->ehlo.flags & SMTP_EXT_STARTTLS)
	    && starttls(c, ctx, helo, p->command_timeout) < 0)
		return -1;
	return p->auth_user[0] ? auth(c, ctx, p->command_timeout) : 0;
}

/* conn_open - a ready connection to one of the peer's hosts, in order */
int conn_open(struct conn *c, const struct conf_peer *peer, SSL_CTX *ctx, const char *helo)
{
	char *hosts = xstrdup(peer->host), *save = NULL;
	int rc = -1;

	if (c->parser == NULL)
		c->parser = smtp_reply_new();
	c->peer = peer;
	c->fd = -1;
	c->ssl = NULL;
	c->messages = 0;
	c->txns = 0;
	c->failed_in_row = 0;
	c->spent = 0;
	c->why[0] = '\0';
	memset(c->sent, 0, sizeof(c->sent));
	for (char *h = strtok_r(hosts, ", \t", &save); h && rc < 0; h = strtok_r(NULL, ", \t", &save)) {
		rc = open_host(c, h, ctx, helo, peer->tls != TLS_NONE);
		if (rc < 0 && peer->tls == TLS_MAY && !peer->auth_user[0] && c->ssl == NULL && c->fd >= 0) {
			/* Opportunistic TLS failed: try again in clear, as Postfix does
			 * (not with AUTH, which never goes in clear). */
			conn_close(c, 0);
			rc = open_host(c, h, ctx, helo, 0);
		}
		if (rc < 0)
			conn_close(c, 0);
	}
	free(hosts);
	c->busy = 0;
	c->opened = rc == 0;
	if (c->opened) {
		metric_add(stats.conns_opened, 1, peer->name);
		metric_gauge_add(stats.conns, 1, peer->name, "idle");
		c->method = c->ssl == NULL ? SEND_SENDFILE
			: BIO_get_ktls_send(SSL_get_wbio(c->ssl)) ? SEND_KTLS : SEND_COPY;
		log_debug("peer %s: connection to %s[%s]:%d: content by %s", peer->name, c->host,
			  c->addr, c->port, conn_send_method_name(c->method));
	}
	return rc;
}

/* conn_alive - an idle connection the peer has not closed (no EOF, no
 * unexpected data waiting) */
int conn_alive(const struct conn *c)
{
	struct pollfd p = {c->fd, POLLIN, 0};
	char b;

	if (c->fd < 0)
		return 0;
	if (poll(&p, 1, 0) == 0)
		return 1;
	return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

/* conn_close - QUIT (when polite) and close */
void conn_close(struct conn *c, int polite)
{
	if (c->fd >= 0 && polite) {
		struct smtp_reply r;

		if (io_write(c, "QUIT\r\n", 6, deadline_after(2000)) == 0)
			conn_reply(c, &r, 2000);
	}
	if (c->fd >= 0 && c->opened)
		log_info("peer %s: connection to %s[%s]:%d closed: conn_use=%u, bytes sendfile=%" PRIu64
			 " ktls=%" PRIu64 " copy=%" PRIu64, c->peer->name, c->host, c->addr, c->port,
			 c->messages, c->sent[SEND_SENDFILE], c->sent[SEND_KTLS], c->sent[SEND_COPY]);
	if (c->ssl) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	if (c->fd >= 0 && c->opened)
		metric_gauge_add(stats.conns, -1, c->peer->name, c->busy ? "busy" : "idle");
	c->fd = -1;
	c->opened = 0;
}

/* conn_busy - the connection starts (1) or ends (0) a transaction */
void conn_busy(struct conn *c, int busy)
{
	if (c->fd < 0 || !c->opened || c->busy == busy)
		return;
	metric_gauge_add(stats.conns, -1, c->peer->name, c->busy ? "busy" : "idle");
	metric_gauge_add(stats.conns, 1, c->peer->name, busy ? "busy" : "idle");
	c->busy = busy;
}
