/*
 * addr.c - "A.B.C.D:PORT" into a sockaddr_in, for the bench tools.
 *
 * Pure: no I/O, no globals. Never accepts a host name (no resolver in a
 * benchmark's timing) or a port outside 1..65535.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"

/* addr_parse - "A.B.C.D:PORT" into sin; -1 if malformed */
int addr_parse(const char *s, struct sockaddr_in *sin)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port < 1 || port > 65535)
		return -1;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
}
