/*
 * store_journal - tern-milter's journal: one record per message the
 * milter decided on, in an LMDB environment of its own (STATE_DIR/journal)
 * so that the milter never shares a writer lock with ternd. Written by
 * one thread in batches; read by ternq trace and tern-report. Never
 * MDB_NOSYNC.
 */
#ifndef TERN_STORE_JOURNAL_H
#define TERN_STORE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hist.h"

struct journal_db;

struct journal_db *journal_db_open(const char *dir, int readonly, char *err, size_t errlen);
void journal_db_close(struct journal_db **db);
int journal_db_append(struct journal_db *db, const struct journal_rec *recs, size_t n,
		      uint64_t prune_before_us, char *err, size_t errlen);
typedef int (*journal_fn)(const struct journal_rec *r, void *arg);
/* kind 't': key is a 16-octet trace id; 'q': the MTA's queue id */
int journal_db_find(struct journal_db *db, char kind, const void *key, size_t klen,
		    journal_fn fn, void *arg);
/* the records of [from_us, to_us), oldest first, read in batches of
 * short transactions; 0, fn's non-zero stop value, or -1 */
int journal_db_foreach_range(struct journal_db *db, uint64_t from_us, uint64_t to_us,
			     journal_fn fn, void *arg);

#endif
