/* trace.h - ternq trace, and the JSON helper ternq's commands share */
#ifndef TERN_TERNQ_TRACE_H
#define TERN_TERNQ_TRACE_H

#include <jansson.h>

#include "conf.h"
#include "json_text.h"
#include "store.h"

void print_json(json_t *o);
int ternq_trace(struct store *st, const struct conf *conf, const char *what, int by_rcpt, int json,
		int utc);

#endif
