/*
 * check_clients - sessions per client address: an address gets up to
 * its limit and no more, others are counted apart, a session that ends
 * gives its place back and the last one removes the entry, IPv4-mapped
 * IPv6 counts as IPv4, and what is not counted (family 0) always passes.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "clients.h"
#include "unit.h"

/* addr - the counted address of a numeric IPv4 or IPv6 address */
static struct client_addr addr(const char *text)
{
	struct sockaddr_storage ss;
	struct client_addr a;

	memset(&ss, 0, sizeof(ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		ck_assert_int_eq(inet_pton(AF_INET6, text, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		ck_assert_int_eq(inet_pton(AF_INET, text, &s4->sin_addr), 1);
	}
	client_addr_of((struct sockaddr *)&ss, &a);
	return a;
}

START_TEST(test_limit)
{
	static struct clients c;
	struct client_addr a = addr("127.0.0.2"), b = addr("127.0.0.3");

	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(clients_take(&c, &a, 3), 1);
	ck_assert_int_eq(clients_take(&c, &a, 3), 0);	/* the 4th */
	ck_assert_int_eq(clients_take(&c, &b, 3), 1);	/* another address */
	ck_assert_int_eq(clients_count(&c, &a), 3);
	ck_assert_uint_eq(c.addrs, 2);
	clients_give(&c, &a);
	ck_assert_int_eq(clients_take(&c, &a, 3), 1);	/* its place back */
	ck_assert_int_eq(clients_take(&c, &a, 4), 1);	/* a reload raised the limit */
	for (int i = 0; i < 4; i++)
		clients_give(&c, &a);
	ck_assert_int_eq(clients_count(&c, &a), 0);
	ck_assert_uint_eq(c.addrs, 1);			/* the last session took the entry */
	clients_give(&c, &a);				/* more gives than takes: nothing */
	ck_assert_int_eq(clients_count(&c, &a), 0);
	clients_give(&c, &b);
	ck_assert_uint_eq(c.addrs, 0);
	ck_assert_int_eq(clients_take(&c, &a, 0), 0);	/* a limit of 0 sessions */
}
END_TEST

START_TEST(test_families)
{
	static struct clients c;
	struct client_addr v4 = addr("192.0.2.7"), mapped = addr("::ffff:192.0.2.7");
	struct client_addr v6 = addr("2001:db8::7"), none;
	struct sockaddr un = {.sa_family = AF_UNIX};

	ck_assert_int_eq(clients_take(&c, &v4, 2), 1);
	ck_assert_int_eq(clients_take(&c, &mapped, 2), 1);	/* the same address */
	ck_assert_int_eq(clients_take(&c, &v4, 2), 0);
	ck_assert_int_eq(clients_take(&c, &v6, 2), 1);
	ck_assert_uint_eq(c.addrs, 2);
	client_addr_of(&un, &none);
	ck_assert_int_eq(none.family, 0);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(clients_take(&c, &none, 1), 1);	/* never counted */
	ck_assert_uint_eq(c.addrs, 2);
}
END_TEST

START_TEST(test_many)
{
	static struct clients c;
	char text[32];

	for (int i = 0; i < 5000; i++) {	/* more than the buckets: chains */
		struct client_addr a;

		snprintf(text, sizeof(text), "10.%d.%d.1", i / 256, i % 256);
		a = addr(text);
		ck_assert_int_eq(clients_take(&c, &a, 1), 1);
		ck_assert_int_eq(clients_take(&c, &a, 1), 0);
	}
	ck_assert_uint_eq(c.addrs, 5000);
	for (int i = 0; i < 5000; i++) {
		struct client_addr a;

		snprintf(text, sizeof(text), "10.%d.%d.1", i / 256, i % 256);
		a = addr(text);
		clients_give(&c, &a);
	}
	ck_assert_uint_eq(c.addrs, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("clients");
	TCase *tc = tcase_create("clients");

	tcase_add_test(tc, test_limit);
	tcase_add_test(tc, test_families);
	tcase_add_test(tc, test_many);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
