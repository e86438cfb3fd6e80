/*
 * clock - wall and monotonic time, in the units tern uses. It must never
 * mix the two clocks: a wall time is never compared with a monotonic one.
 */
#include "config.h"

#include "clock.h"

/* now_us - wall clock in microseconds */
uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ms_now - monotonic milliseconds */
long long ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* clock_deadline - the monotonic time ms milliseconds from now: a
 * deadline for clock_cond_wait(), which a step of the wall clock does not
 * move */
void clock_deadline(struct timespec *t, long long ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += (time_t)(ms / 1000);
	t->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

/* clock_cond_wait - pthread_cond_timedwait() up to a clock_deadline(), on
 * any condition variable (its own clock attribute does not matter) */
int clock_cond_wait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline)
{
	return pthread_cond_clockwait(c, m, CLOCK_MONOTONIC, deadline);
}
