/*
 * timefmt - every time tern prints for people, in one format: local time
 * with the zone's numeric offset, "2026-12-01 08:49:33.647 -0500" (with
 * utc, "+0000"), so that lines from ternq, tern-report and other tools'
 * logs line up whatever TZ each ran with; and the same instant in ISO 8601
 * ("2026-12-01T08:49:33.647-05:00") for JSON, beside the epoch numbers.
 *
 * Pure apart from the process's time zone (TZ, read by localtime_r). Never
 * prints a time without its offset, and never writes past cap.
 */
#include "config.h"

#include <stdio.h>
#include <time.h>

#include "timefmt.h"

/* broken - a time's calendar fields and its offset east of UTC in seconds;
 * -1 if the time cannot be represented */
static int broken(uint64_t sec, int utc, struct tm *tm, long *off)
{
	time_t t = (time_t)sec;

	if (sec > (uint64_t)INT64_MAX / 2 || (utc ? gmtime_r(&t, tm) : localtime_r(&t, tm)) == NULL)
		return -1;
	*off = utc ? 0 : tm->tm_gmtoff;
	return 0;
}

/* timefmt_offset - the offset east of UTC, in seconds, in force at a time */
long timefmt_offset(uint64_t sec, int utc)
{
	struct tm tm;
	long off;

	return broken(sec, utc, &tm, &off) < 0 ? 0 : off;
}

/* timefmt_human - microseconds since the epoch as "YYYY-MM-DD HH:MM:SS.mmm
 * +HHMM" (TIMEFMT_SEC: without ".mmm", TIMEFMT_MIN: without ":SS.mmm"); a
 * time out of range as "@SECONDS" */
const char *timefmt_human(uint64_t us, int utc, enum timefmt_prec prec, char *buf, size_t cap)
{
	uint64_t sec = us / 1000000;
	struct tm tm;
	long off, a;
	int n;

	if (cap == 0)
		return buf;
	if (broken(sec, utc, &tm, &off) < 0) {
		snprintf(buf, cap, "@%llu", (unsigned long long)sec);
		return buf;
	}
	a = off < 0 ? -off : off;
	n = snprintf(buf, cap, "%04d-%02d-%02d %02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		     tm.tm_hour, tm.tm_min);
	if (n > 0 && (size_t)n < cap && prec != TIMEFMT_MIN)
		n += snprintf(buf + n, cap - (size_t)n, ":%02d", tm.tm_sec);
	if (n > 0 && (size_t)n < cap && prec == TIMEFMT_MS)
		n += snprintf(buf + n, cap - (size_t)n, ".%03u", (unsigned)(us / 1000 % 1000));
	if (n > 0 && (size_t)n < cap)
		snprintf(buf + n, cap - (size_t)n, " %c%02ld%02ld", off < 0 ? '-' : '+', a / 3600,
			 a / 60 % 60);
	return buf;
}

/* timefmt_iso - microseconds since the epoch in ISO 8601 with milliseconds
 * and the offset, "2026-12-01T08:49:33.647-05:00" (utc: "+00:00"); a time
 * out of range as "" */
const char *timefmt_iso(uint64_t us, int utc, char *buf, size_t cap)
{
	struct tm tm;
	long off, a;

	if (cap == 0)
		return buf;
	if (broken(us / 1000000, utc, &tm, &off) < 0) {
		buf[0] = '\0';
		return buf;
	}
	a = off < 0 ? -off : off;
	snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03u%c%02ld:%02ld", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(us / 1000 % 1000), off < 0 ? '-' : '+', a / 3600, a / 60 % 60);
	return buf;
}
