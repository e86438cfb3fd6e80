/*
 * cidr - lists of IPv4/IPv6 networks and matching.
 *
 * Never resolves names: a list entry that is not a literal is an error.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cidr.h"
#include "xalloc.h"

#define CIDR_TEXT_MAX 64

/* cidr_parse_one - parse "addr[/bits]" (optionally "[addr]/bits") */
static int cidr_parse_one(const char *s, size_t len, struct cidr *out, const char **why)
{
	char buf[CIDR_TEXT_MAX];
	char *slash, *addr = buf;
	unsigned long bits;
	unsigned max;

	if (len >= sizeof(buf)) {
		*why = "network address too long";
		return -1;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	if (addr[0] == '[') {
		size_t al = strlen(addr);

		if (al < 2 || addr[al - 1] != ']') {
			*why = "bad network address";
			return -1;
		}
		addr[al - 1] = '\0';
		addr++;
	}
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, addr, out->addr) == 1) {
		out->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
		out->family = AF_INET6;
		max = 128;
	} else {
		*why = "bad network address (expected IPv4 or IPv6 literal)";
		return -1;
	}
	bits = max;
	if (slash) {
		char *end;

		if (slash[1] < '0' || slash[1] > '9' || strlen(slash + 1) > 3) {
			*why = "bad prefix length";
			return -1;
		}
		bits = strtoul(slash + 1, &end, 10);
		if (*end != '\0' || bits > max) {
			*why = "bad prefix length";
			return -1;
		}
	}
	out->bits = (unsigned)bits;
	/* Postfix refuses "10.1.2.3/8"; so do we: the admin meant something. */
	for (unsigned i = out->bits; i < max; i++) {
		if (out->addr[i / 8] & (0x80 >> (i % 8))) {
			*why = "network address has bits set beyond the prefix length";
			return -1;
		}
	}
	return 0;
}

/* cidr_list_parse - parse a comma/space separated list of networks */
struct cidr_list *cidr_list_parse(const char *text, const char **why)
{
	struct cidr_list *list = xcalloc(1, sizeof(*list));
	const char *p = text;

	for (;;) {
		size_t len;

		p += strspn(p, ", \t");
		if (*p == '\0')
			break;
		len = strcspn(p, ", \t");
		list->nets = xreallocarray(list->nets, list->count + 1, sizeof(*list->nets));
		if (cidr_parse_one(p, len, &list->nets[list->count], why) < 0) {
			cidr_list_free(&list);
			return NULL;
		}
		list->count++;
		p += len;
	}
	return list;
}

/* cidr_list_free - release a list and clear the pointer */
void cidr_list_free(struct cidr_list **list)
{
	if (*list == NULL)
		return;
	free((*list)->nets);
	free(*list);
	*list = NULL;
}

/* cidr_match_bytes - does addr of family match the list */
static int cidr_match_bytes(const struct cidr_list *list, int family, const unsigned char *addr)
{
	static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (family == AF_INET6 && memcmp(addr, v4mapped, sizeof(v4mapped)) == 0) {
		family = AF_INET;
		addr += 12;
	}
	for (size_t i = 0; list && i < list->count; i++) {
		const struct cidr *n = &list->nets[i];
		unsigned full = n->bits / 8, rem = n->bits % 8;

		if (n->family != family || memcmp(n->addr, addr, full) != 0)
			continue;
		if (rem == 0 || ((addr[full] ^ n->addr[full]) & (0xff << (8 - rem)) & 0xff) == 0)
			return 1;
	}
	return 0;
}

/* cidr_list_match - does the socket address match the list */
int cidr_list_match(const struct cidr_list *list, const struct sockaddr *sa)
{
	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET)
		return cidr_match_bytes(list, AF_INET,
			(const unsigned char *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr);
	if (sa->sa_family == AF_INET6)
		return cidr_match_bytes(list, AF_INET6,
			((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr);
	return 0;
}

/* cidr_list_match_str - does the textual address (optionally [bracketed]) match */
int cidr_list_match_str(const struct cidr_list *list, const char *addr)
{
	struct cidr one;
	const char *why;

	if (addr == NULL || strchr(addr, '/') != NULL)
		return 0;
	if (strncasecmp(addr, "IPv6:", 5) == 0)	/* Sendmail's form */
		addr += 5;
	if (cidr_parse_one(addr, strlen(addr), &one, &why) < 0)
		return 0;
	return cidr_match_bytes(list, one.family, one.addr);
}
