/*
 * listen - ternd's listeners: accept LMTP and SMTP connections and give
 * each its own session, at most max_inbound_sessions at a time
 * (beyond: 421 4.3.2) and at most max_client_sessions from one client
 * address (beyond: 421 4.7.0; clients.c counts them). Clients on inet
 * listeners must come from inbound_networks: ternd is never an open
 * relay. A refusal is warned about once a minute per listener and
 * limit, with how many were held back: a flood never floods the log.
 *
 * The session loops (fiber.c) accept: whichever is free first takes a
 * new connection and runs its session as a fiber, so a connection costs
 * a stack, not a thread, and no thread waits in accept().
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clients.h"
#include "clock.h"
#include "commit.h"
#include "fds.h"
#include "fiber.h"
#include "listen.h"
#include "log.h"
#include "privs.h"
#include "ratelimit.h"
#include "session.h"
#include "ternd.h"
#include "xalloc.h"

struct listener {
	int fd;
	int sessions;			/* its own count: SMTP clients cannot starve LMTP */
	int lmtp;
	int unix_socket;
	char name[128];
};

static struct listener listeners[2];
static int nlisteners;

#define ACCEPT_BURST 16	/* connections taken per call, so sessions are served between */

struct conn {
	struct listener *l;
	int fd;
	int lmtp;
	struct client_addr who;		/* counted for max_client_sessions (family 0: not) */
	char client[80];
};

/* the inbound sessions running, and those per client address */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t ended;	/* a session has ended */
	int n;
} sessions = {.lock = PTHREAD_MUTEX_INITIALIZER, .ended = PTHREAD_COND_INITIALIZER};
static struct clients clients;		/* under sessions.lock */

/* listen_open - open one listener from "inet:HOST:PORT" or "unix:PATH";
 * a unix socket is made owned by uid:gid with mode (privs_bind_unix) */
int listen_open(const char *spec, uid_t uid, gid_t gid, mode_t mode, int *unix_socket, char *err,
		size_t errlen)
{
	int fd, one = 1;

	*unix_socket = strncmp(spec, "unix:", 5) == 0;
	if (*unix_socket) {
		char why[512];

		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
			snprintf(err, errlen, "%s: %s", spec, strerror(errno));
			return -1;
		}
		if (privs_bind_unix(fd, spec + 5, uid, gid, mode, why, sizeof(why)) < 0
		    || (listen(fd, 128) < 0 && snprintf(why, sizeof(why), "%s: %s", spec + 5,
							   strerror(errno)) >= 0)) {
			snprintf(err, errlen, "%s", why);
			close(fd);
			return -1;
		}
		return fd;
	}
	if (strncmp(spec, "inet:", 5) == 0) {
		char host[128];
		const char *hp = spec + 5, *colon = strrchr(hp, ':');
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_PASSIVE};
		struct addrinfo *ai;
		size_t hlen;

		if (colon == NULL || (hlen = (size_t)(colon - hp)) >= sizeof(host)) {
			snprintf(err, errlen, "%s: expected inet:HOST:PORT", spec);
			return -1;
		}
		memcpy(host, hp, hlen);
		host[hlen] = '\0';
		if (host[0] == '[' && hlen > 2 && host[hlen - 1] == ']') {
			memmove(host, host + 1, hlen - 2);
			host[hlen - 2] = '\0';
		}
		if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
			snprintf(err, errlen, "%s: bad address (a numeric IP address and port are needed)", spec);
			return -1;
		}
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0
		    || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
			snprintf(err, errlen, "%s: %s", spec, strerror(errno));
			freeaddrinfo(ai);
			if (fd >= 0)
				close(fd);
			return -1;
		}
		freeaddrinfo(ai);
		return fd;
	}
	snprintf(err, errlen, "%s: expected inet:HOST:PORT or unix:PATH", spec);
	return -1;
}

/* session_fiber - one session, and the accounting for its end */
static void session_fiber(void *arg)
{
	struct conn *c = arg;

	session_run(c->fd, c->lmtp, c->client);
	close(c->fd);
	pthread_mutex_lock(&sessions.lock);
	sessions.n--;
	c->l->sessions--;
	clients_give(&clients, &c->who);
	free(c);
	pthread_cond_broadcast(&sessions.ended);
	pthread_mutex_unlock(&sessions.lock);
}

/* refuse - a one-line answer and close */
static void refuse(int fd, const char *text)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%s\r\n", text);

	if (send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		(void)0;	/* the client is gone: nothing to do */
	close(fd);
}

/* accept_warnings - one a second per listener, whichever loop meets it */
static struct ratelimit accept_warnings = RATELIMIT_INIT;

/* limit_warnings - refusals at a session limit: one a minute per
 * listener and limit */
static struct ratelimit limit_warnings = RATELIMIT_INIT;

enum refusal { REFUSE_NONE, REFUSE_FDS, REFUSE_SESSIONS, REFUSE_CLIENT };

/* refuse_limit - a client beyond the listener's share of the file
 * descriptors (fds.c) or max_inbound_sessions (421 4.3.2), or beyond
 * max_client_sessions (421 4.7.0, as Postfix's anvil): the reply, and
 * the warning when its cause has not had one for a minute */
static void refuse_limit(const struct listener *l, int fd, enum refusal why, const char *client)
{
	const struct conf_ternd *t = &ternd_conf()->ternd;
	const char *limit = why == REFUSE_CLIENT ? "max_client_sessions"
		: why == REFUSE_FDS ? "descriptors" : "max_inbound_sessions";
	char key[sizeof(l->name) + 32], msg[200];	/* ratelimit cuts it at RATELIMIT_KEY_MAX */
	uint64_t held;

	snprintf(key, sizeof(key), "%s %s", limit, l->name);
	if (!ratelimit_pass(&limit_warnings, key, now_us(), RATELIMIT_MINUTE, &held))
		;
	else if (why == REFUSE_FDS)
		log_warning("%s: refused connection from %s: out of file descriptors for sessions "
			    "(%lld per listener, the rest kept for the relay and the store) "
			    "(%" PRIu64 " more refused since the last warning)", l->name, client,
			    fds_sessions_max(), held);
	else
		log_warning("%s: refused connection from %s: %s (%lld) reached "
			    "(%" PRIu64 " more refused since the last warning)", l->name, client, limit,
			    why == REFUSE_CLIENT ? t->max_client_sessions : t->max_inbound_sessions, held);
	if (why == REFUSE_CLIENT)
		snprintf(msg, sizeof(msg), "421 4.7.0 %s Error: too many connections from %s",
			 ternd.hostname, client);
	else
		snprintf(msg, sizeof(msg), "421 4.3.2 %s Error: too many sessions, try again later",
			 ternd.hostname);
	refuse(fd, msg);
}

/* accept_retry - accept(2) failed for this connection alone: take the
 * next (Linux passes a pending network error of the new connection on) */
static int accept_retry(int err)
{
	switch (err) {
	case EINTR: case ECONNABORTED: case ENETDOWN: case EPROTO: case ENOPROTOOPT:
	case EHOSTDOWN: case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH:
	case EPERM:
		return 1;
	default:
		return 0;
	}
}

/* accept_ready - a session loop found l's socket readable: take up to
 * ACCEPT_BURST connections; 0, or the milliseconds this loop should
 * leave the socket alone (no descriptor or memory to take one) */
static int accept_ready(void *arg)
{
	struct listener *l = arg;

	for (int taken = 0; taken < ACCEPT_BURST; taken++) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);
		char addr[INET6_ADDRSTRLEN] = "local", msg[160], client[sizeof(addr) + 2];
		const struct conf_ternd *t = &ternd_conf()->ternd;
		struct client_addr who = {0};
		struct conn *c;
		enum refusal busy = REFUSE_NONE;
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sslen, SOCK_CLOEXEC), one = 1;

		if (fd < 0) {
			uint64_t held;

			if (accept_retry(errno))
				continue;
			if (errno == EAGAIN || errno == EINVAL)
				return 0;	/* none waits, or shut down: stopping */
			if (ratelimit_pass(&accept_warnings, l->name, now_us(), 1000000, &held))
				log_warning("%s: accept: %s (%" PRIu64 " more since the last warning)",
					    l->name, strerror(errno), held);
			return 100;	/* EMFILE, ENFILE, ENOBUFS, ENOMEM: this loop waits */
		}
		if (!l->unix_socket) {
			const void *a = ss.ss_family == AF_INET6
				? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
				: (const void *)&((struct sockaddr_in *)&ss)->sin_addr;

			inet_ntop(ss.ss_family, a, addr, sizeof(addr));
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			if (!cidr_list_match(ternd_conf()->ternd.inbound_networks, (struct sockaddr *)&ss)) {
				log_warning("%s: refused connection from [%s]: not in inbound_networks",
					    l->name, addr);
				snprintf(msg, sizeof(msg), "554 5.7.1 %s Error: access denied for [%s]",
					 ternd.hostname, addr);
				refuse(fd, msg);
				continue;
			}
			if (t->max_client_sessions > 0
			    && !cidr_list_match(t->client_limit_exceptions, (struct sockaddr *)&ss))
				client_addr_of((struct sockaddr *)&ss, &who);
		}
		snprintf(client, sizeof(client), l->unix_socket ? "local" : "[%s]", addr);
		pthread_mutex_lock(&sessions.lock);
		if (l->sessions >= fds_sessions_max())
			busy = REFUSE_FDS;
		else if (l->sessions >= t->max_inbound_sessions || commit_stopped())
			busy = REFUSE_SESSIONS;
		else if (!clients_take(&clients, &who, t->max_client_sessions))
			busy = REFUSE_CLIENT;
		if (!busy) {
			sessions.n++;
			l->sessions++;
		}
		pthread_mutex_unlock(&sessions.lock);
		if (busy) {
			refuse_limit(l, fd, busy, client);
			continue;
		}
		c = xcalloc(1, sizeof(*c));
		c->l = l;
		c->fd = fd;
		c->lmtp = l->lmtp;
		c->who = who;
		snprintf(c->client, sizeof(c->client), "%s", client);
		if (fiber_spawn(session_fiber, c) < 0) {
			log_error("cannot start a session: %s", strerror(errno));
			refuse(fd, "421 4.3.0 Error: out of resources");
			free(c);
			pthread_mutex_lock(&sessions.lock);
			sessions.n--;
			l->sessions--;
			clients_give(&clients, &who);
			pthread_mutex_unlock(&sessions.lock);
		}
	}
	return 0;	/* more may wait: the loops are told again */
}

/* listen_setup - open the configured listeners (as root, before dropping) */
void listen_setup(void)
{
	const struct conf_ternd *t = &ternd_conf()->ternd;
	const char *specs[2] = {t->lmtp_listen, t->smtp_listen};
	/* the LMTP socket is the MTA's, through lmtp_socket_group alone */
	gid_t groups[2] = {ternd.lmtp_gid, ternd.gid};
	char err[512];

	for (int i = 0; i < 2; i++) {
		struct listener *l = &listeners[nlisteners];

		if (specs[i][0] == '\0')
			continue;
		if ((l->fd = listen_open(specs[i], ternd.uid, groups[i], 0660, &l->unix_socket,
					 err, sizeof(err))) < 0)
			log_fatal("cannot listen: %s", err);
		l->lmtp = i == 0;
		snprintf(l->name, sizeof(l->name), "%s", specs[i]);
		nlisteners++;
	}
	if (nlisteners == 0)
		log_fatal_status(2, "both lmtp_listen and smtp_listen are empty: nothing to do");
}

/* listen_start - start accepting, on the session loops */
void listen_start(void)
{
	for (int i = 0; i < nlisteners; i++) {
		if (fcntl(listeners[i].fd, F_SETFL, O_NONBLOCK) < 0)
			log_fatal("%s: %s", listeners[i].name, strerror(errno));
		fiber_watch(listeners[i].fd, accept_ready, &listeners[i]);
	}
	fiber_start();
}

/* listen_stop - stop accepting; sessions in progress go on. A new client
 * is refused at once (shutdown), and a unix socket's file is removed, so
 * that a stopped ternd leaves none behind (a connect finds no file); the
 * descriptor stays open until exit, as fiber_unwatch wants. */
void listen_stop(void)
{
	for (int i = 0; i < nlisteners; i++) {
		fiber_unwatch(listeners[i].fd);
		shutdown(listeners[i].fd, SHUT_RDWR);
		if (listeners[i].unix_socket && unlink(listeners[i].name + 5) < 0 && errno != ENOENT)
			log_warning("%s: cannot remove the socket: %s", listeners[i].name + 5,
				    strerror(errno));
	}
	nlisteners = 0;
}

/* listen_sessions - the inbound sessions running now */
int listen_sessions(void)
{
	int n;

	pthread_mutex_lock(&sessions.lock);
	n = sessions.n;
	pthread_mutex_unlock(&sessions.lock);
	return n;
}

/* listen_wait - wait up to ms for the sessions to end (after
 * listen_stop); how many still run */
int listen_wait(long ms)
{
	struct timespec deadline;
	int left;

	clock_deadline(&deadline, ms);
	pthread_mutex_lock(&sessions.lock);
	while (sessions.n > 0)
		if (clock_cond_wait(&sessions.ended, &sessions.lock, &deadline) == ETIMEDOUT)
			break;
	left = sessions.n;
	pthread_mutex_unlock(&sessions.lock);
	return left;
}
