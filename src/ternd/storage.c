/*
 * storage - ternd when its storage cannot record what it does (see
 * storage.h).
 *
 * A delivery attempt whose outcome the committer cannot record (a full
 * disk, an I/O error) is kept in memory by the relay (kept.c), and ternd
 * is "failing": delivery threads take no new work (sched_load), since
 * each attempt would add an outcome that cannot be recorded. While
 * failing, the scheduler makes a probe write once a second
 * (storage_probe); the first commit that succeeds, of any job, ends the
 * state, and the kept outcomes are then recorded (kept_retry).
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
#include "ratelimit.h"
#include "stats.h"
#include "storage.h"
#include "ternd.h"
#include "xalloc.h"

#define STORAGE_RETRY_MS 1000		/* between tries while failing */

static struct {
	pthread_mutex_t lock;
	size_t n;			/* outcomes kept in memory (kept.c) */
	int failing;			/* read without the lock: storage_failing */
	uint64_t since;			/* failing since, microseconds */
	uint64_t last_try;		/* storage_probe's last try while failing */
	uint64_t dropped;		/* outcomes not kept: the bound was reached (kept.c) */
	char why[256];			/* the last failure */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct ratelimit warnings = RATELIMIT_INIT;

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

/* storage_fail - an outcome could not be committed (why): enter (or stay
 * in) the failing state; kept and dropped: how many outcomes are kept in
 * memory now and were not kept since the start (kept.c) */
void storage_fail(const char *why, size_t kept, uint64_t dropped)
{
	pthread_mutex_lock(&st.lock);
	st.n = kept;
	st.dropped = dropped;
	fail(why);
	pthread_mutex_unlock(&st.lock);
}

/* storage_kept_count - how many outcomes are kept in memory now (kept.c) */
void storage_kept_count(size_t kept)
{
	pthread_mutex_lock(&st.lock);
	st.n = kept;
	pthread_mutex_unlock(&st.lock);
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
	commit_ready();	/* the scheduler looks again */
}

/* probe_write - a write that must reach the disk, to learn whether
 * commits succeed again when no outcome is kept */
static int probe_write(struct store_txn *txn, void *arg)
{
	(void)arg;
	return store_put_meta(txn, "storage_probe", now_us());
}

/* storage_try - one probe write now: 0 when it was committed, -1 (the
 * storage fails) when not */
int storage_try(void)
{
	return storage_submit(probe_write, NULL);
}

/* storage_submit - one write through the committer; 0, or -1 (failing,
 * logged) */
int storage_submit(store_write_fn write, void *arg)
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

/* storage_probe - the scheduler's pass while failing: a probe write once
 * a second, whose success ends the state (storage_committed). 1 while
 * failing, the pass that probed included (its success is seen by the next
 * pass, whatever the committer's order of answer and state) */
int storage_probe(void)
{
	uint64_t now = now_us();
	int due;

	if (!storage_failing())
		return 0;
	pthread_mutex_lock(&st.lock);
	due = now - st.last_try >= STORAGE_RETRY_MS * 1000ULL;
	if (due)
		st.last_try = now;
	pthread_mutex_unlock(&st.lock);
	if (due)
		storage_submit(probe_write, NULL);
	return 1;
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
		uint64_t conns = (uint64_t)conf_peer_connections(p);
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
