/*
 * fuzz_smtp_cmd - libFuzzer target: one SMTP command line.
 *
 * Checks that a refusal is one well-formed static reply line, that every
 * string field is terminated inside its buffer, and that an accepted MAIL
 * or RCPT, written back in canonical form, parses to the same result.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "smtp_cmd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* check - abort on a broken invariant */
static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

/* reply_ok - "5yz x.y.z text", printable, short */
static int reply_ok(const char *r)
{
	size_t n = strlen(r);

	if (n < 10 || n > 200 || r[0] != '5' || r[3] != ' ')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (r[i] < ' ' || r[i] > '~')
			return 0;
	return 1;
}

/* canonical - write an accepted MAIL or RCPT back; 0 if it does not fit */
static size_t canonical(const struct smtp_cmd *c, char *buf, size_t cap)
{
	static const char *const body[] = {"", " BODY=7BIT", " BODY=8BITMIME", " BODY=BINARYMIME"};
	static const char *const ret[] = {"", " RET=FULL", " RET=HDRS"};
	char size[32] = "", envid[SMTP_ENVID_MAX + 8] = "", orcpt[SMTP_ORCPT_MAX + 8] = "";
	char notify[40] = "";
	int n;

	if (c->verb == CMD_MAIL) {
		if (c->size)
			snprintf(size, sizeof(size), " SIZE=%llu", c->size);
		if (c->envid[0])
			snprintf(envid, sizeof(envid), " ENVID=%s", c->envid);
		n = snprintf(buf, cap, "MAIL FROM:<%s>%s%s%s%s%s", c->addr, size, body[c->body],
			     c->smtputf8 ? " SMTPUTF8" : "", ret[c->ret], envid);
	} else {
		if (c->notify)
			snprintf(notify, sizeof(notify), " NOTIFY=%s%s%s%s",
				 c->notify & NOTIFY_NEVER ? "NEVER" : "",
				 c->notify & NOTIFY_SUCCESS ? "SUCCESS," : "",
				 c->notify & NOTIFY_FAILURE ? "FAILURE," : "",
				 c->notify & NOTIFY_DELAY ? "DELAY," : "");
		n = (int)strlen(notify);
		if (n > 0 && notify[n - 1] == ',')
			notify[n - 1] = '\0';
		if (c->orcpt[0])
			snprintf(orcpt, sizeof(orcpt), " ORCPT=%s", c->orcpt);
		n = snprintf(buf, cap, "RCPT TO:<%s>%s%s", c->addr, notify, orcpt);
	}
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smtp_cmd cmd, again;
	const char *reply = NULL;
	char buf[2048];
	size_t n;
	int rc = smtp_cmd_parse((const char *)data, size, &cmd, &reply);

	check(rc == 0 || rc == -1);
	check(smtp_verb_name(cmd.verb) != NULL);
	if (rc < 0) {
		check(reply != NULL && reply_ok(reply));
		return 0;
	}
	check(reply == NULL && cmd.verb != CMD_UNKNOWN);
	check(memchr(cmd.helo, '\0', sizeof(cmd.helo)) != NULL);
	check(memchr(cmd.addr, '\0', sizeof(cmd.addr)) != NULL);
	check(memchr(cmd.envid, '\0', sizeof(cmd.envid)) != NULL);
	check(memchr(cmd.orcpt, '\0', sizeof(cmd.orcpt)) != NULL);
	check(!(cmd.notify & NOTIFY_NEVER) || cmd.notify == NOTIFY_NEVER);
	if (cmd.verb == CMD_HELO || cmd.verb == CMD_EHLO || cmd.verb == CMD_LHLO)
		check(cmd.helo[0] != '\0');
	if (cmd.verb == CMD_MAIL)
		check(cmd.addr[0] == '\0' || strchr(cmd.addr, '@') != NULL);
	if (cmd.verb == CMD_RCPT)
		check(cmd.addr[0] != '\0');
	if ((cmd.verb == CMD_MAIL || cmd.verb == CMD_RCPT)
	    && (n = canonical(&cmd, buf, sizeof(buf))) != 0 && n <= SMTP_LINE_MAX - 2) {
		check(smtp_cmd_parse(buf, n, &again, &reply) == 0);
		check(memcmp(&cmd, &again, sizeof(cmd)) == 0);
	}
	return 0;
}
