/*
 * control.h - the control socket ternq talks to while ternd runs: one
 * line per request, one per answer, queue changes through the committer.
 * control_setup makes the socket before privileges are dropped;
 * control_start starts its thread. Never serves a connection whose peer
 * was not checked (SO_PEERCRED), never waits on a client without a
 * deadline.
 */
#ifndef TERN_CONTROL_H
#define TERN_CONTROL_H

void control_setup(void);
void control_start(void);
void control_remove(void);

#endif
