/*
 * storage.h - what ternd does when its storage cannot record what it
 * does: the storage state (ok, reserve, failing; the outcomes that could
 * not be committed are the relay's, kept.c, which tells how many), the
 * probe write while failing, and the reserve of free space kept for
 * recording outcomes, below which ingest is refused. Never writes to the
 * store but through the committer, and never decides a delivery's
 * outcome.
 */
#ifndef TERN_STORAGE_H
#define TERN_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"

#include "store.h"

/* Free space the reserve keeps per transaction in flight: what recording
 * one outcome may take (the DSN it may cause, at most DSN_HEADERS_MAX plus
 * DSN_FULL_MAX octets and its framing, and the history, recipient and
 * copied database pages), rounded up. */
#define STORAGE_OUTCOME_RESERVE ((uint64_t)256 * 1024)
enum storage_state { STORAGE_OK, STORAGE_RESERVE, STORAGE_FAILING };

void storage_init(void);
int storage_failing(void);
void storage_fail(const char *why, size_t kept, uint64_t dropped);
void storage_kept_count(size_t kept);
void storage_committed(void);
int storage_submit(store_write_fn write, void *arg);
int storage_try(void);
int storage_probe(void);
uint64_t storage_reserve(const struct conf *conf);
uint64_t storage_reserve_max(const struct conf *conf);
void storage_window(int64_t delta);
void storage_check(const struct conf *conf, void (*fn)(const char *msg, void *arg), void *arg);
int storage_room(const struct conf *conf);
enum storage_state storage_state(uint64_t *kept, uint64_t *since_us);
const char *storage_state_name(enum storage_state s);
void storage_describe(char *buf, size_t len);

#endif
