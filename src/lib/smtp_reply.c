/*
 * smtp_reply - SMTP server replies, parsed incrementally from octets the
 * relay client read off the socket, and what the client wants from them:
 * EHLO extensions, the peer's queue id, a log-safe line.
 *
 * It must never buffer more than one line (SMTP_REPLY_LINE_MAX + 1
 * octets) and one reply's text, whatever the peer sends; never read past
 * what it was given; never hand out text with a NUL in it; never depend
 * on the locale (case folding is ASCII only). No I/O, no globals; the only
 * allocation is the parser itself.
 *
 * Decisions the header leaves open:
 * - Strict line syntax: three digits, then SP, "-" or the line end. "250"
 *   alone ends a reply; anything else after the digits ("250ok", "250\t")
 *   is a protocol error, and so is a code outside 200..599 or an empty
 *   line. A NUL in a line is a protocol error (no server sends one).
 * - Line ends: LF, with one CR before it dropped. A CR anywhere else is
 *   text (smtp_reply_format shows it as '?').
 * - Over SMTP_REPLY_TEXT_MAX octets of text is a protocol error, not a
 *   truncation: a reply is either whole or refused.
 * - An enhanced status code (RFC 3463: class "." 1*3digit "." 1*3digit,
 *   then SP or the line end) is taken from the first line when its class
 *   is the code's first digit, and is cut from the text of every line
 *   that starts with one of that class (RFC 2034 puts it on each line).
 *   One of another class stays in the text and the reply has none.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "smtp_reply.h"
#include "xalloc.h"

enum reply_state {
	R_LINES,			/* reading the lines of a reply */
	R_READY,			/* a complete reply waits for smtp_reply_next */
	R_ERROR,			/* protocol error: input is swallowed */
};

struct smtp_reply_parser {
	enum reply_state state;
	const char *why;		/* the protocol error, static text */
	size_t linelen;			/* octets in line[] */
	char line[SMTP_REPLY_LINE_MAX + 1];	/* the line being read, CR included */
	struct smtp_reply cur;		/* the reply being built */
};

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_ALNUM(c) (IS_DIGIT(c) || ((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define IS_WSP(c) ((c) == ' ' || (c) == '\t')

/* smtp_reply_new - a parser at the start of a reply */
struct smtp_reply_parser *smtp_reply_new(void)
{
	struct smtp_reply_parser *p = xmalloc(sizeof(*p));

	smtp_reply_reset(p);
	return p;
}

/* smtp_reply_reset - forget everything: partial line, reply, error */
void smtp_reply_reset(struct smtp_reply_parser *p)
{
	p->state = R_LINES;
	p->why = NULL;
	p->linelen = 0;
	p->cur.code = 0;
	p->cur.esc[0] = '\0';
	p->cur.nlines = 0;
	p->cur.textlen = 0;
}

/* fail - the one error sink: note why, drop what is held, swallow the rest */
static void fail(struct smtp_reply_parser *p, const char *why)
{
	p->state = R_ERROR;
	p->why = why;
	p->linelen = 0;
	p->cur.nlines = 0;
	p->cur.textlen = 0;
}

/* esc_len - length of an RFC 3463 code of class cls at s, then SP or end; 0 if none */
static size_t esc_len(const char *s, size_t n, char cls)
{
	size_t i = 0;

	if (n < 5 || s[0] != cls || s[1] != '.')
		return 0;
	i = 2;
	for (int part = 0; part < 2; part++) {
		size_t start = i;

		while (i < n && i - start < 4 && IS_DIGIT(s[i]))
			i++;
		if (i == start || i - start > 3)
			return 0;
		if (part == 0) {
			if (i >= n || s[i] != '.')
				return 0;
			i++;
		}
	}
	return i == n || s[i] == ' ' ? i : 0;
}

/* line_error - why a line cannot be part of reply r, or NULL */
static const char *line_error(const struct smtp_reply *r, const char *s, size_t n)
{
	int code;

	if (n == 0)
		return "empty reply line";
	if (n < 3 || !IS_DIGIT(s[0]) || !IS_DIGIT(s[1]) || !IS_DIGIT(s[2]))
		return "malformed reply code";
	code = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
	if (code < 200 || code > 599)
		return "reply code out of range";
	if (n > 3 && s[3] != ' ' && s[3] != '-')
		return "malformed reply line";
	if (r->nlines > 0 && code != r->code)
		return "inconsistent codes in multi-line reply";
	if (r->nlines == SMTP_REPLY_LINES_MAX)
		return "too many lines in reply";
	if (memchr(s, '\0', n) != NULL)
		return "NUL in reply";
	return NULL;
}

/* line_in - one complete line, line end removed: add it to the reply */
static void line_in(struct smtp_reply_parser *p, const char *s, size_t n)
{
	struct smtp_reply *r = &p->cur;
	const char *t, *why;
	size_t tn, e;
	int last;

	if ((why = line_error(r, s, n)) != NULL) {
		fail(p, why);
		return;
	}
	last = n == 3 || s[3] == ' ';
	t = n > 3 ? s + 4 : s + 3;
	tn = n > 3 ? n - 4 : 0;
	if ((e = esc_len(t, tn, s[0])) != 0) {
		if (r->nlines == 0) {
			memcpy(r->esc, t, e);
			r->esc[e] = '\0';
		}
		while (e < tn && t[e] == ' ')
			e++;
		t += e;
		tn -= e;
	}
	if (tn > SMTP_REPLY_TEXT_MAX - r->textlen) {
		fail(p, "reply text too long");
		return;
	}
	r->code = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
	r->off[r->nlines] = (unsigned short)(r->textlen + r->nlines);
	r->len[r->nlines] = (unsigned short)tn;
	memcpy(r->text + r->off[r->nlines], t, tn);
	r->text[r->off[r->nlines] + tn] = '\0';
	r->textlen += tn;
	r->nlines++;
	if (last)
		p->state = R_READY;
}

/* smtp_reply_push - feed octets; stops after a complete reply */
ssize_t smtp_reply_push(struct smtp_reply_parser *p, const char *buf, size_t len)
{
	size_t i = 0;

	if (len > SSIZE_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (p->state == R_READY) {
		errno = EALREADY;
		return -1;
	}
	while (i < len && p->state == R_LINES) {
		const char *lf = memchr(buf + i, '\n', len - i);
		size_t n = lf ? (size_t)(lf - (buf + i)) : len - i;
		size_t l;

		/* The line may hold SMTP_REPLY_LINE_MAX octets and a CR. */
		if (n > sizeof(p->line) - p->linelen) {
			fail(p, "reply line too long");
			break;
		}
		memcpy(p->line + p->linelen, buf + i, n);
		p->linelen += n;
		i += n;
		if (lf == NULL) {
			if (p->linelen == sizeof(p->line) && p->line[p->linelen - 1] != '\r')
				fail(p, "reply line too long");
			break;
		}
		i++;
		l = p->linelen;
		if (l > 0 && p->line[l - 1] == '\r')
			l--;
		p->linelen = 0;
		if (l > SMTP_REPLY_LINE_MAX)
			fail(p, "reply line too long");
		else
			line_in(p, p->line, l);
	}
	return (ssize_t)(p->state == R_ERROR ? len : i);
}

/* smtp_reply_next - take the complete reply, if there is one */
int smtp_reply_next(struct smtp_reply_parser *p, struct smtp_reply *r)
{
	switch (p->state) {
	case R_ERROR:
		errno = EPROTO;
		return -1;
	case R_LINES:
		return 0;
	case R_READY:
		break;
	}
	*r = p->cur;
	p->cur.code = 0;
	p->cur.esc[0] = '\0';
	p->cur.nlines = 0;
	p->cur.textlen = 0;
	p->state = R_LINES;
	return 1;
}

/* smtp_reply_error - the protocol error, or NULL */
const char *smtp_reply_error(const struct smtp_reply_parser *p)
{
	return p->state == R_ERROR ? p->why : NULL;
}

/* smtp_reply_buffered - octets of an incomplete reply held */
size_t smtp_reply_buffered(const struct smtp_reply_parser *p)
{
	return p->state == R_LINES ? p->linelen + p->cur.textlen : 0;
}

/* smtp_reply_free - destroy a parser; *p becomes NULL */
void smtp_reply_free(struct smtp_reply_parser **p)
{
	free(*p);
	*p = NULL;
}

/* smtp_reply_line - the text of line i, or "" */
const char *smtp_reply_line(const struct smtp_reply *r, size_t i)
{
	return i < r->nlines ? r->text + r->off[i] : "";
}

/* put_clean - append s[0..n) log-safe: white space collapsed, others '?' */
static void put_clean(char *out, size_t cap, size_t *o, int *space, const char *s, size_t n,
		      int *cut)
{
	for (size_t i = 0; i < n && !*cut; i++) {
		unsigned char c = (unsigned char)s[i];

		if (IS_WSP(c)) {
			*space = 1;
			continue;
		}
		if (*space && *o > 0) {
			if (*o + 1 >= cap) {
				*cut = 1;
				break;
			}
			out[(*o)++] = ' ';
		}
		*space = 0;
		if (*o + 1 >= cap) {
			*cut = 1;
			break;
		}
		out[(*o)++] = c > ' ' && c < 0x7f ? (char)c : '?';
	}
}

/* smtp_reply_format - the reply as one log-safe, bounded line */
size_t smtp_reply_format(const struct smtp_reply *r, char *out, size_t outlen)
{
	char head[4 + SMTP_ESC_MAX + 1];
	size_t o = 0;
	int space = 0, cut = 0;

	if (outlen == 0)
		return 0;
	head[0] = (char)('0' + (unsigned)r->code / 100 % 10);
	head[1] = (char)('0' + (unsigned)r->code / 10 % 10);
	head[2] = (char)('0' + (unsigned)r->code % 10);
	head[3] = '\0';
	if (r->esc[0] != '\0') {
		head[3] = ' ';
		memcpy(head + 4, r->esc, strnlen(r->esc, SMTP_ESC_MAX) + 1);
		head[4 + SMTP_ESC_MAX] = '\0';
	}
	put_clean(out, outlen, &o, &space, head, strlen(head), &cut);
	for (size_t i = 0; i < r->nlines && i < SMTP_REPLY_LINES_MAX && !cut; i++) {
		space = 1;
		put_clean(out, outlen, &o, &space, smtp_reply_line(r, i),
			  strnlen(smtp_reply_line(r, i), r->len[i]), &cut);
	}
	if (cut && outlen >= 4) {
		o = o > outlen - 4 ? outlen - 4 : o;
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return o;
}

/* number - a decimal number that fits; 0 if p[0..n) is not one */
static unsigned long long number(const char *p, size_t n)
{
	unsigned long long v = 0;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!IS_DIGIT(p[i]) || v > (ULLONG_MAX - (unsigned)(p[i] - '0')) / 10)
			return 0;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	return v;
}

/* token - the next run of non-separator octets at *s; its length, 0 at the end */
static size_t token(const char **s, const char *end, int eq)
{
	const char *t;

	while (*s < end && (IS_WSP(**s) || (eq && **s == '=')))
		(*s)++;
	for (t = *s; t < end && !IS_WSP(*t) && !(eq && *t == '='); t++)
		;
	return (size_t)(t - *s);
}

/* ehlo_line - one extension line: keyword, then parameters */
static void ehlo_line(struct smtp_ehlo *e, const char *s, size_t n)
{
	static const struct {
		const char *name;
		unsigned flag;
	} words[] = {
		{"PIPELINING", SMTP_EXT_PIPELINING}, {"CHUNKING", SMTP_EXT_CHUNKING},
		{"8BITMIME", SMTP_EXT_8BITMIME}, {"SMTPUTF8", SMTP_EXT_SMTPUTF8},
		{"DSN", SMTP_EXT_DSN}, {"ENHANCEDSTATUSCODES", SMTP_EXT_ENHANCEDSTATUSCODES},
		{"STARTTLS", SMTP_EXT_STARTTLS}, {"SIZE", SMTP_EXT_SIZE}, {"AUTH", SMTP_EXT_AUTH},
	};
	const char *end = s + n, *kw = s;
	size_t kn = token(&kw, end, 1), an;
	unsigned flag = 0;

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (ascii_word_is(kw, kn, words[i].name))
			flag = words[i].flag;
	if (flag == 0)
		return;
	e->flags |= flag;
	s = kw + kn;
	if (flag == SMTP_EXT_SIZE) {
		an = token(&s, end, 1);
		e->size = number(s, an);
	} else if (flag == SMTP_EXT_AUTH) {
		for (; (an = token(&s, end, 1)) != 0; s += an) {
			if (ascii_word_is(s, an, "PLAIN"))
				e->auth |= SMTP_AUTH_PLAIN;
			else if (ascii_word_is(s, an, "LOGIN"))
				e->auth |= SMTP_AUTH_LOGIN;
		}
	}
}

/* smtp_reply_ehlo - the extensions a 250 reply to EHLO offers */
int smtp_reply_ehlo(const struct smtp_reply *r, struct smtp_ehlo *e)
{
	memset(e, 0, sizeof(*e));
	if (r->code != 250) {
		errno = EINVAL;
		return -1;
	}
	/* Line 0 is the server's name and greeting, never a keyword. */
	for (size_t i = 1; i < r->nlines && i < SMTP_REPLY_LINES_MAX; i++)
		ehlo_line(e, smtp_reply_line(r, i), strnlen(smtp_reply_line(r, i), r->len[i]));
	return 0;
}

/* ci_find - first case-insensitive occurrence of word in s[0..n), or NULL */
static const char *ci_find(const char *s, size_t n, const char *word)
{
	size_t wn = strlen(word);

	for (size_t i = 0; i + wn <= n; i++)
		if (ascii_word_is(s + i, wn, word))
			return s + i;
	return NULL;
}

/* id_run - length of a queue id at s: alphanumerics (and '-' if dash) */
static size_t id_run(const char *s, const char *end, int dash)
{
	size_t n = 0;

	while (s + n < end && (IS_ALNUM(s[n]) || (dash && s[n] == '-')))
		n++;
	return n;
}

/* id_in_line - a queue id in one line's text in one of the known forms */
static size_t id_in_line(const char *s, size_t n, const char **id)
{
	static const char sendmail[] = " Message accepted for delivery";
	const char *end = s + n, *q;
	size_t k;

	/* Postfix: "Ok: queued as 4XyZ1QID" */
	if ((q = ci_find(s, n, "queued as ")) != NULL) {
		*id = q + 10;
		return id_run(*id, end, 0);
	}
	/* Exim: "OK id=1abc-2def-3g", "id=" a word of its own */
	for (q = s; (q = ci_find(q, (size_t)(end - q), "id=")) != NULL; q += 3) {
		if (q == s || q[-1] == ' ') {
			*id = q + 3;
			return id_run(*id, end, 1);
		}
	}
	/* Sendmail: "xAB12345 Message accepted for delivery" */
	k = id_run(s, end, 0);
	if (k > 0 && (size_t)(end - (s + k)) >= sizeof(sendmail) - 1
	    && ascii_word_is(s + k, sizeof(sendmail) - 1, sendmail)) {
		*id = s;
		return k;
	}
	return 0;
}

/* smtp_reply_queue_id - the peer's queue id in a 2xx reply, or "" */
size_t smtp_reply_queue_id(const struct smtp_reply *r, char *out, size_t outlen)
{
	const char *id = NULL;
	size_t k = 0;

	if (outlen == 0)
		return 0;
	out[0] = '\0';
	if (r->code / 100 != 2)
		return 0;
	for (size_t i = 0; i < r->nlines && i < SMTP_REPLY_LINES_MAX && k == 0; i++)
		k = id_in_line(smtp_reply_line(r, i), strnlen(smtp_reply_line(r, i), r->len[i]),
			       &id);
	if (k == 0 || k > SMTP_QUEUE_ID_MAX || k >= outlen)
		return 0;
	memcpy(out, id, k);
	out[k] = '\0';
	return k;
}

/* smtp_esc_label - the code when RFC 3463 defines it, else "other" */
const char *smtp_esc_label(const char *esc, char out[SMTP_ESC_LABEL_MAX])
{
	/* the highest detail RFC 3463 defines for each subject X.0 to X.7 */
	static const char last_detail[8] = {'0', '8', '4', '5', '7', '5', '5', '7'};

	if (esc != NULL && (esc[0] == '2' || esc[0] == '4' || esc[0] == '5') && esc[1] == '.'
	    && esc[2] >= '0' && esc[2] <= '7' && esc[3] == '.'
	    && esc[4] >= '0' && esc[4] <= last_detail[esc[2] - '0'] && esc[5] == '\0') {
		memcpy(out, esc, 6);
		return out;
	}
	memcpy(out, "other", 6);
	return out;
}
