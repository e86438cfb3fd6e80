/* check_cidr - network lists and address matching, IPv4 and IPv6 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "cidr.h"
#include "unit.h"

static const struct {
	const char *list, *addr;
	int match;
} match_cases[] = {
	{"127.0.0.0/8, ::1", "127.0.0.1", 1},
	{"127.0.0.0/8, ::1", "127.255.255.254", 1},
	{"127.0.0.0/8, ::1", "128.0.0.1", 0},
	{"127.0.0.0/8, ::1", "::1", 1},
	{"127.0.0.0/8, ::1", "::2", 0},
	{"127.0.0.0/8, ::1", "::ffff:127.0.0.9", 1},
	{"127.0.0.0/8, ::1", "IPv6:::1", 1},
	{"127.0.0.0/8, ::1", "[::1]", 1},
	{"192.168.4.0/22", "192.168.7.255", 1},
	{"192.168.4.0/22", "192.168.8.0", 0},
	{"192.168.4.0/22", "192.168.3.255", 0},
	{"2001:db8::/32", "2001:db8:ffff::1", 1},
	{"2001:db8::/32", "2001:db9::1", 0},
	{"2001:db8:8000::/33", "2001:db8:7fff::1", 0},
	{"2001:db8:8000::/33", "2001:db8:8000::1", 1},
	{"0.0.0.0/0", "203.0.113.7", 1},
	{"0.0.0.0/0", "2001:db8::1", 0},
	{"::/0", "2001:db8::1", 1},
	{"10.1.2.3", "10.1.2.3", 1},
	{"10.1.2.3", "10.1.2.4", 0},
	{"", "127.0.0.1", 0},
	{"127.0.0.0/8", "not-an-address", 0},
	{"127.0.0.0/8", "127.0.0.1/8", 0},
};

START_TEST(test_match)
{
	const char *why = NULL;
	struct cidr_list *list = cidr_list_parse(match_cases[_i].list, &why);

	ck_assert_msg(list != NULL, "parse \"%s\": %s", match_cases[_i].list, why);
	ck_assert_msg(cidr_list_match_str(list, match_cases[_i].addr) == match_cases[_i].match,
		      "\"%s\" in \"%s\" should be %d", match_cases[_i].addr,
		      match_cases[_i].list, match_cases[_i].match);
	cidr_list_free(&list);
	ck_assert_ptr_null(list);
}
END_TEST

static const char *const bad_lists[] = {
	"127.0.0.1/33", "::1/129", "10.1.2.3/8", "example.com", "127.0.0.0/", "127.0.0.0/-1",
	"127.0.0.0/8x", "1.2.3", "[::1", "fe80::1%eth0", "::1/0128",
};

START_TEST(test_bad)
{
	const char *why = NULL;
	struct cidr_list *list = cidr_list_parse(bad_lists[_i], &why);

	ck_assert_msg(list == NULL, "\"%s\" should not parse", bad_lists[_i]);
	ck_assert_ptr_nonnull(why);
}
END_TEST

START_TEST(test_sockaddr)
{
	const char *why;
	struct cidr_list *list = cidr_list_parse("127.0.0.0/8 ::1", &why);
	struct sockaddr_in in4 = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	struct sockaddr unix_sa = {.sa_family = AF_UNIX};

	inet_pton(AF_INET, "127.0.0.2", &in4.sin_addr);
	inet_pton(AF_INET6, "::1", &in6.sin6_addr);
	ck_assert_int_eq(cidr_list_match(list, (struct sockaddr *)&in4), 1);
	ck_assert_int_eq(cidr_list_match(list, (struct sockaddr *)&in6), 1);
	inet_pton(AF_INET, "10.0.0.1", &in4.sin_addr);
	ck_assert_int_eq(cidr_list_match(list, (struct sockaddr *)&in4), 0);
	ck_assert_int_eq(cidr_list_match(list, &unix_sa), 0);
	ck_assert_int_eq(cidr_list_match(list, NULL), 0);
	cidr_list_free(&list);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cidr");
	TCase *tc = tcase_create("cidr");

	tcase_add_loop_test(tc, test_match, 0, N_ELEMENTS(match_cases));
	tcase_add_loop_test(tc, test_bad, 0, N_ELEMENTS(bad_lists));
	tcase_add_test(tc, test_sockaddr);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
