/*
 * window.h - the transactions in flight on one connection to a relay
 * peer that offers CHUNKING and PIPELINING (RFC 2920 section 3.1, RFC
 * 3030): with BDAT nothing waits for a 354, so transaction after
 * transaction is written and their replies are read strictly in the
 * order written. The window is the bookkeeping of that: a ring of slot
 * numbers, oldest first, bounded by max_pipeline_depth transactions and
 * max_pipeline_bytes of content; a message larger than the byte bound
 * goes alone. Pure: never reads or writes a socket, the store or a clock,
 * never allocates; the caller keeps what each slot holds.
 *
 *     struct window w;
 *     window_init(&w, depth, max_bytes);
 *     while (window_room(&w, size)) slot = window_push(&w, size), write it;
 *     slot = window_oldest(&w); read its replies; window_pop(&w);
 */
#ifndef TERN_WINDOW_H
#define TERN_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#define WINDOW_MAX 256			/* max_pipeline_depth is cut to this */

struct window {
	size_t depth;			/* most transactions in flight, 1..WINDOW_MAX */
	uint64_t max_bytes;		/* most content octets in flight; 0: no bound */
	size_t head, count;		/* the ring: slot of the oldest, how many */
	uint64_t bytes;			/* content octets in flight */
	uint64_t size[WINDOW_MAX];	/* per slot: its content octets */
};

void window_init(struct window *w, long long depth, uint64_t max_bytes);
int window_room(const struct window *w, uint64_t size);
size_t window_push(struct window *w, uint64_t size);
size_t window_oldest(const struct window *w);
size_t window_nth(const struct window *w, size_t k);
void window_pop(struct window *w);

#endif
