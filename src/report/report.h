/*
 * report - tern-report's model: what a window of ternd's delivery history
 * adds up to, kept in bounded memory whatever the history's size.
 *
 * Counters are exact. Delivery delays go into one fixed-bucket histogram
 * per hour and per peer, so that percentiles of merged reports come from
 * merged buckets (never averaged percentiles). Peers, reasons and hours
 * have hard caps; recipient domains are counted with the Space-Saving
 * algorithm in a fixed table, exact while there are fewer distinct
 * domains than the table holds (domains_exact says which); envelope
 * senders the same way in a table of their own (senders_exact). Message
 * sizes go into fixed buckets. The milter's verdicts (from its journal)
 * are counted by verdict and by the check that decided them. A time
 * series of at most RPT_SLOTS_MAX slots, its step chosen from the
 * window's length (a minute for an hour), feeds the HTML charts. Hours
 * and slots begin where the zone's do (local, or UTC): a zone half an hour
 * off UTC has its hours at :30 UTC, a day that changes DST 23 or 25 rows.
 *
 * Pure: no I/O here (main.c reads, the format files write).
 */
#ifndef TERN_REPORT_H
#define TERN_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"
#include "qshape.h"
#include "queue.h"

#define RPT_DELAY_NBOUNDS 26
#define RPT_DELAY_NBUCKETS (RPT_DELAY_NBOUNDS + 1)	/* the last: above the last bound */
#define RPT_HOURS_MAX 8784		/* a leap year of hours */
#define RPT_PEERS_MAX 256
#define RPT_REASONS_MAX 256
#define RPT_DOMAINS_MAX 1024
#define RPT_NAME_MAX 128		/* peer and domain names (longer ones are cut) */
#define RPT_EXAMPLE_MAX 200		/* a reason's example reply */
#define RPT_OTHER "(other)"		/* the row past a cap */
#define RPT_SENDERS_MAX 1024
#define RPT_SIZE_NBOUNDS 10
#define RPT_SIZE_NBUCKETS (RPT_SIZE_NBOUNDS + 1)	/* the last: above the last bound */
#define RPT_CHECKS_MAX 64		/* (verdict, check) rows */
#define RPT_VERDICT_MAX 16		/* a verdict's or a check's name */
#define RPT_HOSTS_MAX 32		/* host names kept; more are only counted */
#define RPT_HOST_MAX 64			/* a host name (longer ones are cut) */
#define RPT_SLOTS_MAX 400		/* points of the time series */
#define RPT_NULL_SENDER "<>"

extern const uint64_t rpt_delay_bounds_ms[RPT_DELAY_NBOUNDS];
extern const uint64_t rpt_size_bounds[RPT_SIZE_NBOUNDS];
extern const uint64_t rpt_slot_steps[];	/* seconds, each divides the next; 0 ends */

struct rpt_hist {
	uint64_t count[RPT_DELAY_NBUCKETS];
};

struct rpt_counts {
	uint64_t received, recipients, bytes;	/* acceptances */
	uint64_t sent, deferred, bounced, expired;	/* attempts, per recipient */
};

struct rpt_hour {
	struct rpt_counts c;
	struct rpt_hist delay;
};

struct rpt_peer {
	char name[RPT_NAME_MAX];
	struct rpt_counts c;
	uint64_t transactions, reused;		/* reused: conn_use > 1 */
	uint64_t connections, tls_full, tls_resumed;	/* new connections and their TLS */
	uint64_t conn_failures, handshake_failures;
	struct rpt_hist delay;
};

struct rpt_domain {
	char name[RPT_NAME_MAX];
	uint64_t total, error;			/* error: Space-Saving overestimate */
	uint64_t sent, deferred, bounced, expired;
};

/* Space-Saving rows (domains, senders) begin with name, total and error
 * in this order, so that one piece of code keeps both tables. */
struct rpt_sender {
	char name[RPT_NAME_MAX];		/* the envelope sender, "<>" for the null one */
	uint64_t total, error;			/* messages; error: Space-Saving overestimate */
	uint64_t recipients, bytes;
};

struct rpt_sizes {
	uint64_t count[RPT_SIZE_NBUCKETS];	/* messages by size */
	uint64_t bytes[RPT_SIZE_NBUCKETS];	/* their octets */
	uint64_t max;				/* the largest message */
};

struct rpt_check {
	char verdict[RPT_VERDICT_MAX];		/* tag, reject, tempfail */
	char check[RPT_VERDICT_MAX];		/* header_limits, loop, ... or "unknown" */
	uint64_t count;
};

struct rpt_milter {
	uint64_t messages, accepted, tagged, rejected, tempfailed, other;
};

struct rpt_slot {
	struct rpt_counts c;
	struct rpt_hist delay;
};

struct rpt_reason {
	char status[10];			/* deferred, bounced, expired */
	char dsn[16];				/* enhanced status code, or "none" */
	uint64_t count;
	char example[RPT_EXAMPLE_MAX + 1];
};

struct report {
	uint64_t from_us, to_us;		/* the window: from <= t < to */
	uint64_t generated_us;
	unsigned nodes;				/* reports merged into this one */
	struct rpt_counts total;
	struct rpt_hist delay;
	int utc;				/* times in UTC, not the local zone */
	uint64_t hour0;				/* first hour (of the zone), seconds since the epoch */
	size_t nhours;
	struct rpt_hour *hours;
	struct rpt_peer *peers;
	size_t npeers;
	struct rpt_reason *reasons;
	size_t nreasons;
	struct rpt_domain *domains;
	size_t ndomains;
	int domains_exact;
	struct rpt_sender *senders;
	size_t nsenders;
	int senders_exact;
	struct rpt_sizes sizes;
	int have_milter;			/* a milter journal was read */
	struct rpt_milter milter;
	struct rpt_check *checks;
	size_t nchecks;
	char hosts[RPT_HOSTS_MAX][RPT_HOST_MAX];	/* the nodes' names */
	size_t nhosts;
	uint64_t hosts_more;			/* names past RPT_HOSTS_MAX */
	uint64_t slot0, slot_step;		/* the series: first slot, seconds */
	size_t nslots;
	struct rpt_slot *slots;
	int have_queue;				/* the queue's shape is known */
	struct qshape queue;
	/* streaming state: the last attempt, to count transactions once */
	char last_qid[QID_LEN + 1];
	uint64_t last_time_us;
	char last_peer[RPT_NAME_MAX];
};

int report_init(struct report *r, uint64_t from_us, uint64_t to_us, const char **why);
int report_init_zone(struct report *r, uint64_t from_us, uint64_t to_us, int utc, const char **why);
void report_free(struct report *r);
int report_add(const struct hist_rec *h, void *arg);	/* a store_hist_fn */
int report_add_journal(const struct journal_rec *j, void *arg);	/* a journal_fn */
void report_finish(struct report *r);

/* pieces, exposed for the merge reader and the unit tests */
size_t rpt_delay_bucket(uint64_t ms);
uint64_t rpt_percentile(const struct rpt_hist *h, double q);
void rpt_hist_add(struct rpt_hist *into, const struct rpt_hist *h);
void rpt_counts_add(struct rpt_counts *into, const struct rpt_counts *c);
struct rpt_peer *rpt_peer(struct report *r, const char *name);
struct rpt_hour *rpt_hour(struct report *r, uint64_t t_sec);
struct rpt_reason *rpt_reason(struct report *r, const char *status, const char *dsn,
			      const char *example);
void rpt_domain_add(struct report *r, const char *domain, const struct rpt_domain *d);
void rpt_sender_add(struct report *r, const char *sender, const struct rpt_sender *s);
size_t rpt_size_bucket(uint64_t size);
void rpt_sizes_add(struct rpt_sizes *into, const struct rpt_sizes *s);
struct rpt_check *rpt_check(struct report *r, const char *verdict, const char *check);
void rpt_milter_add(struct rpt_milter *into, const struct rpt_milter *m);
void rpt_host_add(struct report *r, const char *name);
struct rpt_slot *rpt_slot(struct report *r, uint64_t t_sec);
uint64_t rpt_slot_step(uint64_t from_sec, uint64_t to_sec);
int rpt_traffic(const struct report *r);
const char *rpt_domain_of(const char *addr);

/* --merge: add one JSON report (as tern-report --format json wrote it);
 * 0, or -1 with why set. Input is hostile: checked, bounded, never trusted. */
int report_merge_json(struct report *r, const char *buf, size_t len, char *why, size_t whylen);
int report_merge_window(const char *buf, size_t len, uint64_t *from_us, uint64_t *to_us);

/* outputs, each to an open stream; 0 or -1 */
int report_json(const struct report *r, FILE *out);
int report_text(const struct report *r, FILE *out, size_t top);
int report_csv(const struct report *r, FILE *out, const char *table, size_t top);
int report_html(const struct report *r, FILE *out, size_t top);
int report_prom(const struct report *r, FILE *out);

/* escaping and formatting for the outputs (escape.c) */
void csv_field(FILE *out, const char *s);
void html_text(FILE *out, const char *s);
const char *rpt_when(const struct report *r, uint64_t sec, char *buf, size_t cap);
#define RPT_WHEN_MAX 48			/* rpt_when's and timefmt's buffers */

/* the window from the command line (window.c), in the local zone or UTC */
int rpt_parse_time(const char *s, int utc, uint64_t *sec);
int rpt_window(const char *spec, uint64_t now_us, int utc, uint64_t *from_us, uint64_t *to_us,
	       const char **why);
const char *rpt_delay_str(uint64_t ms, char *buf, size_t cap);
const char *rpt_pctl_str(const struct rpt_hist *h, double q, char *buf, size_t cap);
const char *rpt_percent(uint64_t a, uint64_t b, char *buf, size_t cap);
const char *rpt_size_label(size_t b, char *buf, size_t cap);
#define RPT_HOSTS_TEXT (RPT_HOSTS_MAX * (RPT_HOST_MAX + 2) + 32)
const char *rpt_hosts(const struct report *r, char *buf, size_t cap);

#endif
