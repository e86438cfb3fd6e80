/*
 * fuzz_hdr_scan - libFuzzer target: header field lookup. The input is
 * "NAME\n" followed by the message bytes; the bytes are copied to a
 * buffer of exactly their length so that any read past it is caught.
 * A value found must lie inside the buffer, on a line of its own that
 * starts with NAME and a colon, within the header, trimmed, unfolded.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hdr_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* check_found - the properties of a value hdr_scan_field returned */
static void check_found(const char *buf, size_t len, const char *name,
			const char *value, size_t vlen)
{
	size_t nlen = strlen(name);
	const char *line, *p;

	if (value < buf || vlen > len || value > buf + len - vlen)
		__builtin_trap();
	if (memchr(value, '\n', vlen))
		__builtin_trap();
	if (vlen > 0 && (value[0] == ' ' || value[0] == '\t'
			 || value[vlen - 1] == ' ' || value[vlen - 1] == '\t'))
		__builtin_trap();
	/* the start of the value's line */
	for (line = value; line > buf && line[-1] != '\n'; line--)
		;
	if ((size_t)(value - line) < nlen + 1 || line[nlen] != ':'
	    || strncasecmp(line, name, nlen) != 0)
		__builtin_trap();
	for (p = line + nlen + 1; p < value; p++)
		if (*p != ' ' && *p != '\t')
			__builtin_trap();
	/* no empty line before it */
	for (p = buf; p < line;) {
		const char *nl = memchr(p, '\n', (size_t)(line - p));
		size_t llen = (size_t)(nl - p);

		if (llen == 0 || (llen == 1 && p[0] == '\r'))
			__builtin_trap();
		p = nl + 1;
	}
	/* not folded: the next line does not start with white space */
	p = memchr(value, '\n', (size_t)(buf + len - value));
	if (p && p + 1 < buf + len && (p[1] == ' ' || p[1] == '\t'))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size < 64 ? size : 64);
	char name[64], *buf;
	const char *value = NULL;
	size_t nlen, len, vlen = 0;

	if (nl == NULL)
		return 0;
	nlen = (size_t)(nl - data);
	memcpy(name, data, nlen);
	name[nlen] = '\0';
	if (strlen(name) != nlen)
		return 0;	/* names are C strings */
	len = size - nlen - 1;
	if ((buf = malloc(len ? len : 1)) == NULL)
		abort();
	memcpy(buf, nl + 1, len);
	if (hdr_scan_field(buf, len, name, &value, &vlen) == 1)
		check_found(buf, len, name, value, vlen);
	free(buf);
	return 0;
}
