/*
 * control_client - ternq's side of ternd's control socket: connect, one
 * request line, answer lines, every step bounded by a deadline
 * (deadline.h), so that a ternd that does not answer costs ternq its
 * --timeout and no more. Never changes the queue itself.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "control_client.h"
#include "deadline.h"

/* control_connect - ternd's control socket (non-blocking), or -1 with
 * errno: ENOENT or ECONNREFUSED when ternd is not running, ETIMEDOUT when
 * its listen queue stayed full until the deadline */
int control_connect(const struct conf *conf, long long deadline)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char path[512];
	int fd, e;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s",
		 conf_control_socket(conf, path, sizeof(path)));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -1;
	while (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		if (errno != EAGAIN || ms_now() >= deadline) {
			e = errno == EAGAIN ? ETIMEDOUT : errno;
			close(fd);
			errno = e;
			return -1;
		}
		poll(NULL, 0, 50);	/* its listen queue is full: ternd is busy */
	}
	return fd;
}

/* control_line - read one answer line by the deadline; -1 with errno */
int control_line(int fd, char *answer, size_t len, long long deadline)
{
	size_t have = 0;

	while (have < len - 1) {
		ssize_t n = read(fd, answer + have, 1);

		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (n < 0) {
			if ((errno != EAGAIN && errno != EINTR) || deadline_wait(fd, POLLIN, deadline) < 0)
				return -1;
			continue;
		}
		if (answer[have] == '\n')
			break;
		have++;
	}
	answer[have] = '\0';
	return 0;
}

/* control_send_req - write a request line by the deadline; -1 with errno */
int control_send_req(int fd, const char *req, long long deadline)
{
	size_t off = 0, reqlen = strlen(req);

	while (off < reqlen) {
		ssize_t k = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);

		if (k > 0)
			off += (size_t)k;
		else if (errno == EPIPE || errno == ECONNRESET)
			break;	/* refused: ternd may have answered why, read it */
		else if ((errno != EAGAIN && errno != EINTR) || deadline_wait(fd, POLLOUT, deadline) < 0)
			return -1;
	}
	return 0;
}

/* control_ask - one request, one answer line, both within timeout_ms;
 * -1 with errno (ETIMEDOUT: no answer in time) */
int control_ask(int fd, const char *req, char *answer, size_t len, long long timeout_ms)
{
	long long deadline = ms_now() + timeout_ms;

	if (control_send_req(fd, req, deadline) < 0)
		return -1;
	return control_line(fd, answer, len, deadline);
}

