/*
 * window - the transactions in flight on one connection (see window.h):
 * which slot is the oldest, whether one more may be written. Replies are
 * matched to transactions by this order alone. Pure: no I/O, no clock,
 * no allocation; the caller holds whatever lock it needs.
 */
#include "config.h"

#include "window.h"

/* window_init - an empty window of depth transactions (cut to
 * 1..WINDOW_MAX) and max_bytes octets of content (0: no bound) */
void window_init(struct window *w, long long depth, uint64_t max_bytes)
{
	w->depth = depth < 1 ? 1 : depth > WINDOW_MAX ? WINDOW_MAX : (size_t)depth;
	w->max_bytes = max_bytes;
	w->head = w->count = 0;
	w->bytes = 0;
}

/* window_room - may a transaction of size octets be written now? Always
 * into an empty window (a message larger than the bound goes alone),
 * else within both bounds */
int window_room(const struct window *w, uint64_t size)
{
	if (w->count == 0)
		return 1;
	if (w->count >= w->depth)
		return 0;
	return w->max_bytes == 0 || (w->bytes <= w->max_bytes && size <= w->max_bytes - w->bytes);
}

/* window_push - a transaction is written: the newest; its slot (the
 * caller checked window_room) */
size_t window_push(struct window *w, uint64_t size)
{
	size_t slot = (w->head + w->count) % w->depth;

	w->size[slot] = size;
	w->bytes += size;
	w->count++;
	return slot;
}

/* window_oldest - the slot whose replies are read next (count > 0) */
size_t window_oldest(const struct window *w)
{
	return w->head;
}

/* window_nth - the slot of the kth oldest transaction, 0 the oldest
 * (k < count) */
size_t window_nth(const struct window *w, size_t k)
{
	return (w->head + k) % w->depth;
}

/* window_pop - the oldest transaction's final reply was read, or it was
 * given up: the next one is the oldest */
void window_pop(struct window *w)
{
	if (w->count == 0)
		return;
	w->bytes -= w->size[w->head];
	w->head = (w->head + 1) % w->depth;
	w->count--;
}
