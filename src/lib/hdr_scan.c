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
