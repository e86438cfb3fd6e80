/*
 * milter.h - what tern-milter's startup code and its libmilter callbacks
 * share: the current configuration generation and the session count.
 */
#ifndef TERN_MILTER_H
#define TERN_MILTER_H

#include <libmilter/mfapi.h>

#include "conf.h"
#include "traceparent.h"

/* One configuration generation; sessions hold a reference for their life. */
struct milter_cfg {
	int refs;
	struct conf *conf;
	struct trace_keys keys;		/* none when trace = no */
};

struct milter_cfg *milter_cfg_get(void);
void milter_cfg_put(struct milter_cfg **cfg);
void milter_session_count(int delta);
void milter_metrics_init(void);
struct metric;
extern struct metric *milter_journal_dropped;	/* journal.c bumps it */

extern struct smfiDesc milter_desc;

struct journal_rec;
void journal_start(const struct conf *conf);
void journal_stop(void);
void journal_add(const struct journal_rec *r);

#endif
