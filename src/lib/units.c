/*
 * units - numbers with units as written in tern.conf: sizes and durations.
 *
 * Sizes: a count of bytes with an optional unit B, k/K/KB/KiB, M/MB/MiB,
 * G/GB/GiB (all powers of 1024, as mail admins read "10MB"). Durations: a
 * count with an optional unit ms, s, m, h, d, w; no unit means seconds, as
 * in Postfix. Never overflows: too large is an error.
 */
#include "config.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "units.h"

/* parse_count - leading decimal digits of s into *out; return the rest */
static const char *parse_count(const char *s, unsigned long long *out, const char **why)
{
	unsigned long long v = 0;
	const char *p = s;

	while (*p == ' ' || *p == '\t')
		p++;
	if (!isdigit((unsigned char)*p)) {
		*why = "expected a number";
		return NULL;
	}
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10) {
			*why = "number too large";
			return NULL;
		}
		v = v * 10 + d;
	}
	*out = v;
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* scale - multiply v by unit, refusing results above max */
static int scale(unsigned long long v, unsigned long long unit, unsigned long long max,
		 unsigned long long *out, const char **why)
{
	if (v > max / unit) {
		*why = "number too large";
		return -1;
	}
	*out = v * unit;
	return 0;
}

/* units_uint - a plain non-negative integer not above max */
int units_uint(const char *s, unsigned long long max, unsigned long long *out, const char **why)
{
	unsigned long long v;
	const char *rest = parse_count(s, &v, why);

	if (rest == NULL)
		return -1;
	if (*rest != '\0') {
		*why = "expected a whole number without a unit";
		return -1;
	}
	if (v > max) {
		*why = "number too large";
		return -1;
	}
	*out = v;
	return 0;
}

/* units_size - a byte count with an optional binary unit */
int units_size(const char *s, unsigned long long *bytes, const char **why)
{
	static const struct {
		const char *name;
		unsigned long long mult;
	} tab[] = {
		{"", 1}, {"b", 1},
		{"k", 1ULL << 10}, {"kb", 1ULL << 10}, {"kib", 1ULL << 10},
		{"m", 1ULL << 20}, {"mb", 1ULL << 20}, {"mib", 1ULL << 20},
		{"g", 1ULL << 30}, {"gb", 1ULL << 30}, {"gib", 1ULL << 30},
	};
	unsigned long long v;
	const char *rest = parse_count(s, &v, why);

	if (rest == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (strcasecmp(rest, tab[i].name) == 0)
			return scale(v, tab[i].mult, INT64_MAX, bytes, why);
	*why = "bad size unit (use B, KB, MB or GB)";
	return -1;
}

/* units_duration - a duration in milliseconds; no unit means seconds */
int units_duration(const char *s, long long *ms, const char **why)
{
	static const struct {
		const char *name;
		unsigned long long mult;
	} tab[] = {
		{"ms", 1}, {"", 1000}, {"s", 1000}, {"m", 60000},
		{"h", 3600000}, {"d", 86400000}, {"w", 604800000},
	};
	unsigned long long v, r;
	const char *rest = parse_count(s, &v, why);

	if (rest == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		if (strcmp(rest, tab[i].name) == 0) {
			if (scale(v, tab[i].mult, INT64_MAX, &r, why) < 0)
				return -1;
			*ms = (long long)r;
			return 0;
		}
	}
	*why = "bad time unit (use ms, s, m, h, d or w)";
	return -1;
}
