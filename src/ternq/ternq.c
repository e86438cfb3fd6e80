/*
 * ternq - queue inspection and control for ternd, like mailq, postsuper
 * and qshape.
 *
 * Reads the queue database directly (read-only transactions, so it works
 * whether ternd runs or not). Changes go to a running ternd through its
 * control socket, so its scheduler sees them at once; when ternd is not
 * running, ternq makes them itself with the same code (queue_ops).
 * Exit status: 0 ok, 1 a message was not found, 2 usage or configuration.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "cli.h"
#include "control_client.h"
#include "clock.h"
#include "json_text.h"
#include "log.h"
#include "privs.h"
#include "qshape.h"
#include "queue_ops.h"
#include "smtp_cmd.h"
#include "spool.h"
#include "stats.h"
#include "store.h"
#include "textesc.h"
#include "timefmt.h"
#include "trace.h"
#include "traceparent.h"
#include "units.h"
#include "xalloc.h"

#define EXIT_NOTFOUND 1
#define EXIT_USAGE 2

/* the options, as bits: which were given, which a command takes */
enum {
	OPT_JSON = 1 << 0, OPT_STATE = 1 << 1, OPT_PEER = 1 << 2, OPT_OLDER = 1 << 3,
	OPT_BY = 1 << 4, OPT_RCPT = 1 << 5, OPT_TIMEOUT = 1 << 6, OPT_SENDER = 1 << 7,
	OPT_DOMAIN = 1 << 8, OPT_UTC = 1 << 9,
	OPT_SELECT = OPT_STATE | OPT_PEER | OPT_OLDER | OPT_SENDER | OPT_RCPT | OPT_DOMAIN,
};

struct ternq {
	struct conf *conf;
	struct store *store;
	unsigned given;			/* OPT_* bits */
	int json;
	int utc;			/* times in UTC, not local time */
	/* the selection of list, and of ALL for the changing commands */
	const char *state;
	const char *peer;
	long long older_ms;
	const char *sender;
	const char *rcpt;		/* also trace --rcpt */
	const char *domain;
	const char *by;			/* stats: domain or peer */
	const char *timeout;		/* --timeout, as given */
	long long timeout_ms;
	uint64_t now;
	unsigned long long total_bytes;
	unsigned long long total_msgs;
};

/* usage - print usage and exit with status: 0 (--help) on the standard
 * output, else on the standard error */
static void __attribute__((noreturn)) usage_exit(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: ternq [-c FILE] [list] [SELECTORS] [--json] [--utc]\n"
		"       ternq [-c FILE] show QID [--json] [--utc]\n"
		"       ternq [-c FILE] cat QID\n"
		"       ternq [-c FILE] hold|release|delete|retry|requeue|expire QID... | - | ALL [SELECTORS]\n"
		"             [--timeout DURATION]\n"
		"       ternq [-c FILE] peers [--json] [--utc] [--timeout DURATION]\n"
		"       ternq [-c FILE] peers reset PEER [--timeout DURATION]\n"
		"       ternq [-c FILE] stats [--by domain|peer] [--json]\n"
		"       ternq [-c FILE] trace TRACE-ID|QID|MESSAGE-ID|--rcpt ADDRESS [--json] [--utc]\n"
		"SELECTORS: [--state queued|deferred|hold] [--peer P] [--older DURATION]\n"
		"           [--sender ADDRESS] [--rcpt ADDRESS] [--domain DOMAIN]\n"
		"       ternq -h | --help | -V | --version\n");
	exit(status);
}

/* usage - print usage on the standard error and exit 2 */
static void __attribute__((noreturn)) usage(void)
{
	usage_exit(EXIT_USAGE);
}

/* open_store - the queue database, read-only or for writing */
static struct store *open_store(const struct conf *conf, int readonly)
{
	char path[4096], err[1024];
	struct store *st;

	snprintf(path, sizeof(path), "%s/queue", conf->global.state_dir);
	if ((st = store_open(path, readonly, 0, err, sizeof(err))) == NULL) {
		fprintf(stderr, "ternq: %s\n", err);
		exit(EXIT_USAGE);
	}
	return st;
}

/* msg_state - a message's state for listing: hold, deferred or queued */
static const char *msg_state(const struct q_msg *m, const struct q_rcpt *r, size_t n)
{
	static const char *const names[] = {"queued", "deferred", "hold"};

	return names[queue_state(m, r, n)];
}

/* trace_hex - a message's trace id */
static void trace_hex(const struct q_msg *m, char out[TRACE_ID_HEX + 1])
{
	struct traceparent tp;

	memcpy(tp.trace_id, m->trace_id, sizeof(tp.trace_id));
	trace_id_hex(&tp, out);
}

/* queue_name - postqueue -j's queue for a message: hold, deferred (a
 * recipient has been tried), else active (ternd has no incoming or
 * maildrop queue: a message is in the queue once it got its 250) */
static const char *queue_name(const struct q_msg *m, const struct q_rcpt *r, size_t n)
{
	static const char *const names[] = {"active", "deferred", "hold"};

	return names[queue_state(m, r, n)];
}

/* msg_json - the JSON object of one message (members only ever grow):
 * every member postqueue -j documents, with its meaning, and tern's own;
 * listing (postqueue -j's view): recipients are those still to be
 * delivered, and delay_reason is present only when there is one */
static json_t *msg_json(const struct q_msg *m, const struct q_rcpt *r, size_t n, int listing, int utc)
{
	char tid[TRACE_ID_HEX + 1], spool[64], when[TIMEFMT_LEN];
	json_t *o = json_object(), *rs = json_array();

	trace_hex(m, tid);
	json_object_set_new(o, "queue_name", json_text(queue_name(m, r, n)));
	json_object_set_new(o, "forced_expire", json_false());
	json_object_set_new(o, "queue_id", json_text(m->qid));
	json_object_set_new(o, "arrival_time", json_integer((json_int_t)(m->arrival_us / 1000000)));
	json_object_set_new(o, "arrival_time_iso", json_text(timefmt_iso(m->arrival_us, utc, when, sizeof(when))));
	json_object_set_new(o, "message_size", json_integer((json_int_t)m->size));
	json_object_set_new(o, "sender", json_text(m->sender));
	json_object_set_new(o, "state", json_text(msg_state(m, r, n)));
	json_object_set_new(o, "trace_id", json_text(tid));
	json_object_set_new(o, "client", json_text(m->client));
	json_object_set_new(o, "helo", json_text(m->helo));
	json_object_set_new(o, "protocol", json_text(m->flags & QMSG_LMTP ? "LMTP" : "ESMTP"));
	if (m->flags & QMSG_OWNFILE)
		snprintf(spool, sizeof(spool), "own/%s", m->qid);
	else
		snprintf(spool, sizeof(spool), "seg/%016llx", (unsigned long long)m->seg_id);
	json_object_set_new(o, "spool_file", json_text(spool));
	for (size_t i = 0; i < n; i++) {
		json_t *x;

		if (listing && r[i].state != RCPT_QUEUED && r[i].state != RCPT_DEFERRED)
			continue;
		x = json_object();
		json_object_set_new(x, "address", json_text(r[i].addr));
		json_object_set_new(x, "state", json_text(rcpt_state_name(r[i].state)));
		json_object_set_new(x, "peer", json_text(r[i].peer));
		json_object_set_new(x, "attempts", json_integer(r[i].attempts));
		json_object_set_new(x, "next_attempt", json_integer((json_int_t)(r[i].next_us / 1000000)));
		json_object_set_new(x, "next_attempt_iso",
				    json_text(timefmt_iso(r[i].next_us, utc, when, sizeof(when))));
		if (!listing || r[i].reply[0])
			json_object_set_new(x, "delay_reason", json_text(r[i].reply));
		json_array_append_new(rs, x);
	}
	json_object_set_new(o, "recipients", rs);
	return o;
}

/* print_json - one JSON object on one line */
void print_json(json_t *o)
{
	char *s = json_dumps_short(o, JSON_COMPACT | JSON_ENSURE_ASCII);

	puts(s);
	free(s);
	json_decref(o);
}

/* rcpt_domain - the domain of an address ("" without one) */
static const char *rcpt_domain(const char *addr)
{
	const char *at = strrchr(addr, '@');

	return at ? at + 1 : "";
}

/* selected - whether a message is in the selection: every selector given
 * holds, the recipient ones for a recipient still to be delivered (the
 * ones list shows); list and ALL use this alone, so that they agree */
static int selected(const struct ternq *q, const struct q_msg *m, const struct q_rcpt *r, size_t n)
{
	unsigned need = q->given & (OPT_PEER | OPT_RCPT | OPT_DOMAIN);

	if (q->state && strcmp(q->state, msg_state(m, r, n)) != 0)
		return 0;
	if (q->older_ms && (q->now - m->arrival_us) / 1000 < (uint64_t)q->older_ms)
		return 0;
	if (q->sender && strcasecmp(q->sender, m->sender) != 0
	    && !(strcmp(q->sender, "<>") == 0 && m->sender[0] == '\0'))
		return 0;
	if (need == 0)
		return 1;
	for (size_t i = 0; i < n; i++) {
		if (r[i].state != RCPT_QUEUED && r[i].state != RCPT_DEFERRED)
			continue;
		if ((!q->peer || strcmp(r[i].peer, q->peer) == 0)
		    && (!q->rcpt || strcasecmp(r[i].addr, q->rcpt) == 0)
		    && (!q->domain || strcasecmp(rcpt_domain(r[i].addr), q->domain) == 0))
			return 1;
	}
	return 0;
}

/* list_one - one message in mailq's layout (or as a JSON line) */
static int list_one(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg)
{
	struct ternq *q = arg;
	char when[TIMEFMT_LEN];

	if (!selected(q, m, r, n))
		return 0;
	if (q->total_msgs == 0 && !q->json)	/* the heading, above the first message only */
		printf("%-14s %8s %-29s  %s\n", "-Queue ID-", "--Size--", "---------Arrival Time--------",
		       "-Sender/Recipient-------");
	q->total_msgs++;
	q->total_bytes += m->size;
	if (q->json) {
		print_json(msg_json(m, r, n, 1, q->utc));
		return 0;
	}
	timefmt_human(m->arrival_us, q->utc, TIMEFMT_MS, when, sizeof(when));
	textesc_line(stdout, "%-13s%c %8llu %-29s  %s", m->qid, m->flags & QMSG_HOLD ? '!' : ' ',
		     (unsigned long long)m->size, when, m->sender[0] ? m->sender : "MAILER-DAEMON");
	for (size_t i = 0; i < n; i++) {
		if (r[i].state != RCPT_QUEUED && r[i].state != RCPT_DEFERRED)
			continue;
		if (r[i].reply[0])
			textesc_line(stdout, "%55s(%s)", "", r[i].reply);
		textesc_line(stdout, "%55s%s", "", r[i].addr);
	}
	putchar('\n');
	return 0;
}

/* cmd_list - the queue, like mailq (its columns, the heading only above
 * a message; the arrival time is ours: with milliseconds and the offset,
 * as every time ternq prints) */
static int cmd_list(struct ternq *q)
{
	if (store_foreach(q->store, list_one, q) < 0) {
		fprintf(stderr, "ternq: cannot read the queue\n");
		return EXIT_USAGE;
	}
	if (!q->json) {
		uint64_t notices = 0;

		if (q->total_msgs == 0)
			printf("Mail queue is empty\n");
		else
			printf("-- %llu Kbytes in %llu Request%s.\n", (q->total_bytes + 1023) / 1024,
			       q->total_msgs, q->total_msgs == 1 ? "" : "s");
		/* bounces whose notification ternd has not queued yet (its log says why) */
		if (store_count_notices(q->store, &notices) == 0 && notices > 0)
			printf("-- %llu non-delivery notification%s waiting to be queued.\n",
			       (unsigned long long)notices, notices == 1 ? "" : "s");
	}
	return 0;
}

/* cmd_show - one message in detail */
static int cmd_show(struct ternq *q, const char *qid)
{
	struct q_msg m;
	struct q_rcpt *r;
	size_t n;
	char tid[TRACE_ID_HEX + 1], when[TIMEFMT_LEN];
	int rc = store_get(q->store, qid, &m, &r, &n);

	if (rc != 0) {
		fprintf(stderr, "ternq: %s: %s\n", qid, rc == 1 ? "not in the queue" : "cannot read");
		return rc == 1 ? EXIT_NOTFOUND : EXIT_USAGE;
	}
	if (q->json) {
		print_json(msg_json(&m, r, n, 0, q->utc));
	} else {
		trace_hex(&m, tid);
		/* one value a line, each line escaped (a newline in a value too) */
		printf("queue_id: %s\nstate: %s\narrival_time: %s\nsize: %llu\n", m.qid,
		       msg_state(&m, r, n), timefmt_human(m.arrival_us, q->utc, TIMEFMT_MS, when, sizeof(when)),
		       (unsigned long long)m.size);
		textesc_line(stdout, "sender: <%s>", m.sender);
		textesc_line(stdout, "client: %s", m.client);
		textesc_line(stdout, "helo: %s", m.helo);
		printf("protocol: %s\ntrace_id: %s\n", m.flags & QMSG_LMTP ? "LMTP" : "ESMTP", tid);
		textesc_line(stdout, "envid: %s", m.envid);
		for (size_t i = 0; i < n; i++)
			textesc_line(stdout, "recipient: <%s> state=%s peer=%s attempts=%u next_attempt=%s%s%s%s",
				     r[i].addr, rcpt_state_name(r[i].state), r[i].peer, r[i].attempts,
				     timefmt_human(r[i].next_us, q->utc, TIMEFMT_MS, when, sizeof(when)),
				     r[i].reply[0] ? " (" : "", r[i].reply, r[i].reply[0] ? ")" : "");
	}
	q_rcpts_free(&r, n);
	q_msg_clear(&m);
	return 0;
}

/* cmd_cat - the stored message bytes, checked against the digest */
static int cmd_cat(struct ternq *q, const char *qid)
{
	struct q_msg m;
	struct spool *sp;
	char err[512];
	int rc = store_get(q->store, qid, &m, NULL, NULL);

	if (rc != 0) {
		fprintf(stderr, "ternq: %s: %s\n", qid, rc == 1 ? "not in the queue" : "cannot read");
		return rc == 1 ? EXIT_NOTFOUND : EXIT_USAGE;
	}
	if ((sp = spool_open(q->conf->global.spool_dir, 0, err, sizeof(err))) != NULL
	    && (rc = spool_body_digest(sp, &m, stdout)) < 0 && errno == ENOENT) {
		/* ternd copied it forward and removed the segment meanwhile:
		 * once more where its record says it is now (nothing was
		 * written: the file did not open) */
		q_msg_clear(&m);
		if ((rc = store_get(q->store, qid, &m, NULL, NULL)) != 0) {
			fprintf(stderr, "ternq: %s: %s\n", qid, rc == 1 ? "not in the queue" : "cannot read");
			spool_close(&sp);
			return rc == 1 ? EXIT_NOTFOUND : EXIT_USAGE;
		}
		rc = spool_body_digest(sp, &m, stdout);
	}
	if (sp == NULL || rc < 0) {
		fprintf(stderr, "ternq: %s: cannot open the spool file: %s\n", qid,
			sp ? strerror(errno) : err);
		spool_close(&sp);
		q_msg_clear(&m);
		return EXIT_USAGE;
	}
	spool_close(&sp);
	if (rc == SPOOL_BODY_SHORT)
		fprintf(stderr, "ternq: %s: spool file is short\n", qid);
	else if (rc == SPOOL_BODY_MISMATCH)
		fprintf(stderr, "ternq: %s: body does not match its digest: spool damaged\n", qid);
	q_msg_clear(&m);
	return rc == 0 ? 0 : EXIT_USAGE;
}

/* control_timed_out - say that ternd did not answer in time */
static void control_timed_out(const struct ternq *q)
{
	fprintf(stderr, "ternq: ternd's control socket did not answer within %s\n", q->timeout);
}

struct change {
	struct ternq *q;
	enum queue_op op;
	const char *verb;
	int fd;				/* control socket, or -1 */
	int lock;			/* ternd.lock held in direct mode, or -1 */
	struct spool *sp;		/* when changing the queue ourselves */
	int missing;
	int failed;
	unsigned done;			/* changed */
	unsigned unchanged;		/* found, already as asked */
};

/* change_one - apply the operation to one queue id */
static void change_one(struct change *c, const char *qid)
{
	char req[64], answer[300], err[512];

	if (strlen(qid) != QID_LEN) {
		fprintf(stderr, "ternq: %s: not a queue id\n", qid);
		c->missing = 1;
		return;
	}
	if (c->fd >= 0) {
		snprintf(req, sizeof(req), "%s %s\n", c->verb, qid);
		if (control_ask(c->fd, req, answer, sizeof(answer), c->q->timeout_ms) < 0) {
			if (errno == ETIMEDOUT)
				control_timed_out(c->q);
			else
				fprintf(stderr, "ternq: lost the connection to ternd\n");
			c->failed = 1;
		} else if (strcmp(answer, "not found") == 0) {
			fprintf(stderr, "ternq: %s: not in the queue\n", qid);
			c->missing = 1;
		} else if (strcmp(answer, "unchanged") == 0) {
			c->unchanged++;
		} else if (strcmp(answer, "ok") != 0) {
			fprintf(stderr, "ternq: %s: %s\n", qid, answer);
			c->failed = 1;
		} else {
			c->done++;
		}
		return;
	}
	{
		struct queue_op_arg a = {.op = c->op, .now_us = now_us(), .conf = c->q->conf};

		memcpy(a.qid, qid, QID_LEN + 1);
		if (store_write(c->q->store, queue_op_write, &a, err, sizeof(err)) < 0) {
			fprintf(stderr, "ternq: %s: %s\n", qid, err);
			c->failed = 1;
		} else if (!a.found) {
			fprintf(stderr, "ternq: %s: not in the queue\n", qid);
			c->missing = 1;
		} else if (!a.changed) {
			queue_op_warn(&a);
			c->unchanged++;
		} else {
			queue_op_warn(&a);
			queue_op_cleanup(c->sp, &a);
			c->done++;
			/* ternd is not running: the log line is ours to write */
			if (a.op == QOP_DELETE)
				log_info("%s: removed by ternq (uid %u): %s", a.qid, (unsigned)getuid(),
					 a.envelope);
			else
				log_info("%s: %s by ternq (uid %u)", a.qid, queue_op_done(a.op),
					 (unsigned)getuid());
		}
	}
}

struct id_list {
	char **ids;
	size_t n, cap;
};

struct id_collect {
	struct id_list list;
	const struct ternq *q;
};

/* collect_id - the queue id of every selected message, for ALL */
static int collect_id(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg)
{
	struct id_collect *c = arg;
	struct id_list *l = &c->list;

	if (!selected(c->q, m, r, n))
		return 0;
	l->ids = xgrowarray(l->ids, &l->cap, l->n + 1, sizeof(*l->ids));
	l->ids[l->n++] = xstrdup(m->qid);
	return 0;
}

/* cmd_change - hold, release, delete, retry, requeue or expire the given messages */
static int cmd_change(struct ternq *q, const char *verb, char **ids, int nids)
{
	struct change c = {.q = q, .verb = verb, .fd = -1, .lock = -1};
	char err[512], line[256];

	if (queue_op_parse(verb, &c.op) < 0)
		usage();
	if (nids == 0)
		usage();
	if (q->given & OPT_SELECT) {
		int all = 0;

		for (int i = 0; i < nids; i++)
			all |= strcmp(ids[i], "ALL") == 0;
		if (!all) {
			fprintf(stderr, "ternq: %s: selectors (--state, --peer, --older, --sender, "
				"--rcpt, --domain) go with ALL\n", verb);
			return EXIT_USAGE;
		}
	}
	c.fd = control_connect(q->conf, ms_now() + q->timeout_ms);
	if (c.fd < 0 && errno == ETIMEDOUT) {
		control_timed_out(q);
		return EXIT_USAGE;
	}
	if (c.fd < 0 && errno != ENOENT && errno != ECONNREFUSED) {
		/* ternd may be running: never write behind its back. */
		fprintf(stderr, "ternq: cannot reach ternd's control socket: %s\n", strerror(errno));
		return EXIT_USAGE;
	}
	if (c.fd < 0 && c.op == QOP_EXPIRE) {
		/* the DSN is ternd's to build and queue (its notice code) */
		fprintf(stderr, "ternq: expire needs ternd running: it queues a notification\n");
		return EXIT_USAGE;
	}
	if (c.fd < 0) {
		/* ternd is not running: change the queue ourselves, holding its
		 * lock, so that a ternd we could not reach is never written
		 * behind. */
		char lock[4096];

		snprintf(lock, sizeof(lock), "%s/ternd.lock", q->conf->global.state_dir);
		if ((c.lock = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) >= 0
		    && flock(c.lock, LOCK_EX | LOCK_NB) < 0) {
			fprintf(stderr, "ternq: ternd is running (%s is locked) but its control "
				"socket does not answer: not changing the queue\n", lock);
			close(c.lock);
			return EXIT_USAGE;
		}
		store_close(&q->store);
		q->store = open_store(q->conf, 0);
		/* ours to log what we change, to syslog as ternd would */
		log_open(q->conf->global.syslog_name, 0, 0);
		if ((c.sp = spool_open(q->conf->global.spool_dir, 0, err, sizeof(err))) == NULL) {
			fprintf(stderr, "ternq: %s\n", err);
			return EXIT_USAGE;
		}
	}
	for (int i = 0; i < nids && !c.failed; i++) {
		if (strcmp(ids[i], "ALL") == 0) {
			struct id_collect cl = {.q = q};
			struct id_list l;

			if (store_foreach(q->store, collect_id, &cl) < 0) {
				fprintf(stderr, "ternq: cannot read the queue\n");
				c.failed = 1;
			}
			l = cl.list;
			for (size_t k = 0; k < l.n; k++) {
				int missing = c.missing;

				change_one(&c, l.ids[k]);
				c.missing = missing;	/* gone meanwhile (delivered): fine */
				free(l.ids[k]);
			}
			free(l.ids);
		} else if (strcmp(ids[i], "-") == 0) {
			while (fgets(line, sizeof(line), stdin) && !c.failed) {
				line[strcspn(line, " \t\r\n")] = '\0';
				if (line[0])
					change_one(&c, line);
			}
		} else {
			change_one(&c, ids[i]);
		}
	}
	if (c.fd >= 0)
		close(c.fd);
	if (c.lock >= 0)
		close(c.lock);
	spool_close(&c.sp);
	/* only what changed counts, as postsuper counts */
	if (!c.failed || c.done) {
		fprintf(stderr, "ternq: %s: %u message%s", verb, c.done, c.done == 1 ? "" : "s");
		if (c.unchanged)
			fprintf(stderr, " (%u unchanged)", c.unchanged);
		fputc('\n', stderr);
	}
	return c.failed ? EXIT_USAGE : c.missing ? EXIT_NOTFOUND : 0;
}

/* control_open - connect to a running ternd for a request of its own
 * (peers); -1 after saying why (ternd not running, or no answer) */
static int control_open(const struct ternq *q, const char *what)
{
	int fd = control_connect(q->conf, ms_now() + q->timeout_ms);

	if (fd < 0 && errno == ETIMEDOUT)
		control_timed_out(q);
	else if (fd < 0 && (errno == ENOENT || errno == ECONNREFUSED))
		fprintf(stderr, "ternq: %s needs ternd running: its peers live there\n", what);
	else if (fd < 0)
		fprintf(stderr, "ternq: cannot reach ternd's control socket: %s\n", strerror(errno));
	return fd;
}

/* peer_print - one peer of ternd's "peers" answer (fields split at tabs:
 * name, breaker, since, open until, busy, idle, queued, error time, error) */
static void peer_print(const struct ternq *q, char **f)
{
	char since[TIMEFMT_LEN], until[TIMEFMT_LEN], errat[TIMEFMT_LEN];
	uint64_t t_since = strtoull(f[2], NULL, 10), t_until = strtoull(f[3], NULL, 10);
	uint64_t t_err = strtoull(f[7], NULL, 10);

	if (q->json) {
		json_t *o = json_object();

		json_object_set_new(o, "peer", json_text(f[0]));
		json_object_set_new(o, "breaker", json_text(f[1]));
		if (t_since) {	/* none for a parked peer */
			json_object_set_new(o, "breaker_since", json_integer((json_int_t)(t_since / 1000000)));
			json_object_set_new(o, "breaker_since_iso",
					    json_text(timefmt_iso(t_since, q->utc, since, sizeof(since))));
		}
		if (t_until) {
			json_object_set_new(o, "open_until", json_integer((json_int_t)(t_until / 1000000)));
			json_object_set_new(o, "open_until_iso",
					    json_text(timefmt_iso(t_until, q->utc, until, sizeof(until))));
		}
		json_object_set_new(o, "connections_busy", json_integer(atoi(f[4])));
		json_object_set_new(o, "connections_idle", json_integer(atoi(f[5])));
		json_object_set_new(o, "queued_recipients", json_integer(atoll(f[6])));
		if (t_err) {
			json_object_set_new(o, "last_error", json_text(f[8]));
			json_object_set_new(o, "last_error_time", json_integer((json_int_t)(t_err / 1000000)));
			json_object_set_new(o, "last_error_time_iso",
					    json_text(timefmt_iso(t_err, q->utc, errat, sizeof(errat))));
		}
		print_json(o);
		return;
	}
	if (t_since)
		timefmt_human(t_since, q->utc, TIMEFMT_MS, since, sizeof(since));
	else
		snprintf(since, sizeof(since), "-");
	textesc_line(stdout, "%-20s %-9s %-29s %4s %4s %8s  %s", f[0], f[1], since, f[4], f[5], f[6],
		     t_err ? f[8] : "-");
	if (t_until)
		textesc_line(stdout, "%20s open until %s", "",
			     timefmt_human(t_until, q->utc, TIMEFMT_MS, until, sizeof(until)));
	if (t_err)
		textesc_line(stdout, "%20s last error at %s", "",
			     timefmt_human(t_err, q->utc, TIMEFMT_MS, errat, sizeof(errat)));
}

/* cmd_peers - each configured peer of the running ternd: breaker state
 * (or "parked": no host) and since when, connections busy and idle,
 * queued recipients, last error;
 * or, with "reset NAME", close that peer's breaker now */
static int cmd_peers(struct ternq *q, char **args, int nargs)
{
	char req[200], line[1024];
	long long deadline = ms_now() + q->timeout_ms;
	int fd, rc = 0, n = 0;

	if (nargs != 0 && !(nargs == 2 && strcmp(args[0], "reset") == 0))
		usage();
	if (nargs == 2 && (q->given & OPT_JSON)) {
		fprintf(stderr, "ternq: peers reset does not take --json\n");
		return EXIT_USAGE;
	}
	if (nargs == 2 && (strlen(args[1]) > 100 || strcspn(args[1], " \t\r\n") != strlen(args[1]))) {
		fprintf(stderr, "ternq: peers reset: no such peer name\n");
		return EXIT_USAGE;
	}
	if ((fd = control_open(q, nargs ? "peers reset" : "peers")) < 0)
		return EXIT_USAGE;
	if (nargs == 2)
		snprintf(req, sizeof(req), "reset %s\n", args[1]);
	else
		snprintf(req, sizeof(req), "peers\n");
	if (control_send_req(fd, req, deadline) < 0 || control_line(fd, line, sizeof(line), deadline) < 0) {
		if (errno == ETIMEDOUT)
			control_timed_out(q);
		else
			fprintf(stderr, "ternq: lost the connection to ternd\n");
		close(fd);
		return EXIT_USAGE;
	}
	if (nargs == 2) {
		close(fd);
		if (strcmp(line, "ok") == 0) {
			textesc_line(stderr, "ternq: peers reset: %s: breaker closed", args[1]);
			return 0;
		}
		if (strcmp(line, "parked") == 0) {
			textesc_line(stderr, "ternq: peers reset: %s: parked (no host): it has no "
				     "breaker; its mail waits for a host", args[1]);
			return EXIT_NOTFOUND;
		}
		if (strcmp(line, "not found") == 0) {
			textesc_line(stderr, "ternq: peers reset: %s: no such relayed peer", args[1]);
			return EXIT_NOTFOUND;
		}
		textesc_line(stderr, "ternq: peers reset: %s", line);
		return EXIT_USAGE;
	}
	if (!q->json)
		printf("%-20s %-9s %-29s %4s %4s %8s  %s\n", "-Peer-", "-Breaker-", "-------------Since-----------",
		       "Busy", "Idle", "Queued", "-Last error-");
	while (strcmp(line, ".") != 0) {
		char *f[9], *p = line;
		int k = 0;

		if (strncmp(line, "error: ", 7) == 0) {
			textesc_line(stderr, "ternq: peers: %s", line + 7);
			rc = EXIT_USAGE;
			break;
		}
		while (k < 9 && (f[k] = strsep(&p, "\t")) != NULL)
			k++;
		if (k == 9) {
			peer_print(q, f);
			n++;
		}
		if (control_line(fd, line, sizeof(line), deadline) < 0) {
			if (errno == ETIMEDOUT)
				control_timed_out(q);
			else
				fprintf(stderr, "ternq: lost the connection to ternd\n");
			rc = EXIT_USAGE;
			break;
		}
	}
	close(fd);
	if (rc == 0 && n == 0 && !q->json)
		printf("No peers\n");
	return rc;
}

/* cmd_stats - ternq stats (stats.c) */
static int cmd_stats(struct ternq *q)
{
	struct stats_ctx c = {q->conf, q->store, q->by, q->json, q->now, q->timeout_ms};

	return ternq_stats(&c);
}

/* ternq_option - take one of ternq's own options; 1 if ch was one
 * (values are checked once all options are in) */
static int ternq_option(struct ternq *q, int ch, const char *arg)
{
	const char *why;

	switch (ch) {
	case 'j':
		q->given |= OPT_JSON;
		q->json = 1;
		return 1;
	case 's':
		q->given |= OPT_STATE;
		q->state = arg;
		return 1;
	case 'p':
		q->given |= OPT_PEER;
		q->peer = arg;
		return 1;
	case 'S':
		q->given |= OPT_SENDER;
		q->sender = arg;
		return 1;
	case 'd':
		q->given |= OPT_DOMAIN;
		q->domain = arg;
		return 1;
	case 'o':
		q->given |= OPT_OLDER;
		if (units_duration(arg, &q->older_ms, &why) < 0) {
			fprintf(stderr, "ternq: --older %s: %s\n", arg, why);
			exit(EXIT_USAGE);
		}
		return 1;
	case 'b':
		q->given |= OPT_BY;
		q->by = arg;
		return 1;
	case 'r':
		q->given |= OPT_RCPT;
		q->rcpt = arg;
		return 1;
	case 'u':
		q->given |= OPT_UTC;
		q->utc = 1;
		return 1;
	case 't':
		q->given |= OPT_TIMEOUT;
		why = "must be more than 0";
		if (units_duration(arg, &q->timeout_ms, &why) < 0 || q->timeout_ms <= 0) {
			fprintf(stderr, "ternq: --timeout %s: %s\n", arg, why);
			exit(EXIT_USAGE);
		}
		q->timeout = arg;
		return 1;
	default:
		return 0;
	}
}

/* check_options - an option the command does not take is a usage error
 * (exit 2), never silently ignored */
static void check_options(const struct ternq *q, const char *cmd)
{
	static const struct {
		const char *cmd;
		unsigned takes;
	} cmds[] = {
		{"list", OPT_SELECT | OPT_JSON | OPT_UTC}, {"show", OPT_JSON | OPT_UTC}, {"cat", 0},
		{"hold", OPT_SELECT | OPT_TIMEOUT}, {"release", OPT_SELECT | OPT_TIMEOUT},
		{"delete", OPT_SELECT | OPT_TIMEOUT}, {"retry", OPT_SELECT | OPT_TIMEOUT},
		{"requeue", OPT_SELECT | OPT_TIMEOUT}, {"expire", OPT_SELECT | OPT_TIMEOUT},
		{"peers", OPT_JSON | OPT_UTC | OPT_TIMEOUT},
		{"stats", OPT_BY | OPT_JSON}, {"trace", OPT_RCPT | OPT_JSON | OPT_UTC},
	};
	static const char *const names[] = {"--json", "--state", "--peer", "--older", "--by",
					    "--rcpt", "--timeout", "--sender", "--domain", "--utc"};

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		unsigned extra;

		if (strcmp(cmds[i].cmd, cmd) != 0)
			continue;
		if ((extra = q->given & ~cmds[i].takes) == 0)
			return;
		for (size_t b = 0; b < sizeof(names) / sizeof(names[0]); b++)
			if (extra & (1u << b)) {
				fprintf(stderr, "ternq: %s does not take %s\n", cmd, names[b]);
				break;
			}
		exit(EXIT_USAGE);
	}
	usage();	/* no such command */
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"state", required_argument, NULL, 's'},
		{"peer", required_argument, NULL, 'p'},
		{"older", required_argument, NULL, 'o'},
		{"by", required_argument, NULL, 'b'},
		{"rcpt", required_argument, NULL, 'r'},
		{"sender", required_argument, NULL, 'S'},
		{"domain", required_argument, NULL, 'd'},
		{"timeout", required_argument, NULL, 't'},
		{"utc", no_argument, NULL, 'u'},
		CLI_LONG_OPTS,
		{NULL, 0, NULL, 0},
	};
	struct ternq q = {0};
	struct cli cli;
	const char *cmd;
	struct privs_fs fs;
	char err[512];
	int ch, rc;

	log_init(argv[0], "ternq");
	cli_init(&cli);
	q.by = "domain";
	q.timeout = "30s";
	q.timeout_ms = 30000;
	while ((ch = getopt_long(argc, argv, "+" CLI_COMMON_OPTS "Vh", longopts, NULL)) != -1) {
		if (cli_option(&cli, ch, optarg) || ternq_option(&q, ch, optarg))
			continue;
		if (ch == 'V')
			cli_version();
		usage_exit(ch == 'h' ? 0 : EXIT_USAGE);
	}
	if (sodium_init() < 0)
		return EXIT_USAGE;
	q.conf = cli_load_conf(&cli);
	/* Root works on the queue with the tern user's file system identity:
	 * its directories are that user's, and root makes no path operation
	 * in them. Only that identity: ternd still sees root ask (SO_PEERCRED
	 * reports the effective uid) and logs so. */
	if (privs_fs_enter_user(&fs, q.conf->global.user, err, sizeof(err)) < 0) {
		fprintf(stderr, "ternq: %s\n", err);
		return EXIT_USAGE;
	}
	q.now = now_us();
	cmd = optind < argc ? argv[optind] : "list";
	/* Options may also follow the command (and its arguments): parse the
	 * rest as a fresh argument vector, with the command as its argv[0]. */
	if (optind < argc) {
		argv += optind;
		argc -= optind;
	} else {
		argv += argc - 1;
		argc = 1;
	}
	optind = 0;
	while ((ch = getopt_long(argc, argv, "js:p:o:b:r:S:d:t:Vh", longopts, NULL)) != -1) {
		if (ternq_option(&q, ch, optarg))
			continue;
		if (ch == 'V')
			cli_version();
		usage_exit(ch == 'h' ? 0 : EXIT_USAGE);
	}
	if ((q.state && strcmp(q.state, "queued") && strcmp(q.state, "deferred") && strcmp(q.state, "hold"))
	    || (strcmp(q.by, "domain") && strcmp(q.by, "peer")))
		usage();
	check_options(&q, cmd);
	q.store = open_store(q.conf, 1);
	if (strcmp(cmd, "list") == 0 && optind == argc)
		rc = cmd_list(&q);
	else if (strcmp(cmd, "show") == 0 && optind + 1 == argc)
		rc = cmd_show(&q, argv[optind]);
	else if (strcmp(cmd, "cat") == 0 && optind + 1 == argc)
		rc = cmd_cat(&q, argv[optind]);
	else if (strcmp(cmd, "trace") == 0 && optind + !q.rcpt == argc)
		rc = ternq_trace(q.store, q.conf, q.rcpt ? q.rcpt : argv[optind], q.rcpt != NULL, q.json,
				 q.utc);
	else if (strcmp(cmd, "stats") == 0 && optind == argc)
		rc = cmd_stats(&q);
	else if (strcmp(cmd, "peers") == 0)
		rc = cmd_peers(&q, argv + optind, argc - optind);
	else if (!strcmp(cmd, "hold") || !strcmp(cmd, "release") || !strcmp(cmd, "delete")
		 || !strcmp(cmd, "retry") || !strcmp(cmd, "requeue") || !strcmp(cmd, "expire"))
		rc = cmd_change(&q, cmd, argv + optind, argc - optind);
	else
		usage();
	store_close(&q.store);
	conf_free(&q.conf);
	return rc;
}
