/*
 * xalloc - allocation helpers that succeed or exit.
 *
 * Never returns NULL; never lets a size computation wrap.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "xalloc.h"

/* xnomem - report exhaustion and leave with a temporary-failure status */
static void __attribute__((noreturn)) xnomem(size_t n)
{
	log_fatal_status(75, "out of memory allocating %zu bytes", n);
}

/* xmalloc - malloc that succeeds or exits */
void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		xnomem(n);
	return p;
}

/* xcalloc - calloc that succeeds or exits */
void *xcalloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);

	if (p == NULL)
		xnomem(count * size);
	return p;
}

/* xgrowarray - an array with room for at least need elements, *cap
 * being its room so far: it doubles, so n appends cost O(n) copies */
void *xgrowarray(void *p, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 8, most = SIZE_MAX / (size ? size : 1);

	if (need <= *cap)
		return p;
	while (c < need)
		c = c > most / 2 ? need : 2 * c;	/* past most: xreallocarray exits */
	p = xreallocarray(p, c, size);
	*cap = c;
	return p;
}

/* xreallocarray - resize an array, checking count * size for overflow */
void *xreallocarray(void *p, size_t count, size_t size)
{
	if (size != 0 && count > SIZE_MAX / size)
		log_fatal_status(75, "allocation size overflow (%zu x %zu)", count, size);
	p = realloc(p, count != 0 && size != 0 ? count * size : 1);
	if (p == NULL)
		xnomem(count * size);
	return p;
}

/* xstrdup - strdup that succeeds or exits */
char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

/* xstrndup - copy at most n bytes of s and terminate */
char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);

	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

/* xvasprintf - format into a new string */
char *xvasprintf(const char *fmt, va_list ap)
{
	char *p;

	if (vasprintf(&p, fmt, ap) < 0)
		xnomem(strlen(fmt));
	return p;
}

/* xasprintf - format into a new string */
char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p;

	va_start(ap, fmt);
	p = xvasprintf(fmt, ap);
	va_end(ap);
	return p;
}
