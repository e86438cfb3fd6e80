/*
 * clients - inbound sessions per client address (see clients.h). Never
 * locks, logs or reads a socket: listen.c calls it under its
 * sessions lock.
 */
#include "config.h"

#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clients.h"
#include "xalloc.h"

struct client_entry {
	struct client_entry *next;
	struct client_addr addr;
	long long sessions;
};

/* client_addr_of - the counted address of a peer (IPv4-mapped IPv6 as
 * IPv4); family 0 for anything else (a unix socket) */
void client_addr_of(const struct sockaddr *sa, struct client_addr *a)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	memset(a, 0, sizeof(*a));
	if (sa->sa_family == AF_INET) {
		a->family = AF_INET;
		memcpy(a->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const unsigned char *p = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;

		if (memcmp(p, mapped, sizeof(mapped)) == 0) {
			a->family = AF_INET;
			memcpy(a->addr, p + 12, 4);
		} else {
			a->family = AF_INET6;
			memcpy(a->addr, p, 16);
		}
	}
}

/* bucket_of - the chain an address is on (FNV-1a) */
static struct client_entry **bucket_of(struct clients *c, const struct client_addr *a)
{
	uint32_t h = 2166136261u ^ (uint32_t)a->family;

	for (size_t i = 0; i < sizeof(a->addr); i++)
		h = (h ^ a->addr[i]) * 16777619u;
	return &c->bucket[h % CLIENTS_BUCKETS];
}

/* find - the link that points at a's entry (at the chain's end if none) */
static struct client_entry **find(struct clients *c, const struct client_addr *a)
{
	struct client_entry **e = bucket_of(c, a);

	while (*e && !((*e)->addr.family == a->family
		       && memcmp((*e)->addr.addr, a->addr, sizeof(a->addr)) == 0))
		e = &(*e)->next;
	return e;
}

/* clients_take - one more session for a: 1, or 0 when a has limit
 * sessions already (an address of family 0 is not counted: 1) */
int clients_take(struct clients *c, const struct client_addr *a, long long limit)
{
	struct client_entry **e;

	if (a->family == 0)
		return 1;
	e = find(c, a);
	if (*e == NULL) {
		if (limit <= 0)
			return 0;
		*e = xcalloc(1, sizeof(**e));
		(*e)->addr = *a;
		c->addrs++;
	} else if ((*e)->sessions >= limit) {
		return 0;
	}
	(*e)->sessions++;
	return 1;
}

/* clients_give - a session of a ended (one clients_take passed) */
void clients_give(struct clients *c, const struct client_addr *a)
{
	struct client_entry **e, *gone;

	if (a->family == 0 || *(e = find(c, a)) == NULL)
		return;
	if (--(*e)->sessions > 0)
		return;
	gone = *e;
	*e = gone->next;
	free(gone);
	c->addrs--;
}

/* clients_count - a's sessions now */
long long clients_count(struct clients *c, const struct client_addr *a)
{
	struct client_entry **e = find(c, a);

	return *e ? (*e)->sessions : 0;
}
