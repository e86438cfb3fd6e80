/*
 * log - syslog (facility mail) and, in the foreground, stderr.
 *
 * Until log_open() is called messages go to stderr only, prefixed with the
 * program name, so configuration errors reach the admin who ran the command.
 * Never used for data that must not leave the host (keys, passwords).
 */
#ifndef TERN_LOG_H
#define TERN_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <syslog.h>

void log_init(const char *progname, const char *service);
void log_open(const char *ident, int to_stderr, int verbose);
int log_file_open(const char *path, const char *user, char *err, size_t errlen);
void log_file_reopen(void);
void log_close(void);
int log_verbose(void);
void log_msg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(int prio, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#define log_debug(...) do { if (log_verbose()) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)

void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void log_fatal_status(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

#endif
