/*
 * unroutable - the warnings and the counter of mail that the
 * configuration leaves without a peer (see unroutable.h). A cause is a
 * short key ("no_route", "no_host:NAME", ...): its warning is logged at
 * most once a minute, saying how many were held back meanwhile, so that a
 * flood of mail to an unrouted domain costs one log line a minute.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "clock.h"
#include "log.h"
#include "ratelimit.h"
#include "stats.h"
#include "unroutable.h"

static const char *const reason_names[UNROUTABLE_REASONS] = {"no_route", "no_host",
							      "tls_context"};
static struct ratelimit warnings = RATELIMIT_INIT;

/* unroutable_init - register tern_unroutable_total's series (stats_init) */
void unroutable_init(void)
{
	stats.unroutable = metric_new(METRIC_COUNTER, "tern_unroutable_total",
				      "Recipients deferred for a configuration mistake: refused with "
				      "451 4.4.4 for want of a route (no_route), or queued for a peer "
				      "without a host (no_host) or without a TLS context (tls_context).",
				      "reason", NULL, 0);
	for (size_t i = 0; i < UNROUTABLE_REASONS; i++)
		metric_series(stats.unroutable, reason_names[i]);
}

/* unroutable_count - n recipients more for tern_unroutable_total{reason} */
void unroutable_count(enum unroutable_reason why, uint64_t n)
{
	if (stats.unroutable)
		metric_add(stats.unroutable, n, reason_names[why]);
}

/* unroutable_due - may the warning for cause be logged now (once a
 * minute)? *held: how many were held back since the last one */
int unroutable_due(const char *cause, uint64_t *held)
{
	return ratelimit_pass(&warnings, cause, now_us(), RATELIMIT_MINUTE, held);
}

/* unroutable_vlog - the warning, with how many were held back */
static void unroutable_vlog(uint64_t held, const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof(line), fmt, ap);
	if (held)
		log_warning("%s (%" PRIu64 " more since the last warning)", line, held);
	else
		log_warning("%s", line);
}

/* unroutable_log - log a warning unroutable_due let through */
void unroutable_log(uint64_t held, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	unroutable_vlog(held, fmt, ap);
	va_end(ap);
}

/* unroutable_warn - the warning for cause, once a minute */
void unroutable_warn(const char *cause, const char *fmt, ...)
{
	uint64_t held;
	va_list ap;

	if (!unroutable_due(cause, &held))
		return;
	va_start(ap, fmt);
	unroutable_vlog(held, fmt, ap);
	va_end(ap);
}
