/*
 * deadline.h - I/O with absolute deadlines, for ternd's inbound sessions
 * and outbound connections alike. A timeout is turned into a deadline
 * once, when the operation starts (a command's reply, a write, a whole
 * DATA transfer step), and every wait of that operation is bounded by
 * what is left of it: a peer that trickles one octet at a time, or a
 * signal that interrupts poll, never restarts the clock. The clock is
 * CLOCK_MONOTONIC in milliseconds, so a change of the wall clock moves
 * no deadline. Never reads or writes the descriptor itself.
 */
#ifndef TERN_DEADLINE_H
#define TERN_DEADLINE_H

long long deadline_after(long long timeout_ms);
int deadline_passed(long long deadline);
int deadline_wait(int fd, short events, long long deadline);

#endif
