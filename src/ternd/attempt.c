/*
 * attempt - an attempt's outcomes (see attempt.h): one per recipient, set
 * from the peer's replies or from a failure, each once. Pure: no I/O, no
 * store, no lock.
 */
#include "config.h"

#include <stdio.h>

#include "attempt.h"

/* outcome_set - one recipient's outcome from a reply (or a failure text) */
void outcome_set(struct outcome *o, uint32_t idx, int code, const char *esc, const char *text)
{
	o->idx = idx;
	o->state = code >= 200 && code < 300 ? RCPT_SENT : code >= 500 ? RCPT_BOUNCED : RCPT_DEFERRED;
	/* without an enhanced status code, the class's generic one (as Postfix) */
	snprintf(o->esc, sizeof(o->esc), "%s", esc && esc[0] ? esc
		 : o->state == RCPT_SENT ? "2.0.0" : o->state == RCPT_DEFERRED ? "4.0.0" : "5.0.0");
	snprintf(o->reply, sizeof(o->reply), "%s", text);
}

/* attempt_outcome - the outcome of the attempt's recipient todo[i] */
void attempt_outcome(struct attempt *a, size_t i, int code, const char *esc, const char *text)
{
	outcome_set(&a->res.out[a->res.nout++], a->todo[i]->idx, code, esc, text);
	a->told[i] = 1;
}

/* attempt_outcome_rest - every recipient of the attempt without an outcome
 * gets this one, in their order */
void attempt_outcome_rest(struct attempt *a, int code, const char *esc, const char *text)
{
	for (size_t i = 0; i < a->ntodo; i++)
		if (!a->told[i])
			attempt_outcome(a, i, code, esc, text);
}
