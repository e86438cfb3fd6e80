/*
 * clients.h - inbound sessions per client address, for
 * max_client_sessions (what Postfix's anvil counts for
 * smtpd_client_connection_count_limit). A table of the addresses that
 * have sessions now: an address enters with its first session and
 * leaves with its last, so the table holds at most one entry per open
 * session. An IPv4-mapped IPv6 address counts as its IPv4 address. Pure:
 * no lock (the caller's), no I/O, no clock, no logging; allocates one
 * entry per address.
 *
 *     static struct clients c;          (zero: empty)
 *     struct client_addr a;
 *     client_addr_of(sa, &a);
 *     if (!clients_take(&c, &a, limit)) refuse; ... clients_give(&c, &a);
 */
#ifndef TERN_CLIENTS_H
#define TERN_CLIENTS_H

#include <stddef.h>
#include <sys/socket.h>

#define CLIENTS_BUCKETS 1024

struct client_addr {
	int family;			/* AF_INET or AF_INET6; 0: not counted */
	unsigned char addr[16];
};

struct clients {
	struct client_entry *bucket[CLIENTS_BUCKETS];
	size_t addrs;			/* addresses with sessions */
};

void client_addr_of(const struct sockaddr *sa, struct client_addr *a);
int clients_take(struct clients *c, const struct client_addr *a, long long limit);
void clients_give(struct clients *c, const struct client_addr *a);
long long clients_count(struct clients *c, const struct client_addr *a);

#endif
