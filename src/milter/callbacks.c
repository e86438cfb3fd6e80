/*
 * callbacks - tern-milter's libmilter callbacks: per-connection and
 * per-message state, header inspection and trace context injection.
 *
 * Connection state lives in smfi_setpriv(), never in thread-local storage.
 * Per-message state is freed by msg_reset(), which is idempotent and called
 * from envfrom (a new message), abort, eom and close. Header edits happen
 * only in eom. Every internal error goes through msg_fail(), the one error
 * sink: it logs once, moves the message to MSG_ERROR and picks the reply
 * from on_error; later callbacks in MSG_ERROR repeat that reply.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "hdr_check.h"
#include "log.h"
#include "metrics.h"
#include "metrics_std.h"
#include "milter.h"
#include "hist.h"
#include "textesc.h"
#include "trace_header.h"
#include "xalloc.h"

#define SENDER_MAX 320
#define CLIENT_NAME_MAX 256
#define QID_MAX 32
#define WHY_MAX 256

enum msg_state { MSG_NONE, MSG_OPEN, MSG_ERROR };

/* Negotiated "no reply" steps: the MTA does not wait for these callbacks. */
struct session_nr {
	int conn, mail, rcpt, hdr;
};

struct session {
	struct milter_cfg *cfg;
	struct session_nr nr;
	char client_name[CLIENT_NAME_MAX];
	char client_addr[INET6_ADDRSTRLEN + 8];
	int client_trusted;		/* address in trusted_networks */
	/* the message in progress */
	enum msg_state state;
	sfsistat error_reply;		/* what MSG_ERROR answers */
	struct hdr_check *hc;
	char sender[SENDER_MAX + 1];
	int authenticated;
	long long nrcpt;		/* recipients the milter accepted */
	int rcpt_failed;		/* more than max_recipients were offered */
};

/* Reply codes per check: when rejecting, and when deferring. */
static const struct check_reply {
	const char *rcode, *xcode, *tcode, *txcode;
} check_replies[CHECK_COUNT] = {
	[CHECK_HEADER_LIMITS] = {"552", "5.3.4", "452", "4.3.4"},
	[CHECK_HEADER_BYTES] = {"550", "5.6.0", "451", "4.6.0"},
	[CHECK_LOOP] = {"554", "5.4.6", "451", "4.4.6"},
	[CHECK_FROM] = {"550", "5.6.0", "451", "4.6.0"},
	[CHECK_DATE] = {"550", "5.6.0", "451", "4.6.0"},
	[CHECK_RECIPIENTS] = {"550", "5.5.3", "452", "4.5.3"},
};

/* The metrics (tern-milter(8), METRICS). */
static struct metric *m_messages, *m_checks, *m_traces, *m_callback;
struct metric *milter_journal_dropped;

/* milter_metrics_init - register the metrics and their label sets */
void milter_metrics_init(void)
{
	static const char *const verdicts[] = {"accept", "tag", "reject", "tempfail"};
	static const char *const origins[] = {"continued", "replaced", "new"};
	static const double seconds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
					 0.025, 0.05, 0.1, 0.25, 1};

	m_messages = metric_new(METRIC_COUNTER, "tern_milter_messages_total",
				"Messages inspected, by verdict.", "verdict", NULL, 0);
	for (size_t i = 0; i < sizeof(verdicts) / sizeof(verdicts[0]); i++)
		metric_series(m_messages, verdicts[i]);
	m_checks = metric_new(METRIC_COUNTER, "tern_milter_checks_failed_total",
			      "Messages that failed a check (whatever its action), by check.",
			      "check", NULL, 0);
	for (enum check_id id = 0; id < CHECK_COUNT; id++)
		metric_series(m_checks, check_name(id));
	m_traces = metric_new(METRIC_COUNTER, "tern_milter_traces_total",
			      "Trace contexts given to messages, by origin.", "origin", NULL, 0);
	for (size_t i = 0; i < sizeof(origins) / sizeof(origins[0]); i++)
		metric_series(m_traces, origins[i]);
	m_callback = metric_new(METRIC_HISTOGRAM, "tern_milter_callback_seconds",
				"Time spent in the end-of-message callback (checks, trace, header edits).",
				NULL, seconds, sizeof(seconds) / sizeof(seconds[0]));
	milter_journal_dropped = metric_new(METRIC_COUNTER, "tern_milter_journal_dropped_total",
					    "Journal records not written (the writer could not "
					    "keep up, or the journal database failed).", NULL, NULL, 0);
	metrics_std_init();
}

/* elapsed - seconds since start (CLOCK_MONOTONIC) */
static double elapsed(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* check_action - the configured action of a check */
static enum conf_action check_action(const struct conf *conf, enum check_id id)
{
	const struct conf_milter *m = &conf->milter;

	switch (id) {
	case CHECK_HEADER_LIMITS:
		return m->check_header_limits;
	case CHECK_HEADER_BYTES:
		return m->check_header_bytes;
	case CHECK_LOOP:
		return m->check_loop;
	case CHECK_FROM:
		return m->check_from;
	case CHECK_DATE:
		return m->check_date;
	case CHECK_RECIPIENTS:
		return m->check_recipients;
	default:
		return ACTION_OFF;
	}
}

/* copy_printable - bounded copy keeping only printable ASCII ('?' otherwise) */
static void copy_printable(char *dst, size_t dstlen, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < dstlen; i++)
		dst[i] = src[i] > ' ' && src[i] < 0x7f ? src[i] : '?';
	dst[i] = '\0';
}

/* session_of - the connection state, created on first use */
static struct session *session_of(SMFICTX *ctx)
{
	struct session *s = smfi_getpriv(ctx);

	if (s == NULL) {
		s = xcalloc(1, sizeof(*s));
		s->cfg = milter_cfg_get();
		snprintf(s->client_name, sizeof(s->client_name), "unknown");
		snprintf(s->client_addr, sizeof(s->client_addr), "unknown");
		if (smfi_setpriv(ctx, s) != MI_SUCCESS) {
			log_error("smfi_setpriv failed; connection state lost");
			milter_cfg_put(&s->cfg);
			free(s);
			return NULL;
		}
		milter_session_count(1);
	}
	return s;
}

/* msg_reset - forget the message in progress (idempotent) */
static void msg_reset(struct session *s)
{
	hdr_check_free(&s->hc);
	s->state = MSG_NONE;
	s->sender[0] = '\0';
	s->authenticated = 0;
	s->nrcpt = 0;
	s->rcpt_failed = 0;
}

/* queue_id - the MTA's queue id ({i}), sanitized, or NOQUEUE */
static void queue_id(SMFICTX *ctx, char out[QID_MAX + 1])
{
	const char *i = smfi_getsymval(ctx, "{i}");
	size_t n = 0;

	for (; i && i[n] && n < QID_MAX; n++) {
		if (!((i[n] >= 'A' && i[n] <= 'Z') || (i[n] >= 'a' && i[n] <= 'z')
		      || (i[n] >= '0' && i[n] <= '9')))
			break;
		out[n] = i[n];
	}
	out[n] = '\0';
	if (n == 0 || (i && i[n] != '\0'))
		snprintf(out, QID_MAX + 1, "NOQUEUE");
}

/* msg_fail - the error sink: log once, enter MSG_ERROR, answer per on_error */
static sfsistat msg_fail(SMFICTX *ctx, struct session *s, const char *why)
{
	char qid[QID_MAX + 1];

	if (s == NULL)
		return SMFIS_TEMPFAIL;
	if (s->state == MSG_ERROR)
		return s->error_reply;
	queue_id(ctx, qid);
	s->state = MSG_ERROR;
	if (s->cfg->conf->milter.on_error == ONERROR_TEMPFAIL) {
		s->error_reply = SMFIS_TEMPFAIL;
		smfi_setreply(ctx, "451", "4.3.0", "internal error in tern-milter, try again later");
	} else {
		s->error_reply = SMFIS_ACCEPT;
	}
	log_error("%s: client=%s[%s]: %s; %s the message (on_error = %s)", qid,
		  s->client_name, s->client_addr, why,
		  s->error_reply == SMFIS_ACCEPT ? "accepting" : "deferring",
		  s->error_reply == SMFIS_ACCEPT ? "accept" : "tempfail");
	hdr_check_free(&s->hc);
	return s->error_reply;
}

/* reply_nr - CONTINUE, or NOREPLY when that step was negotiated as such */
static sfsistat reply_nr(int nr)
{
	return nr ? SMFIS_NOREPLY : SMFIS_CONTINUE;
}

/* tm_negotiate - ask only for the actions, steps and macros we use */
static sfsistat tm_negotiate(SMFICTX *ctx, unsigned long f0, unsigned long f1,
			     unsigned long f2, unsigned long f3, unsigned long *pf0,
			     unsigned long *pf1, unsigned long *pf2, unsigned long *pf3)
{
	struct session *s = session_of(ctx);
	unsigned long want_actions = SMFIF_ADDHDRS | SMFIF_CHGHDRS | SMFIF_SETSYMLIST;
	/*
	 * DATA is not skipped on purpose: Postfix sends the DATA-stage macros
	 * either way, and alone they get no reply, so our delayed ACK holds
	 * cleanup's next packet behind Nagle for 40 ms per message (measured,
	 * bench/RESULTS.md). Answering DATA costs a round trip instead.
	 */
	unsigned long steps = SMFIP_NOHELO | SMFIP_NOBODY | SMFIP_NOUNKNOWN | SMFIP_NOEOH;
	enum conf_action rcpt_action;

	if (s == NULL)
		return SMFIS_ALL_OPTS;
	if ((f0 & want_actions) != want_actions) {
		log_error("MTA does not offer the milter actions tern needs (offered 0x%lx)", f0);
		return SMFIS_REJECT;
	}
	rcpt_action = s->cfg->conf->milter.check_recipients;
	s->nr.conn = (f1 & SMFIP_NR_CONN) != 0;
	s->nr.mail = (f1 & SMFIP_NR_MAIL) != 0;
	s->nr.hdr = (f1 & SMFIP_NR_HDR) != 0;
	s->nr.rcpt = (f1 & SMFIP_NR_RCPT) && (rcpt_action == ACTION_TAG || rcpt_action == ACTION_OFF);
	steps |= (s->nr.conn ? SMFIP_NR_CONN : 0) | (s->nr.mail ? SMFIP_NR_MAIL : 0)
		| (s->nr.hdr ? SMFIP_NR_HDR : 0) | (s->nr.rcpt ? SMFIP_NR_RCPT : 0);
	*pf0 = want_actions;
	*pf1 = steps & f1;
	*pf2 = 0;
	*pf3 = 0;
	if (smfi_setsymlist(ctx, SMFIM_CONNECT, "{client_addr} {daemon_name}") != MI_SUCCESS
	    || smfi_setsymlist(ctx, SMFIM_ENVFROM, "{auth_authen}") != MI_SUCCESS
	    || smfi_setsymlist(ctx, SMFIM_EOM, "{i}") != MI_SUCCESS)
		log_warning("smfi_setsymlist failed; relying on the MTA's default macros");
	return SMFIS_CONTINUE;
}

/* tm_connect - remember who the client is and whether it is trusted */
static sfsistat tm_connect(SMFICTX *ctx, char *hostname, _SOCK_ADDR *hostaddr)
{
	struct session *s = session_of(ctx);
	const char *macro_addr;

	if (s == NULL)
		return SMFIS_ACCEPT;
	/* MTAs pass "[addr]" for a client without a name; log it as Postfix does. */
	copy_printable(s->client_name, sizeof(s->client_name),
		       hostname && hostname[0] != '[' ? hostname : "unknown");
	if (hostaddr && hostaddr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)hostaddr)->sin_addr,
			  s->client_addr, sizeof(s->client_addr));
	else if (hostaddr && hostaddr->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)hostaddr)->sin6_addr,
			  s->client_addr, sizeof(s->client_addr));
	else if ((macro_addr = smfi_getsymval(ctx, "{client_addr}")) != NULL)
		copy_printable(s->client_addr, sizeof(s->client_addr), macro_addr);
	s->client_trusted = hostaddr && (hostaddr->sa_family == AF_INET
					 || hostaddr->sa_family == AF_INET6)
		? cidr_list_match(s->cfg->conf->milter.trusted_networks, hostaddr)
		: cidr_list_match_str(s->cfg->conf->milter.trusted_networks, s->client_addr);
	log_debug("connect from %s[%s] daemon=%s trusted=%s", s->client_name, s->client_addr,
		  smfi_getsymval(ctx, "{daemon_name}") ? smfi_getsymval(ctx, "{daemon_name}") : "-",
		  s->client_trusted ? "yes" : "no");
	return reply_nr(s->nr.conn);
}

/* tm_envfrom - a new message: reset state, note sender and authentication */
static sfsistat tm_envfrom(SMFICTX *ctx, char **argv)
{
	struct session *s = session_of(ctx);
	const struct conf_milter *m;
	struct hdr_limits limits;
	const char *auth;
	size_t len;

	if (s == NULL)
		return SMFIS_ACCEPT;
	msg_reset(s);
	m = &s->cfg->conf->milter;
	limits.max_header_size = m->max_header_size;
	limits.max_headers = m->max_headers;
	limits.max_received = m->max_received;
	s->hc = hdr_check_new(&limits);
	s->state = MSG_OPEN;
	if (argv && argv[0]) {
		const char *from = argv[0];

		len = strlen(from);
		if (len >= 2 && from[0] == '<' && from[len - 1] == '>') {
			from++;
			len -= 2;
		}
		copy_printable(s->sender, len + 1 < sizeof(s->sender) ? len + 1 : sizeof(s->sender), from);
	}
	auth = smfi_getsymval(ctx, "{auth_authen}");
	s->authenticated = auth != NULL && *auth != '\0';
	return reply_nr(s->nr.mail);
}

/* tm_envrcpt - count recipients; refuse those beyond max_recipients */
static sfsistat tm_envrcpt(SMFICTX *ctx, char **argv)
{
	struct session *s = session_of(ctx);
	const struct conf_milter *m;
	const struct check_reply *r = &check_replies[CHECK_RECIPIENTS];
	char why[WHY_MAX];

	if (s == NULL)
		return SMFIS_ACCEPT;
	if (s->state == MSG_ERROR)
		return s->nr.rcpt ? SMFIS_NOREPLY : s->error_reply;
	m = &s->cfg->conf->milter;
	if (s->nrcpt < m->max_recipients || m->check_recipients == ACTION_OFF) {
		s->nrcpt++;
		return reply_nr(s->nr.rcpt);
	}
	s->rcpt_failed = 1;
	snprintf(why, sizeof(why), "too many recipients, limit %lld", m->max_recipients);
	switch (m->check_recipients) {
	case ACTION_REJECT:
		smfi_setreply(ctx, (char *)r->rcode, (char *)r->xcode, why);
		return SMFIS_REJECT;
	case ACTION_TEMPFAIL:
		smfi_setreply(ctx, (char *)r->tcode, (char *)r->txcode, why);
		return SMFIS_TEMPFAIL;
	default:
		s->nrcpt++;
		return reply_nr(s->nr.rcpt);
	}
}

/* tm_data - DATA: nothing to check; answered so the MTA's packets flow */
static sfsistat tm_data(SMFICTX *ctx)
{
	(void)ctx;
	return SMFIS_CONTINUE;
}

/* tm_header - feed one header field to the inspection */
static sfsistat tm_header(SMFICTX *ctx, char *name, char *value)
{
	struct session *s = session_of(ctx);

	if (s && s->state == MSG_OPEN && s->hc && name && value)
		hdr_check_push(s->hc, name, strlen(name), value, strlen(value));
	return s ? reply_nr(s->nr.hdr) : SMFIS_CONTINUE;
}

/* Outcome of the inspection of one message. */
struct verdict {
	sfsistat reply;			/* SMFIS_CONTINUE means accept */
	const char *name;		/* accept, reject, tempfail, tag */
	char reason[3 * WHY_MAX];
	unsigned tags;			/* bit per check with action tag that failed */
	unsigned decided;		/* bit per check behind the verdict (journaled) */
};

/* add_reason - append "check: why" to the verdict's reason */
static void add_reason(struct verdict *v, enum check_id id, const char *why)
{
	size_t len = strlen(v->reason);

	snprintf(v->reason + len, sizeof(v->reason) - len, "%s%s: %s",
		 len ? "; " : "", check_name(id), why);
}

/* inspect - evaluate every check; set the reply for reject/tempfail */
static void inspect(SMFICTX *ctx, struct session *s, struct verdict *v)
{
	const struct conf *conf = s->cfg->conf;
	enum check_id deny = CHECK_COUNT;
	enum conf_action deny_action = ACTION_OFF;
	char why[WHY_MAX], deny_why[WHY_MAX] = "";

	v->reply = SMFIS_CONTINUE;
	v->name = "accept";
	v->reason[0] = '\0';
	v->tags = 0;
	v->decided = 0;
	for (enum check_id id = 0; id < CHECK_COUNT; id++) {
		enum conf_action action = check_action(conf, id);
		int failed;

		if (action == ACTION_OFF)
			continue;
		if (id == CHECK_RECIPIENTS) {
			failed = s->rcpt_failed;
			snprintf(why, sizeof(why), "more than %lld recipients offered",
				 conf->milter.max_recipients);
			metric_add(m_checks, failed, check_name(id));
			if (failed && action == ACTION_TAG)
				v->tags |= 1u << id;
			else if (failed)	/* refused at RCPT already */
				add_reason(v, id, why);
			continue;
		}
		failed = hdr_check_failed(s->hc, id, why, sizeof(why));
		if (!failed)
			continue;
		metric_add(m_checks, 1, check_name(id));
		if (action == ACTION_TAG) {
			v->tags |= 1u << id;
			add_reason(v, id, why);
		} else if (deny == CHECK_COUNT
			   || (action == ACTION_REJECT && deny_action == ACTION_TEMPFAIL)) {
			deny = id;
			deny_action = action;
			snprintf(deny_why, sizeof(deny_why), "%s", why);
		}
	}
	if (deny != CHECK_COUNT) {
		const struct check_reply *r = &check_replies[deny];

		v->reason[0] = '\0';
		v->decided = 1u << deny;
		add_reason(v, deny, deny_why);
		if (deny_action == ACTION_REJECT) {
			smfi_setreply(ctx, (char *)r->rcode, (char *)r->xcode, deny_why);
			v->reply = SMFIS_REJECT;
			v->name = "reject";
		} else {
			smfi_setreply(ctx, (char *)r->tcode, (char *)r->txcode, deny_why);
			v->reply = SMFIS_TEMPFAIL;
			v->name = "tempfail";
		}
	} else if (v->tags) {
		v->name = "tag";
		v->decided = v->tags;
	}
}

/* journal_verdict - the verdict as journaled: its name, then ":check" for
 * each check behind it ("reject:loop", "tag:date:from"), which tern-report
 * counts by check */
static const char *journal_verdict(const struct verdict *v, char *buf, size_t cap)
{
	size_t n = (size_t)snprintf(buf, cap, "%s", v->name);

	for (enum check_id id = 0; id < CHECK_COUNT && n < cap; id++)
		if (v->decided & (1u << id))
			n += (size_t)snprintf(buf + n, cap - n, ":%s", check_name(id));
	return buf;
}

/* Trace context decision for one message. */
struct trace_decision {
	struct traceparent tp;
	unsigned char parent[8];	/* a continued trace's previous span, or zeros */
	const char *origin;		/* new, continued, replaced */
	int delete_incoming;		/* remove incoming Traceparent/Tracestate */
	struct hdr_trace_fields in;
};

/* decide_trace - continue a trusted or validly signed trace, else start one */
static void decide_trace(struct session *s, struct trace_decision *d)
{
	const struct milter_cfg *cfg = s->cfg;
	int trusted = s->client_trusted
		|| (s->authenticated && cfg->conf->milter.trust_authenticated);
	enum trace_origin origin;

	hdr_check_trace(s->hc, &d->in);
	memset(d->parent, 0, sizeof(d->parent));
	d->delete_incoming = d->in.ntraceparent > 0 || d->in.ntracestate > 0;
	d->origin = d->delete_incoming ? "replaced" : "new";
	origin = trace_header_verify(&cfg->keys, &d->in, &d->tp);
	if (origin == TRACE_OURS || (trusted && origin == TRACE_FOREIGN && d->in.ntraceparent == 1)) {
		memcpy(d->parent, d->tp.span_id, sizeof(d->parent));
		traceparent_new_span(&d->tp);
		d->origin = "continued";
		return;
	}
	traceparent_new(&d->tp);
}

/* edit_trace_headers - replace incoming trace fields with ours, at the top */
static int edit_trace_headers(SMFICTX *ctx, struct session *s, const struct trace_decision *d,
			      const char **failed)
{
	char tp[TRACEPARENT_LEN + 1], sig[TRACE_SIG_LEN + 1], state[TRACESTATE_TERN_LEN + 1];

	/* Highest index first, so deleting one does not renumber the rest. */
	for (int i = d->in.ntraceparent; i >= 1; i--)
		if (smfi_chgheader(ctx, "Traceparent", i, NULL) != MI_SUCCESS)
			return *failed = "smfi_chgheader(Traceparent) failed", -1;
	for (int i = d->in.ntracestate; i >= 1; i--)
		if (smfi_chgheader(ctx, "Tracestate", i, NULL) != MI_SUCCESS)
			return *failed = "smfi_chgheader(Tracestate) failed", -1;
	traceparent_format(&d->tp, tp);
	/* over the first Message-ID (the only one, if it is to verify); "" if there is
	 * none (or it is too long to keep: then nothing verifies it) */
	trace_sign(s->cfg->keys.cur, tp, d->in.message_id ? d->in.message_id : "",
		   d->in.message_id ? d->in.message_id_len : 0, sig);
	tracestate_format(sig, state);
	/* Insert Tracestate first so that Traceparent ends up above it. */
	if (smfi_insheader(ctx, 0, "Tracestate", state) != MI_SUCCESS
	    || smfi_insheader(ctx, 0, "Traceparent", tp) != MI_SUCCESS)
		return *failed = "smfi_insheader failed", -1;
	return 0;
}

/* journal - hand the message's record to the journal writer */
static void journal(const struct session *s, const struct trace_decision *d, const char *qid,
		    const char *verdict)
{
	struct journal_rec r = {0};

	r.time_us = now_us();
	if (d) {
		memcpy(r.trace_id, d->tp.trace_id, sizeof(r.trace_id));
		memcpy(r.span_id, d->tp.span_id, sizeof(r.span_id));
		memcpy(r.parent_id, d->parent, sizeof(r.parent_id));
	}
	r.nrcpt = (uint32_t)s->nrcpt;
	r.mta_qid = (char *)(strcmp(qid, "NOQUEUE") ? qid : "");
	r.client = (char *)s->client_addr;
	r.sender = (char *)s->sender;
	r.verdict = (char *)verdict;
	journal_add(&r);
}

/* tm_eom - decide, edit headers, log one line */
static sfsistat tm_eom(SMFICTX *ctx)
{
	struct session *s = session_of(ctx);
	struct trace_decision d;
	struct verdict v;
	char qid[QID_MAX + 1], tid[TRACE_ID_HEX + 1], from[TEXTESC_SIZE(SENDER_MAX)], jv[128];
	const char *failed = NULL;
	int tracing;
	struct timespec start;

	if (s == NULL)
		return SMFIS_ACCEPT;
	clock_gettime(CLOCK_MONOTONIC, &start);
	if (s->state != MSG_OPEN) {
		sfsistat r = s->state == MSG_ERROR ? s->error_reply : SMFIS_CONTINUE;

		if (s->state == MSG_ERROR)
			metric_add(m_messages, 1, r == SMFIS_ACCEPT ? "accept" : "tempfail");
		msg_reset(s);
		return r;
	}
	queue_id(ctx, qid);
	inspect(ctx, s, &v);
	tracing = s->cfg->conf->milter.trace && s->cfg->keys.cur != NULL;
	if (tracing) {
		decide_trace(s, &d);
		trace_id_hex(&d.tp, tid);
	} else {
		snprintf(tid, sizeof(tid), "-");
		d.origin = "off";
	}
	if (v.reply == SMFIS_CONTINUE) {
		struct hdr_trace_fields own;

		/* Tern-Inspect: is ours; a client's would be a forgery. */
		hdr_check_trace(s->hc, &own);
		for (int i = own.ninspect; i >= 1 && !failed; i--)
			if (smfi_chgheader(ctx, "Tern-Inspect", i, NULL) != MI_SUCCESS)
				failed = "smfi_chgheader(Tern-Inspect) failed";
		for (enum check_id id = 0; id < CHECK_COUNT && !failed; id++) {
			char value[64];

			if (!(v.tags & (1u << id)))
				continue;
			snprintf(value, sizeof(value), "%s=fail", check_name(id));
			if (smfi_addheader(ctx, "Tern-Inspect", value) != MI_SUCCESS)
				failed = "smfi_addheader(Tern-Inspect) failed";
		}
		if (!failed && tracing)
			edit_trace_headers(ctx, s, &d, &failed);
		if (failed) {
			sfsistat r = msg_fail(ctx, s, failed);

			metric_add(m_messages, 1, r == SMFIS_ACCEPT ? "accept" : "tempfail");
			msg_reset(s);
			return r;
		}
	}
	log_info("%s: trace=%s origin=%s client=%s[%s] from=<%s> nrcpt=%lld verdict=%s%s%s",
		 qid, tid, d.origin, s->client_name, s->client_addr,
		 textesc(from, sizeof(from), s->sender, TEXTESC_ADDR), s->nrcpt,
		 v.name, v.reason[0] ? " reason=" : "", v.reason);
	metric_add(m_messages, 1, v.name);
	metric_add(m_traces, tracing, d.origin);
	metric_observe(m_callback, elapsed(&start));
	journal(s, tracing ? &d : NULL, qid, journal_verdict(&v, jv, sizeof(jv)));
	msg_reset(s);
	return v.reply;
}

/* tm_abort - the MTA gave up on the message */
static sfsistat tm_abort(SMFICTX *ctx)
{
	struct session *s = smfi_getpriv(ctx);

	if (s)
		msg_reset(s);
	return SMFIS_CONTINUE;
}

/* tm_close - end of connection; may be the only callback, s may be NULL */
static sfsistat tm_close(SMFICTX *ctx)
{
	struct session *s = smfi_getpriv(ctx);

	if (s == NULL)
		return SMFIS_CONTINUE;
	msg_reset(s);
	smfi_setpriv(ctx, NULL);
	milter_cfg_put(&s->cfg);
	free(s);
	milter_session_count(-1);
	return SMFIS_CONTINUE;
}

struct smfiDesc milter_desc = {
	.xxfi_name = "tern-milter",
	.xxfi_version = SMFI_VERSION,
	.xxfi_flags = SMFIF_ADDHDRS | SMFIF_CHGHDRS | SMFIF_SETSYMLIST,
	.xxfi_connect = tm_connect,
	.xxfi_envfrom = tm_envfrom,
	.xxfi_envrcpt = tm_envrcpt,
	.xxfi_data = tm_data,
	.xxfi_header = tm_header,
	.xxfi_eom = tm_eom,
	.xxfi_abort = tm_abort,
	.xxfi_close = tm_close,
	.xxfi_negotiate = tm_negotiate,
};
