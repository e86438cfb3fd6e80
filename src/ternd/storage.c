/*
 * storage - ternd when its storage cannot record what it does (see
 * storage.h).
 *
 * A delivery attempt whose outcome the committer cannot record (a full
 * disk, an I/O error) would otherwise be due again at once: its message
 * is still queued, unchanged. So the outcome is kept here, in memory (at
 * most STORAGE_KEEP_MAX of them), and its message is not offered again
 * (storage_kept) until the outcome is recorded; and ternd is "failing":
 * delivery threads take no new work (sched_load), since each attempt
 * would add an outcome that cannot be recorded. While failing, the
 * scheduler makes a probe write once a second (storage_retry); the first
 * commit that succeeds, of any job, ends the state, and the kept outcomes
 * are then recorded, as many per scheduler pass as STORAGE_RETRY_PASS.
 * After a restart a kept outcome is gone: its message is sent again, once.
 *
 * Ingest keeps a reserve of free space for recording outcomes: below it,
 * MAIL is refused with 452 4.3.1 (storage_room), while delivery, which
 * frees space, goes on. The state is logged once a minute while it lasts,
 * and shown as tern_storage_state and by ternq stats.
 *
 * Never decides an outcome, and never writes to the store but through
 * the committer.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "commit.h"
#include "log.h"
#include "notice.h"
#include "peer.h"
#include "ratelimit.h"
#include "relay.h"
#include "relay_result.h"
#include "stats.h"
#include "storage.h"
#include "ternd.h"
#include "xalloc.h"

#define STORAGE_RETRY_MS 1000		/* between tries while failing */
#define STORAGE_RETRY_PASS 64		/* kept outcomes recorded per scheduler pass */
#define STORAGE_STRIKES 3		/* a kept outcome that fails alone: dropped */

/* An outcome not recorded yet, with its own copies of what it points to. */
struct kept {
	struct result res;
	char *relay, *host, *peer;
	int strikes;			/* tries that failed while a probe did not */
};

static struct {
	pthread_mutex_t lock;
	struct kept *kept[STORAGE_KEEP_MAX];	/* sorted by queue id */
	size_t n;
	int failing;			/* read without the lock: storage_failing */
	uint64_t since;			/* failing since, microseconds */
	uint64_t last_try;		/* storage_retry's last try while failing */
	uint64_t dropped;		/* outcomes not kept: the bound was reached */
	char why[256];			/* the last failure */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct ratelimit warnings = RATELIMIT_INIT;

/* find - where qid is in the kept outcomes, or would go (under the lock) */
static size_t find(const char *qid, int *found)
{
	size_t lo = 0, hi = st.n;

	*found = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(st.kept[mid]->res.qid, qid);

		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* state_value - tern_storage_state at a scrape */
static double state_value(void *arg)
{
	(void)arg;
	return (double)storage_state(NULL, NULL);
}

/* kept_value - tern_storage_kept_outcomes at a scrape */
static double kept_value(void *arg)
{
	uint64_t n = 0;

	(void)arg;
	storage_state(&n, NULL);
	return (double)n;
}

/* storage_init - register the storage metrics (stats_init) */
void storage_init(void)
{
	metric_gauge_fn(metric_new(METRIC_GAUGE, "tern_storage_state",
				   "Storage: 0 ok, 1 free space below the reserve (ingest refused "
				   "with 452 4.3.1), 2 failing (delivery outcomes cannot be "
				   "committed: no new delivery).", NULL, NULL, 0), state_value, NULL);
	metric_gauge_fn(metric_new(METRIC_GAUGE, "tern_storage_kept_outcomes",
				   "Delivery outcomes kept in memory because they could not be "
				   "committed; their messages are not sent again.", NULL, NULL, 0),
			kept_value, NULL);
}

/* storage_failing - the committer fails: take no new delivery work */
int storage_failing(void)
{
	return __atomic_load_n(&st.failing, __ATOMIC_ACQUIRE);
}

/* storage_kept - is qid's last outcome waiting here to be recorded? */
int storage_kept(const char *qid)
{
	int found = 0;

	if (__atomic_load_n(&st.n, __ATOMIC_ACQUIRE) == 0)
		return 0;
	pthread_mutex_lock(&st.lock);
	find(qid, &found);
	pthread_mutex_unlock(&st.lock);
	return found;
}

/* warn - the failing state's line, once a minute (under the lock) */
static void warn(void)
{
	uint64_t held;

	if (ratelimit_pass(&warnings, "failing", now_us(), RATELIMIT_MINUTE, &held))
		log_warning("storage: delivery outcomes cannot be committed (%s) for %" PRIu64
			    " s: no new delivery; %zu outcome%s kept in memory, %" PRIu64
			    " not kept", st.why, (now_us() - st.since) / 1000000, st.n,
			    st.n == 1 ? "" : "s", st.dropped);
}

/* fail - enter (or stay in) the failing state (under the lock) */
static void fail(const char *why)
{
	snprintf(st.why, sizeof(st.why), "%s", why);
	if (!st.failing) {
		st.since = st.last_try = now_us();
		__atomic_store_n(&st.failing, 1, __ATOMIC_RELEASE);
	}
	warn();
}

/* kept_free - forget a kept outcome */
static void kept_free(struct kept **kp)
{
	struct kept *k = *kp;

	notice_draft_free(&k->res.draft);
	free(k->res.out);
	q_msg_clear(&k->res.msg);
	q_rcpts_free(&k->res.rcpts, k->res.nrcpts);
	free(k->relay);
	free(k->host);
	free(k->peer);
	free(k);
	*kp = NULL;
}

/*
 * storage_keep - an attempt's outcome that the committer could not
 * record (why): keep it, taking over what res owns but its DSN draft
 * (res is left empty),
 * and enter the failing state. 1 kept; 0 when STORAGE_KEEP_MAX are kept
 * already (res is left as it was: its message may be sent again).
 */
int storage_keep(struct result *res, const char *peer, const char *why)
{
	struct kept *k;
	size_t at;
	int found, kept = 0;

	pthread_mutex_lock(&st.lock);
	at = find(res->qid, &found);
	if (!found && st.n < STORAGE_KEEP_MAX) {
		k = xcalloc(1, sizeof(*k));
		k->res = *res;
		k->relay = xstrdup(res->relay ? res->relay : "none");
		k->host = res->host ? xstrdup(res->host) : NULL;
		k->peer = xstrdup(peer);
		k->res.relay = k->relay;
		k->res.host = k->host;
		/* the DSN draft stays with the caller (up to about 150 KB):
		 * the write that records the outcome builds it (notice_put) */
		k->res.draft = NULL;
		memset(&res->msg, 0, sizeof(res->msg));
		res->out = NULL;
		res->nout = 0;
		res->rcpts = NULL;
		res->nrcpts = 0;
		memmove(&st.kept[at + 1], &st.kept[at], (st.n - at) * sizeof(st.kept[0]));
		st.kept[at] = k;
		__atomic_store_n(&st.n, st.n + 1, __ATOMIC_RELEASE);
		kept = 1;
	} else if (!found) {
		st.dropped++;
	}
	fail(why);
	pthread_mutex_unlock(&st.lock);
	return kept;
}

/* storage_committed - a commit succeeded: the failing state ends (the
 * committer's writer, after each batch) */
void storage_committed(void)
{
	uint64_t secs;
	size_t n;

	if (!storage_failing())
		return;
	pthread_mutex_lock(&st.lock);
	secs = (now_us() - st.since) / 1000000;
	n = st.n;
	__atomic_store_n(&st.failing, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&st.lock);
	log_info("storage: commits succeed again after %" PRIu64 " s: delivery resumes, %zu kept "
		 "outcome%s to record", secs, n, n == 1 ? "" : "s");
	relay_kick();
}

/* probe_write - a write that must reach the disk, to learn whether
 * commits succeed again when no outcome is kept */
static int probe_write(struct store_txn *txn, void *arg)
{
	(void)arg;
	return store_put_meta(txn, "storage_probe", now_us());
}

/* submit - one write through the committer; 0, or -1 (failing, logged) */
static int submit(store_write_fn write, void *arg)
{
	struct job job;

	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = write;
	job.arg = arg;
	if (commit_submit(&job) == 0)
		return 0;
	pthread_mutex_lock(&st.lock);
	fail(job.err);
	pthread_mutex_unlock(&st.lock);
	return -1;
}

/* record - try to record one kept outcome through the committer; 0 done */
static int record(struct kept *k)
{
	if (submit(relay_result_apply, &k->res) < 0)
		return -1;
	relay_result_done(&k->res, k->peer);
	return 0;
}

/* first - the first kept outcome (left in the table), or NULL. Its message
 * is not offered meanwhile: sched_load reads the queue id from here too */
static struct kept *first(void)
{
	struct kept *k;

	pthread_mutex_lock(&st.lock);
	k = st.n ? st.kept[0] : NULL;
	pthread_mutex_unlock(&st.lock);
	return k;
}

/* forget - remove k from the table */
static void forget(struct kept *k)
{
	size_t at;
	int found;

	pthread_mutex_lock(&st.lock);
	at = find(k->res.qid, &found);
	if (found) {
		memmove(&st.kept[at], &st.kept[at + 1], (st.n - at - 1) * sizeof(st.kept[0]));
		__atomic_store_n(&st.n, st.n - 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&st.lock);
	kept_free(&k);
}

/*
 * storage_retry - the scheduler's pass. While failing, a probe write once
 * a second: its success ends the state. Otherwise the kept outcomes are
 * recorded; one that fails while a probe right after it succeeds is not
 * failing for want of storage: after STORAGE_STRIKES such tries it is
 * dropped (logged: its message may be sent again), so that one outcome
 * the store refuses never holds up delivery.
 */
void storage_retry(void)
{
	struct kept *k;

	if (storage_failing()) {
		uint64_t now = now_us();
		int due;

		pthread_mutex_lock(&st.lock);
		due = now - st.last_try >= STORAGE_RETRY_MS * 1000ULL;
		if (due)
			st.last_try = now;
		pthread_mutex_unlock(&st.lock);
		if (due)
			submit(probe_write, NULL);
		return;
	}
	for (int i = 0; i < STORAGE_RETRY_PASS && !relay_stopping() && (k = first()) != NULL; i++) {
		if (record(k) < 0) {
			if (submit(probe_write, NULL) < 0)
				return;	/* the storage fails: not the outcome's fault */
			if (++k->strikes < STORAGE_STRIKES)
				continue;
			log_error("%s: the outcome of its delivery attempt cannot be recorded, though "
				  "other writes succeed: dropped, the message may be sent again",
				  k->res.qid);
		}
		forget(k);
	}
}

/* free_below - does the file system of dir have less than want octets free? */
static int free_below(const char *dir, uint64_t want, uint64_t *have)
{
	struct statvfs fs;

	if (statvfs(dir, &fs) < 0)
		return 0;
	*have = (uint64_t)fs.f_bavail * fs.f_frsize;
	return *have < want;
}

/* Transactions that may be in flight to relayed peers now: the sum of
 * the windows of the connections delivering (relay.c). */
static _Atomic int64_t windows;

/* storage_window - a delivering connection's window grew (delta > 0) or
 * shrank, or its delivery ended (-its window) */
void storage_window(int64_t delta)
{
	windows += delta;
}

/* storage_reserve_max - the reserve at full depth: every relayed peer's
 * max_connections, each with max_pipeline_depth transactions in flight
 * (or the two DATA keeps: one waiting for its final reply, one written
 * behind it); what ternd -n holds against the file system */
uint64_t storage_reserve_max(const struct conf *conf)
{
	uint64_t tx = 0;

	for (size_t i = 0; i < conf->npeers; i++) {
		const struct conf_peer *p = &conf->peers[i];
		uint64_t conns = p->max_connections > 0 ? (uint64_t)p->max_connections : 1;
		uint64_t depth = p->max_pipeline_depth > 1 ? (uint64_t)p->max_pipeline_depth : 2;

		if (p->host[0])
			tx += conns * depth;
	}
	return conf->ternd.queue_minfree + tx * STORAGE_OUTCOME_RESERVE;
}

/* storage_check - ternd -n: a warning (to fn) when the reserve at full
 * depth passes a quarter of spool_dir's file system: a peer whose
 * connections all reach max_pipeline_depth would then keep ingest
 * refused long before the disk is full */
void storage_check(const struct conf *conf, void (*fn)(const char *msg, void *arg), void *arg)
{
	uint64_t max = storage_reserve_max(conf), size;
	struct statvfs fs;
	char msg[512];

	if (statvfs(conf->global.spool_dir, &fs) < 0)
		return;
	size = (uint64_t)fs.f_blocks * fs.f_frsize;
	if (max <= size / 4)
		return;
	snprintf(msg, sizeof(msg), "the storage reserve at full pipeline depth is %" PRIu64 " KB "
		 "(queue_minfree, plus 256 KB for each transaction that may be in flight: "
		 "max_connections x max_pipeline_depth of each peer), more than a quarter of the "
		 "%" PRIu64 " KB of spool_dir's file system", max / 1024, size / 1024);
	fn(msg, arg);
}

/* storage_reserve - the free space ingest leaves on the file systems of
 * spool_dir and state_dir: queue_minfree, plus STORAGE_OUTCOME_RESERVE
 * for each transaction that may be in flight to a relayed peer now (the
 * windows in use, which start small and shrink on faults: window.h) */
uint64_t storage_reserve(const struct conf *conf)
{
	int64_t tx = windows;

	return conf->ternd.queue_minfree + (tx > 0 ? (uint64_t)tx : 0) * STORAGE_OUTCOME_RESERVE;
}

/* one_fs - are spool_dir and state_dir on one file system? Asked once:
 * both take a restart to change */
static int one_fs(const struct conf *conf)
{
	static _Atomic int known;	/* 0: not asked yet, 1: one, 2: two */
	struct stat a, b;

	if (known == 0)
		known = stat(conf->global.spool_dir, &a) == 0 && stat(conf->global.state_dir, &b) == 0
			&& a.st_dev == b.st_dev ? 1 : 2;
	return known == 1;
}

/* below_reserve - is free space below the reserve on either file system?
 * (one statvfs per message when both directories are on one) */
static int below_reserve(const struct conf *conf, uint64_t *have, const char **where)
{
	uint64_t want = storage_reserve(conf);

	*where = conf->global.spool_dir;
	if (free_below(*where, want, have))
		return 1;
	if (one_fs(conf))
		return 0;
	*where = conf->global.state_dir;
	return free_below(*where, want, have);
}

/* storage_room - may ingest take one more message? 0 when free space on
 * the file system of spool_dir or state_dir is below the reserve (the log
 * says so once a minute) */
int storage_room(const struct conf *conf)
{
	const char *where;
	uint64_t have = 0, held;

	if (!below_reserve(conf, &have, &where))
		return 1;
	if (ratelimit_pass(&warnings, "reserve", now_us(), RATELIMIT_MINUTE, &held))
		log_warning("storage: %" PRIu64 " KB free for %s, below the reserve of %" PRIu64
			    " KB (queue_minfree and %" PRIu64 " KB per transaction in flight): "
			    "ingest refused with 452 4.3.1 (%" PRIu64 " more refusals since the "
			    "last warning)", have / 1024, where, storage_reserve(conf) / 1024,
			    STORAGE_OUTCOME_RESERVE / 1024, held);
	return 0;
}

/* storage_state - the state now, with the outcomes kept and since when
 * it fails (either may be NULL) */
enum storage_state storage_state(uint64_t *kept, uint64_t *since_us)
{
	const char *where;
	uint64_t have;
	int failing;

	pthread_mutex_lock(&st.lock);
	failing = st.failing;
	if (kept)
		*kept = st.n;
	if (since_us)
		*since_us = failing ? st.since : 0;
	pthread_mutex_unlock(&st.lock);
	if (failing)
		return STORAGE_FAILING;
	return below_reserve(ternd_conf(), &have, &where) ? STORAGE_RESERVE : STORAGE_OK;
}

/* storage_describe - the control socket's answer to "storage": the state,
 * outcomes kept, failing since (microseconds since the epoch, 0: not
 * failing), the reserve and the free octets of spool_dir's file system,
 * separated by tabs */
void storage_describe(char *buf, size_t len)
{
	const struct conf *conf = ternd_conf();
	uint64_t kept = 0, since = 0, have = 0;
	enum storage_state s = storage_state(&kept, &since);

	free_below(conf->global.spool_dir, 0, &have);
	snprintf(buf, len, "%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64,
		 storage_state_name(s), kept, since, storage_reserve(conf), have);
}

/* storage_state_name - as ternq stats shows it */
const char *storage_state_name(enum storage_state s)
{
	return s == STORAGE_FAILING ? "failing" : s == STORAGE_RESERVE ? "reserve" : "ok";
}
