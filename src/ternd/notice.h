/*
 * notice.h - non-delivery notifications (DSNs, RFC 3464), as OpenSMTPD's
 * bounce.c: notice_put builds the DSN for the recipients an attempt
 * bounced and keeps it in the queue database in the same transaction as
 * the bounce (committer thread); notices_send, the scheduler's job, turns
 * each kept one into a message from <> in ternd's own queue, routed like
 * any mail, and forgets it in that message's transaction. Never sends
 * anything itself, and never writes the store but through the committer
 * (or inside the committer's transaction it is given).
 */
#ifndef TERN_NOTICE_H
#define TERN_NOTICE_H

#include "relay_result.h"
#include "store.h"

int notice_put(struct store_txn *txn, struct result *res);
void notices_send(void);

#endif
