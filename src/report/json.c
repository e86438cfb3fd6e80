/*
 * json - tern-report's JSON: the stable report format (members are
 * documented in tern-report(1) and only ever added), written by
 * report_json and read back by report_merge_json for --merge.
 *
 * The reader treats its input as hostile: a file from another node may be
 * truncated, foreign or crafted. Every member's type is checked, arrays
 * and strings are bounded, the delay buckets must be ours, and a bad
 * report is refused as a whole, never half merged.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "json_text.h"
#include "report.h"
#include "timefmt.h"

#define REPORT_JSON_VERSION 1
#define JSON_INPUT_MAX (64u << 20)

static const char *const count_names[] = {"received", "recipients", "bytes", "sent",
	"deferred", "bounced", "expired"};

/* counts_ptr - the counters of a struct rpt_counts, in count_names order */
static uint64_t *counts_ptr(struct rpt_counts *c, size_t i)
{
	uint64_t *p[] = {&c->received, &c->recipients, &c->bytes, &c->sent, &c->deferred,
		&c->bounced, &c->expired};

	return p[i];
}

/* jint - a JSON integer of an unsigned counter */
static json_t *jint(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* jiso - a time of the report in ISO 8601, in its zone, beside the epoch
 * number it names */
static json_t *jiso(const struct report *r, uint64_t us)
{
	char buf[TIMEFMT_LEN];

	return json_string(timefmt_iso(us, r->utc, buf, sizeof(buf)));
}

#define COUNT_ATTEMPTS 3		/* count_names from here: attempt outcomes */

/* put_counts - the counters from count_names[first] on as members of o */
static void put_counts(json_t *o, const struct rpt_counts *c, size_t first)
{
	struct rpt_counts copy = *c;

	for (size_t i = first; i < sizeof(count_names) / sizeof(count_names[0]); i++)
		json_object_set_new(o, count_names[i], jint(*counts_ptr(&copy, i)));
}

/* put_delay - the delay histogram and its percentiles as members of o */
static void put_delay(json_t *o, const struct rpt_hist *h)
{
	json_t *a = json_array();

	for (size_t b = 0; b < RPT_DELAY_NBUCKETS; b++)
		json_array_append_new(a, jint(h->count[b]));
	json_object_set_new(o, "delay_p50_ms", jint(rpt_percentile(h, 0.50)));
	json_object_set_new(o, "delay_p90_ms", jint(rpt_percentile(h, 0.90)));
	json_object_set_new(o, "delay_p99_ms", jint(rpt_percentile(h, 0.99)));
	json_object_set_new(o, "delay_histogram", a);
}

/* ratio - a / b, or 0 */
static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* shape_row_json - a queue shape row */
static json_t *shape_row_json(const struct qshape_row *row, const char *key)
{
	json_t *o = json_object(), *c = json_array();

	for (size_t b = 0; b < QSHAPE_NBUCKETS; b++)
		json_array_append_new(c, jint(row->count[b]));
	if (key)
		json_object_set_new(o, "peer", json_text(key));
	json_object_set_new(o, "total", jint(row->total));
	json_object_set_new(o, "counts", c);
	return o;
}

/* u64_array - n counters as a JSON array */
static json_t *u64_array(const uint64_t *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, jint(v[i]));
	return a;
}

/* put_extra - hosts, senders, sizes, the milter's verdicts and the series */
static void put_extra(json_t *o, const struct report *r)
{
	json_t *a = json_array(), *x;

	for (size_t i = 0; i < r->nhosts; i++)
		json_array_append_new(a, json_text(r->hosts[i]));
	json_object_set_new(o, "hosts", a);
	json_object_set_new(o, "hosts_more", jint(r->hosts_more));
	a = json_array();
	for (size_t i = 0; i < r->nsenders; i++) {
		const struct rpt_sender *x1 = &r->senders[i];

		x = json_object();
		json_object_set_new(x, "sender", json_text(x1->name));
		json_object_set_new(x, "messages", jint(x1->total));
		json_object_set_new(x, "recipients", jint(x1->recipients));
		json_object_set_new(x, "bytes", jint(x1->bytes));
		json_object_set_new(x, "error", jint(x1->error));
		json_array_append_new(a, x);
	}
	json_object_set_new(o, "senders", a);
	json_object_set_new(o, "senders_exact", json_boolean(r->senders_exact));
	x = json_object();
	json_object_set_new(x, "bounds_bytes", u64_array(rpt_size_bounds, RPT_SIZE_NBOUNDS));
	json_object_set_new(x, "messages", u64_array(r->sizes.count, RPT_SIZE_NBUCKETS));
	json_object_set_new(x, "bytes", u64_array(r->sizes.bytes, RPT_SIZE_NBUCKETS));
	json_object_set_new(x, "max_bytes", jint(r->sizes.max));
	json_object_set_new(o, "sizes", x);
	if (r->have_milter) {
		const struct rpt_milter *m = &r->milter;

		x = json_object();
		json_object_set_new(x, "messages", jint(m->messages));
		json_object_set_new(x, "accepted", jint(m->accepted));
		json_object_set_new(x, "tagged", jint(m->tagged));
		json_object_set_new(x, "rejected", jint(m->rejected));
		json_object_set_new(x, "tempfailed", jint(m->tempfailed));
		json_object_set_new(x, "other", jint(m->other));
		a = json_array();
		for (size_t i = 0; i < r->nchecks; i++) {
			json_t *c = json_object();

			json_object_set_new(c, "verdict", json_text(r->checks[i].verdict));
			json_object_set_new(c, "check", json_text(r->checks[i].check));
			json_object_set_new(c, "count", jint(r->checks[i].count));
			json_array_append_new(a, c);
		}
		json_object_set_new(x, "checks", a);
		json_object_set_new(o, "milter", x);
	}
	x = json_object();
	json_object_set_new(x, "step", jint(r->slot_step));
	a = json_array();
	for (size_t i = 0; i < r->nslots; i++) {
		const struct rpt_slot *sl = &r->slots[i];
		json_t *p;

		if (!(sl->c.received || sl->c.sent || sl->c.deferred || sl->c.bounced || sl->c.expired))
			continue;
		p = json_object();
		json_object_set_new(p, "time", jint(r->slot0 + r->slot_step * i));
		json_object_set_new(p, "time_iso", jiso(r, (r->slot0 + r->slot_step * i) * 1000000));
		put_counts(p, &sl->c, 0);
		json_object_set_new(p, "delay_histogram", u64_array(sl->delay.count, RPT_DELAY_NBUCKETS));
		json_array_append_new(a, p);
	}
	json_object_set_new(x, "points", a);
	json_object_set_new(o, "series", x);
}

/* report_json - the report as one JSON object, pretty-printed */
int report_json(const struct report *r, FILE *out)
{
	json_t *o = json_object(), *a, *x;
	char *text;
	int rc;

	json_object_set_new(o, "version", json_integer(REPORT_JSON_VERSION));
	json_object_set_new(o, "generated", jint(r->generated_us / 1000000));
	json_object_set_new(o, "from", jint(r->from_us / 1000000));
	json_object_set_new(o, "to", jint(r->to_us / 1000000));
	json_object_set_new(o, "generated_iso", jiso(r, r->generated_us));
	json_object_set_new(o, "from_iso", jiso(r, r->from_us));
	json_object_set_new(o, "to_iso", jiso(r, r->to_us));
	json_object_set_new(o, "nodes", jint(r->nodes));
	x = json_object();
	put_counts(x, &r->total, 0);
	put_delay(x, &r->delay);
	json_object_set_new(o, "totals", x);
	a = json_array();
	for (size_t b = 0; b < RPT_DELAY_NBOUNDS; b++)
		json_array_append_new(a, jint(rpt_delay_bounds_ms[b]));
	json_object_set_new(o, "delay_bounds_ms", a);
	a = json_array();
	for (size_t i = 0; i < r->nhours; i++) {
		x = json_object();
		json_object_set_new(x, "hour", jint(r->hour0 + 3600 * i));
		json_object_set_new(x, "hour_iso", jiso(r, (r->hour0 + 3600 * i) * 1000000));
		put_counts(x, &r->hours[i].c, 0);
		put_delay(x, &r->hours[i].delay);
		json_array_append_new(a, x);
	}
	json_object_set_new(o, "hourly", a);
	a = json_array();
	for (size_t i = 0; i < r->npeers; i++) {
		const struct rpt_peer *p = &r->peers[i];

		x = json_object();
		json_object_set_new(x, "peer", json_text(p->name));
		put_counts(x, &p->c, COUNT_ATTEMPTS);
		json_object_set_new(x, "transactions", jint(p->transactions));
		json_object_set_new(x, "reused", jint(p->reused));
		json_object_set_new(x, "connections", jint(p->connections));
		json_object_set_new(x, "tls_full", jint(p->tls_full));
		json_object_set_new(x, "tls_resumed", jint(p->tls_resumed));
		json_object_set_new(x, "connection_failures", jint(p->conn_failures));
		json_object_set_new(x, "handshake_failures", jint(p->handshake_failures));
		json_object_set_new(x, "reuse_ratio", json_real(ratio(p->reused, p->transactions)));
		json_object_set_new(x, "tls_resumption_ratio",
				    json_real(ratio(p->tls_resumed, p->tls_full + p->tls_resumed)));
		put_delay(x, &p->delay);
		json_array_append_new(a, x);
	}
	json_object_set_new(o, "peers", a);
	a = json_array();
	for (size_t i = 0; i < r->ndomains; i++) {
		const struct rpt_domain *d = &r->domains[i];

		x = json_object();
		json_object_set_new(x, "domain", json_text(d->name));
		json_object_set_new(x, "total", jint(d->total));
		json_object_set_new(x, "sent", jint(d->sent));
		json_object_set_new(x, "deferred", jint(d->deferred));
		json_object_set_new(x, "bounced", jint(d->bounced));
		json_object_set_new(x, "expired", jint(d->expired));
		json_object_set_new(x, "error", jint(d->error));
		json_array_append_new(a, x);
	}
	json_object_set_new(o, "domains", a);
	json_object_set_new(o, "domains_exact", json_boolean(r->domains_exact));
	a = json_array();
	for (size_t i = 0; i < r->nreasons; i++) {
		x = json_object();
		json_object_set_new(x, "status", json_text(r->reasons[i].status));
		json_object_set_new(x, "dsn", json_text(r->reasons[i].dsn));
		json_object_set_new(x, "count", jint(r->reasons[i].count));
		json_object_set_new(x, "example", json_text(r->reasons[i].example));
		json_array_append_new(a, x);
	}
	json_object_set_new(o, "reasons", a);
	put_extra(o, r);
	if (r->have_queue) {
		json_t *q = shape_row_json(&r->queue.all, NULL);

		a = json_array();
		for (size_t b = 0; b < QSHAPE_NBOUNDS; b++)
			json_array_append_new(a, jint(qshape_bounds[b]));
		json_object_set_new(q, "bucket_minutes", a);
		a = json_array();
		for (size_t i = 0; i < r->queue.n; i++)
			json_array_append_new(a, shape_row_json(&r->queue.rows[i], r->queue.rows[i].key));
		json_object_set_new(q, "peers", a);
		json_object_set_new(o, "queue", q);
	}
	if ((text = json_dumps_short(o, JSON_INDENT(1) | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER)) != NULL)
		fputs(text, out);
	rc = text != NULL ? 0 : -1;
	free(text);
	fputc('\n', out);
	json_decref(o);
	return rc;
}

/* --- reading ------------------------------------------------------------ */

/* get_u64 - an optional non-negative integer member; -1 if of the wrong type */
static int get_u64(const json_t *o, const char *name, uint64_t *v)
{
	const json_t *j = json_object_get(o, name);

	*v = 0;
	if (j == NULL)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return -1;
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

/* get_str - a required string member of at most max octets, or NULL */
static const char *get_str(const json_t *o, const char *name, size_t max)
{
	const json_t *j = json_object_get(o, name);

	if (!json_is_string(j) || json_string_length(j) > max
	    || strlen(json_string_value(j)) != json_string_length(j))
		return NULL;
	return json_string_value(j);
}

/* get_counts - the counters of a row */
static int get_counts(const json_t *o, struct rpt_counts *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < sizeof(count_names) / sizeof(count_names[0]); i++)
		if (get_u64(o, count_names[i], counts_ptr(c, i)) < 0)
			return -1;
	return 0;
}

/* get_hist - a delay histogram of exactly our buckets (absent: empty) */
static int get_hist(const json_t *o, struct rpt_hist *h)
{
	const json_t *a = json_object_get(o, "delay_histogram");

	memset(h, 0, sizeof(*h));
	if (a == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) != RPT_DELAY_NBUCKETS)
		return -1;
	for (size_t b = 0; b < RPT_DELAY_NBUCKETS; b++) {
		const json_t *j = json_array_get(a, b);

		if (!json_is_integer(j) || json_integer_value(j) < 0)
			return -1;
		h->count[b] = (uint64_t)json_integer_value(j);
	}
	return 0;
}

/* get_array - an optional array member of at most max elements */
static int get_array(const json_t *o, const char *name, size_t max, const json_t **a)
{
	*a = json_object_get(o, name);
	if (*a == NULL)
		return 0;
	return json_is_array(*a) && json_array_size(*a) <= max ? 0 : -1;
}

/* load - parse a report's outer object and check its version and buckets */
static json_t *load(const char *buf, size_t len, char *why, size_t whylen)
{
	json_error_t e;
	json_t *o, *b;
	uint64_t v;

	if (len > JSON_INPUT_MAX) {
		snprintf(why, whylen, "larger than %u octets", JSON_INPUT_MAX);
		return NULL;
	}
	if ((o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e)) == NULL) {
		snprintf(why, whylen, "line %d: %s", e.line, e.text);
		return NULL;
	}
	if (!json_is_object(o) || get_u64(o, "version", &v) < 0 || v != REPORT_JSON_VERSION) {
		snprintf(why, whylen, "not a tern-report JSON report of version %d", REPORT_JSON_VERSION);
		json_decref(o);
		return NULL;
	}
	b = json_object_get(o, "delay_bounds_ms");
	if (!json_is_array(b) || json_array_size(b) != RPT_DELAY_NBOUNDS) {
		snprintf(why, whylen, "delay_bounds_ms: not this version's buckets");
		json_decref(o);
		return NULL;
	}
	for (size_t i = 0; i < RPT_DELAY_NBOUNDS; i++) {
		const json_t *j = json_array_get(b, i);

		if (!json_is_integer(j) || (uint64_t)json_integer_value(j) != rpt_delay_bounds_ms[i]) {
			snprintf(why, whylen, "delay_bounds_ms: not this version's buckets");
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* report_merge_window - the window of a JSON report, in microseconds */
int report_merge_window(const char *buf, size_t len, uint64_t *from_us, uint64_t *to_us)
{
	char why[128];
	json_t *o = load(buf, len, why, sizeof(why));
	uint64_t from, to;
	int rc = -1;

	if (o == NULL)
		return -1;
	if (get_u64(o, "from", &from) == 0 && get_u64(o, "to", &to) == 0 && from < to
	    && to <= UINT64_MAX / 1000000) {
		*from_us = from * 1000000;
		*to_us = to * 1000000;
		rc = 0;
	}
	json_decref(o);
	return rc;
}

/* staging - what one report adds, checked in full before it is added */
struct staging {
	struct rpt_counts total;
	struct rpt_hist delay;
	uint64_t nodes;
};

/* merge_peers - peers of a report (checked already) into r */
static int merge_peers(struct report *r, const json_t *a, int apply)
{
	for (size_t i = 0; a && i < json_array_size(a); i++) {
		const json_t *x = json_array_get(a, i);
		const char *name = json_is_object(x) ? get_str(x, "peer", RPT_NAME_MAX) : NULL;
		struct rpt_peer in;
		struct rpt_peer *p;

		memset(&in, 0, sizeof(in));
		if (name == NULL || get_counts(x, &in.c) < 0 || get_hist(x, &in.delay) < 0
		    || get_u64(x, "transactions", &in.transactions) < 0
		    || get_u64(x, "reused", &in.reused) < 0
		    || get_u64(x, "connections", &in.connections) < 0
		    || get_u64(x, "tls_full", &in.tls_full) < 0
		    || get_u64(x, "tls_resumed", &in.tls_resumed) < 0
		    || get_u64(x, "connection_failures", &in.conn_failures) < 0
		    || get_u64(x, "handshake_failures", &in.handshake_failures) < 0)
			return -1;
		if (!apply)
			continue;
		p = rpt_peer(r, name);
		rpt_counts_add(&p->c, &in.c);
		rpt_hist_add(&p->delay, &in.delay);
		p->transactions += in.transactions;
		p->reused += in.reused;
		p->connections += in.connections;
		p->tls_full += in.tls_full;
		p->tls_resumed += in.tls_resumed;
		p->conn_failures += in.conn_failures;
		p->handshake_failures += in.handshake_failures;
	}
	return 0;
}

/* get_u64_array - an array member of exactly n non-negative integers */
static int get_u64_array(const json_t *o, const char *name, uint64_t *v, size_t n)
{
	const json_t *a = json_object_get(o, name);

	if (!json_is_array(a) || json_array_size(a) != n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const json_t *j = json_array_get(a, i);

		if (!json_is_integer(j) || json_integer_value(j) < 0)
			return -1;
		v[i] = (uint64_t)json_integer_value(j);
	}
	return 0;
}

/* host_ok - a host name as a node writes it: letters, digits, '.', '-', '_' */
static int host_ok(const char *s)
{
	if (s == NULL || s[0] == '\0')
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')
		      || *s == '.' || *s == '-' || *s == '_'))
			return 0;
	return 1;
}

/* merge_hosts - the nodes' names; a report without them counts its nodes
 * as unnamed */
static int merge_hosts(struct report *r, const json_t *o, uint64_t nodes, int apply)
{
	const json_t *a;
	uint64_t more;

	if (get_array(o, "hosts", RPT_HOSTS_MAX, &a) < 0 || get_u64(o, "hosts_more", &more) < 0
	    || more > 1000000)
		return -1;
	for (size_t i = 0; a && i < json_array_size(a); i++) {
		const json_t *j = json_array_get(a, i);
		const char *h = json_is_string(j) && json_string_length(j) < RPT_HOST_MAX
			? json_string_value(j) : NULL;

		if (!host_ok(h))
			return -1;
		if (apply)
			rpt_host_add(r, h);
	}
	if (apply)
		r->hosts_more += a ? more : (nodes ? nodes : 1);
	return 0;
}

/* merge_senders_sizes - the top senders and the size buckets */
static int merge_senders_sizes(struct report *r, const json_t *o, int apply)
{
	const json_t *a, *z;
	struct rpt_sizes sz;
	uint64_t bounds[RPT_SIZE_NBOUNDS];

	if (get_array(o, "senders", RPT_SENDERS_MAX, &a) < 0)
		return -1;
	for (size_t i = 0; a && i < json_array_size(a); i++) {
		const json_t *x = json_array_get(a, i);
		const char *name = json_is_object(x) ? get_str(x, "sender", RPT_NAME_MAX) : NULL;
		struct rpt_sender in;

		memset(&in, 0, sizeof(in));
		if (name == NULL || get_u64(x, "messages", &in.total) < 0
		    || get_u64(x, "recipients", &in.recipients) < 0 || get_u64(x, "bytes", &in.bytes) < 0
		    || get_u64(x, "error", &in.error) < 0)
			return -1;
		if (apply)
			rpt_sender_add(r, name, &in);
	}
	if (apply && json_is_false(json_object_get(o, "senders_exact")))
		r->senders_exact = 0;
	if ((z = json_object_get(o, "sizes")) == NULL)
		return 0;
	memset(&sz, 0, sizeof(sz));
	if (!json_is_object(z) || get_u64_array(z, "bounds_bytes", bounds, RPT_SIZE_NBOUNDS) < 0
	    || memcmp(bounds, rpt_size_bounds, sizeof(bounds)) != 0
	    || get_u64_array(z, "messages", sz.count, RPT_SIZE_NBUCKETS) < 0
	    || get_u64_array(z, "bytes", sz.bytes, RPT_SIZE_NBUCKETS) < 0
	    || get_u64(z, "max_bytes", &sz.max) < 0)
		return -1;
	if (apply)
		rpt_sizes_add(&r->sizes, &sz);
	return 0;
}

/* merge_milter - the milter's verdicts, when the report has them */
static int merge_milter(struct report *r, const json_t *o, int apply)
{
	const json_t *m = json_object_get(o, "milter"), *a;
	struct rpt_milter in;

	if (m == NULL)
		return 0;
	if (!json_is_object(m) || get_u64(m, "messages", &in.messages) < 0
	    || get_u64(m, "accepted", &in.accepted) < 0 || get_u64(m, "tagged", &in.tagged) < 0
	    || get_u64(m, "rejected", &in.rejected) < 0 || get_u64(m, "tempfailed", &in.tempfailed) < 0
	    || get_u64(m, "other", &in.other) < 0 || get_array(m, "checks", RPT_CHECKS_MAX, &a) < 0)
		return -1;
	for (size_t i = 0; a && i < json_array_size(a); i++) {
		const json_t *x = json_array_get(a, i);
		const char *v = json_is_object(x) ? get_str(x, "verdict", RPT_VERDICT_MAX - 1) : NULL;
		const char *c = v ? get_str(x, "check", RPT_VERDICT_MAX - 1) : NULL;
		uint64_t n;

		if (c == NULL || get_u64(x, "count", &n) < 0)
			return -1;
		if (apply)
			rpt_check(r, v, c)->count += n;
	}
	if (apply) {
		rpt_milter_add(&r->milter, &in);
		r->have_milter = 1;
	}
	return 0;
}

/* merge_series - the time series' points, each into the slot of its time */
static int merge_series(struct report *r, const json_t *o, int apply)
{
	const json_t *s = json_object_get(o, "series"), *a;
	uint64_t step;
	size_t k;

	if (s == NULL)
		return 0;
	if (!json_is_object(s) || get_u64(s, "step", &step) < 0
	    || get_array(s, "points", RPT_SLOTS_MAX, &a) < 0)
		return -1;
	for (k = 0; rpt_slot_steps[k] && rpt_slot_steps[k] != step; k++)
		;
	if (rpt_slot_steps[k] == 0)
		return -1;
	for (size_t i = 0; a && i < json_array_size(a); i++) {
		const json_t *x = json_array_get(a, i);
		struct rpt_counts c;
		struct rpt_hist h;
		struct rpt_slot *sl;
		uint64_t t;

		if (!json_is_object(x) || get_u64(x, "time", &t) < 0 || get_counts(x, &c) < 0
		    || get_hist(x, &h) < 0)
			return -1;
		if (apply && (sl = rpt_slot(r, t)) != NULL) {
			rpt_counts_add(&sl->c, &c);
			rpt_hist_add(&sl->delay, &h);
		}
	}
	return 0;
}

/* merge_rest - hours, domains, reasons and queue shape; with apply 0 only
 * checks, so that a bad report changes nothing */
static int merge_rest(struct report *r, const json_t *o, int apply)
{
	const json_t *a;

	if (get_array(o, "hourly", RPT_HOURS_MAX, &a) < 0)
		return -1;
	for (size_t i = 0; a && i < json_array_size(a); i++) {
		const json_t *x = json_array_get(a, i);
		struct rpt_counts c;
		struct rpt_hist h;
		struct rpt_hour *hr;
		uint64_t hour;

		if (!json_is_object(x) || get_u64(x, "hour", &hour) < 0 || get_counts(x, &c) < 0
		    || get_hist(x, &h) < 0)
			return -1;
		if (apply && (hr = rpt_hour(r, hour)) != NULL) {
			rpt_counts_add(&hr->c, &c);
			rpt_hist_add(&hr->delay, &h);
		}
	}
	if (get_array(o, "peers", RPT_PEERS_MAX, &a) < 0 || merge_peers(r, a, apply) < 0)
		return -1;
	if (get_array(o, "domains", RPT_DOMAINS_MAX, &a) < 0)
		return -1;
	for (size_t i = 0; a && i < json_array_size(a); i++) {
		const json_t *x = json_array_get(a, i);
		const char *name = json_is_object(x) ? get_str(x, "domain", RPT_NAME_MAX) : NULL;
		struct rpt_domain d;

		memset(&d, 0, sizeof(d));
		if (name == NULL || get_u64(x, "total", &d.total) < 0 || get_u64(x, "sent", &d.sent) < 0
		    || get_u64(x, "deferred", &d.deferred) < 0 || get_u64(x, "bounced", &d.bounced) < 0
		    || get_u64(x, "expired", &d.expired) < 0 || get_u64(x, "error", &d.error) < 0)
			return -1;
		if (apply)
			rpt_domain_add(r, name, &d);
	}
	if (apply && json_is_false(json_object_get(o, "domains_exact")))
		r->domains_exact = 0;
	if (get_array(o, "reasons", RPT_REASONS_MAX, &a) < 0)
		return -1;
	for (size_t i = 0; a && i < json_array_size(a); i++) {
		const json_t *x = json_array_get(a, i);
		const char *status = json_is_object(x) ? get_str(x, "status", 9) : NULL;
		const char *dsn = status ? get_str(x, "dsn", 15) : NULL;
		const char *ex = dsn ? get_str(x, "example", 4 * RPT_EXAMPLE_MAX) : NULL;
		uint64_t n;

		if (ex == NULL || get_u64(x, "count", &n) < 0)
			return -1;
		if (apply)
			rpt_reason(r, status, dsn, ex)->count += n;
	}
	if ((a = json_object_get(o, "queue")) != NULL) {
		const json_t *rows;

		if (!json_is_object(a) || get_array(a, "peers", RPT_PEERS_MAX, &rows) < 0)
			return -1;
		for (size_t i = 0; rows && i < json_array_size(rows); i++) {
			const json_t *x = json_array_get(rows, i), *c;
			const char *name = json_is_object(x) ? get_str(x, "peer", RPT_NAME_MAX) : NULL;

			c = name ? json_object_get(x, "counts") : NULL;
			if (!json_is_array(c) || json_array_size(c) != QSHAPE_NBUCKETS)
				return -1;
			for (size_t b = 0; b < QSHAPE_NBUCKETS; b++) {
				const json_t *j = json_array_get(c, b);
				json_int_t v = json_is_integer(j) ? json_integer_value(j) : -1;

				if (v < 0 || v > 100000000)
					return -1;	/* a queue of more is not real */
				if (apply && v)
					qshape_add_bucket(&r->queue, name, b, (unsigned long)v);
			}
		}
		if (apply)
			r->have_queue = 1;
	}
	if (merge_senders_sizes(r, o, apply) < 0 || merge_milter(r, o, apply) < 0
	    || merge_series(r, o, apply) < 0)
		return -1;
	return 0;
}

/* report_merge_json - add one JSON report into r */
int report_merge_json(struct report *r, const char *buf, size_t len, char *why, size_t whylen)
{
	json_t *o = load(buf, len, why, whylen);
	struct staging s;
	const json_t *t;

	if (o == NULL)
		return -1;
	memset(&s, 0, sizeof(s));
	t = json_object_get(o, "totals");
	if (!json_is_object(t) || get_counts(t, &s.total) < 0 || get_hist(t, &s.delay) < 0
	    || get_u64(o, "nodes", &s.nodes) < 0 || s.nodes > 1000000 || merge_rest(r, o, 0) < 0
	    || merge_hosts(r, o, s.nodes, 0) < 0) {
		snprintf(why, whylen, "a member is missing or of the wrong type");
		json_decref(o);
		return -1;
	}
	rpt_counts_add(&r->total, &s.total);
	rpt_hist_add(&r->delay, &s.delay);
	r->nodes += (unsigned)(s.nodes ? s.nodes : 1);
	merge_rest(r, o, 1);
	merge_hosts(r, o, s.nodes, 1);
	json_decref(o);
	return 0;
}
