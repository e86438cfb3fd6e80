/*
 * csv - one table of the report as CSV (RFC 4180, CRLF line ends), with a
 * header row: totals, hourly, peers, domains, reasons, queue, senders,
 * sizes or milter. Times are
 * UTC in ISO 8601, delays in milliseconds, ratios between 0 and 1.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "report.h"
#include "timefmt.h"

#define U(v) ((unsigned long long)(v))

/* counts - the counter columns of a row */
static void counts(FILE *out, const struct rpt_counts *c)
{
	fprintf(out, ",%llu,%llu,%llu,%llu,%llu,%llu,%llu", U(c->received), U(c->recipients),
		U(c->bytes), U(c->sent), U(c->deferred), U(c->bounced), U(c->expired));
}

/* delays - the percentile columns of a row */
static void delays(FILE *out, const struct rpt_hist *h)
{
	fprintf(out, ",%llu,%llu,%llu\r\n", U(rpt_percentile(h, 0.5)), U(rpt_percentile(h, 0.9)),
		U(rpt_percentile(h, 0.99)));
}

#define COUNT_COLS "received,recipients,bytes,sent,deferred,bounced,expired"
#define DELAY_COLS "delay_p50_ms,delay_p90_ms,delay_p99_ms"

/* report_csv - the named table; -1 for a table that does not exist */
int report_csv(const struct report *r, FILE *out, const char *table, size_t top)
{
	if (strcmp(table, "totals") == 0) {
		fprintf(out, "from,to," COUNT_COLS "," DELAY_COLS "\r\n");
		fprintf(out, "%llu,%llu", U(r->from_us / 1000000), U(r->to_us / 1000000));
		counts(out, &r->total);
		delays(out, &r->delay);
	} else if (strcmp(table, "hourly") == 0) {
		fprintf(out, "hour," COUNT_COLS "," DELAY_COLS "\r\n");
		for (size_t i = 0; i < r->nhours; i++) {
			char when[TIMEFMT_LEN];

			fputs(timefmt_iso((r->hour0 + 3600 * i) * 1000000, r->utc, when, sizeof(when)), out);
			counts(out, &r->hours[i].c);
			delays(out, &r->hours[i].delay);
		}
	} else if (strcmp(table, "peers") == 0) {
		fprintf(out, "peer,sent,deferred,bounced,expired,transactions,reused,connections,"
			"tls_full,tls_resumed,connection_failures,handshake_failures,reuse_ratio,"
			"tls_resumption_ratio," DELAY_COLS "\r\n");
		for (size_t i = 0; i < r->npeers; i++) {
			const struct rpt_peer *p = &r->peers[i];
			uint64_t tls = p->tls_full + p->tls_resumed;

			csv_field(out, p->name);
			fprintf(out, ",%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%.4f,%.4f",
				U(p->c.sent), U(p->c.deferred), U(p->c.bounced), U(p->c.expired),
				U(p->transactions), U(p->reused), U(p->connections), U(p->tls_full),
				U(p->tls_resumed), U(p->conn_failures), U(p->handshake_failures),
				p->transactions ? (double)p->reused / (double)p->transactions : 0.0,
				tls ? (double)p->tls_resumed / (double)tls : 0.0);
			delays(out, &p->delay);
		}
	} else if (strcmp(table, "domains") == 0) {
		fprintf(out, "domain,total,sent,deferred,bounced,expired,error\r\n");
		for (size_t i = 0; i < r->ndomains && i < top; i++) {
			const struct rpt_domain *d = &r->domains[i];

			csv_field(out, d->name);
			fprintf(out, ",%llu,%llu,%llu,%llu,%llu,%llu\r\n", U(d->total), U(d->sent),
				U(d->deferred), U(d->bounced), U(d->expired), U(d->error));
		}
	} else if (strcmp(table, "reasons") == 0) {
		fprintf(out, "status,dsn,count,example\r\n");
		for (size_t i = 0; i < r->nreasons; i++) {
			csv_field(out, r->reasons[i].status);
			fputc(',', out);
			csv_field(out, r->reasons[i].dsn);
			fprintf(out, ",%llu,", U(r->reasons[i].count));
			csv_field(out, r->reasons[i].example);
			fputs("\r\n", out);
		}
	} else if (strcmp(table, "queue") == 0) {
		fprintf(out, "peer,total");
		for (size_t b = 0; b < QSHAPE_NBOUNDS; b++)
			fprintf(out, ",lt_%u_min", qshape_bounds[b]);
		fprintf(out, ",ge_%u_min\r\n", qshape_bounds[QSHAPE_NBOUNDS - 1]);
		for (size_t i = 0; i < r->queue.n; i++) {
			csv_field(out, r->queue.rows[i].key);
			fprintf(out, ",%lu", r->queue.rows[i].total);
			for (size_t b = 0; b < QSHAPE_NBUCKETS; b++)
				fprintf(out, ",%lu", r->queue.rows[i].count[b]);
			fputs("\r\n", out);
		}
	} else if (strcmp(table, "senders") == 0) {
		fprintf(out, "sender,messages,recipients,bytes,error\r\n");
		for (size_t i = 0; i < r->nsenders && i < top; i++) {
			const struct rpt_sender *x = &r->senders[i];

			csv_field(out, x->name);
			fprintf(out, ",%llu,%llu,%llu,%llu\r\n", U(x->total), U(x->recipients), U(x->bytes),
				U(x->error));
		}
	} else if (strcmp(table, "sizes") == 0) {
		fprintf(out, "size,max_octets,messages,bytes\r\n");
		for (size_t b = 0; b < RPT_SIZE_NBUCKETS; b++) {
			char label[32];

			fprintf(out, "%s,", rpt_size_label(b, label, sizeof(label)));
			if (b < RPT_SIZE_NBOUNDS)
				fprintf(out, "%llu", U(rpt_size_bounds[b]));
			fprintf(out, ",%llu,%llu\r\n", U(r->sizes.count[b]), U(r->sizes.bytes[b]));
		}
	} else if (strcmp(table, "milter") == 0) {
		static const char *const v[] = {"accept", "tag", "reject", "tempfail", "other"};
		const uint64_t n[] = {r->milter.accepted, r->milter.tagged, r->milter.rejected,
			r->milter.tempfailed, r->milter.other};

		/* the verdicts' totals (check empty), then each verdict by check;
		 * nothing but the header without a milter journal */
		fprintf(out, "verdict,check,messages\r\n");
		for (size_t i = 0; r->have_milter && i < 5; i++)
			fprintf(out, "%s,,%llu\r\n", v[i], U(n[i]));
		for (size_t i = 0; i < r->nchecks; i++)
			fprintf(out, "%s,%s,%llu\r\n", r->checks[i].verdict, r->checks[i].check,
				U(r->checks[i].count));
	} else {
		return -1;
	}
	return ferror(out) ? -1 : 0;
}
