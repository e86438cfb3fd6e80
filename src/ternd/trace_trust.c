/*
 * trace_trust - the keys ternd verifies incoming trace contexts with: the
 * key in trace_key_file and, after a reload that found a new key there,
 * the one it replaced (trace_keys_load), so that mail tern-milter signed
 * before a key rotation and still on its way continues its trace. The
 * file is read at start as root, before the privilege drop, and again at
 * each reload as ternd's user. Sessions verify under a read lock; a
 * reload swaps the keys under the write lock and wipes the old ones.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>

#include "log.h"
#include "trace_trust.h"
#include "traceparent.h"

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct trace_keys keys;		/* none: no incoming trace is ours */

/* trace_trust_load - read trace_key_file; an absent file means no key. At
 * start a key that cannot be read is fatal; at a reload that is logged,
 * and the keys read before stay. Only the signal thread (or the start)
 * calls it: it alone changes keys */
void trace_trust_load(const struct conf *conf, int reload)
{
	const char *path = conf->global.trace_key_file;
	struct trace_keys now = {0}, old;
	char err[1024];
	struct stat st;
	int rc = 0;

	if (path[0] == '\0' || (lstat(path, &st) < 0 && errno == ENOENT)) {
		if (!reload || keys.cur)
			log_info("no trace_key_file%s%s: every incoming trace context is recorded "
				 "as unverified", path[0] ? " at " : "", path);
	} else if ((rc = trace_keys_load(&now, reload ? &keys : NULL, path, err, sizeof(err))) < 0) {
		if (!reload)
			log_fatal("trace_key_file %s", err);
		log_error("trace_key_file %s: %s", err,
			  keys.cur == NULL ? "still no key"
			  : keys.prev ? "the keys read before still verify"
			  : "the key read before still verifies");
		return;
	} else if (rc > 0) {
		log_info("trace_key_file %s: a new key; the one before it verifies too, until the "
			 "key changes again", path);
	}
	pthread_rwlock_wrlock(&lock);
	old = keys;
	keys = now;
	pthread_rwlock_unlock(&lock);
	trace_keys_free(&old);
}

/* trace_trust_verify - does sig sign the Traceparent value tpvalue and the
 * Message-ID msgid under a key of ours */
int trace_trust_verify(const char *tpvalue, const char *msgid, size_t msgid_len, const char *sig)
{
	int ok;

	pthread_rwlock_rdlock(&lock);
	ok = trace_keys_verify(&keys, tpvalue, msgid, msgid_len, sig);
	pthread_rwlock_unlock(&lock);
	return ok;
}

/* trace_trust_free - at exit */
void trace_trust_free(void)
{
	trace_keys_free(&keys);
}
