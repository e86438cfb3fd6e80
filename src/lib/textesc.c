/*
 * textesc - text from mail made safe for terminals and log lines (see
 * textesc.h for the encoding).
 *
 * The log module calls textesc() for every line, from any thread and
 * when memory has run out: textesc() must never allocate, lock or touch
 * global state. Only textesc_line (ternq's and tern-report's output)
 * allocates.
 */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "textesc.h"
#include "xalloc.h"

/* utf8_len - octets of the well-formed UTF-8 character at s (1..4), or 0
 * (Unicode 15, table 3-7: no overlongs, no surrogates, nothing past
 * U+10FFFF) */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	/* a NUL ends the string, and fails the test like any other octet */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* starts_field - does s (just after a ',') read " name=" (any spaces,
 * then letters, digits or '_', then '=') */
static int starts_field(const char *s)
{
	size_t i = strspn(s, " ");
	size_t n = strspn(s + i, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");

	return n > 0 && s[i + n] == '=';
}

#define ADDR_BIT (TEXTESC_ADDR & ~TEXTESC_VALUE)
#define REPLY_BIT (TEXTESC_REPLY & ~TEXTESC_VALUE)

/* escaped - must this ASCII octet (at s) be written \xHH under flags */
static int escaped(const char *s, unsigned flags)
{
	unsigned char c = (unsigned char)*s;

	if (c < 0x20 || c == 0x7f)
		return 1;
	if (c == '\\')
		return (flags & TEXTESC_VALUE) != 0;
	if (c == '<' || c == '>')
		return (flags & ADDR_BIT) != 0;
	if (c == ',')
		return (flags & ADDR_BIT) != 0 || ((flags & REPLY_BIT) != 0 && starts_field(s + 1));
	return 0;
}

/* textesc - s escaped into out, cut at a whole escape or character */
char *textesc(char *out, size_t cap, const char *s, unsigned flags)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	while (*p) {
		size_t n = utf8_len(p);
		int hide;	/* write the n octets as \xHH each */

		if (n == 0) {
			n = 1;		/* one octet of ill-formed UTF-8 */
			hide = 1;
		} else if (n == 1) {
			hide = escaped((const char *)p, flags);
		} else {
			hide = p[0] == 0xc2 && p[1] < 0xa0;	/* C1 control */
		}
		if (o + (hide ? 4 * n : n) >= cap)
			break;
		for (size_t i = 0; i < n; i++) {
			if (hide) {
				out[o++] = '\\';
				out[o++] = 'x';
				out[o++] = hex[p[i] >> 4];
				out[o++] = hex[p[i] & 15];
			} else {
				out[o++] = (char)p[i];
			}
		}
		p += n;
	}
	if (cap > 0)
		out[o] = '\0';
	return out;
}

/* textesc_line - one line to a stream, escaped whole, then a newline */
void textesc_line(FILE *out, const char *fmt, ...)
{
	char small[1024], *text = small, *esc;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(small)) {
		text = xmalloc((size_t)n + 1);
		va_start(ap, fmt);
		vsnprintf(text, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	esc = xmalloc(TEXTESC_SIZE(n));
	fputs(textesc(esc, TEXTESC_SIZE(n), text, TEXTESC_LINE), out);
	fputc('\n', out);
	free(esc);
	if (text != small)
		free(text);
}
