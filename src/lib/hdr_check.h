/*
 * hdr_check - the milter's inspection of a message header, as a pure
 * state machine: _new, _push one field at a time, _result per check, _free.
 *
 * It never stores more than a bounded amount of what it is pushed (the
 * trace context fields and the Message-ID, capped), so a 10,000-field or
 * 100 KB header costs nothing but counters. It knows nothing of libmilter or actions: it says
 * which checks failed and why, the caller decides what that means.
 */
#ifndef TERN_HDR_CHECK_H
#define TERN_HDR_CHECK_H

#include <stddef.h>

enum check_id {
	CHECK_HEADER_LIMITS,	/* in order of precedence when several fail */
	CHECK_HEADER_BYTES,
	CHECK_LOOP,
	CHECK_FROM,
	CHECK_DATE,
	CHECK_RECIPIENTS,	/* counted by the milter, not from the header */
	CHECK_COUNT
};

#define HDR_TRACEPARENT_MAX 128		/* longer values cannot be valid */
#define HDR_TRACESTATE_MAX 1024
#define HDR_MSGID_MAX 998		/* a Message-ID kept for the trace signature */

struct hdr_limits {
	unsigned long long max_header_size;
	long long max_headers;
	long long max_received;
};

struct hdr_check;

struct hdr_trace_fields {
	int ntraceparent;		/* how many Traceparent: fields */
	int ntracestate;		/* how many Tracestate: fields */
	const char *traceparent;	/* the first one's value, trimmed, or NULL */
	size_t traceparent_len;
	const char *tracestate;		/* all values joined with ',', or NULL */
	size_t tracestate_len;
	int overflow;			/* a value was too long to keep */
	int ninspect;			/* how many Tern-Inspect: fields (ours to own) */
	int nmessage_id;		/* how many Message-ID: fields */
	const char *message_id;		/* the first one's value, trimmed; NULL if
					 * none or longer than HDR_MSGID_MAX */
	size_t message_id_len;
};

const char *check_name(enum check_id id);
struct hdr_check *hdr_check_new(const struct hdr_limits *limits);
void hdr_check_push(struct hdr_check *hc, const char *name, size_t nlen,
		    const char *value, size_t vlen);
int hdr_check_failed(const struct hdr_check *hc, enum check_id id, char *why, size_t whylen);
void hdr_check_trace(const struct hdr_check *hc, struct hdr_trace_fields *out);
void hdr_check_free(struct hdr_check **hc);

#endif
