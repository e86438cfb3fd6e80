/*
 * clock - the times tern's programs read: the wall clock in microseconds
 * (what the queue, the history and the spans store), the monotonic clock
 * in milliseconds (deadlines for I/O and requests) and a wall-clock
 * deadline for pthread_cond_timedwait(), whose default clock that is.
 * One definition each, so that every program reads time the same way.
 */
#ifndef TERN_CLOCK_H
#define TERN_CLOCK_H

#include <stdint.h>
#include <time.h>

uint64_t now_us(void);
long long ms_now(void);
void clock_deadline(struct timespec *t, long long ms);

#endif
