/*
 * compact.h - copy-forward of spool segments (see compact.c): the
 * committer's appender adds a pass of JOB_MOVE jobs to a batch when a
 * segment's live share falls under spool_compact_threshold, and learns
 * when the queue has drained its current segment. Only the committer's
 * threads call compact_jobs, compact_wait_ms (the appender) and
 * compact_done (whoever finishes the batch); compact_open_body is for
 * any thread that reads a body by a record it read earlier.
 */
#ifndef TERN_COMPACT_H
#define TERN_COMPACT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "queue.h"

struct job;

void compact_start(void);
size_t compact_jobs(struct job **jobs, size_t n, size_t max, int *drained);
int compact_wait_ms(void);
void compact_done(struct job *j, int result);
int compact_open_body(struct q_msg *m, off_t *offset);
void compact_usage(uint64_t *live, uint64_t *length);

void compact_metrics(void);

#endif
