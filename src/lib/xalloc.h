/*
 * xalloc - allocation helpers that succeed or exit.
 *
 * Like Postfix's mymalloc(): callers never test for NULL. Sizes are checked
 * for overflow. Out of memory is logged and the process exits with status 75
 * (EX_TEMPFAIL), so an MTA that calls us retries later.
 */
#ifndef TERN_XALLOC_H
#define TERN_XALLOC_H

#include <stddef.h>
#include <stdarg.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xreallocarray(void *p, size_t count, size_t size);
void *xgrowarray(void *p, size_t *cap, size_t need, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#endif
