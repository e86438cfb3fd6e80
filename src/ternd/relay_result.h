/*
 * relay_result.h - the record of a delivery attempt (its outcomes,
 * attempt.h): applied in the committer's write (recipient states,
 * backoff and expiry, history, the DSN, the message's removal), then the
 * log lines, spans, metrics and breaker sample; waited for
 * (relay_result_record) or posted while the next replies are read (struct
 * posted).
 * relay_result_expire records ternq expire the same way.
 * Never writes to a socket, and never to the store but through the
 * committer.
 */
#ifndef TERN_RELAY_RESULT_H
#define TERN_RELAY_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include "attempt.h"
#include "conf.h"
#include "store.h"

struct conn;


struct q_rcpt *relay_result_rcpt(const struct result *res, uint32_t idx);
void relay_outcome_fate(const struct conf *conf, uint64_t arrival_us, uint32_t attempts,
			struct outcome *o, uint64_t now, uint64_t *next_us);
void relay_result_record(struct attempt *a, const struct conn *c, const struct conf *conf);
void relay_result_post(struct attempt *a, const struct conn *c, const struct conf *conf);

/* The attempts of a window whose outcomes are on their way to the
 * committer, oldest first: each is released once recorded. The delivery
 * thread reads the next replies meanwhile, so a reply read is in the next
 * commit, not behind the window (a crash loses as few as it can). */
struct posted {
	struct attempt *at;		/* cap slots; an attempt must not move while posted */
	size_t cap, head, count;
};

void posted_add(struct posted *q, const struct attempt *a, const struct conn *c, const struct conf *conf);
void posted_reap(struct posted *q, size_t wait);
void relay_result_reap(struct attempt *a);
int relay_result_apply(struct store_txn *txn, void *arg);
void relay_result_done(struct result *res, const char *peer);
int relay_result_expire(const char *qid, unsigned uid, char *err, size_t len);

#endif
