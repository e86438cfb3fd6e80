/*
 * traceparent - the W3C trace context header (version 00) and its tern
 * signature in Tracestate.
 *
 * Parsing is strict and pure: exactly "00-<32 hex>-<16 hex>-<2 hex>", lower
 * case, neither id all zeros. The signature is base64url (no padding) of the
 * 16-byte keyed BLAKE2b of the exact Traceparent value, a NUL octet and the
 * message's Message-ID value with its white space (SP, HT, CR, LF) removed
 * ("" when the message has none), so that it binds the trace to the
 * message. It is carried, versioned, as the "tern=2.<signature>" member of
 * Tracestate; any other tern= value (the unversioned one of tern before
 * 2, which signed the Traceparent alone) reads as no signature. Keys live
 * in sodium_malloc()ed memory.
 *
 * A node verifies with trace_keys: the key it signs with and the one the
 * last change of key replaced, so that a message signed before a key
 * rotation, still on its way, verifies after it.
 */
#ifndef TERN_TRACEPARENT_H
#define TERN_TRACEPARENT_H

#include <stddef.h>

#define TRACEPARENT_LEN 55		/* 2+1+32+1+16+1+2 */
#define TRACE_ID_HEX 32
#define SPAN_ID_HEX 16
#define TRACE_KEY_BYTES 32
#define TRACE_SIG_LEN 22		/* base64url of 16 bytes, unpadded */
#define TRACESTATE_TERN "tern=2."	/* member name and signature version */
#define TRACESTATE_TERN_LEN (7 + TRACE_SIG_LEN)

struct traceparent {
	unsigned char trace_id[16];
	unsigned char span_id[8];
	unsigned char flags;
};

struct trace_key {
	unsigned char bytes[TRACE_KEY_BYTES];
};

int traceparent_parse(const char *s, size_t len, struct traceparent *tp);
void traceparent_format(const struct traceparent *tp, char out[TRACEPARENT_LEN + 1]);
void traceparent_new(struct traceparent *tp);
void traceparent_new_span(struct traceparent *tp);
void trace_id_hex(const struct traceparent *tp, char out[TRACE_ID_HEX + 1]);
void span_id_hex(const struct traceparent *tp, char out[SPAN_ID_HEX + 1]);

void trace_sign(const struct trace_key *key, const char *tpvalue, const char *msgid,
		size_t msgid_len, char out[TRACE_SIG_LEN + 1]);
void tracestate_format(const char *sig, char out[TRACESTATE_TERN_LEN + 1]);
int tracestate_find_sig(const char *state, size_t len, char out[TRACE_SIG_LEN + 1]);
int trace_verify(const struct trace_key *key, const char *tpvalue, const char *msgid,
		 size_t msgid_len, const char *sig);

struct trace_key *trace_key_load(const char *path, char *err, size_t errlen);
int trace_key_create(const char *path, char *err, size_t errlen);
void trace_key_free(struct trace_key **key);

/* The keys a node verifies with: the one in its key file (it signs with
 * it) and the one that file held before it changed (NULL: none). */
struct trace_keys {
	struct trace_key *cur, *prev;
};

int trace_keys_load(struct trace_keys *keys, const struct trace_keys *was, const char *path,
		    char *err, size_t errlen);
int trace_keys_verify(const struct trace_keys *keys, const char *tpvalue, const char *msgid,
		      size_t msgid_len, const char *sig);
void trace_keys_free(struct trace_keys *keys);

#endif
