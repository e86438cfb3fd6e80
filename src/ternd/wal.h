/*
 * wal.h - the spool segment as ternd's write-ahead log: each accepted
 * message's envelope record (wal_codec.h) goes before its body in the same
 * write, one fdatasync makes a batch durable, and a session is answered
 * then; the queue database follows off the reply path, and recovery
 * replays what the database lacks. See wal.c and commit.c.
 */
#ifndef TERN_WAL_H
#define TERN_WAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "commit.h"
#include "store.h"
#include "wal_codec.h"

/* One batch's records, kept (decoded) for the LMDB transaction that
 * follows; reused from batch to batch. */
struct wal_batch {
	unsigned char *buf;		/* the encoded records, in order */
	size_t len, cap;
	struct wal_rec *recs;		/* the same, decoded */
	struct wal_pos {
		size_t len;		/* the record's length */
		uint64_t body_at;	/* where its body starts in the segment */
	} *pos;
	size_t n, ncap, poscap;
	struct iovec *iov;
	size_t iovcap;
	uint32_t bodies;		/* accepted bodies appended to the segment */
	uint64_t body_bytes;		/* their octets */
	size_t acked;			/* jobs answered from the log */
};

void wal_reset(struct wal_batch *w);
int wal_append(struct wal_batch *w, struct job **jobs, size_t n, char *err, size_t errlen);
size_t wal_answer(struct wal_batch *w, struct job **jobs, size_t n);
int wal_apply(struct store_txn *txn, const struct wal_batch *w, uint64_t seg_id,
	      uint64_t *last_qid);
int wal_abandon(uint64_t seg_id, char *err, size_t errlen);
int wal_replay(char *err, size_t errlen);
int wal_pending(void);
void wal_set_pending(void);
unsigned wal_retry(uint64_t below);

#endif
