/*
 * agg - streaming aggregation of delivery history into a report (see
 * report.h). One pass, oldest record first; memory is fixed by the caps
 * and the window's hours, never by the number of records.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "report.h"
#include "xalloc.h"

/* delivery delay bucket bounds: 1 ms .. 5 days */
const uint64_t rpt_delay_bounds_ms[RPT_DELAY_NBOUNDS] = {
	1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
	120000, 300000, 600000, 1800000, 3600000, 7200000, 14400000,
	43200000, 86400000, 172800000, 432000000,
};

/* report_init - an empty report of the window [from, to) */
int report_init(struct report *r, uint64_t from_us, uint64_t to_us, const char **why)
{
	uint64_t h0 = from_us / 3600000000u, h1 = (to_us + 3599999999u) / 3600000000u;

	memset(r, 0, sizeof(*r));
	if (to_us <= from_us) {
		*why = "the window ends before it starts";
		return -1;
	}
	if (h1 - h0 > RPT_HOURS_MAX) {
		*why = "the window is longer than a year";
		return -1;
	}
	r->from_us = from_us;
	r->to_us = to_us;
	r->nodes = 1;
	r->hour0 = h0 * 3600;
	r->nhours = (size_t)(h1 - h0);
	r->hours = xcalloc(r->nhours ? r->nhours : 1, sizeof(*r->hours));
	r->peers = xcalloc(RPT_PEERS_MAX, sizeof(*r->peers));
	r->reasons = xcalloc(RPT_REASONS_MAX, sizeof(*r->reasons));
	r->domains = xcalloc(RPT_DOMAINS_MAX, sizeof(*r->domains));
	r->domains_exact = 1;
	return 0;
}

/* report_free - free a report's tables */
void report_free(struct report *r)
{
	free(r->hours);
	free(r->peers);
	free(r->reasons);
	free(r->domains);
	qshape_free(&r->queue);
	memset(r, 0, sizeof(*r));
}

/* rpt_delay_bucket - the bucket of a delay: the first bound it does not pass */
size_t rpt_delay_bucket(uint64_t ms)
{
	size_t b = 0;

	while (b < RPT_DELAY_NBOUNDS && ms > rpt_delay_bounds_ms[b])
		b++;
	return b;
}

/* rpt_percentile - the q-quantile (0 < q <= 1) in ms, interpolated within
 * its bucket as Prometheus' histogram_quantile does: the rank q * n is
 * not rounded, so a histogram scaled by k (k nodes of the same traffic)
 * gives the same value. 0 when empty; the last bound when the rank falls
 * in the open bucket. */
uint64_t rpt_percentile(const struct rpt_hist *h, double q)
{
	uint64_t n = 0, cum = 0;
	double rank;

	for (size_t b = 0; b < RPT_DELAY_NBUCKETS; b++)
		n += h->count[b];
	if (n == 0)
		return 0;
	rank = q * (double)n;
	for (size_t b = 0; b < RPT_DELAY_NBUCKETS; b++) {
		double lo, hi;

		if (h->count[b] == 0 || (double)(cum + h->count[b]) < rank) {
			cum += h->count[b];
			continue;
		}
		if (b == RPT_DELAY_NBOUNDS)
			break;
		lo = b ? (double)rpt_delay_bounds_ms[b - 1] : 0;
		hi = (double)rpt_delay_bounds_ms[b];
		return (uint64_t)(lo + (hi - lo) * (rank - (double)cum) / (double)h->count[b] + 0.5);
	}
	return rpt_delay_bounds_ms[RPT_DELAY_NBOUNDS - 1];
}

/* rpt_hist_add - add one histogram into another */
void rpt_hist_add(struct rpt_hist *into, const struct rpt_hist *h)
{
	for (size_t b = 0; b < RPT_DELAY_NBUCKETS; b++)
		into->count[b] += h->count[b];
}

/* rpt_counts_add - add counters into others */
void rpt_counts_add(struct rpt_counts *into, const struct rpt_counts *c)
{
	into->received += c->received;
	into->recipients += c->recipients;
	into->bytes += c->bytes;
	into->sent += c->sent;
	into->deferred += c->deferred;
	into->bounced += c->bounced;
	into->expired += c->expired;
}

/* name_copy - a name into a fixed field, cut if too long */
static void name_copy(char *dst, size_t cap, const char *s)
{
	size_t n = strlen(s);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* rpt_peer - a peer's row, made if new; past the cap, the "(other)" row */
struct rpt_peer *rpt_peer(struct report *r, const char *name)
{
	char key[RPT_NAME_MAX];

	name_copy(key, sizeof(key), name[0] ? name : "none");
	for (size_t i = 0; i < r->npeers; i++)
		if (strcmp(r->peers[i].name, key) == 0)
			return &r->peers[i];
	if (r->npeers >= RPT_PEERS_MAX - 1 && strcmp(key, RPT_OTHER) != 0)
		return rpt_peer(r, RPT_OTHER);
	name_copy(r->peers[r->npeers].name, RPT_NAME_MAX, key);
	return &r->peers[r->npeers++];
}

/* rpt_hour - the hour row of a time, or NULL outside the window */
struct rpt_hour *rpt_hour(struct report *r, uint64_t t_sec)
{
	if (t_sec < r->hour0 || (t_sec - r->hour0) / 3600 >= r->nhours)
		return NULL;
	return &r->hours[(t_sec - r->hour0) / 3600];
}

/* rpt_reason - the row of (status, dsn), made if new */
struct rpt_reason *rpt_reason(struct report *r, const char *status, const char *dsn,
			      const char *example)
{
	char d[16];
	struct rpt_reason *x;

	name_copy(d, sizeof(d), dsn[0] ? dsn : "none");
	for (size_t i = 0; i < r->nreasons; i++)
		if (strcmp(r->reasons[i].status, status) == 0 && strcmp(r->reasons[i].dsn, d) == 0)
			return &r->reasons[i];
	if (r->nreasons >= RPT_REASONS_MAX - 1 && strcmp(d, RPT_OTHER) != 0)
		return rpt_reason(r, status, RPT_OTHER, "");
	x = &r->reasons[r->nreasons++];
	name_copy(x->status, sizeof(x->status), status);
	name_copy(x->dsn, sizeof(x->dsn), d);
	name_copy(x->example, sizeof(x->example), example);
	return x;
}

/* rpt_domain_add - add a domain's counts (Space-Saving: when the table is
 * full, the smallest row gives way and the newcomer inherits its total as
 * a possible overestimate, recorded in error) */
void rpt_domain_add(struct report *r, const char *domain, const struct rpt_domain *d)
{
	char key[RPT_NAME_MAX];
	struct rpt_domain *x = NULL;
	uint64_t floor;
	size_t i;

	name_copy(key, sizeof(key), domain);
	for (i = 0; i < r->ndomains; i++)
		if (strcasecmp(r->domains[i].name, key) == 0) {
			x = &r->domains[i];
			break;
		}
	if (x == NULL && r->ndomains < RPT_DOMAINS_MAX) {
		x = &r->domains[r->ndomains++];
		name_copy(x->name, sizeof(x->name), key);
	} else if (x == NULL) {
		x = &r->domains[0];
		for (i = 1; i < r->ndomains; i++)
			if (r->domains[i].total < x->total)
				x = &r->domains[i];
		floor = x->total;
		memset(x, 0, sizeof(*x));
		name_copy(x->name, sizeof(x->name), key);
		x->total = x->error = floor;
		r->domains_exact = 0;
	}
	x->total += d->total;
	x->error += d->error;
	x->sent += d->sent;
	x->deferred += d->deferred;
	x->bounced += d->bounced;
	x->expired += d->expired;
}

/* rpt_domain_of - the domain of an address (the address if it has none) */
const char *rpt_domain_of(const char *addr)
{
	const char *at = strrchr(addr, '@');

	return at && at[1] ? at + 1 : addr;
}

/* attempt - one recipient's delivery attempt */
static void attempt(struct report *r, const struct hist_rec *h, struct rpt_hour *hr)
{
	struct rpt_peer *p = rpt_peer(r, h->peer);
	struct rpt_domain d = {.total = 1};
	const char *status = NULL;
	size_t off;

	switch (h->state) {
	case RCPT_SENT:
		off = offsetof(struct rpt_counts, sent);
		d.sent = 1;
		break;
	case RCPT_DEFERRED:
		off = offsetof(struct rpt_counts, deferred);
		d.deferred = 1;
		status = "deferred";
		break;
	case RCPT_BOUNCED:
		off = offsetof(struct rpt_counts, bounced);
		d.bounced = 1;
		status = "bounced";
		break;
	case HIST_EXPIRED:
		off = offsetof(struct rpt_counts, expired);
		d.expired = 1;
		status = "expired";
		break;
	default:
		return;		/* not an outcome that reports count */
	}
	(*(uint64_t *)((char *)&r->total + off))++;
	(*(uint64_t *)((char *)&p->c + off))++;
	if (hr)
		(*(uint64_t *)((char *)&hr->c + off))++;
	rpt_domain_add(r, rpt_domain_of(h->rcpt), &d);
	if (status)
		rpt_reason(r, status, h->dsn, h->reply)->count++;
	if (h->state == RCPT_SENT) {
		uint64_t us = h->delays_us[0] + h->delays_us[1] + h->delays_us[2] + h->delays_us[3];
		size_t b = rpt_delay_bucket(us / 1000);

		r->delay.count[b]++;
		p->delay.count[b]++;
		if (hr)
			hr->delay.count[b]++;
	}
	/* The recipients of one transaction share its time, queue id and peer:
	 * count the connection facts once per transaction. */
	if (strcmp(h->qid, r->last_qid) == 0 && h->time_us == r->last_time_us
	    && strcmp(p->name, r->last_peer) == 0)
		return;
	name_copy(r->last_qid, sizeof(r->last_qid), h->qid);
	r->last_time_us = h->time_us;
	name_copy(r->last_peer, sizeof(r->last_peer), p->name);
	if (h->conn_use == 0) {
		/* no connection: a failure to connect, greet or secure it, or a
		 * local reason (circuit breaker, expiry) */
		if (strcmp(h->relay, "none") == 0 && h->code != 0 && strncmp(h->reply, "circuit", 7) != 0
		    && h->state != HIST_EXPIRED) {
			p->conn_failures++;
			if (strstr(h->reply, "TLS") || strstr(h->reply, "certificate"))
				p->handshake_failures++;
		}
		return;
	}
	p->transactions++;
	if (h->conn_use > 1) {
		p->reused++;
		return;
	}
	p->connections++;
	if (h->tls == HIST_TLS_FULL)
		p->tls_full++;
	else if (h->tls == HIST_TLS_RESUMED)
		p->tls_resumed++;
}

/* report_add - one history record into the report (a store_hist_fn) */
int report_add(const struct hist_rec *h, void *arg)
{
	struct report *r = arg;
	struct rpt_hour *hr;

	if (h->time_us < r->from_us || h->time_us >= r->to_us)
		return 0;
	hr = rpt_hour(r, h->time_us / 1000000);
	if (h->kind == HIST_ACCEPT) {
		r->total.received++;
		r->total.recipients += h->nrcpt;
		r->total.bytes += h->size;
		if (hr) {
			hr->c.received++;
			hr->c.recipients += h->nrcpt;
			hr->c.bytes += h->size;
		}
	} else if (h->kind == HIST_ATTEMPT) {
		attempt(r, h, hr);
	}
	return 0;
}

/* by_peer_name - peers by name */
static int by_peer_name(const void *a, const void *b)
{
	return strcmp(((const struct rpt_peer *)a)->name, ((const struct rpt_peer *)b)->name);
}

/* by_domain_total - domains by total, largest first, then by name */
static int by_domain_total(const void *a, const void *b)
{
	const struct rpt_domain *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : strcmp(x->name, y->name);
}

/* by_reason_count - reasons by count, largest first, then status and code */
static int by_reason_count(const void *a, const void *b)
{
	const struct rpt_reason *x = a, *y = b;
	int c;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return (c = strcmp(x->status, y->status)) != 0 ? c : strcmp(x->dsn, y->dsn);
}

/* report_finish - sort the tables for output */
void report_finish(struct report *r)
{
	qsort(r->peers, r->npeers, sizeof(*r->peers), by_peer_name);
	qsort(r->domains, r->ndomains, sizeof(*r->domains), by_domain_total);
	qsort(r->reasons, r->nreasons, sizeof(*r->reasons), by_reason_count);
	qshape_sort(&r->queue);
}

/* rpt_traffic - did anything happen in the window */
int rpt_traffic(const struct report *r)
{
	const struct rpt_counts *c = &r->total;

	return c->received || c->sent || c->deferred || c->bounced || c->expired;
}
