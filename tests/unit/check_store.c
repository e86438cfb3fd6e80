/*
 * check_store - the LMDB queue store and its record codec.
 *
 * Store: round trips of every field, deletion with recipients and
 * schedule entries, the schedule peer by peer in due order and moved on
 * update (to another time or peer), the peers listed once however many
 * entries each has, peer names too long for a key refused, an old
 * layout rebuilt at open, segments, meta counters, counts, read-only
 * opening, failed writes. Each test has its own environment in a
 * mkdtemp() directory.
 *
 * Codec: decoders get hostile input (every truncation, wrong versions,
 * trailing octets, NUL inside strings, overlong lengths) and must reject
 * it; encoders must not write past the buffer they are given.
 *
 * Map growth is tested from a 256 KB map (ternd's queue_map_size), with
 * the map filling up inside a nested transaction.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lmdb.h>			/* only to write an old layout (layout1) */

#include "smtp_reply.h"
#include "store.h"
#include "store_codec.h"
#include "tmpstore.h"
#include "unit.h"

#define QA "0000000000AAA"
#define QB "0000000000BBB"
#define QC "0000000000CCC"

/* --- helpers --------------------------------------------------------- */

static char dir[4096], qdir[4200];
static struct store *st;

/* setup - a fresh store in a private directory */
static void setup(void)
{
	st = tmpstore_open(dir, sizeof(dir));
	snprintf(qdir, sizeof(qdir), "%s/queue", dir);	/* for the tests that reopen it */
}

/* teardown - close the store and remove its directory */
static void teardown(void)
{
	store_close(&st);
	ck_assert_ptr_null(st);
	tmpdir_remove(dir);
}

/* a message with every field set */
static void msg_init(struct q_msg *m, const char *qid, uint64_t seed)
{
	memset(m, 0, sizeof(*m));
	memcpy(m->qid, qid, QID_LEN + 1);
	m->arrival_us = 1700000000123456ULL + seed;
	m->size = 0x0102030405060708ULL + seed;
	m->flags = QMSG_DOTLINES | QMSG_8BIT | QMSG_SMTPUTF8 | QMSG_LMTP | 0x80000000u;
	m->body_type = 2;
	m->ret = 1;
	m->nrcpt = 0xfffffffe;
	m->nlive = 3;
	m->seg_id = 0x1122334455667788ULL;
	m->offset = 0x8877665544332211ULL;
	for (int i = 0; i < Q_DIGEST_BYTES; i++)
		m->digest[i] = (unsigned char)(0xff - i - seed);
	for (int i = 0; i < 16; i++)
		m->trace_id[i] = (unsigned char)(0x10 + i);
	for (int i = 0; i < 8; i++)
		m->span_id[i] = (unsigned char)(0xf0 + i);
	for (int i = 0; i < 16; i++)
		m->link_trace_id[i] = (unsigned char)(0x30 + i);
	for (int i = 0; i < 8; i++)
		m->link_span_id[i] = (unsigned char)(0xe0 + i);
	m->sender = "s\xc3\xa9nder+\xff\x80@ex\xc3\xa4mple.org";
	m->envid = "";
	m->helo = "helo.example.org";
	m->client = "192.0.2.1";
}

/* msg_eq - assert that every field of two messages agrees */
static void msg_eq(const struct q_msg *a, const struct q_msg *b)
{
	ck_assert_str_eq(a->qid, b->qid);
	ck_assert_uint_eq(a->arrival_us, b->arrival_us);
	ck_assert_uint_eq(a->size, b->size);
	ck_assert_uint_eq(a->flags, b->flags);
	ck_assert_uint_eq(a->body_type, b->body_type);
	ck_assert_uint_eq(a->ret, b->ret);
	ck_assert_uint_eq(a->nrcpt, b->nrcpt);
	ck_assert_uint_eq(a->nlive, b->nlive);
	ck_assert_uint_eq(a->seg_id, b->seg_id);
	ck_assert_uint_eq(a->offset, b->offset);
	ck_assert_mem_eq(a->digest, b->digest, Q_DIGEST_BYTES);
	ck_assert_mem_eq(a->trace_id, b->trace_id, 16);
	ck_assert_mem_eq(a->span_id, b->span_id, 8);
	ck_assert_mem_eq(a->link_trace_id, b->link_trace_id, 16);
	ck_assert_mem_eq(a->link_span_id, b->link_span_id, 8);
	ck_assert_str_eq(a->sender, b->sender);
	ck_assert_str_eq(a->envid, b->envid);
	ck_assert_str_eq(a->helo, b->helo);
	ck_assert_str_eq(a->client, b->client);
}

/* rcpt_eq - assert that every field of two recipients agrees */
static void rcpt_eq(const struct q_rcpt *a, const struct q_rcpt *b)
{
	ck_assert_uint_eq(a->idx, b->idx);
	ck_assert_uint_eq(a->state, b->state);
	ck_assert_uint_eq(a->notify, b->notify);
	ck_assert_uint_eq(a->attempts, b->attempts);
	ck_assert_uint_eq(a->next_us, b->next_us);
	ck_assert_str_eq(a->addr, b->addr);
	ck_assert_str_eq(a->orcpt, b->orcpt);
	ck_assert_str_eq(a->peer, b->peer);
	ck_assert_str_eq(a->reply, b->reply);
	ck_assert_uint_eq(a->flags, b->flags);
}

/* one message and its recipients, to be written */
struct put_arg {
	const struct q_msg *m;
	const struct q_rcpt *r;
	size_t n;
	int calls;
};

/* put_fn - write a message and its recipients */
static int put_fn(struct store_txn *t, void *arg)
{
	struct put_arg *a = arg;
	int rc;

	a->calls++;
	if ((rc = store_put_msg(t, a->m)) != 0)
		return rc;
	for (size_t i = 0; i < a->n; i++)
		if ((rc = store_put_rcpt(t, a->m->qid, &a->r[i])) != 0)
			return rc;
	return 0;
}

/* put - write a message and its recipients, asserting success */
static void put(const struct q_msg *m, const struct q_rcpt *r, size_t n)
{
	struct put_arg a = {m, r, n, 0};
	char err[512] = "";

	ck_assert_msg(store_write(st, put_fn, &a, err, sizeof(err)) == 0, "store_write: %s", err);
	ck_assert_int_eq(a.calls, 1);
}

/* del_fn - delete the message named by arg */
static int del_fn(struct store_txn *t, void *arg)
{
	return store_del_msg(t, arg);
}

/* del - delete a message, asserting success */
static void del(const char *qid)
{
	char err[512] = "";

	ck_assert_msg(store_write(st, del_fn, (void *)qid, err, sizeof(err)) == 0, "%s", err);
}

/* one schedule entry as store_foreach_due reports it, and its peer */
struct due {
	uint64_t next;
	char qid[QID_LEN + 1];
	uint32_t idx;
	char peer[512];
};

struct due_list {
	struct due e[64];
	size_t n;
	size_t stop_after;		/* 0: never stop */
	const char *peer;		/* whose entries are walked */
	uint64_t until;
};

/* due_fn - collect schedule entries */
static int due_fn(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	struct due_list *l = arg;

	ck_assert_uint_lt(l->n, N_ELEMENTS(l->e));
	l->e[l->n].next = next_us;
	ck_assert_uint_eq(strlen(qid), QID_LEN);
	memcpy(l->e[l->n].qid, qid, QID_LEN + 1);
	l->e[l->n].idx = idx;
	ck_assert_uint_lt(strlen(l->peer), sizeof(l->e[0].peer));
	strcpy(l->e[l->n].peer, l->peer);
	l->n++;
	return l->stop_after && l->n == l->stop_after ? 42 : 0;
}

/* rcpts_of - store_peer_rcpts, asserted to succeed */
static uint64_t rcpts_of(const char *peer)
{
	uint64_t n = 12345;

	ck_assert_int_eq(store_peer_rcpts(st, peer, &n), 0);
	return n;
}

/* peer_fn - collect a listed peer's entries due by l->until; all of
 * them (no until): as many as the peer's count says */
static int peer_fn(const char *peer, void *arg)
{
	struct due_list *l = arg;
	size_t before = l->n;

	l->peer = peer;
	ck_assert_int_eq(store_foreach_due(st, peer, l->until, due_fn, l), 0);
	if (l->until == UINT64_MAX)
		ck_assert_uint_eq(rcpts_of(peer), l->n - before);
	return 0;
}

/* due_check - the entries collected are exactly these, in order */
static void due_check(const struct due_list *l, const struct due *want, size_t n)
{
	ck_assert_uint_eq(l->n, n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_eq(l->e[i].next, want[i].next);
		ck_assert_str_eq(l->e[i].qid, want[i].qid);
		ck_assert_uint_eq(l->e[i].idx, want[i].idx);
		ck_assert_str_eq(l->e[i].peer, want[i].peer);
	}
}

/* due_expect - the schedule up to until_us is exactly these entries:
 * the peers in name order, each one's entries in time order */
static void due_expect(uint64_t until_us, const struct due *want, size_t n)
{
	struct due_list l = {.n = 0, .until = until_us};

	ck_assert_int_eq(store_foreach_sched_peer(st, peer_fn, &l), 0);
	due_check(&l, want, n);
}

/* peer_expect - one peer's entries up to until_us are exactly these */
static void peer_expect(const char *peer, uint64_t until_us, const struct due *want, size_t n)
{
	struct due_list l = {.n = 0, .peer = peer};

	ck_assert_int_eq(store_foreach_due(st, peer, until_us, due_fn, &l), 0);
	due_check(&l, want, n);
	if (until_us == UINT64_MAX)
		ck_assert_uint_eq(rcpts_of(peer), n);
}

/* the peers store_foreach_sched_peer lists */
struct peers {
	char name[8][512];
	size_t n;
	size_t stop_after;		/* 0: never stop */
};

/* peers_fn - collect the peers listed */
static int peers_fn(const char *peer, void *arg)
{
	struct peers *p = arg;

	ck_assert_uint_lt(p->n, N_ELEMENTS(p->name));
	ck_assert_uint_lt(strlen(peer), sizeof(p->name[0]));
	strcpy(p->name[p->n++], peer);
	return p->stop_after && p->n == p->stop_after ? 7 : 0;
}

/* peers_expect - the schedule has entries for exactly these peers */
static void peers_expect(const char *const *want, size_t n)
{
	struct peers p = {.n = 0};

	ck_assert_int_eq(store_foreach_sched_peer(st, peers_fn, &p), 0);
	ck_assert_uint_eq(p.n, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_str_eq(p.name[i], want[i]);
}

/* count - store_count, asserted to succeed */
static uint64_t count(void)
{
	uint64_t n = 12345;

	ck_assert_int_eq(store_count(st, &n), 0);
	return n;
}

/* --- store ------------------------------------------------------------ */

START_TEST(test_roundtrip)
{
	struct q_msg m, got;
	/* out of index order on purpose; idx 256 sorts after 2 (big-endian keys) */
	struct q_rcpt r[] = {
		{256, RCPT_DEFERRED, 0x0e, 7, 1700000000999999ULL, "late@example.org", "", "mx2",
		 "451 4.3.0 try again later", 0},
		{0, RCPT_QUEUED, 0x01, 0, 1700000000123456ULL,
		 "\xc3\xbc\x62\x65r@\xc3\xa9xample.org", "rfc822;a+2Bb@example.org", "mx1.example", "", RCPT_MAYBE_SENT},
		{2, RCPT_SENT, 0, 1, 0, "", "", "", "", 0},
		{1, RCPT_BOUNCED, 0x0e, 0xffffffff, UINT64_MAX, "b\x80\xff@x", "utf-8;b\\x{FC}", "mx1.example",
		 "550 5.1.1 no such user", 0},
	};
	static const size_t order[] = {1, 3, 2, 0};
	struct q_rcpt *rcpts = NULL;
	size_t n = 99;

	msg_init(&m, QA, 0);
	put(&m, r, N_ELEMENTS(r));
	memset(&got, 0x5a, sizeof(got));
	ck_assert_int_eq(store_get(st, QA, &got, &rcpts, &n), 0);
	msg_eq(&got, &m);
	ck_assert_uint_eq(n, N_ELEMENTS(r));
	for (size_t i = 0; i < n; i++)
		rcpt_eq(&rcpts[i], &r[order[i]]);
	q_rcpts_free(&rcpts, n);
	ck_assert_ptr_null(rcpts);
	q_msg_clear(&got);
	ck_assert_ptr_null(got.sender);

	/* without recipients */
	ck_assert_int_eq(store_get(st, QA, &got, NULL, NULL), 0);
	msg_eq(&got, &m);
	q_msg_clear(&got);
	ck_assert_uint_eq(count(), 1);
}
END_TEST

START_TEST(test_get_missing)
{
	struct q_msg m, got;
	struct q_rcpt *rcpts = NULL;
	size_t n = 0;

	ck_assert_int_eq(store_get(st, QA, &got, &rcpts, &n), 1);	/* empty store */
	msg_init(&m, QA, 0);
	put(&m, NULL, 0);
	ck_assert_int_eq(store_get(st, QB, &got, &rcpts, &n), 1);
	ck_assert_int_eq(store_get(st, QB, &got, NULL, NULL), 1);
	ck_assert_int_eq(store_get(st, "0000000000AA", &got, NULL, NULL), 1);	/* a prefix */
	ck_assert_int_eq(store_get(st, QA "0", &got, NULL, NULL), 1);
	ck_assert_int_eq(store_get(st, "", &got, NULL, NULL), 1);
	ck_assert_int_eq(store_get(st, QA, &got, &rcpts, &n), 0);
	ck_assert_uint_eq(n, 0);
	q_rcpts_free(&rcpts, n);
	q_msg_clear(&got);
}
END_TEST

/* three messages with recipients, some live, due times interleaved */
static struct q_rcpt ra[] = {
	{0, RCPT_QUEUED, 0, 0, 300, "a0@x", "", "pa", "", 0},
	{1, RCPT_SENT, 0, 1, 100, "a1@x", "", "pa", "", 0},
	{2, RCPT_DEFERRED, 0, 2, 600, "a2@x", "", "pa2", "451 later", 0},
};
static struct q_rcpt rb[] = {
	{0, RCPT_DEFERRED, 0, 1, 200, "b0@x", "", "pb", "", 0},
	{1, RCPT_QUEUED, 0, 0, 500, "b1@x", "", "pb", "", 0},
	{2, RCPT_BOUNCED, 0, 3, 50, "b2@x", "", "pb", "550 no", 0},
};
static struct q_rcpt rc_[] = {
	{0, RCPT_QUEUED, 0, 0, 400, "c0@x", "", "pc", "", 0},
	{1, RCPT_QUEUED, 0, 0, 300, "c1@x", "", "pc", "", 0},
	{7, RCPT_QUEUED, 0, 0, 100, "c7@x", "", "pc", "", 0},
};

/* put_three - messages QA, QB, QC with the recipients above */
static void put_three(void)
{
	struct q_msg m;

	msg_init(&m, QB, 2);	/* not in qid order */
	put(&m, rb, N_ELEMENTS(rb));
	msg_init(&m, QC, 3);
	put(&m, rc_, N_ELEMENTS(rc_));
	msg_init(&m, QA, 1);
	put(&m, ra, N_ELEMENTS(ra));
}

/* rcpts_expect - qid has exactly these recipients */
static void rcpts_expect(const char *qid, const struct q_rcpt *want, size_t nwant)
{
	struct q_msg m;
	struct q_rcpt *r;
	size_t n;

	ck_assert_int_eq(store_get(st, qid, &m, &r, &n), 0);
	ck_assert_uint_eq(n, nwant);
	for (size_t i = 0; i < n; i++)
		rcpt_eq(&r[i], &want[i]);
	q_rcpts_free(&r, n);
	q_msg_clear(&m);
}

START_TEST(test_schedule_order)
{
	static const struct due all[] = {
		{300, QA, 0, "pa"}, {600, QA, 2, "pa2"}, {200, QB, 0, "pb"}, {500, QB, 1, "pb"},
		{100, QC, 7, "pc"}, {300, QC, 1, "pc"}, {400, QC, 0, "pc"},
	};
	static const struct due by300[] = {
		{300, QA, 0, "pa"}, {200, QB, 0, "pb"}, {100, QC, 7, "pc"}, {300, QC, 1, "pc"},
	};
	static const char *const peers[] = {"pa", "pa2", "pb", "pc"};
	const struct due *pc = &all[4];
	struct due_list l = {.n = 0, .stop_after = 2, .peer = "pc"};
	struct peers p = {.n = 0, .stop_after = 2};

	put_three();
	ck_assert_uint_eq(count(), 3);
	due_expect(UINT64_MAX, all, N_ELEMENTS(all));
	due_expect(300, by300, N_ELEMENTS(by300));
	/* one peer's: only its own, in time order, up to until (inclusive) */
	peer_expect("pc", UINT64_MAX, pc, 3);
	peer_expect("pc", 400, pc, 3);
	peer_expect("pc", 300, pc, 2);
	peer_expect("pc", 299, pc, 1);
	peer_expect("pc", 99, pc, 0);
	peer_expect("pa", UINT64_MAX, &all[0], 1);	/* not pa2's */
	peer_expect("pa2", 599, NULL, 0);
	/* no entries: a prefix of a peer's name, or one sorting between */
	peer_expect("p", UINT64_MAX, NULL, 0);
	peer_expect("pa2x", UINT64_MAX, NULL, 0);
	peer_expect("", UINT64_MAX, NULL, 0);
	peers_expect(peers, N_ELEMENTS(peers));
	/* a callback's nonzero return stops the walk and is returned */
	ck_assert_int_eq(store_foreach_due(st, "pc", UINT64_MAX, due_fn, &l), 42);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_int_eq(store_foreach_sched_peer(st, peers_fn, &p), 7);
	ck_assert_uint_eq(p.n, 2);
}
END_TEST

START_TEST(test_del_msg)
{
	static const struct due without_b[] = {
		{300, QA, 0, "pa"}, {600, QA, 2, "pa2"}, {100, QC, 7, "pc"},
		{300, QC, 1, "pc"}, {400, QC, 0, "pc"},
	};
	static const struct due only_a[] = {{300, QA, 0, "pa"}, {600, QA, 2, "pa2"}};
	static const char *const peers[] = {"pa", "pa2", "pc"};
	struct q_msg m;

	put_three();
	del(QB);				/* in the middle */
	ck_assert_int_eq(store_get(st, QB, &m, NULL, NULL), 1);
	ck_assert_uint_eq(count(), 2);
	rcpts_expect(QA, ra, N_ELEMENTS(ra));	/* neighbours untouched */
	rcpts_expect(QC, rc_, N_ELEMENTS(rc_));
	due_expect(UINT64_MAX, without_b, N_ELEMENTS(without_b));
	peer_expect("pb", UINT64_MAX, NULL, 0);
	peers_expect(peers, N_ELEMENTS(peers));	/* pb had only QB's */

	del(QC);				/* the last records of the tables */
	ck_assert_int_eq(store_get(st, QC, &m, NULL, NULL), 1);
	rcpts_expect(QA, ra, N_ELEMENTS(ra));
	due_expect(UINT64_MAX, only_a, N_ELEMENTS(only_a));

	del(QB);				/* gone already: not an error */
	del(QA);				/* the only one */
	ck_assert_uint_eq(count(), 0);
	due_expect(UINT64_MAX, NULL, 0);
	peers_expect(NULL, 0);

	/* recipients of a deleted message do not come back with a new record */
	msg_init(&m, QA, 9);
	put(&m, NULL, 0);
	rcpts_expect(QA, NULL, 0);
}
END_TEST

START_TEST(test_del_first)
{
	static const struct due want[] = {
		{200, QB, 0, "pb"}, {500, QB, 1, "pb"}, {100, QC, 7, "pc"},
		{300, QC, 1, "pc"}, {400, QC, 0, "pc"},
	};

	put_three();
	del(QA);				/* the first records of the tables */
	rcpts_expect(QB, rb, N_ELEMENTS(rb));
	rcpts_expect(QC, rc_, N_ELEMENTS(rc_));
	due_expect(UINT64_MAX, want, N_ELEMENTS(want));
}
END_TEST

/* many recipients: the delete walks across LMDB pages */
START_TEST(test_del_many)
{
	static struct q_rcpt r[2000];
	static char addr[2000][32];
	struct q_msg m;
	uint64_t n = 0;

	for (size_t i = 0; i < N_ELEMENTS(r); i++) {
		snprintf(addr[i], sizeof(addr[i]), "user%zu@example.org", i);
		r[i] = (struct q_rcpt){(uint32_t)i, i % 3 == 2 ? RCPT_SENT : RCPT_QUEUED, 0, 0,
				       1000 + i % 7, addr[i], "", "peer", "", 0};
	}
	msg_init(&m, QB, 0);
	put(&m, r, N_ELEMENTS(r));
	msg_init(&m, QA, 0);
	put(&m, r, 3);
	msg_init(&m, QC, 0);
	put(&m, r, 3);
	rcpts_expect(QB, r, N_ELEMENTS(r));
	del(QB);
	rcpts_expect(QA, r, 3);
	rcpts_expect(QC, r, 3);
	ck_assert_int_eq(store_count(st, &n), 0);
	ck_assert_uint_eq(n, 2);
	{
		static const struct due want[] = {
			{1000, QA, 0, "peer"}, {1000, QC, 0, "peer"}, {1001, QA, 1, "peer"},
			{1001, QC, 1, "peer"},
		};

		due_expect(UINT64_MAX, want, N_ELEMENTS(want));
	}
}
END_TEST

/* an update of one recipient */
struct rcpt_arg {
	const char *qid;
	struct q_rcpt r;
};

/* rcpt_fn - store_put_rcpt over the recipient's stored record */
static int rcpt_fn(struct store_txn *t, void *arg)
{
	struct rcpt_arg *a = arg;

	return store_put_rcpt(t, a->qid, &a->r);
}

/* rcpt_put - write one recipient, asserting success */
static void rcpt_put(struct rcpt_arg *a)
{
	char err[256] = "";

	ck_assert_msg(store_write(st, rcpt_fn, a, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(test_move_schedule)
{
	struct q_rcpt r[] = {
		{0, RCPT_QUEUED, 0, 0, 500, "a@x", "", "p0", "", 0},
		{1, RCPT_QUEUED, 0, 0, 500, "b@x", "", "p1", "", 0},
	};
	static const char *const p1_p9[] = {"p1", "p9"};
	struct q_msg m;
	struct rcpt_arg a = {QA, {0, RCPT_DEFERRED, 0, 1, 200, "a@x", "", "p0", "451 x", 0}};

	msg_init(&m, QA, 0);
	put(&m, r, 2);
	{
		static const struct due want[] = {{500, QA, 0, "p0"}, {500, QA, 1, "p1"}};

		due_expect(UINT64_MAX, want, 2);
	}
	/* deferred to an earlier time: the entry moves, none is left behind */
	rcpt_put(&a);
	{
		static const struct due want[] = {{200, QA, 0, "p0"}, {500, QA, 1, "p1"}};

		due_expect(UINT64_MAX, want, 2);
	}
	/* routed to another peer, due at the same time (as reroute_write
	 * does): the old peer no longer lists it, the new one does */
	a.r.peer = "p9";
	rcpt_put(&a);
	{
		static const struct due want[] = {{500, QA, 1, "p1"}, {200, QA, 0, "p9"}};

		due_expect(UINT64_MAX, want, 2);
		peer_expect("p0", UINT64_MAX, NULL, 0);
		peer_expect("p9", UINT64_MAX, &want[1], 1);
		peers_expect(p1_p9, 2);
	}
	/* later; written twice, one entry */
	a.r.next_us = 900;
	a.r.attempts = 2;
	rcpt_put(&a);
	rcpt_put(&a);
	{
		static const struct due want[] = {{500, QA, 1, "p1"}, {900, QA, 0, "p9"}};

		due_expect(UINT64_MAX, want, 2);
	}
	/* final: out of the schedule, the record kept */
	a.r.state = RCPT_SENT;
	a.r.reply = "250 ok";
	rcpt_put(&a);
	{
		static const struct due want[] = {{500, QA, 1, "p1"}};
		struct q_rcpt now[2];

		due_expect(UINT64_MAX, want, 1);
		now[0] = a.r;
		now[1] = r[1];
		rcpts_expect(QA, now, 2);
	}
	/* a delete takes the entry from the peer the record names now */
	a.r = (struct q_rcpt){1, RCPT_DEFERRED, 0, 1, 700, "b@x", "", "p2", "451 y", 0};
	rcpt_put(&a);
	{
		static const struct due want[] = {{700, QA, 1, "p2"}};

		due_expect(UINT64_MAX, want, 1);
	}
	del(QA);
	due_expect(UINT64_MAX, NULL, 0);
	peers_expect(NULL, 0);
}
END_TEST

/* a live recipient is scheduled whatever the length of its peer's name,
 * up to what an LMDB key holds (511 octets with the NUL, due time, queue
 * id and index); a longer name is refused, never cut */
START_TEST(test_long_peer)
{
	static char peer[511 - (1 + 8 + QID_LEN + 4) + 2];	/* the longest, one more, NUL */
	const size_t max = sizeof(peer) - 2;
	struct q_rcpt r = {0, RCPT_QUEUED, 0, 0, 10, "a@x", "", peer, "", 0};
	struct due want = {10, QA, 0, ""};
	struct q_msg m, got;
	struct put_arg a;
	char err[256] = "";

	memset(peer, 'p', max);
	memcpy(want.peer, peer, max + 1);
	msg_init(&m, QA, 0);
	put(&m, &r, 1);
	due_expect(UINT64_MAX, &want, 1);
	peer_expect(peer, UINT64_MAX, &want, 1);

	peer[max] = 'p';			/* one octet too long */
	msg_init(&m, QB, 0);
	a = (struct put_arg){&m, &r, 1, 0};
	ck_assert_int_eq(store_write(st, put_fn, &a, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "queue database: Invalid argument");
	ck_assert_int_eq(store_get(st, QB, &got, NULL, NULL), 1);	/* nothing of it */
	peer_expect(peer, UINT64_MAX, NULL, 0);
	due_expect(UINT64_MAX, &want, 1);
	/* a final recipient has no schedule entry, but a peer longer than one
	 * can hold was never configured: the record reads back as damaged */
	r.state = RCPT_SENT;
	put(&m, &r, 1);
	ck_assert_int_eq(store_get(st, QB, &got, NULL, NULL), 0);
	q_msg_clear(&got);
	{
		struct q_rcpt *rr = NULL;
		size_t nn = 9;

		ck_assert_int_eq(store_get(st, QB, &got, &rr, &nn), STORE_DAMAGED);
		ck_assert_ptr_null(rr);
		ck_assert_uint_eq(nn, 0);
	}
}
END_TEST

/* a peer's due walk in bulk, counted */
struct due_count {
	size_t peer;			/* the walked peer's index */
	size_t n;
	uint64_t last;
};

/* count_fn - check and count a due entry: the walked peer's (recipient i
 * of each message goes to peer i % 4), no earlier than the one before */
static int count_fn(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	struct due_count *c = arg;

	(void)qid;
	ck_assert_uint_eq(idx % 4, c->peer);
	ck_assert_uint_ge(next_us, c->last);
	c->last = next_us;
	c->n++;
	return 0;
}

/* thousands of entries per peer over many LMDB pages: each peer listed
 * once (by skipping past its entries), names that prefix others included */
START_TEST(test_sched_peers_many)
{
	static const char *const peers[] = {"", "mx", "mx-2", "mx2"};
	static const char *const qids[] = {QA, QB, QC};
	static struct q_rcpt r[4000];
	static char addr[4000][24];
	const uint64_t until = 3500;
	size_t total[4] = {0}, due_by[4] = {0};
	struct q_msg m;

	for (size_t i = 0; i < N_ELEMENTS(r); i++) {
		snprintf(addr[i], sizeof(addr[i]), "u%zu@example.org", i);
		r[i] = (struct q_rcpt){(uint32_t)i, i % 5 == 4 ? RCPT_SENT : RCPT_QUEUED, 0, 0,
				       1000 + i * 7919 % 5000, addr[i], "", (char *)peers[i % 4], "", 0};
		if (r[i].state == RCPT_QUEUED) {
			total[i % 4] += N_ELEMENTS(qids);
			due_by[i % 4] += r[i].next_us <= until ? N_ELEMENTS(qids) : 0;
		}
	}
	for (size_t q = 0; q < N_ELEMENTS(qids); q++) {
		msg_init(&m, qids[q], q);
		put(&m, r, N_ELEMENTS(r));
	}
	peers_expect(peers, N_ELEMENTS(peers));
	for (size_t p = 0; p < N_ELEMENTS(peers); p++) {
		struct due_count all = {p, 0, 0}, some = {p, 0, 0};

		ck_assert_int_eq(store_foreach_due(st, peers[p], UINT64_MAX, count_fn, &all), 0);
		ck_assert_uint_eq(all.n, total[p]);
		ck_assert_uint_eq(rcpts_of(peers[p]), total[p]);	/* "" too */
		ck_assert_int_eq(store_foreach_due(st, peers[p], until, count_fn, &some), 0);
		ck_assert_uint_eq(some.n, due_by[p]);
		ck_assert_uint_lt(some.n, all.n);
	}
}
END_TEST

/* segment operations, and what a write transaction reads back */
struct seg_arg {
	int op;				/* 0 put, 1 get, 2 del */
	struct store_seg seg;
	int rc;
};

/* seg_fn - one segment operation */
static int seg_fn(struct store_txn *t, void *arg)
{
	struct seg_arg *a = arg;

	switch (a->op) {
	case 0:
		return store_put_seg(t, &a->seg);
	case 1:
		a->rc = store_txn_get_seg(t, a->seg.id, &a->seg);
		return 0;
	default:
		return store_del_seg(t, a->seg.id);
	}
}

/* seg_op - run one segment operation; the get's result */
static int seg_op(int op, struct store_seg *seg)
{
	struct seg_arg a = {op, *seg, -99};
	char err[256];

	ck_assert_int_eq(store_write(st, seg_fn, &a, err, sizeof(err)), 0);
	*seg = a.seg;
	return a.rc;
}

struct seg_list {
	struct store_seg s[8];
	size_t n;
};

/* seg_collect - store_foreach_seg callback */
static int seg_collect(const struct store_seg *seg, void *arg)
{
	struct seg_list *l = arg;

	ck_assert_uint_lt(l->n, N_ELEMENTS(l->s));
	l->s[l->n++] = *seg;
	return 0;
}

START_TEST(test_segments)
{
	struct store_seg segs[] = {
		{256, 1ULL << 40, 0xffffffff, 1, (1ULL << 40) - 1},
		{1, 100, 2, 0, 60},
		{2, 0, 0, 0, 0},
		/* as an older release writes it: no octet count */
		{0x0102030405060708ULL, 77, 1, 1, STORE_SEG_BYTES_UNKNOWN},
	};
	static const size_t order[] = {1, 2, 0, 3};
	struct seg_list l = {.n = 0};
	struct store_seg s;

	for (size_t i = 0; i < N_ELEMENTS(segs); i++)
		seg_op(0, &segs[i]);
	ck_assert_int_eq(store_foreach_seg(st, seg_collect, &l), 0);
	ck_assert_uint_eq(l.n, N_ELEMENTS(segs));
	for (size_t i = 0; i < l.n; i++) {
		const struct store_seg *w = &segs[order[i]];

		ck_assert_uint_eq(l.s[i].id, w->id);
		ck_assert_uint_eq(l.s[i].length, w->length);
		ck_assert_uint_eq(l.s[i].live, w->live);
		ck_assert_int_eq(l.s[i].closed, w->closed);
		ck_assert_uint_eq(l.s[i].live_bytes, w->live_bytes);
	}
	/* read inside a write transaction */
	memset(&s, 0, sizeof(s));
	s.id = 256;
	ck_assert_int_eq(seg_op(1, &s), 0);
	ck_assert_uint_eq(s.length, 1ULL << 40);
	ck_assert_uint_eq(s.live, 0xffffffff);
	ck_assert_int_eq(s.closed, 1);
	/* replace, delete, miss */
	s = (struct store_seg){1, 150, 1, 1, 40};
	seg_op(0, &s);
	s = (struct store_seg){.id = 2};
	seg_op(2, &s);
	s = (struct store_seg){.id = 2};
	ck_assert_int_eq(seg_op(1, &s), 1);
	s = (struct store_seg){.id = 2};
	seg_op(2, &s);			/* deleting a missing segment is fine */
	s = (struct store_seg){.id = 3};
	ck_assert_int_eq(seg_op(1, &s), 1);
	l.n = 0;
	ck_assert_int_eq(store_foreach_seg(st, seg_collect, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_uint_eq(l.s[0].id, 1);
	ck_assert_uint_eq(l.s[0].length, 150);
	ck_assert_uint_eq(l.s[0].live, 1);
	ck_assert_int_eq(l.s[0].closed, 1);
	ck_assert_uint_eq(l.s[0].live_bytes, 40);
	ck_assert_uint_eq(l.s[1].id, 256);
	ck_assert_uint_eq(l.s[2].id, 0x0102030405060708ULL);
	ck_assert_uint_eq(l.s[2].live_bytes, STORE_SEG_BYTES_UNKNOWN);
	/* a count dropped goes (its key with it), a record read alone stays */
	s = (struct store_seg){1, 150, 1, 1, STORE_SEG_BYTES_UNKNOWN};
	seg_op(0, &s);
	s = (struct store_seg){.id = 1};
	ck_assert_int_eq(seg_op(1, &s), 0);
	ck_assert_uint_eq(s.live_bytes, STORE_SEG_BYTES_UNKNOWN);
	ck_assert_uint_eq(s.length, 150);
	l.n = 0;
	ck_assert_int_eq(store_foreach_seg(st, seg_collect, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_uint_eq(l.s[2].id, 0x0102030405060708ULL);
}
END_TEST

/* store_seg_count: in and out, never below 0, unknown stays unknown */
START_TEST(test_seg_count)
{
	struct store_seg s = {1, 100, 2, 0, 60};

	store_seg_count(&s, 1, 40);
	ck_assert_uint_eq(s.live, 3);
	ck_assert_uint_eq(s.live_bytes, 100);
	store_seg_count(&s, -1, -30);
	ck_assert_uint_eq(s.live, 2);
	ck_assert_uint_eq(s.live_bytes, 70);
	store_seg_count(&s, -5, -500);
	ck_assert_uint_eq(s.live, 0);
	ck_assert_uint_eq(s.live_bytes, 0);
	s.live_bytes = STORE_SEG_BYTES_UNKNOWN;
	store_seg_count(&s, 2, 10);
	ck_assert_uint_eq(s.live, 2);
	ck_assert_uint_eq(s.live_bytes, STORE_SEG_BYTES_UNKNOWN);
	store_seg_count(&s, -1, -10);
	ck_assert_uint_eq(s.live_bytes, STORE_SEG_BYTES_UNKNOWN);
}
END_TEST

/* meta_fn - set the counters named in a NULL-terminated list */
struct meta_arg {
	const char *name[4];
	uint64_t value[4];
};

static int meta_fn(struct store_txn *t, void *arg)
{
	struct meta_arg *a = arg;
	int rc;

	for (int i = 0; a->name[i]; i++)
		if ((rc = store_put_meta(t, a->name[i], a->value[i])) != 0)
			return rc;
	return 0;
}

START_TEST(test_meta)
{
	struct meta_arg a = {{"last_qid", "next_seg", "next", NULL}, {UINT64_MAX - 1, 7, 3}};
	struct meta_arg b = {{"next_seg", NULL}, {8}};
	char err[256];
	uint64_t v = 99;

	ck_assert_int_eq(store_get_meta(st, "last_qid", &v), 0);
	ck_assert_uint_eq(v, 0);		/* never set */
	ck_assert_int_eq(store_write(st, meta_fn, &a, err, sizeof(err)), 0);
	ck_assert_int_eq(store_get_meta(st, "last_qid", &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX - 1);
	ck_assert_int_eq(store_get_meta(st, "next_seg", &v), 0);
	ck_assert_uint_eq(v, 7);
	v = 99;
	ck_assert_int_eq(store_get_meta(st, "next", &v), 0);
	ck_assert_uint_eq(v, 3);
	ck_assert_int_eq(store_write(st, meta_fn, &b, err, sizeof(err)), 0);
	ck_assert_int_eq(store_get_meta(st, "next_seg", &v), 0);
	ck_assert_uint_eq(v, 8);
	v = 99;
	ck_assert_int_eq(store_get_meta(st, "next_se", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_uint_eq(count(), 0);		/* meta are not messages */
}
END_TEST

/* nested_child - put meta "child" = 2, then fail with *arg (0: succeed) */
static int nested_child(struct store_txn *t, void *arg)
{
	int rc = store_put_meta(t, "child", 2);

	return rc ? rc : *(int *)arg;
}

/* nested_fn - put meta "parent" = 1, then the child with *arg; the
 * parent commits whatever the child did */
static int nested_fn(struct store_txn *t, void *arg)
{
	char err[256];
	int rc = store_put_meta(t, "parent", 1);

	ck_assert_int_eq(rc, 0);
	rc = store_nested(t, nested_child, arg, err, sizeof(err));
	if (*(int *)arg == 0) {
		ck_assert_int_eq(rc, 0);
		ck_assert_str_eq(err, "");
	} else {
		ck_assert_int_eq(rc, EACCES);
		ck_assert_str_eq(err, "queue database: Permission denied");
	}
	return 0;
}

/* A nested write's changes join its parent's if it succeeds and are
 * dropped if it fails; the parent commits either way. */
START_TEST(test_nested)
{
	char err[256];
	uint64_t v = 99;
	int fail = EACCES, ok = 0;

	ck_assert_int_eq(store_write(st, nested_fn, &fail, err, sizeof(err)), 0);
	ck_assert_int_eq(store_get_meta(st, "parent", &v), 0);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(store_get_meta(st, "child", &v), 0);
	ck_assert_uint_eq(v, 0);		/* dropped */
	ck_assert_int_eq(store_write(st, nested_fn, &ok, err, sizeof(err)), 0);
	ck_assert_int_eq(store_get_meta(st, "child", &v), 0);
	ck_assert_uint_eq(v, 2);
}
END_TEST

/* notice_fn - put two notifications, one with an empty body; drop "gone" */
static int notice_fn(struct store_txn *t, void *arg)
{
	const char *body = arg;
	int rc;

	if ((rc = store_put_notice(t, "QID2.2", "a@example.org", 2, body, strlen(body))) != 0
	    || (rc = store_put_notice(t, "QID1.1", "", 0, "", 0)) != 0
	    || (rc = store_put_notice(t, "gone", "x@example.org", 0, "x", 1)) != 0)
		return rc;
	return store_del_notice(t, "gone");
}

/* notice_put_fn - put one notification under the id arg */
static int notice_put_fn(struct store_txn *t, void *arg)
{
	return store_put_notice(t, arg, "r@example.org", 0, "b", 1);
}

/* notice_del_fn - forget one notification */
static int notice_del_fn(struct store_txn *t, void *arg)
{
	return store_del_notice(t, arg);
}

struct notice_list {
	char id[4][STORE_NOTICE_ID_MAX + 1];
	size_t n;
};

/* notice_collect - store_foreach_notice callback */
static int notice_collect(const char *id, void *arg)
{
	struct notice_list *l = arg;

	ck_assert_uint_lt(l->n, 4);
	snprintf(l->id[l->n++], sizeof(l->id[0]), "%s", id);
	return 0;
}

START_TEST(test_notices)
{
	char err[256], *rcpt = NULL, *body = NULL, long_id[STORE_NOTICE_ID_MAX + 2];
	const char *dsn = "From: MAILER-DAEMON\r\n\r\nbinary \x01\xff body\r\n";
	struct notice_list l = {.n = 0};
	uint8_t flags = 0;
	size_t len = 0;

	ck_assert_int_eq(store_write(st, notice_fn, (void *)dsn, err, sizeof(err)), 0);
	ck_assert_int_eq(store_foreach_notice(st, notice_collect, &l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.id[0], "QID1.1");	/* in key order */
	ck_assert_str_eq(l.id[1], "QID2.2");
	ck_assert_int_eq(store_get_notice(st, "QID2.2", &rcpt, &flags, &body, &len), 0);
	ck_assert_str_eq(rcpt, "a@example.org");
	ck_assert_uint_eq(flags, 2);
	ck_assert_uint_eq(len, strlen(dsn));
	ck_assert_mem_eq(body, dsn, len);
	free(rcpt);
	free(body);
	ck_assert_int_eq(store_get_notice(st, "QID1.1", &rcpt, &flags, &body, &len), 0);
	ck_assert_str_eq(rcpt, "");
	ck_assert_uint_eq(len, 0);
	free(rcpt);
	free(body);
	ck_assert_int_eq(store_get_notice(st, "gone", &rcpt, &flags, &body, &len), 1);
	ck_assert_int_eq(store_write(st, notice_del_fn, "QID1.1", err, sizeof(err)), 0);
	l.n = 0;
	ck_assert_int_eq(store_foreach_notice(st, notice_collect, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.id[0], "QID2.2");
	/* an id longer than the limit is refused, not cut */
	memset(long_id, 'x', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	ck_assert_int_eq(store_write(st, notice_put_fn, long_id, err, sizeof(err)), -1);
	long_id[STORE_NOTICE_ID_MAX] = '\0';	/* at the limit: kept */
	ck_assert_int_eq(store_write(st, notice_put_fn, long_id, err, sizeof(err)), 0);
	l.n = 0;
	ck_assert_int_eq(store_foreach_notice(st, notice_collect, &l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_uint_eq(count(), 0);		/* notices are not messages */
}
END_TEST

struct msg_list {
	char qid[4][QID_LEN + 1];
	size_t nrcpt[4];
	size_t n, stop_after;
};

/* msg_collect - store_foreach callback */
static int msg_collect(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg)
{
	struct msg_list *l = arg;

	ck_assert_uint_lt(l->n, 4);
	memcpy(l->qid[l->n], m->qid, QID_LEN + 1);
	l->nrcpt[l->n] = n;
	for (size_t i = 0; i < n; i++)
		ck_assert_ptr_nonnull(r[i].addr);
	l->n++;
	return l->stop_after && l->n == l->stop_after ? 7 : 0;
}

START_TEST(test_foreach_count)
{
	struct msg_list l = {.n = 0};

	ck_assert_uint_eq(count(), 0);
	ck_assert_int_eq(store_foreach(st, msg_collect, &l), 0);
	ck_assert_uint_eq(l.n, 0);
	put_three();
	ck_assert_uint_eq(count(), 3);
	ck_assert_int_eq(store_foreach(st, msg_collect, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.qid[0], QA);	/* queue id order */
	ck_assert_str_eq(l.qid[1], QB);
	ck_assert_str_eq(l.qid[2], QC);
	ck_assert_uint_eq(l.nrcpt[0], 3);
	l.n = 0;
	l.stop_after = 2;
	ck_assert_int_eq(store_foreach(st, msg_collect, &l), 7);
	ck_assert_uint_eq(l.n, 2);
}
END_TEST

/* Messages enough for three read batches (store_read_batches reads
 * STORE_FOREACH_BATCH, 512, a transaction). */
#define MANY_MSGS 1100

/* put_many_fn - MANY_MSGS messages, queue ids 1 ... MANY_MSGS */
static int put_many_fn(struct store_txn *t, void *arg)
{
	struct q_msg m;
	int rc;

	(void)arg;
	for (uint64_t i = 1; i <= MANY_MSGS; i++) {
		char qid[QID_LEN + 1];

		qid_format(i, qid);
		msg_init(&m, qid, 0);
		if ((rc = store_put_msg(t, &m)) != 0)
			return rc;
	}
	return 0;
}

/* A walk's count, the queue id it saw last, and where it stops. */
struct msg_walk {
	uint64_t n, last, stop_at;
};

/* msg_walk_fn - store_foreach callback: queue ids come in order, each once */
static int msg_walk_fn(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg)
{
	struct msg_walk *w = arg;
	uint64_t v = 0;

	(void)r, (void)n;
	ck_assert_int_eq(qid_parse(m->qid, &v), 0);
	ck_assert_uint_eq(v, w->last + 1);
	w->last = v;
	w->n++;
	return w->stop_at && w->n == w->stop_at ? 9 : 0;
}

/* store_foreach goes on across read batches, each message once, and
 * stops where fn does, in a later batch too */
START_TEST(test_foreach_batches)
{
	struct msg_walk w = {0, 0, 0};
	char err[512] = "";

	ck_assert_msg(store_write(st, put_many_fn, NULL, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(store_foreach(st, msg_walk_fn, &w), 0);
	ck_assert_uint_eq(w.n, MANY_MSGS);
	ck_assert_uint_eq(w.last, MANY_MSGS);
	w = (struct msg_walk){0, 0, 600};
	ck_assert_int_eq(store_foreach(st, msg_walk_fn, &w), 9);
	ck_assert_uint_eq(w.n, 600);
	w = (struct msg_walk){0, 0, 512};	/* the last of the first batch */
	ck_assert_int_eq(store_foreach(st, msg_walk_fn, &w), 9);
	ck_assert_uint_eq(w.n, 512);
}
END_TEST

/* fail_fn - write a message, then fail: nothing may be committed */
static int fail_fn(struct store_txn *t, void *arg)
{
	struct put_arg *a = arg;
	int rc;

	a->calls++;
	if ((rc = store_put_msg(t, a->m)) != 0)
		return rc;
	return EINVAL;
}

START_TEST(test_write_fails)
{
	struct q_msg m, got;
	struct put_arg a;
	char err[256] = "", big[STORE_RECORD_MAX];

	msg_init(&m, QA, 0);
	a = (struct put_arg){&m, NULL, 0, 0};
	ck_assert_int_eq(store_write(st, fail_fn, &a, err, sizeof(err)), -1);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_str_eq(err, "queue database: Invalid argument");
	ck_assert_int_eq(store_get(st, QA, &got, NULL, NULL), 1);

	/* a record too big for STORE_RECORD_MAX is refused, not truncated */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	m.helo = big;
	a = (struct put_arg){&m, NULL, 0, 0};
	err[0] = '\0';
	ck_assert_int_eq(store_write(st, put_fn, &a, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "queue database: Invalid argument");
	ck_assert_uint_eq(count(), 0);
}
END_TEST

/* txn_arg - what a write transaction reads of its own writes */
struct txn_arg {
	int rc_before, rc_after, rc_missing;
	struct q_msg m;
	struct q_rcpt *r;
	size_t n;
};

static int txn_fn(struct store_txn *t, void *arg)
{
	struct txn_arg *a = arg;
	struct q_msg m, tmp;
	struct q_rcpt r = {5, RCPT_QUEUED, 0, 0, 10, "r@x", "", "p", "", 0};
	int rc;

	msg_init(&m, QA, 0);
	a->rc_before = store_txn_get_msg(t, QA, &tmp);
	if ((rc = store_put_msg(t, &m)) != 0 || (rc = store_put_rcpt(t, QA, &r)) != 0)
		return rc;
	a->rc_after = store_txn_get_msg(t, QA, &a->m);
	a->rc_missing = store_txn_get_msg(t, QB, &tmp);
	return store_txn_get_rcpts(t, QA, &a->r, &a->n);
}

START_TEST(test_txn_reads)
{
	struct txn_arg a;
	struct q_msg m;
	char err[256];

	memset(&a, 0, sizeof(a));
	a.rc_before = a.rc_after = a.rc_missing = -9;
	ck_assert_int_eq(store_write(st, txn_fn, &a, err, sizeof(err)), 0);
	ck_assert_int_eq(a.rc_before, 1);
	ck_assert_int_eq(a.rc_after, 0);
	ck_assert_int_eq(a.rc_missing, 1);
	msg_init(&m, QA, 0);
	msg_eq(&a.m, &m);
	ck_assert_uint_eq(a.n, 1);
	ck_assert_uint_eq(a.r[0].idx, 5);
	ck_assert_str_eq(a.r[0].addr, "r@x");
	q_rcpts_free(&a.r, a.n);
	q_msg_clear(&a.m);
}
END_TEST

START_TEST(test_readonly)
{
	struct q_msg m, got;
	struct q_rcpt r = {0, RCPT_QUEUED, 0, 0, 10, "r@x", "", "p", "", 0};
	struct q_rcpt *rcpts;
	struct put_arg a;
	char err[512] = "", missing[4300];
	struct stat sb;
	size_t n;

	msg_init(&m, QA, 0);
	put(&m, &r, 1);
	store_close(&st);			/* never open one environment twice */
	st = store_open(qdir, 1, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "readonly open: %s", err);
	ck_assert_int_eq(store_get(st, QA, &got, &rcpts, &n), 0);
	msg_eq(&got, &m);
	ck_assert_uint_eq(n, 1);
	rcpt_eq(&rcpts[0], &r);
	q_rcpts_free(&rcpts, n);
	q_msg_clear(&got);
	ck_assert_uint_eq(count(), 1);
	{
		static const struct due want[] = {{10, QA, 0, "p"}};

		due_expect(UINT64_MAX, want, 1);
	}
	ck_assert_int_eq(store_reader_check(st), 0);
	/* a read-only store refuses writes */
	a = (struct put_arg){&m, NULL, 0, 0};
	ck_assert_int_eq(store_write(st, put_fn, &a, err, sizeof(err)), -1);
	ck_assert_int_eq(a.calls, 0);
	ck_assert_msg(strncmp(err, "queue database: ", 16) == 0, "%s", err);

	/* read-only never creates */
	snprintf(missing, sizeof(missing), "%s/none", dir);
	ck_assert_ptr_null(store_open(missing, 1, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, "cannot open queue database") != NULL, "%s", err);
	ck_assert_int_eq(stat(missing, &sb), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(test_reopen)
{
	struct q_msg m, got;
	char err[512] = "";

	msg_init(&m, QA, 0);
	put(&m, rc_, N_ELEMENTS(rc_));
	store_close(&st);
	ck_assert_ptr_null(st);
	store_close(&st);			/* closing NULL is harmless */
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "reopen: %s", err);
	ck_assert_int_eq(store_get(st, QA, &got, NULL, NULL), 0);
	msg_eq(&got, &m);
	q_msg_clear(&got);
	rcpts_expect(QA, rc_, N_ELEMENTS(rc_));
}
END_TEST

/* A store created with a tiny map grows it on demand: every write that
 * found the map full is replayed after the map doubled, and a reopened
 * store adopts the grown size. */
START_TEST(test_map_grows)
{
	char err[512] = "", qid[QID_LEN + 1];
	struct q_msg m, got;
	int replayed = 0;

	store_close(&st);
	st = store_open(qdir, 0, 0, err, sizeof(err));	/* the default: 256MB */
	ck_assert_msg(st != NULL, "%s", err);
	store_close(&st);
	snprintf(qdir + strlen(qdir), sizeof(qdir) - strlen(qdir), "-small");
	st = store_open(qdir, 0, 64 * 1024, err, sizeof(err));
	ck_assert_msg(st != NULL, "store_open with a 64KB map: %s", err);
	for (int i = 0; i < 400; i++) {
		struct put_arg a;

		snprintf(qid, sizeof(qid), "%013d", i);
		msg_init(&m, qid, (uint64_t)i);
		a = (struct put_arg){&m, rc_, N_ELEMENTS(rc_), 0};
		ck_assert_msg(store_write(st, put_fn, &a, err, sizeof(err)) == 0, "write %d: %s", i, err);
		replayed += a.calls > 1;
	}
	ck_assert_msg(replayed > 0, "no write found the 64KB map full");
	store_close(&st);
	st = store_open(qdir, 1, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "reopen: %s", err);
	for (int i = 0; i < 400; i += 57) {
		snprintf(qid, sizeof(qid), "%013d", i);
		ck_assert_int_eq(store_get(st, qid, &got, NULL, NULL), 0);
		ck_assert_str_eq(got.qid, qid);
		q_msg_clear(&got);
	}
}
END_TEST

/* raw_begin - LMDB directly on the closed store in qdir (the store has no
 * way to write an old layout or a damaged record, and should not): a
 * transaction, read-only or not; raw_end commits it and closes */
static MDB_txn *raw_begin(unsigned flags)
{
	MDB_env *env;
	MDB_txn *txn;

	ck_assert_int_eq(mdb_env_create(&env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(env, 16), 0);
	ck_assert_int_eq(mdb_env_open(env, qdir, MDB_NOTLS | flags, 0660), 0);
	ck_assert_int_eq(mdb_txn_begin(env, NULL, flags, &txn), 0);
	return txn;
}

/* raw_end - commit raw_begin's transaction and close its environment */
static void raw_end(MDB_txn *txn)
{
	MDB_env *env = mdb_txn_env(txn);

	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

/* layout1 - turn the closed store in qdir back into layout 1, as ternd
 * wrote it before: the schedule keyed next_us . qid . idx with the peer
 * as value, no "layout" in meta, no rcount table. LMDB directly: the
 * store has no way to write an old layout, and should not. */
static void layout1(const struct due *e, size_t n)
{
	MDB_txn *txn;
	MDB_dbi sched, meta, rcount;
	MDB_val k = {6, (void *)"layout"};

	txn = raw_begin(0);
	ck_assert_int_eq(mdb_dbi_open(txn, "sched", 0, &sched), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "meta", 0, &meta), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "rcount", 0, &rcount), 0);
	ck_assert_int_eq(mdb_drop(txn, rcount, 1), 0);
	ck_assert_int_eq(mdb_drop(txn, sched, 0), 0);
	ck_assert_int_eq(mdb_del(txn, meta, &k, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		unsigned char key[8 + QID_LEN + 4];
		MDB_val kv = {sizeof(key), key}, v = {strlen(e[i].peer), (void *)e[i].peer};

		for (int b = 0; b < 8; b++)
			key[b] = (unsigned char)(e[i].next >> (56 - 8 * b));
		memcpy(key + 8, e[i].qid, QID_LEN);
		for (int b = 0; b < 4; b++)
			key[8 + QID_LEN + b] = (unsigned char)(e[i].idx >> (24 - 8 * b));
		ck_assert_int_eq(mdb_put(txn, sched, &kv, &v, 0), 0);
	}
	raw_end(txn);
}

/* sched_entries - how many keys the closed store's schedule holds, of
 * any layout (LMDB directly, as layout1) */
static size_t sched_entries(void)
{
	MDB_txn *txn;
	MDB_dbi sched;
	MDB_stat s;

	txn = raw_begin(MDB_RDONLY);
	ck_assert_int_eq(mdb_dbi_open(txn, "sched", 0, &sched), 0);
	ck_assert_int_eq(mdb_stat(txn, sched, &s), 0);
	raw_end(txn);
	return s.ms_entries;
}

/* raw_put - in the closed store's table, put a raw value under id, or
 * with val NULL delete the table, as in a queue written before it existed
 * (LMDB directly, as layout1) */
static void raw_put(const char *table, const char *id, const void *val, size_t len)
{
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = {strlen(id), (void *)id}, v = {len, (void *)val};

	txn = raw_begin(0);
	ck_assert_int_eq(mdb_dbi_open(txn, table, 0, &dbi), 0);
	if (val == NULL)
		ck_assert_int_eq(mdb_drop(txn, dbi, 1), 0);
	else
		ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
	raw_end(txn);
}

/* Malformed notice records are reported as such (2), never read past. */
START_TEST(test_notice_malformed)
{
	static const unsigned char two[] = {0, 0}, longer[] = {0, 0, 9, 'a', 'b'};
	char err[512] = "", *rcpt = NULL, *body = NULL;
	uint8_t flags;
	size_t len;

	store_close(&st);
	raw_put("notice", "two", two, sizeof(two));
	raw_put("notice", "longer", longer, sizeof(longer));	/* rcpt length 9, 2 octets */
	raw_put("notice", "empty", "", 0);
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
	ck_assert_int_eq(store_get_notice(st, "two", &rcpt, &flags, &body, &len), 2);
	ck_assert_int_eq(store_get_notice(st, "longer", &rcpt, &flags, &body, &len), 2);
	ck_assert_int_eq(store_get_notice(st, "empty", &rcpt, &flags, &body, &len), 2);
	ck_assert_ptr_null(rcpt);
	ck_assert_ptr_null(body);
}
END_TEST

/* HKEY - a hist key without NUL octets (raw_put takes a string): time,
 * queue id, kind (attempt), recipient index */
#define HKEY(qid) "\x01\x01\x01\x01\x01\x01\x01\x01" qid "\x02\x01\x01\x01\x01"

/* hist_fn - put the attempt record of HKEY(QA) and index everything */
static int hist_fn(struct store_txn *t, void *arg)
{
	struct hist_rec h = {0};
	size_t n;
	int rc;

	(void)arg;
	h.kind = HIST_ATTEMPT;
	h.time_us = 0x0101010101010101ULL;
	h.idx = 0x01010101;
	memcpy(h.qid, QA, sizeof(QA));
	h.sender = h.msgid = h.client = h.rcpt = h.peer = h.relay = h.dsn = h.reply = h.peer_qid = "";
	if ((rc = store_hist_put(t, &h)) != 0)
		return rc;
	return store_hist_index(t, 0, &n);
}

/* hist_count - store_hist_find's callback: count the records */
static int hist_count(const struct hist_rec *h, void *arg)
{
	(void)h;
	(*(int *)arg)++;
	return 0;
}

/* index_all - store_hist_index down to none waiting; *arg: how many */
static int index_all(struct store_txn *t, void *arg)
{
	int rc = store_hist_index(t, 0, arg);

	ck_assert_uint_eq(store_hist_unindexed(t), 0);
	return rc;
}

/* A pending mark of a record that is indexed already finds it once; a
 * mark without its record finds nothing and goes at the next indexing. */
START_TEST(test_hist_marks)
{
	char err[256];
	size_t n = 99;
	int found = 0;

	ck_assert_int_eq(store_write(st, hist_fn, NULL, err, sizeof(err)), 0);
	store_close(&st);
	raw_put("hpend", HKEY(QA), "", 0);
	raw_put("hpend", HKEY(QB), "", 0);
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
	ck_assert_int_eq(store_hist_find(st, 'q', QA, hist_count, &found), 1);
	ck_assert_int_eq(found, 1);
	ck_assert_int_eq(store_hist_find(st, 'q', QB, hist_count, &found), 0);
	ck_assert_int_eq(store_write(st, index_all, &n, err, sizeof(err)), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(store_hist_find(st, 'q', QA, hist_count, &found), 1);
}
END_TEST

/* big_records - 8 history records of about 50 KB each (so 13 overflow
 * pages each), pending; arg: the first record's time */
static int big_records(struct store_txn *t, void *arg)
{
	static char rcpt[50000];
	int rc;

	memset(rcpt, 'r', sizeof(rcpt) - 1);
	for (int i = 0; i < 8; i++) {
		struct hist_rec h = {0};

		h.kind = HIST_ACCEPT;
		h.time_us = *(uint64_t *)arg + (uint64_t)i;
		memcpy(h.qid, QA, sizeof(QA));
		h.sender = h.msgid = h.client = h.peer = h.relay = h.dsn = h.reply = h.peer_qid = "";
		h.rcpt = rcpt;
		if ((rc = store_hist_put(t, &h)) != 0)
			return rc;
	}
	return 0;
}

/* grow_fn - a meta change, then big_records nested: a full map inside
 * the nested transaction is the whole write's, so store_write grows the
 * map and runs it all again */
static int grow_fn(struct store_txn *t, void *arg)
{
	char err[256];
	int rc;

	if ((rc = store_put_meta(t, "parent", 1)) != 0)
		return rc;
	return store_nested(t, big_records, arg, err, sizeof(err));
}

START_TEST(test_map_growth)
{
	char err[256];
	uint64_t v = 0, t0 = 1;
	int found = 0;

	store_close(&st);
	tmpdir_remove(dir);
	tmpdir_make(dir, sizeof(dir));
	snprintf(qdir, sizeof(qdir), "%s/queue", dir);
	st = store_open(qdir, 0, 256 << 10, err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
	for (int round = 0; round < 4; round++, t0 += 8)	/* 3.2 MB in all */
		ck_assert_msg(store_write(st, grow_fn, &t0, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(store_get_meta(st, "parent", &v), 0);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(store_hist_find(st, 'q', QA, hist_count, &found), 32);
	ck_assert_int_eq(found, 32);
}
END_TEST

/* A queue written before the notice and hpend tables: read-only, they
 * read as empty; the first read-write open makes them. */
START_TEST(test_no_newer_tables)
{
	struct notice_list l = {.n = 0};
	char err[512] = "", *rcpt = NULL, *body = NULL;
	uint8_t flags;
	size_t len;
	uint64_t n = 99;

	int found = 0;

	ck_assert_int_eq(store_write(st, notice_fn, "x", err, sizeof(err)), 0);
	ck_assert_int_eq(store_write(st, hist_fn, NULL, err, sizeof(err)), 0);
	store_close(&st);
	raw_put("notice", "", NULL, 0);
	raw_put("hpend", "", NULL, 0);
	st = store_open(qdir, 1, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "read-only open without notice and hpend tables: %s", err);
	ck_assert_int_eq(store_hist_find(st, 'q', QA, hist_count, &found), 1);
	ck_assert_int_eq(found, 1);
	ck_assert_int_eq(store_hist_find(st, 'r', "a@example.org", hist_count, &found), 0);
	ck_assert_int_eq(store_count_notices(st, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(store_foreach_notice(st, notice_collect, &l), 0);
	ck_assert_uint_eq(l.n, 0);
	ck_assert_int_eq(store_get_notice(st, "QID2.2", &rcpt, &flags, &body, &len), 1);
	store_close(&st);
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "read-write open: %s", err);
	ck_assert_int_eq(store_count_notices(st, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(store_write(st, notice_fn, "x", err, sizeof(err)), 0);
	ck_assert_int_eq(store_count_notices(st, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(store_write(st, index_all, &n, err, sizeof(err)), 0);
	ck_assert_uint_eq(n, 0);	/* hpend is there, and empty */
}
END_TEST

/* layout_expect - the layout store_open recorded: 0 for none */
static void layout_expect(uint64_t want)
{
	uint64_t v = 99;

	ck_assert_int_eq(store_get_meta(st, "layout", &v), 0);
	ck_assert_uint_eq(v, want);
}

/* A queue of layout 1 still serves a read-only open (ternq reads no
 * schedule); the first read-write open rebuilds its schedule from the
 * recipient records, once. */
START_TEST(test_layout_migration)
{
	static const struct due old[] = {	/* put_three's, and a stale entry */
		{50, QB, 2, "pb"}, {100, QC, 7, "pc"}, {200, QB, 0, "pb"}, {300, QA, 0, "pa"},
		{300, QC, 1, "pc"}, {400, QC, 0, "pc"}, {500, QB, 1, "pb"}, {600, QA, 2, "pa2"},
		{Q_NEXT_HELD, QA, 0, "pa"},
	};
	static const struct due want[] = {
		{300, QA, 0, "pa"}, {600, QA, 2, "pa2"}, {200, QB, 0, "pb"}, {500, QB, 1, "pb"},
		{100, QC, 7, "pc"}, {300, QC, 1, "pc"}, {400, QC, 0, "pc"},
	};
	struct msg_list l = {.n = 0};
	char err[512] = "";

	put_three();
	layout_expect(3);			/* a new store is of the current layout */
	ck_assert_uint_eq(store_rebuilt(st), 0);
	store_close(&st);
	layout1(old, N_ELEMENTS(old));

	st = store_open(qdir, 1, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "read-only open of layout 1: %s", err);
	layout_expect(0);			/* left as it was */
	ck_assert_uint_eq(count(), 3);
	ck_assert_int_eq(store_foreach(st, msg_collect, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	rcpts_expect(QA, ra, N_ELEMENTS(ra));
	rcpts_expect(QB, rb, N_ELEMENTS(rb));
	due_expect(UINT64_MAX, NULL, 0);	/* old keys: passed over */
	peer_expect("pa", UINT64_MAX, NULL, 0);	/* and no counts */
	store_close(&st);

	for (int round = 0; round < 2; round++) {	/* the second open finds it done */
		st = store_open(qdir, 0, 0, err, sizeof(err));
		ck_assert_msg(st != NULL, "read-write open of layout 1: %s", err);
		layout_expect(3);
		/* the seven live recipients the first time, none the second */
		ck_assert_uint_eq(store_rebuilt(st), round == 0 ? N_ELEMENTS(want) : 0);
		due_expect(UINT64_MAX, want, N_ELEMENTS(want));
		rcpts_expect(QC, rc_, N_ELEMENTS(rc_));
		store_close(&st);
		/* nothing of the old layout is left behind */
		ck_assert_uint_eq(sched_entries(), N_ELEMENTS(want));
	}
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
}
END_TEST

/* A queue of layout 2 (before the peers' counts): read-only, every peer
 * counts 0 and its schedule serves; the first read-write open rebuilds
 * the schedule with the counts, once. */
START_TEST(test_layout2_counts)
{
	static const struct due want[] = {
		{300, QA, 0, "pa"}, {600, QA, 2, "pa2"}, {200, QB, 0, "pb"}, {500, QB, 1, "pb"},
		{100, QC, 7, "pc"}, {300, QC, 1, "pc"}, {400, QC, 0, "pc"},
	};
	static const unsigned char two[8] = {0, 0, 0, 0, 0, 0, 0, 2};
	struct due_list l = {.n = 0, .peer = "pc"};
	char err[512] = "";

	put_three();
	ck_assert_uint_eq(rcpts_of("pc"), 3);
	store_close(&st);
	raw_put("rcount", "", NULL, 0);
	raw_put("meta", "layout", two, sizeof(two));

	st = store_open(qdir, 1, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "read-only open of layout 2: %s", err);
	layout_expect(2);
	ck_assert_uint_eq(rcpts_of("pc"), 0);
	ck_assert_int_eq(store_foreach_due(st, "pc", UINT64_MAX, due_fn, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	store_close(&st);
	for (int round = 0; round < 2; round++) {
		st = store_open(qdir, 0, 0, err, sizeof(err));
		ck_assert_msg(st != NULL, "read-write open of layout 2: %s", err);
		layout_expect(3);
		ck_assert_uint_eq(store_rebuilt(st), round == 0 ? N_ELEMENTS(want) : 0);
		due_expect(UINT64_MAX, want, N_ELEMENTS(want));	/* and the counts */
		ck_assert_uint_eq(rcpts_of("pb"), 2);
		store_close(&st);
	}
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
}
END_TEST

/* Counts that do not add up to the schedule (an older ternd moved entries
 * of a layout-3 queue without them) are rebuilt at the next read-write
 * open; counts that do are left alone. */
START_TEST(test_counts_drift)
{
	static const unsigned char five[8] = {0, 0, 0, 0, 0, 0, 0, 5};
	char err[512] = "";

	put_three();
	store_close(&st);
	raw_put("rcount", "stale", five, sizeof(five));
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "read-write open with counts off by 5: %s", err);
	layout_expect(3);
	ck_assert_uint_eq(store_rebuilt(st), 7);
	ck_assert_uint_eq(rcpts_of("pc"), 3);
	ck_assert_uint_eq(rcpts_of("pb"), 2);
	store_close(&st);
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
	ck_assert_uint_eq(store_rebuilt(st), 0);
	ck_assert_uint_eq(rcpts_of("pc"), 3);
}
END_TEST

/* a bounded walk: what it saw, and what its callback answers */
struct walk {
	struct due_list l;
	const char *pass_qid;		/* its entries answered STORE_DUE_PASS */
	const char *stop_qid;		/* the first of its entries answered 42 */
};

/* walk_fn - collect the entry, then answer as w says */
static int walk_fn(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	struct walk *w = arg;

	due_fn(next_us, qid, idx, &w->l);
	if (w->stop_qid && strcmp(qid, w->stop_qid) == 0)
		return 42;
	return w->pass_qid && strcmp(qid, w->pass_qid) == 0 ? STORE_DUE_PASS : 0;
}

/* walk - one store_walk_due of peer "pw" from *pos, at most max entries:
 * its return, and exactly the entries it saw */
static void walk(struct store_due_pos *pos, size_t max, struct walk *w, int rc,
		 const struct due *want, size_t n)
{
	w->l.n = 0;
	w->l.peer = "pw";
	ck_assert_int_eq(store_walk_due(st, "pw", UINT64_MAX, pos, max, walk_fn, w), rc);
	due_check(&w->l, want, n);
}

/* store_walk_due: at most max entries, then on from where it stood;
 * STORE_DUE_PASS passes over the message's other entries at that time
 * (not those at another); a stop leaves the position before the entry
 * that stopped; the end starts the next walk at the first entry again,
 * and an entry not due yet is the end even right at the bound */
START_TEST(test_walk_due)
{
	struct q_rcpt r[6];
	static const struct due all[] = {
		{50, QC, 0, "pw"}, {100, QA, 0, "pw"}, {100, QA, 1, "pw"}, {100, QA, 2, "pw"},
		{100, QB, 0, "pw"}, {200, QA, 9, "pw"},
	};
	static const struct due passed[] = {	/* QA passed over at 100, not at 200 */
		{50, QC, 0, "pw"}, {100, QA, 0, "pw"}, {100, QB, 0, "pw"}, {200, QA, 9, "pw"},
	};
	struct store_due_pos pos = {.set = 0};
	struct walk w = {.pass_qid = NULL};
	struct q_msg m;

	for (uint32_t i = 0; i < 3; i++)
		r[i] = (struct q_rcpt){i, RCPT_QUEUED, 0, 0, 100, "a@x", "", "pw", "", 0};
	r[3] = (struct q_rcpt){9, RCPT_DEFERRED, 0, 1, 200, "a9@x", "", "pw", "451 x", 0};
	msg_init(&m, QA, 1);
	put(&m, r, 4);
	r[4] = (struct q_rcpt){0, RCPT_QUEUED, 0, 0, 100, "b@x", "", "pw", "", 0};
	msg_init(&m, QB, 2);
	put(&m, &r[4], 1);
	r[5] = (struct q_rcpt){0, RCPT_QUEUED, 0, 0, 50, "c@x", "", "pw", "", 0};
	msg_init(&m, QC, 3);
	put(&m, &r[5], 1);
	peer_expect("pw", UINT64_MAX, all, N_ELEMENTS(all));

	/* bounded: 4, then the 2 left (the end: cleared), then from the first */
	walk(&pos, 4, &w, 0, all, 4);
	ck_assert_int_eq(pos.set, 1);
	walk(&pos, 4, &w, 0, &all[4], 2);
	ck_assert_int_eq(pos.set, 0);
	walk(&pos, 0, &w, 0, all, N_ELEMENTS(all));
	ck_assert_int_eq(pos.set, 0);
	/* a bound that falls on the last entry: the next walk sees nothing,
	 * and ends */
	walk(&pos, N_ELEMENTS(all), &w, 0, all, N_ELEMENTS(all));
	ck_assert_int_eq(pos.set, 0);

	/* passed over: one seek past QA's entries at 100, then on */
	w.pass_qid = QA;
	walk(&pos, 0, &w, 0, passed, N_ELEMENTS(passed));
	walk(&pos, 2, &w, 0, passed, 2);	/* the bound counts entries seen */
	ck_assert_int_eq(pos.set, 1);
	walk(&pos, 2, &w, 0, &passed[2], 2);
	ck_assert_int_eq(pos.set, 0);

	/* a stop: returned, and the next walk starts at that entry again */
	w.pass_qid = NULL;
	w.stop_qid = QB;
	walk(&pos, 0, &w, 42, all, 5);
	ck_assert_int_eq(pos.set, 1);
	w.stop_qid = NULL;
	walk(&pos, 0, &w, 0, &all[4], 2);
	ck_assert_int_eq(pos.set, 0);
	/* without a position: from the first entry, and the bound still holds */
	walk(NULL, 3, &w, 0, all, 3);
	/* a bound that falls before an entry not due yet: the end (cleared,
	 * no immediate scan for "more"), not a stop at the bound */
	w.l.n = 0;
	w.l.peer = "pw";
	ck_assert_int_eq(store_walk_due(st, "pw", 150, &pos, 5, walk_fn, &w), 0);
	due_check(&w.l, all, 5);
	ck_assert_int_eq(pos.set, 0);
}
END_TEST

START_TEST(test_open_fails)
{
	char err[512] = "", path[4300];
	FILE *fp;

	/* a file where the directory should be */
	snprintf(path, sizeof(path), "%s/file", dir);
	fp = fopen(path, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	snprintf(path, sizeof(path), "%s/file/queue", dir);
	ck_assert_ptr_null(store_open(path, 0, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, "cannot create") != NULL, "%s", err);
}
END_TEST

/* --- codec ------------------------------------------------------------ */

static unsigned char rec[STORE_RECORD_MAX];

/* msg_encoded - an encoded message with every field set; its length */
static size_t msg_encoded(struct q_msg *m)
{
	size_t n;

	msg_init(m, QA, 5);
	m->envid = "ENV\xe9ID";
	n = q_msg_encode(m, rec, sizeof(rec));
	ck_assert_uint_gt(n, 0);
	return n;
}

static struct q_rcpt codec_rcpt = {
	0x01020304, RCPT_DEFERRED, 0x0e, 9, 0x1122334455667788ULL,
	"\xc3\xbc@x", "rfc822;u@x", "peer", "451 later", RCPT_MAYBE_SENT,
};

/* rcpt_encoded - an encoded recipient; its length */
static size_t rcpt_encoded(void)
{
	size_t n = q_rcpt_encode(&codec_rcpt, rec, sizeof(rec));

	ck_assert_uint_gt(n, 0);
	return n;
}

/* msg_rejects - decoding buf fails and leaves a cleared message */
static void msg_rejects(const unsigned char *buf, size_t len)
{
	unsigned char *copy = malloc(len ? len : 1);	/* exact size: ASan sees overreads */
	struct q_msg m;

	ck_assert_ptr_nonnull(copy);
	memcpy(copy, buf, len);
	memset(&m, 0x5a, sizeof(m));
	ck_assert_msg(q_msg_decode(copy, len, &m) == -1, "length %zu accepted", len);
	ck_assert_ptr_null(m.sender);
	ck_assert_ptr_null(m.envid);
	ck_assert_ptr_null(m.helo);
	ck_assert_ptr_null(m.client);
	ck_assert_uint_eq(m.arrival_us, 0);
	free(copy);
}

/* rcpt_rejects - decoding buf fails and leaves a cleared recipient */
static void rcpt_rejects(const unsigned char *buf, size_t len)
{
	unsigned char *copy = malloc(len ? len : 1);
	struct q_rcpt r;

	ck_assert_ptr_nonnull(copy);
	memcpy(copy, buf, len);
	memset(&r, 0x5a, sizeof(r));
	ck_assert_msg(q_rcpt_decode(copy, len, &r) == -1, "length %zu accepted", len);
	ck_assert_ptr_null(r.addr);
	ck_assert_ptr_null(r.orcpt);
	ck_assert_ptr_null(r.peer);
	ck_assert_ptr_null(r.reply);
	ck_assert_uint_eq(r.next_us, 0);
	free(copy);
}

START_TEST(test_codec_msg_roundtrip)
{
	struct q_msg m, got;
	unsigned char again[STORE_RECORD_MAX];
	size_t n = msg_encoded(&m);

	/* 1 + 13 + 8 + 8 + 4 + 1 + 1 + 4 + 4 + 8 + 8 + 32 + 16 + 8, 4 strings, 16 + 8 */
	ck_assert_uint_eq(n, 116 + 8 + strlen(m.sender) + strlen(m.envid) + strlen(m.helo)
			  + strlen(m.client) + 24);
	ck_assert_uint_eq(rec[0], 2);		/* version */
	ck_assert_int_eq(memcmp(rec + 1, QA, QID_LEN), 0);
	ck_assert_uint_eq(rec[14], (1700000000123456ULL + 5) & 0xff);	/* little-endian */
	ck_assert_int_eq(q_msg_decode(rec, n, &got), 0);
	msg_eq(&got, &m);
	ck_assert_uint_eq(q_msg_encode(&got, again, sizeof(again)), n);
	ck_assert_mem_eq(again, rec, n);
	q_msg_clear(&got);

	/* all strings empty */
	m.sender = m.envid = m.helo = m.client = "";
	n = q_msg_encode(&m, rec, sizeof(rec));
	ck_assert_uint_eq(n, 124 + 24);
	ck_assert_int_eq(q_msg_decode(rec, n, &got), 0);
	msg_eq(&got, &m);
	q_msg_clear(&got);

	/* a version 1 record (before the trace link) still reads, with no link */
	rec[0] = 1;
	ck_assert_int_eq(q_msg_decode(rec, n - 24, &got), 0);
	memset(m.link_trace_id, 0, sizeof(m.link_trace_id));
	memset(m.link_span_id, 0, sizeof(m.link_span_id));
	msg_eq(&got, &m);
	q_msg_clear(&got);
	ck_assert_int_eq(q_msg_decode(rec, n, &got), -1);	/* and is no longer */
}
END_TEST

START_TEST(test_codec_rcpt_roundtrip)
{
	struct q_rcpt got, empty = {0, RCPT_BOUNCED, 0, 0, 0, "", "", "", "", 0};
	unsigned char again[STORE_RECORD_MAX];
	size_t n = rcpt_encoded();

	/* 1 + 4 + 1 + 1 + 4 + 8, 4 strings, the flags */
	ck_assert_uint_eq(n, 19 + 8 + strlen(codec_rcpt.addr) + strlen(codec_rcpt.orcpt)
			  + strlen(codec_rcpt.peer) + strlen(codec_rcpt.reply) + 1);
	ck_assert_uint_eq(rec[0], 2);		/* version */
	ck_assert_uint_eq(rec[n - 1], RCPT_MAYBE_SENT);
	ck_assert_int_eq(q_rcpt_decode(rec, n, &got), 0);
	rcpt_eq(&got, &codec_rcpt);
	ck_assert_uint_eq(got.flags, RCPT_MAYBE_SENT);
	ck_assert_uint_eq(q_rcpt_encode(&got, again, sizeof(again)), n);
	ck_assert_mem_eq(again, rec, n);
	q_rcpt_clear(&got);
	ck_assert_ptr_null(got.addr);

	/* a flag this version does not know: refused */
	rec[n - 1] = 0x80;
	rcpt_rejects(rec, n);
	/* a version 1 record (before the flags) still reads, with none; and
	 * is no longer with them */
	rec[0] = 1;
	ck_assert_int_eq(q_rcpt_decode(rec, n - 1, &got), 0);
	ck_assert_uint_eq(got.flags, 0);
	ck_assert_str_eq(got.reply, codec_rcpt.reply);
	q_rcpt_clear(&got);
	rcpt_rejects(rec, n);

	n = q_rcpt_encode(&empty, rec, sizeof(rec));
	ck_assert_uint_eq(n, 28);
	ck_assert_int_eq(q_rcpt_decode(rec, n, &got), 0);
	rcpt_eq(&got, &empty);
	q_rcpt_clear(&got);
}
END_TEST

START_TEST(test_codec_truncated)
{
	struct q_msg m;
	size_t n = msg_encoded(&m);

	for (size_t len = 0; len < n; len++)
		msg_rejects(rec, len);
	n = rcpt_encoded();
	for (size_t len = 0; len < n; len++)
		rcpt_rejects(rec, len);
}
END_TEST

START_TEST(test_codec_version)
{
	/* both records are at version 2, and read 1 (the round trip tests) */
	static const unsigned char versions[] = {0, 3, 0x81, 0xff};
	struct q_msg m;
	size_t n;

	for (size_t i = 0; i < N_ELEMENTS(versions); i++) {
		n = msg_encoded(&m);
		rec[0] = versions[i];
		msg_rejects(rec, n);
		n = rcpt_encoded();
		rec[0] = versions[i];
		rcpt_rejects(rec, n);
	}
}
END_TEST

START_TEST(test_codec_trailing)
{
	struct q_msg m;
	size_t n = msg_encoded(&m);

	rec[n] = 0;
	msg_rejects(rec, n + 1);
	rec[n] = 'x';
	msg_rejects(rec, n + 1);
	n = rcpt_encoded();
	rec[n] = 0;
	rcpt_rejects(rec, n + 1);
	/* a record of each kind is not the other */
	n = rcpt_encoded();
	msg_rejects(rec, n);
	n = msg_encoded(&m);
	rcpt_rejects(rec, n);
}
END_TEST

/* str_offset - where the k-th string's octets start in an encoded record */
static size_t str_offset(size_t first, int k)
{
	size_t off = first;

	for (int i = 0; i < k; i++)
		off += 2 + (rec[off] | (size_t)rec[off + 1] << 8);
	return off + 2;
}

START_TEST(test_codec_nul)
{
	struct q_msg m;
	size_t n;

	for (int k = 0; k < 4; k++) {
		n = msg_encoded(&m);
		rec[str_offset(116, k)] = '\0';		/* first octet of string k */
		msg_rejects(rec, n);
		n = msg_encoded(&m);
		rec[str_offset(116, k) + 1] = '\0';	/* inside it */
		msg_rejects(rec, n);
		n = rcpt_encoded();
		rec[str_offset(19, k)] = '\0';
		rcpt_rejects(rec, n);
	}
	/* a NUL in the fixed-width queue id */
	n = msg_encoded(&m);
	rec[1 + 5] = '\0';
	msg_rejects(rec, n);
}
END_TEST

START_TEST(test_codec_lengths)
{
	struct q_msg m;
	size_t n, off;

	/* the last string's length one too long, one too short */
	n = msg_encoded(&m);
	off = str_offset(116, 3) - 2;
	rec[off]++;
	msg_rejects(rec, n);
	rec[off] -= 2;
	msg_rejects(rec, n);
	/* a huge length in the first string */
	n = msg_encoded(&m);
	rec[116] = rec[117] = 0xff;
	msg_rejects(rec, n);
	n = rcpt_encoded();
	rec[19] = rec[20] = 0xff;
	rcpt_rejects(rec, n);
}
END_TEST

START_TEST(test_codec_rcpt_state)
{
	struct q_rcpt got;
	size_t n = rcpt_encoded();

	for (unsigned s = 0; s < 256; s++) {
		rec[5] = (unsigned char)s;
		if (s <= RCPT_BOUNCED) {
			ck_assert_int_eq(q_rcpt_decode(rec, n, &got), 0);
			ck_assert_uint_eq(got.state, s);
			q_rcpt_clear(&got);
		} else {
			rcpt_rejects(rec, n);
		}
	}
}
END_TEST

/* untouched_from - the first octet at or after from that is not 0xa5, or len */
static size_t untouched_from(const unsigned char *buf, size_t from, size_t len)
{
	while (from < len && buf[from] == 0xa5)
		from++;
	return from;
}

START_TEST(test_codec_small_buffer)
{
	static unsigned char buf[STORE_RECORD_MAX + 16];
	struct q_msg m;
	size_t n = msg_encoded(&m), rn;

	for (size_t cap = 0; cap < n; cap++) {
		memset(buf, 0xa5, sizeof(buf));
		ck_assert_uint_eq(q_msg_encode(&m, buf, cap), 0);
		ck_assert_msg(untouched_from(buf, cap, sizeof(buf)) == sizeof(buf),
			      "cap %zu: octet %zu written", cap, untouched_from(buf, cap, sizeof(buf)));
	}
	ck_assert_uint_eq(q_msg_encode(&m, buf, n), n);
	ck_assert_mem_eq(buf, rec, n);
	rn = rcpt_encoded();
	for (size_t cap = 0; cap < rn; cap++) {
		memset(buf, 0xa5, sizeof(buf));
		ck_assert_uint_eq(q_rcpt_encode(&codec_rcpt, buf, cap), 0);
		ck_assert_msg(untouched_from(buf, cap, sizeof(buf)) == sizeof(buf),
			      "cap %zu: octet %zu written", cap, untouched_from(buf, cap, sizeof(buf)));
	}
	ck_assert_uint_eq(q_rcpt_encode(&codec_rcpt, buf, rn), rn);
}
END_TEST

START_TEST(test_codec_long_string)
{
	size_t cap = 0x20000;
	unsigned char *buf = malloc(cap);
	char *s = malloc(0x10001);
	struct q_rcpt r = codec_rcpt, got;
	size_t n;

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(s);
	memset(s, 'r', 0x10000);
	s[0x10000] = '\0';
	r.reply = s;
	ck_assert_uint_eq(q_rcpt_encode(&r, buf, cap), 0);	/* 65536: no 16-bit length */
	s[0xffff] = '\0';
	n = q_rcpt_encode(&r, buf, cap);
	ck_assert_uint_gt(n, 0xffff);
	/* the layout holds it; a reply longer than smtp_reply_format makes does not pass */
	rcpt_rejects(buf, n);
	ck_assert_int_eq(q_rcpt_decode_layout(buf, n, &got), 0);
	ck_assert_uint_eq(strlen(got.reply), 0xffff);
	q_rcpt_clear(&got);
	s[SMTP_REPLY_FORMAT_MAX - 1] = '\0';
	n = q_rcpt_encode(&r, buf, cap);
	ck_assert_int_eq(q_rcpt_decode(buf, n, &got), 0);
	ck_assert_uint_eq(strlen(got.reply), SMTP_REPLY_FORMAT_MAX - 1);
	q_rcpt_clear(&got);
	free(s);
	free(buf);
}
END_TEST

START_TEST(test_codec_null_strings)
{
	struct q_rcpt r = {1, RCPT_QUEUED, 0, 0, 5, NULL, NULL, NULL, NULL, 0}, got;
	size_t n = q_rcpt_encode(&r, rec, sizeof(rec));

	/* NULL strings are encoded as "" */
	ck_assert_uint_eq(n, 28);
	ck_assert_int_eq(q_rcpt_decode(rec, n, &got), 0);
	ck_assert_str_eq(got.addr, "");
	ck_assert_str_eq(got.reply, "");
	q_rcpt_clear(&got);
}
END_TEST

START_TEST(test_state_names)
{
	ck_assert_str_eq(rcpt_state_name(RCPT_QUEUED), "queued");
	ck_assert_str_eq(rcpt_state_name(RCPT_DEFERRED), "deferred");
	ck_assert_str_eq(rcpt_state_name(RCPT_SENT), "sent");
	ck_assert_str_eq(rcpt_state_name(RCPT_BOUNCED), "bounced");
	ck_assert_str_eq(rcpt_state_name((enum rcpt_state)4), "unknown");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("store");
	TCase *codec = tcase_create("codec");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_map_grows);
	tcase_add_test(tc, test_get_missing);
	tcase_add_test(tc, test_schedule_order);
	tcase_add_test(tc, test_del_msg);
	tcase_add_test(tc, test_del_first);
	tcase_add_test(tc, test_del_many);
	tcase_add_test(tc, test_move_schedule);
	tcase_add_test(tc, test_long_peer);
	tcase_add_test(tc, test_sched_peers_many);
	tcase_add_test(tc, test_segments);
	tcase_add_test(tc, test_seg_count);
	tcase_add_test(tc, test_meta);
	tcase_add_test(tc, test_notices);
	tcase_add_test(tc, test_foreach_count);
	tcase_add_test(tc, test_foreach_batches);
	tcase_add_test(tc, test_write_fails);
	tcase_add_test(tc, test_txn_reads);
	tcase_add_test(tc, test_readonly);
	tcase_add_test(tc, test_no_newer_tables);
	tcase_add_test(tc, test_hist_marks);
	tcase_add_test(tc, test_nested);
	tcase_add_test(tc, test_map_growth);
	tcase_add_test(tc, test_notice_malformed);
	tcase_add_test(tc, test_reopen);
	tcase_add_test(tc, test_layout_migration);
	tcase_add_test(tc, test_layout2_counts);
	tcase_add_test(tc, test_counts_drift);
	tcase_add_test(tc, test_walk_due);
	tcase_add_test(tc, test_open_fails);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tcase_add_test(codec, test_codec_msg_roundtrip);
	tcase_add_test(codec, test_codec_rcpt_roundtrip);
	tcase_add_test(codec, test_codec_truncated);
	tcase_add_test(codec, test_codec_version);
	tcase_add_test(codec, test_codec_trailing);
	tcase_add_test(codec, test_codec_nul);
	tcase_add_test(codec, test_codec_lengths);
	tcase_add_test(codec, test_codec_rcpt_state);
	tcase_add_test(codec, test_codec_small_buffer);
	tcase_add_test(codec, test_codec_long_string);
	tcase_add_test(codec, test_codec_null_strings);
	tcase_add_test(codec, test_state_names);
	tcase_set_timeout(codec, 60);
	suite_add_tcase(s, codec);
	return unit_run(s);
}
