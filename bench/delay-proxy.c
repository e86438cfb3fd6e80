/*
 * delay-proxy - a TCP proxy that adds a fixed round-trip delay.
 *
 * The kernel here has no netem, so a WAN-like round trip is made in user
 * space: every connection accepted on -l is joined to a new connection to
 * -t, and every chunk read from either side is held for MS/2 milliseconds
 * before it is written to the other side. A request and its reply each
 * pay MS/2, so the round trip grows by MS. Bandwidth is not limited.
 *
 *   delay-proxy -l 127.0.0.1:PORT -t 127.0.0.1:PORT -d MS [-b BYTES] [-q]
 *
 * -b bounds what one direction of one connection may hold (default 4 MB):
 * at the bound the proxy stops reading that side, so TCP flow control
 * pushes back on the sender instead of memory growing. Chunks leave in the
 * order they arrived; an end of stream (FIN) is delayed like data and
 * passed on with shutdown(SHUT_WR), so half-closed connections work. A
 * reset or error on either side closes both.
 *
 * One thread, edge-triggered epoll, a timerfd armed for the earliest chunk
 * due. Finding that chunk walks the list of connections, which is fine for
 * the tens of connections a benchmark opens, not for thousands. Both
 * sockets of a pair get TCP_NODELAY: the proxy must not add Nagle stalls of
 * its own on top of the delay it is asked for.
 *
 * SIGTERM or SIGINT: close everything, print the totals (connections,
 * bytes each way) on stderr unless -q, exit 0. It is a benchmark tool: it
 * trusts its command line and is meant for 127.0.0.0/8.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE			/* accept4 */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"

#define READ_MAX 65536

struct chunk {
	struct chunk *next;
	uint64_t due;			/* monotonic ns at which it may leave */
	size_t len, off;		/* len 0: the end of the stream */
	char data[];
};

/* one direction: bytes read from fd[i] wait here for fd[1 - i] */
struct dir {
	struct chunk *head, *tail;
	size_t held;
	int eof_read, eof_sent;
};

struct pair;
struct side {
	struct pair *pair;
	int idx;			/* 0: the accepted client, 1: the target */
};

struct pair {
	struct pair *prev, *next;
	int fd[2];
	int readable[2], writable[2];
	int connecting;			/* fd[1]'s connect() has not completed */
	int dead;			/* closed; freed after the event batch */
	struct dir d[2];
	struct side side[2];
};

static struct {
	struct sockaddr_in listen, target;
	uint64_t half_ns;
	size_t limit;
	int quiet;
	int ep, lfd, tfd, sfd;
	struct pair *pairs;
	struct pair *dead;		/* closed pairs, freed after the batch */
	unsigned long long conns, bytes[2];
} g = {.limit = 4u << 20};

/* die - print a message and exit 1 */
static void die(const char *what)
{
	fprintf(stderr, "delay-proxy: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* now_ns - monotonic clock in nanoseconds */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* watch - add fd to the epoll set, edge-triggered, with ptr as its data */
static int watch(int fd, void *ptr)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = ptr};

	return epoll_ctl(g.ep, EPOLL_CTL_ADD, fd, &ev);
}

/* pair_close - close both sockets of a pair and free what it held; the
 * pair itself goes to the dead list, because events already fetched in
 * this epoll batch may still point at it */
static void pair_close(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		struct chunk *c, *next;

		if (p->fd[i] >= 0)
			close(p->fd[i]);	/* also leaves the epoll set */
		for (c = p->d[i].head; c != NULL; c = next) {
			next = c->next;
			free(c);
		}
		p->d[i].head = p->d[i].tail = NULL;
	}
	if (p->prev)
		p->prev->next = p->next;
	else
		g.pairs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->dead = 1;
	p->prev = NULL;
	p->next = g.dead;
	g.dead = p;
}

/* reap - free the pairs closed during the last batch */
static void reap(void)
{
	while (g.dead != NULL) {
		struct pair *p = g.dead;

		g.dead = p->next;
		free(p);
	}
}

/* nodelay - TCP_NODELAY on a socket (best effort) */
static void nodelay(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* pair_open - join an accepted socket to a new connection to the target */
static void pair_open(int cfd)
{
	struct pair *p = calloc(1, sizeof(*p));
	int tfd;

	if (p == NULL) {
		close(cfd);
		return;
	}
	tfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (tfd < 0 || (connect(tfd, (struct sockaddr *)&g.target, sizeof(g.target)) < 0 &&
			errno != EINPROGRESS)) {
		if (tfd >= 0)
			close(tfd);
		close(cfd);
		free(p);
		return;
	}
	nodelay(cfd);
	nodelay(tfd);
	p->fd[0] = cfd;
	p->fd[1] = tfd;
	p->connecting = 1;
	for (int i = 0; i < 2; i++) {
		p->side[i].pair = p;
		p->side[i].idx = i;
	}
	p->next = g.pairs;
	if (g.pairs)
		g.pairs->prev = p;
	g.pairs = p;
	g.conns++;
	if (watch(cfd, &p->side[0]) < 0 || watch(tfd, &p->side[1]) < 0)
		pair_close(p);
}

/* push - append a chunk of n bytes (0: end of stream) to direction i */
static int push(struct pair *p, int i, const char *buf, size_t n, uint64_t due)
{
	struct chunk *c = malloc(sizeof(*c) + n);

	if (c == NULL)
		return -1;
	c->next = NULL;
	c->due = due;
	c->len = n;
	c->off = 0;
	memcpy(c->data, buf, n);
	if (p->d[i].tail)
		p->d[i].tail->next = c;
	else
		p->d[i].head = c;
	p->d[i].tail = c;
	p->d[i].held += n;
	return 0;
}

/* pump_read - read side i while it has data and room; -1: close the pair */
static int pump_read(struct pair *p, int i)
{
	static char buf[READ_MAX];
	struct dir *d = &p->d[i];

	while (p->readable[i] && !d->eof_read && d->held < g.limit) {
		ssize_t n = read(p->fd[i], buf, sizeof(buf));

		if (n > 0) {
			if (push(p, i, buf, (size_t)n, now_ns() + g.half_ns) < 0)
				return -1;
			g.bytes[i] += (unsigned long long)n;
		} else if (n == 0) {
			d->eof_read = 1;
			if (push(p, i, buf, 0, now_ns() + g.half_ns) < 0)
				return -1;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			p->readable[i] = 0;
		} else if (errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

/* pump_write - send direction i's due chunks to the other side; -1: close */
static int pump_write(struct pair *p, int i, uint64_t now)
{
	struct dir *d = &p->d[i];
	int o = 1 - i;

	while (d->head != NULL && d->head->due <= now && p->writable[o] && !p->connecting) {
		struct chunk *c = d->head;

		if (c->len == 0) {
			if (shutdown(p->fd[o], SHUT_WR) < 0)
				return -1;
			d->eof_sent = 1;
		} else {
			ssize_t n = send(p->fd[o], c->data + c->off, c->len - c->off, MSG_NOSIGNAL);

			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					p->writable[o] = 0;
					break;
				}
				if (errno == EINTR)
					continue;
				return -1;
			}
			c->off += (size_t)n;
			d->held -= (size_t)n;
			if (c->off < c->len)
				continue;
		}
		d->head = c->next;
		if (d->head == NULL)
			d->tail = NULL;
		free(c);
	}
	return 0;
}

/* pump - move what can move in both directions; may free the pair */
static void pump(struct pair *p)
{
	uint64_t now = now_ns();

	for (int i = 0; i < 2; i++) {
		/* write first: it frees room that lets reading resume */
		if (pump_write(p, i, now) < 0 || pump_read(p, i) < 0) {
			pair_close(p);
			return;
		}
	}
	if (p->d[0].eof_sent && p->d[1].eof_sent)
		pair_close(p);
}

/* arm_timer - wake up when the earliest chunk that can be written is due */
static void arm_timer(void)
{
	uint64_t next = 0;
	struct itimerspec its = {{0, 0}, {0, 0}};

	for (struct pair *p = g.pairs; p != NULL; p = p->next)
		for (int i = 0; i < 2; i++) {
			struct chunk *c = p->d[i].head;

			/* a blocked writer waits for EPOLLOUT, not for the clock */
			if (c != NULL && p->writable[1 - i] && !p->connecting && (next == 0 || c->due < next))
				next = c->due;
		}
	if (next != 0) {
		its.it_value.tv_sec = (time_t)(next / 1000000000u);
		its.it_value.tv_nsec = (long)(next % 1000000000u);
		if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
			its.it_value.tv_nsec = 1;	/* 0 would disarm */
	}
	if (timerfd_settime(g.tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		die("timerfd_settime");
}

/* on_side - an epoll event on one socket of a pair */
static void on_side(struct side *s, uint32_t events)
{
	struct pair *p = s->pair;
	int i = s->idx;

	if (i == 1 && p->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(p->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
			pair_close(p);	/* the target refused: drop the client too */
			return;
		}
		p->connecting = 0;
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		p->readable[i] = 1;	/* read() reports EOF or the error */
	if (events & EPOLLOUT)
		p->writable[i] = 1;
	pump(p);
}

/* on_accept - accept every pending connection */
static void on_accept(void)
{
	for (;;) {
		int fd = accept4(g.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			pair_open(fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK && !g.quiet)
			fprintf(stderr, "delay-proxy: accept: %s\n", strerror(errno));
		return;
	}
}

/* on_timer - chunks are due: pump every pair (a pair may free itself) */
static void on_timer(void)
{
	uint64_t expirations;
	struct pair *p, *next;

	(void)read(g.tfd, &expirations, sizeof(expirations));
	for (p = g.pairs; p != NULL; p = next) {
		next = p->next;
		pump(p);
	}
}

/* setup - listener, timer, signals, epoll */
static void setup(void)
{
	int one = 1;
	sigset_t set;
	static int tag_listen, tag_timer, tag_signal;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		die("sigprocmask");
	signal(SIGPIPE, SIG_IGN);
	if ((g.ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("epoll_create1");
	if ((g.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		die("signalfd");
	if ((g.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0)
		die("timerfd_create");
	g.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (g.lfd < 0)
		die("socket");
	(void)setsockopt(g.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(g.lfd, (struct sockaddr *)&g.listen, sizeof(g.listen)) < 0)
		die("bind");
	if (listen(g.lfd, 512) < 0)
		die("listen");
	struct epoll_event ev[] = {
		{.events = EPOLLIN, .data.ptr = &tag_listen},
		{.events = EPOLLIN, .data.ptr = &tag_timer},
		{.events = EPOLLIN, .data.ptr = &tag_signal},
	};
	int fds[] = {g.lfd, g.tfd, g.sfd};

	for (int i = 0; i < 3; i++)
		if (epoll_ctl(g.ep, EPOLL_CTL_ADD, fds[i], &ev[i]) < 0)
			die("epoll_ctl");
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(g.ep, evs, 64, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			void *ptr = evs[i].data.ptr;

			if (ptr == &tag_signal)
				return;
			if (ptr == &tag_listen) {
				on_accept();
			} else if (ptr == &tag_timer) {
				on_timer();
			} else {
				struct side *s = ptr;

				if (!s->pair->dead)	/* closed earlier in this batch */
					on_side(s, evs[i].events);
			}
		}
		reap();
		arm_timer();
	}
}

/* usage - print the synopsis and exit 2 */
static void usage(void)
{
	fprintf(stderr, "usage: delay-proxy -l ADDR:PORT -t ADDR:PORT -d MS [-b BYTES] [-q]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt, have_l = 0, have_t = 0, have_d = 0;
	char *end;
	unsigned long v;

	while ((opt = getopt(argc, argv, "l:t:d:b:q")) != -1) {
		switch (opt) {
		case 'l':
			if (addr_parse(optarg, &g.listen) < 0)
				usage();
			have_l = 1;
			break;
		case 't':
			if (addr_parse(optarg, &g.target) < 0)
				usage();
			have_t = 1;
			break;
		case 'd':
			v = strtoul(optarg, &end, 10);
			if (*end != '\0' || v > 600000)
				usage();
			g.half_ns = (uint64_t)v * 1000000u / 2;
			have_d = 1;
			break;
		case 'b':
			v = strtoul(optarg, &end, 10);
			if (*end != '\0' || v < READ_MAX)
				usage();
			g.limit = v;
			break;
		case 'q':
			g.quiet = 1;
			break;
		default:
			usage();
		}
	}
	if (!have_l || !have_t || !have_d || optind != argc)
		usage();
	setup();
	while (g.pairs != NULL)
		pair_close(g.pairs);
	reap();
	if (!g.quiet)
		fprintf(stderr, "delay-proxy: %llu connections, %llu bytes to the target, %llu bytes back\n",
			g.conns, g.bytes[0], g.bytes[1]);
	return 0;
}
