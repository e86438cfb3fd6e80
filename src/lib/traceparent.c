/*
 * traceparent - W3C trace context (version 00) and tern's signature.
 *
 * Parsing never allocates and never reads past len; formatting always
 * produces lower case. Signature comparison is constant time.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "traceparent.h"

#define TRACEPARENT_FLAG_SAMPLED 0x01
#define TRACESTATE_MAX_MEMBERS 32

/* is_wsp - white space that a Message-ID loses before it is signed */
static int is_wsp(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* hexval - value of a lower-case hex digit, or -1 */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* parse_hex - decode 2*n lower-case hex digits; -1 if any is not one */
static int parse_hex(const char *s, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* all_zero - are all n bytes zero */
static int all_zero(const unsigned char *p, size_t n)
{
	unsigned char acc = 0;

	for (size_t i = 0; i < n; i++)
		acc |= p[i];
	return acc == 0;
}

/* traceparent_parse - strict parse of a version-00 traceparent value */
int traceparent_parse(const char *s, size_t len, struct traceparent *tp)
{
	unsigned char version;

	if (len != TRACEPARENT_LEN || s[2] != '-' || s[35] != '-' || s[52] != '-')
		return -1;
	if (parse_hex(s, &version, 1) < 0 || version != 0)
		return -1;
	if (parse_hex(s + 3, tp->trace_id, sizeof(tp->trace_id)) < 0
	    || parse_hex(s + 36, tp->span_id, sizeof(tp->span_id)) < 0
	    || parse_hex(s + 53, &tp->flags, 1) < 0)
		return -1;
	if (all_zero(tp->trace_id, sizeof(tp->trace_id)) || all_zero(tp->span_id, sizeof(tp->span_id)))
		return -1;
	return 0;
}

/* traceparent_format - the header value for tp */
void traceparent_format(const struct traceparent *tp, char out[TRACEPARENT_LEN + 1])
{
	char tid[TRACE_ID_HEX + 1], sid[SPAN_ID_HEX + 1];

	trace_id_hex(tp, tid);
	span_id_hex(tp, sid);
	snprintf(out, TRACEPARENT_LEN + 1, "00-%s-%s-%02x", tid, sid, tp->flags);
}

/* trace_id_hex - the trace id in lower-case hex */
void trace_id_hex(const struct traceparent *tp, char out[TRACE_ID_HEX + 1])
{
	sodium_bin2hex(out, TRACE_ID_HEX + 1, tp->trace_id, sizeof(tp->trace_id));
}

/* span_id_hex - the span id in lower-case hex */
void span_id_hex(const struct traceparent *tp, char out[SPAN_ID_HEX + 1])
{
	sodium_bin2hex(out, SPAN_ID_HEX + 1, tp->span_id, sizeof(tp->span_id));
}

/* traceparent_new_span - keep the trace id, draw a fresh non-zero span id */
void traceparent_new_span(struct traceparent *tp)
{
	do
		randombytes_buf(tp->span_id, sizeof(tp->span_id));
	while (all_zero(tp->span_id, sizeof(tp->span_id)));
	tp->flags = TRACEPARENT_FLAG_SAMPLED;
}

/* traceparent_new - start a new trace: both ids from one draw (one
 * getrandom per message, not two) */
void traceparent_new(struct traceparent *tp)
{
	unsigned char ids[sizeof(tp->trace_id) + sizeof(tp->span_id)];

	do
		randombytes_buf(ids, sizeof(ids));
	while (all_zero(ids, sizeof(tp->trace_id))
	       || all_zero(ids + sizeof(tp->trace_id), sizeof(tp->span_id)));
	memcpy(tp->trace_id, ids, sizeof(tp->trace_id));
	memcpy(tp->span_id, ids + sizeof(tp->trace_id), sizeof(tp->span_id));
	tp->flags = TRACEPARENT_FLAG_SAMPLED;
}

/* trace_sign - base64url(BLAKE2b-128 keyed, over the traceparent value,
 * NUL, and the Message-ID without its white space) */
void trace_sign(const struct trace_key *key, const char *tpvalue, const char *msgid,
		size_t msgid_len, char out[TRACE_SIG_LEN + 1])
{
	crypto_generichash_state h;
	unsigned char mac[16];
	size_t i = 0;

	crypto_generichash_init(&h, key->bytes, sizeof(key->bytes), sizeof(mac));
	crypto_generichash_update(&h, (const unsigned char *)tpvalue, strlen(tpvalue) + 1);
	while (i < msgid_len) {
		size_t run = 0;

		while (i + run < msgid_len && !is_wsp(msgid[i + run]))
			run++;
		crypto_generichash_update(&h, (const unsigned char *)msgid + i, run);
		for (i += run; i < msgid_len && is_wsp(msgid[i]); i++)
			;
	}
	crypto_generichash_final(&h, mac, sizeof(mac));
	sodium_bin2base64(out, TRACE_SIG_LEN + 1, mac, sizeof(mac),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(&h, sizeof(h));
}

/* tracestate_format - the Tracestate value that carries a signature */
void tracestate_format(const char *sig, char out[TRACESTATE_TERN_LEN + 1])
{
	snprintf(out, TRACESTATE_TERN_LEN + 1, "%s%s", TRACESTATE_TERN, sig);
}

/* trace_verify - does sig sign tpvalue and msgid under key (constant time) */
int trace_verify(const struct trace_key *key, const char *tpvalue, const char *msgid,
		 size_t msgid_len, const char *sig)
{
	char want[TRACE_SIG_LEN + 1];
	int ok;

	if (strlen(sig) != TRACE_SIG_LEN)
		return 0;
	trace_sign(key, tpvalue, msgid, msgid_len, want);
	ok = sodium_memcmp(want, sig, TRACE_SIG_LEN) == 0;
	sodium_memzero(want, sizeof(want));
	return ok;
}

/* is_b64url - is c in the base64url alphabet */
static int is_b64url(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		|| c == '-' || c == '_';
}

/*
 * tracestate_find_sig - the signature in the single "tern=2." member of a
 * tracestate list (several header fields joined with ','). Returns 1 and
 * fills out when there is exactly one well-formed member, 0 when there is
 * none or its tern= member is of another version (the unversioned one of
 * old: unsigned), -1 when the list is malformed or names tern twice.
 */
int tracestate_find_sig(const char *state, size_t len, char out[TRACE_SIG_LEN + 1])
{
	size_t i = 0, members = 0;
	int found = 0, tern = 0;

	while (i < len) {
		size_t start, end;

		while (i < len && (state[i] == ' ' || state[i] == '\t' || state[i] == ','))
			i++;
		if (i >= len)
			break;
		start = i;
		while (i < len && state[i] != ',')
			i++;
		end = i;
		while (end > start && (state[end - 1] == ' ' || state[end - 1] == '\t'))
			end--;
		if (++members > TRACESTATE_MAX_MEMBERS)
			return -1;
		for (size_t j = start; j < end; j++)
			if ((unsigned char)state[j] < 0x20 || (unsigned char)state[j] > 0x7e)
				return -1;
		if (end - start >= 5 && memcmp(state + start, "tern=", 5) == 0) {
			const size_t plen = sizeof(TRACESTATE_TERN) - 1;

			if (tern++)
				return -1;
			if (end - start < plen || memcmp(state + start, TRACESTATE_TERN, plen) != 0)
				continue;	/* another version: no signature of ours */
			if (end - start - plen != TRACE_SIG_LEN)
				return -1;
			for (size_t j = 0; j < TRACE_SIG_LEN; j++)
				if (!is_b64url(state[start + plen + j]))
					return -1;
			memcpy(out, state + start + plen, TRACE_SIG_LEN);
			out[TRACE_SIG_LEN] = '\0';
			found = 1;
		}
	}
	return found;
}

/* trace_key_load - read a key file (64 hex digits); refuse one others can read */
struct trace_key *trace_key_load(const char *path, char *err, size_t errlen)
{
	struct trace_key *key;
	char hex[2 * TRACE_KEY_BYTES + 2];
	struct stat st;
	ssize_t n;
	size_t bin_len;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "%s: cannot open key: %s%s", path, strerror(errno),
			 errno == ENOENT ? " (create one with tern-milter -K FILE)" : "");
		return NULL;
	}
	if (fstat(fd, &st) < 0 || (st.st_mode & S_IRWXO)) {
		snprintf(err, errlen, "%s: key is accessible by others (mode %04o); "
			 "chmod 600 it", path, (unsigned)(st.st_mode & 07777));
		close(fd);
		return NULL;
	}
	n = read(fd, hex, sizeof(hex));
	close(fd);
	while (n > 0 && (hex[n - 1] == '\n' || hex[n - 1] == '\r' || hex[n - 1] == ' '))
		n--;
	key = sodium_malloc(sizeof(*key));
	if (key == NULL) {
		snprintf(err, errlen, "%s: cannot allocate secure memory", path);
		sodium_memzero(hex, sizeof(hex));
		return NULL;
	}
	if (n != 2 * TRACE_KEY_BYTES
	    || sodium_hex2bin(key->bytes, sizeof(key->bytes), hex, (size_t)n, NULL, &bin_len, NULL) != 0
	    || bin_len != TRACE_KEY_BYTES) {
		snprintf(err, errlen, "%s: key must be exactly %d hex characters",
			 path, 2 * TRACE_KEY_BYTES);
		sodium_memzero(hex, sizeof(hex));
		sodium_free(key);
		return NULL;
	}
	sodium_memzero(hex, sizeof(hex));
	sodium_mprotect_readonly(key);
	return key;
}

/* trace_key_create - write a new random key to path, mode 0600, never overwriting */
int trace_key_create(const char *path, char *err, size_t errlen)
{
	unsigned char bytes[TRACE_KEY_BYTES];
	char hex[2 * TRACE_KEY_BYTES + 2];
	int fd, ok;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		snprintf(err, errlen, "%s: cannot create key: %s", path, strerror(errno));
		return -1;
	}
	randombytes_buf(bytes, sizeof(bytes));
	sodium_bin2hex(hex, sizeof(hex), bytes, sizeof(bytes));
	hex[2 * TRACE_KEY_BYTES] = '\n';	/* after sodium_bin2hex's NUL: sized for it */
	hex[2 * TRACE_KEY_BYTES + 1] = '\0';
	ok = write(fd, hex, strlen(hex)) == (ssize_t)strlen(hex) && fsync(fd) == 0;
	if (close(fd) != 0)
		ok = 0;
	sodium_memzero(bytes, sizeof(bytes));
	sodium_memzero(hex, sizeof(hex));
	if (!ok) {
		snprintf(err, errlen, "%s: cannot write key: %s", path, strerror(errno));
		unlink(path);
		return -1;
	}
	return 0;
}

/* trace_key_free - wipe and release a key, clearing the pointer */
void trace_key_free(struct trace_key **key)
{
	if (*key) {
		sodium_free(*key);	/* wipes */
		*key = NULL;
	}
}

/* key_dup - a copy of a key, in its own secure memory; NULL for NULL or
 * when none can be allocated */
static struct trace_key *key_dup(const struct trace_key *k)
{
	struct trace_key *c;

	if (k == NULL || (c = sodium_malloc(sizeof(*c))) == NULL)
		return NULL;
	memcpy(c->bytes, k->bytes, sizeof(c->bytes));
	sodium_mprotect_readonly(c);
	return c;
}

/*
 * trace_keys_load - read path into keys->cur; keys->prev is a copy of the
 * key was->cur held when the file changed since (or of was->prev when it
 * did not), so that one rotation keeps the key before it; was may be NULL
 * (a start). 1 when the key changed from was->cur, 0 when it did not or
 * was holds none, -1 with err set and keys left empty.
 */
int trace_keys_load(struct trace_keys *keys, const struct trace_keys *was, const char *path,
		    char *err, size_t errlen)
{
	const struct trace_key *prev = NULL;
	int changed = 0;

	keys->cur = keys->prev = NULL;
	if ((keys->cur = trace_key_load(path, err, errlen)) == NULL)
		return -1;
	if (was && was->cur) {
		changed = sodium_memcmp(was->cur->bytes, keys->cur->bytes, TRACE_KEY_BYTES) != 0;
		prev = changed ? was->cur : was->prev;
	}
	if (prev && (keys->prev = key_dup(prev)) == NULL) {
		snprintf(err, errlen, "%s: cannot allocate secure memory", path);
		trace_key_free(&keys->cur);
		return -1;
	}
	return changed;
}

/* trace_keys_verify - does sig sign tpvalue and msgid under either key */
int trace_keys_verify(const struct trace_keys *keys, const char *tpvalue, const char *msgid,
		      size_t msgid_len, const char *sig)
{
	return (keys->cur && trace_verify(keys->cur, tpvalue, msgid, msgid_len, sig))
		|| (keys->prev && trace_verify(keys->prev, tpvalue, msgid, msgid_len, sig));
}

/* trace_keys_free - wipe and release both keys */
void trace_keys_free(struct trace_keys *keys)
{
	trace_key_free(&keys->cur);
	trace_key_free(&keys->prev);
}
