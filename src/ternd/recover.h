/*
 * recover.h - bring the spool in line with the queue database at start,
 * before any other thread runs. The database is the truth: bytes past a
 * segment's committed length are cut off, files it does not know are
 * removed. Never pads or silently drops a committed body: one that is
 * missing or short is reported. 0, or -1 with err.
 */
#ifndef TERN_RECOVER_H
#define TERN_RECOVER_H

#include <stddef.h>

int recover(char *err, size_t errlen);

#endif
