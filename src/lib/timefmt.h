/* timefmt.h - times for people and for JSON: local time with its numeric
 * offset (or UTC, "+0000"), the same width every time */
#ifndef TERN_TIMEFMT_H
#define TERN_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/* "2026-12-01 08:49:33.647 -0500": 29 characters for years 1000..9999 */
#define TIMEFMT_LEN 48
/* the precision of a human-readable time */
enum timefmt_prec { TIMEFMT_MS, TIMEFMT_SEC, TIMEFMT_MIN };

const char *timefmt_human(uint64_t us, int utc, enum timefmt_prec prec, char *buf, size_t cap);
const char *timefmt_iso(uint64_t us, int utc, char *buf, size_t cap);
long timefmt_offset(uint64_t sec, int utc);

#endif
