/*
 * clock - the times tern's programs read: the wall clock in microseconds
 * (what the queue, the history and the spans store), the monotonic clock
 * in milliseconds (deadlines for I/O and requests) and a monotonic
 * deadline for waits on a condition variable, so that setting the clock
 * back never stretches a wait. One definition each, so that every program
 * reads time the same way.
 */
#ifndef TERN_CLOCK_H
#define TERN_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

uint64_t now_us(void);
long long ms_now(void);
void clock_deadline(struct timespec *t, long long ms);
int clock_cond_wait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline);

#endif
