/*
 * control_client.h - ternq's client of ternd's control socket (see
 * control_client.c): every call bounded by a deadline in ms_now()'s
 * clock; -1 with errno, ETIMEDOUT when the deadline passed.
 */
#ifndef TERN_CONTROL_CLIENT_H
#define TERN_CONTROL_CLIENT_H

#include <stddef.h>

#include "conf.h"

int control_connect(const struct conf *conf, long long deadline);
int control_line(int fd, char *answer, size_t len, long long deadline);
int control_send_req(int fd, const char *req, long long deadline);
int control_ask(int fd, const char *req, char *answer, size_t len, long long timeout_ms);

#endif
