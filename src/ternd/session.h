/* session.h - one inbound SMTP or LMTP session */
#ifndef TERN_SESSION_H
#define TERN_SESSION_H

#include "conf.h"

void session_run(int fd, int lmtp, const char *client);
void session_trace_key(const struct conf *conf);
void session_trace_key_free(void);

#endif
