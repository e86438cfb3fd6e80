/*
 * deadline - I/O with absolute deadlines (see deadline.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <time.h>

#include "clock.h"
#include "deadline.h"

/* deadline_after - the deadline timeout_ms from now */
long long deadline_after(long long timeout_ms)
{
	return ms_now() + timeout_ms;
}

/* deadline_passed - is the deadline behind us? */
int deadline_passed(long long deadline)
{
	return ms_now() >= deadline;
}

/* deadline_wait - poll fd for events until the deadline; 0 ready, -1
 * with errno: ETIMEDOUT when the deadline passed, else poll's */
int deadline_wait(int fd, short events, long long deadline)
{
	for (;;) {
		struct pollfd p = {fd, events, 0};
		long long left = deadline - ms_now();
		int rc;

		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		rc = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

/* rdeadline_start - a read deadline for what, of timeout ms extended at
 * rate octets a second (0: not extended); its base is set at the first
 * wait */
struct rdeadline rdeadline_start(const char *what, long long timeout, long long rate)
{
	struct rdeadline d = {what, timeout, 0, rate > 0 ? (unsigned long long)rate : 0, 0};

	return d;
}

/* rdeadline_at - the deadline now: base plus what the octets earned */
long long rdeadline_at(const struct rdeadline *d)
{
	unsigned long long earned;

	if (d->rate == 0)
		return d->base;
	earned = d->octets / d->rate * 1000 + d->octets % d->rate * 1000 / d->rate;
	return earned > (unsigned long long)LLONG_MAX - (unsigned long long)d->base
		? LLONG_MAX : d->base + (long long)earned;
}
