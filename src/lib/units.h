/*
 * units - numbers with units as written in tern.conf: sizes and durations.
 *
 * Pure functions over strings; no I/O, no allocation. On error they return
 * -1 and point *why at a static message suitable for "file:line: why".
 */
#ifndef TERN_UNITS_H
#define TERN_UNITS_H

int units_uint(const char *s, unsigned long long max, unsigned long long *out, const char **why);
int units_size(const char *s, unsigned long long *bytes, const char **why);
int units_duration(const char *s, long long *ms, const char **why);

#endif
