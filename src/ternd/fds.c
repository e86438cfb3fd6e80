/*
 * fds - ternd's file descriptor budget. At start the soft RLIMIT_NOFILE
 * is raised to the hard one. Out of it a reserve is kept that inbound
 * sessions never take: two descriptors per connection every peer may
 * open (max_connections: the socket, and the spool file the body is sent
 * from), the control socket's clients, the metrics endpoint's, and
 * FDS_SPARE for the store, the log and DNS. What is left, less what is
 * open once ternd has started, is shared by the listeners, each session
 * counted at FDS_PER_SESSION; a listener at its share refuses with 421
 * 4.3.2 at once (listen.c), so that a flood of connections never starves
 * accept(2) of the other listener, the relay of its sockets or the store
 * of its files.
 *
 * It must never refuse work of the relay or the store: those are the
 * reserve, not the budget. fds_check (ternd -n) warns when the
 * configuration cannot fit the limit.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>

#include "fds.h"
#include "log.h"

#define CONTROL_FDS 9		/* the socket and CONTROL_CLIENTS (control.c) */
#define METRICS_FDS 9		/* the listener and METRICS_HTTP_CONNECTIONS */

static long long limit = 1024, open_at_start, sessions_max = -1;	/* -1: before fds_start */
static int listeners = 1;

/* fds_budget - the budget for conf with limit descriptors, open_now of
 * them taken, and nlisteners listeners */
void fds_budget(const struct conf *conf, long long lim, long long open_now, int nlisteners,
		struct fds_budget *b)
{
	long long share;

	b->limit = lim;
	b->reserve = FDS_SPARE + CONTROL_FDS + METRICS_FDS;
	for (size_t i = 0; i < conf->npeers; i++)
		b->reserve += FDS_PER_PEER_CONN * conf->peers[i].max_connections;
	if (nlisteners < 1)
		nlisteners = 1;
	share = (lim - open_now - b->reserve) / nlisteners / FDS_PER_SESSION;
	b->per_listener = share < 0 ? 0 : share;
	b->needed = open_now + b->reserve
		+ (long long)nlisteners * FDS_PER_SESSION * conf->ternd.max_inbound_sessions;
}

/* nlisteners_of - how many listeners conf turns on */
static int nlisteners_of(const struct conf *conf)
{
	return (conf->ternd.lmtp_listen[0] != '\0') + (conf->ternd.smtp_listen[0] != '\0');
}

/* describe - the warning when b cannot fit max_inbound_sessions */
static int describe(const struct conf *conf, const struct fds_budget *b, int n, char *buf,
		    size_t len)
{
	long long conns = 0;

	if (b->needed <= b->limit)
		return 0;
	for (size_t i = 0; i < conf->npeers; i++)
		conns += conf->peers[i].max_connections;
	snprintf(buf, len, "max_inbound_sessions (%lld on each of %d listener%s) and the peers' "
		 "%lld connections need %lld file descriptors with the reserve, more than the "
		 "limit of %lld: beyond %lld sessions a listener answers 421 4.3.2 (raise the "
		 "hard limit, e.g. LimitNOFILE= in the unit, or lower max_inbound_sessions)",
		 conf->ternd.max_inbound_sessions, n, n == 1 ? "" : "s", conns, b->needed, b->limit,
		 b->per_listener);
	return 1;
}

/* hard_limit - the hard RLIMIT_NOFILE, which ternd raises its soft one to */
static long long hard_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	return rl.rlim_max == RLIM_INFINITY ? (1LL << 20) : (long long)rl.rlim_max;
}

/* fds_check - ternd -n: warn when conf cannot fit the limit this
 * process would run under (the hard limit; the descriptors open at start
 * counted as the listeners and the control socket) */
void fds_check(const struct conf *conf, void (*warn)(const char *msg, void *arg), void *arg)
{
	struct fds_budget b;
	char msg[512];
	int n = nlisteners_of(conf);

	fds_budget(conf, hard_limit(), 3 + n + 1, n, &b);
	if (describe(conf, &b, n, msg, sizeof(msg)))
		warn(msg, arg);
}

/* count_open - descriptors open now */
static long long count_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	long long n = 0;

	if (d == NULL)
		return 64;	/* a guess on the safe side */
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n - 3;	/* ".", ".." and the directory's own */
}

/* fds_start - raise the soft limit to the hard one and set the budget
 * (main, once the listeners, the control socket and the store are open,
 * before any session) */
void fds_start(const struct conf *conf)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != rl.rlim_max) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			rl.rlim_cur = was;
	}
	limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
		? (long long)rl.rlim_cur : (1LL << 20);
	listeners = nlisteners_of(conf);
	open_at_start = count_open();
	fds_reload(conf);
}

/* fds_reload - the budget for conf (its peers' max_connections), logged
 * when it changes, with a warning when max_inbound_sessions cannot fit */
void fds_reload(const struct conf *conf)
{
	struct fds_budget b;
	char msg[512];

	fds_budget(conf, limit, open_at_start, listeners, &b);
	if (b.per_listener != __atomic_load_n(&sessions_max, __ATOMIC_RELAXED))
		log_info("file descriptors: limit %lld, %lld open at start, %lld kept for the relay, "
			 "the store and the control socket: at most %lld sessions per listener",
			 b.limit, open_at_start, b.reserve, b.per_listener);
	if (describe(conf, &b, listeners, msg, sizeof(msg)))
		log_warning("%s", msg);
	__atomic_store_n(&sessions_max, b.per_listener, __ATOMIC_RELAXED);
}

/* fds_sessions_max - the sessions a listener may hold (any thread) */
long long fds_sessions_max(void)
{
	long long n = __atomic_load_n(&sessions_max, __ATOMIC_RELAXED);

	return n < 0 ? (1LL << 62) : n;
}
