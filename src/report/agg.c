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
#include "timefmt.h"
#include "xalloc.h"

/* delivery delay bucket bounds: 1 ms .. 5 days */
const uint64_t rpt_delay_bounds_ms[RPT_DELAY_NBOUNDS] = {
	1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
	120000, 300000, 600000, 1800000, 3600000, 7200000, 14400000,
	43200000, 86400000, 172800000, 432000000,
};

/* message size bucket bounds: 1 KiB .. 64 MiB */
const uint64_t rpt_size_bounds[RPT_SIZE_NBOUNDS] = {
	1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 10485760, 26214400, 67108864,
};

/* the series' steps, seconds: each divides the next, so that a merge of
 * finer series into a coarser one puts every slot into one slot */
const uint64_t rpt_slot_steps[] = {60, 300, 900, 1800, 3600, 86400, 0};

#define SLOTS_WANTED (RPT_SLOTS_MAX / 2)	/* at most this many, but for a year's days */

/* rpt_slot_step - the series' step for a window: the finest that keeps
 * the chart at most SLOTS_WANTED points (a minute for an hour, a quarter
 * of an hour for a day, an hour for a week, a day beyond) */
uint64_t rpt_slot_step(uint64_t from_sec, uint64_t to_sec)
{
	size_t i;

	for (i = 0; rpt_slot_steps[i + 1]; i++) {
		uint64_t s = rpt_slot_steps[i];

		if ((to_sec + s - 1) / s - from_sec / s <= SLOTS_WANTED)
			break;
	}
	return rpt_slot_steps[i];
}

/* zone_floor - the start of the step (of the zone: local or UTC) that a
 * time is in; steps of an hour or less, or a day (by the offset at t) */
static uint64_t zone_floor(uint64_t t, uint64_t step, int utc)
{
	long long local = (long long)t + timefmt_offset(t, utc);
	uint64_t into = (uint64_t)(((local % (long long)step) + (long long)step) % (long long)step);

	return t >= into ? t - into : 0;
}

/* report_init - an empty report of the window [from, to), its hours UTC's */
int report_init(struct report *r, uint64_t from_us, uint64_t to_us, const char **why)
{
	return report_init_zone(r, from_us, to_us, 1, why);
}

/* report_init_zone - an empty report of the window [from, to), its hours
 * and slots the local zone's (utc: UTC's) */
int report_init_zone(struct report *r, uint64_t from_us, uint64_t to_us, int utc, const char **why)
{
	uint64_t from = from_us / 1000000, to = (to_us + 999999) / 1000000, h0;

	memset(r, 0, sizeof(*r));
	if (to_us <= from_us) {
		*why = "the window ends before it starts";
		return -1;
	}
	h0 = zone_floor(from, 3600, utc);
	if ((to - h0 + 3599) / 3600 > RPT_HOURS_MAX) {
		*why = "the window is longer than a year";
		return -1;
	}
	r->from_us = from_us;
	r->to_us = to_us;
	r->utc = utc;
	r->nodes = 1;
	r->hour0 = h0;
	r->nhours = (size_t)((to - h0 + 3599) / 3600);
	r->hours = xcalloc(r->nhours ? r->nhours : 1, sizeof(*r->hours));
	r->peers = xcalloc(RPT_PEERS_MAX, sizeof(*r->peers));
	r->reasons = xcalloc(RPT_REASONS_MAX, sizeof(*r->reasons));
	r->domains = xcalloc(RPT_DOMAINS_MAX, sizeof(*r->domains));
	r->domains_exact = 1;
	r->senders = xcalloc(RPT_SENDERS_MAX, sizeof(*r->senders));
	r->senders_exact = 1;
	r->checks = xcalloc(RPT_CHECKS_MAX, sizeof(*r->checks));
	r->slot_step = rpt_slot_step(from, to);
	r->slot0 = zone_floor(from, r->slot_step, utc);
	r->nslots = (size_t)((to - r->slot0 + r->slot_step - 1) / r->slot_step);
	if (r->nslots > RPT_SLOTS_MAX)
		r->nslots = RPT_SLOTS_MAX;	/* cannot happen within RPT_HOURS_MAX */
	r->slots = xcalloc(r->nslots ? r->nslots : 1, sizeof(*r->slots));
	return 0;
}

/* report_free - free a report's tables */
void report_free(struct report *r)
{
	free(r->hours);
	free(r->peers);
	free(r->reasons);
	free(r->domains);
	free(r->senders);
	free(r->checks);
	free(r->slots);
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

/* rpt_slot - the series' slot of a time, or NULL outside it */
struct rpt_slot *rpt_slot(struct report *r, uint64_t t_sec)
{
	if (t_sec < r->slot0 || (t_sec - r->slot0) / r->slot_step >= r->nslots)
		return NULL;
	return &r->slots[(t_sec - r->slot0) / r->slot_step];
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

/* The Space-Saving rows' common beginning (report.h) */
#define SS_TOTAL offsetof(struct rpt_domain, total)
#define SS_ERROR offsetof(struct rpt_domain, error)
_Static_assert(offsetof(struct rpt_domain, name) == 0 && offsetof(struct rpt_sender, name) == 0
	       && SS_TOTAL == offsetof(struct rpt_sender, total)
	       && SS_ERROR == offsetof(struct rpt_sender, error),
	       "Space-Saving rows begin with name, total, error");
#define SS_U64(row, off) (*(uint64_t *)((char *)(row) + (off)))
#define SS_GET(row, off) (*(const uint64_t *)((const char *)(row) + (off)))

/* ss_row - the row of key in a Space-Saving table of n (at most cap) rows
 * of size octets, made if new: when the table is full, the smallest row
 * gives way and the newcomer inherits its total as a possible
 * overestimate, recorded in error (and *exact becomes 0) */
static void *ss_row(void *rows, size_t size, size_t *n, size_t cap, const char *key,
		    int (*cmp)(const char *, const char *), int *exact)
{
	char *base = rows, *x = NULL;
	uint64_t floor;

	for (size_t i = 0; i < *n; i++)
		if (cmp(base + i * size, key) == 0)
			return base + i * size;
	if (*n < cap) {
		x = base + (*n)++ * size;
		memset(x, 0, size);
		name_copy(x, RPT_NAME_MAX, key);
		return x;
	}
	x = base;
	for (size_t i = 1; i < *n; i++)
		if (SS_U64(base + i * size, SS_TOTAL) < SS_U64(x, SS_TOTAL))
			x = base + i * size;
	floor = SS_U64(x, SS_TOTAL);
	memset(x, 0, size);
	name_copy(x, RPT_NAME_MAX, key);
	SS_U64(x, SS_TOTAL) = SS_U64(x, SS_ERROR) = floor;
	*exact = 0;
	return x;
}

/* rpt_domain_add - add a domain's counts (names compared without case) */
void rpt_domain_add(struct report *r, const char *domain, const struct rpt_domain *d)
{
	char key[RPT_NAME_MAX];
	struct rpt_domain *x;

	name_copy(key, sizeof(key), domain);
	x = ss_row(r->domains, sizeof(*x), &r->ndomains, RPT_DOMAINS_MAX, key, strcasecmp,
		   &r->domains_exact);
	x->total += d->total;
	x->error += d->error;
	x->sent += d->sent;
	x->deferred += d->deferred;
	x->bounced += d->bounced;
	x->expired += d->expired;
}

/* rpt_sender_add - add an envelope sender's counts (names compared
 * exactly: a local part has case) */
void rpt_sender_add(struct report *r, const char *sender, const struct rpt_sender *s)
{
	char key[RPT_NAME_MAX];
	struct rpt_sender *x;

	name_copy(key, sizeof(key), sender[0] ? sender : RPT_NULL_SENDER);
	x = ss_row(r->senders, sizeof(*x), &r->nsenders, RPT_SENDERS_MAX, key, strcmp,
		   &r->senders_exact);
	x->total += s->total;
	x->error += s->error;
	x->recipients += s->recipients;
	x->bytes += s->bytes;
}

/* rpt_size_bucket - the bucket of a message size: the first bound it does not pass */
size_t rpt_size_bucket(uint64_t size)
{
	size_t b = 0;

	while (b < RPT_SIZE_NBOUNDS && size > rpt_size_bounds[b])
		b++;
	return b;
}

/* rpt_sizes_add - add size buckets into others */
void rpt_sizes_add(struct rpt_sizes *into, const struct rpt_sizes *s)
{
	for (size_t b = 0; b < RPT_SIZE_NBUCKETS; b++) {
		into->count[b] += s->count[b];
		into->bytes[b] += s->bytes[b];
	}
	if (s->max > into->max)
		into->max = s->max;
}

/* word_ok - a verdict's or check's name: [a-z_], not empty, fits */
static int word_ok(const char *s, size_t len)
{
	if (len == 0 || len >= RPT_VERDICT_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
			return 0;
	return 1;
}

/* rpt_check - the row of (verdict, check), made if new; names that are
 * not words count as "unknown"; past the cap, the "(other)" row */
struct rpt_check *rpt_check(struct report *r, const char *verdict, const char *check)
{
	const char *v = word_ok(verdict, strlen(verdict)) ? verdict : "unknown";
	const char *c = word_ok(check, strlen(check)) || strcmp(check, RPT_OTHER) == 0 ? check
		: "unknown";
	struct rpt_check *x;

	for (size_t i = 0; i < r->nchecks; i++)
		if (strcmp(r->checks[i].verdict, v) == 0 && strcmp(r->checks[i].check, c) == 0)
			return &r->checks[i];
	if (r->nchecks >= RPT_CHECKS_MAX - 1 && strcmp(c, RPT_OTHER) != 0)
		return rpt_check(r, v, RPT_OTHER);
	x = &r->checks[r->nchecks++];
	name_copy(x->verdict, sizeof(x->verdict), v);
	name_copy(x->check, sizeof(x->check), c);
	return x;
}

/* rpt_milter_add - add verdict counters into others */
void rpt_milter_add(struct rpt_milter *into, const struct rpt_milter *m)
{
	into->messages += m->messages;
	into->accepted += m->accepted;
	into->tagged += m->tagged;
	into->rejected += m->rejected;
	into->tempfailed += m->tempfailed;
	into->other += m->other;
}

/* rpt_host_add - a node's name, once; past RPT_HOSTS_MAX only counted */
void rpt_host_add(struct report *r, const char *name)
{
	char key[RPT_HOST_MAX];

	name_copy(key, sizeof(key), name);
	for (size_t i = 0; i < r->nhosts; i++)
		if (strcmp(r->hosts[i], key) == 0)
			return;
	if (r->nhosts == RPT_HOSTS_MAX) {
		r->hosts_more++;
		return;
	}
	memcpy(r->hosts[r->nhosts++], key, sizeof(key));
}

/* rpt_domain_of - the domain of an address (the address if it has none) */
const char *rpt_domain_of(const char *addr)
{
	const char *at = strrchr(addr, '@');

	return at && at[1] ? at + 1 : addr;
}

/* attempt - one recipient's delivery attempt */
static void attempt(struct report *r, const struct hist_rec *h, struct rpt_hour *hr,
		    struct rpt_slot *sl)
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
	if (sl)
		(*(uint64_t *)((char *)&sl->c + off))++;
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
		if (sl)
			sl->delay.count[b]++;
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
	struct rpt_slot *sl;

	if (h->time_us < r->from_us || h->time_us >= r->to_us)
		return 0;
	hr = rpt_hour(r, h->time_us / 1000000);
	sl = rpt_slot(r, h->time_us / 1000000);
	if (h->kind == HIST_ACCEPT) {
		struct rpt_counts c = {.received = 1, .recipients = h->nrcpt, .bytes = h->size};
		size_t b = rpt_size_bucket(h->size);

		rpt_counts_add(&r->total, &c);
		if (hr)
			rpt_counts_add(&hr->c, &c);
		if (sl)
			rpt_counts_add(&sl->c, &c);
		r->sizes.count[b]++;
		r->sizes.bytes[b] += h->size;
		if (h->size > r->sizes.max)
			r->sizes.max = h->size;
		rpt_sender_add(r, h->sender ? h->sender : "",
			       &(struct rpt_sender){.total = 1, .recipients = h->nrcpt, .bytes = h->size});
	} else if (h->kind == HIST_ATTEMPT) {
		attempt(r, h, hr, sl);
	}
	return 0;
}

/* report_add_journal - one of the milter's journal records into the
 * report (a journal_fn). The verdict is "accept", or "tag", "reject" or
 * "tempfail" followed by ":check" for each check that decided it (older
 * records have no checks: counted as "unknown"). */
int report_add_journal(const struct journal_rec *j, void *arg)
{
	struct report *r = arg;
	const char *v = j->verdict ? j->verdict : "", *c = strchr(v, ':');
	size_t vlen = c ? (size_t)(c - v) : strlen(v);
	char verdict[RPT_VERDICT_MAX] = "unknown";

	if (j->time_us < r->from_us || j->time_us >= r->to_us)
		return 0;
	r->milter.messages++;
	if (word_ok(v, vlen)) {
		memcpy(verdict, v, vlen);
		verdict[vlen] = '\0';
	}
	if (strcmp(verdict, "accept") == 0) {
		r->milter.accepted++;
		return 0;
	}
	if (strcmp(verdict, "tag") == 0)
		r->milter.tagged++;
	else if (strcmp(verdict, "reject") == 0)
		r->milter.rejected++;
	else if (strcmp(verdict, "tempfail") == 0)
		r->milter.tempfailed++;
	else {
		r->milter.other++;
		return 0;
	}
	if (c == NULL)
		rpt_check(r, verdict, "unknown")->count++;
	while (c) {
		const char *next = strchr(c + 1, ':');
		size_t len = next ? (size_t)(next - c - 1) : strlen(c + 1);
		char check[RPT_VERDICT_MAX] = "unknown";

		if (word_ok(c + 1, len)) {
			memcpy(check, c + 1, len);
			check[len] = '\0';
		}
		rpt_check(r, verdict, check)->count++;
		c = next;
	}
	return 0;
}

/* by_peer_name - peers by name */
static int by_peer_name(const void *a, const void *b)
{
	return strcmp(((const struct rpt_peer *)a)->name, ((const struct rpt_peer *)b)->name);
}

/* by_ss_total - Space-Saving rows (domains, senders) by total, largest
 * first, then by name */
static int by_ss_total(const void *a, const void *b)
{
	uint64_t x = SS_GET(a, SS_TOTAL), y = SS_GET(b, SS_TOTAL);

	return x < y ? 1 : x > y ? -1 : strcmp(a, b);
}

/* by_check_count - verdict rows by count, largest first, then by names */
static int by_check_count(const void *a, const void *b)
{
	const struct rpt_check *x = a, *y = b;
	int c;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return (c = strcmp(x->verdict, y->verdict)) != 0 ? c : strcmp(x->check, y->check);
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
	qsort(r->domains, r->ndomains, sizeof(*r->domains), by_ss_total);
	qsort(r->senders, r->nsenders, sizeof(*r->senders), by_ss_total);
	qsort(r->checks, r->nchecks, sizeof(*r->checks), by_check_count);
	qsort(r->reasons, r->nreasons, sizeof(*r->reasons), by_reason_count);
	qshape_sort(&r->queue);
}

/* rpt_traffic - did anything happen in the window */
int rpt_traffic(const struct report *r)
{
	const struct rpt_counts *c = &r->total;

	return c->received || c->sent || c->deferred || c->bounced || c->expired;
}
