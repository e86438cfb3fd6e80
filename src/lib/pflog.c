/*
 * pflog - the numbers of Postfix-format delivery log lines.
 *
 * Postfix shows a delay with two significant digits but never finer than
 * 10 ms, rounded, trailing zeros dropped: 0, 0.01, 0.1, 0.47, 1, 2.5, 13,
 * 2335. Pure: no I/O, no allocation.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include "pflog.h"

/* pflog_delay - microseconds as Postfix logs a delay */
void pflog_delay(uint64_t us, char *out, size_t len)
{
	uint64_t unit, v;

	/* the resolution: 10 ms below 1 s, 100 ms below 10 s, else 1 s */
	unit = us < 995000 ? 10000 : us < 9950000 ? 100000 : 1000000;
	v = us / unit + (us % unit >= unit / 2);
	if (unit == 1000000)
		snprintf(out, len, "%" PRIu64, v);
	else if (unit == 100000)
		snprintf(out, len, v % 10 ? "%" PRIu64 ".%" PRIu64 : "%" PRIu64, v / 10, v % 10);
	else if (v == 0)
		snprintf(out, len, "0");
	else if (v % 10)
		snprintf(out, len, "0.%02" PRIu64, v);
	else
		snprintf(out, len, "0.%" PRIu64, v / 10);
}
