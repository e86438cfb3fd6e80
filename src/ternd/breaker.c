/*
 * breaker - a relayed peer's circuit breaker and its token buckets.
 *
 * One state machine per peer: closed -> open -> half-open (exactly one
 * probe) -> closed, or open again. It opens after breaker_failures
 * consecutive connection, TLS or greeting failures, or when, over
 * breaker_window and at least BREAKER_MIN_ATTEMPTS attempts, more than
 * breaker_error_rate of them failed temporarily or the P99 transaction
 * time is over breaker_latency; transactions still running past
 * breaker_latency count as slow, and with fewer than
 * BREAKER_MIN_ATTEMPTS in the window it opens when one runs past it and
 * none in the window was faster. While open, nothing is tried and the
 * scheduler holds the peer's mail unread (breaker_due). After the
 * cooldown one probe goes through (half-open): a connection and its
 * transaction. If its transaction does not fail temporarily the breaker
 * closes, with the cooldown back at breaker_cooldown; if it fails the
 * breaker opens again for twice as long, up to breaker_max_cooldown.
 * Each change of state starts a new epoch: the results of attempts let
 * through before it are ignored, so that a success begun before an
 * opening does not close it, and failures of connections tried together
 * open it once, with one cooldown.
 * The buckets (max_message_rate with rate_burst, max_connection_rate)
 * refill smoothly. Pure: the caller locks and passes the time in.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "breaker.h"
#include "log.h"

/* breaker_stale - the pass was given before the latest change of state */
static int breaker_stale(const struct breaker *b, const struct breaker_pass *pass)
{
	return pass->epoch != b->epoch;
}

/* breaker_set - a change of state: a new epoch */
static void breaker_set(struct breaker *b, enum breaker_state state)
{
	b->state = state;
	b->epoch++;
	b->probing = 0;
	b->changed = 1;
}

/* breaker_allow - may an attempt go to this peer now? 1 with pass set;
 * a breaker whose cooldown is over turns half-open and lets exactly one
 * probe through, until that probe's verdict */
int breaker_allow(struct breaker *b, const struct conf_peer *p, uint64_t now,
		  struct breaker_pass *pass)
{
	*pass = (struct breaker_pass){b->epoch, 0, -1, 0};
	if (b->state == BREAKER_CLOSED)
		return 1;
	if (b->state == BREAKER_OPEN) {
		if (now < b->open_until)
			return 0;
		breaker_set(b, BREAKER_HALF_OPEN);
		log_info("peer %s: circuit breaker half-open: probing", p->name);
	}
	if (b->probing)
		return 0;
	b->probing = 1;
	*pass = (struct breaker_pass){b->epoch, 1, -1, 0};
	return 1;
}

/* breaker_open - open the breaker for cooldown_ms; what says why */
static void breaker_open(struct breaker *b, const struct conf_peer *p, const char *backup,
			 const char *what, long long cooldown_ms, uint64_t now)
{
	breaker_set(b, BREAKER_OPEN);
	b->cooldown_ms = cooldown_ms > 0 ? cooldown_ms : 0;
	b->open_until = now + (uint64_t)b->cooldown_ms * 1000;
	b->failures = 0;
	b->ring_len = 0;	/* after the cooldown, a fresh window */
	log_warning("peer %s: circuit breaker open for %llds %s%s%s", p->name, b->cooldown_ms / 1000,
		    what, backup ? "; its mail goes to " : "; its mail waits", backup ? backup : "");
}

/* breaker_probe_failed - the half-open probe failed: open again, for
 * twice the last cooldown, at least breaker_cooldown and at most
 * breaker_max_cooldown */
static void breaker_probe_failed(struct breaker *b, const struct conf_peer *p, const char *backup,
				 const char *why, uint64_t now)
{
	long long cooldown = b->cooldown_ms * 2;
	char what[700];

	if (cooldown < p->breaker_cooldown)
		cooldown = p->breaker_cooldown;
	if (cooldown > p->breaker_max_cooldown)
		cooldown = p->breaker_max_cooldown;
	snprintf(what, sizeof(what), "after a failed probe (%s)", why);
	breaker_open(b, p, backup, what, cooldown, now);
}

/* breaker_close - the probe went through: closed, the cooldown at its minimum */
static void breaker_close(struct breaker *b, const struct conf_peer *p)
{
	breaker_set(b, BREAKER_CLOSED);
	b->cooldown_ms = p->breaker_cooldown;
	b->failures = 0;
	b->ring_len = 0;
	log_info("peer %s: circuit breaker closed", p->name);
}

/* cmp_u32 - qsort order */
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* breaker_judge - a closed breaker over breaker_window: open it when, of
 * at least BREAKER_MIN_ATTEMPTS attempts, too many failed, or the P99
 * transaction time (transactions of this epoch still running past
 * breaker_latency counted at their time so far) is over breaker_latency; with fewer, when
 * a transaction runs past breaker_latency and none in the window was
 * faster */
static void breaker_judge(struct breaker *b, const struct conf_peer *p, const char *backup,
			  uint64_t now)
{
	uint64_t since = now - (uint64_t)p->breaker_window * 1000;
	uint32_t times[BREAKER_RING + BREAKER_INFLIGHT], p99, fastest = UINT32_MAX;
	size_t n = 0, nfail = 0, ntimes = 0, nrun = 0;
	char what[200], running[64] = "";

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
	if (p->breaker_error_rate > 0 && n >= BREAKER_MIN_ATTEMPTS
	    && (double)nfail > p->breaker_error_rate * (double)n) {
		snprintf(what, sizeof(what), "after %zu of %zu attempts in %llds failed temporarily "
			 "(breaker_error_rate %g)", nfail, n, p->breaker_window / 1000, p->breaker_error_rate);
		breaker_open(b, p, backup, what, p->breaker_cooldown, now);
		return;
	}
	if (p->breaker_latency <= 0)
		return;
	for (size_t k = 0; k < BREAKER_INFLIGHT; k++) {
		const struct breaker_flight *f = &b->inflight[k];
		uint64_t ms = f->start && f->epoch == b->epoch && now > f->start ? (now - f->start) / 1000 : 0;

		if ((long long)ms > p->breaker_latency) {
			times[ntimes++] = ms < UINT32_MAX ? (uint32_t)ms : UINT32_MAX - 1;
			nrun++;
		}
	}
	if (nrun)
		snprintf(running, sizeof(running), " (%zu still running)", nrun);
	if (ntimes >= BREAKER_MIN_ATTEMPTS) {
		qsort(times, ntimes, sizeof(times[0]), cmp_u32);
		p99 = times[(ntimes * 99 + 99) / 100 - 1];
		if ((long long)p99 <= p->breaker_latency)
			return;
		snprintf(what, sizeof(what), "after a P99 transaction time of %" PRIu32 "ms over %zu "
			 "transactions%s in %llds (breaker_latency %lldms)", p99, ntimes, running,
			 p->breaker_window / 1000, p->breaker_latency);
		breaker_open(b, p, backup, what, p->breaker_cooldown, now);
		return;
	}
	for (size_t k = 0; k < ntimes; k++)
		if (times[k] < fastest)
			fastest = times[k];
	if (nrun == 0 || (long long)fastest <= p->breaker_latency)
		return;
	snprintf(what, sizeof(what), "after %zu transaction%s running over %lldms and none faster "
		 "in %llds (breaker_latency %lldms)", nrun, nrun == 1 ? "" : "s", p->breaker_latency,
		 p->breaker_window / 1000, p->breaker_latency);
	breaker_open(b, p, backup, what, p->breaker_cooldown, now);
}

/* breaker_due - what the scheduler may offer the peer now: all that is
 * due (closed), one job for the probe (the cooldown is over and no probe
 * is out), or nothing; first judges the transactions still running */
enum breaker_offer breaker_due(struct breaker *b, const struct conf_peer *p, const char *backup,
			       uint64_t now)
{
	breaker_judge(b, p, backup, now);
	if (b->state == BREAKER_CLOSED)
		return BREAKER_GO;
	if (b->state == BREAKER_OPEN)
		return now >= b->open_until ? BREAKER_PROBE : BREAKER_HOLD;
	return b->probing ? BREAKER_HOLD : BREAKER_PROBE;
}

/* breaker_end - the pass's verdict is in: its transaction is no longer
 * in flight; 1 when it counts (not given already, not stale) */
static int breaker_end(struct breaker *b, struct breaker_pass *pass)
{
	if (pass->done)
		return 0;
	pass->done = 1;
	if (pass->slot >= 0 && pass->slot < BREAKER_INFLIGHT)
		b->inflight[pass->slot].start = 0;
	pass->slot = -1;
	return !breaker_stale(b, pass);
}

/* breaker_sample - keep an attempt's outcome in the ring */
static void breaker_sample(struct breaker *b, int failed, uint32_t ms, uint64_t now)
{
	b->ring[b->ring_next] = (struct breaker_sample){now, ms, failed};
	b->ring_next = (b->ring_next + 1) % BREAKER_RING;
	if (b->ring_len < BREAKER_RING)
		b->ring_len++;
}

/* breaker_result - count a connection's success or failure. A success
 * resets the count of consecutive failures (a probe's waits for its
 * transaction); a failure ends the pass: a probe's opens the breaker
 * again, the breaker_failures-th in a row opens it */
void breaker_result(struct breaker *b, const struct conf_peer *p, const char *backup,
		    struct breaker_pass *pass, int ok, const char *why, uint64_t now)
{
	char what[700];

	if (ok) {
		if (!pass->done && !pass->probe && !breaker_stale(b, pass))
			b->failures = 0;
		return;
	}
	if (!breaker_end(b, pass))
		return;
	if (pass->probe) {
		breaker_probe_failed(b, p, backup, why, now);
	} else if (++b->failures >= p->breaker_failures) {
		snprintf(what, sizeof(what), "after %d failure%s (%s)", b->failures,
			 b->failures == 1 ? "" : "s", why);
		breaker_open(b, p, backup, what, p->breaker_cooldown, now);
	} else {
		breaker_sample(b, 1, UINT32_MAX, now);
		breaker_judge(b, p, backup, now);
	}
}

/* breaker_begin - the pass's transaction starts: kept among those in
 * flight (if there is room) for breaker_latency */
void breaker_begin(struct breaker *b, struct breaker_pass *pass, uint64_t now)
{
	if (pass->done || pass->slot >= 0)
		return;
	for (int k = 0; k < BREAKER_INFLIGHT; k++)
		if (b->inflight[k].start == 0) {
			b->inflight[k] = (struct breaker_flight){now ? now : 1, pass->epoch};
			pass->slot = k;
			return;
		}
}

/* breaker_attempt - a transaction's outcome (ms: its time, UINT32_MAX
 * when none): the probe's closes the breaker or opens it again; in a
 * closed breaker it is kept for the error rate and the latency */
void breaker_attempt(struct breaker *b, const struct conf_peer *p, const char *backup,
		     struct breaker_pass *pass, int failed, uint32_t ms, uint64_t now)
{
	if (!breaker_end(b, pass))
		return;
	if (pass->probe) {
		if (failed)
			breaker_probe_failed(b, p, backup, "its transaction failed temporarily", now);
		else
			breaker_close(b, p);
		return;
	}
	breaker_sample(b, failed, ms, now);
	breaker_judge(b, p, backup, now);
}

/* breaker_cancel - the pass ends with nothing tried: a probe's leaves
 * the half-open breaker free to let another one through */
void breaker_cancel(struct breaker *b, struct breaker_pass *pass)
{
	if (breaker_end(b, pass) && pass->probe && b->state == BREAKER_HALF_OPEN)
		b->probing = 0;
}

/* breaker_reset - close the breaker now, as the admin asks (ternq peers
 * reset): a new epoch (what was under way counts for nothing), no probe
 * out, no failures counted, a fresh window, the first cooldown again; the
 * in-flight slots free themselves as their transactions end. Logs
 * nothing: the caller says who asked. */
void breaker_reset(struct breaker *b, const struct conf_peer *p, uint64_t now)
{
	(void)now;
	b->state = BREAKER_CLOSED;
	b->epoch++;
	b->probing = 0;
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
