/*
 * control - the control socket ternq talks to while ternd runs.
 *
 * One line per request, one line per answer: "hold|release|delete|retry
 * QID" answers "ok", "not found" or "error: ..."; "ping" answers "ok".
 * Queue changes go through the committer like everything else that writes.
 * The socket is 0660, owned by the tern user and group.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen.h"
#include "log.h"
#include "queue_ops.h"
#include "stats.h"
#include "ternd.h"

static int control_fd = -1;

/* control_request - answer one request line */
static void control_request(char *line, char *answer, size_t len)
{
	char verb[16], qid[64];
	struct queue_op_arg a;
	struct job job;

	if (sscanf(line, "%15s %63s", verb, qid) == 1 && strcmp(verb, "ping") == 0) {
		snprintf(answer, len, "ok");
		return;
	}
	memset(&a, 0, sizeof(a));
	if (sscanf(line, "%15s %63s", verb, qid) != 2 || queue_op_parse(verb, &a.op) < 0
	    || strlen(qid) != QID_LEN) {
		snprintf(answer, len, "error: bad request");
		return;
	}
	memcpy(a.qid, qid, QID_LEN + 1);
	a.now_us = now_us();
	a.current_seg = spool_segment_id(ternd.spool);
	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = queue_op_write;
	job.arg = &a;
	if (commit_submit(&job) < 0) {
		snprintf(answer, len, "error: %s", job.err);
		return;
	}
	if (!a.found) {
		snprintf(answer, len, "not found");
		return;
	}
	queue_op_cleanup(ternd.spool, &a);
	stats_queue(a.was, a.now);
	if (a.op == QOP_DELETE)
		ternd.queued--;
	log_info("%s: %s by ternq", a.qid, a.op == QOP_HOLD ? "held" : a.op == QOP_RELEASE
		 ? "released" : a.op == QOP_DELETE ? "removed" : "scheduled for retry");
	snprintf(answer, len, "ok");
}

/* control_loop - serve ternq, one client at a time */
static void *control_loop(void *arg)
{
	for (;;) {
		int fd = accept4(control_fd, NULL, NULL, SOCK_CLOEXEC);
		char buf[4096];
		size_t have = 0;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;
		}
		for (;;) {
			struct pollfd p = {fd, POLLIN, 0};
			char *nl, answer[300];
			ssize_t n;

			if (poll(&p, 1, 10000) <= 0)
				break;
			n = read(fd, buf + have, sizeof(buf) - 1 - have);
			if (n <= 0)
				break;
			have += (size_t)n;
			while ((nl = memchr(buf, '\n', have)) != NULL) {
				size_t used = (size_t)(nl - buf) + 1;

				*nl = '\0';
				control_request(buf, answer, sizeof(answer) - 1);	/* room for "\n" */
				memcpy(answer + strlen(answer), "\n", 2);
				if (write(fd, answer, strlen(answer)) < 0)
					break;
				memmove(buf, buf + used, have - used);
				have -= used;
			}
			if (have == sizeof(buf) - 1)
				break;	/* a line longer than any request */
		}
		close(fd);
	}
	return arg;
}

/* control_setup - open the control socket (before dropping privileges) */
void control_setup(void)
{
	char path[512], spec[520], err[600];
	int is_unix;

	snprintf(spec, sizeof(spec), "unix:%s", conf_control_socket(ternd.conf, path, sizeof(path)));
	if ((control_fd = listen_open(spec, ternd_conf()->global.user, &is_unix, err, sizeof(err))) < 0)
		log_fatal("cannot open the control socket: %s", err);
}

/* control_start - serve the control socket */
void control_start(void)
{
	pthread_t tid;

	if (pthread_create(&tid, NULL, control_loop, NULL) != 0)
		log_fatal("cannot start the control thread");
	pthread_detach(tid);
}
