/*
 * hdr_scan - find a header field in canonical message bytes.
 *
 * Never reads past len; never allocates.
 */
#include "config.h"

#include <string.h>
#include <strings.h>

#include "hdr_scan.h"

/* hdr_scan_field - the first NAME: field's value (trimmed); 1 if found */
int hdr_scan_field(const char *buf, size_t len, const char *name,
		   const char **value, size_t *vlen)
{
	size_t nlen = strlen(name), pos = 0;

	while (pos < len) {
		const char *line = buf + pos, *eol = memchr(line, '\n', len - pos);
		size_t llen = eol ? (size_t)(eol - line) : len - pos;

		if (llen > 0 && line[llen - 1] == '\r')
			llen--;
		if (llen == 0)
			return 0;	/* end of the header */
		if (llen > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
			const char *v = line + nlen + 1, *end = line + llen;
			const char *next = eol ? eol + 1 : buf + len;

			/* A folded value is not one we want. */
			if (next < buf + len && (*next == ' ' || *next == '\t'))
				return 0;
			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
				end--;
			*value = v;
			*vlen = (size_t)(end - v);
			return 1;
		}
		if (eol == NULL)
			break;
		pos = (size_t)(eol - buf) + 1;
	}
	return 0;
}

/* hdr_scan_each - call fn on each field in order: its name, and its value
 * from after the ':' to the end of its last line (folded lines and their
 * CRLF inside, the final one not). A line that is not a field (no ':', or
 * a name with SP, HT or controls) ends the header, as the empty line does.
 * 1 when the header ended within len; 0 when len cut it (the field it
 * cut, if any, is passed as far as it goes) */
int hdr_scan_each(const char *buf, size_t len, hdr_scan_fn *fn, void *arg)
{
	size_t pos = 0;

	while (pos < len) {
		const char *line = buf + pos, *end = buf + len, *colon = NULL, *p, *eol;
		size_t vend;

		for (p = line; p < end && *p != ':'; p++)
			if ((unsigned char)*p <= ' ' || *p == 0x7f)
				break;
		if (p == end)
			return 0;		/* a name cut short */
		if (*p != ':' || p == line)
			return 1;		/* the empty line, or not a field */
		colon = p;
		/* the value runs over every line that the next one continues */
		for (;;) {
			eol = memchr(p, '\n', (size_t)(end - p));
			if (eol == NULL) {
				fn(arg, line, (size_t)(colon - line), colon + 1, (size_t)(end - colon - 1));
				return 0;
			}
			if (eol + 1 == end || (eol[1] != ' ' && eol[1] != '\t'))
				break;
			p = eol + 1;
		}
		vend = (size_t)(eol - colon - 1);
		if (vend > 0 && eol[-1] == '\r')
			vend--;
		fn(arg, line, (size_t)(colon - line), colon + 1, vend);
		pos = (size_t)(eol - buf) + 1;
		if (pos == len)
			return 0;	/* the next line, if it continues the field, is not here */
	}
	return 0;
}
