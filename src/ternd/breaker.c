/*
 * breaker - a relayed peer's circuit breaker and its token buckets.
 *
 * The breaker opens after breaker_failures consecutive connection, TLS
 * or greeting failures, or when, over breaker_window and at least
 * BREAKER_MIN_ATTEMPTS attempts, more than breaker_error_rate of them
 * failed temporarily or the P99 transaction time is over
 * breaker_latency. While open, nothing is tried; after the cooldown one
 * probe goes through (half-open): its success closes the breaker, its
 * failure opens it again for twice as long, up to breaker_max_cooldown.
 * The buckets (max_message_rate with rate_burst, max_connection_rate)
 * refill smoothly. Pure: the caller locks and passes the time in.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "breaker.h"
#include "log.h"

/* breaker_allow - may we connect to this peer now? A half-open breaker
 * lets exactly one probe through. */
int breaker_allow(struct breaker *b, const char *peer, uint64_t now)
{
	if (b->state == BREAKER_OPEN && now >= b->open_until) {
		b->state = BREAKER_HALF_OPEN;
		b->changed = 1;
		log_info("peer %s: circuit breaker half-open: probing", peer);
		return 1;
	}
	return b->state == BREAKER_CLOSED;
}

/* breaker_open - open the breaker; what says why */
static void breaker_open(struct breaker *b, const struct conf_peer *p, const char *backup,
			 const char *what, uint64_t now)
{
	if (b->cooldown_ms <= 0)
		b->cooldown_ms = p->breaker_cooldown;
	b->state = BREAKER_OPEN;
	b->changed = 1;
	b->open_until = now + (uint64_t)b->cooldown_ms * 1000;
	b->ring_len = 0;	/* after the cooldown, a fresh window */
	log_warning("peer %s: circuit breaker open for %llds %s%s%s", p->name, b->cooldown_ms / 1000,
		    what, backup ? "; its mail goes to " : "; its mail waits", backup ? backup : "");
	b->cooldown_ms *= 2;
	if (b->cooldown_ms > p->breaker_max_cooldown)
		b->cooldown_ms = p->breaker_max_cooldown;
}

/* cmp_u32 - qsort order */
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* breaker_attempt - keep an attempt's outcome (ms: its transaction time,
 * UINT32_MAX when none); open the breaker when, over breaker_window and
 * at least BREAKER_MIN_ATTEMPTS attempts, too many failed or the P99
 * transaction time is over breaker_latency */
void breaker_attempt(struct breaker *b, const struct conf_peer *p, const char *backup, int failed,
		     uint32_t ms, uint64_t now)
{
	uint64_t since = now - (uint64_t)p->breaker_window * 1000;
	uint32_t times[BREAKER_RING];
	size_t n = 0, nfail = 0, ntimes = 0;
	char what[200];

	b->ring[b->ring_next] = (struct breaker_sample){now, ms, failed};
	b->ring_next = (b->ring_next + 1) % BREAKER_RING;
	if (b->ring_len < BREAKER_RING)
		b->ring_len++;
	if (b->state != BREAKER_CLOSED || (p->breaker_error_rate <= 0 && p->breaker_latency <= 0))
		return;
	for (size_t k = 1; k <= b->ring_len; k++) {
		const struct breaker_sample *a = &b->ring[(b->ring_next + BREAKER_RING - k) % BREAKER_RING];

		if (a->at < since)
			break;	/* older ones are older still */
		n++;
		nfail += a->failed != 0;
		if (a->ms != UINT32_MAX)
			times[ntimes++] = a->ms;
	}
	if (n < BREAKER_MIN_ATTEMPTS)
		return;
	if (p->breaker_error_rate > 0 && (double)nfail > p->breaker_error_rate * (double)n) {
		snprintf(what, sizeof(what), "after %zu of %zu attempts in %llds failed temporarily "
			 "(breaker_error_rate %g)", nfail, n, p->breaker_window / 1000, p->breaker_error_rate);
		breaker_open(b, p, backup, what, now);
	} else if (p->breaker_latency > 0 && ntimes >= BREAKER_MIN_ATTEMPTS) {
		uint32_t p99;

		qsort(times, ntimes, sizeof(times[0]), cmp_u32);
		p99 = times[(ntimes * 99 + 99) / 100 - 1];
		if ((long long)p99 > p->breaker_latency) {
			snprintf(what, sizeof(what), "after a P99 transaction time of %" PRIu32 "ms over %zu "
				 "transactions in %llds (breaker_latency %lldms)", p99, ntimes,
				 p->breaker_window / 1000, p->breaker_latency);
			breaker_open(b, p, backup, what, now);
		}
	}
}

/* breaker_result - count a connection's success or failure */
void breaker_result(struct breaker *b, const struct conf_peer *p, const char *backup, int ok,
		    const char *why, uint64_t now)
{
	char what[700];

	if (ok) {
		if (b->state != BREAKER_CLOSED)
			log_info("peer %s: circuit breaker closed", p->name);
		b->state = BREAKER_CLOSED;
		b->changed = 1;
		b->failures = 0;
		b->cooldown_ms = p->breaker_cooldown;
	} else if (++b->failures >= p->breaker_failures || b->state == BREAKER_HALF_OPEN) {
		snprintf(what, sizeof(what), "after %d failure%s (%s)", b->failures,
			 b->failures == 1 ? "" : "s", why);
		breaker_open(b, p, backup, what, now);
	} else {
		breaker_attempt(b, p, backup, 1, UINT32_MAX, now);
	}
}

/* breaker_reset - close the breaker now, as the admin asks (ternq peers
 * reset): no failures counted, a fresh window, the first cooldown again.
 * Logs nothing: the caller says who asked. */
void breaker_reset(struct breaker *b, const struct conf_peer *p, uint64_t now)
{
	(void)now;
	b->state = BREAKER_CLOSED;
	b->changed = 1;
	b->failures = 0;
	b->open_until = 0;
	b->cooldown_ms = p->breaker_cooldown;
	b->ring_len = 0;
}

/* bucket_take - take a token from the bucket, refilled smoothly with one
 * token per interval_us and holding at most burst; 0 when taken (or no
 * limit), else the microseconds until one is there */
uint64_t bucket_take(struct bucket *b, long long interval_us, double burst, uint64_t now)
{
	if (interval_us <= 0)
		return 0;
	if (b->refilled == 0) {
		b->tokens = burst;
		b->refilled = now;
	}
	b->tokens += (double)(now - b->refilled) / (double)interval_us;
	if (b->tokens > burst)
		b->tokens = burst;
	b->refilled = now;
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
		return 0;
	}
	return (uint64_t)((1.0 - b->tokens) * (double)interval_us) + 1;
}

/* rate_burst - the peer's max_message_rate bucket size */
double rate_burst(const struct conf_peer *p)
{
	return p->rate_burst > 0 ? (double)p->rate_burst : 1.0;
}
