/*
 * kept - the outcomes of delivery attempts that the committer could not
 * record (a full disk, an I/O error), kept in memory (at most
 * KEPT_MAX) so that their messages are not sent again
 * (kept_has: the scheduler does not offer them) until the outcome is
 * recorded. The storage state (storage.c) says when commits succeed
 * again; the scheduler's pass then records them (kept_retry), as many per
 * pass as KEPT_RETRY_PASS. After a restart a kept outcome is gone: its
 * message is sent again, once. Never decides an outcome, and never
 * writes to the store but through the committer.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kept.h"
#include "log.h"
#include "notice.h"
#include "peer.h"
#include "relay_result.h"
#include "storage.h"
#include "xalloc.h"

#define KEPT_RETRY_PASS 64		/* kept outcomes recorded per scheduler pass */
#define KEPT_STRIKES 3			/* a kept outcome that fails alone: dropped */

/* An outcome not recorded yet, with its own copies of what it points to. */
struct kept {
	struct result res;
	char *relay, *host, *peer;
	int strikes;			/* tries that failed while a probe did not */
};

static struct {
	pthread_mutex_t lock;
	struct kept *kept[KEPT_MAX];	/* sorted by queue id */
	size_t n;
	uint64_t dropped;		/* outcomes not kept: the bound was reached */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* find - where qid is in the kept outcomes, or would go (under the lock) */
static size_t find(const char *qid, int *found)
{
	size_t lo = 0, hi = st.n;

	*found = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(st.kept[mid]->res.qid, qid);

		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* kept_has - is qid's last outcome waiting here to be recorded? */
int kept_has(const char *qid)
{
	int found = 0;

	if (__atomic_load_n(&st.n, __ATOMIC_ACQUIRE) == 0)
		return 0;
	pthread_mutex_lock(&st.lock);
	find(qid, &found);
	pthread_mutex_unlock(&st.lock);
	return found;
}

/* kept_free - forget a kept outcome */
static void kept_free(struct kept **kp)
{
	struct kept *k = *kp;

	notice_draft_free(&k->res.draft);
	free(k->res.out);
	q_msg_clear(&k->res.msg);
	q_rcpts_free(&k->res.rcpts, k->res.nrcpts);
	free(k->relay);
	free(k->host);
	free(k->peer);
	free(k);
	*kp = NULL;
}

/*
 * kept_add - an attempt's outcome that the committer could not record
 * (why): keep it, taking over what res owns but its DSN draft (res is
 * left empty), and have the storage enter the failing state. 1 kept; 0
 * when KEPT_MAX are kept already (res is left as it was: its message may
 * be sent again).
 */
int kept_add(struct result *res, const char *peer, const char *why)
{
	struct kept *k;
	size_t at;
	int found, kept = 0;

	pthread_mutex_lock(&st.lock);
	at = find(res->qid, &found);
	if (!found && st.n < KEPT_MAX) {
		k = xcalloc(1, sizeof(*k));
		k->res = *res;
		k->relay = xstrdup(res->relay ? res->relay : "none");
		k->host = res->host ? xstrdup(res->host) : NULL;
		k->peer = xstrdup(peer);
		k->res.relay = k->relay;
		k->res.host = k->host;
		/* the DSN draft stays with the caller (up to about 150 KB):
		 * the write that records the outcome builds it (notice_put) */
		k->res.draft = NULL;
		memset(&res->msg, 0, sizeof(res->msg));
		res->out = NULL;
		res->nout = 0;
		res->rcpts = NULL;
		res->nrcpts = 0;
		memmove(&st.kept[at + 1], &st.kept[at], (st.n - at) * sizeof(st.kept[0]));
		st.kept[at] = k;
		__atomic_store_n(&st.n, st.n + 1, __ATOMIC_RELEASE);
		kept = 1;
	} else if (!found) {
		st.dropped++;
	}
	storage_fail(why, st.n, st.dropped);	/* under the lock: counts in order */
	pthread_mutex_unlock(&st.lock);
	return kept;
}

/* record - try to record one kept outcome through the committer; 0 done */
static int record(struct kept *k)
{
	if (storage_submit(relay_result_apply, &k->res) < 0)
		return -1;
	relay_result_done(&k->res, k->peer);
	return 0;
}

/* first - the first kept outcome (left in the table), or NULL. Its message
 * is not offered meanwhile: sched_load reads the queue id from here too */
static struct kept *first(void)
{
	struct kept *k;

	pthread_mutex_lock(&st.lock);
	k = st.n ? st.kept[0] : NULL;
	pthread_mutex_unlock(&st.lock);
	return k;
}

/* forget - remove k from the table */
static void forget(struct kept *k)
{
	size_t at;
	int found;

	pthread_mutex_lock(&st.lock);
	at = find(k->res.qid, &found);
	if (found) {
		memmove(&st.kept[at], &st.kept[at + 1], (st.n - at - 1) * sizeof(st.kept[0]));
		__atomic_store_n(&st.n, st.n - 1, __ATOMIC_RELEASE);
	}
	storage_kept_count(st.n);
	pthread_mutex_unlock(&st.lock);
	kept_free(&k);
}

/*
 * kept_retry - the scheduler's pass: while the storage fails, its probe
 * (storage_probe); otherwise the kept outcomes are recorded. One that
 * fails while a probe right after it succeeds is not failing for want of
 * storage: after KEPT_STRIKES such tries it is dropped (logged: its
 * message may be sent again), so that one outcome the store refuses never
 * holds up delivery.
 */
void kept_retry(void)
{
	struct kept *k;

	if (storage_probe())
		return;
	for (int i = 0; i < KEPT_RETRY_PASS && !peer_stopping() && (k = first()) != NULL; i++) {
		if (record(k) < 0) {
			if (storage_try() < 0)
				return;	/* the storage fails: not the outcome's fault */
			if (++k->strikes < KEPT_STRIKES)
				continue;
			log_error("%s: the outcome of its delivery attempt cannot be recorded, though "
				  "other writes succeed: dropped, the message may be sent again",
				  k->res.qid);
		}
		forget(k);
	}
}
