/*
 * relay_proto.h - one SMTP client transaction over a connection, the
 * counterpart of Postfix's smtp_proto.c: MAIL, RCPT..., DATA or BDAT,
 * pipelined when offered, written behind the previous transaction's end
 * of data where RFC 2920 allows (with BDAT, behind many: window.h), then
 * its replies, final reply and RSET.
 * Each step sets recipients' outcomes from the replies; a lost
 * connection goes to relay_fail, the one failure sink of a transaction
 * over a connection (as Postfix's smtp_trouble.c beside smtp_proto.c). Never reads or writes the store, never
 * decides on retries or the breaker, never opens a connection.
 */
#ifndef TERN_RELAY_PROTO_H
#define TERN_RELAY_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attempt.h"
#include "conn.h"

#define TX_DRAIN_MS 1000		/* after a failed write or a 421: replies still read */


int tx_start(struct conn *c, struct attempt *a, const char *lead);
int tx_replies(struct conn *c, struct attempt *a);
int tx_final(struct conn *c, struct attempt *a);
int tx_rset(struct conn *c, int clean);
int tx_twice(const struct attempt *a);
void relay_fail(struct conn *c, struct attempt *a, int code, const char *esc, const char *why);
void tx_lost(struct conn *c, struct attempt *a);

#endif
