/*
 * smtp_cmd - parse one SMTP/LMTP command line from a client, as a pure
 * function: no I/O, no allocation, no globals. Bounded: addresses and
 * parameters longer than the RFC limits are refused, never truncated.
 *
 * The line is given without its CRLF. On error the return is -1 and
 * *reply points at a complete static SMTP reply ("501 5.5.4 ..."), with
 * the enhanced status code, that the caller sends as is.
 */
#ifndef TERN_SMTP_CMD_H
#define TERN_SMTP_CMD_H

#include <stddef.h>

#define SMTP_LINE_MAX 512		/* RFC 5321 4.5.3.1.4, CRLF included */
#define SMTP_PATH_MAX 256		/* RFC 5321 4.5.3.1.3, brackets included */
#define SMTP_ADDR_MAX (SMTP_PATH_MAX - 2)	/* the mailbox, without them */
#define SMTP_ENVID_MAX 100		/* RFC 3461 4.4 */
#define SMTP_ORCPT_MAX 500		/* RFC 3461 4.2, "type;xtext" */
#define SMTP_DOMAIN_MAX 255

enum smtp_verb {
	CMD_UNKNOWN, CMD_HELO, CMD_EHLO, CMD_LHLO, CMD_MAIL, CMD_RCPT, CMD_DATA, CMD_BDAT,
	CMD_RSET, CMD_NOOP, CMD_QUIT, CMD_VRFY, CMD_EXPN, CMD_HELP, CMD_STARTTLS, CMD_AUTH,
};

enum smtp_body { BODY_NONE, BODY_7BIT, BODY_8BITMIME, BODY_BINARYMIME };
enum smtp_ret { RET_NONE, RET_FULL, RET_HDRS };

/* NOTIFY= bits (RFC 3461); NOTIFY_NEVER excludes the others */
#define NOTIFY_NEVER 0x01
#define NOTIFY_SUCCESS 0x02
#define NOTIFY_FAILURE 0x04
#define NOTIFY_DELAY 0x08

struct smtp_cmd {
	enum smtp_verb verb;
	/* HELO/EHLO/LHLO: the client's name (domain or address literal) */
	char helo[SMTP_DOMAIN_MAX + 1];
	/* MAIL/RCPT: the path without <>, source route dropped; "" is <> */
	char addr[SMTP_PATH_MAX + 1];
	/* MAIL parameters */
	unsigned long long size;	/* SIZE=, 0 if absent */
	enum smtp_body body;		/* BODY= */
	int smtputf8;			/* SMTPUTF8 */
	enum smtp_ret ret;		/* RET= */
	char envid[SMTP_ENVID_MAX + 1];	/* ENVID=, xtext as received */
	/* RCPT parameters */
	unsigned notify;		/* NOTIFY= bits, 0 if absent */
	char orcpt[SMTP_ORCPT_MAX + 1];	/* ORCPT=, "addr-type;xtext" as received */
	/* BDAT */
	unsigned long long chunk;	/* octets that follow */
	int last;			/* BDAT ... LAST */
};

int smtp_cmd_parse(const char *line, size_t len, struct smtp_cmd *cmd, const char **reply);
const char *smtp_verb_name(enum smtp_verb verb);

#endif
