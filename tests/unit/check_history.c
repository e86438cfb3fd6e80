/*
 * check_history - delivery history and milter journal records: exact
 * round trips, every truncation refused, bad kinds and states refused;
 * the history tables: lookups by queue id, trace id, Message-ID and
 * recipient (case-blind) find exactly their messages' records in time
 * order, whether their index entries are written yet or still pending
 * (also when older records arrive after newer ones were indexed);
 * indexing is bounded; pruning is bounded and takes the index entries,
 * or the pending mark, with it. The
 * milter journal: lookups by trace id and MTA queue id, untraced
 * messages not indexed under a zero trace id, pruning by age.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_codec.h"
#include "store_journal.h"
#include "tmpstore.h"
#include "unit.h"

#define QA "0000000000AAA"
#define QB "0000000000BBB"
#define T0 1700000000000000ULL

/* accept_rec, attempt_rec - records with every field set */
static struct hist_rec accept_rec(const char *qid, uint64_t t, unsigned char tid, const char *msgid,
				  const char *rcpts)
{
	struct hist_rec h = {0};

	h.kind = HIST_ACCEPT;
	h.time_us = t;
	h.size = 1234;
	h.nrcpt = 2;
	memset(h.trace_id, tid, sizeof(h.trace_id));
	memset(h.span_id, 0x22, sizeof(h.span_id));
	memcpy(h.qid, qid, QID_LEN + 1);
	h.sender = "s@example.org";
	h.msgid = (char *)msgid;
	h.client = "127.0.0.1";
	h.rcpt = (char *)rcpts;
	h.peer = h.relay = h.dsn = h.reply = h.peer_qid = "";
	return h;
}

static struct hist_rec attempt_rec(const char *qid, uint64_t t, uint32_t idx, const char *rcpt,
				   uint8_t state)
{
	struct hist_rec h = {0};

	h.kind = HIST_ATTEMPT;
	h.state = state;
	h.tls = HIST_TLS_RESUMED;
	h.code = 250;
	h.idx = idx;
	h.conn_use = 3;
	h.time_us = t;
	for (int i = 0; i < 4; i++)
		h.delays_us[i] = 1000u * (unsigned)(i + 1);
	memcpy(h.qid, qid, QID_LEN + 1);
	h.sender = h.msgid = h.client = "";
	h.rcpt = (char *)rcpt;
	h.peer = "smarthost";
	h.relay = "mx[192.0.2.1]:25";
	h.dsn = "2.0.0";
	h.reply = "250 2.0.0 Ok: queued as 4bQ7Xk3Zq1z9sWk";
	h.peer_qid = "4bQ7Xk3Zq1z9sWk";
	return h;
}

/* hist_eq - two records hold the same */
static void hist_eq(const struct hist_rec *a, const struct hist_rec *b)
{
	ck_assert_uint_eq(a->kind, b->kind);
	ck_assert_uint_eq(a->state, b->state);
	ck_assert_uint_eq(a->tls, b->tls);
	ck_assert_uint_eq(a->code, b->code);
	ck_assert_uint_eq(a->idx, b->idx);
	ck_assert_uint_eq(a->nrcpt, b->nrcpt);
	ck_assert_uint_eq(a->conn_use, b->conn_use);
	ck_assert_uint_eq(a->time_us, b->time_us);
	ck_assert_uint_eq(a->size, b->size);
	ck_assert_mem_eq(a->delays_us, b->delays_us, sizeof(a->delays_us));
	ck_assert_mem_eq(a->trace_id, b->trace_id, sizeof(a->trace_id));
	ck_assert_mem_eq(a->span_id, b->span_id, sizeof(a->span_id));
	ck_assert_mem_eq(a->link_trace_id, b->link_trace_id, sizeof(a->link_trace_id));
	ck_assert_mem_eq(a->link_span_id, b->link_span_id, sizeof(a->link_span_id));
	ck_assert_str_eq(a->qid, b->qid);
	ck_assert_str_eq(a->sender, b->sender);
	ck_assert_str_eq(a->msgid, b->msgid);
	ck_assert_str_eq(a->client, b->client);
	ck_assert_str_eq(a->rcpt, b->rcpt);
	ck_assert_str_eq(a->peer, b->peer);
	ck_assert_str_eq(a->relay, b->relay);
	ck_assert_str_eq(a->dsn, b->dsn);
	ck_assert_str_eq(a->reply, b->reply);
	ck_assert_str_eq(a->peer_qid, b->peer_qid);
}

START_TEST(test_hist_codec)
{
	struct hist_rec in[2], out;
	unsigned char buf[1024];
	size_t n;

	in[0] = accept_rec(QA, T0, 0xab, "<m1@example.org>", "a@x\nb@y");
	in[1] = attempt_rec(QA, T0 + 5, 1, "b@y", HIST_EXPIRED);
	memset(in[0].link_trace_id, 0x4b, sizeof(in[0].link_trace_id));
	memset(in[0].link_span_id, 0x0b, sizeof(in[0].link_span_id));
	for (int i = 0; i < 2; i++) {
		n = hist_rec_encode(&in[i], buf, sizeof(buf));
		ck_assert_uint_gt(n, 0);
		ck_assert_uint_eq(hist_rec_encode(&in[i], buf, n - 1), 0);	/* never cut */
		ck_assert_int_eq(hist_rec_decode(buf, n, &out), 0);
		hist_eq(&out, &in[i]);
		hist_rec_clear(&out);
		for (size_t k = 0; k < n; k++)			/* every truncation */
			ck_assert_int_eq(hist_rec_decode(buf, k, &out), -1);
		buf[1] = 3;					/* no such kind */
		ck_assert_int_eq(hist_rec_decode(buf, n, &out), -1);
		buf[1] = in[i].kind;
		buf[2] = HIST_EXPIRED + 1;			/* no such state */
		ck_assert_int_eq(hist_rec_decode(buf, n, &out), -1);
		ck_assert_ptr_null(out.reply);
		buf[2] = in[i].state;
		ck_assert_uint_eq(buf[0], 2);			/* version 2: the link at the end */
		buf[0] = 1;					/* version 1 reads, without it */
		ck_assert_int_eq(hist_rec_decode(buf, n - 24, &out), 0);
		ck_assert_uint_eq(out.link_trace_id[0] | out.link_span_id[7], 0);
		ck_assert_str_eq(out.peer_qid, in[i].peer_qid);
		hist_rec_clear(&out);
		ck_assert_int_eq(hist_rec_decode(buf, n, &out), -1);
	}
}
END_TEST

START_TEST(test_journal_codec)
{
	struct journal_rec in = {T0, {0}, {0}, {0}, 3, "4bQ7Xk3Zq1z9sWk", "[192.0.2.7]",
				 "s@example.org", "accept"}, out;
	unsigned char buf[512];
	size_t n;

	memset(in.trace_id, 0x11, sizeof(in.trace_id));
	memset(in.span_id, 0x22, sizeof(in.span_id));
	memset(in.parent_id, 0x33, sizeof(in.parent_id));
	n = journal_rec_encode(&in, buf, sizeof(buf));
	ck_assert_uint_gt(n, 0);
	ck_assert_uint_eq(journal_rec_encode(&in, buf, n - 1), 0);
	ck_assert_int_eq(journal_rec_decode(buf, n, &out), 0);
	ck_assert_uint_eq(out.time_us, T0);
	ck_assert_uint_eq(out.nrcpt, 3);
	ck_assert_mem_eq(out.trace_id, in.trace_id, 16);
	ck_assert_mem_eq(out.span_id, in.span_id, 8);
	ck_assert_mem_eq(out.parent_id, in.parent_id, 8);
	ck_assert_str_eq(out.mta_qid, in.mta_qid);
	ck_assert_str_eq(out.client, in.client);
	ck_assert_str_eq(out.sender, in.sender);
	ck_assert_str_eq(out.verdict, in.verdict);
	journal_rec_clear(&out);
	for (size_t k = 0; k < n; k++)
		ck_assert_int_eq(journal_rec_decode(buf, k, &out), -1);
	buf[0] = 2;
	ck_assert_int_eq(journal_rec_decode(buf, n, &out), -1);
}
END_TEST

static char dir[4096];
static struct store *st;

static void setup(void)
{
	st = tmpstore_open(dir, sizeof(dir));
}

static void teardown(void)
{
	store_close(&st);
	tmpdir_remove(dir);
}

/* the records of two messages, written as ternd would */
static struct hist_rec recs[5];

/* put_range - records [from, to) of recs */
static int put_range(struct store_txn *t, void *arg)
{
	const size_t *r = arg;
	int rc;

	for (size_t i = r[0]; i < r[1]; i++)
		if ((rc = store_hist_put(t, &recs[i])) != 0)
			return rc;
	return 0;
}

static void put(size_t from, size_t to)
{
	size_t r[2] = {from, to};
	char err[256];

	ck_assert_int_eq(store_write(st, put_range, r, err, sizeof(err)), 0);
}

/* index_fn - store_hist_index with n[0] as keep; n[1] indexed, n[2] left */
static int index_fn(struct store_txn *t, void *arg)
{
	uint64_t *n = arg;
	size_t done = 0;
	int rc = store_hist_index(t, n[0], &done);

	n[1] = done;
	n[2] = store_hist_unindexed(t);
	return rc;
}

/* index_hist - index until keep records wait: how many were; left, how
 * many wait then */
static size_t index_hist(uint64_t keep, size_t *left)
{
	uint64_t n[3] = {keep, 99, 99};
	char err[256];

	ck_assert_int_eq(store_write(st, index_fn, n, err, sizeof(err)), 0);
	*left = n[2];
	return n[1];
}

/* collect - "qid/kind/idx" of each record found, space-separated */
static int collect(const struct hist_rec *h, void *arg)
{
	char *out = arg;

	snprintf(out + strlen(out), 512 - strlen(out), "%s%s/%u/%u", out[0] ? " " : "", h->qid,
		 h->kind, h->idx);
	return 0;
}

/* find - what a lookup finds */
static const char *find(char kind, const char *value)
{
	static char out[512];

	out[0] = '\0';
	ck_assert_int_ge(store_hist_find(st, kind, value, collect, out), 0);
	return out;
}

static int prune_fn(struct store_txn *t, void *arg)
{
	uint64_t *n = arg;
	size_t got = 0;
	int rc = store_hist_prune(t, n[1], (size_t)n[0], &got);

	n[2] = got;
	return rc;
}

/* _i: 0 nothing indexed yet; 1 everything indexed, in two steps;
 * 2 the last three records indexed, then the first two (older) written */
START_TEST(test_hist_store)
{
	char err[256];
	uint64_t p[3];
	size_t left;

	recs[0] = accept_rec(QA, T0, 0xaa, "<m1@example.org>", "Ann@X.example\nbob@y.example");
	recs[1] = accept_rec(QB, T0 + 10, 0xbb, "<m2@example.org>", "bob@y.example");
	recs[2] = attempt_rec(QA, T0 + 20, 1, "bob@y.example", RCPT_DEFERRED);
	recs[3] = attempt_rec(QA, T0 + 30, 0, "Ann@X.example", RCPT_SENT);
	recs[4] = attempt_rec(QA, T0 + 40, 1, "bob@y.example", RCPT_SENT);
	if (_i == 0) {
		put(0, 5);
	} else if (_i == 1) {
		put(0, 5);
		ck_assert_uint_eq(index_hist(3, &left), 2);
		ck_assert_uint_eq(left, 3);
		ck_assert_uint_eq(index_hist(0, &left), 3);
		ck_assert_uint_eq(left, 0);
		ck_assert_uint_eq(index_hist(0, &left), 0);
	} else {
		put(2, 5);
		ck_assert_uint_eq(index_hist(0, &left), 3);
		put(0, 2);
		ck_assert_uint_eq(index_hist(2, &left), 0);
		ck_assert_uint_eq(left, 2);
	}

	ck_assert_str_eq(find('q', QA), QA "/1/0 " QA "/2/1 " QA "/2/0 " QA "/2/1");
	ck_assert_str_eq(find('q', QB), QB "/1/0");
	ck_assert_str_eq(find('t', "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), QA "/1/0 " QA "/2/1 " QA "/2/0 " QA "/2/1");
	ck_assert_str_eq(find('m', "<m2@example.org>"), QB "/1/0");
	ck_assert_str_eq(find('r', "ann@x.EXAMPLE"), QA "/1/0 " QA "/2/1 " QA "/2/0 " QA "/2/1");
	ck_assert_str_eq(find('r', "bob@y.example"),
			 QA "/1/0 " QA "/2/1 " QA "/2/0 " QA "/2/1 " QB "/1/0");
	ck_assert_str_eq(find('r', "nobody@y.example"), "");
	ck_assert_str_eq(find('q', "0000000000CCC"), "");

	/* bounded: two records per pass, only those older than the cut */
	p[0] = 2, p[1] = T0 + 25;
	ck_assert_int_eq(store_write(st, prune_fn, p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p[2], 2);
	ck_assert_str_eq(find('q', QB), "");
	ck_assert_str_eq(find('m', "<m2@example.org>"), "");
	ck_assert_str_eq(find('t', "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), "");	/* acceptance gone */
	ck_assert_str_eq(find('q', QA), QA "/2/1 " QA "/2/0 " QA "/2/1");
	ck_assert_int_eq(store_write(st, prune_fn, p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p[2], 1);
	ck_assert_int_eq(store_write(st, prune_fn, p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p[2], 0);
	ck_assert_str_eq(find('q', QA), QA "/2/0 " QA "/2/1");
	p[0] = 100, p[1] = UINT64_MAX;
	ck_assert_int_eq(store_write(st, prune_fn, p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p[2], 2);
	ck_assert_str_eq(find('q', QA), "");
	ck_assert_str_eq(find('r', "bob@y.example"), "");
	ck_assert_uint_eq(index_hist(0, &left), 0);
	ck_assert_uint_eq(left, 0);	/* pruning took the pending marks too */
}
END_TEST

/* put_many - *arg acceptances, later ones with lower queue ids, each to
 * r0@x.example ... r299@x.example */
static int put_many(struct store_txn *t, void *arg)
{
	static char rcpts[300 * 16];
	size_t len = 0;
	int rc;

	for (int r = 0; r < 300; r++)
		len += (size_t)snprintf(rcpts + len, sizeof(rcpts) - len, "%sr%d@x.example",
					r ? "\n" : "", r);
	for (int i = 0; i < *(int *)arg; i++) {
		char qid[QID_LEN + 1];
		struct hist_rec h;

		snprintf(qid, sizeof(qid), "00000000000%02u", (unsigned)(99 - i) % 100);
		h = accept_rec(qid, T0 + (uint64_t)i, 0xcc, "<many@example.org>", rcpts);
		if ((rc = store_hist_put(t, &h)) != 0)
			return rc;
	}
	return 0;
}

/* Attempts enough for three read batches (store_read_batches reads
 * STORE_FOREACH_BATCH, 512, a transaction): one a microsecond from T0. */
#define MANY_ATTEMPTS 1300

/* put_attempts - MANY_ATTEMPTS attempts, recipient index i at T0 + i */
static int put_attempts(struct store_txn *t, void *arg)
{
	int rc;

	(void)arg;
	for (uint32_t i = 0; i < MANY_ATTEMPTS; i++) {
		struct hist_rec h = attempt_rec("0000000000AAA", T0 + i, i, "r@x.example", RCPT_SENT);

		if ((rc = store_hist_put(t, &h)) != 0)
			return rc;
	}
	return 0;
}

/* A walk over a time range: how many, the index seen last, where it stops. */
struct range_walk {
	uint32_t n, first, last, stop_at;
};

/* range_fn - store_hist_foreach_range callback: time order, each once */
static int range_fn(const struct hist_rec *h, void *arg)
{
	struct range_walk *w = arg;

	ck_assert_uint_eq(h->time_us, T0 + h->idx);
	if (w->n == 0)
		w->first = h->idx;
	else
		ck_assert_uint_eq(h->idx, w->last + 1);
	w->last = h->idx;
	w->n++;
	return w->stop_at && w->n == w->stop_at ? 5 : 0;
}

/* store_hist_foreach_range goes on across read batches, from its first
 * time to the one before its last, and stops where fn does */
START_TEST(test_hist_range_batches)
{
	struct range_walk w = {0, 0, 0, 0};
	char err[512] = "";

	ck_assert_msg(store_write(st, put_attempts, NULL, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(store_hist_foreach_range(st, T0, T0 + MANY_ATTEMPTS, range_fn, &w), 0);
	ck_assert_uint_eq(w.n, MANY_ATTEMPTS);
	ck_assert_uint_eq(w.last, MANY_ATTEMPTS - 1);
	w = (struct range_walk){0, 0, 0, 0};
	ck_assert_int_eq(store_hist_foreach_range(st, T0 + 100, T0 + 1200, range_fn, &w), 0);
	ck_assert_uint_eq(w.n, 1100);
	ck_assert_uint_eq(w.first, 100);
	ck_assert_uint_eq(w.last, 1199);
	w = (struct range_walk){0, 0, 0, 700};
	ck_assert_int_eq(store_hist_foreach_range(st, T0 + 100, T0 + 1200, range_fn, &w), 5);
	ck_assert_uint_eq(w.n, 700);
	ck_assert_uint_eq(w.last, 799);
	w = (struct range_walk){0, 0, 0, 0};
	ck_assert_int_eq(store_hist_foreach_range(st, T0 + 5, T0 + 5, range_fn, &w), 0);
	ck_assert_uint_eq(w.n, 0);
}
END_TEST

/* One store_hist_index call adds about STORE_HIST_INDEX_ENTRIES entries:
 * records of 303 entries (q, t, m, 300 r) go four at a time. Lookups find
 * the indexed and the pending ones alike, in queue id order (here the
 * reverse of time order). */
START_TEST(test_hist_index_bounded)
{
	char err[256], want[512] = "";
	int count = 10;
	size_t left;

	ck_assert_int_eq(store_write(st, put_many, &count, err, sizeof(err)), 0);
	ck_assert_uint_eq(index_hist(0, &left), (STORE_HIST_INDEX_ENTRIES + 302) / 303);
	ck_assert_uint_eq(left, 10 - (STORE_HIST_INDEX_ENTRIES + 302) / 303);
	for (int i = 0; i < count; i++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s00000000000%02d/1/0",
			 i ? " " : "", 90 + i);
	ck_assert_str_eq(find('r', "r299@x.example"), want);
	ck_assert_str_eq(find('t', "cccccccccccccccccccccccccccccccc"), want);
	while (left > 0)
		index_hist(0, &left);
	ck_assert_str_eq(find('m', "<many@example.org>"), want);
}
END_TEST

/* A write that adds records and then bounds the backlog, as ternd's
 * commits do: b[0] records added (numbered from b[1] on), lag b[2],
 * catchup b[3] (b[5] 0: no bound); b[4] left waiting, b[6] the bound's
 * result. */
static int batch_fn(struct store_txn *t, void *arg)
{
	uint64_t *b = arg, before = store_hist_unindexed(t);
	char err[256];
	int rc;

	for (uint64_t i = 0; i < b[0]; i++) {
		char qid[QID_LEN + 1];
		struct hist_rec h;

		snprintf(qid, sizeof(qid), "000000000%04u", (unsigned)(b[1] + i));
		h = accept_rec(qid, T0 + b[1] + i, 0xdd, "<batch@example.org>", "b@x.example");
		if ((rc = store_hist_put(t, &h)) != 0)
			return rc;
	}
	b[1] += b[0];
	if (b[5])	/* asserted by the caller, outside the transaction */
		b[6] = (uint64_t)store_hist_index_over(t, b[2], b[3], before, &b[4], err, sizeof(err));
	return 0;
}

/* batch - a write of n records, bounded by lag and catchup; how many
 * wait after it */
static uint64_t batch(uint64_t *b, uint64_t n, uint64_t lag, uint64_t catchup)
{
	char err[256];
	size_t left;

	b[0] = n, b[2] = lag, b[3] = catchup, b[4] = UINT64_MAX, b[5] = 1, b[6] = 0;
	ck_assert_int_eq(store_write(st, batch_fn, b, err, sizeof(err)), 0);
	ck_assert_int_eq((int)b[6], 0);
	ck_assert_uint_eq(index_hist(UINT64_MAX, &left), 0);	/* a fresh count */
	ck_assert_uint_eq(b[4], left);
	return left;
}

/* backlog - a write of n records with no bound; how many wait after it */
static uint64_t backlog(uint64_t *b, uint64_t n)
{
	char err[256];
	size_t left;

	b[0] = n, b[5] = 0;
	ck_assert_int_eq(store_write(st, batch_fn, b, err, sizeof(err)), 0);
	index_hist(UINT64_MAX, &left);
	return left;
}

/* The backlog under load that never pauses: held at the lag, and a bigger
 * one (after a restart, say) shrinks by catchup a write. */
START_TEST(test_hist_index_over)
{
	uint64_t b[7] = {0};
	char qid[QID_LEN + 1], want[64];

	ck_assert_uint_eq(batch(b, 8, 10, 3), 8);	/* under the lag: nothing */
	ck_assert_uint_eq(batch(b, 8, 10, 3), 10);	/* over it: down to it */
	ck_assert_uint_eq(batch(b, 8, 10, 3), 10);
	ck_assert_uint_eq(backlog(b, 2), 12);	/* just over the lag... */
	ck_assert_uint_eq(batch(b, 2, 10, 3), 10);	/* ...not over lag + catchup: to the lag */
	ck_assert_uint_eq(backlog(b, 30), 40);	/* a backlog */
	ck_assert_uint_eq(batch(b, 2, 10, 3), 37);	/* 40 before: 3 fewer */
	ck_assert_uint_eq(batch(b, 2, 10, 3), 34);
	ck_assert_uint_eq(batch(b, 2, 10, 3), 31);
	for (int i = 0; i < 6; i++)
		batch(b, 2, 10, 3);
	ck_assert_uint_eq(batch(b, 2, 10, 3), 10);	/* 13 before: down to the lag */
	/* 300 records of 4 entries: more than one store_hist_index call */
	ck_assert_uint_eq(batch(b, 300, 10, 3), 10);
	/* the oldest were indexed, the newest wait: both are found */
	ck_assert_str_eq(find('q', "0000000000000"), "0000000000000/1/0");
	snprintf(qid, sizeof(qid), "000000000%04u", (unsigned)(b[1] - 1));
	snprintf(want, sizeof(want), "%s/1/0", qid);
	ck_assert_str_eq(find('q', qid), want);
}
END_TEST

/* jcollect - the verdicts found, space-separated */
static int jcollect(const struct journal_rec *r, void *arg)
{
	char *out = arg;

	snprintf(out + strlen(out), 256 - strlen(out), "%s%s:%s", out[0] ? " " : "", r->mta_qid,
		 r->verdict);
	return 0;
}

START_TEST(test_journal_store)
{
	struct journal_rec r[3] = {
		{T0, {0}, {0}, {0}, 1, "PQ1", "[192.0.2.1]", "a@x", "accept"},
		{T0 + 10, {0}, {0}, {0}, 2, "PQ2", "[192.0.2.2]", "b@x", "reject"},
		{T0 + 20, {0}, {0}, {0}, 1, "", "[192.0.2.3]", "c@x", "tag"},
	};
	unsigned char t1[16], zero[16] = {0};
	char jdir[4300], err[256], out[256];
	struct journal_db *db;

	memset(t1, 0x77, sizeof(t1));
	memcpy(r[0].trace_id, t1, 16);
	memcpy(r[2].trace_id, t1, 16);		/* r[1]: trace = no */
	snprintf(jdir, sizeof(jdir), "%s/journal", dir);
	db = journal_db_open(jdir, 0, err, sizeof(err));
	ck_assert_msg(db != NULL, "%s", err);
	ck_assert_int_eq(journal_db_append(db, r, 3, 0, err, sizeof(err)), 0);
	out[0] = '\0';
	ck_assert_int_eq(journal_db_find(db, 't', t1, 16, jcollect, out), 2);
	ck_assert_str_eq(out, "PQ1:accept :tag");
	out[0] = '\0';
	ck_assert_int_eq(journal_db_find(db, 'q', "PQ2", 3, jcollect, out), 1);
	ck_assert_str_eq(out, "PQ2:reject");
	ck_assert_int_eq(journal_db_find(db, 't', zero, 16, jcollect, out), 0);
	/* a batch may prune: records before T0 + 15 go, with their index */
	ck_assert_int_eq(journal_db_append(db, NULL, 0, T0 + 15, err, sizeof(err)), 0);
	out[0] = '\0';
	ck_assert_int_eq(journal_db_find(db, 't', t1, 16, jcollect, out), 1);
	ck_assert_str_eq(out, ":tag");
	ck_assert_int_eq(journal_db_find(db, 'q', "PQ2", 3, jcollect, out), 0);
	journal_db_close(&db);
	ck_assert_ptr_null(db);
	db = journal_db_open(jdir, 1, err, sizeof(err));	/* as ternq reads it */
	ck_assert_msg(db != NULL, "%s", err);
	ck_assert_int_eq(journal_db_find(db, 't', t1, 16, jcollect, out), 1);
	journal_db_close(&db);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("history");
	TCase *tc = tcase_create("codec"), *ts = tcase_create("store");

	tcase_add_test(tc, test_hist_codec);
	tcase_add_test(tc, test_journal_codec);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(ts, setup, teardown);
	tcase_add_loop_test(ts, test_hist_store, 0, 3);
	tcase_add_test(ts, test_hist_index_bounded);
	tcase_add_test(ts, test_hist_range_batches);
	tcase_add_test(ts, test_hist_index_over);
	tcase_add_test(ts, test_journal_store);
	tcase_set_timeout(ts, 60);
	suite_add_tcase(s, ts);
	return unit_run(s);
}
