/* tmpstore.h - a fresh queue store for one test, in a private directory */
#ifndef TERN_TMPSTORE_H
#define TERN_TMPSTORE_H

#include "store.h"
#include "tmpdir.h"

/* tmpstore_open - make dir (see tmpdir_make) and open a new store in
 * dir/queue, read-write */
static inline struct store *tmpstore_open(char *dir, size_t len)
{
	char qdir[4300], err[512] = "";
	struct store *st;

	tmpdir_make(dir, len);
	snprintf(qdir, sizeof(qdir), "%s/queue", dir);
	st = store_open(qdir, 0, 0, err, sizeof(err));
	ck_assert_msg(st != NULL, "store_open %s: %s", qdir, err);
	return st;
}

#endif
