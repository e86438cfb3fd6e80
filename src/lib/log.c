/*
 * log - syslog (facility mail) and, in the foreground, stderr.
 *
 * Under systemd, stderr is often the journal, which also receives
 * syslog: when $JOURNAL_STREAM names stderr's device and inode (see
 * systemd.exec(5)), lines go to syslog only, so each is logged once. A
 * fatal line goes to stderr too: journald ties a syslog line to its unit
 * by the sender's cgroup, which a process that has just exited no longer
 * has, so without the stderr copy "systemctl status" could miss the
 * reason it stopped.
 *
 * Every line is escaped whole (textesc, TEXTESC_LINE) before it goes
 * anywhere: a control octet or ill-formed UTF-8 from mail reaches neither
 * syslog(3) (which passes octets on as they are; what the daemon then
 * does differs: rsyslog writes controls as "#033" but keeps ill-formed
 * UTF-8, journald keeps the line as a binary blob), nor log_file, nor
 * stderr, and a newline in it cannot start a forged line. Callers escape addresses and replies with the field flags first
 * (ternd(8), LOGGING); what they escaped passes this second escape
 * unchanged.
 *
 * Without a /dev/log, syslog lines are not attempted (syslog_present).
 *
 * Must never allocate: it is what xalloc calls when memory runs out.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "privs.h"
#include "textesc.h"

static const char *log_prog = "tern";
static char log_path[4096];		/* log_file, for log_file_reopen */
static const char *log_service = "tern";
static int log_syslog;
static int log_stderr = 1;		/* every line to stderr */
static int log_stderr_fatal = 1;	/* fatal lines to stderr */
static int log_verb;
static int log_fd = -1;			/* log_file, or -1 */
static char log_ident[128];
static char log_host[64];

/* log_init - name the program (stderr) and its service (syslog ident) */
void log_init(const char *progname, const char *service)
{
	const char *slash = strrchr(progname, '/');

	log_prog = slash ? slash + 1 : progname;
	log_service = service;
}

/* stderr_is_journal - does $JOURNAL_STREAM ("DEV:INODE") name stderr */
static int stderr_is_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int end = 0;

	return v && sscanf(v, "%llu:%llu%n", &dev, &ino, &end) == 2 && v[end] == '\0'
	    && fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev
	    && (unsigned long long)st.st_ino == ino;
}

/* log_open - start logging to syslog under ident, optionally also stderr
 * (unless stderr is the journal) */
void log_open(const char *ident, int to_stderr, int verbose)
{
	static char ident_buf[128];

	/* openlog() keeps the pointer: keep our own copy across reloads. */
	snprintf(ident_buf, sizeof(ident_buf), "%s/%s", ident, log_service);
	memcpy(log_ident, ident_buf, sizeof(log_ident));
	openlog(ident_buf, LOG_PID | LOG_NDELAY, LOG_MAIL);
	log_syslog = 1;
	log_stderr_fatal = to_stderr;
	log_stderr = to_stderr && !stderr_is_journal();
	log_verb = verbose;
}

/* log_file_create - open path for appending (a regular file with one
 * name, never a link or a FIFO); a file this makes as root is given to
 * user (and its group) through the descriptor, not the path, so that the
 * SIGUSR2 reopen as user can open it again; one that exists keeps its
 * owner. The descriptor, or -1 with err. */
static int log_file_create(const char *path, const char *user, char *err, size_t errlen)
{
	int root = geteuid() == 0, fd;
	uid_t uid = 0;
	gid_t gid = 0;

	if (root && privs_lookup(user, &uid, &gid, err, errlen) < 0)
		return -1;
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640)) < 0) {
		if (errno == EEXIST)	/* a link, FIFO or device is refused there */
			return privs_open_file(path, O_WRONLY | O_APPEND, 0, err, errlen);
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (root && fchown(fd, uid, gid) < 0) {
		snprintf(err, errlen, "%s: cannot give it to %s: %s", path, user, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* log_file_open - also append every line to path, syslog-formatted
 * (`Mon DD HH:MM:SS host ident[pid]: text`); opened once, before
 * privileges are dropped to user (log_file_create); 0 or -1 with err */
int log_file_open(const char *path, const char *user, char *err, size_t errlen)
{
	char *dot;
	int fd;

	if ((fd = log_file_create(path, user, err, errlen)) < 0)
		return -1;
	if (gethostname(log_host, sizeof(log_host) - 1) < 0 || log_host[0] == '\0')
		snprintf(log_host, sizeof(log_host), "localhost");
	if ((dot = strchr(log_host, '.')) != NULL)
		*dot = '\0';	/* syslog's short name */
	tzset();		/* localtime_r below must not load it */
	if (log_fd >= 0)
		close(log_fd);
	log_fd = fd;
	snprintf(log_path, sizeof(log_path), "%s", path);
	return 0;
}

/* log_file_reopen - open log_file again by its name (SIGUSR2, after
 * logrotate moved it away and made a new one, "create 0640 tern adm"):
 * the new file takes the old one's descriptor, so that a line being
 * written goes whole to one or the other; on failure the old one stays in
 * use. Logs what happened. */
void log_file_reopen(void)
{
	char err[sizeof(log_path) + 256];
	int fd;

	if (log_fd < 0)
		return;	/* no log_file */
	if ((fd = privs_open_file(log_path, O_WRONLY | O_APPEND | O_CREAT, 0640, err,
				  sizeof(err))) < 0 || dup3(fd, log_fd, O_CLOEXEC) < 0) {
		if (fd >= 0) {
			snprintf(err, sizeof(err), "%s: %s", log_path, strerror(errno));
			close(fd);
		}
		log_warning("cannot reopen log_file %s; still writing to the old file", err);
		return;
	}
	close(fd);
	log_info("log_file %s reopened", log_path);
}

/* log_file_line - one line to log_file with one write (appends stay whole) */
static void log_file_line(const char *level, const char *text)
{
	char line[2400], stamp[32];
	struct tm tm;
	time_t now = time(NULL);
	int n;

	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%b %e %H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "%s %s %s[%ld]: %s%s\n", stamp, log_host, log_ident,
		     (long)getpid(), level, text);
	if (n > 0 && (size_t)n >= sizeof(line)) {
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (n > 0 && write(log_fd, line, (size_t)n) < 0)
		return;	/* nowhere to report it */
}

/* log_close - stop logging to syslog */
void log_close(void)
{
	if (log_syslog)
		closelog();
	log_syslog = 0;
	log_stderr = log_stderr_fatal = 1;
}

/* log_verbose - are debug messages wanted */
int log_verbose(void)
{
	return log_verb;
}

/* syslog_present - is there a /dev/log to send to; looked at once a
 * second at most. Without one, syslog(3) tries to connect again for each
 * line (a socket, a failed connect and a close), and drops it */
static int syslog_present(void)
{
	static _Atomic time_t checked;
	static _Atomic int present;
	time_t now = time(NULL);

	if (checked != now) {
		present = access(_PATH_LOG, F_OK) == 0;
		checked = now;
	}
	return present;
}

/* log_vmsg - log one message at the given priority */
void log_vmsg(int prio, const char *fmt, va_list ap)
{
	static const char *const level[] = {
		[LOG_EMERG] = "panic: ", [LOG_ALERT] = "panic: ",
		[LOG_CRIT] = "fatal: ", [LOG_ERR] = "error: ",
		[LOG_WARNING] = "warning: ", [LOG_NOTICE] = "",
		[LOG_INFO] = "", [LOG_DEBUG] = "debug: ",
	};
	char raw[2048], buf[2048];

	vsnprintf(raw, sizeof(raw), fmt, ap);
	textesc(buf, sizeof(buf), raw, TEXTESC_LINE);
	if (log_syslog && syslog_present())
		syslog(prio, "%s%s", level[prio & 7], buf);
	if (log_fd >= 0 && log_ident[0])
		log_file_line(level[prio & 7], buf);
	if (log_stderr || (log_stderr_fatal && (prio & 7) <= LOG_CRIT))
		fprintf(stderr, "%s: %s%s\n", log_prog, level[prio & 7], buf);
}

/* log_msg - log one message at the given priority */
void log_msg(int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(prio, fmt, ap);
	va_end(ap);
}

/* die - leave at once: a fatal error may come from any thread while the
 * others run, so no atexit handlers (OpenSSL's cleanup, a sanitizer's
 * leak check) may run under them; what stdio holds is written first */
static void __attribute__((noreturn)) die(int status)
{
	fflush(NULL);
	_exit(status);
}

/* log_fatal_status - log a fatal error and exit with status */
void log_fatal_status(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_CRIT, fmt, ap);
	va_end(ap);
	die(status);
}

/* log_fatal - log a fatal error and exit 1 */
void log_fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_CRIT, fmt, ap);
	va_end(ap);
	die(1);
}
