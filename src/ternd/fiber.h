/*
 * fiber.h - inbound sessions as fibers on a few event loops (fiber.c).
 */
#ifndef TERN_FIBER_H
#define TERN_FIBER_H

struct fiber;

#define FIBER_STACKS_KEPT 32	/* stacks of ended fibers kept for the next */

void fiber_watch(int fd, int (*fn)(void *), void *arg);
void fiber_unwatch(int fd);
void fiber_start(void);
int fiber_spawn(void (*fn)(void *), void *arg);
struct fiber *fiber_self(void);
int fiber_wait(int fd, short events, long long deadline);
void fiber_park(void);
void fiber_wake(struct fiber *f);
int fiber_blocking(int (*fn)(void *), void *arg);
void fiber_give_back(void);

#endif
