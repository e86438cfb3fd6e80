/*
 * smtp-blast - an SMTP load generator that keeps the server busy.
 *
 * smtp-source waits for each reply before the next command; smtp-blast
 * pipelines (RFC 2920): MAIL, RCPT and DATA go in one write, and with -B
 * the whole transaction (MAIL, RCPT, BDAT n LAST and the content) goes in
 * one write. Each of -c sessions keeps one connection and sends messages
 * back to back; on a lost connection it reconnects (for crash tests).
 *
 *   smtp-blast [-B] [-c sessions] [-d domain] [-n messages] [-s size] [-o acked.log]
 *              [-m ids.log] HOST:PORT
 *
 * Every message has a Message-ID of its own, <blast.PID.N.T@HOSTNAME> (N:
 * its number in the run, 0 to messages - 1; T: the attempt, 0 first,
 * higher for a message sent again after a lost connection, so that a copy
 * the server took without its reply reaching the client is not counted
 * as the server's duplicate), as the first field of its header.
 *
 * Prints one summary line: messages, accepted, failed, seconds, msgs/s and
 * accept latency percentiles (end of content sent -> final reply). With
 * -o, writes the queue id of every message the server accepted, one per
 * line, as soon as the reply arrives: what a crash test must find again.
 * With -m, writes the Message-ID value of every message the server
 * accepted in the same way: what a peer's ledger (bench/chunk-sink -i)
 * must hold once the server has relayed them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct {
	struct sockaddr_in addr;
	int sessions, bdat;
	const char *domain;		/* recipients' domain */
	long messages;
	size_t size;
	FILE *acked, *ids;
	long pid;			/* the Message-IDs' PID */
	char host[256];			/* and their HOSTNAME */
	pthread_mutex_t lock;
	long next, ok, failed;
	double *lat;			/* seconds, one per accepted message */
	char *body;			/* DATA form (dot-stuffed, ends CRLF.CRLF) */
	size_t body_len, content_len;	/* content_len: without the final ".\r\n" */
} g = {.sessions = 10, .messages = 1000, .size = 10240, .domain = "example.com",
       .lock = PTHREAD_MUTEX_INITIALIZER};

struct conn {
	int fd;
	char buf[8192];
	size_t len;
};

/* now - monotonic seconds */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* send_all - write everything or fail */
static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* reply - read one reply; returns its code, copies its last line */
static int reply(struct conn *c, char *last, size_t lastlen)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);

		if (nl) {
			size_t n = (size_t)(nl - c->buf) + 1;
			int more = n > 4 && c->buf[3] == '-';
			int code = atoi(c->buf);

			if (last && !more) {
				size_t k = n - 1 < lastlen - 1 ? n - 1 : lastlen - 1;

				memcpy(last, c->buf, k);
				last[k] = '\0';
				if (k && last[k - 1] == '\r')
					last[k - 1] = '\0';
			}
			memmove(c->buf, c->buf + n, c->len - n);
			c->len -= n;
			if (!more)
				return code;
			continue;
		}
		if (c->len == sizeof(c->buf))
			return -1;
		ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);

		if (r <= 0)
			return -1;
		c->len += (size_t)r;
	}
}

/* open_conn - connect, read the greeting, EHLO */
static int open_conn(struct conn *c)
{
	int one = 1;
	const char *ehlo = "EHLO blast.example\r\n";

	c->len = 0;
	if ((c->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&g.addr, sizeof(g.addr)) < 0
	    || reply(c, NULL, 0) != 220 || send_all(c->fd, ehlo, strlen(ehlo)) < 0
	    || reply(c, NULL, 0) != 250) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	return 0;
}

/* take - claim the next message number; -1 when all are claimed */
static long take(void)
{
	long n;

	pthread_mutex_lock(&g.lock);
	n = g.next < g.messages ? g.next++ : -1;
	pthread_mutex_unlock(&g.lock);
	return n;
}

/* log_accepted - append one accepted message's line to FILE (if any) */
static void log_accepted(FILE *f, const char *line, size_t len)
{
	if (f == NULL)
		return;
	pthread_mutex_lock(&g.lock);
	fprintf(f, "%.*s\n", (int)len, line);
	fflush(f);
	pthread_mutex_unlock(&g.lock);
}

/* transaction - send message n; 0 accepted, 1 refused, -1 connection lost */
static int transaction(struct conn *c, long n, int try, double *latency)
{
	char cmds[512], last[512], id[320];
	double t0;
	int len, idlen;

	idlen = snprintf(id, sizeof(id), "Message-ID: <blast.%ld.%ld.%d@%s>\r\n", g.pid, n, try, g.host);
	if (idlen < 0 || (size_t)idlen >= sizeof(id))
		return 1;
	if (g.bdat)
		len = snprintf(cmds, sizeof(cmds), "MAIL FROM:<blast@example.org>\r\n"
			       "RCPT TO:<sink%ld@%s>\r\nBDAT %zu LAST\r\n", n % 100, g.domain,
			       (size_t)idlen + g.content_len);
	else
		len = snprintf(cmds, sizeof(cmds), "MAIL FROM:<blast@example.org>\r\n"
			       "RCPT TO:<sink%ld@%s>\r\nDATA\r\n", n % 100, g.domain);
	if (send_all(c->fd, cmds, (size_t)len) < 0)
		return -1;
	if (g.bdat) {
		t0 = now();
		if (send_all(c->fd, id, (size_t)idlen) < 0 || send_all(c->fd, g.body, g.content_len) < 0)
			return -1;
		int mail = reply(c, NULL, 0), rcpt = reply(c, NULL, 0);

		if (mail < 0 || rcpt < 0)
			return -1;
		if (mail != 250 || rcpt != 250)
			return reply(c, NULL, 0) < 0 ? -1 : 1;
	} else {
		if (reply(c, NULL, 0) != 250 || reply(c, NULL, 0) != 250 || reply(c, NULL, 0) != 354)
			return -1;	/* out of step: start over */
		t0 = now();
		if (send_all(c->fd, id, (size_t)idlen) < 0 || send_all(c->fd, g.body, g.body_len) < 0)
			return -1;
	}
	switch (reply(c, last, sizeof(last))) {
	case -1:
		return -1;
	case 250:
		*latency = now() - t0;
		if (g.acked) {
			const char *q = strstr(last, "queued as ");

			q = q ? q + 10 : last;
			log_accepted(g.acked, q, strlen(q));
		}
		/* the value between "Message-ID: " and its CRLF */
		log_accepted(g.ids, id + 12, (size_t)idlen - 14);
		return 0;
	default:
		return 1;
	}
}

/* session - one connection's worth of messages */
static void *session(void *arg)
{
	struct conn c = {.fd = -1};
	long n;

	(void)arg;
	while ((n = take()) >= 0) {
		double lat = 0;
		int rc = -1;

		for (int tries = 0; tries < 50 && rc < 0; tries++) {
			if (c.fd < 0 && open_conn(&c) < 0) {
				usleep(100000);
				continue;
			}
			if ((rc = transaction(&c, n, tries, &lat)) < 0) {
				close(c.fd);
				c.fd = -1;
			}
		}
		pthread_mutex_lock(&g.lock);
		if (rc == 0)
			g.lat[g.ok++] = lat;
		else
			g.failed++;
		pthread_mutex_unlock(&g.lock);
	}
	if (c.fd >= 0) {
		send_all(c.fd, "QUIT\r\n", 6);
		reply(&c, NULL, 0);
		close(c.fd);
	}
	return NULL;
}

/* make_body - a message of about size octets, in both forms, and the
 * format of its Message-ID field */
static void make_body(void)
{
	g.pid = (long)getpid();
	if (gethostname(g.host, sizeof(g.host) - 1) < 0 || g.host[0] == '\0')
		strcpy(g.host, "blast.invalid");
	size_t cap = g.size + 512, len = 0;
	char *b = malloc(cap);

	len += (size_t)snprintf(b, cap, "From: blast@example.org\r\nTo: sink@example.com\r\n"
				"Subject: smtp-blast\r\n\r\n");
	while (len + 80 < g.size) {
		memset(b + len, 'x', 76);
		len += 76;
		memcpy(b + len, "\r\n", 2);
		len += 2;
	}
	g.content_len = len;
	memcpy(b + len, ".\r\n", 3);
	g.body = b;
	g.body_len = len + 3;
}

/* by_value - qsort comparator for doubles */
static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	pthread_t *threads;
	char *colon;
	double t0, secs;
	int ch;

	while ((ch = getopt(argc, argv, "Bc:d:n:s:o:m:")) != -1) {
		switch (ch) {
		case 'B':
			g.bdat = 1;
			break;
		case 'c':
			g.sessions = atoi(optarg);
			break;
		case 'd':
			g.domain = optarg;
			break;
		case 'n':
			g.messages = atol(optarg);
			break;
		case 's':
			g.size = (size_t)atol(optarg);
			break;
		case 'o':
			if ((g.acked = fopen(optarg, "a")) == NULL) {
				perror(optarg);
				return 2;
			}
			break;
		case 'm':
			if ((g.ids = fopen(optarg, "a")) == NULL) {
				perror(optarg);
				return 2;
			}
			break;
		default:
			goto usage;
		}
	}
	if (optind + 1 != argc || (colon = strrchr(argv[optind], ':')) == NULL || g.sessions < 1)
		goto usage;
	*colon = '\0';
	g.addr.sin_family = AF_INET;
	g.addr.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, argv[optind], &g.addr.sin_addr) != 1)
		goto usage;
	make_body();
	g.lat = calloc((size_t)g.messages + 1, sizeof(double));
	threads = calloc((size_t)g.sessions, sizeof(*threads));
	t0 = now();
	for (int i = 0; i < g.sessions; i++)
		pthread_create(&threads[i], NULL, session, NULL);
	for (int i = 0; i < g.sessions; i++)
		pthread_join(threads[i], NULL);
	secs = now() - t0;
	qsort(g.lat, (size_t)g.ok, sizeof(double), by_value);
	printf("messages=%ld accepted=%ld failed=%ld seconds=%.3f rate=%.1f p50_ms=%.3f p99_ms=%.3f\n",
	       g.messages, g.ok, g.failed, secs, (double)g.ok / secs,
	       g.ok ? g.lat[g.ok / 2] * 1000 : 0, g.ok ? g.lat[(size_t)((double)g.ok * 0.99)] * 1000 : 0);
	free(threads);
	free(g.lat);
	free(g.body);
	return g.failed ? 1 : 0;
usage:
	fprintf(stderr, "usage: smtp-blast [-B] [-c sessions] [-d domain] [-n messages] [-s size] "
		"[-o acked.log] [-m ids.log] HOST:PORT\n");
	return 2;
}
