/*
 * check_queue_ops - hold, release, delete and retry against a real
 * store and spool in a mkdtemp() directory: the records changed, the
 * schedule kept in step, the files a delete frees (and only those),
 * unknown queue ids, and the per-state counts of messages.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "queue_ops.h"
#include "tmpstore.h"
#include "unit.h"

#define QA "0000000000AAA"
#define QB "0000000000BBB"
#define QC "0000000000CCC"
#define CURRENT_SEG 9

static char dir[4096];
static struct store *st;
static struct spool *sp;

/* setup - a fresh store and spool in a private directory */
static void setup(void)
{
	char err[512] = "", path[4200];

	st = tmpstore_open(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/spool", dir);
	sp = spool_open(path, 1 << 20, err, sizeof(err));
	ck_assert_msg(sp != NULL, "spool_open: %s", err);
}

/* teardown - close both and remove the directory */
static void teardown(void)
{
	store_close(&st);
	spool_close(&sp);
	tmpdir_remove(dir);
}

static struct q_rcpt rcpts[] = {
	{0, RCPT_QUEUED, 0, 0, 1000, "q@x", "", "peer0", "", 0},
	{1, RCPT_SENT, 0, 1, 500, "s@x", "", "peer0", "250 ok", 0},
	{2, RCPT_DEFERRED, 0, 3, 5000, "d@x", "", "peer1", "451 later", 0},
	{3, RCPT_BOUNCED, 0, 2, 700, "b@x", "", "peer1", "550 no", 0},
};

/* msg_init - a message in segment seg_id (or its own file) */
static void msg_init(struct q_msg *m, const char *qid, uint32_t flags, uint64_t seg_id)
{
	memset(m, 0, sizeof(*m));
	memcpy(m->qid, qid, QID_LEN + 1);
	m->arrival_us = 900;
	m->size = 1234;
	m->flags = flags;
	m->nrcpt = N_ELEMENTS(rcpts);
	m->nlive = 2;
	m->seg_id = seg_id;
	m->offset = 4321;
	m->digest[0] = 0xd1;
	m->trace_id[15] = 0x7e;
	m->span_id[0] = 0x5a;
	m->sender = "sender@example.org";
	m->envid = "";
	m->helo = "helo";
	m->client = "192.0.2.7";
}

/* put_fn - a message and its recipients */
static int put_fn(struct store_txn *t, void *arg)
{
	const struct q_msg *m = arg;
	int rc;

	if ((rc = store_put_msg(t, m)) != 0)
		return rc;
	for (size_t i = 0; i < N_ELEMENTS(rcpts); i++)
		if ((rc = store_put_rcpt(t, m->qid, &rcpts[i])) != 0)
			return rc;
	return 0;
}

/* add_msg - store a message with the recipients above */
static void add_msg(const char *qid, uint32_t flags, uint64_t seg_id)
{
	struct q_msg m;
	char err[256] = "";

	msg_init(&m, qid, flags, seg_id);
	ck_assert_msg(store_write(st, put_fn, &m, err, sizeof(err)) == 0, "%s", err);
}

/* seg_fn - store a segment record */
static int seg_fn(struct store_txn *t, void *arg)
{
	return store_put_seg(t, arg);
}

/* add_seg - a segment record and its (small) file */
static void add_seg(uint64_t id, uint32_t live, int closed)
{
	struct store_seg seg = {id, 10, live, closed, (uint64_t)live * 1234};	/* msg_init's size */
	struct iovec iov = {"0123456789", 10};
	uint64_t sid, off;
	char err[256] = "";

	ck_assert_msg(store_write(st, seg_fn, &seg, err, sizeof(err)) == 0, "%s", err);
	spool_start_segment(sp, id);
	ck_assert_int_eq(spool_append(sp, &iov, 1, 10, &sid, &off), 0);
	ck_assert_uint_eq(sid, id);
	spool_start_segment(sp, CURRENT_SEG + 100);	/* close the file */
}

/* run - one operation; its rc, the arg for the results */
static int run(enum queue_op op, const char *qid, uint64_t now, struct queue_op_arg *a)
{
	char err[256] = "";
	int rc;

	memset(a, 0, sizeof(*a));
	a->op = op;
	snprintf(a->qid, sizeof(a->qid), "%s", qid);
	a->now_us = now;
	a->current_seg = CURRENT_SEG;
	/* results from an earlier call must not survive */
	a->found = 7;
	a->own_file = 7;
	a->seg_to_remove = 7;
	rc = store_write(st, queue_op_write, a, err, sizeof(err));
	ck_assert_msg(rc == 0, "%s", err);
	return rc;
}

/* get_msg - a stored message (asserted present) */
static void get_msg(const char *qid, struct q_msg *m)
{
	ck_assert_int_eq(store_get(st, qid, m, NULL, NULL), 0);
}

/* seg_get - a segment's record; 0 if found, 1 if not */
struct seg_find {
	uint64_t id;
	struct store_seg seg;
	int found;
};

static int seg_find_fn(const struct store_seg *seg, void *arg)
{
	struct seg_find *f = arg;

	if (seg->id == f->id) {
		f->seg = *seg;
		f->found = 1;
	}
	return 0;
}

static int seg_get(uint64_t id, struct store_seg *seg)
{
	struct seg_find f = {.id = id};

	ck_assert_int_eq(store_foreach_seg(st, seg_find_fn, &f), 0);
	*seg = f.seg;
	return f.found ? 0 : 1;
}

/* file_exists - does SPOOL/sub/name exist */
static int file_exists(const char *sub, const char *name)
{
	char path[4400];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/spool/%s/%s", dir, sub, name);
	return stat(path, &sb) == 0;
}

/* one schedule entry */
struct due {
	uint64_t next;
	char qid[QID_LEN + 1];
	uint32_t idx;
};

struct due_list {
	struct due e[16];
	size_t n;
};

/* due_fn - collect a peer's schedule entries */
static int due_fn(uint64_t next_us, const char *qid, uint32_t idx, void *arg)
{
	struct due_list *l = arg;

	ck_assert_uint_lt(l->n, N_ELEMENTS(l->e));
	l->e[l->n].next = next_us;
	memcpy(l->e[l->n].qid, qid, QID_LEN + 1);
	l->e[l->n].idx = idx;
	l->n++;
	return 0;
}

/* peer_fn - collect every entry of a peer in the schedule */
static int peer_fn(const char *peer, void *arg)
{
	ck_assert_int_eq(store_foreach_due(st, peer, UINT64_MAX, due_fn, arg), 0);
	return 0;
}

/* due_expect - the whole schedule is exactly these entries, in order:
 * peer0's (recipient 0), then peer1's (recipient 2), each by time */
static void due_expect(const struct due *want, size_t n)
{
	struct due_list l = {.n = 0};

	ck_assert_int_eq(store_foreach_sched_peer(st, peer_fn, &l), 0);
	ck_assert_uint_eq(l.n, n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_eq(l.e[i].next, want[i].next);
		ck_assert_str_eq(l.e[i].qid, want[i].qid);
		ck_assert_uint_eq(l.e[i].idx, want[i].idx);
	}
}

START_TEST(test_hold_release)
{
	const uint32_t flags = QMSG_8BIT | QMSG_LMTP | QMSG_DOTLINES;
	struct queue_op_arg a;
	struct q_msg m, want;
	struct q_rcpt *r;
	size_t n;

	add_msg(QA, flags, 1);
	add_msg(QB, flags, 1);
	msg_init(&want, QA, flags, 1);
	for (int round = 0; round < 2; round++) {	/* the second time changes nothing */
		run(QOP_HOLD, QA, 0, &a);
		ck_assert_int_eq(a.found, 1);
		ck_assert_int_eq(a.own_file, 0);
		ck_assert_uint_eq(a.seg_to_remove, 0);
		ck_assert_int_eq(store_get(st, QA, &m, &r, &n), 0);
		ck_assert_uint_eq(m.flags, flags | QMSG_HOLD);
		/* nothing else changed */
		ck_assert_uint_eq(m.seg_id, want.seg_id);
		ck_assert_uint_eq(m.offset, want.offset);
		ck_assert_uint_eq(m.size, want.size);
		ck_assert_uint_eq(m.nlive, want.nlive);
		ck_assert_mem_eq(m.digest, want.digest, Q_DIGEST_BYTES);
		ck_assert_mem_eq(m.trace_id, want.trace_id, 16);
		ck_assert_str_eq(m.sender, want.sender);
		ck_assert_str_eq(m.client, want.client);
		ck_assert_uint_eq(n, N_ELEMENTS(rcpts));
		ck_assert_uint_eq(r[2].next_us, Q_NEXT_HELD);	/* parked: never due */
		q_rcpts_free(&r, n);
		q_msg_clear(&m);
	}
	{
		static const struct due held_due[] = {
			{1000, QB, 0}, {Q_NEXT_HELD, QA, 0}, {5000, QB, 2}, {Q_NEXT_HELD, QA, 2},
		};

		due_expect(held_due, N_ELEMENTS(held_due));
	}
	get_msg(QB, &m);			/* only the one named */
	ck_assert_uint_eq(m.flags, flags);
	q_msg_clear(&m);
	for (int round = 0; round < 2; round++) {
		run(QOP_RELEASE, QA, 7000, &a);
		ck_assert_int_eq(a.found, 1);
		get_msg(QA, &m);
		ck_assert_uint_eq(m.flags, flags);
		q_msg_clear(&m);
	}
	/* released: due at once (the release time) */
	{
		static const struct due want_due[] = {
			{1000, QB, 0}, {7000, QA, 0}, {5000, QB, 2}, {7000, QA, 2},
		};

		due_expect(want_due, N_ELEMENTS(want_due));
	}
}
END_TEST

START_TEST(test_delete_own_file)
{
	struct queue_op_arg a;
	struct store_seg seg;
	struct q_msg m;
	int fd;

	add_seg(1, 1, 1);
	add_msg(QA, QMSG_OWNFILE, 1);	/* seg_id must be ignored */
	add_msg(QB, 0, 1);
	fd = spool_own_create(sp, QA);
	ck_assert_int_ge(fd, 0);
	close(fd);
	run(QOP_DELETE, QA, 0, &a);
	ck_assert_int_eq(a.found, 1);
	ck_assert_int_eq(a.own_file, 1);
	ck_assert_uint_eq(a.seg_to_remove, 0);
	ck_assert_int_eq(store_get(st, QA, &m, NULL, NULL), 1);
	ck_assert_int_eq(seg_get(1, &seg), 0);
	ck_assert_uint_eq(seg.live, 1);		/* untouched */
	{
		static const struct due want[] = {{1000, QB, 0}, {5000, QB, 2}};

		due_expect(want, N_ELEMENTS(want));
	}
	/* files go only after the commit, by cleanup */
	ck_assert(file_exists("own", QA));
	queue_op_cleanup(sp, &a);
	ck_assert(!file_exists("own", QA));
	ck_assert(file_exists("seg", "0000000000000001"));
	/* deleted twice: not found the second time */
	run(QOP_DELETE, QA, 0, &a);
	ck_assert_int_eq(a.found, 0);
	ck_assert_int_eq(a.own_file, 0);
}
END_TEST

START_TEST(test_delete_segment)
{
	struct queue_op_arg a;
	struct store_seg seg;
	uint64_t n;

	add_seg(5, 2, 1);
	add_seg(6, 1, 0);
	add_msg(QA, 0, 5);
	add_msg(QB, 0, 5);
	add_msg(QC, 0, 6);
	/* not the last message in it: the segment stays */
	run(QOP_DELETE, QA, 0, &a);
	ck_assert_int_eq(a.found, 1);
	ck_assert_int_eq(a.own_file, 0);
	ck_assert_uint_eq(a.seg_to_remove, 0);
	ck_assert_int_eq(seg_get(5, &seg), 0);
	ck_assert_uint_eq(seg.live, 1);
	ck_assert_uint_eq(seg.live_bytes, 1234);	/* its octets left with it */
	ck_assert_uint_eq(seg.length, 10);	/* the rest unchanged */
	ck_assert_int_eq(seg.closed, 1);
	queue_op_cleanup(sp, &a);
	ck_assert(file_exists("seg", "0000000000000005"));
	/* the last: its record goes now, its file after the commit */
	run(QOP_DELETE, QB, 0, &a);
	ck_assert_int_eq(a.found, 1);
	ck_assert_int_eq(a.own_file, 0);
	ck_assert_uint_eq(a.seg_to_remove, 5);
	ck_assert_int_eq(seg_get(5, &seg), 1);
	ck_assert(file_exists("seg", "0000000000000005"));
	queue_op_cleanup(sp, &a);
	ck_assert(!file_exists("seg", "0000000000000005"));
	/* other segments and messages untouched */
	ck_assert_int_eq(seg_get(6, &seg), 0);
	ck_assert_uint_eq(seg.live, 1);
	ck_assert(file_exists("seg", "0000000000000006"));
	ck_assert_int_eq(store_count(st, &n), 0);
	ck_assert_uint_eq(n, 1);
	{
		static const struct due want[] = {{1000, QC, 0}, {5000, QC, 2}};

		due_expect(want, N_ELEMENTS(want));
	}
}
END_TEST

START_TEST(test_delete_current_segment)
{
	struct queue_op_arg a;
	struct store_seg seg;

	add_seg(CURRENT_SEG, 1, 0);
	add_msg(QA, 0, CURRENT_SEG);
	run(QOP_DELETE, QA, 0, &a);
	ck_assert_int_eq(a.found, 1);
	ck_assert_uint_eq(a.seg_to_remove, 0);	/* still being appended to */
	ck_assert_int_eq(seg_get(CURRENT_SEG, &seg), 0);
	ck_assert_uint_eq(seg.live, 0);
	ck_assert_uint_eq(seg.live_bytes, 0);
	ck_assert_uint_eq(seg.length, 10);
	queue_op_cleanup(sp, &a);
	ck_assert(file_exists("seg", "0000000000000009"));
	due_expect(NULL, 0);
}
END_TEST

START_TEST(test_delete_no_segment_record)
{
	struct queue_op_arg a;
	struct store_seg seg;
	struct q_msg m;

	add_msg(QA, 0, 12);
	run(QOP_DELETE, QA, 0, &a);
	ck_assert_int_eq(a.found, 1);
	ck_assert_uint_eq(a.seg_to_remove, 0);
	ck_assert_int_eq(store_get(st, QA, &m, NULL, NULL), 1);
	ck_assert_int_eq(seg_get(12, &seg), 1);	/* none invented */
}
END_TEST

START_TEST(test_retry)
{
	static const struct due want[] = {
		{300, QA, 0}, {1000, QB, 0}, {300, QA, 2}, {5000, QB, 2},
	};
	struct queue_op_arg a;
	struct q_msg m;
	struct q_rcpt *r;
	size_t n;

	add_msg(QA, 0, 1);
	add_msg(QB, 0, 1);
	run(QOP_RETRY, QA, 300, &a);
	ck_assert_int_eq(a.found, 1);
	ck_assert_uint_eq(a.changed, 2);	/* both live recipients moved */
	ck_assert_int_eq(a.own_file, 0);
	ck_assert_uint_eq(a.seg_to_remove, 0);
	/* moved, with no entry left at the old times */
	due_expect(want, N_ELEMENTS(want));
	ck_assert_int_eq(store_get(st, QA, &m, &r, &n), 0);
	ck_assert_uint_eq(m.flags, 0);
	ck_assert_uint_eq(n, N_ELEMENTS(rcpts));
	for (size_t i = 0; i < n; i++) {
		int is_live = rcpts[i].state == RCPT_QUEUED || rcpts[i].state == RCPT_DEFERRED;

		ck_assert_uint_eq(r[i].idx, rcpts[i].idx);
		ck_assert_uint_eq(r[i].state, rcpts[i].state);
		ck_assert_uint_eq(r[i].attempts, rcpts[i].attempts);
		ck_assert_uint_eq(r[i].next_us, is_live ? 300 : rcpts[i].next_us);
		ck_assert_str_eq(r[i].reply, rcpts[i].reply);
		ck_assert_str_eq(r[i].peer, rcpts[i].peer);
	}
	q_rcpts_free(&r, n);
	q_msg_clear(&m);
	/* again, later: due already, so nothing changes */
	run(QOP_RETRY, QA, 2000, &a);
	ck_assert_uint_eq(a.changed, 0);
	due_expect(want, N_ELEMENTS(want));
	/* held mail stays parked: retry does not release it */
	run(QOP_HOLD, QB, 2000, &a);
	run(QOP_RETRY, QB, 2500, &a);
	ck_assert_uint_eq(a.changed, 0);
	{
		static const struct due want2[] = {
			{300, QA, 0}, {Q_NEXT_HELD, QB, 0}, {300, QA, 2}, {Q_NEXT_HELD, QB, 2},
		};

		due_expect(want2, N_ELEMENTS(want2));
	}
}
END_TEST

/* routes - [routes] as conf_route reads them: x (both recipients' domain)
 * to peer2, nothing else (no "*") unless star */
static void routes(struct conf *c, struct conf_route *r, int star)
{
	memset(c, 0, sizeof(*c));
	r[0].domain = (char *)"x";
	r[0].peer = (char *)"peer2";
	r[1].domain = (char *)"*";
	r[1].peer = (char *)"peer0";
	c->routes = r;
	c->nroutes = star ? 2 : 1;
}

/* test_requeue - requeue routes every live recipient again by the
 * current [routes] and makes it due now; the schedule entries move with
 * the peer; final recipients, and a message already routed so and due,
 * are unchanged; held mail is routed but stays parked */
START_TEST(test_requeue)
{
	static const struct due want[] = {
		{1000, QB, 0}, {5000, QB, 2}, {300, QA, 0}, {300, QA, 2},
	};
	struct conf c;
	struct conf_route r[2];
	struct queue_op_arg a;
	struct q_msg m;
	struct q_rcpt *rc;
	size_t n;

	add_msg(QA, 0, 1);
	add_msg(QB, 0, 1);
	routes(&c, r, 0);
	memset(&a, 0, sizeof(a));
	a.op = QOP_REQUEUE;
	memcpy(a.qid, QA, QID_LEN + 1);
	a.now_us = 300;
	a.conf = &c;
	ck_assert_int_eq(store_write(st, queue_op_write, &a, NULL, 0), 0);
	ck_assert_int_eq(a.found, 1);
	ck_assert_uint_eq(a.changed, 2);
	ck_assert_uint_eq(a.unrouted, 0);
	ck_assert_int_eq(a.was, QSTATE_DEFERRED);
	ck_assert_int_eq(a.now, QSTATE_DEFERRED);
	/* peer0's and peer1's entries of QA went to peer2, at 300; QB's stay */
	due_expect(want, N_ELEMENTS(want));
	ck_assert_int_eq(store_get(st, QA, &m, &rc, &n), 0);
	for (size_t i = 0; i < n; i++) {
		int is_live = rcpts[i].state == RCPT_QUEUED || rcpts[i].state == RCPT_DEFERRED;

		ck_assert_str_eq(rc[i].peer, is_live ? "peer2" : rcpts[i].peer);
		ck_assert_uint_eq(rc[i].next_us, is_live ? 300 : rcpts[i].next_us);
		ck_assert_uint_eq(rc[i].attempts, rcpts[i].attempts);
		ck_assert_uint_eq(rc[i].state, rcpts[i].state);
	}
	q_rcpts_free(&rc, n);
	q_msg_clear(&m);
	/* again: routed so and due already: unchanged */
	a.now_us = 400;
	ck_assert_int_eq(store_write(st, queue_op_write, &a, NULL, 0), 0);
	ck_assert_uint_eq(a.changed, 0);
	due_expect(want, N_ELEMENTS(want));
	/* no route (x no longer routed, no "*"): the recipients keep their
	 * peer and schedule, counted as unrouted */
	c.nroutes = 0;
	memcpy(a.qid, QB, QID_LEN + 1);
	ck_assert_int_eq(store_write(st, queue_op_write, &a, NULL, 0), 0);
	ck_assert_uint_eq(a.changed, 0);
	ck_assert_uint_eq(a.unrouted, 2);
	due_expect(want, N_ELEMENTS(want));
	/* held: routed by "*", still parked */
	run(QOP_HOLD, QB, 500, &a);
	routes(&c, r, 1);
	c.routes = &r[1];
	c.nroutes = 1;
	memset(&a, 0, sizeof(a));
	a.op = QOP_REQUEUE;
	memcpy(a.qid, QB, QID_LEN + 1);
	a.now_us = 600;
	a.conf = &c;
	ck_assert_int_eq(store_write(st, queue_op_write, &a, NULL, 0), 0);
	ck_assert_uint_eq(a.changed, 1);	/* recipient 2: peer1 to peer0 */
	ck_assert_int_eq(a.now, QSTATE_HOLD);
	{
		static const struct due want2[] = {
			{Q_NEXT_HELD, QB, 0}, {Q_NEXT_HELD, QB, 2}, {300, QA, 0}, {300, QA, 2},
		};

		due_expect(want2, N_ELEMENTS(want2));
	}
	/* an unknown message */
	memcpy(a.qid, QC, QID_LEN + 1);
	ck_assert_int_eq(store_write(st, queue_op_write, &a, NULL, 0), 0);
	ck_assert_int_eq(a.found, 0);
}
END_TEST

/* test_expire_refused - expire is ternd's (it queues a DSN): the store
 * function refuses it and changes nothing */
START_TEST(test_expire_refused)
{
	static const struct due want[] = {{1000, QA, 0}, {5000, QA, 2}};
	struct queue_op_arg a;
	char err[256] = "";

	add_msg(QA, 0, 1);
	memset(&a, 0, sizeof(a));
	a.op = QOP_EXPIRE;
	memcpy(a.qid, QA, QID_LEN + 1);
	ck_assert_int_ne(store_write(st, queue_op_write, &a, err, sizeof(err)), 0);
	ck_assert_int_eq(a.found, 0);
	due_expect(want, N_ELEMENTS(want));
}
END_TEST

START_TEST(test_unknown)
{
	static const enum queue_op ops[] = {QOP_HOLD, QOP_RELEASE, QOP_DELETE, QOP_RETRY};
	struct queue_op_arg a;
	uint64_t n;

	add_seg(5, 1, 1);
	add_msg(QA, 0, 5);
	for (size_t i = 0; i < N_ELEMENTS(ops); i++) {
		ck_assert_int_eq(run(ops[i], QB, 300, &a), 0);
		ck_assert_int_eq(a.found, 0);
		ck_assert_int_eq(a.own_file, 0);
		ck_assert_uint_eq(a.seg_to_remove, 0);
		queue_op_cleanup(sp, &a);
	}
	ck_assert_int_eq(store_count(st, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(file_exists("seg", "0000000000000005"));
	{
		static const struct due want[] = {{1000, QA, 0}, {5000, QA, 2}};

		due_expect(want, N_ELEMENTS(want));
	}
}
END_TEST

static const struct {
	const char *name;
	int rc;
	enum queue_op op;
} parse_cases[] = {
	{"hold", 0, QOP_HOLD},
	{"release", 0, QOP_RELEASE},
	{"delete", 0, QOP_DELETE},
	{"retry", 0, QOP_RETRY},
	{"requeue", 0, QOP_REQUEUE},
	{"expire", 0, QOP_EXPIRE},
	{"", -1, 0},
	{"Hold", -1, 0},
	{"HOLD", -1, 0},
	{"hold ", -1, 0},
	{"holdx", -1, 0},
	{"hol", -1, 0},
	{"del", -1, 0},
	{"flush", -1, 0},
	{"Requeue", -1, 0},
	{"expired", -1, 0},
};

START_TEST(test_done)
{
	ck_assert_str_eq(queue_op_done(QOP_REQUEUE), "requeued");
	ck_assert_str_eq(queue_op_done(QOP_EXPIRE), "expired by admin");
	ck_assert_str_eq(queue_op_done(QOP_DELETE), "removed");
}
END_TEST

START_TEST(test_parse)
{
	enum queue_op op = (enum queue_op)77;
	int rc = queue_op_parse(parse_cases[_i].name, &op);

	ck_assert_int_eq(rc, parse_cases[_i].rc);
	if (rc == 0)
		ck_assert_int_eq(op, parse_cases[_i].op);
	else
		ck_assert_int_eq(op, 77);	/* untouched */
}
END_TEST

/* damaged_fn - QA as add_msg stores it, but its sender (arg "s") or the
 * address of recipient 0 (arg "r") with CRLF and a command after it: what
 * a record written past ternd (with LMDB directly) may hold */
static int damaged_fn(struct store_txn *t, void *arg)
{
	struct q_msg m;
	struct q_rcpt r0 = rcpts[0];
	int rc;

	msg_init(&m, QA, 0, 1);
	if (*(const char *)arg == 's')
		m.sender = "s@x>\r\nRCPT TO:<victim@example.org";
	else
		r0.addr = "q@x>\r\nRCPT TO:<victim@example.org";
	if ((rc = store_put_msg(t, &m)) != 0 || (rc = store_put_rcpt(t, QA, &r0)) != 0)
		return rc;
	for (size_t i = 1; i < N_ELEMENTS(rcpts); i++)
		if ((rc = store_put_rcpt(t, QA, &rcpts[i])) != 0)
			return rc;
	return 0;
}

/* A record that fails validation reads as STORE_DAMAGED; a hold parks
 * what decodes, takes the schedule entry of what does not, and a second
 * hold changes nothing (so ternd logs it once). */
START_TEST(test_hold_damaged)
{
	static const char *const which[] = {"s", "r"};
	static const struct due sender_bad[] = {
		{1000, QB, 0}, {Q_NEXT_HELD, QA, 0}, {5000, QB, 2}, {Q_NEXT_HELD, QA, 2},
	};
	static const struct due rcpt_bad[] = {
		{1000, QB, 0}, {5000, QB, 2}, {Q_NEXT_HELD, QA, 2},
	};
	struct queue_op_arg a;
	struct q_msg m;
	struct q_rcpt *r = NULL;
	size_t n = 7;
	char err[256] = "";

	add_msg(QB, 0, 1);
	for (size_t w = 0; w < N_ELEMENTS(which); w++) {
		ck_assert_msg(store_write(st, damaged_fn, (void *)which[w], err, sizeof(err)) == 0,
			      "%s", err);
		ck_assert_int_eq(store_get(st, QA, &m, &r, &n), STORE_DAMAGED);
		ck_assert_ptr_null(r);
		ck_assert_uint_eq(n, 0);
		run(QOP_HOLD, QA, 0, &a);
		ck_assert_int_eq(a.found, 1);
		ck_assert_int_eq(a.damaged, w == 0);	/* the message record itself */
		/* two live recipients: both parked, or one parked, one
		 * unscheduled; and the hold flag, where the message decodes */
		ck_assert_uint_eq(a.changed, w == 0 ? 2 : 3);
		if (w == 0)
			due_expect(sender_bad, N_ELEMENTS(sender_bad));
		else
			due_expect(rcpt_bad, N_ELEMENTS(rcpt_bad));
		run(QOP_HOLD, QA, 0, &a);
		ck_assert_int_eq(a.found, 1);
		ck_assert_uint_eq(a.changed, 0);
		ck_assert_int_eq(store_get(st, QA, &m, &r, &n), STORE_DAMAGED);
		/* a release of a damaged message record fails, and says why */
		memset(&a, 0, sizeof(a));
		a.op = QOP_RELEASE;
		memcpy(a.qid, QA, QID_LEN + 1);
		ck_assert_int_eq(store_write(st, queue_op_write, &a, err, sizeof(err)), w == 0 ? -1 : 0);
		if (w == 0)
			ck_assert_str_eq(err, "queue database: a record fails validation");
	}
}
END_TEST

/* counted_fn - a message and its recipients, counted as ternd's
 * acceptance counts one (wal.c) */
static int counted_fn(struct store_txn *t, void *arg)
{
	const struct q_msg *m = arg;
	int rc;

	if ((rc = put_fn(t, arg)) != 0)
		return rc;
	return queue_count_move(t, QSTATE_GONE,
				queue_state(m, rcpts, N_ELEMENTS(rcpts)), 1);
}

/* walk_fn - a message into its state's count */
static int walk_fn(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg)
{
	((uint64_t *)arg)[queue_state(m, r, n)]++;
	return 0;
}

/* counts_expect - the stored counts add up, and are a walk's, and these */
static void counts_expect(uint64_t queued, uint64_t deferred, uint64_t held)
{
	uint64_t got[QSTATE_N], walked[QSTATE_N] = {0};

	ck_assert_int_eq(queue_counts_get(st, got), 0);
	ck_assert_int_eq(store_foreach(st, walk_fn, walked), 0);
	for (int i = 0; i < QSTATE_N; i++)
		ck_assert_uint_eq(got[i], walked[i]);
	ck_assert_uint_eq(got[QSTATE_QUEUED], queued);
	ck_assert_uint_eq(got[QSTATE_DEFERRED], deferred);
	ck_assert_uint_eq(got[QSTATE_HOLD], held);
}

/* The per-state counts move with every operation, in its transaction;
 * a queue written without them (an older ternd) does not add up until
 * rebuilt */
START_TEST(test_counts)
{
	struct queue_op_arg a;
	struct q_msg m;
	uint64_t n[QSTATE_N];
	char err[256] = "";

	counts_expect(0, 0, 0);	/* none written, none queued: they add up */
	msg_init(&m, QA, 0, 1);
	ck_assert_msg(store_write(st, counted_fn, &m, err, sizeof(err)) == 0, "%s", err);
	msg_init(&m, QB, 0, 1);
	ck_assert_msg(store_write(st, counted_fn, &m, err, sizeof(err)) == 0, "%s", err);
	counts_expect(0, 2, 0);	/* rcpts[2] is deferred */
	run(QOP_HOLD, QA, 0, &a);
	counts_expect(0, 1, 1);
	run(QOP_HOLD, QA, 0, &a);	/* held already: no move */
	counts_expect(0, 1, 1);
	run(QOP_RETRY, QB, 10, &a);
	counts_expect(0, 1, 1);
	run(QOP_RELEASE, QA, 20, &a);
	counts_expect(0, 2, 0);
	run(QOP_DELETE, QB, 0, &a);
	counts_expect(0, 1, 0);
	run(QOP_DELETE, QB, 0, &a);	/* gone already */
	counts_expect(0, 1, 0);
	add_msg(QC, 0, 1);		/* not counted, as by an older ternd */
	ck_assert_int_eq(queue_counts_get(st, n), 1);
	n[QSTATE_DEFERRED] = 2;
	ck_assert_msg(store_write(st, queue_counts_put, n, err, sizeof(err)) == 0, "%s", err);
	counts_expect(0, 2, 0);
	run(QOP_DELETE, QA, 0, &a);
	run(QOP_DELETE, QC, 0, &a);
	counts_expect(0, 0, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("queue_ops");
	TCase *tc = tcase_create("queue_ops");
	TCase *parse = tcase_create("parse");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_hold_release);
	tcase_add_test(tc, test_delete_own_file);
	tcase_add_test(tc, test_delete_segment);
	tcase_add_test(tc, test_delete_current_segment);
	tcase_add_test(tc, test_delete_no_segment_record);
	tcase_add_test(tc, test_retry);
	tcase_add_test(tc, test_unknown);
	tcase_add_test(tc, test_requeue);
	tcase_add_test(tc, test_expire_refused);
	tcase_add_test(tc, test_done);
	tcase_add_test(tc, test_hold_damaged);
	tcase_add_test(tc, test_counts);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tcase_add_loop_test(parse, test_parse, 0, N_ELEMENTS(parse_cases));
	suite_add_tcase(s, parse);
	return unit_run(s);
}
