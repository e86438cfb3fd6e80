/*
 * hdr_scan - find a header field in canonical message bytes (CRLF lines),
 * as a pure function: the header ends at the first empty line or at the
 * end of the buffer. hdr_scan_field returns only unfolded, single-line
 * values; hdr_scan_each hands over every field, folded ones whole.
 */
#ifndef TERN_HDR_SCAN_H
#define TERN_HDR_SCAN_H

#include <stddef.h>

int hdr_scan_field(const char *buf, size_t len, const char *name,
		   const char **value, size_t *vlen);

typedef void hdr_scan_fn(void *arg, const char *name, size_t nlen, const char *value,
			 size_t vlen);
int hdr_scan_each(const char *buf, size_t len, hdr_scan_fn *fn, void *arg);

#endif
