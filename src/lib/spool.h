/*
 * spool - message bodies on disk, in canonical form (CRLF, not
 * dot-stuffed) so they go to a socket unchanged.
 *
 * Small bodies are appended to shared segment files (SPOOL_DIR/seg/ID),
 * one write and one fdatasync per group commit; large ones get a file of
 * their own (SPOOL_DIR/own/QID), written and synced by the session that
 * receives it. Appending is the committer thread's alone. A failed
 * fdatasync is never retried: the segment is closed and a new one begun,
 * because after a failed sync the kernel may have dropped the data.
 */
#ifndef TERN_SPOOL_H
#define TERN_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "queue.h"

struct spool;

struct spool *spool_open(const char *dir, uint64_t segment_size, char *err, size_t errlen);
void spool_close(struct spool **sp);

/* committer side */
void spool_start_segment(struct spool *sp, uint64_t id);
int spool_append(struct spool *sp, const struct iovec *iov, int iovcnt, size_t total,
		 uint64_t *seg_id, uint64_t *offset);
int spool_sync(struct spool *sp);
uint64_t spool_segment_id(const struct spool *sp);
uint64_t spool_segment_length(const struct spool *sp);
int spool_segment_full(const struct spool *sp);
int spool_abandon_segment(struct spool *sp);
int spool_sync_owndir(struct spool *sp);

/* files */
int spool_own_create(struct spool *sp, const char *qid);
int spool_own_write(int fd, const void *buf, size_t n);
int spool_own_remove(struct spool *sp, const char *qid);
int spool_seg_remove(struct spool *sp, uint64_t id);
int spool_seg_truncate(struct spool *sp, uint64_t id, uint64_t length, uint64_t *was);
int spool_open_body(struct spool *sp, const struct q_msg *m, off_t *offset);
#define SPOOL_BODY_SHORT 1		/* spool_body_digest: fewer octets than m->size */
#define SPOOL_BODY_MISMATCH 2		/* spool_body_digest: not the digest stored */
int spool_body_digest(struct spool *sp, const struct q_msg *m, FILE *copy);
typedef int (*spool_file_fn)(const char *name, void *arg);
int spool_foreach_seg_file(struct spool *sp, spool_file_fn fn, void *arg);
int spool_foreach_own_file(struct spool *sp, spool_file_fn fn, void *arg);
int spool_usage(struct spool *sp, uint64_t *seg_bytes, uint64_t *segs, uint64_t *own_bytes,
		uint64_t *owns);

#endif
