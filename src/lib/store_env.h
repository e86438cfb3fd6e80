/*
 * store_env - opening an LMDB environment the way every tern store does.
 *
 * Shared by store (the queue) and store_journal (the milter's journal), the
 * only files besides this one that include lmdb.h.
 */
#ifndef TERN_STORE_ENV_H
#define TERN_STORE_ENV_H

#include <lmdb.h>

int store_env_open(MDB_env *env, const char *dir, int readonly);

#endif
