/* tmpdir.h - a private directory for one test: mkdtemp(), never a fixed path */
#ifndef TERN_TMPDIR_H
#define TERN_TMPDIR_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

/* tmpdir_make - a new empty directory under $TMPDIR (or /tmp) */
static inline void tmpdir_make(char *dir, size_t len)
{
	const char *base = getenv("TMPDIR");

	snprintf(dir, len, "%s/tern-unit.XXXXXX", base && *base ? base : "/tmp");
	ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s failed", dir);
}

/* tmpdir_rm1 - nftw callback: remove one entry, children first */
static inline int tmpdir_rm1(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* tmpdir_remove - remove a test directory and everything in it */
static inline void tmpdir_remove(const char *dir)
{
	ck_assert_int_eq(nftw(dir, tmpdir_rm1, 16, FTW_DEPTH | FTW_PHYS), 0);
}

#endif
