/*
 * journal - tern-milter's journal writer: the libmilter callbacks hand a
 * record to a bounded ring and go on; one thread takes what is there,
 * writes it in one LMDB transaction (synchronous commit) and prunes a
 * little. A callback never waits on the disk: when the ring is full the
 * record is dropped and counted, and the writer logs the count.
 *
 * Commits are paced: after one, the writer waits JOURNAL_PACE_MS before it
 * takes the next batch, so under load a commit (pages, fdatasync, meta
 * page) is shared by every message of that interval instead of costing
 * about one per message (measured: bench/RESULTS.md, issue 17). A record
 * reaches the journal at most that much later; a lone one at once.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "milter.h"
#include "ring.h"
#include "store_journal.h"
#include "xalloc.h"

#define JOURNAL_RING 4096
#define JOURNAL_PACE_MS 100	/* at most 10 commits a second: 40,960 records/s fit the ring */

static struct {
	struct ring *ring;		/* set before smfi_main, never freed */
	struct journal_db *db;
	uint64_t retention_us;
} jq;

/* journal_add - queue one record (strings copied); never blocks on disk */
void journal_add(const struct journal_rec *r)
{
	struct journal_rec copy;
	int rc;

	if (jq.ring == NULL)
		return;
	copy = *r;
	copy.mta_qid = xstrdup(r->mta_qid);
	copy.client = xstrdup(r->client);
	copy.sender = xstrdup(r->sender);
	copy.verdict = xstrdup(r->verdict);
	if ((rc = ring_put(jq.ring, &copy)) < 0) {
		journal_rec_clear(&copy);
		if (rc == RING_FULL)
			metric_add(milter_journal_dropped, 1);
	}
}

/* write_batch - the journal thread's part: one transaction per batch */
static void write_batch(void *items, size_t n, void *arg)
{
	struct journal_rec *batch = items;
	const struct timespec pace = {0, JOURNAL_PACE_MS * 1000000L};
	uint64_t now = now_us();
	char err[256];

	(void)arg;
	if (journal_db_append(jq.db, batch, n, now > jq.retention_us ? now - jq.retention_us : 0,
			      err, sizeof(err)) < 0) {
		log_warning("journal: %zu record%s lost: %s", n, n == 1 ? "" : "s", err);
		metric_add(milter_journal_dropped, n);
	}
	for (size_t i = 0; i < n; i++)
		journal_rec_clear(&batch[i]);
	nanosleep(&pace, NULL);	/* records queue meanwhile: the next batch */
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
	jq.retention_us = (uint64_t)conf->milter.journal_retention * 1000;
	jq.ring = ring_start("journal", "record", sizeof(struct journal_rec), JOURNAL_RING,
			     write_batch, NULL);
	if (jq.ring == NULL) {
		log_warning("cannot start the journal thread; messages are not journaled");
		journal_db_close(&jq.db);
	}
}

/* journal_stop - write what is queued, stop the writer, close the journal;
 * the ring stays, for callbacks that still run after smfi_main() */
void journal_stop(void)
{
	if (jq.ring == NULL)
		return;
	ring_stop(jq.ring);
	journal_db_close(&jq.db);
}
