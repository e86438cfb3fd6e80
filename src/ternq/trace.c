/*
 * trace - ternq trace: one message's whole path, in time order, from the
 * milter's journal and ternd's delivery history: the milter's verdict
 * (with the MTA's queue id), ternd's acceptance, each delivery attempt,
 * and each recipient's final state.
 *
 * Reads both LMDB environments read-only, one short read transaction per
 * lookup, so it works while the daemons run. Never writes.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "qid.h"
#include "store_journal.h"
#include "textesc.h"
#include "timefmt.h"
#include "trace.h"
#include "xalloc.h"

#define EXIT_NOTFOUND 1

/* One event of the path: a journal record or a history record. */
struct event {
	uint64_t time_us;
	int milter;
	struct journal_rec j;
	struct hist_rec h;
};

struct found {
	struct event *ev;
	size_t n, cap;
	unsigned char (*traces)[16];	/* trace ids seen */
	size_t ntraces, traces_cap;
};

/* add_trace - remember a trace id once; a zero one is no trace */
static void add_trace(struct found *f, const unsigned char id[16])
{
	static const unsigned char zero[16];

	if (memcmp(id, zero, 16) == 0)
		return;
	for (size_t i = 0; i < f->ntraces; i++)
		if (memcmp(f->traces[i], id, 16) == 0)
			return;
	f->traces = xgrowarray(f->traces, &f->traces_cap, f->ntraces + 1, sizeof(*f->traces));
	memcpy(f->traces[f->ntraces++], id, 16);
}

/* hist_seen - is this history record already in the path */
static int hist_seen(const struct found *f, const struct hist_rec *h)
{
	for (size_t i = 0; i < f->n; i++)
		if (!f->ev[i].milter && f->ev[i].h.time_us == h->time_us && f->ev[i].h.kind == h->kind
		    && f->ev[i].h.idx == h->idx && strcmp(f->ev[i].h.qid, h->qid) == 0)
			return 1;
	return 0;
}

/* take_hist - store_hist_find callback: keep a copy */
static int take_hist(const struct hist_rec *h, void *arg)
{
	struct found *f = arg;
	struct event *e;

	if (hist_seen(f, h))
		return 0;
	f->ev = xgrowarray(f->ev, &f->cap, f->n + 1, sizeof(*f->ev));
	e = &f->ev[f->n++];
	memset(e, 0, sizeof(*e));
	e->time_us = h->time_us;
	e->h = *h;
	e->h.sender = xstrdup(h->sender);
	e->h.msgid = xstrdup(h->msgid);
	e->h.client = xstrdup(h->client);
	e->h.rcpt = xstrdup(h->rcpt);
	e->h.peer = xstrdup(h->peer);
	e->h.relay = xstrdup(h->relay);
	e->h.dsn = xstrdup(h->dsn);
	e->h.reply = xstrdup(h->reply);
	e->h.peer_qid = xstrdup(h->peer_qid);
	add_trace(f, h->trace_id);
	return 0;
}

/* take_journal - journal_db_find callback: keep a copy */
static int take_journal(const struct journal_rec *j, void *arg)
{
	struct found *f = arg;
	struct event *e;

	for (size_t i = 0; i < f->n; i++)
		if (f->ev[i].milter && f->ev[i].j.time_us == j->time_us
		    && memcmp(f->ev[i].j.span_id, j->span_id, 8) == 0)
			return 0;
	f->ev = xgrowarray(f->ev, &f->cap, f->n + 1, sizeof(*f->ev));
	e = &f->ev[f->n++];
	memset(e, 0, sizeof(*e));
	e->time_us = j->time_us;
	e->milter = 1;
	e->j = *j;
	e->j.mta_qid = xstrdup(j->mta_qid);
	e->j.client = xstrdup(j->client);
	e->j.sender = xstrdup(j->sender);
	e->j.verdict = xstrdup(j->verdict);
	add_trace(f, j->trace_id);
	return 0;
}

/* by_time - events in time order; at the same time the milter first,
 * then acceptances, then attempts by queue id and recipient index */
static int by_time(const void *a, const void *b)
{
	const struct event *x = a, *y = b;
	int c;

	if (x->time_us != y->time_us)
		return x->time_us < y->time_us ? -1 : 1;
	if (x->milter != y->milter)
		return y->milter - x->milter;
	if (x->milter)
		return 0;
	if (x->h.kind != y->h.kind)
		return x->h.kind - y->h.kind;
	if ((c = strcmp(x->h.qid, y->h.qid)) != 0)
		return c;
	return x->h.idx < y->h.idx ? -1 : x->h.idx > y->h.idx;
}

/* hex - octets as lower-case hex */
static void hex(const unsigned char *p, size_t n, char *out)
{
	sodium_bin2hex(out, 2 * n + 1, p, n);
}

/* unhex - 32 hex digits into a trace id; -1 if it is not one */
static int unhex(const char *s, unsigned char out[16])
{
	const char *end;
	size_t n;

	return strlen(s) == 32 && sodium_hex2bin(out, 16, s, 32, NULL, &n, &end) == 0 && n == 16
		? 0 : -1;
}

/* secs - microseconds as seconds, for JSON */
static json_t *secs(uint64_t us)
{
	return json_real((double)us / 1e6);
}

/* set_time - a time in JSON: seconds in name, ISO 8601 in name_iso */
static void set_time(json_t *o, const char *name, uint64_t us, int utc)
{
	char key[32], when[TIMEFMT_LEN];

	snprintf(key, sizeof(key), "%s_iso", name);
	json_object_set_new(o, name, secs(us));
	json_object_set_new(o, key, json_string(timefmt_iso(us, utc, when, sizeof(when))));
}

static const char *const tls_names[] = {"none", "full", "resumed"};

/* has_link - did the acceptance keep an unverified incoming trace */
static int has_link(const struct hist_rec *h)
{
	return !sodium_is_zero(h->link_trace_id, sizeof(h->link_trace_id));
}

/* links - an acceptance's unverified incoming trace, as OpenTelemetry
 * links are: another trace, never a parent of ours */
static json_t *links(const struct hist_rec *h)
{
	json_t *arr = json_array(), *l;
	char tid[33], span[17];

	if (!has_link(h))
		return arr;
	hex(h->link_trace_id, 16, tid);
	hex(h->link_span_id, 8, span);
	l = json_object();
	json_object_set_new(l, "trace_id", json_string(tid));
	json_object_set_new(l, "span_id", json_string(span));
	json_object_set_new(l, "verified", json_false());
	json_array_append_new(arr, l);
	return arr;
}

/* final_states - each recipient's last outcome ("queued" before any) */
static json_t *final_states(const struct found *f, const char *qid, int json)
{
	json_t *arr = json ? json_array() : NULL;

	for (size_t i = 0; i < f->n; i++) {
		const struct hist_rec *a = &f->ev[i].h;

		if (f->ev[i].milter || a->kind != HIST_ACCEPT || strcmp(a->qid, qid) != 0)
			continue;
		for (const char *p = a->rcpt; *p;) {
			size_t len = strcspn(p, "\n");
			const char *state = "queued", *reply = "";

			for (size_t k = 0; k < f->n; k++) {
				const struct hist_rec *h = &f->ev[k].h;

				if (!f->ev[k].milter && h->kind == HIST_ATTEMPT && strcmp(h->qid, qid) == 0
				    && strlen(h->rcpt) == len && strncmp(h->rcpt, p, len) == 0) {
					state = hist_state_name(h->state);
					reply = h->reply;
				}
			}
			if (json) {
				json_t *o = json_object();
				char *addr = xstrndup(p, len);

				json_object_set_new(o, "address", json_text(addr));
				json_object_set_new(o, "state", json_string(state));
				json_object_set_new(o, "reply", json_text(reply));
				json_array_append_new(arr, o);
				free(addr);
			} else {
				textesc_line(stdout, "%-29s final     %s: to=<%.*s>, status=%s", "", qid,
					     (int)len, p, state);
			}
			p += len + (p[len] == '\n');
		}
	}
	return arr;
}

/* print_text - the path, one line per event, then the final states */
static void print_text(const struct found *f, int utc)
{
	char when[TIMEFMT_LEN], tid[33], span[17], parent[17];

	for (size_t i = 0; i < f->n; i++) {
		const struct event *e = &f->ev[i];

		timefmt_human(e->time_us, utc, TIMEFMT_MS, when, sizeof(when));
		if (e->milter) {
			hex(e->j.trace_id, 16, tid);
			hex(e->j.span_id, 8, span);
			hex(e->j.parent_id, 8, parent);
			textesc_line(stdout, "%s milter    %s: verdict=%s, client=%s, from=<%s>, nrcpt=%u, "
				     "trace=%s, span=%s%s%s", when,
				     e->j.mta_qid[0] ? e->j.mta_qid : "NOQUEUE", e->j.verdict, e->j.client,
				     e->j.sender, e->j.nrcpt, tid, span,
				     strcmp(parent, "0000000000000000") ? ", parent=" : "",
				     strcmp(parent, "0000000000000000") ? parent : "");
		} else if (e->h.kind == HIST_ACCEPT) {
			char link[33 + 1 + 16 + 1] = "";

			hex(e->h.trace_id, 16, tid);
			hex(e->h.span_id, 8, span);
			if (has_link(&e->h)) {
				hex(e->h.link_trace_id, 16, link);
				link[32] = '-';
				hex(e->h.link_span_id, 8, link + 33);
			}
			textesc_line(stdout, "%s accepted  %s: from=<%s>, size=%llu, nrcpt=%u, client=%s, "
				     "message-id=%s, trace=%s, span=%s%s%s%s", when, e->h.qid, e->h.sender,
				     (unsigned long long)e->h.size, e->h.nrcpt, e->h.client,
				     e->h.msgid[0] ? e->h.msgid : "-", tid, span, link[0] ? ", link=" : "",
				     link, link[0] ? " (unverified, not ours)" : "");
		} else {
			const uint64_t *d = e->h.delays_us;

			textesc_line(stdout, "%s attempt   %s: to=<%s>, peer=%s, relay=%s, tls=%s, "
				     "conn_use=%u, delays=%.3f/%.3f/%.3f/%.3f, dsn=%s, status=%s (%s)%s%s",
				     when, e->h.qid, e->h.rcpt, e->h.peer, e->h.relay, tls_names[e->h.tls],
				     e->h.conn_use, d[0] / 1e6, d[1] / 1e6, d[2] / 1e6, d[3] / 1e6,
				     e->h.dsn, hist_state_name(e->h.state), e->h.reply,
				     e->h.peer_qid[0] ? ", queued_as=" : "", e->h.peer_qid);
		}
	}
	for (size_t i = 0; i < f->n; i++)
		if (!f->ev[i].milter && f->ev[i].h.kind == HIST_ACCEPT)
			final_states(f, f->ev[i].h.qid, 0);
}

/* to_json - the path as one object: milter, messages (acceptance,
 * attempts, recipients' final states), in time order */
static json_t *to_json(const struct found *f, const char *what, int utc)
{
	json_t *o = json_object(), *traces = json_array(), *milter = json_array(), *msgs = json_array();
	char tid[33], span[17], parent[17];

	for (size_t i = 0; i < f->ntraces; i++) {
		hex(f->traces[i], 16, tid);
		json_array_append_new(traces, json_string(tid));
	}
	for (size_t i = 0; i < f->n; i++) {
		const struct event *e = &f->ev[i];
		json_t *x = json_object();

		if (e->milter) {
			hex(e->j.trace_id, 16, tid);
			hex(e->j.span_id, 8, span);
			hex(e->j.parent_id, 8, parent);
			set_time(x, "time", e->time_us, utc);
			json_object_set_new(x, "queue_id", json_text(e->j.mta_qid));
			json_object_set_new(x, "verdict", json_text(e->j.verdict));
			json_object_set_new(x, "client", json_text(e->j.client));
			json_object_set_new(x, "sender", json_text(e->j.sender));
			json_object_set_new(x, "nrcpt", json_integer(e->j.nrcpt));
			json_object_set_new(x, "trace_id", json_string(tid));
			json_object_set_new(x, "span_id", json_string(span));
			json_object_set_new(x, "parent_span_id",
					    json_string(strcmp(parent, "0000000000000000") ? parent : ""));
			json_array_append_new(milter, x);
		} else if (e->h.kind == HIST_ACCEPT) {
			json_t *atts = json_array();

			hex(e->h.trace_id, 16, tid);
			hex(e->h.span_id, 8, span);
			json_object_set_new(x, "queue_id", json_string(e->h.qid));
			set_time(x, "time", e->time_us, utc);
			json_object_set_new(x, "sender", json_text(e->h.sender));
			json_object_set_new(x, "size", json_integer((json_int_t)e->h.size));
			json_object_set_new(x, "nrcpt", json_integer(e->h.nrcpt));
			json_object_set_new(x, "client", json_text(e->h.client));
			json_object_set_new(x, "message_id", json_text(e->h.msgid));
			json_object_set_new(x, "trace_id", json_string(tid));
			json_object_set_new(x, "span_id", json_string(span));
			json_object_set_new(x, "links", links(&e->h));
			for (size_t k = 0; k < f->n; k++) {
				const struct hist_rec *h = &f->ev[k].h;
				json_t *a, *d;

				if (f->ev[k].milter || h->kind != HIST_ATTEMPT || strcmp(h->qid, e->h.qid))
					continue;
				a = json_object();
				d = json_object();
				set_time(a, "time", h->time_us, utc);
				json_object_set_new(a, "recipient", json_text(h->rcpt));
				json_object_set_new(a, "peer", json_text(h->peer));
				json_object_set_new(a, "relay", json_text(h->relay));
				json_object_set_new(a, "tls", json_string(tls_names[h->tls]));
				json_object_set_new(a, "tls_resumed", json_boolean(h->tls == HIST_TLS_RESUMED));
				json_object_set_new(a, "conn_use", json_integer(h->conn_use));
				json_object_set_new(a, "status", json_string(hist_state_name(h->state)));
				json_object_set_new(a, "code", json_integer(h->code));
				json_object_set_new(a, "dsn", json_text(h->dsn));
				json_object_set_new(a, "reply", json_text(h->reply));
				json_object_set_new(a, "peer_queue_id", json_text(h->peer_qid));
				json_object_set_new(d, "before", secs(h->delays_us[0]));
				json_object_set_new(d, "rate_wait", secs(h->delays_us[1]));
				json_object_set_new(d, "connection", secs(h->delays_us[2]));
				json_object_set_new(d, "transmission", secs(h->delays_us[3]));
				json_object_set_new(a, "delays", d);
				json_array_append_new(atts, a);
			}
			json_object_set_new(x, "attempts", atts);
			json_object_set_new(x, "recipients", final_states(f, e->h.qid, 1));
			json_array_append_new(msgs, x);
		} else {
			json_decref(x);
		}
	}
	json_object_set_new(o, "query", json_text(what));
	json_object_set_new(o, "trace_ids", traces);
	json_object_set_new(o, "milter", milter);
	json_object_set_new(o, "messages", msgs);
	return o;
}

/* ternq_trace - find and print a message's path; 0, or 1 if nothing is found */
int ternq_trace(struct store *st, const struct conf *conf, const char *what, int by_rcpt, int json,
		int utc)
{
	struct found f = {0};
	struct journal_db *jdb;
	unsigned char tid[16];
	char path[4096], err[512], key[1024], tidhex[33];
	uint64_t v;
	size_t ntraces;

	snprintf(path, sizeof(path), "%s/journal", conf->global.state_dir);
	jdb = journal_db_open(path, 1, err, sizeof(err));	/* none: no milter here */
	if (by_rcpt) {
		store_hist_find(st, 'r', what, take_hist, &f);
	} else if (unhex(what, tid) == 0) {
		add_trace(&f, tid);
	} else if (strlen(what) == QID_LEN && qid_parse(what, &v) == 0) {
		store_hist_find(st, 'q', what, take_hist, &f);
	}
	if (!by_rcpt && f.n == 0 && f.ntraces == 0) {
		/* a Message-ID, with or without its angle brackets */
		snprintf(key, sizeof(key), what[0] == '<' ? "%s" : "<%s>", what);
		store_hist_find(st, 'm', key, take_hist, &f);
		/* or the MTA's queue id, from the milter's journal */
		if (f.n == 0 && jdb)
			journal_db_find(jdb, 'q', what, strlen(what), take_journal, &f);
	}
	/* everything on the traces found: the milter's verdicts and every
	 * message ternd accepted with them */
	ntraces = f.ntraces;
	for (size_t i = 0; i < ntraces; i++) {
		hex(f.traces[i], 16, tidhex);
		store_hist_find(st, 't', tidhex, take_hist, &f);
		if (jdb)
			journal_db_find(jdb, 't', f.traces[i], 16, take_journal, &f);
	}
	journal_db_close(&jdb);
	if (f.n == 0) {
		fprintf(stderr, "ternq: %s: no trace of it in the history\n", what);
		free(f.traces);
		return EXIT_NOTFOUND;
	}
	qsort(f.ev, f.n, sizeof(*f.ev), by_time);
	if (json)
		print_json(to_json(&f, what, utc));
	else
		print_text(&f, utc);
	for (size_t i = 0; i < f.n; i++) {
		if (f.ev[i].milter)
			journal_rec_clear(&f.ev[i].j);
		else
			hist_rec_clear(&f.ev[i].h);
	}
	free(f.ev);
	free(f.traces);
	return 0;
}
