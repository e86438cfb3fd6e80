/*
 * log - syslog (facility mail) and, in the foreground, stderr.
 *
 * Must never allocate: it is what xalloc calls when memory runs out.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static const char *log_prog = "tern";
static const char *log_service = "tern";
static int log_syslog;
static int log_stderr = 1;
static int log_verb;

/* log_init - name the program (stderr) and its service (syslog ident) */
void log_init(const char *progname, const char *service)
{
	const char *slash = strrchr(progname, '/');

	log_prog = slash ? slash + 1 : progname;
	log_service = service;
}

/* log_open - start logging to syslog under ident, optionally also stderr */
void log_open(const char *ident, int to_stderr, int verbose)
{
	static char ident_buf[128];

	/* openlog() keeps the pointer: keep our own copy across reloads. */
	snprintf(ident_buf, sizeof(ident_buf), "%s/%s", ident, log_service);
	openlog(ident_buf, LOG_PID | LOG_NDELAY, LOG_MAIL);
	log_syslog = 1;
	log_stderr = to_stderr;
	log_verb = verbose;
}

/* log_close - stop logging to syslog */
void log_close(void)
{
	if (log_syslog)
		closelog();
	log_syslog = 0;
	log_stderr = 1;
}

/* log_verbose - are debug messages wanted */
int log_verbose(void)
{
	return log_verb;
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
	char buf[2048];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (log_syslog)
		syslog(prio, "%s%s", level[prio & 7], buf);
	if (log_stderr)
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

/* log_fatal_status - log a fatal error and exit with status */
void log_fatal_status(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_CRIT, fmt, ap);
	va_end(ap);
	exit(status);
}

/* log_fatal - log a fatal error and exit 1 */
void log_fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_CRIT, fmt, ap);
	va_end(ap);
	exit(1);
}
