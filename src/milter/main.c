/*
 * tern-milter - startup, signals and configuration reload.
 *
 * Order matters: load the configuration and the trace key as root, open
 * the milter socket (so errors show at start), detach, drop privileges,
 * then start threads, and tell the service manager (READY=1, notify.h)
 * just before smfi_main(): the socket listens already, so a connection
 * made from then on waits in its backlog. libmilter's own signal thread
 * turns SIGTERM, SIGHUP and SIGINT into a stop; SIGUSR1 reloads, from our
 * sigwait() thread, between RELOADING=1 and READY=1. All of them are
 * blocked before anything else, so that one sent while we start is taken
 * once we have started; our thread starts last, since a reload frees the
 * configuration the start reads.
 * smfi_main() returns without joining sessions, so shared state is only
 * freed once the last session has closed (or never, if stop_timeout runs
 * out first: the process exits anyway).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "cli.h"
#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "metrics_std.h"
#include "notify.h"
#include "milter.h"
#include "pidfile.h"
#include "privs.h"
#include "xalloc.h"

#define MILTER_THREAD_STACK (512 * 1024)

static pthread_mutex_t milter_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t milter_idle = PTHREAD_COND_INITIALIZER;
static struct milter_cfg *milter_current;
static int milter_sessions;
static const char *conf_path;
static int pid_fd = -1;
static char pid_path[512];

/* milter_cfg_get - take a reference to the current configuration */
struct milter_cfg *milter_cfg_get(void)
{
	struct milter_cfg *cfg;

	pthread_mutex_lock(&milter_lock);
	cfg = milter_current;
	cfg->refs++;
	pthread_mutex_unlock(&milter_lock);
	return cfg;
}

/* milter_cfg_free - release a configuration generation */
static void milter_cfg_free(struct milter_cfg *cfg)
{
	conf_free(&cfg->conf);
	trace_keys_free(&cfg->keys);
	free(cfg);
}

/* milter_cfg_put - drop a reference; the last one frees */
void milter_cfg_put(struct milter_cfg **cfgp)
{
	struct milter_cfg *cfg = *cfgp;
	int last;

	if (cfg == NULL)
		return;
	pthread_mutex_lock(&milter_lock);
	last = --cfg->refs == 0;
	pthread_mutex_unlock(&milter_lock);
	if (last)
		milter_cfg_free(cfg);
	*cfgp = NULL;
}

/* milter_session_count - track open sessions for a clean stop */
void milter_session_count(int delta)
{
	pthread_mutex_lock(&milter_lock);
	milter_sessions += delta;
	if (milter_sessions == 0)
		pthread_cond_broadcast(&milter_idle);
	pthread_mutex_unlock(&milter_lock);
}

/* milter_cfg_load - a configuration generation from a loaded conf; was
 * is the generation it replaces (NULL at start), whose key verifies
 * after a change of key (trace_keys_load) */
static struct milter_cfg *milter_cfg_load(struct conf *conf, const struct milter_cfg *was,
					  char *err, size_t errlen)
{
	struct milter_cfg *cfg = xcalloc(1, sizeof(*cfg));

	cfg->refs = 1;
	cfg->conf = conf;
	if (conf->milter.trace
	    && trace_keys_load(&cfg->keys, was ? &was->keys : NULL, conf->global.trace_key_file,
			       err, errlen) < 0) {
		milter_cfg_free(cfg);
		return NULL;
	}
	return cfg;
}

/* reload - SIGUSR1: swap in a new configuration, or keep the old one */
static void reload(void)
{
	struct milter_cfg *cfg, *old;
	struct conf *conf;
	char err[1024];

	if ((conf = conf_load(conf_path, err, sizeof(err))) == NULL
	    || (cfg = milter_cfg_load(conf, milter_current, err, sizeof(err))) == NULL) {
		log_error("reload failed, keeping the running configuration: %s", err);
		metrics_std_reloaded(0);
		notify_status("reload failed, running the previous configuration: %s", err);
		return;
	}
	if (strcmp(cfg->conf->milter.listen, milter_current->conf->milter.listen) != 0)
		log_warning("listen changed to %s: that takes a restart", cfg->conf->milter.listen);
	pthread_mutex_lock(&milter_lock);
	old = milter_current;
	milter_current = cfg;
	pthread_mutex_unlock(&milter_lock);
	milter_cfg_put(&old);
	metrics_std_reloaded(1);
	notify_status("listening on %s", cfg->conf->milter.listen);
	log_info("configuration reloaded from %s", conf_path);
}

/* signal_thread - wait for SIGUSR1 and reload, SIGUSR2 and reopen log_file */
static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (sig == SIGUSR1) {
			notify_reloading();
			reload();
			notify_ready();
		} else if (sig == SIGUSR2) {
			log_file_reopen();
		}
	}
	return NULL;
}

/* wait_for_sessions - after smfi_main(): give sessions stop_timeout to end */
static int wait_for_sessions(long long timeout_ms)
{
	struct timespec deadline;
	int left;

	clock_deadline(&deadline, timeout_ms);
	pthread_mutex_lock(&milter_lock);
	while (milter_sessions > 0)
		if (clock_cond_wait(&milter_idle, &milter_lock, &deadline) == ETIMEDOUT)
			break;
	left = milter_sessions;
	pthread_mutex_unlock(&milter_lock);
	return left;
}

/*
 * nodelay_listeners - TCP_NODELAY on libmilter's listening socket (Linux
 * passes it on to accepted connections). libmilter writes a reply and
 * header changes as separate small packets; with Nagle's algorithm each
 * waits for the MTA's delayed ACK, about 40 ms per message (measured:
 * bench/RESULTS.md). libmilter does not expose the socket, so find it.
 */
static void nodelay_listeners(void)
{
	for (int fd = 3; fd < 256; fd++) {
		int listening = 0, one = 1;
		socklen_t len = sizeof(listening);
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);

		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening)
			continue;
		if (getsockname(fd, (struct sockaddr *)&ss, &sslen) < 0
		    || (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
			continue;
		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
			log_warning("cannot set TCP_NODELAY on the milter socket: %s", strerror(errno));
	}
}

/*
 * small_stacks - the default stack of threads made from now on.
 * libmilter starts a thread per MTA connection with default attributes,
 * and glibc's default stack (RLIMIT_STACK, 8 MB here) fills its cache of
 * stacks (40 MB) with five of them: every further connection mapped,
 * guarded and unmapped a stack of its own (measured with strace -c: one
 * mmap/mprotect/munmap per message under 20 connections; bench/RESULTS.md,
 * issue 17). The callbacks' deepest frames (tm_eom, log lines, libsodium,
 * LMDB in the journal thread) use tens of KB.
 */
static void small_stacks(void)
{
	pthread_attr_t attr;
	int rc;

	if ((rc = pthread_attr_init(&attr)) != 0)
		goto fail;
	if ((rc = pthread_attr_setstacksize(&attr, MILTER_THREAD_STACK)) == 0)
		rc = pthread_setattr_default_np(&attr);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		return;
fail:
	log_warning("cannot set the threads' stack size: %s", strerror(rc));
}

/* open_socket - libmilter's socket; a unix one is made, stale one removed,
 * by the run-time user with mode 0660 and socket_group (privs_fs_enter):
 * root never touches a name in a directory that user can write */
static void open_socket(const struct conf *conf, uid_t uid, gid_t gid)
{
	const char *listen = conf->milter.listen;
	struct privs_fs fs;
	gid_t sgid = gid;
	char err[512];
	int rc;

	if (conf->milter.socket_group[0] && privs_group(conf->milter.socket_group, &sgid, err,
							 sizeof(err)) < 0)
		log_fatal_status(2, "socket_group: %s", err);
	if (privs_fs_enter(&fs, uid, sgid, 0117) < 0)
		log_fatal("cannot take the identity of uid %u: %s", (unsigned)uid, strerror(errno));
	rc = smfi_opensocket(1);
	privs_fs_leave(&fs);
	if (rc == MI_FAILURE)
		log_fatal("cannot listen on %s (in use? bad address? permissions? a unix socket is "
			  "made as the tern user: its directory must be writable by it)", listen);
	/* Not root: our own socket, in a group we are in; no privilege used. */
	if (!fs.active && sgid != getegid()) {
		const char *path = strncmp(listen, "unix:", 5) == 0 ? listen + 5
			: strncmp(listen, "local:", 6) == 0 ? listen + 6 : NULL;

		if (path && lchown(path, (uid_t)-1, sgid) < 0)
			log_fatal("%s: cannot give it to group %u: %s", path, (unsigned)sgid,
				  strerror(errno));
	}
}

/* pid_file_open - as the tern user, once detached: RUN_DIR/tern-milter.pid,
 * locked for our life (pidfile.h), for contrib/logrotate/tern; none when
 * RUN_DIR does not exist (an inet listener needs none) or another
 * tern-milter has it, which is said */
static void pid_file_open(const struct conf *conf)
{
	char err[600];

	snprintf(pid_path, sizeof(pid_path), "%s/tern-milter.pid", conf->global.run_dir);
	if ((pid_fd = pidfile_lock(pid_path, err, sizeof(err))) < 0) {
		if (errno == EWOULDBLOCK)
			log_warning("no pid file: another tern-milter has it (%s)", err);
		else if (access(conf->global.run_dir, F_OK) == 0)
			log_warning("no pid file: %s", err);
		return;
	}
	if (pidfile_write(pid_fd) < 0)
		log_warning("cannot write the pid file %s: %s", pid_path, strerror(errno));
}

/* usage - print usage and exit with status: 0 (--help) on the standard
 * output, else on the standard error */
static void __attribute__((noreturn)) usage(int status)
{
	fprintf(status ? stderr : stdout, "usage: tern-milter [-dfnvV] [-c FILE] [-K FILE]\n"
		"  -c FILE  configuration file (default " CONF_DEFAULT_PATH ")\n"
		"  -d       print every parameter with its default and exit\n"
		"  -n       print the parameters the file sets and exit\n"
		"  -f       stay in the foreground and log to stderr too\n"
		"  -v       verbose logging\n"
		"  -K FILE  create a new trace signing key in FILE (mode 0600) and exit\n"
		"  -V, --version  print the version and exit\n"
		"  -h, --help     print this and exit\n");
	exit(status);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {CLI_LONG_OPTS, {NULL, 0, NULL, 0}};
	struct cli cli;
	struct conf *conf;
	const struct conf_milter *m;
	struct metrics_server *metrics = NULL;
	char err[1024];
	sigset_t set;
	static sigset_t usr1;
	pthread_t tid;
	long long stop_timeout;
	uid_t uid;
	gid_t gid;
	int ch, rc, left;

	closefrom(3);	/* what the caller left open is not ours: tern-milter(8) */
	/* Before anything is opened: a SIGUSR1 sent once the socket exists
	 * waits for our signal thread (a reload) instead of killing us. */
	privs_signals_block(&set);
	log_init(argv[0], "milter");
	cli_init(&cli);
	while ((ch = getopt_long(argc, argv, CLI_COMMON_OPTS "K:Vh", longopts, NULL)) != -1) {
		if (cli_option(&cli, ch, optarg))
			continue;
		if (ch == 'K') {
			if (sodium_init() < 0)
				log_fatal("cannot initialize libsodium");
			if (trace_key_create(optarg, err, sizeof(err)) < 0)
				log_fatal("%s", err);
			return 0;
		}
		if (ch == 'V')
			cli_version();
		usage(ch == 'h' ? 0 : 2);
	}
	if (optind != argc)
		usage(2);
	if (sodium_init() < 0)
		log_fatal("cannot initialize libsodium");
	conf_path = cli.conf_path;
	conf = cli_load_conf(&cli);
	if ((milter_current = milter_cfg_load(conf, NULL, err, sizeof(err))) == NULL)
		log_fatal_status(2, "%s", err);
	m = &conf->milter;
	/* stderr too until detached: startup errors must reach the admin. */
	log_open(conf->global.syslog_name, 1, cli.verbose);
	if (conf->global.log_file[0]
	    && log_file_open(conf->global.log_file, conf->global.user, err, sizeof(err)) < 0)
		log_fatal("%s", err);

	if (smfi_setconn((char *)m->listen) == MI_FAILURE)
		log_fatal("bad listen address \"%s\"", m->listen);
	if (smfi_settimeout((int)((m->timeout + 999) / 1000)) == MI_FAILURE
	    || smfi_register(milter_desc) == MI_FAILURE)
		log_fatal("cannot register with libmilter");
	/* libmilter drops a connection on a packet over 64 KB, but Postfix
	 * sends a header field of up to header_size_limit (100 KB) in one:
	 * take it, so that max_header_size decides, not a dropped session. */
	smfi_setmaxdatasize(256 * 1024);
	if (geteuid() == 0) {
		if (privs_lookup(conf->global.user, &uid, &gid, err, sizeof(err)) < 0)
			log_fatal_status(2, "%s", err);
	} else {
		uid = geteuid();
		gid = getegid();
	}
	open_socket(conf, uid, gid);
	nodelay_listeners();

	if (!cli.foreground) {
		if (privs_daemonize(err, sizeof(err)) < 0)
			log_fatal("%s", err);
		log_open(conf->global.syslog_name, 0, cli.verbose);
	}
	{
		/* STATE_DIR holds the journal: shared with ternd, owned by tern */
		gid_t admin_gid = 0;
		int admin = conf->global.admin_group[0] != '\0';

		if (admin && privs_group(conf->global.admin_group, &admin_gid, err, sizeof(err)) < 0)
			log_fatal_status(2, "admin_group: %s", err);
		if ((rc = privs_own_queue_dir(conf->global.state_dir, uid, gid, admin, admin_gid, err,
					      sizeof(err))) != 0)
			log_warning("%s%s", err, rc < 0 ? "; messages are not journaled" : "");
		umask(admin ? 027 : 077);
	}
	if (privs_drop(conf->global.user, err, sizeof(err)) < 0)
		log_fatal("%s", err);
	pid_file_open(conf);

	small_stacks();		/* before the first thread */
	/* metrics_listen: after the privilege drop (an unprivileged port);
	 * its thread, as the journal's, inherits the signal mask */
	milter_metrics_init();
	if (m->metrics_listen[0] && (metrics = metrics_serve(m->metrics_listen, err, sizeof(err))) == NULL)
		log_fatal("%s", err);
	journal_start(conf);

	log_info("starting on %s (trace %s, metrics %s)", m->listen, m->trace ? "on" : "off",
		 m->metrics_listen[0] ? m->metrics_listen : "off");
	notify_status("listening on %s", m->listen);
	notify_ready();
	/*
	 * Our signal thread last: a reload frees the configuration it
	 * replaces, conf and m above, and a SIGUSR1 sent while we started
	 * is pending, so the thread reloads at once. It waits for SIGUSR1
	 * and SIGUSR2 only; the stop signals, blocked since main() began,
	 * are taken by libmilter's own signal thread (started by
	 * smfi_main), the only one that may take them.
	 */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigaddset(&usr1, SIGUSR2);
	if (pthread_create(&tid, NULL, signal_thread, &usr1) != 0)
		log_fatal("cannot start the signal thread");
	pthread_detach(tid);
	rc = smfi_main();
	notify_stopping();
	pthread_mutex_lock(&milter_lock);
	stop_timeout = milter_current->conf->milter.stop_timeout;
	pthread_mutex_unlock(&milter_lock);
	left = wait_for_sessions(stop_timeout);
	metrics_server_stop(&metrics);
	journal_stop();		/* late callbacks find it stopped and skip it */
	pidfile_remove(pid_path, &pid_fd);
	if (left > 0) {
		log_warning("stopping with %d session%s still open", left, left == 1 ? "" : "s");
	} else {
		log_info("stopped");
		milter_cfg_put(&milter_current);
	}
	return rc == MI_SUCCESS ? 0 : 1;
}
