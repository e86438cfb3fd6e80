/*
 * sched.h - the scheduler: what is due, per peer. Its thread reads the
 * schedule index peer by peer, once a second or when kicked, and offers
 * each relayed peer's messages due now to that peer's job queue, once
 * (the busy set), until the queue is full; it routes again the mail of
 * a peer a reload removed, and queues waiting DSNs. A delivery thread
 * loads a job as an attempt (sched_load: this peer's recipients due
 * now), and gives it back when done (sched_release) or, when the
 * connection died before any of its replies, to the front of the queue
 * (sched_requeue). Never talks to a peer, never writes the store but
 * through the committer.
 */
#ifndef TERN_SCHED_H
#define TERN_SCHED_H

#include "conf.h"
#include "peer.h"
#include "attempt.h"

/* what the layer above runs in each pass of the scheduler: before, at its
 * start (the relay records the outcomes it kept while the disk failed);
 * after, once the peers were scanned and mail routed again (it queues
 * the notifications waiting); held, asked of each message due: one the
 * relay holds back (an outcome it keeps) is not offered */
struct sched_hooks {
	void (*before)(void);
	void (*after)(void);
	int (*held)(const char *qid);
};

void sched_start(const struct sched_hooks *hooks);
void sched_kick(void);
void sched_stop(void);
int sched_load(struct attempt *a, struct peer_rt *home, const struct conf_peer *p,
	       const char *qid);
void sched_skip(struct peer_rt *home, const char *qid);
void sched_release(struct attempt *a);
void sched_requeue(struct attempt *a);

#endif
