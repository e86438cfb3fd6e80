/* check_conf - tern.conf parsing: good files, bad files, printers, docs */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "unit.h"

/* load - parse text; on failure leave the message in err */
static struct conf *load(const char *text, char *err, size_t errlen)
{
	err[0] = '\0';
	return conf_load_string(text, "t.conf", err, errlen);
}

START_TEST(test_defaults)
{
	char err[512];
	struct conf *c = load("", err, sizeof(err));

	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_str_eq(c->global.syslog_name, "tern");
	ck_assert_str_eq(c->global.user, "tern");
	ck_assert_str_eq(c->milter.listen, "inet:8894@127.0.0.1");
	ck_assert_int_eq(c->milter.max_received, 50);
	ck_assert_uint_eq(c->milter.max_header_size, 102400);
	ck_assert_int_eq(c->milter.max_headers, 1000);
	ck_assert_int_eq(c->milter.max_recipients, 1000);
	ck_assert_int_eq(c->milter.check_loop, ACTION_REJECT);
	ck_assert_int_eq(c->milter.check_date, ACTION_TAG);
	ck_assert_int_eq(c->milter.check_recipients, ACTION_TEMPFAIL);
	ck_assert_int_eq(c->milter.on_error, ONERROR_ACCEPT);
	ck_assert_int_eq(c->milter.trace, 1);
	ck_assert_int_eq(c->milter.timeout, 30000);
	ck_assert_int_eq(cidr_list_match_str(c->milter.trusted_networks, "127.0.0.1"), 1);
	ck_assert_int_eq(cidr_list_match_str(c->milter.trusted_networks, "::1"), 1);
	ck_assert_int_eq(cidr_list_match_str(c->milter.trusted_networks, "10.0.0.1"), 0);
	conf_free(&c);
	ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_good)
{
	char err[512];
	struct conf *c = load(
		"# a comment\n"
		"; another\n"
		"[global]\n"
		"syslog_name = postfix/tern\n"
		"\n"
		"[milter]\n"
		"listen = unix:/run/tern/milter.sock\n"
		"max_received = 30\n"
		"max_header_size = 64k\n"
		"timeout = 2m\n"
		"check_date = Off\n"
		"trace = no\n"
		"on_error = tempfail\n"
		"trusted_networks = 10.0.0.0/8,\n"
		"   192.168.0.0/16 2001:db8::/32\n"
		"[peer smarthost]\n"
		"host = relay.example\n"
		"tls = encrypt\n"
		"max_message_rate = 6000/m\n"
		"max_connection_rate = 2/s\n"
		"breaker_error_rate = 0.25\n"
		"[peer backup-1]\n"
		"breaker_error_rate = 1.0\n"
		"[routes]\n"
		"example.org = smarthost\n"
		".Example.NET = backup-1\n"
		"* = smarthost\n",
		err, sizeof(err));

	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_str_eq(c->global.syslog_name, "postfix/tern");
	ck_assert_str_eq(c->milter.listen, "unix:/run/tern/milter.sock");
	ck_assert_int_eq(c->milter.max_received, 30);
	ck_assert_uint_eq(c->milter.max_header_size, 65536);
	ck_assert_int_eq(c->milter.timeout, 120000);
	ck_assert_int_eq(c->milter.check_date, ACTION_OFF);
	ck_assert_int_eq(c->milter.trace, 0);
	ck_assert_int_eq(c->milter.on_error, ONERROR_TEMPFAIL);
	ck_assert_int_eq(cidr_list_match_str(c->milter.trusted_networks, "192.168.1.1"), 1);
	ck_assert_int_eq(cidr_list_match_str(c->milter.trusted_networks, "2001:db8::5"), 1);
	ck_assert_int_eq(cidr_list_match_str(c->milter.trusted_networks, "127.0.0.1"), 0);
	ck_assert_uint_eq(c->npeers, 2);
	ck_assert_str_eq(c->peers[1].name, "backup-1");
	ck_assert_int_eq(c->peers[0].max_message_rate, 10000);	/* 6000/m: 10 ms apart */
	ck_assert_int_eq(c->peers[0].max_connection_rate, 500000);	/* 2/s */
	ck_assert_double_eq(c->peers[0].breaker_error_rate, 0.25);
	ck_assert_double_eq(c->peers[1].breaker_error_rate, 1.0);
	ck_assert_double_eq(c->peers[1].breaker_latency, 0);		/* off by default */
	ck_assert_int_eq(c->peers[0].tls, TLS_ENCRYPT);
	ck_assert_int_eq(c->peers[1].tls, TLS_VERIFY);		/* the default */
	ck_assert_int_eq(c->peers[1].port, 25);
	ck_assert_uint_eq(c->nroutes, 3);
	ck_assert_str_eq(c->routes[1].domain, ".example.net");
	ck_assert_str_eq(c->routes[1].peer, "backup-1");
	conf_free(&c);
}
END_TEST

/* Each bad file and the exact message it must produce. */
static const struct {
	const char *text, *err;
} bad_cases[] = {
	{"[milter]\nbogus = 1\n", "t.conf:2: unknown parameter \"bogus\" in [milter]"},
	{"[milter]\n\nmax_received = lots\n", "t.conf:3: max_received = lots: expected a number"},
	{"[milter]\ntimeout = 30x\n", "t.conf:2: timeout = 30x: bad time unit (use ms, s, m, h, d or w)"},
	{"[milter]\nmax_header_size = 10QB\n",
	 "t.conf:2: max_header_size = 10QB: bad size unit (use B, KB, MB or GB)"},
	{"[milter]\ncheck_loop = drop\n",
	 "t.conf:2: check_loop = drop: expected reject, tempfail, tag or off"},
	{"[milter]\ntrace = maybe\n", "t.conf:2: trace = maybe: expected yes or no"},
	{"[milter]\ntrusted_networks = 10.0.0.1/8\n",
	 "t.conf:2: trusted_networks = 10.0.0.1/8: network address has bits set beyond the prefix length"},
	{"[milter]\nmax_received = 5\nmax_received = 6\n",
	 "t.conf:3: max_received is already set on line 2"},
	{"[bogus]\n", "t.conf:1: unknown section [bogus]"},
	{"[milter]\n[peer]\n", "t.conf:2: section [peer] needs a name: [peer NAME]"},
	{"[milter extra]\n", "t.conf:1: section [milter] takes no name"},
	{"[peer a]\n[peer a]\n", "t.conf:2: [peer a] defined twice"},
	{"[peer a/b]\n", "t.conf:1: bad peer name \"a/b\" (letters, digits, '-', '_', '.')"},
	{"max_received = 5\n", "t.conf:1: \"max_received\" before the first [section]"},
	{"[milter]\njust some words\n",
	 "t.conf:2: syntax error (expected \"name = value\" or \"[section]\")"},
	{"[routes]\nexample.org = nowhere\n",
	 "t.conf:2: route example.org names unknown peer \"nowhere\" (define it with [peer nowhere])"},
	{"[peer p]\n[routes]\nexample..org = p\n",
	 "t.conf:3: bad route domain \"example..org\" (use example.org, .example.org or *)"},
	{"[peer aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]\n",
	 "t.conf:1: section header longer than 48 characters"},
	{"[milter]\nmax_received = 99999999999\n", "t.conf:2: max_received = 99999999999: number too large"},
	{"[peer p]\nmax_message_rate = 50/x\n",
	 "t.conf:2: max_message_rate = 50/x: expected a rate: N/s, N/m or N/h (or 0)"},
	{"[peer p]\nmax_message_rate = 0/s\n",
	 "t.conf:2: max_message_rate = 0/s: expected a rate: N/s, N/m or N/h (or 0)"},
	{"[peer p]\nbreaker_error_rate = 1.5\n",
	 "t.conf:2: breaker_error_rate = 1.5: expected a fraction from 0 to 1, such as 0.5"},
	{"[peer p]\nbreaker_error_rate = 0.\n",
	 "t.conf:2: breaker_error_rate = 0.: expected a fraction from 0 to 1, such as 0.5"},
	{"[peer p]\nbreaker_error_rate = 5\n",
	 "t.conf:2: breaker_error_rate = 5: expected a fraction from 0 to 1, such as 0.5"},
	{"[peer p]\nbreaker_error_rate = 0.1234567\n",
	 "t.conf:2: breaker_error_rate = 0.1234567: expected a fraction from 0 to 1, such as 0.5"},
	{"[peer p]\nbreaker_error_rate = 1.01\n",
	 "t.conf:2: breaker_error_rate = 1.01: expected a fraction from 0 to 1, such as 0.5"},
	{"[peer p]\nbreaker_error_rate = 0.5x\n",
	 "t.conf:2: breaker_error_rate = 0.5x: expected a fraction from 0 to 1, such as 0.5"},
	{"[peer p]\nbreaker_error_rate = -0.5\n",
	 "t.conf:2: breaker_error_rate = -0.5: expected a fraction from 0 to 1, such as 0.5"},
	{"[peer p]\nbreaker_error_rate = 1e-1\n",
	 "t.conf:2: breaker_error_rate = 1e-1: expected a fraction from 0 to 1, such as 0.5"},
	{"[peer p]\ntls = maybe\n", "t.conf:2: tls = maybe: expected none, may, encrypt or verify"},
	{"[peer p]\ntls_min_version = TLSv1.1\n",
	 "t.conf:2: tls_min_version = TLSv1.1: expected TLSv1.2 or TLSv1.3"},
};

START_TEST(test_bad)
{
	char err[512];
	struct conf *c = load(bad_cases[_i].text, err, sizeof(err));

	ck_assert_msg(c == NULL, "case %d should fail", _i);
	ck_assert_str_eq(err, bad_cases[_i].err);
}
END_TEST

START_TEST(test_long_line)
{
	char text[1024], err[512];
	struct conf *c;

	snprintf(text, sizeof(text), "[global]\nsyslog_name = %0300d\n", 0);
	c = load(text, err, sizeof(err));
	ck_assert_ptr_null(c);
	ck_assert_msg(strncmp(err, "t.conf:2: line longer than", 26) == 0, "%s", err);
}
END_TEST

START_TEST(test_file)
{
	char path[] = "/tmp/check_conf.XXXXXX", err[512];
	struct conf *c;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(write(fd, "[milter]\nmax_recipients = 7\n", 28), 0);
	close(fd);
	c = conf_load(path, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(c->milter.max_recipients, 7);
	conf_free(&c);
	unlink(path);
	c = conf_load(path, err, sizeof(err));
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err, "cannot open") != NULL, "%s", err);
}
END_TEST

/* print_to_string - run a printer into a memory buffer */
static char *print_settings(const struct conf *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	if (c)
		conf_print_settings(fp, c);
	else
		conf_print_defaults(fp);
	fclose(fp);
	return buf;
}

START_TEST(test_print)
{
	char err[512], *out;
	struct conf *c = load("[milter]\n  max_received=7  \n[global]\nuser = mail\n", err, sizeof(err));

	ck_assert_msg(c != NULL, "%s", err);
	out = print_settings(c);
	ck_assert_str_eq(out, "[milter]\nmax_received = 7\n\n[global]\nuser = mail\n");
	free(out);
	conf_free(&c);
	out = print_settings(NULL);
	ck_assert_msg(strstr(out, "[milter]\nlisten = inet:8894@127.0.0.1\n") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "check_date = tag\n") != NULL, "%s", out);
	free(out);
}
END_TEST

/* Like Postfix's check-postconf-undocumented: every parameter the code
 * knows has an entry in tern.conf(5). */
START_TEST(test_documented)
{
	const char *srcdir = getenv("top_srcdir");
	char path[4096], *man = NULL;
	size_t len = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/man/tern.conf.5", srcdir ? srcdir : ".");
	fp = fopen(path, "r");
	ck_assert_msg(fp != NULL, "cannot open %s", path);
	ck_assert_int_ge(getdelim(&man, &len, '\0', fp), 0);
	fclose(fp);
	for (size_t i = 0; i < conf_nsections; i++) {
		const struct conf_section *sec = &conf_sections[i];
		char want[256];

		for (size_t j = 0; j < sec->nparams; j++) {
			snprintf(want, sizeof(want), "\n.It Cm %s\n", sec->params[j].name);
			ck_assert_msg(strstr(man, want) != NULL,
				      "[%s] %s is not documented in man/tern.conf.5 (want \".It Cm %s\")",
				      sec->name, sec->params[j].name, sec->params[j].name);
		}
	}
	free(man);
}
END_TEST

/* The example configuration parses, and shows every parameter at its
 * default ("#name = default"), so that it stays a complete reference. */
START_TEST(test_example)
{
	const char *srcdir = getenv("top_srcdir");
	char path[4096], err[512], want[512];
	struct conf *c;
	char *text = NULL;
	size_t len = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/contrib/tern.conf.example", srcdir ? srcdir : ".");
	c = conf_load(path, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	conf_free(&c);
	fp = fopen(path, "r");
	ck_assert_ptr_nonnull(fp);
	ck_assert_int_ge(getdelim(&text, &len, '\0', fp), 0);
	fclose(fp);
	for (size_t i = 0; i < conf_nsections; i++)
		for (size_t j = 0; j < conf_sections[i].nparams; j++) {
			const struct conf_param *p = &conf_sections[i].params[j];

			if (strncmp(p->def, SYSCONFDIR, strlen(SYSCONFDIR)) == 0)	/* install path */
				snprintf(want, sizeof(want), "\n#%s = ", p->name);
			else if (p->def[0] == '\0')
				snprintf(want, sizeof(want), "\n#%s =\n", p->name);
			else
				snprintf(want, sizeof(want), "\n#%s = %s\n", p->name, p->def);
			ck_assert_msg(strstr(text, want) != NULL, "contrib/tern.conf.example lacks \"%s\"",
				      want + 1);
		}
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("conf");

	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_good);
	tcase_add_loop_test(tc, test_bad, 0, N_ELEMENTS(bad_cases));
	tcase_add_test(tc, test_long_line);
	tcase_add_test(tc, test_file);
	tcase_add_test(tc, test_print);
	tcase_add_test(tc, test_documented);
	tcase_add_test(tc, test_example);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
