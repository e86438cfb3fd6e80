/*
 * relay_proto - one SMTP client transaction over a connection (see
 * relay_proto.h). Without PIPELINING each command waits for its reply;
 * with it, MAIL, every RCPT and DATA (or BDAT and, at once, the content)
 * go in one write, and the replies are read in order. What the peer said
 * in EHLO it would refuse (SIZE, SMTPUTF8) is bounced before anything is
 * sent, as Postfix does. With CHUNKING many transactions may be in
 * flight (relay.c, window.h): replies are read for the oldest one, in
 * order. After a write failed or a 421 was read, replies are read only
 * until a short drain deadline: what the peer sent before it went away is
 * read, nothing is waited for. Runs in the delivery threads.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "deadline.h"
#include "hist.h"
#include "log.h"
#include "compact.h"
#include "metrics.h"
#include "peer.h"
#include "relay_proto.h"
#include "smtp_cmd.h"
#include "spool.h"
#include "stats.h"
#include "ternd.h"
#include "textesc.h"
#include "xalloc.h"

/* tx_mail_params - MAIL parameters the peer understands */
static void tx_mail_params(const struct conn *c, const struct q_msg *m, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	if (c->ehlo.flags & SMTP_EXT_SIZE)
		o += (size_t)snprintf(out + o, len - o, " SIZE=%" PRIu64, m->size);
	if ((m->flags & QMSG_8BIT) && (c->ehlo.flags & SMTP_EXT_8BITMIME) && o < len)
		o += (size_t)snprintf(out + o, len - o, " BODY=8BITMIME");
	if ((m->flags & QMSG_SMTPUTF8) && (c->ehlo.flags & SMTP_EXT_SMTPUTF8) && o < len)
		o += (size_t)snprintf(out + o, len - o, " SMTPUTF8");
	if ((c->ehlo.flags & SMTP_EXT_DSN) && o < len) {
		if (m->ret == RET_FULL || m->ret == RET_HDRS)
			o += (size_t)snprintf(out + o, len - o, " RET=%s", m->ret == RET_FULL ? "FULL" : "HDRS");
		if (m->envid[0] && o < len)
			snprintf(out + o, len - o, " ENVID=%s", m->envid);
	}
}

/* tx_rcpt_params - RCPT parameters the peer understands */
static void tx_rcpt_params(const struct conn *c, const struct q_rcpt *r, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	if (!(c->ehlo.flags & SMTP_EXT_DSN))
		return;
	if (r->notify) {
		o += (size_t)snprintf(out, len, " NOTIFY=%s%s%s%s", r->notify & NOTIFY_NEVER ? "NEVER" : "",
				      r->notify & NOTIFY_SUCCESS ? "SUCCESS," : "",
				      r->notify & NOTIFY_FAILURE ? "FAILURE," : "",
				      r->notify & NOTIFY_DELAY ? "DELAY," : "");
		if (o > 0 && out[o - 1] == ',')
			out[--o] = '\0';
	}
	if (r->orcpt[0] && o < len)
		snprintf(out + o, len - o, " ORCPT=%s", r->orcpt);
}

/* tx_not_ascii - s has an octet above 127 */
static int tx_not_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s > 127)
			return 1;
	return 0;
}

/* tx_needs_smtputf8 - the transaction cannot go without SMTPUTF8: the client
 * asked for it and the sender or a recipient is not ASCII (an ASCII
 * envelope goes to a peer without SMTPUTF8 as it is, as with Postfix) */
static int tx_needs_smtputf8(const struct q_msg *m, const struct q_rcpt **rc, size_t n)
{
	if (!(m->flags & QMSG_SMTPUTF8))
		return 0;
	if (tx_not_ascii(m->sender))
		return 1;
	for (size_t i = 0; i < n; i++)
		if (tx_not_ascii(rc[i]->addr))
			return 1;
	return 0;
}

/* tx_cmd_add - append a formatted command to buf (cap octets, len used);
 * -1, with nothing appended, if it does not fit */
static int tx_cmd_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= cap - *len) {
		buf[*len] = '\0';
		return -1;
	}
	*len += (size_t)k;
	return 0;
}

/* tx_mail_refused - MAIL was refused: every recipient gets the reply.
 * A 4xx on a reused connection is the connection's limit, not the
 * message's (OpenSMTPD answers every MAIL past its max-mails 452 4.5.3 and
 * keeps the session open; Exim closes with 421): the attempt is not sent
 * (refused_reuse, sent again at once by relay.c) and the connection takes
 * no more transactions (spent). */
static void tx_mail_refused(struct conn *c, struct attempt *a, const struct smtp_reply *r)
{
	char text[SMTP_REPLY_FORMAT_MAX], esc[TEXTESC_SIZE(SMTP_REPLY_FORMAT_MAX)];

	smtp_reply_format(r, text, sizeof(text));
	if (r->code >= 400 && r->code < 500 && a->res.conn_use > 1) {
		a->refused_reuse = 1;
		if (!c->spent)
			log_info("peer %s: %s[%s] refused MAIL on a connection that carried %u "
				 "transactions (%s): it takes no more", c->peer->name, c->host, c->addr,
				 a->res.conn_use - 1, textesc(esc, sizeof(esc), text, TEXTESC_REPLY));
		c->spent = 1;
	}
	attempt_outcome_rest(a, r->code, r->esc, text);
}

/* tx_start - write a transaction's commands after lead (the previous
 * transaction's end of data, or a pipelined RSET), and with BDAT its
 * content; without PIPELINING, MAIL and each RCPT wait for their reply
 * here. 0 sent; 1 over (outcomes set); -1 connection lost */
int tx_start(struct conn *c, struct attempt *a, const char *lead)
{
	const struct conf_peer *p = c->peer;
	const struct q_msg *m = &a->m;
	const struct q_rcpt **rc = a->todo;
	size_t n = a->ntodo;
	struct result *res = &a->res;
	int pipelined = (c->ehlo.flags & SMTP_EXT_PIPELINING) != 0;
	int bdat = (c->ehlo.flags & SMTP_EXT_CHUNKING) != 0;
	char *cmds, params[700];
	char text[SMTP_REPLY_FORMAT_MAX];
	size_t len = 0, cap, mail_len;
	struct smtp_reply r;
	int rv = -1, over = 0;

	res->nout = 0;
	memset(a->told, 0, a->ntodo);
	/* the connection as it is now: a loss closes it before the record */
	res->tls = c->ssl == NULL ? HIST_TLS_NONE : c->tls_resumed ? HIST_TLS_RESUMED : HIST_TLS_FULL;
	/* What the peer said it would refuse is not sent: a bounce now, as
	 * Postfix does, rather than a transaction that must fail. */
	if (((c->ehlo.flags & SMTP_EXT_SIZE) && c->ehlo.size && m->size > c->ehlo.size)
	    || (!(c->ehlo.flags & SMTP_EXT_SMTPUTF8) && tx_needs_smtputf8(m, rc, n))) {
		int toobig = (c->ehlo.flags & SMTP_EXT_SIZE) && c->ehlo.size && m->size > c->ehlo.size;

		if (toobig)
			snprintf(text, sizeof(text), "message size %" PRIu64 " exceeds size limit %llu "
				 "of server %s[%s]", m->size, c->ehlo.size, c->host, c->addr);
		else
			snprintf(text, sizeof(text), "SMTPUTF8 is required, but was not offered by "
				 "host %s[%s]", c->host, c->addr);
		attempt_outcome_rest(a, toobig ? 552 : 550, toobig ? "5.3.4" : "5.6.7", text);
		a->clean = 1;	/* nothing was sent */
		return 1;
	}
	a->t0 = res->sending = now_us();
	/* counted when written, not when answered: with pipelining the next
	 * transaction starts before the previous one's final reply */
	res->conn_use = ++c->txns;
	metric_observe(stats.queue_delay, (double)(a->t0 - m->arrival_us) / 1e6, c->peer->name);
	metric_add(stats.transactions, 1, p->name, c->txns > 1 ? "yes" : "no");
	/* Before anything is written: a lead still goes with a later write. */
	if ((a->fd = compact_open_body(&a->m, &a->off)) < 0) {
		snprintf(text, sizeof(text), "cannot open the spool file: %s", strerror(errno));
		attempt_outcome_rest(a, 450, "4.3.0", text);
		a->clean = 1;	/* nothing was sent */
		return 1;
	}
	/* the buffer's size from what goes in it: params are cut to fit theirs */
	cap = strlen(lead) + sizeof("MAIL FROM:<>\r\n") + strlen(m->sender) + sizeof(params)
	      + sizeof("BDAT 18446744073709551615 LAST\r\n");
	for (size_t i = 0; i < n; i++)
		cap += sizeof("RCPT TO:<>\r\n") + strlen(rc[i]->addr) + sizeof(params);
	cmds = xmalloc(cap);
	over |= tx_cmd_add(cmds, cap, &len, "%s", lead);
	tx_mail_params(c, m, params, sizeof(params));
	over |= tx_cmd_add(cmds, cap, &len, "MAIL FROM:<%s>%s\r\n", m->sender, params);
	mail_len = len;
	for (size_t i = 0; i < n; i++) {
		tx_rcpt_params(c, rc[i], params, sizeof(params));
		over |= tx_cmd_add(cmds, cap, &len, "RCPT TO:<%s>%s\r\n", rc[i]->addr, params);
	}
	over |= tx_cmd_add(cmds, cap, &len, bdat ? "BDAT %" PRIu64 " LAST\r\n" : "DATA\r\n", m->size);
	if (over) {	/* never: cap counts all of it */
		attempt_outcome_rest(a, 451, "4.3.0", "local error: SMTP commands longer than their buffer");
		a->clean = 1;	/* nothing was sent */
		rv = 1;
		goto out;
	}
	if (!pipelined && conn_write(c, cmds, mail_len, p->command_timeout) < 0)
		goto out;
	if (!pipelined) {
		/* one command, one reply: MAIL was sent above */
		rv = 1;
		if (conn_reply(c, &r, p->command_timeout) < 0) {
			rv = -1;
			goto out;
		}
		if (r.code != 250) {
			tx_mail_refused(c, a, &r);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			char one[SMTP_PATH_MAX + SMTP_ORCPT_MAX + 64];
			int k;

			tx_rcpt_params(c, rc[i], params, sizeof(params));
			k = snprintf(one, sizeof(one), "RCPT TO:<%s>%s\r\n", rc[i]->addr, params);
			if (k < 0 || (size_t)k >= sizeof(one)) {	/* never: the record was checked */
				attempt_outcome(a, i, 451, "4.3.0",
					      "local error: RCPT command longer than its buffer");
				continue;
			}
			if (conn_write(c, one, (size_t)k, p->command_timeout) < 0
			    || conn_reply(c, &r, p->command_timeout) < 0) {
				rv = -1;
				goto out;
			}
			smtp_reply_format(&r, text, sizeof(text));
			if (r.code == 250 || r.code == 251)
				a->ok[i] = 1, a->accepted++;
			else
				attempt_outcome(a, i, r.code, r.esc, text);
		}
		if (a->accepted == 0)
			goto out;
		rv = -1;
		len = 0;	/* fits: cap counts it */
		tx_cmd_add(cmds, cap, &len, bdat ? "BDAT %" PRIu64 " LAST\r\n" : "DATA\r\n", m->size);
	}
	if (conn_write(c, cmds, len, p->command_timeout) < 0)
		goto out;
	/* BDAT content follows at once, whatever the RCPT replies say. */
	if (bdat && conn_send_body(c, a->fd, a->off, m->size, 0, p->data_timeout) < 0)
		goto out;
	if (bdat) {
		/* written whole: a window holds no file open per transaction
		 * (max_pipeline_depth x max_connections would reach the limit) */
		close(a->fd);
		a->fd = -1;
	}
	a->body_sent = a->final_sent = bdat;
	rv = 0;
out:
	free(cmds);
	return rv;
}

/* tx_timeout - how long the attempt's next reply may take: limit, or
 * what is left of the drain deadline (0: only what was already read) */
static long long tx_timeout(const struct attempt *a, long long limit)
{
	long long left;

	if (a->drain == 0)
		return limit;
	left = a->drain - ms_now();
	return left <= 0 ? 0 : left < limit ? left : limit;
}

/* tx_reply - the attempt's next reply within tx_timeout; a 421 (the peer
 * closes the channel) starts the drain: nothing more is written, what is
 * owed is read until the drain deadline. 0 read; -1 connection lost */
static int tx_reply(struct conn *c, struct attempt *a, struct smtp_reply *r, long long limit)
{
	if (conn_reply(c, r, tx_timeout(a, limit)) < 0)
		return -1;
	if (r->code == 421) {
		a->closing = 1;
		if (a->drain == 0)
			a->drain = deadline_after(TX_DRAIN_MS);
	}
	return 0;
}

/* tx_replies - the replies before the final one: a pipelined RSET, MAIL
 * and RCPT, DATA's 354, then the DATA content without its end. 0 the
 * final reply is due; 1 over (outcomes set); -1 connection lost */
int tx_replies(struct conn *c, struct attempt *a)
{
	const struct conf_peer *p = c->peer;
	size_t n = a->ntodo;
	struct result *res = &a->res;
	char text[SMTP_REPLY_FORMAT_MAX];
	struct smtp_reply r;

	if (a->rset) {
		if (tx_reply(c, a, &r, p->command_timeout) < 0)
			return -1;
		a->replied = 1;
		if (r.code != 250) {
			snprintf(c->why, sizeof(c->why), "host %s[%s] refused RSET (%d)", c->host,
				 c->addr, r.code);
			return -1;
		}
	}
	if (c->ehlo.flags & SMTP_EXT_PIPELINING) {
		if (tx_reply(c, a, &r, p->command_timeout) < 0)
			return -1;
		a->replied = 1;
		if (r.code != 250)
			tx_mail_refused(c, a, &r);
		for (size_t i = 0; i < n; i++) {
			if (tx_reply(c, a, &r, p->command_timeout) < 0)
				return -1;
			if (res->nout >= n)
				continue;	/* MAIL failed: already set */
			smtp_reply_format(&r, text, sizeof(text));
			if (r.code == 250 || r.code == 251)
				a->ok[i] = 1, a->accepted++;
			else
				attempt_outcome(a, i, r.code, r.esc, text);
		}
	}
	if (c->ehlo.flags & SMTP_EXT_CHUNKING)
		return 0;
	if (tx_reply(c, a, &r, p->command_timeout) < 0)
		return -1;
	if (r.code != 354) {
		smtp_reply_format(&r, text, sizeof(text));
		attempt_outcome_rest(a, r.code, r.esc, text);	/* the accepted ones */
		return 1;
	}
	/* every RCPT refused but DATA said 354: an empty message ends it */
	a->dot = 1;
	if (a->accepted == 0)
		return 0;
	if (conn_send_body(c, a->fd, a->off, a->m.size, (a->m.flags & QMSG_DOTLINES) != 0,
			   p->data_timeout) < 0)
		return -1;
	a->body_sent = 1;
	return 0;
}

/* tx_final - the end of data if not written yet, and the final reply:
 * each accepted recipient's outcome. 0 read; -1 connection lost */
int tx_final(struct conn *c, struct attempt *a)
{
	const struct conf_peer *p = c->peer;
	char text[SMTP_REPLY_FORMAT_MAX];
	struct smtp_reply r;

	if (a->dot) {
		/* a write that failed may still have sent it */
		a->final_sent = 1;
		if (conn_write(c, ".\r\n", 3, p->data_timeout) < 0)
			return -1;
	}
	a->dot = 0;
	if (tx_reply(c, a, &r, p->data_timeout) < 0)
		return -1;
	smtp_reply_queue_id(&r, a->res.peer_qid, sizeof(a->res.peer_qid));
	smtp_reply_format(&r, text, sizeof(text));
	attempt_outcome_rest(a, r.code, r.esc, text);	/* the accepted ones */
	if (a->accepted > 0)
		c->messages++;
	a->clean = r.code >= 200 && r.code < 300 && a->accepted > 0;
	return 0;
}

/* tx_rset - a transaction that did not end in 2xx (clean 0) may still
 * be open on the server: RSET before the connection serves the next
 * message */
int tx_rset(struct conn *c, int clean)
{
	struct smtp_reply r;

	if (clean)
		return 0;
	if (conn_write(c, "RSET\r\n", 6, c->peer->command_timeout) < 0
	    || conn_reply(c, &r, c->peer->command_timeout) < 0 || r.code != 250)
		return -1;	/* outcomes are set; the connection is not reusable */
	return 0;
}

/* relay_fail - the failure sink of a transaction over a connection: every
 * recipient of a (when not NULL) without an outcome gets code, esc and
 * why; the connection is closed, and calls on it fail at once from then
 * on, keeping why. A connection that never came up counts against the
 * peer's breaker here; one lost later counts with the attempt's record. */
void relay_fail(struct conn *c, struct attempt *a, int code, const char *esc, const char *why)
{
	if (a) {
		if (!c->opened && c->txns == 0)	/* it never came up */
			peer_connected(a->to, c->peer, &a->pass, 0, why);
		attempt_outcome_rest(a, code, esc, why);
	}
	conn_close(c, 0);
}

/* tx_twice - the attempt may have been delivered although its final
 * reply was not read: its end of data went out and a recipient has no
 * outcome yet */
int tx_twice(const struct attempt *a)
{
	return a->final_sent && a->res.nout < a->ntodo;
}

/* tx_lost - the connection was lost: to relay_fail, every recipient
 * without an outcome deferred. When the end of data went out (tx_twice)
 * the peer may have the message: the one warning for it, in Postfix's
 * words, counted in tern_possible_duplicates_total, and its recipients
 * marked (RCPT_MAYBE_SENT), so that the next attempt goes alone. */
void tx_lost(struct conn *c, struct attempt *a)
{
	char why[sizeof(c->why) + 64], esc[TEXTESC_SIZE(sizeof(c->why))];
	int twice = tx_twice(a);
	size_t from = a->res.nout;

	snprintf(why, sizeof(why), "%s%s", c->why, twice ? " (the message may be delivered twice)" : "");
	if (twice) {
		log_warning("%s: possible duplicate: %s after its end of data -- message may be sent "
			    "more than once", a->qid, textesc(esc, sizeof(esc), c->why, TEXTESC_REPLY));
		metric_add(stats.duplicates, 1, a->to->name);
	}
	relay_fail(c, a, 450, "4.4.2", why);
	for (size_t i = from; twice && i < a->res.nout; i++)
		a->res.out[i].maybe_sent = 1;
}
