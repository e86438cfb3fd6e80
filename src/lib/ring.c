/*
 * ring - a bounded queue of items and its writer thread. The lock is
 * held only to copy items in and out, never while the callback runs, so
 * a producer never waits on the disk; nothing is allocated after
 * ring_start.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ring.h"
#include "xalloc.h"

struct ring {
	pthread_mutex_t lock;
	pthread_cond_t work;
	unsigned char *slots, *batch;	/* cap items each */
	size_t item_size, cap, head, count;
	unsigned long long dropped;
	int running, stopping;
	pthread_t thread;
	const char *name, *noun;
	ring_write_fn write;
	void *arg;
};

/* ring_put - copy one item in; 0, or -1 when full (counted) or stopped */
int ring_put(struct ring *r, const void *item)
{
	int full;

	if (r == NULL)
		return RING_STOPPED;
	pthread_mutex_lock(&r->lock);
	if (!r->running || r->stopping || r->count == r->cap) {
		full = r->running && !r->stopping;
		r->dropped += full;
		pthread_mutex_unlock(&r->lock);
		return full ? RING_FULL : RING_STOPPED;
	}
	memcpy(r->slots + (r->head + r->count++) % r->cap * r->item_size, item, r->item_size);
	pthread_cond_signal(&r->work);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

/* writer - the ring's thread: take what is queued, hand it on as a batch */
static void *writer(void *arg)
{
	struct ring *r = arg;

	for (;;) {
		unsigned long long dropped;
		size_t n = 0;

		pthread_mutex_lock(&r->lock);
		while (r->count == 0 && !r->stopping)
			pthread_cond_wait(&r->work, &r->lock);
		for (; r->count > 0; r->count--, n++) {
			memcpy(r->batch + n * r->item_size, r->slots + r->head * r->item_size,
			       r->item_size);
			r->head = (r->head + 1) % r->cap;
		}
		dropped = r->dropped;
		r->dropped = 0;
		pthread_mutex_unlock(&r->lock);
		if (dropped)
			log_warning("%s: %llu %s%s dropped: the writer could not keep up", r->name,
				    dropped, r->noun, dropped == 1 ? "" : "s");
		if (n == 0)
			break;	/* stopping, and drained */
		r->write(r->batch, n, r->arg);
	}
	return NULL;
}

/* ring_start - a ring of cap items and its running writer; NULL (and
 * nothing left behind) when the thread cannot start */
struct ring *ring_start(const char *name, const char *noun, size_t item_size, size_t cap,
			ring_write_fn write, void *arg)
{
	struct ring *r = xcalloc(1, sizeof(*r));

	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->work, NULL);
	r->slots = xcalloc(cap, item_size);
	r->batch = xcalloc(cap, item_size);
	r->item_size = item_size;
	r->cap = cap;
	r->name = name;
	r->noun = noun;
	r->write = write;
	r->arg = arg;
	r->running = 1;		/* before the thread: it is never written again */
	if (pthread_create(&r->thread, NULL, writer, r) != 0) {
		r->running = 0;
		ring_free(&r);
		return NULL;
	}
	return r;
}

/* ring_stop - write what is queued, then stop the thread; later puts
 * are refused */
void ring_stop(struct ring *r)
{
	int running;

	if (r == NULL)
		return;
	pthread_mutex_lock(&r->lock);
	running = r->running && !r->stopping;
	r->stopping = 1;
	pthread_cond_signal(&r->work);
	pthread_mutex_unlock(&r->lock);
	if (running)
		pthread_join(r->thread, NULL);
}

/* ring_free - stop the ring and free it; no producer may use it after */
void ring_free(struct ring **r)
{
	if (*r == NULL)
		return;
	ring_stop(*r);
	pthread_mutex_destroy(&(*r)->lock);
	pthread_cond_destroy(&(*r)->work);
	free((*r)->slots);
	free((*r)->batch);
	free(*r);
	*r = NULL;
}
