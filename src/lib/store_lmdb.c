/*
 * store_lmdb - the LMDB discipline under the store, as Postfix's slmdb.c
 * is under dict_lmdb.c: opening an environment and its tables, growing
 * the map, write transactions (replayed after growth), nested ones, and
 * read transactions that hold off growth and live for one call, among
 * them the batched walk every long reader uses. It knows no record: the
 * queue's are store_queue.c's, the history's store_hist.c's, the milter
 * journal's store_journal.c's; the tables are listed in store_priv.h.
 *
 * Must never hold a read transaction longer than one call, never write
 * outside store_write() (the journal's one writer excepted: its own
 * environment), never open an environment with MDB_NOSYNC, and never
 * let a caller's callback run inside a read transaction of a walk.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dir_sync.h"
#include "store_priv.h"
#include "xalloc.h"

#define STORE_MAP_INITIAL (256ULL << 20)
#define STORE_MAP_MAX (1ULL << 40)

/* store_lock_share - the lock file of an environment in dir: 0660 when
 * its group may read the data file (an LMDB reader, ternq run by a member
 * of admin_group, writes its slot in the reader table), else 0600 */
void store_lock_share(const char *dir)
{
	char path[4096];
	struct stat st;
	mode_t mode;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	if (stat(path, &st) < 0)
		return;
	mode = st.st_mode & S_IRGRP ? 0660 : 0600;
	snprintf(path, sizeof(path), "%s/lock.mdb", dir);
	if (chmod(path, mode) < 0)
		return;	/* readers then fail with a clear error of their own */
}

/* cloexec_data - LMDB 0.9 (Debian 12: 0.9.24) opens its lock file and its
 * meta-page descriptor close-on-exec, but not the data file: without
 * this, anything the process ran would inherit data.mdb. An LMDB or
 * errno code */
static int cloexec_data(MDB_env *env)
{
	mdb_filehandle_t fd;
	int rc;

	if ((rc = mdb_env_get_fd(env, &fd)) != 0)
		return rc;
	return fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ? errno : 0;
}

/* store_env_create - an LMDB environment in dir (made if a read-write
 * open finds none), what it holds named in the error; a read-write open
 * shares its lock file (store_lock_share) and clears the reader slots of
 * dead processes. 0, or -1 with err set */
int store_env_create(MDB_env **env, const char *dir, int readonly, unsigned maxdbs,
		     size_t mapsize, const char *what, char *err, size_t errlen)
{
	int rc, dead;

	*env = NULL;
	if (!readonly && mkdir(dir, 0750) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
		return -1;
	}
	if ((rc = mdb_env_create(env)) != 0
	    || (rc = mdb_env_set_maxdbs(*env, maxdbs)) != 0
	    || (rc = mdb_env_set_mapsize(*env, mapsize)) != 0
	    || (rc = mdb_env_open(*env, dir, MDB_NOTLS | (readonly ? MDB_RDONLY : 0), 0660)) != 0
	    || (rc = cloexec_data(*env)) != 0) {
		snprintf(err, errlen, "%s: cannot open %s: %s", dir, what, mdb_strerror(rc));
		if (*env)
			mdb_env_close(*env);
		*env = NULL;
		return -1;
	}
	/* LMDB syncs data.mdb but never the directory it made it in, nor is
	 * dir itself durable once made: both before the first commit counts. */
	if (!readonly && (dir_sync_parent(dir) < 0 || dir_sync(dir) < 0)) {
		snprintf(err, errlen, "%s: cannot fsync %s's directory: %s", dir, what,
			 strerror(errno));
		mdb_env_close(*env);
		*env = NULL;
		return -1;
	}
	if (!readonly) {
		store_lock_share(dir);
		mdb_reader_check(*env, &dead);
	}
	return 0;
}

/* store_tables_open - the handles of n tables, created by a read-write
 * open; LMDB's result */
int store_tables_open(MDB_env *env, int readonly, const struct store_table *tables, size_t n)
{
	MDB_txn *txn;
	int rc;

	if ((rc = mdb_txn_begin(env, NULL, readonly ? MDB_RDONLY : 0, &txn)) != 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct store_table *t = &tables[i];

		rc = mdb_dbi_open(txn, t->name, t->flags | (readonly ? 0 : MDB_CREATE), t->dbi);
		if (t->missing && (*t->missing = readonly && rc == MDB_NOTFOUND))
			rc = 0;
	}
	if (rc != 0) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);	/* frees txn whatever it returns */
}

/* store_open - open (creating if allowed) the queue environment in dir;
 * a read-write open brings an older layout up to date */
struct store *store_open(const char *dir, int readonly, size_t mapsize, char *err, size_t errlen)
{
	struct store *st = xcalloc(1, sizeof(*st));
	const struct store_table tables[] = {
		{"msg", 0, &st->msg, NULL}, {"rcpt", 0, &st->rcpt, NULL},
		{"sched", 0, &st->sched, NULL}, {"seg", 0, &st->seg, NULL},
		{"meta", 0, &st->meta, NULL}, {"tls", 0, &st->tls, NULL},
		{"hist", 0, &st->hist, NULL}, {"hidx", MDB_DUPSORT, &st->hidx, NULL},
		{"notice", 0, &st->notice, &st->no_notice},
		{"hpend", 0, &st->hpend, &st->no_hpend},
		{"rcount", 0, &st->rcount, &st->no_rcount},
	};
	MDB_envinfo info;
	char why[256];
	int rc;

	pthread_rwlock_init(&st->resize, NULL);
	st->readonly = readonly;
	if (store_env_create(&st->env, dir, readonly, 16, mapsize ? mapsize : STORE_MAP_INITIAL,
			     "queue database", err, errlen) != 0)
		goto fail;
	/* Another process may have grown the map: adopt its size. */
	mdb_env_set_mapsize(st->env, 0);
	mdb_env_info(st->env, &info);
	st->mapsize = info.me_mapsize;
	rc = store_tables_open(st->env, readonly, tables, sizeof(tables) / sizeof(tables[0]));
	if (rc != 0) {
		snprintf(err, errlen, "%s: cannot open queue tables: %s%s", dir, mdb_strerror(rc),
			 readonly && rc == MDB_NOTFOUND ? " (has ternd ever run?)" : "");
		goto fail;
	}
	if (readonly)
		store_reader_check(st);	/* store_env_create did for a read-write open */
	if (!readonly && store_write(st, store_queue_layout, NULL, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s: cannot bring the queue tables to layout %d: %s", dir,
			 STORE_LAYOUT, why);
		goto fail;
	}
	return st;
fail:
	if (st->env)
		mdb_env_close(st->env);
	pthread_rwlock_destroy(&st->resize);
	free(st);
	return NULL;
}

/* store_rebuilt - how many schedule entries store_open rebuilt from an
 * older layout (0: none) */
uint64_t store_rebuilt(const struct store *st)
{
	return st->rebuilt;
}

/* store_close - close the environment and clear the pointer */
void store_close(struct store **stp)
{
	struct store *st = *stp;

	if (st == NULL)
		return;
	mdb_env_close(st->env);
	pthread_rwlock_destroy(&st->resize);
	free(st);
	*stp = NULL;
}

/* store_reader_check - clear reader slots of dead processes; how many */
int store_reader_check(struct store *st)
{
	int dead = 0;

	mdb_reader_check(st->env, &dead);
	return dead;
}

/* store_map_usage - octets of the map in use (up to its highest page
 * written: freed pages are reused, never returned) and its size */
int store_map_usage(struct store *st, uint64_t *used, uint64_t *size)
{
	MDB_envinfo info;
	MDB_stat stat;

	pthread_rwlock_rdlock(&st->resize);
	if (st->unmapped || mdb_env_info(st->env, &info) != 0 || mdb_env_stat(st->env, &stat) != 0) {
		pthread_rwlock_unlock(&st->resize);
		return -1;
	}
	pthread_rwlock_unlock(&st->resize);
	*used = ((uint64_t)info.me_last_pgno + 1) * stat.ms_psize;
	*size = info.me_mapsize;
	return 0;
}

/* store_grow - double the map; only with no transaction of ours open.
 * MDB_MAP_FULL at the largest map; MDB_PANIC when the new map could not
 * be made (LMDB has dropped the old one by then: only a restart helps) */
static int store_grow(struct store *st, char *err, size_t errlen)
{
	size_t want;
	int rc;

	/* in 64 bits: where size_t has 32, doubling past 2 GB would wrap */
	if (st->mapsize > SIZE_MAX / 2 || (uint64_t)st->mapsize * 2 > STORE_MAP_MAX)
		return MDB_MAP_FULL;
	want = st->mapsize * 2;
	pthread_rwlock_wrlock(&st->resize);
	rc = mdb_env_set_mapsize(st->env, want);
	if (rc == 0)
		st->mapsize = want;
	else
		st->unmapped = 1;	/* no one may touch the environment again */
	pthread_rwlock_unlock(&st->resize);
	if (rc == 0)
		return 0;
	snprintf(err, errlen, "queue database: cannot grow its map to %zu MB: %s", want >> 20,
		 rc > 0 ? strerror(rc) : mdb_strerror(rc));
	return MDB_PANIC;
}

/* adopt_map - take the map size another process grew the map to: from
 * holding the resize lock shared to not holding it */
static void adopt_map(struct store *st)
{
	pthread_rwlock_unlock(&st->resize);
	pthread_rwlock_wrlock(&st->resize);
	mdb_env_set_mapsize(st->env, 0);
	pthread_rwlock_unlock(&st->resize);
}

/* write_error - the message for a write's result rc (none for 0) */
static void write_error(int rc, char *err, size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	if (rc != 0)
		snprintf(err, errlen, "queue database: %s", rc == STORE_DAMAGED
			 ? "a record fails validation" : rc > 0 ? strerror(rc) : mdb_strerror(rc));
}

/* store_write - run fn in a write transaction and commit it durably */
int store_write(struct store *st, store_write_fn fn, void *arg, char *err, size_t errlen)
{
	struct store_txn t = {st, NULL};
	int rc;

	if (errlen > 0)
		err[0] = '\0';
	for (;;) {
		pthread_rwlock_rdlock(&st->resize);
		if (st->unmapped) {
			pthread_rwlock_unlock(&st->resize);
			rc = MDB_PANIC;
			break;
		}
		rc = mdb_txn_begin(st->env, NULL, 0, &t.txn);
		if (rc == MDB_MAP_RESIZED) {	/* grown by another process */
			adopt_map(st);
			continue;
		}
		if (rc == 0) {
			rc = fn(&t, arg);
			if (rc == 0)
				rc = mdb_txn_commit(t.txn);	/* synchronous: data and meta synced */
			else
				mdb_txn_abort(t.txn);
		}
		pthread_rwlock_unlock(&st->resize);
		if (rc != MDB_MAP_FULL)
			break;
		if ((rc = store_grow(st, err, errlen)) != 0)
			break;
	}
	if (rc != MDB_PANIC || err[0] == '\0')
		write_error(rc, err, errlen);
	/* After a failed meta page write LMDB refuses every transaction:
	 * only a restart (and recovery) helps. */
	return rc == 0 ? 0 : rc == MDB_PANIC ? STORE_PANIC : -1;
}

/* store_nested - fn in a transaction nested in t: what it writes joins t
 * if it returns 0 and is dropped otherwise. Returns 0 (joined),
 * STORE_DROPPED (too many pages for one transaction: dropped, t goes on),
 * or fn's or LMDB's error, with the reason in err: t had better not go
 * on then, except after MDB_MAP_FULL, which store_write grows the map
 * for. */
int store_nested(struct store_txn *t, store_write_fn fn, void *arg, char *err, size_t errlen)
{
	struct store_txn child = {t->st, NULL};
	int rc;

	if ((rc = mdb_txn_begin(t->st->env, t->txn, 0, &child.txn)) == 0) {
		if ((rc = fn(&child, arg)) == 0)
			rc = mdb_txn_commit(child.txn);
		else
			mdb_txn_abort(child.txn);
	}
	write_error(rc, err, errlen);
	return rc == MDB_TXN_FULL ? STORE_DROPPED : rc;
}

/* store_kv_put - one key/value in a write transaction */
int store_kv_put(struct store_txn *t, MDB_dbi dbi, const void *k, size_t klen,
		 const void *v, size_t vlen)
{
	MDB_val key = {klen, (void *)k}, val = {vlen, (void *)v};

	return mdb_put(t->txn, dbi, &key, &val, 0);
}

/* store_kv_del - delete one key; a missing key is fine */
int store_kv_del(struct store_txn *t, MDB_dbi dbi, const void *k, size_t klen)
{
	MDB_val key = {klen, (void *)k};
	int rc = mdb_del(t->txn, dbi, &key, NULL);

	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* store_take_front - up to max entries from the front of a table, each
 * passed to fn and deleted; how many in *n */
int store_take_front(MDB_txn *txn, MDB_dbi dbi, size_t max, size_t *n, front_fn fn, void *arg)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	*n = 0;
	if ((rc = mdb_cursor_open(txn, dbi, &cur)) != 0)
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	if (rc == MDB_NOTFOUND)
		rc = 0;		/* empty */
	else while (rc == 0 && *n < max) {
		if ((rc = fn(txn, &k, &v, arg)) != 0 || (rc = mdb_cursor_del(cur, 0)) != 0)
			break;
		(*n)++;
		/* the next entry; after the last one was deleted, EINVAL */
		rc = mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT);
		if (rc == EINVAL || rc == MDB_NOTFOUND) {
			rc = 0;
			break;
		}
	}
	mdb_cursor_close(cur);
	return rc == TAKE_STOP ? 0 : rc;
}

/* store_read_begin - a read transaction, holding off map growth in this
 * process */
int store_read_begin(struct store *st, MDB_txn **txn)
{
	int rc;

	pthread_rwlock_rdlock(&st->resize);
	if (st->unmapped) {
		pthread_rwlock_unlock(&st->resize);
		return MDB_PANIC;
	}
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
	if (rc == MDB_MAP_RESIZED) {
		adopt_map(st);
		pthread_rwlock_rdlock(&st->resize);
		rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
	}
	if (rc != 0)
		pthread_rwlock_unlock(&st->resize);
	return rc;
}

/* store_read_end - end a read transaction */
void store_read_end(struct store *st, MDB_txn *txn)
{
	mdb_txn_abort(txn);
	pthread_rwlock_unlock(&st->resize);
}

/* store_read_cursor - a read transaction and a cursor on dbi; -1 if
 * either fails */
int store_read_cursor(struct store *st, MDB_dbi dbi, MDB_txn **txn, MDB_cursor **cur)
{
	if (store_read_begin(st, txn) != 0)
		return -1;
	if (mdb_cursor_open(*txn, dbi, cur) != 0) {
		store_read_end(st, *txn);
		return -1;
	}
	return 0;
}

/* store_count_entries - how many records a table holds */
int store_count_entries(struct store *st, MDB_dbi dbi, uint64_t *n)
{
	MDB_txn *txn;
	MDB_stat s;

	if (store_read_begin(st, &txn) != 0)
		return -1;
	mdb_stat(txn, dbi, &s);
	*n = s.ms_entries;
	store_read_end(st, txn);
	return 0;
}

/*
 * read_batches - store_read_batches (see store_priv.h), over the queue
 * database (st) or another environment (env). A read transaction pins the
 * pages it sees: held while a caller's callback writes to a slow
 * terminal, it would make the database grow without bound. So a batch is
 * read, the transaction ended, and only then is the batch handed on.
 * Returns flush's non-zero return, 0 at the end of the table, or -1 when
 * a read failed (after handing on what was read before it).
 */
static int read_batches(struct store *st, MDB_env *env, MDB_dbi dbi, struct read_pos *pos,
			size_t batch, read_step_fn step, read_flush_fn flush, void *arg)
{
	int stop = 0, more = 1, failed = 0;

	while (more && !stop && !failed) {
		MDB_txn *txn;
		MDB_cursor *cur;
		MDB_val k = {pos->len, pos->key}, v;
		size_t got = 0;
		int rc, r = READ_SKIP;

		/* the queue's environment under its resize lock; another as it is */
		if (st ? store_read_cursor(st, dbi, &txn, &cur) != 0
		    : mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0)
			return -1;
		if (!st && mdb_cursor_open(txn, dbi, &cur) != 0) {
			mdb_txn_abort(txn);
			return -1;
		}
		rc = mdb_cursor_get(cur, &k, &v, pos->len ? MDB_SET_RANGE : MDB_FIRST);
		if (rc == 0 && pos->after && k.mv_size == pos->len
		    && memcmp(k.mv_data, pos->key, pos->len) == 0)
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
		for (; rc == 0 && got < batch; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			/* LMDB's keys: 511 octets at most */
			if (k.mv_size > sizeof(pos->key)) {
				rc = MDB_BAD_VALSIZE;
				break;
			}
			memcpy(pos->key, k.mv_data, k.mv_size);
			pos->len = k.mv_size;
			pos->after = 1;
			if ((r = step(txn, &k, &v, pos, arg)) == READ_END || r == READ_JUMP)
				break;
			got += r == READ_TAKE;
		}
		/* full, or jumping: there may be more; else the table's end */
		more = rc == 0 && r != READ_END;
		failed = rc != 0 && rc != MDB_NOTFOUND;
		mdb_cursor_close(cur);
		if (st)
			store_read_end(st, txn);
		else
			mdb_txn_abort(txn);
		stop = flush(arg);
	}
	return failed ? -1 : stop;
}

/* store_read_batches - read_batches over a table of the queue database */
int store_read_batches(struct store *st, MDB_dbi dbi, struct read_pos *pos, size_t batch,
		       read_step_fn step, read_flush_fn flush, void *arg)
{
	return read_batches(st, NULL, dbi, pos, batch, step, flush, arg);
}

/* store_env_read_batches - the same over an environment whose map never
 * grows (the milter's journal), so no resize lock is taken */
int store_env_read_batches(MDB_env *env, MDB_dbi dbi, struct read_pos *pos, size_t batch,
			   read_step_fn step, read_flush_fn flush, void *arg)
{
	return read_batches(NULL, env, dbi, pos, batch, step, flush, arg);
}
