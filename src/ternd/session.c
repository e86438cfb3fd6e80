/*
 * session - one inbound SMTP or LMTP session, as a fiber (fiber.c).
 *
 * Reads with deadlines as Postfix 3.7's smtpd_per_request_deadline and
 * smtpd_min_data_rate do (struct rdeadline): a whole command line must
 * arrive within command_timeout of ternd's first wait for it, a DATA
 * content or a BDAT chunk within data_timeout plus one second for every
 * min_data_rate octets received; a partial read or a signal never
 * restarts the clock, so a client that trickles its input holds a
 * session no longer than that (replies are flushed within
 * command_timeout). It answers the commands (replies are batched and
 * flushed when the client has nothing more buffered, as RFC 2920 wants),
 * receives the content through smtp_data (DATA or BDAT) into a struct
 * content (content.c: memory, or a spool file of its own once it is
 * large), and hands the finished message to the committer. It answers
 * 250 only after the committer says the message is on stable storage.
 * Every I/O or protocol failure goes through session_fail(), which writes
 * the 421 (while the connection still takes it), logs once and ends the
 * session; a transaction that does not reach the committer leaves
 * nothing behind.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "commit.h"
#include "content.h"
#include "deadline.h"
#include "fiber.h"
#include "hdr_scan.h"
#include "log.h"
#include "peer.h"
#include "session.h"
#include "stats.h"
#include "smtp_cmd.h"
#include "smtp_data.h"
#include "storage.h"
#include "ternd.h"
#include "textesc.h"
#include "trace_trust.h"
#include "traceparent.h"
#include "unroutable.h"
#include "xalloc.h"

#define IN_SIZE 16384		/* input buffer, grown from IN_SMALL while reads fill it */
#define IN_SMALL 1024		/* holds a command line: an idle session needs no more */
#define OUT_SIZE 8192		/* output buffer, grown from OUT_SMALL when replies need it */
#define OUT_SMALL 1024
#define CHUNK_OUT 16384

enum sess_state { S_OK, S_QUIT, S_FAIL };

struct session {
	const struct conf *conf;	/* the configuration when the session began */
	int fd;
	int lmtp;
	char client[Q_CLIENT_MAX + 1];	/* "[addr]" or "local" */
	enum sess_state state;
	int errors;
	char helo[SMTP_DOMAIN_MAX + 1];
	int greeted;
	/* input and output */
	char *in;			/* in_cap octets: IN_SMALL, up to IN_SIZE */
	size_t in_pos, in_len, in_cap;
	char *out;			/* out_cap octets: OUT_SMALL or OUT_SIZE */
	size_t out_len, out_cap;
	/* the transaction */
	int in_mail;
	struct q_msg msg;
	struct q_rcpt *rcpts;
	size_t nrcpts, rcpt_cap;
	int bdat;			/* BDAT chunks have been received */
	unsigned long long bdat_total;	/* octets the BDAT chunks so far declared */
	struct smtp_data *reader;
	struct content content;		/* content.c */
};


static void flush(struct session *s);
static void __attribute__((format(printf, 2, 3))) reply(struct session *s, const char *fmt, ...);

/* session_fail - the error sink: when esc is not NULL, answer
 * "421 esc host Error: text" and flush; log why once and end the session
 * (later calls do nothing) */
static void session_fail(struct session *s, const char *esc, const char *text, const char *why)
{
	if (s->state == S_FAIL)
		return;
	if (esc) {
		reply(s, "421 %s %s Error: %s", esc, ternd.hostname, text);
		flush(s);	/* a failing write ends the session there */
		if (s->state == S_FAIL)
			return;
	}
	log_info("%s: %s from %s", s->in_mail ? s->msg.qid : "NOQUEUE", why, s->client);
	s->state = S_FAIL;
}

/* flush - send the replies gathered so far, within command_timeout */
static void flush(struct session *s)
{
	size_t done = 0;
	long long deadline = deadline_after(s->conf->ternd.command_timeout);

	while (done < s->out_len && s->state != S_FAIL) {
		ssize_t n = send(s->fd, s->out + done, s->out_len - done, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN) {
			if (fiber_wait(s->fd, POLLOUT, deadline) < 0) {
				session_fail(s, NULL, NULL, "timeout after reply");
				break;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			session_fail(s, NULL, NULL, "lost connection after reply");
			break;
		}
		done += (size_t)n;
	}
	s->out_len = 0;
}

/* reply - queue one reply line (CRLF added) */
static void __attribute__((format(printf, 2, 3))) reply(struct session *s, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 2, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 3)
		n = (int)sizeof(line) - 3;
	line[n++] = '\r';
	line[n++] = '\n';
	if (s->out_len + (size_t)n > s->out_cap && s->out_cap < OUT_SIZE)
		s->out = xreallocarray(s->out, s->out_cap = OUT_SIZE, 1);
	if (s->out_len + (size_t)n > s->out_cap)
		flush(s);
	memcpy(s->out + s->out_len, line, (size_t)n);
	s->out_len += (size_t)n;
}

/* error_reply - a refusal that counts towards max_errors */
static void error_reply(struct session *s, const char *text)
{
	reply(s, "%s", text);
	if (++s->errors >= s->conf->ternd.max_errors) {
		session_fail(s, "4.7.0", "too many errors", "too many errors");
	}
}

/* fill - read more input before d's deadline; 0 on EOF/error/timeout */
static int fill(struct session *s, struct rdeadline *d)
{
	ssize_t n;

	if (s->in_pos == s->in_len)
		s->in_pos = s->in_len = 0;
	else if (s->in_pos > 0 && s->in_len == s->in_cap) {
		memmove(s->in, s->in + s->in_pos, s->in_len - s->in_pos);
		s->in_len -= s->in_pos;
		s->in_pos = 0;
	}
	if (s->out_len)
		flush(s);	/* the client is waiting for us */
	if (s->state == S_FAIL)
		return 0;
	if (d->base == 0)
		d->base = deadline_after(d->timeout);	/* after the flush: the client has its reply */
	for (;;) {
		/* Read first: under load the data is usually there already. */
		n = recv(s->fd, s->in + s->in_len, s->in_cap - s->in_len, MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN) {
			if (fiber_wait(s->fd, POLLIN, rdeadline_at(d)) < 0) {
				char why[128];

				snprintf(why, sizeof(why), "timeout after %s (%llu octets in %lld ms)",
					 d->what, d->octets, ms_now() - (d->base - d->timeout));
				session_fail(s, "4.4.2", "timeout exceeded", why);
				return 0;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && !s->in_mail && s->in_pos == s->in_len) {
			/* A close between transactions, no command begun: the
			 * end of a session as Postfix's LMTP connection cache
			 * ends it (no QUIT). Nothing was lost: nothing logged. */
			s->state = S_QUIT;
			return 0;
		}
		if (n <= 0) {
			session_fail(s, NULL, NULL, "lost connection");
			return 0;
		}
		s->in_len += (size_t)n;
		d->octets += (unsigned long long)n;
		if (s->in_len == s->in_cap && s->in_cap < IN_SIZE)	/* more is coming */
			s->in = xreallocarray(s->in, s->in_cap *= 2, 1);
		return 1;
	}
}

/* read_line - the next command line (without CR LF); NULL at end */
static char *read_line(struct session *s, size_t *len)
{
	int toolong = 0;
	struct rdeadline d = rdeadline_start("a command line", s->conf->ternd.command_timeout, 0);

	for (;;) {
		char *start = s->in + s->in_pos;
		char *nl = memchr(start, '\n', s->in_len - s->in_pos);

		if (nl) {
			size_t n = (size_t)(nl - start);

			s->in_pos += n + 1;
			if (toolong)
				return *len = SIZE_MAX, start;
			if (n > 0 && start[n - 1] == '\r')
				n--;
			start[n] = '\0';
			*len = n;
			return start;
		}
		if (s->in_len - s->in_pos >= SMTP_LINE_MAX) {
			toolong = 1;	/* discard up to the newline */
			s->in_pos = s->in_len;
		}
		if (!fill(s, &d))
			return NULL;
	}
}

/* txn_reset - forget the transaction; remove a partial own file */
static void txn_reset(struct session *s)
{
	content_reset(&s->content);	/* before the qid that names its file goes */
	q_msg_clear(&s->msg);
	for (size_t i = 0; i < s->nrcpts; i++)
		q_rcpt_clear(&s->rcpts[i]);
	s->nrcpts = 0;
	s->in_mail = 0;
	s->bdat = 0;
	s->bdat_total = 0;
}

/* storage_ok - room for one more message (max_queue_messages, and the
 * reserve of free space: queue_minfree and what recording outcomes needs) */
static int storage_ok(const struct conf *conf)
{
	if (stats_queued() >= (uint64_t)conf->ternd.max_queue_messages)
		return 0;
	return storage_room(conf);
}

/* do_helo - HELO, EHLO, LHLO */
static void do_helo(struct session *s, const struct smtp_cmd *cmd)
{
	const struct conf_ternd *t = &s->conf->ternd;

	if (s->lmtp != (cmd->verb == CMD_LHLO)) {
		error_reply(s, s->lmtp ? "500 5.5.1 Error: this is LMTP: send LHLO"
			    : "500 5.5.1 Error: LHLO is for LMTP: send EHLO");
		return;
	}
	txn_reset(s);
	snprintf(s->helo, sizeof(s->helo), "%s", cmd->helo);
	s->greeted = 1;
	if (cmd->verb == CMD_HELO) {
		reply(s, "250 %s", ternd.hostname);
		return;
	}
	reply(s, "250-%s", ternd.hostname);
	reply(s, "250-PIPELINING");
	if (t->message_size_limit)
		reply(s, "250-SIZE %llu", t->message_size_limit);
	else
		reply(s, "250-SIZE");
	reply(s, "250-8BITMIME");
	reply(s, "250-SMTPUTF8");
	reply(s, "250-ENHANCEDSTATUSCODES");
	reply(s, "250-CHUNKING");
	reply(s, "250 DSN");
}

/* do_mail - MAIL FROM: start a transaction */
static void do_mail(struct session *s, const struct smtp_cmd *cmd)
{
	const struct conf_ternd *t = &s->conf->ternd;

	if (!s->greeted) {
		error_reply(s, s->lmtp ? "503 5.5.1 Error: send LHLO first"
			    : "503 5.5.1 Error: send HELO/EHLO first");
		return;
	}
	if (s->in_mail) {
		error_reply(s, "503 5.5.1 Error: nested MAIL command");
		return;
	}
	if (cmd->body == BODY_BINARYMIME) {
		error_reply(s, "555 5.5.4 Error: BODY=BINARYMIME is not offered");
		return;
	}
	if (t->message_size_limit && cmd->size > t->message_size_limit) {
		error_reply(s, "552 5.3.4 Error: message size exceeds fixed limit");
		return;
	}
	if (!storage_ok(s->conf)) {
		log_warning("NOQUEUE: reject: MAIL from %s: 452 4.3.1 insufficient system storage "
			    "(queue_minfree or max_queue_messages)", s->client);
		reply(s, "452 4.3.1 Error: insufficient system storage");
		return;
	}
	qid_next(&ternd.qids, now_us(), s->msg.qid);
	s->msg.arrival_us = now_us();
	s->msg.sender = xstrdup(cmd->addr);
	s->msg.envid = xstrdup(cmd->envid);
	s->msg.helo = xstrdup(s->helo);
	s->msg.client = xstrdup(s->client);
	s->msg.body_type = (uint8_t)cmd->body;
	s->msg.ret = (uint8_t)cmd->ret;
	s->msg.flags = (cmd->smtputf8 ? QMSG_SMTPUTF8 : 0) | (s->lmtp ? QMSG_LMTP : 0);
	s->in_mail = 1;
	reply(s, "250 2.1.0 Ok");
}

/* has_8bit - any octet above 127 */
static int has_8bit(const char *p)
{
	for (; *p; p++)
		if ((unsigned char)*p > 127)
			return 1;
	return 0;
}

/*
 * rcpt_route - the peer for a recipient by [routes], or NULL. A missing
 * route is a configuration mistake, not the mail's: the recipient is
 * deferred (451 4.4.4, RFC 3463's "unable to route"), as Postfix defers
 * mail whose transport is missing, never bounced. A peer without a host,
 * or whose TLS context a reload could not build, takes the recipient,
 * which waits in the queue (the scheduler warns about it). Each of the
 * three is counted in tern_unroutable_total; no route is also warned
 * about, once a minute.
 */
static const char *rcpt_route(const struct conf *conf, const char *addr)
{
	const char *peer = conf_route(conf, addr);
	const struct conf_peer *p;

	if (peer == NULL) {
		const char *at = strrchr(addr, '@');
		char ed[TEXTESC_SIZE(SMTP_PATH_MAX)];

		unroutable_count(UNROUTABLE_NO_ROUTE, 1);
		unroutable_warn("no_route", "no [routes] entry matches domain %s: its recipients "
				"are deferred with 451 4.4.4 (add a route or a * route)",
				textesc(ed, sizeof(ed), at ? at + 1 : addr, TEXTESC_ADDR));
		return NULL;
	}
	if ((p = conf_peer_find(conf, peer)) != NULL && p->host[0] == '\0')
		unroutable_count(UNROUTABLE_NO_HOST, 1);
	else if (p != NULL && peer_find(peer) == NULL)
		unroutable_count(UNROUTABLE_TLS_CONTEXT, 1);
	return peer;
}

/* do_rcpt - RCPT TO: add a recipient with its route */
static void do_rcpt(struct session *s, const struct smtp_cmd *cmd)
{
	struct q_rcpt *r;
	const char *peer;

	if (!s->in_mail) {
		error_reply(s, "503 5.5.1 Error: need MAIL command");
		return;
	}
	if (s->bdat) {
		error_reply(s, "503 5.5.1 Error: RCPT after BDAT");
		return;
	}
	if (s->nrcpts >= (size_t)s->conf->ternd.recipient_limit) {
		reply(s, "452 4.5.3 Error: too many recipients");
		return;
	}
	if (has_8bit(cmd->addr) && !(s->msg.flags & QMSG_SMTPUTF8)) {
		error_reply(s, "553 5.6.7 Error: this address needs MAIL FROM ... SMTPUTF8");
		return;
	}
	if ((peer = rcpt_route(s->conf, cmd->addr)) == NULL) {
		reply(s, "451 4.4.4 <%s>: Recipient address rejected: no [routes] entry matches "
		      "this domain", cmd->addr);
		return;
	}
	s->rcpts = xgrowarray(s->rcpts, &s->rcpt_cap, s->nrcpts + 1, sizeof(*s->rcpts));
	r = &s->rcpts[s->nrcpts];
	memset(r, 0, sizeof(*r));
	r->idx = (uint32_t)s->nrcpts++;
	r->state = RCPT_QUEUED;
	r->notify = (uint8_t)cmd->notify;
	r->next_us = s->msg.arrival_us;
	r->addr = xstrdup(cmd->addr);
	r->orcpt = xstrdup(cmd->orcpt);
	r->peer = xstrdup(peer);
	r->reply = xstrdup("");
	reply(s, "250 2.1.5 Ok");
}

/* content_start - the Received: header opens the body; hashing starts */
static void content_start(struct session *s)
{
	char date[64], *received = s->content.received;	/* written in place */
	time_t now = time(NULL);
	struct tm tm;
	int n;

	localtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S %z", &tm);
	n = snprintf(received, CONTENT_RECEIVED_MAX,
		     "Received: from %s (%s)\r\n\tby %s (tern) with %s id %s%s%s%s;\r\n\t%s\r\n",
		     s->helo, s->client, ternd.hostname, s->lmtp ? "LMTP" : "ESMTP", s->msg.qid,
		     s->nrcpts == 1 ? "\r\n\tfor <" : "", s->nrcpts == 1 ? s->rcpts[0].addr : "",
		     s->nrcpts == 1 ? ">" : "", date);
	if (n < 0 || (size_t)n >= CONTENT_RECEIVED_MAX)	/* names are bounded: cannot happen */
		n = snprintf(received, CONTENT_RECEIVED_MAX,
			     "Received: by %s (tern) id %s; %s\r\n", ternd.hostname, s->msg.qid, date);
	content_begin(&s->content, s->msg.qid, (size_t)n);
	smtp_data_reset(s->reader, s->bdat ? SMTP_DATA_BDAT : SMTP_DATA_DOT);
}

/* threshold - the size past which content goes to a file of its own */
static size_t threshold(const struct session *s)
{
	return (size_t)s->conf->ternd.large_message_threshold;
}

/* feed - push input through the reader; 1 when DATA content ended */
static int feed(struct session *s, const char *in, size_t len, size_t *used)
{
	char out[CHUNK_OUT];
	size_t off = 0;
	int end = 0;

	while (off < len && !end) {
		size_t consumed, produced;

		end = smtp_data_push(s->reader, in + off, len - off, &consumed, out, sizeof(out),
				     &produced);
		off += consumed;
		if (produced)
			content_add(&s->content, out, produced, threshold(s));
	}
	*used = off;
	return end;
}

/* content_error - the reply for a reader error, or NULL */
static const char *content_error(struct session *s)
{
	unsigned e = smtp_data_errors(s->reader);

	if (e & SMTP_DATA_ERR_SIZE)
		return "552 5.3.4 Error: message file too big";
	if (e & SMTP_DATA_ERR_LINE)
		return "554 5.6.0 Error: message content has a line longer than line_length_limit";
	if (e & SMTP_DATA_ERR_BARE)
		return "550 5.6.2 Error: bare <CR> or <LF> in message content (RFC 5321 2.3.8)";
	return NULL;
}

/* reply_all - one reply (SMTP) or one per recipient (LMTP) */
static void reply_all(struct session *s, const char *code_text)
{
	if (!s->lmtp) {
		reply(s, "%s", code_text);
		return;
	}
	for (size_t i = 0; i < s->nrcpts; i++)
		reply(s, "%.9s <%s> %s", code_text, s->rcpts[i].addr, code_text + 10);
}

/* trace_of - the message's trace context: its Traceparent when our
 * signature verifies (the milter's), else a new trace; a Traceparent we
 * cannot vouch for is kept as a link, never as the parent, so that no
 * forged hop joins a trace of ours */
static void trace_of(struct session *s)
{
	struct traceparent tp, in;
	enum trace_origin origin = trace_trust_of(s->content.peek, s->content.peek_len, &in);

	memset(s->msg.link_trace_id, 0, sizeof(s->msg.link_trace_id));
	memset(s->msg.link_span_id, 0, sizeof(s->msg.link_span_id));
	if (origin == TRACE_OURS) {
		tp = in;
	} else {
		traceparent_new(&tp);
		if (origin == TRACE_FOREIGN) {
			memcpy(s->msg.link_trace_id, in.trace_id, sizeof(in.trace_id));
			memcpy(s->msg.link_span_id, in.span_id, sizeof(in.span_id));
		}
	}
	memcpy(s->msg.trace_id, tp.trace_id, sizeof(tp.trace_id));
	memcpy(s->msg.span_id, tp.span_id, sizeof(tp.span_id));
}

/* content_end - the content is complete: commit it and answer */
static void content_end(struct session *s)
{
	const char *err = content_error(s);
	struct job job;
	char tid[TRACE_ID_HEX + 1], link[TRACE_ID_HEX + 1], msgid[256] = "";
	char from[TEXTESC_SIZE(SMTP_PATH_MAX)];
	struct traceparent tp;
	const char *v;
	size_t vlen;

	if (err) {
		reply_all(s, err);
		txn_reset(s);
		return;
	}
	s->msg.size = content_size(&s->content);
	if (s->content.own_fd >= 0)
		s->msg.flags |= QMSG_OWNFILE;
	if (smtp_data_dotlines(s->reader))
		s->msg.flags |= QMSG_DOTLINES;
	if (smtp_data_8bit(s->reader))
		s->msg.flags |= QMSG_8BIT;
	if (content_seal(&s->content, s->msg.digest, Q_DIGEST_BYTES) < 0) {
		reply_all(s, "451 4.3.0 Error: queue file write error");
		txn_reset(s);
		return;
	}
	trace_of(s);
	s->msg.nrcpt = s->msg.nlive = (uint32_t)s->nrcpts;
	memset(&job, 0, sizeof(job));
	job.kind = JOB_ACCEPT;
	job.msg = &s->msg;
	job.rcpts = s->rcpts;
	job.nrcpts = s->nrcpts;
	/* for the history: ternq trace finds a message by its Message-ID */
	if (hdr_scan_field(s->content.peek, s->content.peek_len, "Message-ID", &v, &vlen))
		snprintf(msgid, sizeof(msgid), "%.*s", (int)vlen, v);
	job.msgid = msgid;
	job.nbody = content_iov(&s->content, job.body);	/* none: a file of its own */
	if (commit_submit(&job) < 0) {
		log_error("%s: not queued: %s", s->msg.qid, job.err);
		reply_all(s, "451 4.3.0 Error: queue file write error");
		txn_reset(s);
		return;
	}
	content_committed(&s->content);
	memcpy(tp.trace_id, s->msg.trace_id, sizeof(tp.trace_id));
	trace_id_hex(&tp, tid);
	memcpy(tp.trace_id, s->msg.link_trace_id, sizeof(tp.trace_id));
	trace_id_hex(&tp, link);
	log_info("%s: from=<%s>, size=%llu, nrcpt=%zu, trace=%s%s%s (queue active)", s->msg.qid,
		 textesc(from, sizeof(from), s->msg.sender, TEXTESC_ADDR),
		 (unsigned long long)s->msg.size, s->nrcpts, tid,
		 sodium_is_zero(s->msg.link_trace_id, 16) ? "" : ", unverified_trace=",
		 sodium_is_zero(s->msg.link_trace_id, 16) ? "" : link);
	metric_add(stats.received, 1, s->lmtp ? "lmtp" : "smtp");
	metric_add(stats.rcpts_received, s->nrcpts);
	if (s->lmtp) {
		for (size_t i = 0; i < s->nrcpts; i++)
			reply(s, "250 2.0.0 <%s> Ok: queued as %s", s->rcpts[i].addr, s->msg.qid);
	} else {
		reply(s, "250 2.0.0 Ok: queued as %s", s->msg.qid);
	}
	txn_reset(s);
}

/* data_ready - MAIL and RCPT done, nothing else in the way of content */
static int data_ready(struct session *s, int bdat)
{
	if (!s->in_mail) {
		error_reply(s, "503 5.5.1 Error: need MAIL command");
		return 0;
	}
	if (s->nrcpts == 0) {
		/* RFC 2033 4.2: 503 in LMTP; Postfix's 554 in SMTP */
		error_reply(s, s->lmtp ? "503 5.5.1 Error: no valid recipients"
			    : "554 5.5.1 Error: no valid recipients");
		return 0;
	}
	if (!bdat && s->bdat) {
		error_reply(s, "503 5.5.1 Error: DATA after BDAT");
		return 0;
	}
	return 1;
}

/* content_deadline - the read deadline of a DATA content or a BDAT chunk */
static struct rdeadline content_deadline(const struct session *s, const char *what)
{
	return rdeadline_start(what, s->conf->ternd.data_timeout, s->conf->ternd.min_data_rate);
}

/* do_data - DATA: read the content up to CRLF.CRLF */
static void do_data(struct session *s)
{
	struct rdeadline d = content_deadline(s, "DATA content");

	if (!data_ready(s, 0))
		return;
	content_start(s);
	reply(s, "354 End data with <CR><LF>.<CR><LF>");
	for (;;) {
		size_t used;
		int end = feed(s, s->in + s->in_pos, s->in_len - s->in_pos, &used);

		s->in_pos += used;
		if (end)
			break;
		if (!fill(s, &d)) {
			txn_reset(s);
			return;
		}
	}
	content_end(s);
}

/* linger - the session failed with its replies sent: stop writing and
 * throw away what the client still sends, until it closes or for a
 * second at most, so that closing with unread input (a TCP reset) does
 * not destroy the replies before the client reads them */
static void linger(struct session *s)
{
	long long deadline = deadline_after(1000);
	char junk[4096];

	shutdown(s->fd, SHUT_WR);
	while (fiber_wait(s->fd, POLLIN, deadline) == 0) {
		ssize_t n = recv(s->fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
	}
}

/* bdat_too_big - a chunk that would take the declared total past
 * message_size_limit: 552 5.3.4 at once, then close, as its octets
 * (up to 2^64 - 1 of them) are not worth reading to find the next
 * command */
static int bdat_too_big(struct session *s, const struct smtp_cmd *cmd)
{
	unsigned long long limit = s->conf->ternd.message_size_limit;
	char why[160];

	if (limit == 0 || cmd->chunk <= limit - s->bdat_total)	/* bdat_total <= limit */
		return 0;
	if (s->in_mail && s->nrcpts && cmd->last)	/* LMTP: one per recipient */
		reply_all(s, "552 5.3.4 Error: message size exceeds fixed limit");
	else
		reply(s, "552 5.3.4 Error: message size exceeds fixed limit");
	snprintf(why, sizeof(why), "BDAT chunk of %llu octets after %llu past message_size_limit "
		 "(%llu)", cmd->chunk, s->bdat_total, limit);
	session_fail(s, "4.5.0", "the rest of that BDAT chunk is not read", why);
	linger(s);
	return 1;
}

/* do_bdat - BDAT n [LAST]: exactly n octets of content follow */
static void do_bdat(struct session *s, const struct smtp_cmd *cmd)
{
	unsigned long long left = cmd->chunk;
	struct rdeadline d = content_deadline(s, "a BDAT chunk");
	int ready;

	if (bdat_too_big(s, cmd))
		return;
	if ((ready = data_ready(s, 1)))
		s->bdat_total += cmd->chunk;
	if (ready && !s->bdat) {
		s->bdat = 1;
		content_start(s);
	}
	while (left > 0) {
		size_t avail = s->in_len - s->in_pos, used;

		if (avail == 0) {
			if (!fill(s, &d)) {
				txn_reset(s);
				return;
			}
			continue;
		}
		if (avail > left)
			avail = (size_t)left;
		if (ready)
			feed(s, s->in + s->in_pos, avail, &used);
		s->in_pos += avail;
		left -= avail;
	}
	if (!ready)
		return;		/* the chunk was read and dropped; the reply is out */
	if (!cmd->last) {
		reply(s, "250 2.0.0 Ok: %llu octets", cmd->chunk);
		return;
	}
	{
		char out[8];
		size_t n = smtp_data_finish(s->reader, out, sizeof(out));

		if (n)
			content_add(&s->content, out, n, threshold(s));
	}
	content_end(s);
}

/* command - one command line */
static void command(struct session *s, char *line, size_t len)
{
	struct smtp_cmd cmd;
	const char *err;

	if (len == SIZE_MAX) {
		error_reply(s, "500 5.5.2 Error: line too long");
		return;
	}
	if (smtp_cmd_parse(line, len, &cmd, &err) < 0) {
		error_reply(s, err);
		if (cmd.verb == CMD_BDAT) {
			/* The chunk's length is unknown: its octets would be read as
			 * commands. End the session instead. */
			session_fail(s, "4.5.0", "cannot find the end of that BDAT chunk",
				     "bad BDAT command");
		}
		return;
	}
	if (s->bdat && cmd.verb != CMD_BDAT && cmd.verb != CMD_RSET && cmd.verb != CMD_QUIT
	    && cmd.verb != CMD_NOOP) {
		error_reply(s, "503 5.5.1 Error: BDAT ... LAST expected");
		return;
	}
	switch (cmd.verb) {
	case CMD_HELO:
	case CMD_EHLO:
	case CMD_LHLO:
		do_helo(s, &cmd);
		break;
	case CMD_MAIL:
		do_mail(s, &cmd);
		break;
	case CMD_RCPT:
		do_rcpt(s, &cmd);
		break;
	case CMD_DATA:
		do_data(s);
		break;
	case CMD_BDAT:
		do_bdat(s, &cmd);
		break;
	case CMD_RSET:
		txn_reset(s);
		reply(s, "250 2.0.0 Ok");
		break;
	case CMD_NOOP:
		reply(s, "250 2.0.0 Ok");
		break;
	case CMD_QUIT:
		reply(s, "221 2.0.0 Bye");
		flush(s);
		s->state = S_QUIT;
		break;
	case CMD_VRFY:
	case CMD_EXPN:
		reply(s, "502 5.5.1 Error: command not implemented");
		break;
	case CMD_HELP:
		reply(s, "214 2.0.0 See the ternd(8) manual page");
		break;
	case CMD_STARTTLS:
	case CMD_AUTH:
		error_reply(s, "502 5.5.1 Error: not offered on this local listener");
		break;
	default:
		error_reply(s, "500 5.5.2 Error: command not recognized");
		break;
	}
}

/* session_run - serve one connection until QUIT, error or timeout */
void session_run(int fd, int lmtp, const char *client)
{
	struct session *s = xcalloc(1, sizeof(*s));
	const struct conf *conf = ternd_conf();
	const struct conf_ternd *t = &conf->ternd;
	struct smtp_data_limits limits = {
		.max_size = t->message_size_limit,
		.max_line = (size_t)t->line_length_limit,
		.normalize = t->bare_newline == BARENL_NORMALIZE,
	};

	s->conf = conf;
	s->fd = fd;
	s->lmtp = lmtp;
	content_init(&s->content);
	snprintf(s->client, sizeof(s->client), "%s", client);
	s->reader = smtp_data_new(SMTP_DATA_DOT, &limits);
	s->in = xmalloc(s->in_cap = IN_SMALL);
	s->out = xmalloc(s->out_cap = OUT_SMALL);
	reply(s, "220 %s %s tern", ternd.hostname, lmtp ? "LMTP" : "ESMTP");
	while (s->state == S_OK) {
		size_t len;
		char *line = read_line(s, &len);

		if (line == NULL)
			break;
		command(s, line, len);
		/* Pipelining: answer only when the client has sent all it had. */
		if (s->in_pos == s->in_len && s->out_len)
			flush(s);
	}
	if (s->out_len && s->state != S_FAIL)
		flush(s);
	txn_reset(s);
	content_free(&s->content);
	smtp_data_free(&s->reader);
	free(s->rcpts);
	free(s->in);
	free(s->out);
	free(s);
}
