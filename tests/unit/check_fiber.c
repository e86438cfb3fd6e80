/*
 * check_fiber - ternd's session loops: a fiber waiting for its socket
 * resumes when input comes and times out at its deadline, with
 * ETIMEDOUT, also when every loop has fibers that wait longer, and again
 * when it waits after a timeout; many waiting fibers take no thread of
 * their own; a parked fiber resumes when another thread wakes it, and
 * none of many woken at once from two threads is lost; fiber_blocking
 * runs its call on another thread and hands back its result and errno;
 * ended fibers leave nothing running, and no mapping once the stacks
 * kept are full; a watched listening socket is accepted from on a loop,
 * the sessions it starts there run and wait for their socket more than
 * once, and none is accepted once it is unwatched.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "fiber.h"
#include "unit.h"

#define MANY 200

/* What a fiber saw, for the test thread. */
struct seen {
	int fd;
	long long deadline;
	int rc, err;
	long long took;
	long long ended;		/* ms_now() when its wait returned */
	pthread_t thread;
	struct fiber *self;
	sem_t done;
	sem_t parked;
};

/* the listening socket the loops watch, and what its watch saw */
static int listener = -1;
static int accepted;
static pthread_t accept_thread;

/* echo - a session of the watched listener: send back each of two
 * bytes, each after a wait of its own (the socket registered once) */
static void echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char c;

	for (int i = 0; i < 2; i++) {
		while (recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN)
			if (fiber_wait(fd, POLLIN, ms_now() + 5000) < 0)
				goto out;
		if (send(fd, &c, 1, MSG_NOSIGNAL) != 1)
			break;
	}
out:
	close(fd);
}

static int on_accept(void *arg)
{
	int fd;

	(void)arg;
	while ((fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		accept_thread = pthread_self();
		__atomic_add_fetch(&accepted, 1, __ATOMIC_RELEASE);
		ck_assert_int_eq(fiber_spawn(echo, (void *)(intptr_t)fd), 0);
	}
	return 0;
}

/* echoed - send c on fd and read it back within 5 s */
static int echoed(int fd, char c)
{
	struct pollfd p = {fd, POLLIN, 0};
	char back = 0;

	return send(fd, &c, 1, MSG_NOSIGNAL) == 1 && poll(&p, 1, 5000) == 1
		&& recv(fd, &back, 1, 0) == 1 && back == c;
}

static struct sockaddr_un listener_addr(void)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};

	/* abstract: nothing in the file system to clean up */
	snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "tern-check-fiber-%ld", (long)getpid());
	return sun;
}

static void start_once(void)
{
	static int started;

	if (!started) {
		struct sockaddr_un sun = listener_addr();

		listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		ck_assert_int_eq(bind(listener, (struct sockaddr *)&sun, sizeof(sun)), 0);
		ck_assert_int_eq(listen(listener, 16), 0);
		fiber_watch(listener, on_accept, NULL);
		fiber_start();
		started = 1;
	}
}

/* client - connect to the watched listener */
static int client(void)
{
	struct sockaddr_un sun = listener_addr();
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

/* accepted_by - wait up to 5 s for n accepted in all */
static int accepted_by(int n)
{
	for (int i = 0; i < 500 && __atomic_load_n(&accepted, __ATOMIC_ACQUIRE) < n; i++)
		usleep(10000);
	return __atomic_load_n(&accepted, __ATOMIC_ACQUIRE);
}

/* threads - how many threads this process has */
static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void seen_init(struct seen *s, int fd, long long deadline)
{
	s->fd = fd;
	s->deadline = deadline;
	s->self = NULL;
	sem_init(&s->done, 0, 0);
	sem_init(&s->parked, 0, 0);
}

static void waiter(void *arg)
{
	struct seen *s = arg;
	long long t0 = ms_now();

	s->thread = pthread_self();
	s->rc = fiber_wait(s->fd, POLLIN, s->deadline);
	s->err = errno;
	s->ended = ms_now();
	s->took = s->ended - t0;
	sem_post(&s->done);
}

START_TEST(test_wait_ready)
{
	struct seen s;
	int sv[2];

	start_once();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	seen_init(&s, sv[0], ms_now() + 10000);
	ck_assert_int_eq(fiber_spawn(waiter, &s), 0);
	usleep(100000);
	ck_assert_int_eq(sem_trywait(&s.done), -1);	/* still waiting for input */
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	sem_wait(&s.done);
	ck_assert_int_eq(s.rc, 0);
	ck_assert_int_lt(s.took, 5000);
	ck_assert(!pthread_equal(s.thread, pthread_self()));
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_wait_deadline)
{
	struct seen s;
	int sv[2];

	start_once();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	seen_init(&s, sv[0], ms_now() + 200);
	ck_assert_int_eq(fiber_spawn(waiter, &s), 0);
	sem_wait(&s.done);
	ck_assert_int_eq(s.rc, -1);
	ck_assert_int_eq(s.err, ETIMEDOUT);
	ck_assert_int_ge(s.ended, s.deadline);	/* not before its deadline */
	ck_assert_int_lt(s.took, 5000);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* twice - time out once, then wait again with a deadline as near:
 * the second wait begins inside the loop's walk for timeouts */
static void twice(void *arg)
{
	struct seen *s = arg;

	s->rc = fiber_wait(s->fd, POLLIN, s->deadline);
	s->err = errno;
	s->took = ms_now() - s->deadline;	/* how late the first timeout came */
	if (s->rc == 0)
		goto out;
	s->deadline = ms_now() + 200;
	s->rc = fiber_wait(s->fd, POLLIN, s->deadline);
	s->err = errno;
out:
	s->ended = ms_now();
	sem_post(&s->done);
}

/* A wait with a deadline earlier than those its loop has already counted
 * still times out on time, and so does the wait that follows its
 * timeout: LONG fibers (more than there can be loops, so every loop has
 * some) wait 20 s, then one 200 ms, twice. */
#define LONG 32
START_TEST(test_deadline_sooner)
{
	static struct seen s[LONG + 1];
	static int sv[LONG + 1][2];
	struct seen *t = &s[LONG];

	start_once();
	for (int i = 0; i <= LONG; i++) {
		if (i == LONG)
			usleep(100000);	/* the loops idle with 20 s to go */
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv[i]), 0);
		seen_init(&s[i], sv[i][0], ms_now() + (i < LONG ? 20000 : 200));
		ck_assert_int_eq(fiber_spawn(i < LONG ? waiter : twice, &s[i]), 0);
	}
	sem_wait(&t->done);
	ck_assert_int_eq(t->rc, -1);
	ck_assert_int_eq(t->err, ETIMEDOUT);
	ck_assert_int_ge(t->took, 0);
	ck_assert_int_lt(t->took, 4000);
	ck_assert_int_ge(t->ended, t->deadline);	/* the second deadline */
	ck_assert_int_lt(t->ended - t->deadline, 4000);
	for (int i = 0; i < LONG; i++) {
		ck_assert_int_eq(sem_trywait(&s[i].done), -1);	/* still waiting */
		ck_assert_int_eq(write(sv[i][1], "x", 1), 1);
		sem_wait(&s[i].done);
		ck_assert_int_eq(s[i].rc, 0);
	}
	for (int i = 0; i <= LONG; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
}
END_TEST

START_TEST(test_many_no_threads)
{
	static struct seen s[MANY];
	static int sv[MANY][2];
	int before;

	start_once();
	before = threads();
	for (int i = 0; i < MANY; i++) {
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv[i]), 0);
		seen_init(&s[i], sv[i][0], ms_now() + 20000);
		ck_assert_int_eq(fiber_spawn(waiter, &s[i]), 0);
	}
	usleep(200000);
	ck_assert_int_eq(threads(), before);	/* 200 waiting: no thread more */
	for (int i = MANY - 1; i >= 0; i--)
		ck_assert_int_eq(write(sv[i][1], "x", 1), 1);
	for (int i = 0; i < MANY; i++) {
		sem_wait(&s[i].done);
		ck_assert_int_eq(s[i].rc, 0);
		close(sv[i][0]);
		close(sv[i][1]);
	}
	ck_assert_int_eq(threads(), before);
}
END_TEST

static void parker(void *arg)
{
	struct seen *s = arg;

	s->self = fiber_self();
	sem_post(&s->parked);
	fiber_park();
	sem_post(&s->done);
}

START_TEST(test_park_wake)
{
	struct seen s;

	start_once();
	ck_assert_ptr_null(fiber_self());	/* not a fiber: the test's thread */
	seen_init(&s, -1, 0);
	ck_assert_int_eq(fiber_spawn(parker, &s), 0);
	sem_wait(&s.parked);
	ck_assert_ptr_nonnull(s.self);
	usleep(100000);
	ck_assert_int_eq(sem_trywait(&s.done), -1);	/* parked until woken */
	fiber_wake(s.self);
	sem_wait(&s.done);
}
END_TEST

/* What a waker thread wakes: parked fibers from..to. */
struct wakes {
	struct seen *s;
	int from, to;
};

static void *waker(void *arg)
{
	struct wakes *w = arg;

	for (int i = w->from; i < w->to; i++)
		fiber_wake(w->s[i].self);
	return NULL;
}

/* Two threads wake 200 parked fibers at once, round after round: none
 * is left parked (a hand-off that signals the loop only for the first
 * fiber of its list must not lose one). */
START_TEST(test_wake_burst)
{
	static struct seen s[MANY];

	start_once();
	for (int round = 0; round < 20; round++) {
		struct wakes w[2] = {{s, 0, MANY / 2}, {s, MANY / 2, MANY}};
		pthread_t t[2];

		for (int i = 0; i < MANY; i++) {
			seen_init(&s[i], -1, 0);
			ck_assert_int_eq(fiber_spawn(parker, &s[i]), 0);
		}
		for (int i = 0; i < MANY; i++)
			sem_wait(&s[i].parked);
		for (int k = 0; k < 2; k++)
			ck_assert_int_eq(pthread_create(&t[k], NULL, waker, &w[k]), 0);
		for (int k = 0; k < 2; k++)
			pthread_join(t[k], NULL);
		for (int i = 0; i < MANY; i++) {
			struct timespec until;

			clock_deadline(&until, 10000);
			ck_assert_msg(sem_clockwait(&s[i].done, CLOCK_MONOTONIC, &until) == 0,
				      "round %d: fiber %d never resumed", round, i);
		}
	}
}
END_TEST

static pthread_t call_thread;

static int failing_call(void *arg)
{
	call_thread = pthread_self();
	*(int *)arg = 42;
	errno = EIO;
	return -1;
}

static void blocker(void *arg)
{
	struct seen *s = arg;
	int out = 0;

	s->thread = pthread_self();
	s->rc = fiber_blocking(failing_call, &out);
	s->err = errno;
	s->took = out;
	sem_post(&s->done);
}

START_TEST(test_blocking)
{
	struct seen s;
	int out = 0;

	start_once();
	seen_init(&s, -1, 0);
	ck_assert_int_eq(fiber_spawn(blocker, &s), 0);
	sem_wait(&s.done);
	ck_assert_int_eq(s.rc, -1);
	ck_assert_int_eq(s.err, EIO);
	ck_assert_int_eq(s.took, 42);
	ck_assert(!pthread_equal(call_thread, s.thread));	/* not on the loop */
	/* outside a fiber: at once, on the caller's thread */
	ck_assert_int_eq(fiber_blocking(failing_call, &out), -1);
	ck_assert_int_eq(out, 42);
	ck_assert(pthread_equal(call_thread, pthread_self()));
}
END_TEST

static void quick(void *arg)
{
	sem_post(arg);
}

/* maps - the process's memory mappings: a fiber's stack is two */
static int maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	ck_assert_ptr_nonnull(f);
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

START_TEST(test_many_end)
{
	sem_t done;
	int before, maps_before;

	start_once();
	sem_init(&done, 0, 0);
	before = threads();
	maps_before = 0;
	/*
	 * The first round fills the stacks kept and the loops' malloc arenas;
	 * the next five, 5,000 fibers, must map nothing that stays. The count
	 * of lines in /proc/self/maps moves without a leak: a kept stack is
	 * two mappings (guard, stack) that merge with their neighbours or not,
	 * as addresses are reused, so up to 2 per kept stack (38 seen). A
	 * leaked fiber keeps its stack, two lines that do not merge (guard,
	 * stack): one leak in a hundred fibers would be about 100.
	 */
	for (int round = 0; round < 6; round++) {
		for (int i = 0; i < 1000; i++) {	/* more than the stacks kept */
			ck_assert_int_eq(fiber_spawn(quick, &done), 0);
			if (i % 100 == 99)
				for (int k = 0; k < 100; k++)
					sem_wait(&done);
		}
		usleep(100000);	/* the loops free what ended after its events */
		if (round == 0)
			maps_before = maps();
	}
	ck_assert_int_eq(threads(), before);
	ck_assert_int_lt(maps() - maps_before, 2 * FIBER_STACKS_KEPT + 16);
}
END_TEST

START_TEST(test_watch)
{
	int fds[4];

	start_once();
	for (int i = 0; i < 3; i++)
		fds[i] = client();
	ck_assert_int_eq(accepted_by(3), 3);
	ck_assert(!pthread_equal(accept_thread, pthread_self()));	/* on a loop */
	/* the sessions the watch started run, and wait for their socket twice */
	for (int i = 0; i < 3; i++) {
		usleep(50000);	/* each fiber is waiting before its byte comes */
		ck_assert(echoed(fds[i], 'a'));
		usleep(50000);
		ck_assert(echoed(fds[i], 'b'));
	}
	fiber_unwatch(listener);
	fds[3] = client();	/* waits in the backlog: no loop accepts it */
	usleep(300000);
	ck_assert_int_eq(__atomic_load_n(&accepted, __ATOMIC_ACQUIRE), 3);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fiber");
	TCase *tc = tcase_create("fiber");

	tcase_add_test(tc, test_wait_ready);
	tcase_add_test(tc, test_wait_deadline);
	tcase_add_test(tc, test_deadline_sooner);
	tcase_add_test(tc, test_many_no_threads);
	tcase_add_test(tc, test_park_wake);
	tcase_add_test(tc, test_wake_burst);
	tcase_add_test(tc, test_blocking);
	tcase_add_test(tc, test_many_end);
	tcase_add_test(tc, test_watch);	/* last: it unwatches (for CK_FORK=no) */
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
