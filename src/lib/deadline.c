/*
 * deadline - I/O with absolute deadlines (see deadline.h).
 */
#include "config.h"

#include <errno.h>
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
