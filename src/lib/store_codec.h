/*
 * store_codec - the byte layout of queue records in LMDB, as pure
 * functions. Decoders treat their input as hostile (a corrupted or
 * foreign database): every length is checked, nothing is trusted, and a
 * bad record is an error, never a crash. Decoded strings are allocated.
 */
#ifndef TERN_STORE_CODEC_H
#define TERN_STORE_CODEC_H

#include <stddef.h>

#include "queue.h"

#define STORE_RECORD_MAX 8192

size_t q_msg_encode(const struct q_msg *m, unsigned char *buf, size_t cap);
int q_msg_decode(const unsigned char *buf, size_t len, struct q_msg *m);
size_t q_rcpt_encode(const struct q_rcpt *r, unsigned char *buf, size_t cap);
int q_rcpt_decode(const unsigned char *buf, size_t len, struct q_rcpt *r);
size_t hist_rec_encode(const struct hist_rec *h, unsigned char *buf, size_t cap);
int hist_rec_decode(const unsigned char *buf, size_t len, struct hist_rec *h);
size_t journal_rec_encode(const struct journal_rec *j, unsigned char *buf, size_t cap);
int journal_rec_decode(const unsigned char *buf, size_t len, struct journal_rec *j);

#endif
