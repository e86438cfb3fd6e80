/*
 * cidr - lists of IPv4/IPv6 networks ("127.0.0.0/8, ::1") and matching.
 *
 * Pure: parsing and matching do no I/O and no name lookups. An address
 * without a prefix length is a host (/32 or /128). IPv4-mapped IPv6
 * addresses (::ffff:a.b.c.d) match the IPv4 networks.
 */
#ifndef TERN_CIDR_H
#define TERN_CIDR_H

#include <stddef.h>
#include <sys/socket.h>

struct cidr {
	int family;			/* AF_INET or AF_INET6 */
	unsigned char addr[16];		/* network address, host bits zero */
	unsigned bits;			/* prefix length */
};

struct cidr_list {
	size_t count;
	struct cidr *nets;
};

struct cidr_list *cidr_list_parse(const char *text, const char **why);
void cidr_list_free(struct cidr_list **list);
int cidr_list_match(const struct cidr_list *list, const struct sockaddr *sa);
int cidr_list_match_str(const struct cidr_list *list, const char *addr);

#endif
