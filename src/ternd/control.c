/*
 * control - the control socket ternq talks to while ternd runs.
 *
 * One line per request, one line per answer: "hold|release|delete|retry|
 * requeue|expire QID" answers "ok", "unchanged", "not found" or
 * "error: ..."; "ping" answers "ok"; "reset PEER" (close its breaker now)
 * "ok", "parked" (no host, so no breaker) or "not found". "peers"
 * answers one line per configured peer, tab-separated (name, breaker
 * state, since, open until, connections busy, idle, queued recipients,
 * last error's time and text; times in microseconds since the epoch, 0
 * for none), then a line "."; a peer that is not relayed (no host) has
 * the state "parked" and only its queued recipients. "storage" answers
 * the storage state (storage_describe).
 * Queue changes go through the committer like everything else that writes.
 *
 * Who may: every connection is checked with SO_PEERCRED, whatever the
 * socket file's mode. Root, the tern user and members of admin_group
 * (their gid, or one of their supplementary groups by SO_PEERGROUPS) are
 * served; anyone else is answered "error: permission denied", closed and
 * logged with its uid and pid.
 *
 * How long: up to CONTROL_CLIENTS clients at once, each in its own
 * thread; one more is answered "error: busy". Each request line must be
 * whole within CONTROL_DEADLINE_MS of the connection or of the previous
 * answer (a deadline that no byte moves), and each answer taken within as
 * long; otherwise "error: timeout" and the connection is closed. So a slow
 * client holds its own thread for a bounded time and nothing else.
 *
 * Never: serve a connection whose peer was not checked, or wait on a
 * client without a deadline.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "commit.h"
#include "control.h"
#include "deadline.h"
#include "listen.h"
#include "log.h"
#include "peer.h"
#include "queue_ops.h"
#include "relay_result.h"
#include "sched.h"
#include "stats.h"
#include "storage.h"
#include "ternd.h"
#include "xalloc.h"

#define CONTROL_CLIENTS 8		/* served at once */
#define CONTROL_DEADLINE_MS 10000	/* for each request line, and each answer */
#define CONTROL_GROUPS_MAX 65536	/* NGROUPS_MAX of Linux */

static int control_fd = -1;
static char control_path[512];
static pthread_mutex_t clients_lock = PTHREAD_MUTEX_INITIALIZER;
static int nclients;

struct client {
	int fd;
	struct ucred cred;
};

/* Each relayed peer's "peers" line, in two parts: before and after its
 * queued count (read after, outside the peer's lock). */
struct peer_lines {
	struct peer_line {
		char name[128], head[200], tail[300];
	} *line;
	size_t n, cap;
};

static int control_send(int fd, const char *text, long long deadline);

/* peer_line_add - a new line in pl for the peer name */
static struct peer_line *peer_line_add(struct peer_lines *pl, const char *name)
{
	struct peer_line *l;

	pl->line = xgrowarray(pl->line, &pl->cap, pl->n + 1, sizeof(*pl->line));
	l = &pl->line[pl->n++];
	snprintf(l->name, sizeof(l->name), "%s", name);
	return l;
}

/* peer_line - a peer's line; its error text cannot add a field or a line */
static void peer_line(const struct peer_view *v, void *arg)
{
	static const char *const states[] = {"closed", "open", "half-open"};
	struct peer_line *l = peer_line_add(arg, v->name);

	snprintf(l->head, sizeof(l->head), "%s\t%s\t%llu\t%llu\t%d\t%d", v->name, states[v->state],
		 (unsigned long long)v->since, (unsigned long long)v->open_until, v->busy, v->idle);
	snprintf(l->tail, sizeof(l->tail), "%llu\t%s", (unsigned long long)v->last_error_at,
		 v->last_error);
	for (char *p = strchr(l->tail, '\t') + 1; *p; p++)
		if (*p == '\t' || *p == '\n' || *p == '\r')
			*p = ' ';
}

/* peer_listed - whether name has a line in pl already */
static int peer_listed(const struct peer_lines *pl, const char *name)
{
	for (size_t i = 0; i < pl->n; i++)
		if (strcmp(pl->line[i].name, name) == 0)
			return 1;
	return 0;
}

/* peer_parked - lines for the configured peers that are not relayed (no
 * host: their mail stays queued), so that they are counted like others */
static void peer_parked(struct peer_lines *pl)
{
	const struct conf *conf = ternd_conf();

	for (size_t i = 0; i < conf->npeers; i++) {
		struct peer_line *l;

		if (peer_listed(pl, conf->peers[i].name))
			continue;
		l = peer_line_add(pl, conf->peers[i].name);
		snprintf(l->head, sizeof(l->head), "%s\tparked\t0\t0\t0\t0", l->name);
		snprintf(l->tail, sizeof(l->tail), "0\t");
	}
}

/* control_peers - answer "peers": a line per configured peer, then "." */
static int control_peers(int fd)
{
	struct peer_lines pl = {0};
	int rc = 0;

	peer_views(peer_line, &pl);
	peer_parked(&pl);
	for (size_t i = 0; i < pl.n && rc == 0; i++) {
		char line[600];

		snprintf(line, sizeof(line), "%s\t%lld\t%s", pl.line[i].head,
			 (long long)stats_peer_rcpts(pl.line[i].name), pl.line[i].tail);
		rc = control_send(fd, line, ms_now() + CONTROL_DEADLINE_MS);
	}
	free(pl.line);
	return rc < 0 ? rc : control_send(fd, ".", ms_now() + CONTROL_DEADLINE_MS);
}

/* control_reset - "reset PEER": close its breaker now ("parked": the
 * peer has no host, so no breaker) */
static void control_reset(const char *peer, const struct ucred *cred, char *answer, size_t len)
{
	if (peer_reset(peer) < 0) {
		const struct conf_peer *p = conf_peer_find(ternd_conf(), peer);

		snprintf(answer, len, p != NULL && p->host[0] == '\0' ? "parked" : "not found");
		return;
	}
	log_info("peer %s: breaker closed by ternq (uid %u)", peer, (unsigned)cred->uid);
	snprintf(answer, len, "ok");
}

/* control_expire - "expire QID": bounce it now, with a DSN */
static void control_expire(const char *qid, const struct ucred *cred, char *answer, size_t len)
{
	char err[256];
	int rc = relay_result_expire(qid, (unsigned)cred->uid, err, sizeof(err));

	if (rc < 0)
		snprintf(answer, len, "error: %s", err);
	else
		snprintf(answer, len, "%s", rc == 0 ? "not found" : "ok");
}

/* control_request - answer one request line of the client cred */
static void control_request(char *line, const struct ucred *cred, char *answer, size_t len)
{
	char verb[16], qid[64];
	struct queue_op_arg a;
	struct job job;

	if (sscanf(line, "%15s %63s", verb, qid) == 1 && strcmp(verb, "ping") == 0) {
		snprintf(answer, len, "ok");
		return;
	}
	if (sscanf(line, "%15s %63s", verb, qid) == 1 && strcmp(verb, "storage") == 0) {
		storage_describe(answer, len);
		return;
	}
	if (sscanf(line, "%15s %63s", verb, qid) == 2 && strcmp(verb, "reset") == 0) {
		control_reset(qid, cred, answer, len);
		return;
	}
	memset(&a, 0, sizeof(a));
	if (sscanf(line, "%15s %63s", verb, qid) != 2 || queue_op_parse(verb, &a.op) < 0
	    || strlen(qid) != QID_LEN) {
		snprintf(answer, len, "error: bad request");
		return;
	}
	if (a.op == QOP_EXPIRE) {
		control_expire(qid, cred, answer, len);
		return;
	}
	memcpy(a.qid, qid, QID_LEN + 1);
	a.now_us = now_us();
	a.spool = ternd.spool;
	a.conf = ternd_conf();
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
		stats_queued_add(-1);
	queue_op_warn(&a);
	if (!a.changed) {
		snprintf(answer, len, "unchanged");
		return;
	}
	if (a.op == QOP_DELETE)
		log_info("%s: removed by ternq (uid %u): %s", a.qid, (unsigned)cred->uid, a.envelope);
	else
		log_info("%s: %s by ternq (uid %u)", a.qid, queue_op_done(a.op), (unsigned)cred->uid);
	if (a.op != QOP_DELETE && a.op != QOP_HOLD)
		sched_kick();	/* due now: the scheduler looks at once */
	snprintf(answer, len, "ok");
}

/* control_send - write text and a newline by the deadline; -1 if not */
static int control_send(int fd, const char *text, long long deadline)
{
	size_t len = strlen(text) + 1, off = 0;
	char *line = xmalloc(len);
	int rc = 0;

	memcpy(line, text, len - 1);
	line[len - 1] = '\n';
	while (off < len && rc == 0) {
		ssize_t k = send(fd, line + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k > 0)
			off += (size_t)k;
		else if ((k < 0 && errno != EAGAIN && errno != EINTR)
			 || deadline_wait(fd, POLLOUT, deadline) < 0)
			rc = -1;
	}
	free(line);
	return rc;
}

/* peer_in_group - whether gid is one of the peer's supplementary groups */
static int peer_in_group(int fd, gid_t gid)
{
	gid_t small[64], *groups = small;
	socklen_t cap = sizeof(small), len = cap;
	int found = 0;

	while (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		/* ERANGE: len says how much the list needs (Linux >= 4.13) */
		if (errno != ERANGE || len <= cap || len > CONTROL_GROUPS_MAX * sizeof(gid_t)) {
			len = 0;
			break;
		}
		if (groups != small)
			free(groups);
		groups = xmalloc(len);
		cap = len;
	}
	for (size_t i = 0; i < len / sizeof(gid_t) && !found; i++)
		found = groups[i] == gid;
	if (groups != small)
		free(groups);
	return found;
}

/* control_allowed - whether the peer of fd may administer (cred is filled) */
static int control_allowed(int fd, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0 || len != sizeof(*cred)) {
		cred->pid = 0;
		cred->uid = (uid_t)-1;
		cred->gid = (gid_t)-1;
		return 0;
	}
	if (cred->uid == 0 || cred->uid == ternd.uid)
		return 1;
	return ternd.admin && (cred->gid == ternd.admin_gid || peer_in_group(fd, ternd.admin_gid));
}

/* control_client - serve one checked client until it leaves, errs or
 * misses a deadline */
static void *control_client(void *arg)
{
	struct client *c = arg;
	char buf[512], answer[300];
	size_t have = 0;
	long long deadline = ms_now() + CONTROL_DEADLINE_MS;

	for (;;) {
		struct pollfd p = {c->fd, POLLIN, 0};
		char *nl = memchr(buf, '\n', have);
		long long wait;
		ssize_t n;

		if (nl != NULL) {
			size_t used = (size_t)(nl - buf) + 1;

			*nl = '\0';
			if (strcmp(buf, "peers") == 0) {
				if (control_peers(c->fd) < 0)
					break;
			} else {
				control_request(buf, &c->cred, answer, sizeof(answer));
				if (control_send(c->fd, answer, ms_now() + CONTROL_DEADLINE_MS) < 0)
					break;
			}
			memmove(buf, buf + used, have - used);
			have -= used;
			deadline = ms_now() + CONTROL_DEADLINE_MS;
			continue;
		}
		if (have == sizeof(buf)) {
			control_send(c->fd, "error: bad request", ms_now());
			break;	/* a line longer than any request */
		}
		if ((wait = deadline - ms_now()) <= 0) {
			log_warning("control: uid %u (pid %ld): no whole request within %d s: "
				    "disconnected", (unsigned)c->cred.uid, (long)c->cred.pid,
				    CONTROL_DEADLINE_MS / 1000);
			control_send(c->fd, "error: timeout", ms_now());
			break;
		}
		if (poll(&p, 1, (int)wait) <= 0)
			continue;	/* EINTR, or the deadline: seen above */
		n = read(c->fd, buf + have, sizeof(buf) - have);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(c->fd);
	free(c);
	pthread_mutex_lock(&clients_lock);
	nclients--;
	pthread_mutex_unlock(&clients_lock);
	return NULL;
}

/* control_refuse - answer text, close, log why */
static void control_refuse(int fd, const struct ucred *cred, const char *text, const char *why)
{
	log_warning("control: refused uid %u (pid %ld): %s", (unsigned)cred->uid, (long)cred->pid,
		    why);
	control_send(fd, text, ms_now());
	close(fd);
}

/* control_loop - accept ternq's connections, check them, give each a thread */
static void *control_loop(void *arg)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		int fd = accept4(control_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), busy;
		struct client *c;
		pthread_t tid;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK)
				break;
			log_warning("control: accept: %s", strerror(errno));
			usleep(100000);
			continue;
		}
		c = xmalloc(sizeof(*c));
		c->fd = fd;
		if (!control_allowed(fd, &c->cred)) {
			control_refuse(fd, &c->cred, "error: permission denied",
				       "not root, the tern user or a member of admin_group");
			free(c);
			continue;
		}
		pthread_mutex_lock(&clients_lock);
		busy = nclients >= CONTROL_CLIENTS;
		if (!busy)
			nclients++;
		pthread_mutex_unlock(&clients_lock);
		if (busy) {
			control_refuse(fd, &c->cred, "error: busy", "all control clients busy");
			free(c);
			continue;
		}
		if (pthread_create(&tid, &attr, control_client, c) != 0) {
			control_refuse(fd, &c->cred, "error: busy", "cannot start a thread");
			free(c);
			pthread_mutex_lock(&clients_lock);
			nclients--;
			pthread_mutex_unlock(&clients_lock);
		}
	}
	pthread_attr_destroy(&attr);
	return arg;
}

/* control_setup - open the control socket (before dropping privileges);
 * who may use it is ternd.uid and admin_group, looked up in main.c */
void control_setup(void)
{
	char spec[520], err[600];
	int is_unix;

	snprintf(spec, sizeof(spec), "unix:%s",
		 conf_control_socket(ternd.conf, control_path, sizeof(control_path)));
	/* 0600, or 0660 to admin_group; the peer is checked all the same */
	if ((control_fd = listen_open(spec, ternd.uid, ternd.admin ? ternd.admin_gid : ternd.gid,
				      ternd.admin ? 0660 : 0600, &is_unix, err, sizeof(err))) < 0)
		log_fatal("cannot open the control socket: %s", err);
}

/* control_remove - a clean stop: remove the control socket's file (its
 * thread may go on serving who is connected) */
void control_remove(void)
{
	if (control_path[0] && unlink(control_path) < 0 && errno != ENOENT)
		log_warning("%s: cannot remove the socket: %s", control_path, strerror(errno));
}

/* control_start - serve the control socket */
void control_start(void)
{
	pthread_t tid;

	if (pthread_create(&tid, NULL, control_loop, NULL) != 0)
		log_fatal("cannot start the control thread");
	pthread_detach(tid);
}
