/*
 * store_codec - the byte layout of queue records in LMDB, as pure
 * functions. Decoders treat their input as hostile (a corrupted or
 * foreign database): every length is checked, nothing is trusted, and a
 * bad record is an error, never a crash. Decoded strings are allocated.
 *
 * A queue record (message, recipient) is checked as input from the
 * network is: what q_msg_decode and q_rcpt_decode return keeps the
 * limits smtp_cmd put on it on the way in (address, ENVID, ORCPT and
 * HELO lengths; a reply as smtp_reply_format makes it), with no control
 * octet (CR, LF, NUL, ...) in any string, so that it can go into an SMTP
 * command or a log line as it is. Only q_rcpt_decode_layout skips those
 * checks, for the store to find a bad record's schedule entry; what it
 * returns must go nowhere else.
 */
#ifndef TERN_STORE_CODEC_H
#define TERN_STORE_CODEC_H

#include <stddef.h>

#include "hist.h"
#include "queue.h"

#define STORE_RECORD_MAX 8192
#define STORE_KEY_MAX 511		/* LMDB's default limit on key length */
#define SCHED_TAIL_LEN (1 + 8 + QID_LEN + 4)	/* a schedule key after the peer */
#define SCHED_PEER_MAX (STORE_KEY_MAX - SCHED_TAIL_LEN)

size_t q_msg_encode(const struct q_msg *m, unsigned char *buf, size_t cap);
int q_msg_decode(const unsigned char *buf, size_t len, struct q_msg *m);
size_t q_rcpt_encode(const struct q_rcpt *r, unsigned char *buf, size_t cap);
int q_rcpt_decode(const unsigned char *buf, size_t len, struct q_rcpt *r);
int q_rcpt_decode_layout(const unsigned char *buf, size_t len, struct q_rcpt *r);
int q_text_ok(const char *s, size_t max);
size_t hist_rec_encode(const struct hist_rec *h, unsigned char *buf, size_t cap);
int hist_rec_decode(const unsigned char *buf, size_t len, struct hist_rec *h);
size_t journal_rec_encode(const struct journal_rec *j, unsigned char *buf, size_t cap);
int journal_rec_decode(const unsigned char *buf, size_t len, struct journal_rec *j);

#endif
