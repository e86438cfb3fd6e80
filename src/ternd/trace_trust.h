/* trace_trust.h - the keys ternd verifies incoming trace contexts with */
#ifndef TERN_TRACE_TRUST_H
#define TERN_TRACE_TRUST_H

#include <stddef.h>

#include "conf.h"
#include "trace_header.h"

void trace_trust_load(const struct conf *conf, int reload);
enum trace_origin trace_trust_of(const char *hdr, size_t len, struct traceparent *tp);
void trace_trust_free(void);

#endif
