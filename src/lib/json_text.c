/*
 * json_text - text of unknown encoding (addresses, replies, header
 * values) as a JSON string, for ternq --json, tern-report's JSON and the
 * OTLP lines: what is not UTF-8 becomes '?'. Pure.
 */
#include "config.h"

#include <string.h>

#include "json_text.h"
#include "xalloc.h"

/* utf8_len - the length of a well-formed UTF-8 sequence at s (no
 * overlong form, surrogate or code point past U+10FFFF), or 0 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		lo = s[0] == 0xe0 ? 0xa0 : lo;
		hi = s[0] == 0xed ? 0x9f : hi;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		lo = s[0] == 0xf0 ? 0x90 : lo;
		hi = s[0] == 0xf4 ? 0x8f : hi;
	} else {
		return 0;
	}
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* json_text - a JSON string of s (NULL: ""), each octet that is not
 * part of well-formed UTF-8 as '?' (JSON is UTF-8; jansson refuses the
 * rest): mail carries text in any encoding, and a member must not vanish */
json_t *json_text(const char *s)
{
	size_t len, n = 0;
	json_t *j;
	char *t;

	if (s == NULL)
		return json_string("");
	if ((j = json_string(s)) != NULL)
		return j;
	len = strlen(s);
	t = xmalloc(len + 1);
	for (size_t i = 0; i < len;) {
		size_t k = (unsigned char)s[i] < 0x80 ? 1 : utf8_len((const unsigned char *)s + i);

		if (k == 0) {
			t[n++] = '?';
			i++;
		} else {
			memcpy(t + n, s + i, k);
			n += k;
			i += k;
		}
	}
	j = json_stringn(t, n);
	free(t);
	return j;
}
