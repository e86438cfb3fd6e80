/*
 * stats - ternq stats: the queue's shape by age (as qshape prints it), the
 * storage state the running ternd reports, and the octets the spool holds
 * live against those on disk. Reads the queue database and the spool;
 * never changes either.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "control_client.h"
#include "qshape.h"
#include "spool.h"
#include "stats.h"
#include "textesc.h"
#include "trace.h"

/* print_row - one qshape line (the key is a recipient domain: escaped) */
static void print_row(const struct qshape_row *r, const char *key)
{
	char counts[QSHAPE_NBUCKETS * 24 + 1];
	size_t o = 0;

	counts[0] = '\0';
	for (size_t b = 0; b < QSHAPE_NBUCKETS && o < sizeof(counts); b++)
		o += (size_t)snprintf(counts + o, sizeof(counts) - o, " %5lu", r->count[b]);
	textesc_line(stdout, "%30s %6lu%s", key, r->total, counts);
}

/* stats_storage - ask the running ternd for its storage state: 1 with
 * the fields of its answer in f (state, outcomes kept, failing since,
 * reserve, free octets); 0 when no ternd answers so */
static int stats_storage(const struct stats_ctx *q, char *line, size_t len, char **f)
{
	int fd = control_connect(q->conf, ms_now() + q->timeout_ms), k = 0, rc;
	char *p = line;

	if (fd < 0)
		return 0;
	rc = control_ask(fd, "storage\n", line, len, q->timeout_ms);
	close(fd);
	if (rc < 0)
		return 0;
	while (k < 5 && (f[k] = strsep(&p, "\t")) != NULL)
		k++;
	return k == 5 && p == NULL;
}

/* storage_print - the storage line of ternq stats */
static void storage_print(const struct stats_ctx *q, json_t *o)
{
	char line[512], *f[5];
	int known = stats_storage(q, line, sizeof(line), f);
	uint64_t kept = known ? strtoull(f[1], NULL, 10) : 0, since = known ? strtoull(f[2], NULL, 10) : 0;
	uint64_t reserve = known ? strtoull(f[3], NULL, 10) : 0, have = known ? strtoull(f[4], NULL, 10) : 0;

	if (o && !known) {
		json_object_set_new(o, "storage", json_null());
	} else if (o) {
		json_t *st = json_object();

		json_object_set_new(st, "state", json_text(f[0]));
		json_object_set_new(st, "kept_outcomes", json_integer((json_int_t)kept));
		json_object_set_new(st, "failing_since_us", json_integer((json_int_t)since));
		json_object_set_new(st, "reserve_bytes", json_integer((json_int_t)reserve));
		json_object_set_new(st, "free_bytes", json_integer((json_int_t)have));
		json_object_set_new(o, "storage", st);
	} else if (!known) {
		printf("storage: unknown (no answer from ternd)\n");
	} else if (strcmp(f[0], "failing") == 0) {
		printf("storage: failing for %llu s: delivery outcomes cannot be committed, %llu kept "
		       "in memory; no new delivery\n",
		       (unsigned long long)(q->now > since ? (q->now - since) / 1000000 : 0),
		       (unsigned long long)kept);
	} else {
		printf("storage: %s: %llu KB free, reserve %llu KB%s\n", strcmp(f[0], "reserve") == 0
		       ? "reserve" : "ok", (unsigned long long)(have / 1024),
		       (unsigned long long)(reserve / 1024), strcmp(f[0], "reserve") == 0
		       ? ": ingest refused (452 4.3.1)" : "");
	}
}

/* The walk of cmd_stats: the shape, and the octets the queue holds. */
struct stats_walk {
	struct qshape *s;
	uint64_t live_seg, live_own;	/* bodies in shared segments, in own files */
};

/* stats_msg - a message into the shape and the sums (a store_msg_fn) */
static int stats_msg(const struct q_msg *m, const struct q_rcpt *r, size_t n, void *arg)
{
	struct stats_walk *w = arg;

	*((m->flags & QMSG_OWNFILE) ? &w->live_own : &w->live_seg) += m->size;
	return qshape_msg(m, r, n, w->s);
}

/* ternq_stats - queue shape by age, like qshape; then ternd's storage
 * state and the spool's octets, live against on disk; the exit status */
int ternq_stats(const struct stats_ctx *q)
{
	struct qshape s = {.by_peer = strcmp(q->by, "peer") == 0, .now_us = q->now};
	struct stats_walk w = {&s, 0, 0};
	uint64_t seg_bytes = 0, segs = 0, own_bytes = 0, owns = 0;
	struct spool *sp;
	char err[512];

	if (store_foreach(q->store, stats_msg, &w) < 0) {
		fprintf(stderr, "ternq: cannot read the queue\n");
		return 2;	/* ternq: usage or trouble */
	}
	if ((sp = spool_open(q->conf->global.spool_dir, 0, err, sizeof(err))) == NULL
	    || spool_usage(sp, &seg_bytes, &segs, &own_bytes, &owns) < 0)
		fprintf(stderr, "ternq: cannot read the spool: %s\n", sp ? strerror(errno) : err);
	spool_close(&sp);
	qshape_sort(&s);
	if (q->json) {
		json_t *o = json_object(), *rows = json_array(), *labels = json_array();

		for (size_t b = 0; b < QSHAPE_NBOUNDS; b++)
			json_array_append_new(labels, json_integer(qshape_bounds[b]));
		json_object_set_new(o, "by", json_string(q->by));
		json_object_set_new(o, "bucket_minutes", labels);
		json_object_set_new(o, "total", json_integer((json_int_t)s.all.total));
		for (size_t i = 0; i < s.n; i++) {
			json_t *row = json_object(), *c = json_array();

			for (size_t b = 0; b < QSHAPE_NBUCKETS; b++)
				json_array_append_new(c, json_integer((json_int_t)s.rows[i].count[b]));
			json_object_set_new(row, "key", json_string(s.rows[i].key));
			json_object_set_new(row, "total", json_integer((json_int_t)s.rows[i].total));
			json_object_set_new(row, "counts", c);
			json_array_append_new(rows, row);
		}
		json_object_set_new(o, "rows", rows);
		storage_print(q, o);
		json_object_set_new(o, "live_bytes", json_integer((json_int_t)(w.live_seg + w.live_own)));
		json_object_set_new(o, "spool_bytes", json_integer((json_int_t)(seg_bytes + own_bytes)));
		json_object_set_new(o, "segment_live_bytes", json_integer((json_int_t)w.live_seg));
		json_object_set_new(o, "segment_bytes", json_integer((json_int_t)seg_bytes));
		json_object_set_new(o, "segments", json_integer((json_int_t)segs));
		json_object_set_new(o, "own_files", json_integer((json_int_t)owns));
		print_json(o);
	} else {
		printf("%30s %6s", "", "T");
		for (size_t b = 0; b < QSHAPE_NBOUNDS; b++)
			printf(" %5u", qshape_bounds[b]);
		printf(" %5s\n", "1280+");
		print_row(&s.all, "TOTAL");
		for (size_t i = 0; i < s.n; i++)
			print_row(&s.rows[i], s.rows[i].key);
		storage_print(q, NULL);
		printf("spool: %" PRIu64 " octets live of %" PRIu64 " on disk; segments: %" PRIu64
		       " live of %" PRIu64 " in %" PRIu64 " file%s; own files: %" PRIu64 "\n",
		       w.live_seg + w.live_own, seg_bytes + own_bytes, w.live_seg, seg_bytes, segs,
		       segs == 1 ? "" : "s", owns);
	}
	qshape_free(&s);
	return 0;
}
