/*
 * json_text - text of unknown encoding (addresses, replies, header
 * values) as a JSON string, for ternq --json, tern-report's JSON and the
 * OTLP lines: what is not UTF-8 becomes '?'. Pure.
 *
 * json_dumps_short: jansson writes a real with 17 significant digits
 * ("0.10000000000000001" for 0.1), and has no per-value precision; here
 * each real is written with the fewest digits that read back as the same
 * double ("0.1"), as JavaScript and Python print numbers.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
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

#define REAL_MARK '\x01'	/* a placeholder string for a real: MARK digits */

/* json_real_shortest - x with the fewest significant digits (%g) that
 * strtod reads back as x; the length written */
int json_real_shortest(double x, char *buf, size_t len)
{
	int n = 0;

	for (int p = 1; p <= 17; p++)
		if ((n = snprintf(buf, len, "%.*g", p, x)) > 0 && (size_t)n < len && strtod(buf, NULL) == x)
			break;
	return n;
}

/* has_mark - whether a string of the tree holds REAL_MARK (then the
 * placeholders could not be told from it) */
static int has_mark(const json_t *o)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_string(o))
		return memchr(json_string_value(o), REAL_MARK, json_string_length(o)) != NULL;
	if (json_is_array(o)) {
		json_array_foreach(o, i, v)
			if (has_mark(v))
				return 1;
	}
	if (json_is_object(o)) {
		json_object_foreach((json_t *)o, k, v)
			if (strchr(k, REAL_MARK) || has_mark(v))
				return 1;
	}
	return 0;
}

/* mark_reals - each real of the tree becomes the string MARK digits */
static json_t *mark_reals(json_t *o)
{
	char buf[40];
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_real(o)) {
		buf[0] = REAL_MARK;
		json_real_shortest(json_real_value(o), buf + 1, sizeof(buf) - 1);
		json_decref(o);
		return json_string(buf);
	}
	if (json_is_array(o))
		json_array_foreach(o, i, v)
			json_array_set_new(o, i, mark_reals(json_incref(v)));
	if (json_is_object(o))
		json_object_foreach(o, k, v)
			json_object_set_new(o, k, mark_reals(json_incref(v)));
	return o;
}

/* json_dumps_short - json_dumps(o, flags | JSON_ENSURE_ASCII), each real
 * in its shortest round-trip form: the placeholders, escaped "\u0001"
 * by JSON_ENSURE_ASCII (which nothing else of the text can be, has_mark),
 * are replaced by their digits. NULL on failure, as json_dumps. */
char *json_dumps_short(const json_t *o, size_t flags)
{
	static const char mark[] = "\"\\u0001";
	json_t *copy;
	char *s, *r, *w;

	flags |= JSON_ENSURE_ASCII;
	if (has_mark(o) || (copy = json_deep_copy(o)) == NULL)
		return json_dumps(o, flags);
	copy = mark_reals(copy);
	s = json_dumps(copy, flags);
	json_decref(copy);
	if (s == NULL)
		return NULL;
	for (r = w = s; *r;) {
		if (strncmp(r, mark, sizeof(mark) - 1) == 0) {
			for (r += sizeof(mark) - 1; *r && *r != '"'; )
				*w++ = *r++;
			r += *r == '"';
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return s;
}
