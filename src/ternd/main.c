/*
 * ternd - startup, signals and shutdown of the delivery agent.
 *
 * As root: load the configuration, create (or check) the state, spool and
 * run directories, open the listeners and the control socket. Then drop
 * to the tern user, open the queue database and the spool (so their
 * files belong to that user), recover, and start the threads; then tell
 * the service manager (READY=1, notify.h). The main thread then only
 * waits for signals (blocked from the first line of main(), so that one
 * sent while we start is taken once we have started): SIGTERM/SIGINT
 * drain and stop, SIGHUP (and SIGUSR1) reload, between RELOADING=1 and
 * READY=1; SIGUSR2 reopens log_file; and at most once a second it
 * updates the STATUS= line with the queue size, when that changed, and
 * gives the heap back to the kernel after a load of sessions ended
 * (give_back).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "cli.h"
#include "commit.h"
#include "compact.h"
#include "control.h"
#include "fiber.h"
#include "fds.h"
#include "listen.h"
#include "log.h"
#include "metrics_std.h"
#include "notify.h"
#include "pidfile.h"
#include "privs.h"
#include "recover.h"
#include "relay.h"
#include "sched.h"
#include "session.h"
#include "spanfile.h"
#include "stats.h"
#include "storage.h"
#include "ternd.h"
#include "trace_trust.h"
#include "xalloc.h"

struct ternd ternd;

/* Configurations replaced by SIGHUP stay allocated until exit: sessions
 * and delivery threads may still read them, and a reload is rare. */
static struct conf **retired;
static size_t nretired;

static int pid_fd = -1;
static char pid_path[512];

/* lock_pid_file - one ternd per run directory: lock RUN_DIR/ternd.pid,
 * opened as the tern user (RUN_DIR is its), a regular file with one name */
static void lock_pid_file(void)
{
	char err[600];
	struct privs_fs fs;

	snprintf(pid_path, sizeof(pid_path), "%s/ternd.pid", ternd.conf->global.run_dir);
	if (privs_fs_enter(&fs, ternd.uid, ternd.gid, 022) < 0)
		log_fatal("%s: cannot take the tern user's identity: %s", pid_path, strerror(errno));
	pid_fd = pidfile_lock(pid_path, err, sizeof(err));
	privs_fs_leave(&fs);
	if (pid_fd < 0 && errno == EWOULDBLOCK)
		log_fatal_status(1, "another ternd is running (%s)", err);
	if (pid_fd < 0)
		log_fatal("pid file %s", err);
}

/* own_dirs - STATE_DIR and SPOOL_DIR (privs_own_queue_dir); RUN_DIR
 * 0755, since its sockets carry their own modes */
static void own_dirs(const struct conf_global *g)
{
	const char *dirs[2] = {g->state_dir, g->spool_dir};
	char err[1024];

	for (int i = 0; i < 2; i++) {
		int rc = privs_own_queue_dir(dirs[i], ternd.uid, ternd.gid, ternd.admin,
					     ternd.admin_gid, err, sizeof(err));

		if (rc < 0)
			log_fatal("%s", err);
		if (rc == 1)
			log_warning("%s", err);
	}
	if (privs_own_dir(g->run_dir, ternd.uid, ternd.gid, 0755, 1, err, sizeof(err)) < 0)
		log_fatal("%s", err);
}

/* write_pid - our pid into the locked pid file (after detaching) */
static void write_pid(void)
{
	if (pidfile_write(pid_fd) < 0)
		log_warning("cannot write the pid file: %s", strerror(errno));
}

/* route_warning - a conf_route_check finding, in the log (at start and
 * after a reload) */
static void route_warning(const char *msg, void *arg)
{
	(void)arg;
	log_warning("%s", msg);
}

/* check_conf - ternd -n: what the configuration cannot do (routes to
 * nowhere, more sessions than descriptors, a storage reserve out of
 * proportion to the spool), on the standard error */
static void check_conf(const struct conf *conf, void (*warn)(const char *msg, void *arg), void *arg)
{
	conf_route_check(conf, warn, arg);
	fds_check(conf, warn, arg);
	storage_check(conf, warn, arg);
}

/* reload - SIGHUP: new routes, limits and peers; listeners need a
 * restart. 0, or -1 when the running configuration stays */
static int reload(const char *path)
{
	struct conf *conf, *old;
	char err[1024];

	if ((conf = conf_load(path, err, sizeof(err))) == NULL) {
		log_error("reload failed, keeping the running configuration: %s", err);
		metrics_std_reloaded(0);
		notify_status("reload failed, running the previous configuration: %s", err);
		return -1;
	}
	if (strcmp(conf->ternd.lmtp_listen, ternd.conf->ternd.lmtp_listen) != 0
	    || strcmp(conf->ternd.smtp_listen, ternd.conf->ternd.smtp_listen) != 0)
		log_warning("listener changes take a restart");
	old = ternd.conf;
	__atomic_store_n(&ternd.conf, conf, __ATOMIC_RELEASE);
	retired = xreallocarray(retired, nretired + 1, sizeof(*retired));
	retired[nretired++] = old;
	relay_reload(conf);
	fds_reload(conf);	/* the peers' max_connections */
	trace_trust_load(conf, 1);
	metrics_std_reloaded(1);
	log_info("configuration reloaded from %s", path);
	conf_route_check(conf, route_warning, NULL);
	return 0;
}

/* queue_status - STATUS= for the service manager: the queue size, when
 * it changed since the last one (the caller bounds how often) */
static void queue_status(int force)
{
	static uint64_t shown = UINT64_MAX;
	uint64_t n = stats_queued();

	if (n == shown && !force)
		return;
	shown = n;
	notify_status("queue: %llu message%s", (unsigned long long)n, n == 1 ? "" : "s");
}

/* give_back - once a second: when the inbound sessions fell to half the
 * most seen since the last time (and by GIVE_BACK_MIN at least), hand the
 * heap their buffers left free back to the kernel, and the stacks kept
 * for the next sessions (fiber_give_back); and once more GIVE_BACK_AGAIN
 * seconds later, for what the loops freed after. glibc returns only the
 * top of an arena by itself; after a flood of connections the free
 * chunks below it stayed resident (207 MB after 10,000, issue 36) */
#define GIVE_BACK_MIN 64
#define GIVE_BACK_AGAIN 5
static void give_back(void)
{
	static int most, again;
	int now;

	now = listen_sessions();
	if (now > most) {
		most = now;
		return;
	}
	if (most - now >= GIVE_BACK_MIN && now <= most / 2) {
		most = now;
		again = GIVE_BACK_AGAIN;
	} else if (again == 0 || --again > 0) {
		return;
	}
	fiber_give_back();
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* drain - SIGTERM: stop accepting, let sessions finish (bounded), stop;
 * returns how many sessions are still running */
static int drain(void)
{
	int left;

	log_info("stopping: no new sessions");
	commit_draining();
	listen_stop();
	if ((left = listen_wait(10000)) > 0)
		log_warning("stopping with %d session%s open: their messages were not acknowledged",
			    left, left == 1 ? "" : "s");
	relay_stop();
	spanfile_stop();	/* after the last attempt */
	commit_stop();
	stats_stop();
	return left;
}

/* usage - print usage and exit with status: 0 (--help) on the standard
 * output, else on the standard error */
static void __attribute__((noreturn)) usage(int status)
{
	fprintf(status ? stderr : stdout, "usage: ternd [-dfnvV] [-c FILE]\n"
		"  -c FILE  configuration file (default " CONF_DEFAULT_PATH ")\n"
		"  -d       print every parameter with its default and exit\n"
		"  -n       print the parameters the file sets and exit\n"
		"  -f       stay in the foreground and log to stderr too\n"
		"  -v       verbose logging\n"
		"  -V, --version  print the version and exit\n"
		"  -h, --help     print this and exit\n");
	exit(status);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {CLI_LONG_OPTS, {NULL, 0, NULL, 0}};
	struct cli cli;
	const struct conf_global *g;
	char err[1024];
	sigset_t set;
	int ch, sig, left;

	closefrom(3);	/* what the caller left open is not ours: ternd(8) */
	/* Before anything is opened: SIGHUP, SIGUSR1 (reload), SIGUSR2
	 * (reopen log_file), SIGTERM and SIGINT sent while we start wait for
	 * the loop below instead of killing us. */
	privs_signals_block(&set);
#ifdef __GLIBC__
	/* Fixed thresholds: glibc raises them by itself each time a large
	 * block is freed (up to 32 MB and 64 MB), and then it no longer
	 * shrinks the top of a thread's arena, which malloc_trim leaves
	 * alone too: after a flood up to 7.5 MB stayed in one (give_back) */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
#endif
	log_init(argv[0], "ternd");
	cli_init(&cli);
	cli.check = check_conf;	/* -n: and the unroutable domains, the descriptors, the reserve */
	while ((ch = getopt_long(argc, argv, CLI_COMMON_OPTS "Vh", longopts, NULL)) != -1) {
		if (cli_option(&cli, ch, optarg))
			continue;
		if (ch == 'V')
			cli_version();
		usage(ch == 'h' ? 0 : 2);
	}
	if (optind != argc)
		usage(2);
	if (sodium_init() < 0)
		log_fatal("cannot initialize libsodium");
	ternd.conf = cli_load_conf(&cli);
	g = &ternd.conf->global;
	log_open(g->syslog_name, 1, cli.verbose);
	if (g->log_file[0] && log_file_open(g->log_file, g->user, err, sizeof(err)) < 0)
		log_fatal("%s", err);
	ternd.hostname = conf_hostname(ternd.conf);
	conf_route_check(ternd.conf, route_warning, NULL);

	/* As root: relay peers' TLS contexts, client keys, AUTH passwords,
	 * the trace key. */
	relay_prepare();
	trace_trust_load(ternd.conf, 0);
	/* As root: who is who, directories, sockets. */
	if (geteuid() == 0) {
		if (privs_lookup(g->user, &ternd.uid, &ternd.gid, err, sizeof(err)) < 0)
			log_fatal_status(2, "%s", err);
	} else {
		ternd.uid = geteuid();
		ternd.gid = getegid();
	}
	ternd.lmtp_gid = ternd.gid;
	if (ternd.conf->ternd.lmtp_socket_group[0]
	    && privs_group(ternd.conf->ternd.lmtp_socket_group, &ternd.lmtp_gid, err, sizeof(err)) < 0)
		log_fatal_status(2, "lmtp_socket_group: %s", err);
	if (g->admin_group[0]) {
		if (privs_group(g->admin_group, &ternd.admin_gid, err, sizeof(err)) < 0)
			log_fatal_status(2, "admin_group: %s", err);
		if (ternd.admin_gid == ternd.lmtp_gid && ternd.conf->ternd.lmtp_listen[0])
			log_fatal_status(2, "admin_group and lmtp_socket_group are both \"%s\": the "
					 "MTA's group would administer the queue", g->admin_group);
		ternd.admin = 1;
	}
	own_dirs(g);
	lock_pid_file();
	listen_setup();
	control_setup();
	spanfile_open(ternd.conf);
	if (!cli.foreground) {
		if (privs_daemonize(err, sizeof(err)) < 0)
			log_fatal("%s", err);
		log_open(g->syslog_name, 0, cli.verbose);
	}
	if (privs_drop(g->user, err, sizeof(err)) < 0)
		log_fatal("%s", err);
	/* Files: 0600, or 0640 to admin_group (through the directories' set
	 * group id); LMDB's lock file 0660 then (store_lock_share). */
	umask(ternd.admin ? 027 : 077);

	/* As the tern user: the queue, locked for this process's life so that
	 * ternq never writes it behind our back (see ternq's direct mode). */
	{
		char path[4096];
		int lock_fd;

		snprintf(path, sizeof(path), "%s/ternd.lock", g->state_dir);
		if ((lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0
		    || flock(lock_fd, LOCK_EX | LOCK_NB) < 0)
			log_fatal("%s: %s", path, errno == EWOULDBLOCK
				  ? "another ternd (or ternq) is using this state_dir" : strerror(errno));

		snprintf(path, sizeof(path), "%s/queue", g->state_dir);
		if ((ternd.store = store_open(path, 0, (size_t)ternd.conf->ternd.queue_map_size, err, sizeof(err))) == NULL)
			log_fatal("%s", err);
		if (store_rebuilt(ternd.store) > 0)
			log_info("queue database: schedule rebuilt from the recipient records (%llu "
				 "recipients): an older layout, or per-peer counts that did not add "
				 "up", (unsigned long long)store_rebuilt(ternd.store));
	}
	if ((ternd.spool = spool_open(g->spool_dir, ternd.conf->ternd.segment_size, err,
				      sizeof(err))) == NULL)
		log_fatal("%s", err);
	if (recover(err, sizeof(err)) < 0)
		log_fatal("recovery failed: %s", err);
	write_pid();
	stats_init(ternd.conf);
	storage_init();		/* the layers' own metrics */
	compact_metrics();
	commit_on_ready(sched_kick);	/* the queue core tells the scheduler */

	/* metrics_listen: after the privilege drop (an unprivileged port); its
	 * thread inherits the signal mask, as every thread does */
	stats_start(ternd.conf);
	commit_start();
	spanfile_start();
	relay_start();
	control_start();
	fds_start(ternd.conf);	/* what ternd opens at start is open: sessions get the rest */
	listen_start();
	log_info("started: lmtp %s, smtp %s", ternd.conf->ternd.lmtp_listen[0]
		 ? ternd.conf->ternd.lmtp_listen : "off",
		 ternd.conf->ternd.smtp_listen[0] ? ternd.conf->ternd.smtp_listen : "off");
	queue_status(1);
	notify_ready();
	for (;;) {
		struct timespec second = {1, 0};

		if ((sig = sigtimedwait(&set, NULL, &second)) < 0) {
			queue_status(0);	/* EAGAIN: a second passed (or EINTR) */
			give_back();
			continue;
		}
		if (sig == SIGHUP || sig == SIGUSR1) {
			notify_reloading();
			if (reload(cli.conf_path) == 0)
				queue_status(1);	/* no "reload failed" left */
			notify_ready();
			continue;
		}
		if (sig == SIGUSR2) {
			log_file_reopen();
			continue;
		}
		break;
	}
	notify_stopping();
	left = drain();
	/* a clean stop leaves nothing in RUN_DIR (the sockets went in drain) */
	control_remove();
	pidfile_remove(pid_path, &pid_fd);
	if (left > 0) {
		/* Sessions still run: exit without freeing what they use. */
		log_info("stopped");
		_exit(0);
	}
	spool_close(&ternd.spool);
	store_close(&ternd.store);
	for (size_t i = 0; i < nretired; i++)
		conf_free(&retired[i]);
	free(retired);
	conf_free(&ternd.conf);
	trace_trust_free();
	log_info("stopped");
	return 0;
}
