/*
 * deadline - I/O with absolute deadlines (see deadline.h).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <time.h>

#include "deadline.h"

/* deadline_clock - monotonic milliseconds */
long long deadline_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* deadline_after - the deadline timeout_ms from now */
long long deadline_after(long long timeout_ms)
{
	return deadline_clock() + timeout_ms;
}

/* deadline_passed - is the deadline behind us? */
int deadline_passed(long long deadline)
{
	return deadline_clock() >= deadline;
}

/* deadline_wait - poll fd for events until the deadline; 0 ready, -1
 * when the deadline passed or poll failed */
int deadline_wait(int fd, short events, long long deadline)
{
	for (;;) {
		struct pollfd p = {fd, events, 0};
		long long left = deadline - deadline_clock();
		int rc;

		if (left <= 0)
			return -1;
		rc = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}
