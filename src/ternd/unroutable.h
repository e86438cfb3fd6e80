/*
 * unroutable.h - mail a configuration mistake keeps from every peer: no
 * [routes] entry for its domain, a peer without a host, a peer whose TLS
 * context a reload could not build. Such mail is deferred, never bounced:
 * 451 4.4.4 at RCPT (no route), or it is accepted and waits in the queue
 * (no host, no TLS context) until a reload mends the configuration. Here
 * are the one warning per cause and minute in the log and the counter
 * tern_unroutable_total{reason}. Never decides a reply or a state.
 */
#ifndef TERN_UNROUTABLE_H
#define TERN_UNROUTABLE_H

#include <stdint.h>

enum unroutable_reason {
	UNROUTABLE_NO_ROUTE,		/* no [routes] entry matches the domain */
	UNROUTABLE_NO_HOST,		/* the route's peer has no host */
	UNROUTABLE_TLS_CONTEXT,		/* the peer's TLS context could not be built */
	UNROUTABLE_REASONS
};

void unroutable_init(void);
void unroutable_count(enum unroutable_reason why, uint64_t n);
int unroutable_due(const char *cause, uint64_t *held);
void unroutable_log(uint64_t held, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void unroutable_warn(const char *cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
