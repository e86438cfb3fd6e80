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
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>

#include "hdr_scan.h"
#include "log.h"
#include "trace_trust.h"

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

/* push_field - hdr_scan_each's callback: one field to the inspection */
static void push_field(void *hc, const char *name, size_t nlen, const char *value, size_t vlen)
{
	hdr_check_push(hc, name, nlen, value, vlen);
}

/* trace_trust_of - the trace context of a message whose content starts
 * with hdr (canonical, len octets), by tern-milter's rule
 * (trace_header_verify); a header that does not end within len may
 * hide a second field, so it is at most foreign */
enum trace_origin trace_trust_of(const char *hdr, size_t len, struct traceparent *tp)
{
	static const struct hdr_limits none = {ULLONG_MAX, LLONG_MAX, LLONG_MAX};
	struct hdr_check *hc = hdr_check_new(&none);
	struct hdr_trace_fields in;
	enum trace_origin origin;
	int whole = hdr_scan_each(hdr, len, push_field, hc);

	hdr_check_trace(hc, &in);
	pthread_rwlock_rdlock(&lock);
	origin = trace_header_verify(&keys, &in, tp);
	pthread_rwlock_unlock(&lock);
	hdr_check_free(&hc);
	return origin == TRACE_OURS && !whole ? TRACE_FOREIGN : origin;
}

/* trace_trust_free - at exit */
void trace_trust_free(void)
{
	trace_keys_free(&keys);
}
