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
 *
 * How much of the depth is used is the congestion window's (struct
 * window_cc), after TCP's (RFC 5681) with Vegas's measure of the queue
 * (Brakmo and Peterson, 1995): a lost connection costs every transaction
 * in flight on it a possible second copy, and a transaction that waits in
 * the peer's queue buys no throughput, only that risk. So the window
 * starts at one transaction; each final reply read gives a round trip
 * sample (its commands written to its final reply read), the smallest
 * seen being the base; from them, the transactions queued at the peer
 * are cwnd x (rtt - base) / rtt. While fewer than WINDOW_QUEUE_LOW are
 * queued and the window held the connection up (it was full and the
 * reply had not come yet: RFC 7661's rule, no growth for a window that
 * was not used), it grows by one per reply (slow start: it doubles per
 * round trip) up to ssthresh, then by one per window answered in full;
 * with more than WINDOW_QUEUE_HIGH queued it shrinks by one per window.
 * A connection lost with transactions in flight cuts it to one and
 * ssthresh to half of what was in flight (at least 2). On loopback, where
 * the round trip is nothing, it stays near one or two; across a WAN it
 * grows to what the round trip needs. Each peer keeps one, shared by its
 * connections, and each connection its own from the moment it opens: a
 * connection writes within the smaller of the two, so a fault, a new
 * connection or a restart starts small.
 */
#ifndef TERN_WINDOW_H
#define TERN_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#define WINDOW_MAX 256			/* max_pipeline_depth is cut to this */
#define WINDOW_QUEUE_LOW 1		/* transactions queued at the peer: grow below */
#define WINDOW_QUEUE_HIGH 3		/* shrink above */

struct window {
	size_t depth;			/* most transactions in flight, 1..WINDOW_MAX */
	uint64_t max_bytes;		/* most content octets in flight; 0: no bound */
	size_t head, count;		/* the ring: slot of the oldest, how many */
	uint64_t bytes;			/* content octets in flight */
	uint64_t size[WINDOW_MAX];	/* per slot: its content octets */
};

/* The congestion window of a peer or of one connection (window_cc_*). */
struct window_cc {
	uint32_t cwnd;			/* transactions that may be in flight, 1..max */
	uint32_t ssthresh;		/* below it, slow start; from it, additive */
	uint32_t max;			/* max_pipeline_depth, cut to 1..WINDOW_MAX */
	uint32_t acked;			/* final replies counted toward the next +1 */
	uint32_t eased;			/* ... toward the next -1 */
	uint64_t base_us;		/* the smallest round trip seen; 0: none yet */
};

void window_init(struct window *w, long long depth, uint64_t max_bytes);
int window_room(const struct window *w, uint64_t size);
size_t window_push(struct window *w, uint64_t size);
size_t window_oldest(const struct window *w);
size_t window_nth(const struct window *w, size_t k);
void window_pop(struct window *w);
void window_cc_init(struct window_cc *cc, long long depth);
void window_cc_depth(struct window_cc *cc, long long depth);
void window_cc_ack(struct window_cc *cc, uint64_t rtt_us, int limited);
void window_cc_loss(struct window_cc *cc, size_t inflight);

#endif
