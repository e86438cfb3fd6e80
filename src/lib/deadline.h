/*
 * deadline.h - I/O with absolute deadlines, for ternd's inbound sessions
 * and outbound connections alike. A timeout is turned into a deadline
 * once, when the operation starts (a command's reply, a write, a whole
 * DATA transfer step), and every wait of that operation is bounded by
 * what is left of it: a peer that trickles one octet at a time, or a
 * signal that interrupts poll, never restarts the clock. The clock is
 * CLOCK_MONOTONIC in milliseconds, so a change of the wall clock moves
 * no deadline; a read deadline (struct rdeadline) is moved only by what
 * was received. Never reads or writes the descriptor itself.
 */
#ifndef TERN_DEADLINE_H
#define TERN_DEADLINE_H

/* A read deadline for one command line or one content phase (DATA, a
 * BDAT chunk): it starts at the first wait for input, and then only the
 * octets received move it, each by 1/rate seconds (Postfix's
 * smtpd_min_data_rate); 0 rate: never moved. */
struct rdeadline {
	const char *what;		/* for the log: "a command line", "DATA content" */
	long long timeout;		/* ms, from the first wait */
	long long base;			/* first wait + timeout (deadline_after), 0: not waited yet */
	unsigned long long rate;	/* octets a second that earn a second */
	unsigned long long octets;	/* received since the first wait */
};

long long deadline_after(long long timeout_ms);
struct rdeadline rdeadline_start(const char *what, long long timeout, long long rate);
long long rdeadline_at(const struct rdeadline *d);
int deadline_passed(long long deadline);
int deadline_wait(int fd, short events, long long deadline);

#endif
