/* check_timefmt - times for people and for JSON in three zones (whole,
 * half-hour and negative half-hour offsets), across both DST changes of
 * America/New_York, and with utc whatever TZ says */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timefmt.h"
#include "unit.h"

#define MS(s, ms) ((uint64_t)(s) * 1000000 + (uint64_t)(ms) * 1000 + 999)

/* expected values from date(1): TZ=... date -d @SECONDS '+%F %T %z' */
static const struct {
	const char *tz;
	uint64_t us;
	int utc;
	const char *human, *iso;
} cases[] = {
	{"America/New_York", MS(1796132973, 647), 0, "2026-12-01 08:49:33.647 -0500",
	 "2026-12-01T08:49:33.647-05:00"},
	{"America/New_York", MS(1796132973, 647), 1, "2026-12-01 13:49:33.647 +0000",
	 "2026-12-01T13:49:33.647+00:00"},
	/* spring forward: 01:59:59 EST, then 03:00:00 EDT */
	{"America/New_York", MS(1772953199, 0), 0, "2026-03-08 01:59:59.000 -0500",
	 "2026-03-08T01:59:59.000-05:00"},
	{"America/New_York", MS(1772953200, 0), 0, "2026-03-08 03:00:00.000 -0400",
	 "2026-03-08T03:00:00.000-04:00"},
	/* fall back: 01:59:59 EDT, then 01:00:00 EST */
	{"America/New_York", MS(1793512799, 999), 0, "2026-11-01 01:59:59.999 -0400",
	 "2026-11-01T01:59:59.999-04:00"},
	{"America/New_York", MS(1793512800, 0), 0, "2026-11-01 01:00:00.000 -0500",
	 "2026-11-01T01:00:00.000-05:00"},
	{"America/New_York", 0, 0, "1969-12-31 19:00:00.000 -0500", "1969-12-31T19:00:00.000-05:00"},
	{"Asia/Kolkata", MS(1796132973, 647), 0, "2026-12-01 19:19:33.647 +0530",
	 "2026-12-01T19:19:33.647+05:30"},
	{"Asia/Kolkata", MS(1796132973, 5), 1, "2026-12-01 13:49:33.005 +0000",
	 "2026-12-01T13:49:33.005+00:00"},
	{"Asia/Kolkata", 0, 0, "1970-01-01 05:30:00.000 +0530", "1970-01-01T05:30:00.000+05:30"},
	{"America/St_Johns", MS(1796132973, 647), 0, "2026-12-01 10:19:33.647 -0330",
	 "2026-12-01T10:19:33.647-03:30"},
	{"America/St_Johns", MS(1772953200, 0), 0, "2026-03-08 04:30:00.000 -0230",
	 "2026-03-08T04:30:00.000-02:30"},
	{"UTC", MS(1796132973, 647), 0, "2026-12-01 13:49:33.647 +0000", "2026-12-01T13:49:33.647+00:00"},
	{"UTC", 0, 1, "1970-01-01 00:00:00.000 +0000", "1970-01-01T00:00:00.000+00:00"},
};

/* zone - make tz the process's local zone */
static void zone(const char *tz)
{
	ck_assert_int_eq(setenv("TZ", tz, 1), 0);
	tzset();
}

START_TEST(test_human_iso)
{
	char buf[TIMEFMT_LEN];

	zone(cases[_i].tz);
	ck_assert_str_eq(timefmt_human(cases[_i].us, cases[_i].utc, TIMEFMT_MS, buf, sizeof(buf)),
			 cases[_i].human);
	ck_assert_uint_eq(strlen(buf), 29);	/* one width for every zone */
	ck_assert_str_eq(timefmt_iso(cases[_i].us, cases[_i].utc, buf, sizeof(buf)), cases[_i].iso);
}
END_TEST

START_TEST(test_precision)
{
	char buf[TIMEFMT_LEN];

	zone("Asia/Kolkata");
	ck_assert_str_eq(timefmt_human(MS(1796132973, 647), 0, TIMEFMT_SEC, buf, sizeof(buf)),
			 "2026-12-01 19:19:33 +0530");
	ck_assert_str_eq(timefmt_human(MS(1796132973, 647), 0, TIMEFMT_MIN, buf, sizeof(buf)),
			 "2026-12-01 19:19 +0530");
	ck_assert_int_eq(timefmt_offset(1796132973, 0), 19800);
	ck_assert_int_eq(timefmt_offset(1796132973, 1), 0);
	zone("America/New_York");
	ck_assert_int_eq(timefmt_offset(1772953199, 0), -18000);
	ck_assert_int_eq(timefmt_offset(1772953200, 0), -14400);
}
END_TEST

START_TEST(test_bounds)
{
	char small[12], buf[TIMEFMT_LEN];

	zone("America/New_York");
	/* cut, never past cap, always terminated */
	memset(small, 'x', sizeof(small));
	timefmt_human(MS(1796132973, 647), 0, TIMEFMT_MS, small, sizeof(small));
	ck_assert_str_eq(small, "2026-12-01 ");
	timefmt_iso(MS(1796132973, 647), 0, small, sizeof(small));
	ck_assert_str_eq(small, "2026-12-01T");
	ck_assert_ptr_eq(timefmt_human(1, 0, TIMEFMT_MS, small, 0), small);
	/* the largest time: a year of six digits, still whole */
	ck_assert_str_eq(timefmt_human(UINT64_MAX, 1, TIMEFMT_MS, buf, sizeof(buf)),
			 "586524-01-19 08:01:49.551 +0000");
	ck_assert_str_eq(timefmt_iso(UINT64_MAX, 1, buf, sizeof(buf)), "586524-01-19T08:01:49.551+00:00");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("timefmt");
	TCase *tc = tcase_create("timefmt");

	tcase_add_loop_test(tc, test_human_iso, 0, N_ELEMENTS(cases));
	tcase_add_test(tc, test_precision);
	tcase_add_test(tc, test_bounds);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
