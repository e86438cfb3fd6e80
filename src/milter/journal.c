/*
 * journal - tern-milter's journal writer: the libmilter callbacks hand a
 * record to a bounded ring and go on; one thread takes what is there,
 * writes it in one LMDB transaction (synchronous commit) and prunes a
 * little. A callback never waits on the disk: when the ring is full the
 * record is dropped and counted, and the writer logs the count.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "metrics.h"
#include "milter.h"
#include "store_journal.h"
#include "xalloc.h"

#define JOURNAL_RING 4096

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct journal_rec ring[JOURNAL_RING];
	size_t head, count;
	unsigned long long dropped;
	int running, stopping;
	struct journal_db *db;
	pthread_t thread;
	uint64_t retention_us;
} jq = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};

/* wall_us - the time in microseconds */
static uint64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* journal_add - queue one record (strings copied); never blocks on disk */
void journal_add(const struct journal_rec *r)
{
	struct journal_rec *slot;

	pthread_mutex_lock(&jq.lock);
	if (!jq.running || jq.stopping) {
		pthread_mutex_unlock(&jq.lock);
		return;
	}
	if (jq.count == JOURNAL_RING) {
		jq.dropped++;
		metric_add(milter_journal_dropped, 1);
		pthread_mutex_unlock(&jq.lock);
		return;
	}
	slot = &jq.ring[(jq.head + jq.count++) % JOURNAL_RING];
	*slot = *r;
	slot->mta_qid = xstrdup(r->mta_qid);
	slot->client = xstrdup(r->client);
	slot->sender = xstrdup(r->sender);
	slot->verdict = xstrdup(r->verdict);
	pthread_cond_signal(&jq.work);
	pthread_mutex_unlock(&jq.lock);
}

/* writer - the journal thread: one transaction per batch of records */
static void *writer(void *arg)
{
	static struct journal_rec batch[JOURNAL_RING];
	char err[256];

	for (;;) {
		unsigned long long dropped;
		size_t n = 0;
		uint64_t now;

		pthread_mutex_lock(&jq.lock);
		while (jq.count == 0 && !jq.stopping)
			pthread_cond_wait(&jq.work, &jq.lock);
		while (jq.count > 0) {
			batch[n++] = jq.ring[jq.head];
			jq.head = (jq.head + 1) % JOURNAL_RING;
			jq.count--;
		}
		dropped = jq.dropped;
		jq.dropped = 0;
		pthread_mutex_unlock(&jq.lock);
		if (dropped)
			log_warning("journal: %llu record%s dropped: the writer could not keep up",
				    dropped, dropped == 1 ? "" : "s");
		if (n == 0)
			break;	/* stopping, and drained */
		now = wall_us();
		if (journal_db_append(jq.db, batch, n, now > jq.retention_us ? now - jq.retention_us : 0,
				      err, sizeof(err)) < 0) {
			log_warning("journal: %zu record%s lost: %s", n, n == 1 ? "" : "s", err);
			metric_add(milter_journal_dropped, n);
		}
		for (size_t i = 0; i < n; i++)
			journal_rec_clear(&batch[i]);
	}
	return arg;
}

/* journal_start - open STATE_DIR/journal and start the writer; without it
 * the milter runs on, unjournaled, and says so */
void journal_start(const struct conf *conf)
{
	char dir[4096], err[512];

	snprintf(dir, sizeof(dir), "%s/journal", conf->global.state_dir);
	if ((jq.db = journal_db_open(dir, 0, err, sizeof(err))) == NULL) {
		log_warning("%s; messages are not journaled", err);
		return;
	}
	jq.retention_us = (uint64_t)conf->ternd.history_retention * 1000;
	if (pthread_create(&jq.thread, NULL, writer, NULL) != 0) {
		log_warning("cannot start the journal thread; messages are not journaled");
		journal_db_close(&jq.db);
		return;
	}
	jq.running = 1;
}

/* journal_stop - write what is queued, stop the writer, close the journal */
void journal_stop(void)
{
	if (!jq.running)
		return;
	pthread_mutex_lock(&jq.lock);
	jq.stopping = 1;
	pthread_cond_signal(&jq.work);
	pthread_mutex_unlock(&jq.lock);
	pthread_join(jq.thread, NULL);
	journal_db_close(&jq.db);
}
