/*
 * window - the transactions in flight on one connection (see window.h):
 * which slot is the oldest, whether one more may be written. Replies are
 * matched to transactions by this order alone. Pure: no I/O, no clock,
 * no allocation; the caller holds whatever lock it needs.
 */
#include "config.h"

#include "window.h"

/* window_depth - max_pipeline_depth cut to 1..WINDOW_MAX */
static size_t window_depth(long long depth)
{
	return depth < 1 ? 1 : depth > WINDOW_MAX ? WINDOW_MAX : (size_t)depth;
}

/* window_init - an empty window of depth transactions (cut to
 * 1..WINDOW_MAX) and max_bytes octets of content (0: no bound) */
void window_init(struct window *w, long long depth, uint64_t max_bytes)
{
	w->depth = window_depth(depth);
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

/* window_cc_init - a congestion window that starts small: one
 * transaction in flight, slow start up to the whole depth */
void window_cc_init(struct window_cc *cc, long long depth)
{
	cc->max = (uint32_t)window_depth(depth);
	cc->cwnd = 1;
	cc->ssthresh = cc->max;
	cc->acked = cc->eased = 0;
	cc->base_us = 0;
}

/* window_cc_depth - max_pipeline_depth as a reload set it: the window
 * and ssthresh cut to it, or free to grow to it */
void window_cc_depth(struct window_cc *cc, long long depth)
{
	uint32_t max = (uint32_t)window_depth(depth);

	if (max == cc->max)
		return;
	if (cc->ssthresh == cc->max || cc->ssthresh > max)
		cc->ssthresh = max;
	cc->max = max;
	if (cc->cwnd > max)
		cc->cwnd = max;
}

/* window_cc_queued - the transactions queued at the peer, by the round
 * trip sample rtt_us against the base (Vegas's diff), in sixteenths */
static uint64_t window_cc_queued(const struct window_cc *cc, uint64_t rtt_us)
{
	if (rtt_us == 0 || rtt_us <= cc->base_us)
		return 0;
	return (uint64_t)cc->cwnd * 16 * (rtt_us - cc->base_us) / rtt_us;
}

/* window_cc_ack - a final reply was read on a connection that goes on,
 * rtt_us after its commands were written (0: no sample); limited: the
 * window was full and the reply had not come yet. It grows (one more in
 * slow start, else one more per window answered in full) while it held
 * the connection up and little is queued at the peer, shrinks by one per
 * window while much is, and holds between. */
void window_cc_ack(struct window_cc *cc, uint64_t rtt_us, int limited)
{
	uint64_t queued;

	if (rtt_us && (cc->base_us == 0 || rtt_us < cc->base_us))
		cc->base_us = rtt_us;
	queued = window_cc_queued(cc, rtt_us);
	if (queued > WINDOW_QUEUE_HIGH * 16) {
		cc->acked = 0;
		if (cc->cwnd > 1 && ++cc->eased >= cc->cwnd) {
			cc->eased = 0;
			cc->cwnd--;
			if (cc->ssthresh > cc->cwnd)
				cc->ssthresh = cc->cwnd < 2 ? 2 : cc->cwnd;	/* slow start is over */
		}
		return;
	}
	cc->eased = 0;
	if (!limited || queued >= WINDOW_QUEUE_LOW * 16 || cc->cwnd >= cc->max)
		return;
	if (cc->cwnd < cc->ssthresh) {
		cc->cwnd++;
		return;
	}
	if (++cc->acked >= cc->cwnd) {
		cc->acked = 0;
		cc->cwnd++;
	}
}

/* window_cc_loss - a connection was lost with inflight transactions
 * unanswered (0: nothing was at stake, nothing changes): back to one,
 * ssthresh at half of what was in flight, at least 2 */
void window_cc_loss(struct window_cc *cc, size_t inflight)
{
	size_t half = inflight / 2;

	if (inflight == 0)
		return;
	cc->ssthresh = half < 2 ? 2 : half > cc->max ? cc->max : (uint32_t)half;
	cc->cwnd = 1;
	cc->acked = cc->eased = 0;
}
