/*
 * smtp_cmd - one SMTP/LMTP command line from a client, parsed into a
 * struct smtp_cmd or refused with a complete static reply.
 *
 * Pure and bounded: reads line[0..len) and nothing else, writes only *cmd
 * and *reply, never allocates, keeps no state. It must never accept what
 * it cannot store whole, never copy client bytes into a reply, and never
 * depend on the locale (case folding is ASCII only).
 *
 * Left to the caller: the order of commands, refusing AUTH and STARTTLS,
 * SIZE= against the configured limit, BODY=BINARYMIME if CHUNKING is not
 * offered, and SMTPUTF8 for RCPT. RCPT carries no transaction state, so
 * octets above 127 are always accepted in a RCPT address (when they form
 * valid UTF-8); the caller refuses them when MAIL had no SMTPUTF8.
 */
#include "config.h"

#include <arpa/inet.h>
#include <string.h>

#include "ascii.h"
#include "smtp_cmd.h"

#define SMTP_LOCAL_MAX 64		/* RFC 5321 4.5.3.1.1 */
#define SMTP_LABEL_MAX 63		/* RFC 1035 2.3.4, ASCII labels */

#define R_TOO_LONG "500 5.5.2 Error: line too long"
#define R_BAD_CHARS "500 5.5.2 Error: bad characters in command"
#define R_BAD_SYNTAX "500 5.5.2 Error: bad syntax"
#define R_UNKNOWN "500 5.5.2 Error: command not recognized"
#define R_BAD_SENDER "501 5.1.7 Bad sender address syntax"
#define R_BAD_RCPT "501 5.1.3 Bad recipient address syntax"
#define R_UNSUPPORTED "555 5.5.4 Unsupported option"

#define DOM_UTF8 0x01			/* octets above 127 (U-labels) */
#define DOM_HELO 0x02			/* also '_' and a trailing dot */

#define IS_WSP(c) ((c) == ' ' || (c) == '\t')

/* verbs - names and argument syntax replies, indexed by enum smtp_verb */
static const struct {
	const char *name;
	const char *syntax;		/* reply for a missing or bad argument */
} verbs[] = {
	[CMD_UNKNOWN] = {"UNKNOWN", R_UNKNOWN},
	[CMD_HELO] = {"HELO", "501 5.5.4 Syntax: HELO hostname"},
	[CMD_EHLO] = {"EHLO", "501 5.5.4 Syntax: EHLO hostname"},
	[CMD_LHLO] = {"LHLO", "501 5.5.4 Syntax: LHLO hostname"},
	[CMD_MAIL] = {"MAIL", "501 5.5.4 Syntax: MAIL FROM:<address>"},
	[CMD_RCPT] = {"RCPT", "501 5.5.4 Syntax: RCPT TO:<address>"},
	[CMD_DATA] = {"DATA", "501 5.5.4 Syntax: DATA"},
	[CMD_BDAT] = {"BDAT", "501 5.5.4 Syntax: BDAT size [LAST]"},
	[CMD_RSET] = {"RSET", "501 5.5.4 Syntax: RSET"},
	[CMD_NOOP] = {"NOOP", NULL},
	[CMD_QUIT] = {"QUIT", "501 5.5.4 Syntax: QUIT"},
	[CMD_VRFY] = {"VRFY", NULL},
	[CMD_EXPN] = {"EXPN", NULL},
	[CMD_HELP] = {"HELP", NULL},
	[CMD_STARTTLS] = {"STARTTLS", "501 5.5.4 Syntax: STARTTLS"},
	[CMD_AUTH] = {"AUTH", NULL},
};

#define NVERBS (sizeof(verbs) / sizeof(verbs[0]))

/*
 * Replies name an unsupported parameter only when it is one of these: the
 * reply is static, so a name the client made up cannot appear in it.
 */
static const char *const unsupported[] = {
	R_UNSUPPORTED ": SIZE", R_UNSUPPORTED ": BODY", R_UNSUPPORTED ": SMTPUTF8",
	R_UNSUPPORTED ": RET", R_UNSUPPORTED ": ENVID", R_UNSUPPORTED ": NOTIFY",
	R_UNSUPPORTED ": ORCPT", R_UNSUPPORTED ": AUTH", R_UNSUPPORTED ": MT-PRIORITY",
	R_UNSUPPORTED ": REQUIRETLS", R_UNSUPPORTED ": BY", R_UNSUPPORTED ": HOLDFOR",
	R_UNSUPPORTED ": HOLDUNTIL", R_UNSUPPORTED ": MTRK", R_UNSUPPORTED ": RRVS",
};

/* prefix_is - does the counted string start with word, case-insensitive */
static int prefix_is(const char *p, size_t n, const char *word)
{
	size_t wn = strlen(word);

	return n >= wn && ascii_word_is(p, wn, word);
}

/* is_alnum - ASCII letter or digit */
static int is_alnum(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* has_8bit - does the counted string hold an octet above 127 */
static int has_8bit(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] >= 0x80)
			return 1;
	return 0;
}

/* utf8_ok - well-formed UTF-8: no overlong form, surrogate or value past U+10FFFF */
static int utf8_ok(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		unsigned c = p[i], cp, min;
		size_t k;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1, cp = c & 0x1f, min = 0x80;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, cp = c & 0x0f, min = 0x800;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, cp = c & 0x07, min = 0x10000;
		else
			return 0;
		if (n - i - 1 < k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((p[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

/* literal_ok - an address literal: "[1.2.3.4]" or "[IPv6:...]" */
static int literal_ok(const char *p, size_t n)
{
	unsigned char addr[16];
	char buf[64];
	int family = AF_INET;

	if (n < 3 || p[0] != '[' || p[n - 1] != ']')
		return 0;
	p++, n -= 2;
	if (prefix_is(p, n, "IPv6:")) {
		family = AF_INET6;
		p += 5, n -= 5;
	}
	if (n == 0 || n >= sizeof(buf) || memchr(p, '\0', n) != NULL)
		return 0;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return inet_pton(family, buf, addr) == 1;
}

/* domain_ok - dot-separated labels of letters, digits and inner hyphens */
static int domain_ok(const char *p, size_t n, int flags)
{
	const char *label = p, *end;
	int eight = 0, any8 = 0;

	/* HELO is informational: be as lenient as Postfix's defaults. */
	if ((flags & DOM_HELO) && n > 1 && p[n - 1] == '.')
		n--;
	if (n == 0 || n > SMTP_DOMAIN_MAX)
		return 0;
	end = p + n;
	for (const char *q = p;; q++) {
		unsigned char c;

		if (q == end || *q == '.') {
			size_t ln = (size_t)(q - label);

			if (ln == 0 || label[0] == '-' || q[-1] == '-'
			    || (ln > SMTP_LABEL_MAX && !eight))
				return 0;
			if (q == end)
				break;
			label = q + 1;
			eight = 0;
			continue;
		}
		c = (unsigned char)*q;
		if (c >= 0x80) {
			if (!(flags & DOM_UTF8))
				return 0;
			eight = any8 = 1;
		} else if (!is_alnum(c) && c != '-' && !(c == '_' && (flags & DOM_HELO))) {
			return 0;
		}
	}
	return !any8 || utf8_ok(p, n);
}

/* host_ok - a domain or an address literal, at most SMTP_DOMAIN_MAX octets */
static int host_ok(const char *p, size_t n, int flags)
{
	if (n > 0 && p[0] == '[')
		return n <= SMTP_DOMAIN_MAX && literal_ok(p, n);
	return domain_ok(p, n, flags);
}

/* atext_ok - an RFC 5322 atext octet, or any octet above 127 (RFC 6531) */
static int atext_ok(unsigned char c)
{
	return is_alnum(c) || c >= 0x80 || (c != '\0' && strchr("!#$%&'*+-/=?^_`{|}~", c) != NULL);
}

/* local_ok - a dot-atom or a quoted string, 1 to 64 octets as received */
static int local_ok(const char *p, size_t n)
{
	if (n == 0 || n > SMTP_LOCAL_MAX)
		return 0;
	if (p[0] == '"') {
		if (n < 2 || p[n - 1] != '"')
			return 0;
		for (size_t i = 1; i < n - 1; i++) {
			unsigned char c = (unsigned char)p[i];

			if (c == '\\') {
				if (++i == n - 1)
					return 0;
				c = (unsigned char)p[i];
				if (c < 32 || c > 126)
					return 0;
			} else if (c == '"' || c < 32 || c == 127) {
				return 0;
			}
		}
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '.') {
			if (i == 0 || i == n - 1 || p[i - 1] == '.')
				return 0;
		} else if (!atext_ok((unsigned char)p[i])) {
			return 0;
		}
	}
	return 1;
}

struct path {
	const char *mbox;		/* the mailbox, source route dropped */
	size_t len;			/* 0 for <> */
	int has_at;			/* the mailbox has a domain */
	int eight;			/* an octet above 127 in the mailbox */
};

/* path_parse - "<" [route ":"] [mailbox] ">" at p; return what follows it */
static const char *path_parse(const char *p, const char *end, struct path *pa)
{
	const char *q, *lim, *local, *dom = NULL;
	size_t llen;
	int route = 0;

	memset(pa, 0, sizeof(*pa));
	if (p == end || *p != '<')
		return NULL;
	/* The whole path, brackets included, fits in SMTP_PATH_MAX. */
	lim = (size_t)(end - p) > SMTP_PATH_MAX ? p + SMTP_PATH_MAX : end;
	q = p + 1;
	/* Source route "@a,@b:" (RFC 5321 4.1.2): checked, then dropped. */
	while (q < lim && *q == '@') {
		const char *d = ++q;

		while (q < lim && *q != ',' && *q != ':' && *q != '>')
			q++;
		if (q == lim || *q == '>' || !domain_ok(d, (size_t)(q - d), DOM_UTF8))
			return NULL;
		route = 1;
		if (*q++ == ':')
			break;
		if (q == lim || *q != '@')
			return NULL;
	}
	local = q;
	if (q < lim && *q == '"') {
		for (q++; q < lim && *q != '"'; q++)
			if (*q == '\\' && ++q == lim)
				return NULL;
		if (q == lim)
			return NULL;
		q++;
	} else {
		while (q < lim && *q != '@' && *q != '>')
			q++;
	}
	llen = (size_t)(q - local);
	if (q < lim && *q == '@') {
		dom = ++q;
		while (q < lim && *q != '>')
			q++;
	}
	if (q == lim || *q != '>')
		return NULL;
	pa->mbox = local;
	pa->len = (size_t)(q - local);
	pa->has_at = dom != NULL;
	if (pa->len == 0)
		return route ? NULL : q + 1;
	if (!local_ok(local, llen))
		return NULL;
	if (dom && !host_ok(dom, (size_t)(q - dom), DOM_UTF8))
		return NULL;
	pa->eight = has_8bit(local, pa->len);
	if (pa->eight && !utf8_ok(local, pa->len))
		return NULL;
	return q + 1;
}

/* digits - 1*DIGIT into *out; -1 if empty, not digits or too large */
static int digits(const char *p, size_t n, unsigned long long *out)
{
	unsigned long long v = 0;

	if (n == 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(unsigned char)p[i] - '0';

		if (d > 9 || v > (~0ULL - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* hexval - value of an upper-case hex digit, or -1 (xtext, RFC 3461 4) */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* xtext_ok - "!".."~" except '+' and '=', or "+" two upper-case hex digits */
static int xtext_ok(const char *p, size_t n, int utf8)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '+') {
			if (n - i < 3 || hexval(p[i + 1]) < 0 || hexval(p[i + 2]) < 0)
				return 0;
			i += 2;
		} else if (c >= 0x80) {
			if (!utf8)
				return 0;
		} else if (c < 33 || c > 126 || c == '=') {
			return 0;
		}
	}
	return !utf8 || utf8_ok(p, n);
}

/* set_size - SIZE=1*DIGIT (RFC 1870) */
static int set_size(struct smtp_cmd *cmd, const char *v, size_t n)
{
	return v ? digits(v, n, &cmd->size) : -1;
}

/* set_body - BODY=7BIT|8BITMIME (RFC 6152)|BINARYMIME (RFC 3030) */
static int set_body(struct smtp_cmd *cmd, const char *v, size_t n)
{
	if (v && ascii_word_is(v, n, "7BIT"))
		cmd->body = BODY_7BIT;
	else if (v && ascii_word_is(v, n, "8BITMIME"))
		cmd->body = BODY_8BITMIME;
	else if (v && ascii_word_is(v, n, "BINARYMIME"))
		cmd->body = BODY_BINARYMIME;
	else
		return -1;
	return 0;
}

/* set_smtputf8 - SMTPUTF8, without a value (RFC 6531) */
static int set_smtputf8(struct smtp_cmd *cmd, const char *v, size_t n)
{
	if (v)
		return -1;
	cmd->smtputf8 = 1;
	return 0;
}

/* set_ret - RET=FULL|HDRS (RFC 3461) */
static int set_ret(struct smtp_cmd *cmd, const char *v, size_t n)
{
	if (v && ascii_word_is(v, n, "FULL"))
		cmd->ret = RET_FULL;
	else if (v && ascii_word_is(v, n, "HDRS"))
		cmd->ret = RET_HDRS;
	else
		return -1;
	return 0;
}

/* set_envid - ENVID=xtext, at most SMTP_ENVID_MAX octets as received */
static int set_envid(struct smtp_cmd *cmd, const char *v, size_t n)
{
	if (!v || n > SMTP_ENVID_MAX || !xtext_ok(v, n, 0))
		return -1;
	memcpy(cmd->envid, v, n);
	cmd->envid[n] = '\0';
	return 0;
}

/* set_notify - NOTIFY=NEVER, or a list of SUCCESS, FAILURE, DELAY */
static int set_notify(struct smtp_cmd *cmd, const char *v, size_t n)
{
	const char *end;
	unsigned bits = 0;

	if (!v || n == 0)
		return -1;
	end = v + n;
	while (v <= end) {
		const char *comma = memchr(v, ',', (size_t)(end - v));
		size_t len = (size_t)((comma ? comma : end) - v);

		if (ascii_word_is(v, len, "NEVER"))
			bits |= NOTIFY_NEVER;
		else if (ascii_word_is(v, len, "SUCCESS"))
			bits |= NOTIFY_SUCCESS;
		else if (ascii_word_is(v, len, "FAILURE"))
			bits |= NOTIFY_FAILURE;
		else if (ascii_word_is(v, len, "DELAY"))
			bits |= NOTIFY_DELAY;
		else
			return -1;
		if (comma == NULL)
			break;
		v = comma + 1;
	}
	if ((bits & NOTIFY_NEVER) && bits != NOTIFY_NEVER)
		return -1;
	cmd->notify = bits;
	return 0;
}

/*
 * set_orcpt - ORCPT=addr-type;xtext (RFC 3461 4.2), at most SMTP_ORCPT_MAX
 * octets. With the "utf-8" type (RFC 6533) the value may also hold UTF-8.
 */
static int set_orcpt(struct smtp_cmd *cmd, const char *v, size_t n)
{
	const char *semi;
	size_t tlen;

	if (!v || n > SMTP_ORCPT_MAX || (semi = memchr(v, ';', n)) == NULL)
		return -1;
	tlen = (size_t)(semi - v);
	if (tlen == 0 || !is_alnum((unsigned char)v[0]))
		return -1;
	for (size_t i = 1; i < tlen; i++)
		if (!is_alnum((unsigned char)v[i]) && v[i] != '-')
			return -1;
	if (!xtext_ok(semi + 1, n - tlen - 1, ascii_word_is(v, tlen, "utf-8")))
		return -1;
	memcpy(cmd->orcpt, v, n);
	cmd->orcpt[n] = '\0';
	return 0;
}

/* params - what MAIL and RCPT accept, with their replies */
static const struct param {
	const char *name;
	enum smtp_verb verb;
	int (*set)(struct smtp_cmd *, const char *, size_t);
	const char *bad;
	const char *dup;
} params[] = {
	{"SIZE", CMD_MAIL, set_size,
	 "501 5.5.4 Bad SIZE= parameter", "501 5.5.4 Duplicate SIZE= parameter"},
	{"BODY", CMD_MAIL, set_body,
	 "501 5.5.4 Bad BODY= parameter", "501 5.5.4 Duplicate BODY= parameter"},
	{"SMTPUTF8", CMD_MAIL, set_smtputf8,
	 "501 5.5.4 Bad SMTPUTF8 parameter", "501 5.5.4 Duplicate SMTPUTF8 parameter"},
	{"RET", CMD_MAIL, set_ret,
	 "501 5.5.4 Bad RET= parameter", "501 5.5.4 Duplicate RET= parameter"},
	{"ENVID", CMD_MAIL, set_envid,
	 "501 5.5.4 Bad ENVID= parameter", "501 5.5.4 Duplicate ENVID= parameter"},
	{"NOTIFY", CMD_RCPT, set_notify,
	 "501 5.5.4 Bad NOTIFY= parameter", "501 5.5.4 Duplicate NOTIFY= parameter"},
	{"ORCPT", CMD_RCPT, set_orcpt,
	 "501 5.5.4 Bad ORCPT= parameter", "501 5.5.4 Duplicate ORCPT= parameter"},
};

/* unsupported_reply - 555 naming the parameter when the name is a known one */
static const char *unsupported_reply(const char *name, size_t n)
{
	size_t skip = sizeof(R_UNSUPPORTED ": ") - 1;

	for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
		if (ascii_word_is(name, n, unsupported[i] + skip))
			return unsupported[i];
	return R_UNSUPPORTED;
}

/* parse_params - "NAME[=value]" words separated by white space */
static int parse_params(const char *p, const char *end, struct smtp_cmd *cmd, const char **reply)
{
	unsigned seen = 0;

	while (p < end && IS_WSP(*p))
		p++;
	while (p < end) {
		const char *tok = p, *eq, *val = NULL;
		size_t nlen, vlen = 0, i;

		while (p < end && !IS_WSP(*p))
			p++;
		eq = memchr(tok, '=', (size_t)(p - tok));
		nlen = (size_t)((eq ? eq : p) - tok);
		if (eq) {
			val = eq + 1;
			vlen = (size_t)(p - val);
		}
		for (i = 0; i < sizeof(params) / sizeof(params[0]); i++)
			if (params[i].verb == cmd->verb && ascii_word_is(tok, nlen, params[i].name))
				break;
		if (i == sizeof(params) / sizeof(params[0])) {
			*reply = unsupported_reply(tok, nlen);
			return -1;
		}
		if (seen & 1U << i) {
			*reply = params[i].dup;
			return -1;
		}
		seen |= 1U << i;
		if (params[i].set(cmd, val, vlen) < 0) {
			*reply = params[i].bad;
			return -1;
		}
		while (p < end && IS_WSP(*p))
			p++;
	}
	return 0;
}

/* copy_addr - the mailbox into cmd->addr; it fits, path_parse bounds it */
static void copy_addr(struct smtp_cmd *cmd, const struct path *pa)
{
	memcpy(cmd->addr, pa->mbox, pa->len);
	cmd->addr[pa->len] = '\0';
}

/* parse_mail - "FROM:" path [params]; <> is the null sender */
static int parse_mail(const char *p, const char *end, struct smtp_cmd *cmd, const char **reply)
{
	struct path pa;
	const char *rest;

	if (!prefix_is(p, (size_t)(end - p), "FROM:")) {
		*reply = verbs[CMD_MAIL].syntax;
		return -1;
	}
	for (p += 5; p < end && IS_WSP(*p); p++)
		;			/* Postfix takes "FROM: <a@b>" */
	if (p == end) {
		*reply = verbs[CMD_MAIL].syntax;
		return -1;
	}
	rest = path_parse(p, end, &pa);
	if (rest == NULL || (rest < end && !IS_WSP(*rest)) || (pa.len > 0 && !pa.has_at)) {
		*reply = R_BAD_SENDER;
		return -1;
	}
	copy_addr(cmd, &pa);
	if (parse_params(rest, end, cmd, reply) < 0)
		return -1;
	if (pa.eight && !cmd->smtputf8) {
		*reply = R_BAD_SENDER;
		return -1;
	}
	return 0;
}

/* parse_rcpt - "TO:" path [params]; a local part alone only for postmaster */
static int parse_rcpt(const char *p, const char *end, struct smtp_cmd *cmd, const char **reply)
{
	struct path pa;
	const char *rest;

	if (!prefix_is(p, (size_t)(end - p), "TO:")) {
		*reply = verbs[CMD_RCPT].syntax;
		return -1;
	}
	for (p += 3; p < end && IS_WSP(*p); p++)
		;
	if (p == end) {
		*reply = verbs[CMD_RCPT].syntax;
		return -1;
	}
	rest = path_parse(p, end, &pa);
	if (rest == NULL || (rest < end && !IS_WSP(*rest)) || pa.len == 0
	    || (!pa.has_at && !ascii_word_is(pa.mbox, pa.len, "postmaster"))) {
		*reply = R_BAD_RCPT;
		return -1;
	}
	copy_addr(cmd, &pa);
	return parse_params(rest, end, cmd, reply);
}

/* parse_helo - one domain or address literal, kept in cmd->helo */
static int parse_helo(const char *p, const char *end, struct smtp_cmd *cmd, const char **reply)
{
	size_t n = (size_t)(end - p);

	if (n == 0 || n > SMTP_DOMAIN_MAX || memchr(p, ' ', n) || memchr(p, '\t', n)
	    || !host_ok(p, n, DOM_UTF8 | DOM_HELO)) {
		*reply = verbs[cmd->verb].syntax;
		return -1;
	}
	memcpy(cmd->helo, p, n);
	cmd->helo[n] = '\0';
	return 0;
}

/* parse_bdat - "size [LAST]" */
static int parse_bdat(const char *p, const char *end, struct smtp_cmd *cmd, const char **reply)
{
	const char *tok = p;

	while (p < end && !IS_WSP(*p))
		p++;
	if (digits(tok, (size_t)(p - tok), &cmd->chunk) < 0)
		goto bad;
	while (p < end && IS_WSP(*p))
		p++;
	if (p < end) {
		if (!ascii_word_is(p, (size_t)(end - p), "LAST"))
			goto bad;
		cmd->last = 1;
	}
	return 0;
bad:
	*reply = verbs[CMD_BDAT].syntax;
	return -1;
}

/* smtp_verb_name - the upper-case name of a verb */
const char *smtp_verb_name(enum smtp_verb verb)
{
	return (unsigned)verb < NVERBS ? verbs[verb].name : verbs[CMD_UNKNOWN].name;
}

/* smtp_cmd_parse - one command line without its CRLF */
int smtp_cmd_parse(const char *line, size_t len, struct smtp_cmd *cmd, const char **reply)
{
	const char *p = line, *end = line + len, *verb;
	size_t vlen;

	memset(cmd, 0, sizeof(*cmd));
	*reply = NULL;
	if (len > SMTP_LINE_MAX - 2) {
		*reply = R_TOO_LONG;
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if ((c < 32 && c != '\t') || c == 127) {
			*reply = R_BAD_CHARS;
			return -1;
		}
	}
	/* Lenient about white space around words, as Postfix is. */
	while (p < end && IS_WSP(*p))
		p++;
	while (end > p && IS_WSP(end[-1]))
		end--;
	if (p == end) {
		*reply = R_BAD_SYNTAX;
		return -1;
	}
	for (verb = p; p < end && !IS_WSP(*p); p++)
		;
	vlen = (size_t)(p - verb);
	while (p < end && IS_WSP(*p))
		p++;
	for (size_t v = CMD_UNKNOWN + 1; v < NVERBS; v++) {
		if (ascii_word_is(verb, vlen, verbs[v].name)) {
			cmd->verb = (enum smtp_verb)v;
			break;
		}
	}
	switch (cmd->verb) {
	case CMD_UNKNOWN:
		*reply = R_UNKNOWN;
		return -1;
	case CMD_HELO:
	case CMD_EHLO:
	case CMD_LHLO:
		return parse_helo(p, end, cmd, reply);
	case CMD_MAIL:
		return parse_mail(p, end, cmd, reply);
	case CMD_RCPT:
		return parse_rcpt(p, end, cmd, reply);
	case CMD_BDAT:
		return parse_bdat(p, end, cmd, reply);
	case CMD_DATA:
	case CMD_RSET:
	case CMD_QUIT:
	case CMD_STARTTLS:
		if (p < end) {
			*reply = verbs[cmd->verb].syntax;
			return -1;
		}
		return 0;
	case CMD_NOOP:
	case CMD_VRFY:
	case CMD_EXPN:
	case CMD_HELP:
	case CMD_AUTH:
		return 0;
	}
	*reply = R_UNKNOWN;
	return -1;
}
