/* relay.h - delivery of queued mail to relay peers */
#ifndef TERN_RELAY_H
#define TERN_RELAY_H

#include <stddef.h>

#include "conf.h"
#include "qid.h"

void relay_prepare(void);
void relay_start(void);
void relay_stop(void);
void relay_reload(const struct conf *conf);

#endif
