/*
 * text - the report for a cron mail: plain ASCII, aligned columns, the
 * layout of pflogsumm where it has one (numbers right-aligned before
 * their label), each section only when it has rows. Names and reasons
 * came with mail (or in a merged report): shown escaped (textesc), cut
 * to their column.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "report.h"
#include "timefmt.h"
#include "textesc.h"

#define NAME_WIDTH_MAX 40

/* section - a heading underlined, as pflogsumm does */
static void section(FILE *out, const char *title)
{
	size_t n = strlen(title);

	fprintf(out, "\n%s\n", title);
	while (n--)
		fputc('-', out);
	fputc('\n', out);
}

/* shown - a name as its column shows it: escaped, at most NAME_WIDTH_MAX */
static const char *shown(const char *name, char buf[NAME_WIDTH_MAX + 1])
{
	return textesc(buf, NAME_WIDTH_MAX + 1, name, TEXTESC_LINE);
}

/* name_width - the column width for names: the longest shown, at least min */
static int name_width(size_t n, const char *(*name)(const struct report *, size_t),
		      const struct report *r, int min)
{
	char buf[NAME_WIDTH_MAX + 1];
	size_t w = (size_t)min;

	for (size_t i = 0; i < n; i++)
		if (strlen(shown(name(r, i), buf)) > w)
			w = strlen(buf);
	return (int)w;
}

static const char *peer_name(const struct report *r, size_t i)
{
	return r->peers[i].name;
}

static const char *domain_name(const struct report *r, size_t i)
{
	return r->domains[i].name;
}

static const char *queue_key(const struct report *r, size_t i)
{
	return r->queue.rows[i].key;
}

/* totals - the grand totals, one number per line */
static void totals(const struct report *r, FILE *out)
{
	const struct rpt_counts *c = &r->total;
	char p[3][16];

	section(out, "Grand Totals");
	fprintf(out, "%9llu   received\n", (unsigned long long)c->received);
	fprintf(out, "%9llu   recipients\n", (unsigned long long)c->recipients);
	fprintf(out, "%9llu   bytes received\n", (unsigned long long)c->bytes);
	fprintf(out, "%9llu   sent\n", (unsigned long long)c->sent);
	fprintf(out, "%9llu   deferred\n", (unsigned long long)c->deferred);
	fprintf(out, "%9llu   bounced\n", (unsigned long long)c->bounced);
	fprintf(out, "%9llu   expired\n", (unsigned long long)c->expired);
	if (c->sent)
		fprintf(out, "%9s   delivery delay p50, %s p90, %s p99\n",
			rpt_pctl_str(&r->delay, 0.5, p[0], sizeof(p[0])),
			rpt_pctl_str(&r->delay, 0.9, p[1], sizeof(p[1])),
			rpt_pctl_str(&r->delay, 0.99, p[2], sizeof(p[2])));
}

/* hourly - the hours that saw traffic */
static void hourly(const struct report *r, FILE *out)
{
	char when[RPT_WHEN_MAX], p[3][16];

	section(out, "Per-Hour Traffic");
	fprintf(out, "%-22s %8s %8s %8s %8s %8s %7s %7s %7s\n", "hour", "received", "sent",
		"deferred", "bounced", "expired", "p50", "p90", "p99");
	for (size_t i = 0; i < r->nhours; i++) {
		const struct rpt_hour *h = &r->hours[i];

		if (!(h->c.received || h->c.sent || h->c.deferred || h->c.bounced || h->c.expired))
			continue;
		fprintf(out, "%-22s %8llu %8llu %8llu %8llu %8llu %7s %7s %7s\n",
			rpt_when(r, r->hour0 + 3600 * i, when, sizeof(when)),
			(unsigned long long)h->c.received, (unsigned long long)h->c.sent,
			(unsigned long long)h->c.deferred, (unsigned long long)h->c.bounced,
			(unsigned long long)h->c.expired,
			rpt_pctl_str(&h->delay, 0.5, p[0], sizeof(p[0])),
			rpt_pctl_str(&h->delay, 0.9, p[1], sizeof(p[1])),
			rpt_pctl_str(&h->delay, 0.99, p[2], sizeof(p[2])));
	}
}

/* peers - per relay peer: outcomes, delays, connection reuse, TLS */
static void peers(const struct report *r, FILE *out)
{
	int w = name_width(r->npeers, peer_name, r, 4);
	char p[3][16], reuse[16], res[16], name[NAME_WIDTH_MAX + 1];

	section(out, "Relay Peers");
	fprintf(out, "%-*s %8s %8s %8s %7s %7s %7s %6s %6s %8s %8s\n", w, "peer", "sent", "deferred",
		"bounced", "p50", "p90", "p99", "reuse", "resume", "connfail", "tlsfail");
	for (size_t i = 0; i < r->npeers; i++) {
		const struct rpt_peer *x = &r->peers[i];

		fprintf(out, "%-*s %8llu %8llu %8llu %7s %7s %7s %6s %6s %8llu %8llu\n", w,
			shown(x->name, name),
			(unsigned long long)x->c.sent, (unsigned long long)x->c.deferred,
			(unsigned long long)x->c.bounced,
			rpt_pctl_str(&x->delay, 0.5, p[0], sizeof(p[0])),
			rpt_pctl_str(&x->delay, 0.9, p[1], sizeof(p[1])),
			rpt_pctl_str(&x->delay, 0.99, p[2], sizeof(p[2])),
			rpt_percent(x->reused, x->transactions, reuse, sizeof(reuse)),
			rpt_percent(x->tls_resumed, x->tls_full + x->tls_resumed, res, sizeof(res)),
			(unsigned long long)x->conn_failures, (unsigned long long)x->handshake_failures);
	}
}

/* domains - the top recipient domains */
static void domains(const struct report *r, FILE *out, size_t top)
{
	size_t n = r->ndomains < top ? r->ndomains : top;
	int w = name_width(n, domain_name, r, 6);
	char name[NAME_WIDTH_MAX + 1];

	section(out, r->domains_exact ? "Top Recipient Domains"
		: "Top Recipient Domains (approximate: more domains than the table holds)");
	fprintf(out, "%-*s %8s %8s %8s %8s %8s\n", w, "domain", "total", "sent", "deferred",
		"bounced", "expired");
	for (size_t i = 0; i < n; i++) {
		const struct rpt_domain *d = &r->domains[i];

		fprintf(out, "%-*s %8llu %8llu %8llu %8llu %8llu\n", w, shown(d->name, name),
			(unsigned long long)d->total, (unsigned long long)d->sent,
			(unsigned long long)d->deferred, (unsigned long long)d->bounced,
			(unsigned long long)d->expired);
	}
}

/* reasons - deferrals and bounces by enhanced status code */
static void reasons(const struct report *r, FILE *out)
{
	char status[TEXTESC_SIZE(sizeof(r->reasons->status))];
	char dsn[TEXTESC_SIZE(sizeof(r->reasons->dsn))], example[71];

	section(out, "Deferral and Bounce Reasons");
	fprintf(out, "%-8s %-8s %8s   %s\n", "status", "dsn", "count", "example");
	for (size_t i = 0; i < r->nreasons; i++) {
		const struct rpt_reason *x = &r->reasons[i];

		fprintf(out, "%-8s %-8s %8llu   %s\n",
			textesc(status, sizeof(status), x->status, TEXTESC_LINE),
			textesc(dsn, sizeof(dsn), x->dsn, TEXTESC_LINE), (unsigned long long)x->count,
			textesc(example, sizeof(example), x->example, TEXTESC_LINE));
	}
}

/* queue - the queue's shape now, by peer, as ternq stats --by peer */
static void queue(const struct report *r, FILE *out)
{
	int w = name_width(r->queue.n, queue_key, r, 10);
	char name[NAME_WIDTH_MAX + 1];

	section(out, "Queue Now (recipients by age in minutes)");
	fprintf(out, "%-*s %6s", w, "peer", "T");
	for (size_t b = 0; b < QSHAPE_NBOUNDS; b++)
		fprintf(out, " %5u", qshape_bounds[b]);
	fprintf(out, " %5s\n", "1280+");
	for (size_t i = 0; i <= r->queue.n; i++) {
		const struct qshape_row *row = i ? &r->queue.rows[i - 1] : &r->queue.all;

		fprintf(out, "%-*s %6lu", w, i ? shown(row->key, name) : "TOTAL", row->total);
		for (size_t b = 0; b < QSHAPE_NBUCKETS; b++)
			fprintf(out, " %5lu", row->count[b]);
		fputc('\n', out);
	}
}

/* milter - the milter's verdicts, and the checks behind each */
static void milter(const struct report *r, FILE *out)
{
	const struct rpt_milter *m = &r->milter;

	section(out, "Milter Verdicts");
	fprintf(out, "%9llu   messages inspected\n", (unsigned long long)m->messages);
	fprintf(out, "%9llu   accepted\n", (unsigned long long)m->accepted);
	fprintf(out, "%9llu   tagged\n", (unsigned long long)m->tagged);
	fprintf(out, "%9llu   rejected\n", (unsigned long long)m->rejected);
	fprintf(out, "%9llu   temporarily refused\n", (unsigned long long)m->tempfailed);
	if (m->other)
		fprintf(out, "%9llu   other verdicts\n", (unsigned long long)m->other);
	if (r->nchecks == 0)
		return;
	fprintf(out, "\n%-10s %-16s %8s\n", "verdict", "check", "messages");
	for (size_t i = 0; i < r->nchecks; i++)
		fprintf(out, "%-10s %-16s %8llu\n", r->checks[i].verdict, r->checks[i].check,
			(unsigned long long)r->checks[i].count);
}

/* senders - the top envelope senders, shown escaped */
static void senders(const struct report *r, FILE *out, size_t top)
{
	size_t n = r->nsenders < top ? r->nsenders : top;
	char name[NAME_WIDTH_MAX + 1];
	int w = 6;

	for (size_t i = 0; i < n; i++)
		if ((int)strlen(shown(r->senders[i].name, name)) > w)
			w = (int)strlen(name);
	section(out, r->senders_exact ? "Top Senders"
		: "Top Senders (approximate: more senders than the table holds)");
	fprintf(out, "%-*s %8s %10s %12s\n", w, "sender", "messages", "recipients", "bytes");
	for (size_t i = 0; i < n; i++) {
		const struct rpt_sender *x = &r->senders[i];

		fprintf(out, "%-*s %8llu %10llu %12llu\n", w, shown(x->name, name),
			(unsigned long long)x->total, (unsigned long long)x->recipients,
			(unsigned long long)x->bytes);
	}
}

/* sizes - accepted messages by size */
static void sizes(const struct report *r, FILE *out)
{
	char label[32];

	section(out, "Message Sizes (octets)");
	fprintf(out, "%-10s %8s %12s\n", "size", "messages", "bytes");
	for (size_t b = 0; b < RPT_SIZE_NBUCKETS; b++)
		if (r->sizes.count[b])
			fprintf(out, "%-10s %8llu %12llu\n", rpt_size_label(b, label, sizeof(label)),
				(unsigned long long)r->sizes.count[b], (unsigned long long)r->sizes.bytes[b]);
	fprintf(out, "%-10s %21llu\n", "largest", (unsigned long long)r->sizes.max);
	if (r->total.received)
		fprintf(out, "%-10s %21llu\n", "average",
			(unsigned long long)(r->total.bytes / r->total.received));
}

/* report_text - the whole report as text */
int report_text(const struct report *r, FILE *out, size_t top)
{
	char a[TIMEFMT_LEN], b[TIMEFMT_LEN];

	fprintf(out, "tern-report: %s to %s", timefmt_human(r->from_us, r->utc, TIMEFMT_MS, a, sizeof(a)),
		timefmt_human(r->to_us, r->utc, TIMEFMT_MS, b, sizeof(b)));
	if (r->nodes > 1)
		fprintf(out, ", %u nodes", r->nodes);
	fputc('\n', out);
	{
		char hosts[RPT_HOSTS_TEXT], esc[TEXTESC_SIZE(RPT_HOSTS_TEXT)];

		fprintf(out, "%s: %s\n", r->nhosts + r->hosts_more > 1 ? "hosts" : "host",
			textesc(esc, sizeof(esc), rpt_hosts(r, hosts, sizeof(hosts)), TEXTESC_LINE));
	}
	totals(r, out);
	if (rpt_traffic(r))
		hourly(r, out);
	if (r->npeers)
		peers(r, out);
	if (r->ndomains && top)
		domains(r, out, top);
	if (r->nreasons)
		reasons(r, out);
	if (r->have_milter)
		milter(r, out);
	if (r->nsenders && top)
		senders(r, out, top);
	if (r->total.received)
		sizes(r, out);
	if (r->have_queue)
		queue(r, out);
	return ferror(out) ? -1 : 0;
}
