/*
 * notice.h - non-delivery notifications (DSNs, RFC 3464), as OpenSMTPD's
 * bounce.c: notice_draft reads the original and builds the DSN an
 * attempt is about to cause, in the delivery thread, before the write;
 * notice_put keeps it in the queue database in the same transaction as
 * the bounce (committer thread), building it there only when the queue
 * changed during the attempt; notices_send, the scheduler's job, turns
 * each kept one into a message from <> in ternd's own queue, routed like
 * any mail, and forgets it in that message's transaction. Never sends
 * anything itself, and never writes the store but through the committer
 * (or inside the committer's transaction it is given).
 */
#ifndef TERN_NOTICE_H
#define TERN_NOTICE_H

#include "relay_result.h"
#include "store.h"

void notice_draft(struct result *res, const struct q_msg *m, const struct q_rcpt *rcpts, size_t n);
void notice_draft_free(struct notice_draft **d);
int notice_put(struct store_txn *txn, struct result *res);
void notices_send(void);

#endif
