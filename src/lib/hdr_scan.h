/*
 * hdr_scan - find a header field in canonical message bytes (CRLF lines),
 * as a pure function: the header ends at the first empty line or at the
 * end of the buffer. Only unfolded, single-line values are returned.
 */
#ifndef TERN_HDR_SCAN_H
#define TERN_HDR_SCAN_H

#include <stddef.h>

int hdr_scan_field(const char *buf, size_t len, const char *name,
		   const char **value, size_t *vlen);

#endif
