/* check_smtp_cmd - SMTP/LMTP command lines: verbs, paths, parameters, replies */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "smtp_cmd.h"
#include "unit.h"

/* A line with its length, so that it may hold NUL. */
#define L(s) s, sizeof(s) - 1

#define SYN_EHLO "501 5.5.4 Syntax: EHLO hostname"
#define SYN_MAIL "501 5.5.4 Syntax: MAIL FROM:<address>"
#define SYN_RCPT "501 5.5.4 Syntax: RCPT TO:<address>"
#define SYN_BDAT "501 5.5.4 Syntax: BDAT size [LAST]"
#define BAD_SENDER "501 5.1.7 Bad sender address syntax"
#define BAD_RCPT "501 5.1.3 Bad recipient address syntax"
#define BAD_CHARS "500 5.5.2 Error: bad characters in command"
#define UNKNOWN "500 5.5.2 Error: command not recognized"
#define TOO_LONG "500 5.5.2 Error: line too long"

/* parse - smtp_cmd_parse into a struct first filled with garbage */
static int parse(const char *line, size_t len, struct smtp_cmd *cmd, const char **reply)
{
	memset(cmd, 0xa5, sizeof(*cmd));
	*reply = "garbage";
	return smtp_cmd_parse(line, len, cmd, reply);
}

/* check_reply - rc and reply agree with the expected reply (NULL: accepted) */
static void check_reply(const char *line, int rc, const char *reply, const char *want)
{
	if (want == NULL) {
		ck_assert_msg(rc == 0 && reply == NULL, "\"%s\": refused: %s", line,
			      reply ? reply : "(null)");
	} else {
		ck_assert_msg(rc == -1, "\"%s\": accepted, wanted \"%s\"", line, want);
		ck_assert_ptr_nonnull(reply);
		ck_assert_str_eq(reply, want);
	}
}

/* Verbs, HELO names, addresses; arg is cmd->helo or cmd->addr when accepted. */
static const struct {
	const char *line;
	size_t len;
	enum smtp_verb verb;
	const char *reply;
	const char *arg;
} cases[] = {
	/* HELO, EHLO, LHLO */
	{L("EHLO example.org"), CMD_EHLO, NULL, "example.org"},
	{L("ehlo example.org"), CMD_EHLO, NULL, "example.org"},
	{L("HeLo mail.example.org"), CMD_HELO, NULL, "mail.example.org"},
	{L("LHLO [192.0.2.1]"), CMD_LHLO, NULL, "[192.0.2.1]"},
	{L("EHLO [IPv6:2001:db8::1]"), CMD_EHLO, NULL, "[IPv6:2001:db8::1]"},
	{L("EHLO [ipv6:::ffff:192.0.2.1]"), CMD_EHLO, NULL, "[ipv6:::ffff:192.0.2.1]"},
	{L("EHLO    example.org   "), CMD_EHLO, NULL, "example.org"},
	{L("EHLO\texample.org"), CMD_EHLO, NULL, "example.org"},
	{L("EHLO WIN-PC_01.local"), CMD_EHLO, NULL, "WIN-PC_01.local"},
	{L("EHLO example.org."), CMD_EHLO, NULL, "example.org."},
	{L("EHLO 192.0.2.1"), CMD_EHLO, NULL, "192.0.2.1"},
	{L("EHLO b\xc3\xbc" "cher.de"), CMD_EHLO, NULL, "b\xc3\xbc" "cher.de"},
	{L("EHLO"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO "), CMD_EHLO, SYN_EHLO, NULL},
	{L("HELO"), CMD_HELO, "501 5.5.4 Syntax: HELO hostname", NULL},
	{L("LHLO"), CMD_LHLO, "501 5.5.4 Syntax: LHLO hostname", NULL},
	{L("EHLO a.org b.org"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO -a.org"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO a-.org"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO a..org"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO ."), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO a!b.org"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO [192.0.2]"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO [256.0.2.1]"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO [192.0.2.01]"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO [192.0.2.1"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO [IPv6:192.0.2.1]"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO [IPv6:2001:db8::1%eth0]"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO []"), CMD_EHLO, SYN_EHLO, NULL},
	{L("EHLO \xff.de"), CMD_EHLO, SYN_EHLO, NULL},
	/* verbs without an argument */
	{L("DATA"), CMD_DATA, NULL, NULL},
	{L("data "), CMD_DATA, NULL, NULL},
	{L("DATA x"), CMD_DATA, "501 5.5.4 Syntax: DATA", NULL},
	{L("RSET"), CMD_RSET, NULL, NULL},
	{L("RSET x"), CMD_RSET, "501 5.5.4 Syntax: RSET", NULL},
	{L("QUIT"), CMD_QUIT, NULL, NULL},
	{L("quit now"), CMD_QUIT, "501 5.5.4 Syntax: QUIT", NULL},
	{L("STARTTLS"), CMD_STARTTLS, NULL, NULL},
	{L("StartTLS x"), CMD_STARTTLS, "501 5.5.4 Syntax: STARTTLS", NULL},
	/* verbs with an optional argument, and AUTH */
	{L("NOOP"), CMD_NOOP, NULL, NULL},
	{L("NOOP hello there"), CMD_NOOP, NULL, NULL},
	{L("NOOP \tx"), CMD_NOOP, NULL, NULL},
	{L("HELP"), CMD_HELP, NULL, NULL},
	{L("help MAIL"), CMD_HELP, NULL, NULL},
	{L("VRFY postmaster"), CMD_VRFY, NULL, NULL},
	{L("EXPN staff"), CMD_EXPN, NULL, NULL},
	{L("AUTH PLAIN AGJvYgBzZWNyZXQ="), CMD_AUTH, NULL, NULL},
	/* unknown verbs, empty lines, bad octets, long lines */
	{L("FOO"), CMD_UNKNOWN, UNKNOWN, NULL},
	{L("MAILFROM:<a@example.org>"), CMD_UNKNOWN, UNKNOWN, NULL},
	{L("DATAX"), CMD_UNKNOWN, UNKNOWN, NULL},
	{L("STARTTL"), CMD_UNKNOWN, UNKNOWN, NULL},
	{L("\xc4" "ATA"), CMD_UNKNOWN, UNKNOWN, NULL},
	{L("GET / HTTP/1.1"), CMD_UNKNOWN, UNKNOWN, NULL},
	{L(""), CMD_UNKNOWN, "500 5.5.2 Error: bad syntax", NULL},
	{L("  \t "), CMD_UNKNOWN, "500 5.5.2 Error: bad syntax", NULL},
	{L("DATA\0"), CMD_UNKNOWN, BAD_CHARS, NULL},
	{L("\0"), CMD_UNKNOWN, BAD_CHARS, NULL},
	{L("NOOP \r"), CMD_UNKNOWN, BAD_CHARS, NULL},
	{L("NOOP \x7f"), CMD_UNKNOWN, BAD_CHARS, NULL},
	{L("NOOP \x1b[2J"), CMD_UNKNOWN, BAD_CHARS, NULL},
	{L("MAIL FROM:<a@example.org>\nRCPT TO:<b@example.org>"), CMD_UNKNOWN, BAD_CHARS, NULL},
	/* MAIL */
	{L("MAIL FROM:<a@example.org>"), CMD_MAIL, NULL, "a@example.org"},
	{L("mail from:<a@example.org>"), CMD_MAIL, NULL, "a@example.org"},
	{L("MAIL FROM: <a@example.org>"), CMD_MAIL, NULL, "a@example.org"},
	{L("MAIL  FROM:<a@example.org>  "), CMD_MAIL, NULL, "a@example.org"},
	{L("MAIL FROM:<>"), CMD_MAIL, NULL, ""},
	{L("MAIL FROM:<@a.org,@b.org:u@c.org>"), CMD_MAIL, NULL, "u@c.org"},
	{L("MAIL FROM:<@a.org:u@c.org>"), CMD_MAIL, NULL, "u@c.org"},
	{L("MAIL FROM:<\"a b\"@example.org>"), CMD_MAIL, NULL, "\"a b\"@example.org"},
	{L("MAIL FROM:<\"a\\\"b\"@example.org>"), CMD_MAIL, NULL, "\"a\\\"b\"@example.org"},
	{L("MAIL FROM:<\"a>b\"@example.org>"), CMD_MAIL, NULL, "\"a>b\"@example.org"},
	{L("MAIL FROM:<\"\"@example.org>"), CMD_MAIL, NULL, "\"\"@example.org"},
	{L("MAIL FROM:<first.last+tag@example.org>"), CMD_MAIL, NULL, "first.last+tag@example.org"},
	{L("MAIL FROM:<!#$%&'*+-/=?^_`{|}~@example.org>"), CMD_MAIL, NULL,
	 "!#$%&'*+-/=?^_`{|}~@example.org"},
	{L("MAIL FROM:<a@b-c.example>"), CMD_MAIL, NULL, "a@b-c.example"},
	{L("MAIL FROM:<a@[192.0.2.1]>"), CMD_MAIL, NULL, "a@[192.0.2.1]"},
	{L("MAIL FROM:<a@[IPv6:2001:db8::1]>"), CMD_MAIL, NULL, "a@[IPv6:2001:db8::1]"},
	{L("MAIL FROM:<d\xc3\xb6rte@example.org> SMTPUTF8"), CMD_MAIL, NULL,
	 "d\xc3\xb6rte@example.org"},
	{L("MAIL FROM:<a@b\xc3\xbc" "cher.de> smtputf8"), CMD_MAIL, NULL, "a@b\xc3\xbc" "cher.de"},
	{L("MAIL"), CMD_MAIL, SYN_MAIL, NULL},
	{L("MAIL FROM"), CMD_MAIL, SYN_MAIL, NULL},
	{L("MAIL FROM:"), CMD_MAIL, SYN_MAIL, NULL},
	{L("MAIL FROM: "), CMD_MAIL, SYN_MAIL, NULL},
	{L("MAIL TO:<a@example.org>"), CMD_MAIL, SYN_MAIL, NULL},
	{L("MAIL FROM :<a@example.org>"), CMD_MAIL, SYN_MAIL, NULL},
	{L("MAIL FROM:a@example.org"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@example.org"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<postmaster>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@-b.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b-.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b..org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b.org.>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b_c.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<.a@b.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a.@b.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a..b@b.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a b@b.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a(b)@b.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<\"a\"b@c.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<\"abc@c.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<\"a\\\"@c.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<@>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<@b.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<@a.org:>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<@a.org,b.org:u@c.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<@a.org:@b.org:u@c.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b@c.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b.org>x"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b.org>>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<<a@b.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@[192.0.2.1>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@[300.0.2.1]>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@[example.org]>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<d\xc3\xb6rte@example.org>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b\xc3\xbc" "cher.de>"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<\xc3@example.org> SMTPUTF8"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<\xc0\xaf@example.org> SMTPUTF8"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<\xed\xa0\x80@example.org> SMTPUTF8"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<\xf4\x90\x80\x80@example.org> SMTPUTF8"), CMD_MAIL, BAD_SENDER, NULL},
	{L("MAIL FROM:<a@b.org> <c@d.org>"), CMD_MAIL, "555 5.5.4 Unsupported option", NULL},
	/* RCPT */
	{L("RCPT TO:<b@example.org>"), CMD_RCPT, NULL, "b@example.org"},
	{L("rcpt to:<b@example.org>"), CMD_RCPT, NULL, "b@example.org"},
	{L("RCPT TO: <b@example.org>"), CMD_RCPT, NULL, "b@example.org"},
	{L("RCPT TO:<@relay.org:b@example.org>"), CMD_RCPT, NULL, "b@example.org"},
	{L("RCPT TO:<postmaster>"), CMD_RCPT, NULL, "postmaster"},
	{L("RCPT TO:<PostMaster>"), CMD_RCPT, NULL, "PostMaster"},
	{L("RCPT TO:<Postmaster@example.org>"), CMD_RCPT, NULL, "Postmaster@example.org"},
	{L("RCPT TO:<d\xc3\xb6rte@example.org>"), CMD_RCPT, NULL, "d\xc3\xb6rte@example.org"},
	{L("RCPT TO:<postmistress>"), CMD_RCPT, BAD_RCPT, NULL},
	{L("RCPT TO:<\"postmaster\">"), CMD_RCPT, BAD_RCPT, NULL},
	{L("RCPT TO:<>"), CMD_RCPT, BAD_RCPT, NULL},
	{L("RCPT TO:b@example.org"), CMD_RCPT, BAD_RCPT, NULL},
	{L("RCPT TO:<b@example..org>"), CMD_RCPT, BAD_RCPT, NULL},
	{L("RCPT TO:<\xff@example.org>"), CMD_RCPT, BAD_RCPT, NULL},
	{L("RCPT"), CMD_RCPT, SYN_RCPT, NULL},
	{L("RCPT FROM:<b@example.org>"), CMD_RCPT, SYN_RCPT, NULL},
	{L("RCPT TO:"), CMD_RCPT, SYN_RCPT, NULL},
	{L("RCPT TO"), CMD_RCPT, SYN_RCPT, NULL},
	/* BDAT and AUTH/STARTTLS are recognized; the caller decides */
	{L("BDAT 10"), CMD_BDAT, NULL, NULL},
	{L("BDAT"), CMD_BDAT, SYN_BDAT, NULL},
	{L("AUTH"), CMD_AUTH, NULL, NULL},
};

START_TEST(test_cases)
{
	struct smtp_cmd cmd;
	const char *reply;
	int rc = parse(cases[_i].line, cases[_i].len, &cmd, &reply);

	check_reply(cases[_i].line, rc, reply, cases[_i].reply);
	ck_assert_msg(cmd.verb == cases[_i].verb, "\"%s\": verb %s, wanted %s", cases[_i].line,
		      smtp_verb_name(cmd.verb), smtp_verb_name(cases[_i].verb));
	if (cases[_i].reply == NULL) {
		if (cmd.verb == CMD_HELO || cmd.verb == CMD_EHLO || cmd.verb == CMD_LHLO)
			ck_assert_str_eq(cmd.helo, cases[_i].arg);
		else
			ck_assert_str_eq(cmd.helo, "");
		if (cmd.verb == CMD_MAIL || cmd.verb == CMD_RCPT)
			ck_assert_str_eq(cmd.addr, cases[_i].arg);
		else
			ck_assert_str_eq(cmd.addr, "");
	}
}
END_TEST

/* MAIL and RCPT parameters; every field is checked when the line is accepted. */
#define BAD(line, reply) {line, reply, 0, BODY_NONE, 0, RET_NONE, NULL, 0, NULL}
static const struct {
	const char *line;
	const char *reply;
	unsigned long long size;
	enum smtp_body body;
	int smtputf8;
	enum smtp_ret ret;
	const char *envid;
	unsigned notify;
	const char *orcpt;
} params[] = {
	{"MAIL FROM:<a@b.org>", NULL, 0, BODY_NONE, 0, RET_NONE, "", 0, ""},
	{"MAIL FROM:<a@b.org> SIZE=1000", NULL, 1000, BODY_NONE, 0, RET_NONE, "", 0, ""},
	{"MAIL FROM:<a@b.org> size=0", NULL, 0, BODY_NONE, 0, RET_NONE, "", 0, ""},
	{"MAIL FROM:<a@b.org> SIZE=18446744073709551615", NULL, 18446744073709551615ULL,
	 BODY_NONE, 0, RET_NONE, "", 0, ""},
	BAD("MAIL FROM:<a@b.org> SIZE=18446744073709551616", "501 5.5.4 Bad SIZE= parameter"),
	BAD("MAIL FROM:<a@b.org> SIZE=99999999999999999999999", "501 5.5.4 Bad SIZE= parameter"),
	BAD("MAIL FROM:<a@b.org> SIZE=", "501 5.5.4 Bad SIZE= parameter"),
	BAD("MAIL FROM:<a@b.org> SIZE", "501 5.5.4 Bad SIZE= parameter"),
	BAD("MAIL FROM:<a@b.org> SIZE=12a", "501 5.5.4 Bad SIZE= parameter"),
	BAD("MAIL FROM:<a@b.org> SIZE=-1", "501 5.5.4 Bad SIZE= parameter"),
	BAD("MAIL FROM:<a@b.org> SIZE=1 SIZE=2", "501 5.5.4 Duplicate SIZE= parameter"),
	BAD("MAIL FROM:<a@b.org> SIZE=1 size=1", "501 5.5.4 Duplicate SIZE= parameter"),
	{"MAIL FROM:<a@b.org> BODY=7BIT", NULL, 0, BODY_7BIT, 0, RET_NONE, "", 0, ""},
	{"MAIL FROM:<a@b.org> body=8bitmime", NULL, 0, BODY_8BITMIME, 0, RET_NONE, "", 0, ""},
	{"MAIL FROM:<a@b.org> BODY=BINARYMIME", NULL, 0, BODY_BINARYMIME, 0, RET_NONE, "", 0, ""},
	BAD("MAIL FROM:<a@b.org> BODY=8BIT", "501 5.5.4 Bad BODY= parameter"),
	BAD("MAIL FROM:<a@b.org> BODY=", "501 5.5.4 Bad BODY= parameter"),
	BAD("MAIL FROM:<a@b.org> BODY", "501 5.5.4 Bad BODY= parameter"),
	BAD("MAIL FROM:<a@b.org> BODY=7BIT BODY=7BIT", "501 5.5.4 Duplicate BODY= parameter"),
	{"MAIL FROM:<a@b.org> SMTPUTF8", NULL, 0, BODY_NONE, 1, RET_NONE, "", 0, ""},
	{"MAIL FROM:<> smtputf8", NULL, 0, BODY_NONE, 1, RET_NONE, "", 0, ""},
	BAD("MAIL FROM:<a@b.org> SMTPUTF8=yes", "501 5.5.4 Bad SMTPUTF8 parameter"),
	BAD("MAIL FROM:<a@b.org> SMTPUTF8=", "501 5.5.4 Bad SMTPUTF8 parameter"),
	BAD("MAIL FROM:<a@b.org> SMTPUTF8 SMTPUTF8", "501 5.5.4 Duplicate SMTPUTF8 parameter"),
	{"MAIL FROM:<a@b.org> RET=FULL", NULL, 0, BODY_NONE, 0, RET_FULL, "", 0, ""},
	{"MAIL FROM:<a@b.org> ret=hdrs", NULL, 0, BODY_NONE, 0, RET_HDRS, "", 0, ""},
	BAD("MAIL FROM:<a@b.org> RET=ALL", "501 5.5.4 Bad RET= parameter"),
	BAD("MAIL FROM:<a@b.org> RET=HDRS RET=FULL", "501 5.5.4 Duplicate RET= parameter"),
	{"MAIL FROM:<a@b.org> ENVID=QQ314159", NULL, 0, BODY_NONE, 0, RET_NONE, "QQ314159", 0, ""},
	{"MAIL FROM:<a@b.org> ENVID=a+2Bb+3D", NULL, 0, BODY_NONE, 0, RET_NONE, "a+2Bb+3D", 0, ""},
	{"MAIL FROM:<a@b.org> ENVID=<x@y>", NULL, 0, BODY_NONE, 0, RET_NONE, "<x@y>", 0, ""},
	BAD("MAIL FROM:<a@b.org> ENVID=a+2bb", "501 5.5.4 Bad ENVID= parameter"),
	BAD("MAIL FROM:<a@b.org> ENVID=a+2", "501 5.5.4 Bad ENVID= parameter"),
	BAD("MAIL FROM:<a@b.org> ENVID=a+", "501 5.5.4 Bad ENVID= parameter"),
	BAD("MAIL FROM:<a@b.org> ENVID=a+b", "501 5.5.4 Bad ENVID= parameter"),
	BAD("MAIL FROM:<a@b.org> ENVID=a=b", "501 5.5.4 Bad ENVID= parameter"),
	BAD("MAIL FROM:<a@b.org> ENVID=\xc3\xa9", "501 5.5.4 Bad ENVID= parameter"),
	BAD("MAIL FROM:<a@b.org> ENVID=", "501 5.5.4 Bad ENVID= parameter"),
	BAD("MAIL FROM:<a@b.org> ENVID", "501 5.5.4 Bad ENVID= parameter"),
	BAD("MAIL FROM:<a@b.org> ENVID=x ENVID=x", "501 5.5.4 Duplicate ENVID= parameter"),
	{"MAIL FROM:<> SIZE=10 BODY=8BITMIME RET=HDRS ENVID=x SMTPUTF8", NULL,
	 10, BODY_8BITMIME, 1, RET_HDRS, "x", 0, ""},
	{"MAIL FROM:<a@b.org>   SIZE=10 \t BODY=7BIT  ", NULL, 10, BODY_7BIT, 0, RET_NONE, "", 0, ""},
	BAD("MAIL FROM:<a@b.org> NOTIFY=NEVER", "555 5.5.4 Unsupported option: NOTIFY"),
	BAD("MAIL FROM:<a@b.org> AUTH=<>", "555 5.5.4 Unsupported option: AUTH"),
	BAD("MAIL FROM:<a@b.org> mt-priority=3", "555 5.5.4 Unsupported option: MT-PRIORITY"),
	BAD("MAIL FROM:<a@b.org> FOO=bar", "555 5.5.4 Unsupported option"),
	BAD("MAIL FROM:<a@b.org> =bar", "555 5.5.4 Unsupported option"),
	BAD("MAIL FROM:<a@b.org> SIZEX=1", "555 5.5.4 Unsupported option"),
	BAD("MAIL FROM:<a@b.org> SIZE=x FOO", "501 5.5.4 Bad SIZE= parameter"),
	BAD("MAIL FROM:<d\xc3\xb6rte@b.org> SIZE=x", "501 5.5.4 Bad SIZE= parameter"),
	{"RCPT TO:<b@c.org> NOTIFY=NEVER", NULL, 0, BODY_NONE, 0, RET_NONE, "", NOTIFY_NEVER, ""},
	{"RCPT TO:<b@c.org> NOTIFY=SUCCESS,FAILURE,DELAY", NULL, 0, BODY_NONE, 0, RET_NONE, "",
	 NOTIFY_SUCCESS | NOTIFY_FAILURE | NOTIFY_DELAY, ""},
	{"RCPT TO:<b@c.org> notify=failure", NULL, 0, BODY_NONE, 0, RET_NONE, "", NOTIFY_FAILURE, ""},
	{"RCPT TO:<b@c.org> NOTIFY=delay,SUCCESS", NULL, 0, BODY_NONE, 0, RET_NONE, "",
	 NOTIFY_SUCCESS | NOTIFY_DELAY, ""},
	BAD("RCPT TO:<b@c.org> NOTIFY=NEVER,SUCCESS", "501 5.5.4 Bad NOTIFY= parameter"),
	BAD("RCPT TO:<b@c.org> NOTIFY=FAILURE,NEVER", "501 5.5.4 Bad NOTIFY= parameter"),
	BAD("RCPT TO:<b@c.org> NOTIFY=", "501 5.5.4 Bad NOTIFY= parameter"),
	BAD("RCPT TO:<b@c.org> NOTIFY", "501 5.5.4 Bad NOTIFY= parameter"),
	BAD("RCPT TO:<b@c.org> NOTIFY=SUCCESS,", "501 5.5.4 Bad NOTIFY= parameter"),
	BAD("RCPT TO:<b@c.org> NOTIFY=,SUCCESS", "501 5.5.4 Bad NOTIFY= parameter"),
	BAD("RCPT TO:<b@c.org> NOTIFY=SOMETIMES", "501 5.5.4 Bad NOTIFY= parameter"),
	BAD("RCPT TO:<b@c.org> NOTIFY=DELAY NOTIFY=DELAY", "501 5.5.4 Duplicate NOTIFY= parameter"),
	{"RCPT TO:<b@c.org> ORCPT=rfc822;b@c.org", NULL, 0, BODY_NONE, 0, RET_NONE, "", 0,
	 "rfc822;b@c.org"},
	{"RCPT TO:<b@c.org> ORCPT=rfc822;b+40c.org NOTIFY=FAILURE", NULL, 0, BODY_NONE, 0,
	 RET_NONE, "", NOTIFY_FAILURE, "rfc822;b+40c.org"},
	{"RCPT TO:<b@c.org> ORCPT=utf-8;d\xc3\xb6rte@c.org", NULL, 0, BODY_NONE, 0, RET_NONE, "", 0,
	 "utf-8;d\xc3\xb6rte@c.org"},
	BAD("RCPT TO:<b@c.org> ORCPT=rfc822;d\xc3\xb6rte@c.org", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT=utf-8;\xc3", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT=rfc822", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT=;b@c.org", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT=rfc822;", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT=-x;b@c.org", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT=r.fc;b@c.org", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT=rfc822;b+4", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT", "501 5.5.4 Bad ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> ORCPT=a;b ORCPT=a;b", "501 5.5.4 Duplicate ORCPT= parameter"),
	BAD("RCPT TO:<b@c.org> SIZE=10", "555 5.5.4 Unsupported option: SIZE"),
	BAD("RCPT TO:<b@c.org> SMTPUTF8", "555 5.5.4 Unsupported option: SMTPUTF8"),
	BAD("RCPT TO:<b@c.org> X=1", "555 5.5.4 Unsupported option"),
};

START_TEST(test_params)
{
	struct smtp_cmd cmd;
	const char *reply;
	int rc = parse(params[_i].line, strlen(params[_i].line), &cmd, &reply);

	check_reply(params[_i].line, rc, reply, params[_i].reply);
	if (params[_i].reply)
		return;
	ck_assert_uint_eq(cmd.size, params[_i].size);
	ck_assert_int_eq(cmd.body, params[_i].body);
	ck_assert_int_eq(cmd.smtputf8, params[_i].smtputf8);
	ck_assert_int_eq(cmd.ret, params[_i].ret);
	ck_assert_str_eq(cmd.envid, params[_i].envid);
	ck_assert_uint_eq(cmd.notify, params[_i].notify);
	ck_assert_str_eq(cmd.orcpt, params[_i].orcpt);
	ck_assert_uint_eq(cmd.chunk, 0);
	ck_assert_int_eq(cmd.last, 0);
}
END_TEST

static const struct {
	const char *line;
	int ok;
	unsigned long long chunk;
	int last;
} bdat[] = {
	{"BDAT 1000", 1, 1000, 0},
	{"BDAT 0 LAST", 1, 0, 1},
	{"bdat 5 last", 1, 5, 1},
	{"BDAT  5   LAST  ", 1, 5, 1},
	{"BDAT 007", 1, 7, 0},
	{"BDAT 18446744073709551615 LAST", 1, 18446744073709551615ULL, 1},
	{"BDAT", 0, 0, 0},
	{"BDAT LAST", 0, 0, 0},
	{"BDAT x", 0, 0, 0},
	{"BDAT 5x", 0, 0, 0},
	{"BDAT -5", 0, 0, 0},
	{"BDAT +5", 0, 0, 0},
	{"BDAT 5 FIRST", 0, 0, 0},
	{"BDAT 5 LASTX", 0, 0, 0},
	{"BDAT 5 LAST x", 0, 0, 0},
	{"BDAT 5 LAST LAST", 0, 0, 0},
	{"BDAT 18446744073709551616", 0, 0, 0},
};

START_TEST(test_bdat)
{
	struct smtp_cmd cmd;
	const char *reply;
	int rc = parse(bdat[_i].line, strlen(bdat[_i].line), &cmd, &reply);

	check_reply(bdat[_i].line, rc, reply, bdat[_i].ok ? NULL : SYN_BDAT);
	ck_assert_int_eq(cmd.verb, CMD_BDAT);
	if (bdat[_i].ok) {
		ck_assert_uint_eq(cmd.chunk, bdat[_i].chunk);
		ck_assert_int_eq(cmd.last, bdat[_i].last);
	}
}
END_TEST

static const struct {
	enum smtp_verb verb;
	const char *name;
} names[] = {
	{CMD_UNKNOWN, "UNKNOWN"}, {CMD_HELO, "HELO"}, {CMD_EHLO, "EHLO"}, {CMD_LHLO, "LHLO"},
	{CMD_MAIL, "MAIL"}, {CMD_RCPT, "RCPT"}, {CMD_DATA, "DATA"}, {CMD_BDAT, "BDAT"},
	{CMD_RSET, "RSET"}, {CMD_NOOP, "NOOP"}, {CMD_QUIT, "QUIT"}, {CMD_VRFY, "VRFY"},
	{CMD_EXPN, "EXPN"}, {CMD_HELP, "HELP"}, {CMD_STARTTLS, "STARTTLS"}, {CMD_AUTH, "AUTH"},
	{(enum smtp_verb)99, "UNKNOWN"},
};

START_TEST(test_verb_name)
{
	ck_assert_str_eq(smtp_verb_name(names[_i].verb), names[_i].name);
}
END_TEST

/* Lengths at and past each limit, built at run time. */
enum len_kind { LINE, LOCAL, LABEL, PATH, HELO, ENVID, ORCPT_LINE };

static const struct {
	enum len_kind kind;
	size_t n;
	const char *reply;
} lengths[] = {
	{LINE, SMTP_LINE_MAX - 2, NULL}, {LINE, SMTP_LINE_MAX - 1, TOO_LONG},
	{LINE, 100000, TOO_LONG},
	{LOCAL, 64, NULL}, {LOCAL, 65, BAD_SENDER},
	{LABEL, 63, NULL}, {LABEL, 64, BAD_SENDER},
	{PATH, SMTP_PATH_MAX, NULL}, {PATH, SMTP_PATH_MAX + 1, BAD_SENDER},
	{HELO, SMTP_DOMAIN_MAX, NULL}, {HELO, SMTP_DOMAIN_MAX + 1, SYN_EHLO},
	{ENVID, SMTP_ENVID_MAX, NULL}, {ENVID, SMTP_ENVID_MAX + 1, "501 5.5.4 Bad ENVID= parameter"},
	{ORCPT_LINE, SMTP_LINE_MAX - 2, NULL}, {ORCPT_LINE, SMTP_LINE_MAX - 1, TOO_LONG},
};

/* fill_domain - n octets of dot-separated 'x' labels of at most 63 octets */
static void fill_domain(char *p, size_t n)
{
	memset(p, 'x', n);
	for (size_t i = 63; i < n - 1; i += 64)
		p[i] = '.';
}

START_TEST(test_lengths)
{
	static char line[200000];
	size_t n = lengths[_i].n, len = 0;
	struct smtp_cmd cmd;
	const char *reply;
	int rc;

	switch (lengths[_i].kind) {
	case LINE:
		len = n;
		memcpy(line, "NOOP ", 5);
		memset(line + 5, 'x', n - 5);
		break;
	case LOCAL:
		len = (size_t)sprintf(line, "MAIL FROM:<%.*s@b.org>", (int)n,
				      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
		break;
	case LABEL:
		len = (size_t)sprintf(line, "MAIL FROM:<a@%.*s.org>", (int)n,
				      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
		break;
	case PATH:
		/* "<a@" domain ">" is n octets */
		len = (size_t)sprintf(line, "MAIL FROM:<a@");
		fill_domain(line + len, n - 4);
		len += n - 4;
		line[len++] = '>';
		break;
	case HELO:
		len = (size_t)sprintf(line, "EHLO ");
		fill_domain(line + len, n);
		len += n;
		break;
	case ENVID:
		len = (size_t)sprintf(line, "MAIL FROM:<> ENVID=");
		memset(line + len, 'e', n);
		len += n;
		break;
	case ORCPT_LINE:
		len = (size_t)sprintf(line, "RCPT TO:<b@c.org> ORCPT=rfc822;");
		memset(line + len, 'o', n - len);
		len = n;
		break;
	}
	rc = parse(line, len, &cmd, &reply);
	check_reply("(long line)", rc, reply, lengths[_i].reply);
	if (rc == 0 && lengths[_i].kind == PATH)
		ck_assert_uint_eq(strlen(cmd.addr), n - 2);
	if (rc == 0 && lengths[_i].kind == HELO)
		ck_assert_uint_eq(strlen(cmd.helo), n);
	if (rc == 0 && lengths[_i].kind == ENVID)
		ck_assert_uint_eq(strlen(cmd.envid), n);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("smtp_cmd");
	TCase *tc = tcase_create("smtp_cmd");

	tcase_add_loop_test(tc, test_cases, 0, N_ELEMENTS(cases));
	tcase_add_loop_test(tc, test_params, 0, N_ELEMENTS(params));
	tcase_add_loop_test(tc, test_bdat, 0, N_ELEMENTS(bdat));
	tcase_add_loop_test(tc, test_verb_name, 0, N_ELEMENTS(names));
	tcase_add_loop_test(tc, test_lengths, 0, N_ELEMENTS(lengths));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
