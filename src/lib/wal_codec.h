/*
 * wal_codec - the envelope record that goes before each body in a spool
 * segment, as pure functions: the segment is ternd's write-ahead log.
 *
 * A record holds what the queue database's records of one accepted
 * message would hold (the message, its recipients, its Message-ID for the
 * history), framed so that a reader after a power cut finds where the log
 * ends: a fixed header (magic, version, flags, payload and body lengths)
 * and a BLAKE2b-128 check over header and payload. The body follows the
 * record in the segment (none for a message with a file of its own); its
 * BLAKE2b-256 digest is in the message, so a torn body shows too.
 *
 * Decoders treat their input as hostile (a torn tail, a foreign file):
 * every length is checked before use, a record that fails any check is
 * the end of the log, never a crash. Decoded strings are allocated.
 *
 * Usage:
 *	n = wal_rec_encode(&rec, buf, cap);	-- n > cap: grow buf, again
 *	wal_hdr_decode(buf, len, &hdr);		-- WAL_HDR_LEN octets
 *	wal_rec_decode(buf, WAL_HDR_LEN + hdr.payload_len, &rec);
 *	wal_rec_clear(&rec);
 */
#ifndef TERN_WAL_CODEC_H
#define TERN_WAL_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"

#define WAL_HDR_LEN 36			/* magic 4, version 1, flags 1, 0 0, payload 4, body 8, check 16 */
#define WAL_PAYLOAD_MAX (16u << 20)	/* a record's payload, at most */
#define WAL_RCPTS_MAX 100000		/* recipients in a record, at most */
#define WAL_MSGID_MAX 255

/* record flags */
#define WAL_REPLAY 0x01			/* acknowledged from the log: replay it if LMDB lacks it */
#define WAL_FILL 0x02			/* no envelope (payload empty): a body copied forward, skipped */

struct wal_hdr {
	uint8_t version;
	uint8_t flags;
	uint32_t payload_len;
	uint64_t body_len;		/* octets of body that follow the record */
};

struct wal_rec {
	uint8_t flags;			/* WAL_* */
	uint64_t body_len;		/* in the segment after the record (0: own file) */
	struct q_msg msg;
	struct q_rcpt *rcpts;
	size_t nrcpts;
	char *msgid;			/* "" if none */
};

size_t wal_rec_encode(const struct wal_rec *r, unsigned char *buf, size_t cap);
int wal_hdr_decode(const unsigned char *buf, size_t len, struct wal_hdr *h);
int wal_rec_decode(const unsigned char *buf, size_t len, struct wal_rec *r);
void wal_rec_clear(struct wal_rec *r);

#endif
