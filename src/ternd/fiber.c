/*
 * fiber - inbound sessions as fibers on a few event loops.
 *
 * A session is written as straight-line code that waits for its socket
 * (fiber_wait) and for the committer (fiber_park). Each runs as a fiber:
 * a stack of its own (FIBER_STACK bytes, as a session thread had, with a
 * guard page below it), switched to with getcontext(3) and setcontext on
 * one of ternd's event loops, one loop thread per online CPU. A waiting
 * session costs no thread: when its input arrives the loop switches to
 * it in user space. With a thread per session, each command of a client
 * that does not pipeline put a thread to sleep and woke it again (12.7
 * context switches per message with smtp-source, measured).
 *
 * What a fiber must not do is block its thread for long: the sessions
 * of its loop would wait meanwhile. Sessions wait only through these
 * calls, and do what may block on the disk (a large message's own spool
 * file: its creation, its writes, its fdatasync) through fiber_blocking,
 * on one of as many helper threads as there are loops; what else they
 * do is memory work and short locks.
 *
 * A loop owns its fibers: only its thread switches to them, registers
 * their sockets in its epoll set (edge-triggered, once) and frees them.
 * The loops also watch the listening sockets (fiber_watch): the loop
 * woken accepts, and runs the new sessions itself. Another thread hands
 * a loop work through its list of fibers to run and its eventfd:
 * fiber_wake (the committer, for a session whose message is on disk; a
 * helper, for a call done) and fiber_spawn from outside the loops.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include "clock.h"
#include "deadline.h"
#include "fiber.h"
#include "log.h"
#include "xalloc.h"

#define FIBER_STACK (256 * 1024)
#define LOOPS_MAX 16
#define WATCHES_MAX 4		/* listening sockets */

enum fiber_wait { F_RUN, F_FD, F_PARKED };

struct fiber {
	ucontext_t ctx;
	void *map;			/* the stack and its guard page */
	struct loop *loop;
	void (*fn)(void *);
	void *arg;
	enum fiber_wait wait;
	int fd;				/* in the loop's epoll set (-1: none yet) */
	uint32_t events;		/* F_FD: EPOLLIN or EPOLLOUT */
	long long deadline;		/* F_FD: ms_now() time */
	int timed_out;
	int started;			/* linked among the loop's fibers */
	int done;
	struct fiber *next;		/* on the loop's run list */
	struct fiber *prev_all, *next_all;
#ifdef __SANITIZE_ADDRESS__
	void *fake;
#endif
};

struct loop {
	pthread_t thread;
	int epfd, evfd;
	ucontext_t main;
	struct fiber *current;
	struct fiber *all;		/* its fibers, for their deadlines */
	struct fiber *dead;		/* ended: freed after the events at hand */
	struct fiber *fresh;		/* spawned by this loop, not yet run */
	long long again[WATCHES_MAX];	/* when a paused watch is watched again (0: not paused) */
	long long due;			/* no waiting fiber's deadline is before it */
	pthread_mutex_t lock;
	struct fiber *run, **run_tail;	/* handed to it by other threads */
	int nfibers;			/* read by fiber_spawn to pick a loop */
#ifdef __SANITIZE_ADDRESS__
	void *fake;
	const void *main_bottom;
	size_t main_size;
#endif
};

static struct loop loops[LOOPS_MAX];
static int nloops;
static __thread struct loop *self;

/* Listening sockets every loop watches: fn accepts from one when it is
 * readable (EPOLLEXCLUSIVE: one loop is woken, the first not busy). */
static struct watch {
	int fd;
	int (*fn)(void *);		/* returns ms to pause, or 0 */
	void *arg;
	int on;				/* cleared by fiber_unwatch */
	int calls;			/* of fn running now */
} watches[WATCHES_MAX];
static int nwatches;

/* Stacks of ended fibers kept for the next: mapping and unmapping one
 * per session costs a TLB shootdown on every CPU ternd runs on. */
static struct {
	pthread_mutex_t lock;
	void *kept[FIBER_STACKS_KEPT];
	int n;
} stacks = {PTHREAD_MUTEX_INITIALIZER, {NULL}, 0};

/* A call handed to the helper threads by fiber_blocking. */
struct call {
	int (*fn)(void *);
	void *arg;
	int rc, err;
	struct fiber *fiber;
	struct call *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct call *head, **tail;
} calls = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, &calls.head};

/* switch_context - save the running context in from and run to; returns
 * when from is run again. This is swapcontext(3) written out as its
 * getcontext and setcontext: ASan's swapcontext interceptor clears the
 * shadow of the stack switched to, live frames and all, and warns once in
 * every log; the switches are annotated for it below instead. */
static void switch_context(ucontext_t *from, const ucontext_t *to)
{
	volatile int resumed = 0;

	getcontext(from);
	if (!resumed) {
		resumed = 1;
		setcontext(to);
	}
}

/* switch_to - from the loop to fiber f, until it waits or ends */
static void switch_to(struct loop *l, struct fiber *f)
{
	l->current = f;
#ifdef __SANITIZE_ADDRESS__
	__sanitizer_start_switch_fiber(&l->fake, (char *)f->map + getpagesize(), FIBER_STACK);
#endif
	switch_context(&l->main, &f->ctx);
#ifdef __SANITIZE_ADDRESS__
	__sanitizer_finish_switch_fiber(l->fake, NULL, NULL);
#endif
	l->current = NULL;
	if (f->done) {
		if (f->prev_all)
			f->prev_all->next_all = f->next_all;
		else
			l->all = f->next_all;
		if (f->next_all)
			f->next_all->prev_all = f->prev_all;
		f->next = l->dead;
		l->dead = f;
	}
}

/* stack_get - a stack (a guard page, then FIBER_STACK bytes); NULL if
 * none can be mapped */
static void *stack_get(void)
{
	size_t page = (size_t)getpagesize();
	void *map = NULL;

	pthread_mutex_lock(&stacks.lock);
	if (stacks.n > 0)
		map = stacks.kept[--stacks.n];
	pthread_mutex_unlock(&stacks.lock);
	if (map != NULL)
		return map;
	map = mmap(NULL, page + FIBER_STACK, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (map == MAP_FAILED)
		return NULL;
	if (mprotect(map, page, PROT_NONE) < 0) {
		munmap(map, page + FIBER_STACK);
		return NULL;
	}
	return map;
}

/* stack_put - keep an ended fiber's stack, or unmap it */
static void stack_put(void *map)
{
	size_t page = (size_t)getpagesize();
	int kept = 0;

#ifdef __SANITIZE_ADDRESS__
	/* its last frames never returned: their redzones must not poison
	 * the next fiber on it */
	__asan_unpoison_memory_region((char *)map + page, FIBER_STACK);
#endif
	pthread_mutex_lock(&stacks.lock);
	if (stacks.n < FIBER_STACKS_KEPT) {
		stacks.kept[stacks.n++] = map;
		kept = 1;
	}
	pthread_mutex_unlock(&stacks.lock);
	if (!kept)
		munmap(map, page + FIBER_STACK);
}

/* fiber_give_back - unmap the stacks kept for the next fibers (main,
 * once a load of sessions ended: each holds the pages its fiber used) */
void fiber_give_back(void)
{
	size_t page = (size_t)getpagesize();
	void *kept[FIBER_STACKS_KEPT];
	int n;

	pthread_mutex_lock(&stacks.lock);
	n = stacks.n;
	memcpy(kept, stacks.kept, (size_t)n * sizeof(kept[0]));
	stacks.n = 0;
	pthread_mutex_unlock(&stacks.lock);
	for (int i = 0; i < n; i++)
		munmap(kept[i], page + FIBER_STACK);
}

/* bury - free the fibers that ended; no event at hand names them */
static void bury(struct loop *l)
{
	struct fiber *f, *next;

	for (f = l->dead; f != NULL; f = next) {
		next = f->next;
		stack_put(f->map);
		free(f);
		__atomic_sub_fetch(&l->nfibers, 1, __ATOMIC_RELAXED);
	}
	l->dead = NULL;
}

/* to_loop - from the running fiber back to its loop */
static void to_loop(struct fiber *f)
{
	struct loop *l = f->loop;

#ifdef __SANITIZE_ADDRESS__
	__sanitizer_start_switch_fiber(f->done ? NULL : &f->fake, l->main_bottom, l->main_size);
#endif
	switch_context(&f->ctx, &l->main);
#ifdef __SANITIZE_ADDRESS__
	__sanitizer_finish_switch_fiber(f->fake, &l->main_bottom, &l->main_size);
#endif
}

/* trampoline - a fiber's first frame: run its function, then end */
static void trampoline(void)
{
	struct fiber *f = self->current;

#ifdef __SANITIZE_ADDRESS__
	__sanitizer_finish_switch_fiber(NULL, &self->main_bottom, &self->main_size);
#endif
	f->fn(f->arg);
	f->done = 1;
	f->wait = F_RUN;	/* an event still at hand for it is stale */
	to_loop(f);	/* never returns: the loop frees the stack */
}

/* take_run - the fibers other threads handed this loop */
static struct fiber *take_run(struct loop *l)
{
	struct fiber *list;
	uint64_t n;

	if (read(l->evfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warning("session loop: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&l->lock);
	list = l->run;
	l->run = NULL;
	l->run_tail = &l->run;
	pthread_mutex_unlock(&l->lock);
	return list;
}

/* watch_add - l watches listening socket w */
static void watch_add(struct loop *l, struct watch *w)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = w};

	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0)
		log_fatal("session loop: cannot watch a listener: %s", strerror(errno));
}

/* watched - w's fn called on l; a pause it asks for takes w out of l's
 * epoll set until then (expire puts it back) */
static void watched(struct loop *l, struct watch *w)
{
	int pause = 0;

	/* counted before on is read: fiber_unwatch clears on, then waits
	 * for calls to be 0, so either this sees on cleared or it waits */
	__atomic_add_fetch(&w->calls, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&w->on, __ATOMIC_SEQ_CST))
		/* fiber_unwatch took it out (a stale event), or it came back
		 * from a pause as fiber_unwatch ran */
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	else if ((pause = w->fn(w->arg)) > 0)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	__atomic_sub_fetch(&w->calls, 1, __ATOMIC_SEQ_CST);
	if (pause > 0)
		l->again[w - watches] = ms_now() + pause;
}

/* expire - resume the fibers whose wait has passed its deadline, watch
 * again what was paused; the milliseconds to the next deadline, or -1
 * when none. The fibers are walked only once l->due has come: a wait
 * lowers it to its deadline, and a wait that ended early leaves it
 * earlier than it need be, so a walk comes too soon, never too late. */
static int expire(struct loop *l)
{
	long long now = ms_now(), next = -1;
	struct fiber *f, *after;

	for (int i = 0; i < nwatches; i++) {
		if (l->again[i] == 0)
			continue;
		if (l->again[i] <= now) {
			l->again[i] = 0;
			if (__atomic_load_n(&watches[i].on, __ATOMIC_ACQUIRE))
				watch_add(l, &watches[i]);
		} else if (next < 0 || l->again[i] - now < next)
			next = l->again[i] - now;
	}

	if (l->due <= now) {
		l->due = LLONG_MAX;	/* a fiber resumed here that waits again lowers it */
		for (f = l->all; f != NULL; f = after) {
			after = f->next_all;
			if (f->wait != F_FD)
				continue;
			if (f->deadline <= now) {
				f->timed_out = 1;
				f->wait = F_RUN;
				switch_to(l, f);
			} else if (f->deadline < l->due)
				l->due = f->deadline;
		}
	}
	if (l->due != LLONG_MAX && (next < 0 || l->due - now < next))
		next = l->due - now;
	return next < 0 ? -1 : (int)(next > 60000 ? 60000 : next);
}

/* run_list - run fibers handed to l, and those it started: a new one is
 * linked among its fibers first */
static void run_list(struct loop *l, struct fiber *f)
{
	struct fiber *next;

	for (; f != NULL; f = next) {
		next = f->next;
		if (!f->started) {
			f->started = 1;
			if ((f->next_all = l->all) != NULL)
				l->all->prev_all = f;
			l->all = f;
		}
		f->wait = F_RUN;
		switch_to(l, f);
	}
}

/* loop_run - a loop's thread */
static void *loop_run(void *arg)
{
	struct loop *l = arg;
	struct epoll_event ev[64];

	self = l;
	for (;;) {
		int n, timeout = expire(l);

		if (l->fresh != NULL)
			timeout = 0;	/* started by a fiber expire resumed */

		n = epoll_wait(l->epfd, ev, 64, timeout);
		if (n < 0 && errno != EINTR)
			log_fatal("session loop: epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			struct fiber *f = ev[i].data.ptr;

			if (f == NULL) {
				run_list(l, take_run(l));
				continue;
			}
			if ((void *)f >= (void *)watches && (void *)f < (void *)(watches + WATCHES_MAX)) {
				watched(l, (struct watch *)(void *)f);
				continue;
			}
			/* an edge while it waits for something else is stale:
			 * it tries its I/O before it waits again */
			if (f->wait == F_FD
			    && (ev[i].events & (f->events | EPOLLERR | EPOLLHUP)) != 0) {
				f->wait = F_RUN;
				switch_to(l, f);
			}
		}
		while (l->fresh != NULL) {	/* the sessions this loop started */
			struct fiber *fresh = l->fresh;

			l->fresh = NULL;
			run_list(l, fresh);
		}
		bury(l);
	}
	return NULL;
}

/* hand - give f to loop l to run (any thread). Only the first fiber on
 * an empty list signals the eventfd: take_run reads the eventfd before
 * it takes the list, so a list that holds fibers always has a signal
 * pending or a take_run about to take it. */
static void hand(struct loop *l, struct fiber *f)
{
	uint64_t one = 1;
	int first;

	pthread_mutex_lock(&l->lock);
	first = l->run == NULL;
	f->next = NULL;
	*l->run_tail = f;
	l->run_tail = &f->next;
	pthread_mutex_unlock(&l->lock);
	if (first && write(l->evfd, &one, sizeof(one)) < 0)
		(void)0;	/* the counter is full: the loop is awake already */
}

/* helper - a helper thread: run the calls fibers hand it */
static void *helper(void *arg)
{
	(void)arg;
	for (;;) {
		struct call *c;

		pthread_mutex_lock(&calls.lock);
		while (calls.head == NULL)
			pthread_cond_wait(&calls.cond, &calls.lock);
		c = calls.head;
		if ((calls.head = c->next) == NULL)
			calls.tail = &calls.head;
		pthread_mutex_unlock(&calls.lock);
		errno = 0;
		c->rc = c->fn(c->arg);
		c->err = errno;
		fiber_wake(c->fiber);	/* c is the fiber's again from here */
	}
	return NULL;
}

/* fiber_start - start the loops, one per online CPU, and as many helpers */
void fiber_start(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t tid;

	nloops = cpus < 1 ? 1 : cpus > LOOPS_MAX ? LOOPS_MAX : (int)cpus;
	for (int i = 0; i < nloops; i++) {
		struct loop *l = &loops[i];
		struct epoll_event ev = {.events = EPOLLIN};

		pthread_mutex_init(&l->lock, NULL);
		l->run_tail = &l->run;
		if ((l->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0
		    || (l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0
		    || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->evfd, &ev) < 0)
			log_fatal("cannot start a session loop: %s", strerror(errno));
	}
	/* all set up before any runs: a loop may hand a session to another */
	for (int i = 0; i < nloops; i++) {
		for (int k = 0; k < nwatches; k++)
			watch_add(&loops[i], &watches[k]);
		if (pthread_create(&loops[i].thread, NULL, loop_run, &loops[i]) != 0
		    || pthread_create(&tid, NULL, helper, NULL) != 0)
			log_fatal("cannot start a session loop thread");
	}
}

/* make_context - f's context: its stack, starting at trampoline (in a
 * function of its own: getcontext returns twice) */
static void make_context(struct fiber *f, void *stack)
{
	getcontext(&f->ctx);
	f->ctx.uc_stack.ss_sp = stack;
	f->ctx.uc_stack.ss_size = FIBER_STACK;
	f->ctx.uc_link = NULL;
	makecontext(&f->ctx, trampoline, 0);
}

/* fiber_watch - before fiber_start: have the loops call fn(arg) when
 * the listening socket fd is readable; fn accepts without blocking and
 * returns 0, or how many milliseconds this loop should leave fd alone
 * (accept failed for want of descriptors or memory) */
void fiber_watch(int fd, int (*fn)(void *), void *arg)
{
	if (nwatches == WATCHES_MAX)
		log_fatal("session loops: too many listeners");
	watches[nwatches++] = (struct watch){.fd = fd, .fn = fn, .arg = arg, .on = 1};
}

/* fiber_unwatch - no loop calls fd's fn once this returns (it waits
 * for a call running). fd must stay open until exit: a loop may still
 * hold an event for it, and must not find another socket under its
 * number. Not from a loop. */
void fiber_unwatch(int fd)
{
	for (int i = 0; i < nwatches; i++)
		if (watches[i].fd == fd) {
			__atomic_store_n(&watches[i].on, 0, __ATOMIC_SEQ_CST);
			for (int k = 0; k < nloops; k++)
				epoll_ctl(loops[k].epfd, EPOLL_CTL_DEL, fd, NULL);
			while (__atomic_load_n(&watches[i].calls, __ATOMIC_SEQ_CST) > 0)
				usleep(1000);	/* a burst of accepts: microseconds */
		}
}

/* fiber_spawn - run fn(arg) as a fiber on the loop with the fewest,
 * this one on a tie when a loop's watch calls it; -1 when its stack
 * cannot be had */
int fiber_spawn(void (*fn)(void *), void *arg)
{
	struct loop *l = &loops[0];
	struct fiber *f;
	void *map = stack_get();

	if (map == NULL)
		return -1;
	if (self != NULL)
		l = self;	/* on a tie: no hand-off */
	for (int i = 0; i < nloops; i++)
		if (__atomic_load_n(&loops[i].nfibers, __ATOMIC_RELAXED)
		    < __atomic_load_n(&l->nfibers, __ATOMIC_RELAXED))
			l = &loops[i];
	f = xcalloc(1, sizeof(*f));
	f->map = map;
	f->loop = l;
	f->fn = fn;
	f->arg = arg;
	f->fd = -1;
	make_context(f, (char *)map + getpagesize());
	__atomic_add_fetch(&l->nfibers, 1, __ATOMIC_RELAXED);
	if (l == self) {	/* run when the watch's call returns */
		f->next = l->fresh;
		l->fresh = f;
	} else
		hand(l, f);	/* the loop links it among its own when it first runs it */
	return 0;
}

/* fiber_self - the running fiber, or NULL in a thread of ternd's own */
struct fiber *fiber_self(void)
{
	return self ? self->current : NULL;
}

/* fiber_wait - as deadline_wait: wait for events on fd until the
 * deadline; 0 ready (or woken: the caller tries its I/O again), -1 with
 * ETIMEDOUT when it passed, EBADF for no fd. Outside a fiber it is
 * deadline_wait. */
int fiber_wait(int fd, short events, long long deadline)
{
	struct fiber *f = fiber_self();

	if (f == NULL)
		return deadline_wait(fd, events, deadline);
	if (fd < 0) {
		errno = EBADF;
		return -1;
	}
	if (deadline <= ms_now()) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (f->fd != fd) {	/* a session waits for one socket: added once */
		struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
					 .data.ptr = f};

		if (epoll_ctl(f->loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			return -1;
		f->fd = fd;
	}
	f->events = (events & POLLIN ? EPOLLIN | EPOLLRDHUP : 0) | (events & POLLOUT ? EPOLLOUT : 0);
	f->deadline = deadline;
	if (deadline < f->loop->due)
		f->loop->due = deadline;
	f->timed_out = 0;
	f->wait = F_FD;
	to_loop(f);
	if (f->timed_out) {
		errno = ETIMEDOUT;
		return -1;
	}
	return 0;
}

/* fiber_park - wait for fiber_wake; a fiber only */
void fiber_park(void)
{
	struct fiber *f = fiber_self();

	f->wait = F_PARKED;
	to_loop(f);
}

/* fiber_wake - resume a parked fiber (any thread) */
void fiber_wake(struct fiber *f)
{
	hand(f->loop, f);
}

/* fiber_blocking - fn(arg), which may block on the disk: on a helper
 * thread while the fiber waits (its loop serves its other sessions);
 * at once outside a fiber. fn's result, with its errno. */
int fiber_blocking(int (*fn)(void *), void *arg)
{
	struct call c = {fn, arg, 0, 0, fiber_self(), NULL};

	if (c.fiber == NULL)
		return fn(arg);
	pthread_mutex_lock(&calls.lock);
	*calls.tail = &c;
	calls.tail = &c.next;
	pthread_cond_signal(&calls.cond);
	pthread_mutex_unlock(&calls.lock);
	fiber_park();
	errno = c.err;
	return c.rc;
}
