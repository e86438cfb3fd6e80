/*
 * window - the report's window from the command line: --since as a
 * duration, a named day (today, yesterday) or a time, and the times of
 * --from/--to, in the chosen zone (local, or UTC with --utc) unless a time
 * names its own offset.
 *
 * Pure: a function of (the text, now, the zone); the process's TZ is the
 * local zone. Never reads the clock itself.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "report.h"
#include "units.h"

/* zone_suffix - "Z", "+HH:MM", "+HHMM" or "+HH" (or with '-') at s into
 * seconds east of UTC; the characters read, or -1 */
static int zone_suffix(const char *s, long *off)
{
	int h, m = 0, n = -1;

	if (s[0] == 'Z') {
		*off = 0;
		return 1;
	}
	if (s[0] != '+' && s[0] != '-')
		return -1;
	if (strlen(s) == 6 && s[3] == ':' && sscanf(s + 1, "%2d:%2d%n", &h, &m, &n) == 2 && n == 5) {
		;
	} else if (strlen(s) == 5 && sscanf(s + 1, "%2d%2d%n", &h, &m, &n) == 2 && n == 4) {
		;
	} else if (strlen(s) == 3 && sscanf(s + 1, "%2d%n", &h, &n) == 1 && n == 2) {
		;
	} else {
		return -1;
	}
	for (int i = 1; i <= n; i++)
		if (s[i] != ':' && (s[i] < '0' || s[i] > '9'))
			return -1;
	if (h > 23 || m > 59)
		return -1;
	*off = (s[0] == '-' ? -1 : 1) * (h * 3600L + m * 60L);
	return n + 1;
}

/* rpt_parse_time - "@EPOCH", or "YYYY-MM-DD" optionally followed by
 * "[T ]HH:MM[:SS[.fff]]" and a zone ("Z", "+HH:MM", "-HHMM"), into seconds;
 * without a zone the time is local (utc: UTC). 0 or -1 */
int rpt_parse_time(const char *s, int utc, uint64_t *sec)
{
	struct tm tm;
	const char *end;
	long off = 0;
	int zoned = 0, k;
	time_t t;

	if (s[0] == '@') {
		unsigned long long v;
		int n = -1;

		if (sscanf(s + 1, "%19llu%n", &v, &n) != 1 || s[1 + n] != '\0' || s[1] < '0' || s[1] > '9')
			return -1;
		*sec = v;
		return 0;
	}
	memset(&tm, 0, sizeof(tm));
	if ((end = strptime(s, "%Y-%m-%d", &tm)) == NULL)
		return -1;
	if (*end == 'T' || *end == ' ') {
		const char *e2 = strptime(end + 1, "%H:%M:%S", &tm);

		if (e2 == NULL)
			e2 = strptime(end + 1, "%H:%M", &tm);
		else if (*e2 == '.' || *e2 == ',')	/* a fraction: the second it falls in */
			for (e2++; *e2 >= '0' && *e2 <= '9'; e2++)
				;
		if (e2 == NULL)
			return -1;
		end = e2;
	}
	if (*end != '\0') {
		if ((k = zone_suffix(end, &off)) < 0)
			return -1;
		end += k;
		zoned = 1;
	}
	if (*end != '\0')
		return -1;
	if (zoned || utc) {
		t = timegm(&tm) - off;
	} else {
		tm.tm_isdst = -1;	/* the offset in force then, DST or not */
		t = mktime(&tm);
	}
	if (t < 0)
		return -1;
	*sec = (uint64_t)t;
	return 0;
}

/* day_start - the start of the day days_back days before the one t is in */
static int day_start(time_t t, int days_back, int utc, time_t *out)
{
	struct tm tm;

	if ((utc ? gmtime_r(&t, &tm) : localtime_r(&t, &tm)) == NULL)
		return -1;
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_mday -= days_back;
	tm.tm_isdst = -1;
	*out = utc ? timegm(&tm) : mktime(&tm);
	return *out < 0 ? -1 : 0;
}

/* rpt_window - the window --since SPEC names, as of now_us: a duration
 * (with or without a leading '-', "24h", "-24h"): the time that long ago
 * to now; "today": the day's start (midnight in the zone) to now;
 * "yesterday": the whole day before, midnight to midnight (pflogsumm's
 * -d yesterday); a time (rpt_parse_time): it to now. 0, or -1 with why */
int rpt_window(const char *spec, uint64_t now_us, int utc, uint64_t *from_us, uint64_t *to_us,
	       const char **why)
{
	time_t now = (time_t)(now_us / 1000000), a, b;
	long long ms;
	uint64_t sec;

	*why = "a duration (24h, -24h), today, yesterday, or YYYY-MM-DD[THH:MM[:SS]][Z|+HH:MM]";
	if (strcmp(spec, "today") == 0) {
		if (day_start(now, 0, utc, &a) < 0)
			return -1;
		*from_us = (uint64_t)a * 1000000;
		*to_us = now_us;
		return 0;
	}
	if (strcmp(spec, "yesterday") == 0) {
		if (day_start(now, 1, utc, &a) < 0 || day_start(now, 0, utc, &b) < 0)
			return -1;
		*from_us = (uint64_t)a * 1000000;
		*to_us = (uint64_t)b * 1000000;
		return 0;
	}
	if (units_duration(spec + (spec[0] == '-'), &ms, why) == 0) {
		if (ms <= 0) {
			*why = "must be positive";
			return -1;
		}
		*to_us = now_us;
		*from_us = now_us > (uint64_t)ms * 1000 ? now_us - (uint64_t)ms * 1000 : 0;
		return 0;
	}
	*why = "a duration (24h, -24h), today, yesterday, or YYYY-MM-DD[THH:MM[:SS]][Z|+HH:MM]";
	if (rpt_parse_time(spec, utc, &sec) < 0 || sec >= UINT64_MAX / 1000000)
		return -1;
	if (sec * 1000000 >= now_us) {
		*why = "the time is not in the past";
		return -1;
	}
	*from_us = sec * 1000000;
	*to_us = now_us;
	return 0;
}
