/*
 * dsn - RFC 3464 failure notifications, built as canonical bytes from
 * the original envelope, the failed recipients and the original message.
 *
 * It must never emit a bare CR or LF, a line that starts a header field
 * or a MIME delimiter from outside text, or a line longer than 998
 * octets from its own fields; never read the clock or the environment
 * (dates are formatted here, in UTC, with English names, not strftime's
 * locale); never send anything to the null sender.
 *
 * Decisions the header leaves open:
 * - Dates are UTC ("+0000"): the local zone would need the environment.
 * - Sanitizing: reply text and other diagnostics become printable ASCII
 *   with white space and controls collapsed to one space, then are cut
 *   at DSN_DIAG_MAX and folded (at spaces, else inside a word) into
 *   lines of at most 78 octets. Host names keep [A-Za-z0-9.:[]_-],
 *   anything else is '?'.
 * - Addresses: an ASCII address is shown as is, controls as '?', as type
 *   "rfc822". One with 8-bit octets is shown in the delivery-status part
 *   and the text part as RFC 6533 utf-8-addr-xtext (type "utf-8",
 *   "\x{HEX}" for non-ASCII and specials), so both stay 7-bit; the To:
 *   field keeps valid UTF-8 as is (RFC 6532; DSN_SMTPUTF8 says so).
 * - ORCPT "rfc822;" is xtext-decoded (RFC 3461 4.2) before it is shown;
 *   "utf-8;" is shown as received (it is 7-bit already); other types and
 *   values that come out empty are left out, as is an ENVID that does.
 * - The boundary is "=_" and the unique id (RFC 2045's "=_" cannot occur
 *   in quoted-printable); if the returned content holds "--" and it, a
 *   suffix ".N" is tried (N < 1000); if all are taken the third part is
 *   left out rather than risk a forged part. Text parts 1 and 2 cannot
 *   hold one: every line of theirs starts with text of ours or a space.
 * - The returned headers end at the first empty line, cut at the last
 *   whole line within DSN_HEADERS_MAX. Line ends in the returned content
 *   are made CRLF; octets above 127 or NUL make that part 8bit.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsn.h"
#include "xalloc.h"

#define FOLD_COL 78			/* fold lines at this column where words allow */
#define ENVID_SHOW_MAX 100		/* RFC 3461 4.4 */
#define HOST_SHOW_MAX 255
#define BOUNDARY_MAX 70			/* RFC 2046 5.1.1 */

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_ALNUM(c) (IS_DIGIT(c) || ((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))

enum addr_mode {
	A_ASCII,			/* printable ASCII; everything else '?' */
	A_UTF8,				/* valid UTF-8 kept, controls and invalid octets '?' */
	A_XTEXT,			/* RFC 6533 utf-8-addr-xtext */
	A_HOST,				/* host name characters only */
};

/* A bounded string being built: cut with "..." when it does not fit. */
struct sbuf {
	char *s;
	size_t len, max;		/* s holds max + 1 octets */
	int cut;
};

/* buf_put - append n octets, growing the buffer; keep it NUL-terminated */
static void buf_put(struct dsn_buf *b, const char *s, size_t n)
{
	size_t need;

	if (n >= SIZE_MAX / 2 - b->len)
		(void)xreallocarray(NULL, SIZE_MAX, 2);	/* reports the overflow, exits */
	need = b->len + n + 1;
	if (need > b->cap) {
		size_t cap = b->cap < 4096 ? 4096 : b->cap;

		while (cap < need)
			cap *= 2;
		b->data = xreallocarray(b->data, cap, 1);
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

/* buf_str - append a string */
static void buf_str(struct dsn_buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

/* buf_line - append a string and CRLF */
static void buf_line(struct dsn_buf *b, const char *s)
{
	buf_str(b, s);
	buf_put(b, "\r\n", 2);
}

/* buf_fmt - append a formatted line (our own bounded fields only) and CRLF */
static void __attribute__((format(printf, 2, 3))) buf_fmt(struct dsn_buf *b, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	buf_put(b, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	buf_put(b, "\r\n", 2);
}

/* sb_put - append n octets to a bounded string unless they do not fit */
static int sb_put(struct sbuf *sb, const char *s, size_t n)
{
	if (sb->cut || n > sb->max - 3 - sb->len) {
		sb->cut = 1;
		return 0;
	}
	memcpy(sb->s + sb->len, s, n);
	sb->len += n;
	sb->s[sb->len] = '\0';
	return 1;
}

/* sb_end - finish a bounded string: "..." if it was cut */
static size_t sb_end(struct sbuf *sb)
{
	if (sb->cut) {
		memcpy(sb->s + sb->len, "...", 4);
		sb->len += 3;
	}
	sb->s[sb->len] = '\0';
	return sb->len;
}

/* utf8_seq - length of a well-formed UTF-8 sequence at s (code point in *cp), 0 if none */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t k;
	uint32_t c = s[0], min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		k = 1, c &= 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		k = 2, c &= 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		k = 3, c &= 0x07, min = 0x10000;
	else
		return 0;
	if (n - 1 < k)
		return 0;
	for (size_t j = 1; j <= k; j++) {
		if ((s[j] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[j] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return k + 1;
}

/* has_8bit - does s hold an octet above 127 */
static int has_8bit(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s >= 0x80)
			return 1;
	return 0;
}

/* is_qchar - RFC 6533 QCHAR: printable ASCII but SP, '+', '=' and '\' */
static int is_qchar(unsigned c)
{
	return c > ' ' && c < 0x7f && c != '+' && c != '=' && c != '\\';
}

/* render - s (n octets) into sb in the given mode; returns sb's length */
static size_t render(struct sbuf *sb, const char *s, size_t n, enum addr_mode mode)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n && !sb->cut) {
		unsigned c = p[i];
		uint32_t cp = 0xfffd;
		size_t k;
		char esc[16];

		switch (mode) {
		case A_ASCII:
			sb_put(sb, c >= ' ' && c < 0x7f ? (const char *)p + i : "?", 1);
			i++;
			break;
		case A_HOST:
			sb_put(sb, IS_ALNUM(c) || (c != '\0' && strchr(".-:[]_", (int)c) != NULL)
			       ? (const char *)p + i : "?", 1);
			i++;
			break;
		case A_UTF8:
			if (c >= 0x80 && (k = utf8_seq(p + i, n - i, &cp)) != 0) {
				sb_put(sb, (const char *)p + i, k);
				i += k;
			} else {
				sb_put(sb, c >= ' ' && c < 0x7f ? (const char *)p + i : "?", 1);
				i++;
			}
			break;
		case A_XTEXT:
			if (is_qchar(c)) {
				sb_put(sb, (const char *)p + i, 1);
				i++;
				break;
			}
			k = utf8_seq(p + i, n - i, &cp);
			if (k == 0) {
				cp = 0xfffd;
				k = 1;
			}
			snprintf(esc, sizeof(esc), "\\x{%X}", (unsigned)cp);
			sb_put(sb, esc, strlen(esc));
			i += k;
			break;
		}
	}
	if (i < n)
		sb->cut = 1;
	return sb_end(sb);
}

/* render_addr - an address for the text and delivery-status parts; *type "rfc822" or "utf-8" */
static size_t render_addr(char *out, const char *addr, const char **type)
{
	struct sbuf sb = {out, 0, DSN_ADDR_MAX, 0};
	int eight = has_8bit(addr);

	if (type != NULL)
		*type = eight ? "utf-8" : "rfc822";
	return render(&sb, addr, strlen(addr), eight ? A_XTEXT : A_ASCII);
}

/* ci_eq - do the counted string and word match, ASCII case-insensitive */
static int ci_eq(const char *p, size_t n, const char *word)
{
	size_t i;

	for (i = 0; i < n && word[i] != '\0'; i++) {
		unsigned char a = (unsigned char)p[i], c = (unsigned char)word[i];

		if ((a >= 'A' && a <= 'Z' ? a + 32 : a) != (c >= 'A' && c <= 'Z' ? c + 32 : c))
			return 0;
	}
	return i == n && word[i] == '\0';
}

/* hexval - value of a hex digit, -1 if none */
static int hexval(char c)
{
	if (IS_DIGIT(c))
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* xtext_decode - RFC 3461 xtext ("+HH") into out (max octets); a bad '+' stays */
static size_t xtext_decode(const char *s, char *out, size_t max)
{
	size_t o = 0;

	for (; *s != '\0' && o < max; s++) {
		int hi, lo;

		if (s[0] == '+' && (hi = hexval(s[1])) >= 0 && (lo = hexval(s[2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			s += 2;
		} else {
			out[o++] = *s;
		}
	}
	return o;
}

/* clean_text - diagnostic text: printable ASCII, single spaces, trimmed, bounded */
static size_t clean_text(char out[DSN_DIAG_MAX + 1], const char *s)
{
	struct sbuf sb = {out, 0, DSN_DIAG_MAX, 0};
	int space = 0;

	out[0] = '\0';
	for (; *s != '\0' && !sb.cut; s++) {
		unsigned char c = (unsigned char)*s;

		if (c <= ' ' || c == 0x7f) {
			space = sb.len > 0;
			continue;
		}
		if (space && !sb_put(&sb, " ", 1))
			break;
		space = 0;
		sb_put(&sb, c < 0x7f ? (const char *)s : "?", 1);
	}
	if (*s != '\0')
		sb.cut = 1;
	if (sb.cut && sb.len > 0 && out[sb.len - 1] == ' ')
		sb.len--;
	return sb_end(&sb);
}

/*
 * put_folded - prefix, then the words of text (clean: single spaces, no
 * controls) folded into lines of at most FOLD_COL octets where words
 * allow, longer words broken; continuation lines start with indent and
 * are never white space only. Ends with CRLF.
 */
static void put_folded(struct dsn_buf *b, const char *prefix, const char *text, const char *indent)
{
	size_t col = strlen(prefix), ind = strlen(indent);
	const char *p = text;

	buf_str(b, prefix);
	while (*p != '\0') {
		size_t w = strcspn(p, " ");

		if (w == 0) {
			p++;
			continue;
		}
		if (col + 1 + w <= FOLD_COL) {
			buf_put(b, " ", 1);
			col++;
		} else {
			buf_put(b, "\r\n", 2);
			buf_str(b, indent);
			col = ind;
		}
		while (col + w > FOLD_COL) {
			size_t room = FOLD_COL - col;	/* col == ind < FOLD_COL here */

			buf_put(b, p, room);
			p += room;
			w -= room;
			buf_put(b, "\r\n", 2);
			buf_str(b, indent);
			col = ind;
		}
		buf_put(b, p, w);
		p += w;
		col += w;
	}
	buf_put(b, "\r\n", 2);
}

/*
 * fmt_date - RFC 5322 date-time in UTC; -1 if t is before 1970 or after
 * 9999. Computed here (days to civil date, H. Hinnant's algorithm), not
 * with gmtime_r, which may read TZ and apply leap seconds from tz data.
 */
static int fmt_date(char out[40], time_t t)
{
	static const char days[7][4] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
	static const char months[12][4] = {"Mar", "Apr", "May", "Jun", "Jul", "Aug",
					   "Sep", "Oct", "Nov", "Dec", "Jan", "Feb"};
	long long s = (long long)t, z, era, doe, yoe, doy, mp, y;

	if (t < 0 || s > 253402300799LL)	/* 9999-12-31 23:59:59 */
		return -1;
	z = s / 86400 + 719468;			/* days since 0000-03-01 */
	era = z / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;		/* months since March */
	y = yoe + era * 400 + (mp >= 10);
	snprintf(out, 40, "%s, %d %s %04lld %02d:%02d:%02d +0000", days[s / 86400 % 7],
		 (int)(doy - (153 * mp + 2) / 5 + 1), months[mp], y, (int)(s % 86400 / 3600),
		 (int)(s % 3600 / 60), (int)(s % 60));
	return 0;
}

/* host_ok - our own host name: letters, digits, dots, hyphens */
static int host_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > HOST_SHOW_MAX || s[0] == '.' || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!IS_ALNUM(s[i]) && s[i] != '.' && s[i] != '-')
			return 0;
	return 1;
}

/* id_ok - the unique id: [A-Za-z0-9_-] and dots, not first, last or doubled */
static int id_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > DSN_ID_MAX || s[0] == '.' || s[n - 1] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.' && s[i + 1] == '.')
			return 0;
		if (!IS_ALNUM(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return 0;
	}
	return 1;
}

/* status_ok - an RFC 3463 code of class 4 or 5 */
static int status_ok(const char *s)
{
	size_t i = 2;

	if (s == NULL || (s[0] != '4' && s[0] != '5') || s[1] != '.')
		return 0;
	for (int part = 0; part < 2; part++) {
		size_t start = i;

		while (IS_DIGIT(s[i]) && i - start < 4)
			i++;
		if (i == start || i - start > 3)
			return 0;
		if (part == 0 && s[i++] != '.')
			return 0;
	}
	return s[i] == '\0';
}

/* is_reply - does clean text start with an SMTP reply code ("550 ...", "550-...") */
static int is_reply(const char *s)
{
	return s[0] >= '2' && s[0] <= '5' && IS_DIGIT(s[1]) && IS_DIGIT(s[2])
	    && (s[3] == '\0' || s[3] == ' ' || s[3] == '-');
}

/* header_len - octets of the original's header block: whole lines before the empty one */
static size_t header_len(const char *s, size_t n)
{
	size_t i = 0, keep = 0;

	while (i < n) {
		const char *lf = memchr(s + i, '\n', n - i);
		size_t end = lf ? (size_t)(lf - s) + 1 : n;
		size_t body = end - i - (lf ? 1 : 0);

		if (body > 0 && s[i + body - 1] == '\r')
			body--;
		if (body == 0 || end > DSN_HEADERS_MAX)
			break;
		keep = i = end;
	}
	return keep;
}

/* put_canon - content with every line end made CRLF, the last line ended; *eight if 8-bit */
static void put_canon(struct dsn_buf *b, const char *s, size_t n, int *eight)
{
	size_t start = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\r' || c == '\n') {
			buf_put(b, s + start, i - start);
			buf_put(b, "\r\n", 2);
			if (c == '\r' && i + 1 < n && s[i + 1] == '\n')
				i++;
			start = i + 1;
		} else if (c >= 0x80 || c == '\0') {
			*eight = 1;
		}
	}
	if (start < n) {
		buf_put(b, s + start, n - start);
		buf_put(b, "\r\n", 2);
	}
}

/* find_boundary - "=_id" or "=_id.N" not in the returned content; 0 if none is free */
static int find_boundary(char out[BOUNDARY_MAX + 1], const char *id, const char *part, size_t plen)
{
	char delim[BOUNDARY_MAX + 3];

	for (int n = -1; n < 1000; n++) {
		if (n < 0)
			snprintf(out, BOUNDARY_MAX + 1, "=_%s", id);
		else
			snprintf(out, BOUNDARY_MAX + 1, "=_%s.%d", id, n);
		snprintf(delim, sizeof(delim), "--%s", out);
		if (part == NULL || memmem(part, plen, delim, strlen(delim)) == NULL)
			return 1;
	}
	return 0;
}

/* put_notification - part 1: Postfix-like text naming recipients and replies */
static void put_notification(struct dsn_buf *b, const struct dsn_msg *m, const char *third)
{
	buf_fmt(b, "This is the mail system at host %s.", m->reporting_mta);
	buf_line(b, "");
	buf_line(b, "I'm sorry to have to inform you that your message could not");
	if (third == NULL)
		buf_line(b, "be delivered to one or more recipients.");
	else
		buf_fmt(b, "be delivered to one or more recipients. %s attached below.", third);
	buf_line(b, "");
	buf_line(b, "For further assistance, please send mail to postmaster.");
	buf_line(b, "");
	buf_line(b, "If you do so, please include this problem report. You can");
	buf_line(b, "delete your own text from the attached returned message.");
	buf_line(b, "");
	buf_line(b, "                   The mail system");
	for (size_t i = 0; i < m->nrcpt; i++) {
		const struct dsn_rcpt *r = &m->rcpt[i];
		char addr[DSN_ADDR_MAX + 1], host[HOST_SHOW_MAX + 4], diag[DSN_DIAG_MAX + 1];
		char what[DSN_DIAG_MAX + HOST_SHOW_MAX + 64], prefix[DSN_ADDR_MAX + 8];
		struct sbuf hs = {host, 0, HOST_SHOW_MAX + 3, 0};

		render_addr(addr, r->addr, NULL);
		host[0] = '\0';
		if (r->remote_mta != NULL)
			render(&hs, r->remote_mta, strlen(r->remote_mta), A_HOST);
		clean_text(diag, r->diagnostic ? r->diagnostic : "");
		if (diag[0] != '\0' && host[0] != '\0' && is_reply(diag))
			snprintf(what, sizeof(what), "host %s said: %s", host, diag);
		else if (diag[0] != '\0')
			snprintf(what, sizeof(what), "%s", diag);
		else
			snprintf(what, sizeof(what), "delivery failed, status %s",
				 status_ok(r->status) ? r->status : "5.0.0");
		snprintf(prefix, sizeof(prefix), "<%s>:", addr);
		buf_line(b, "");
		put_folded(b, prefix, what, "    ");
	}
}

/* put_status - part 2: per-message fields, then one group per recipient */
static void put_status(struct dsn_buf *b, const struct dsn_msg *m, const char *sender)
{
	char date[40], tmp[DSN_ADDR_MAX + 1], show[DSN_ADDR_MAX + 1], diag[DSN_DIAG_MAX + 1];
	const char *type;

	buf_fmt(b, "Reporting-MTA: dns; %s", m->reporting_mta);
	if (m->qid != NULL && m->qid[0] != '\0') {
		struct sbuf sb = {show, 0, 64, 0};

		render(&sb, m->qid, strlen(m->qid), A_HOST);
		buf_fmt(b, "X-Tern-Queue-ID: %s", show);
	}
	render_addr(show, sender, &type);
	buf_fmt(b, "X-Tern-Sender: %s; %s", type, show);
	if (m->envid != NULL && m->envid[0] != '\0') {
		struct sbuf sb = {show, 0, ENVID_SHOW_MAX + 3, 0};
		size_t n = xtext_decode(m->envid, tmp, ENVID_SHOW_MAX + 1);

		if (render(&sb, tmp, n, A_ASCII) > 0)
			buf_fmt(b, "Original-Envelope-Id: %s", show);
	}
	if (m->arrival != 0 && fmt_date(date, m->arrival) == 0)
		buf_fmt(b, "Arrival-Date: %s", date);
	for (size_t i = 0; i < m->nrcpt; i++) {
		const struct dsn_rcpt *r = &m->rcpt[i];
		const char *semi;

		buf_line(b, "");
		render_addr(show, r->addr, &type);
		buf_fmt(b, "Final-Recipient: %s; %s", type, show);
		if (r->orcpt != NULL && (semi = strchr(r->orcpt, ';')) != NULL) {
			size_t tn = (size_t)(semi - r->orcpt);
			struct sbuf sb = {show, 0, DSN_ADDR_MAX, 0};
			const char *otype = NULL;
			size_t n = 0;

			if (ci_eq(r->orcpt, tn, "rfc822")) {
				otype = "rfc822";
				n = xtext_decode(semi + 1, tmp, DSN_ADDR_MAX);
			} else if (ci_eq(r->orcpt, tn, "utf-8")) {
				otype = "utf-8";
				n = strnlen(semi + 1, DSN_ADDR_MAX);
				memcpy(tmp, semi + 1, n);
			}
			if (otype != NULL && render(&sb, tmp, n, A_ASCII) > 0)
				buf_fmt(b, "Original-Recipient: %s;%s", otype, show);
		}
		buf_line(b, "Action: failed");
		buf_fmt(b, "Status: %s", status_ok(r->status) ? r->status : "5.0.0");
		if (r->remote_mta != NULL && r->remote_mta[0] != '\0') {
			struct sbuf sb = {show, 0, HOST_SHOW_MAX + 3, 0};

			render(&sb, r->remote_mta, strlen(r->remote_mta), A_HOST);
			buf_fmt(b, "Remote-MTA: dns; %s", show);
		}
		if (clean_text(diag, r->diagnostic ? r->diagnostic : "") > 0)
			put_folded(b, is_reply(diag) ? "Diagnostic-Code: smtp;"
				   : "Diagnostic-Code: X-Tern;", diag, " ");
		if (r->last_attempt != 0 && fmt_date(date, r->last_attempt) == 0)
			buf_fmt(b, "Last-Attempt-Date: %s", date);
	}
}

/* dsn_build - the failure DSN for m into out */
int dsn_build(const struct dsn_msg *m, struct dsn_buf *out)
{
	char date[40], boundary[BOUNDARY_MAX + 1], to[DSN_ADDR_MAX + 1];
	const char *part = NULL, *third = NULL;
	size_t plen = 0, full_max;
	int full = 0, eight = 0, flags = 0;
	struct sbuf sb = {to, 0, DSN_ADDR_MAX, 0};

	out->len = 0;
	if (out->data != NULL)
		out->data[0] = '\0';
	if (m->sender == NULL || m->sender[0] == '\0' || strcmp(m->sender, "<>") == 0) {
		errno = EDESTADDRREQ;
		return -1;
	}
	if (!host_ok(m->reporting_mta) || !id_ok(m->unique_id) || m->rcpt == NULL
	    || m->nrcpt == 0 || fmt_date(date, m->now) < 0) {
		errno = EINVAL;
		return -1;
	}
	for (size_t i = 0; i < m->nrcpt; i++) {
		if (m->rcpt[i].addr == NULL || m->rcpt[i].addr[0] == '\0') {
			errno = EINVAL;
			return -1;
		}
	}

	/* What goes back: the whole message, its headers, or nothing. */
	if (m->content != NULL && m->content_len > 0) {
		full_max = m->full_max ? m->full_max : DSN_FULL_MAX;
		part = m->content;
		if (m->ret == RET_FULL && m->content_len <= full_max) {
			full = 1;
			plen = m->content_len;
		} else {
			plen = header_len(m->content, m->content_len);
		}
		if (plen == 0)
			part = NULL;
	}
	if (!find_boundary(boundary, m->unique_id, part, plen)) {
		part = NULL;
		if (!find_boundary(boundary, m->unique_id, NULL, 0))
			return -1;	/* not reached: an empty part never collides */
	}
	if (part != NULL) {
		for (size_t i = 0; i < plen && !eight; i++)
			eight = (unsigned char)part[i] >= 0x80 || part[i] == '\0';
		third = full ? "It's" : "Its headers are";
	}

	/* The message header. */
	buf_fmt(out, "Date: %s", date);
	buf_fmt(out, "From: MAILER-DAEMON@%s (Mail Delivery System)", m->reporting_mta);
	render(&sb, m->sender, strlen(m->sender), A_UTF8);
	if (has_8bit(to))
		flags |= DSN_SMTPUTF8;
	buf_fmt(out, "To: <%s>", to);
	buf_line(out, "Subject: Undelivered Mail Returned to Sender");
	buf_fmt(out, "Message-ID: <%s@%s>", m->unique_id, m->reporting_mta);
	buf_line(out, "Auto-Submitted: auto-replied");
	buf_line(out, "MIME-Version: 1.0");
	buf_line(out, "Content-Type: multipart/report; report-type=delivery-status;");
	buf_fmt(out, "\tboundary=\"%s\"", boundary);
	buf_fmt(out, "Content-Transfer-Encoding: %s", eight ? "8bit" : "7bit");
	buf_line(out, "");
	buf_line(out, "This is a MIME-encapsulated message.");
	buf_line(out, "");

	buf_fmt(out, "--%s", boundary);
	buf_line(out, "Content-Description: Notification");
	buf_line(out, "Content-Type: text/plain; charset=us-ascii");
	buf_line(out, "");
	put_notification(out, m, third);
	buf_line(out, "");

	buf_fmt(out, "--%s", boundary);
	buf_line(out, "Content-Description: Delivery report");
	buf_line(out, "Content-Type: message/delivery-status");
	buf_line(out, "");
	put_status(out, m, m->sender);
	buf_line(out, "");

	if (part != NULL) {
		buf_fmt(out, "--%s", boundary);
		buf_line(out, full ? "Content-Description: Undelivered Message"
			 : "Content-Description: Undelivered Message Headers");
		buf_line(out, full ? "Content-Type: message/rfc822" : "Content-Type: text/rfc822-headers");
		if (eight)
			buf_line(out, "Content-Transfer-Encoding: 8bit");
		buf_line(out, "");
		put_canon(out, part, plen, &eight);
		buf_line(out, "");
	}
	buf_fmt(out, "--%s--", boundary);
	return flags | (eight ? DSN_8BIT : 0);
}

/* dsn_buf_free - release the buffer's memory */
void dsn_buf_free(struct dsn_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
