/*
 * addr.h - "A.B.C.D:PORT" parsing shared by the bench tools (delay-proxy,
 * chunk-sink). IPv4 literals only: the tools are meant for 127.0.0.0/8.
 */
#ifndef BENCH_ADDR_H
#define BENCH_ADDR_H

#include <netinet/in.h>

int addr_parse(const char *s, struct sockaddr_in *sin);

#endif
