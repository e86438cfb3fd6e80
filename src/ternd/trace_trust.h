/* trace_trust.h - the keys ternd verifies incoming trace contexts with */
#ifndef TERN_TRACE_TRUST_H
#define TERN_TRACE_TRUST_H

#include <stddef.h>

#include "conf.h"

void trace_trust_load(const struct conf *conf, int reload);
int trace_trust_verify(const char *tpvalue, const char *msgid, size_t msgid_len, const char *sig);
void trace_trust_free(void);

#endif
