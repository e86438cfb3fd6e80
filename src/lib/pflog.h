/*
 * pflog - the numbers of Postfix-format delivery log lines, as pure
 * functions, so that tools written for Postfix's logs (pflogsumm, qshape
 * users' scripts) read ternd's: delays with Postfix's precision.
 */
#ifndef TERN_PFLOG_H
#define TERN_PFLOG_H

#include <stddef.h>
#include <stdint.h>

#define PFLOG_DELAY_MAX 24		/* room for any uint64_t of microseconds */

void pflog_delay(uint64_t us, char *out, size_t len);

#endif
