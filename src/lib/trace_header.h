/*
 * trace_header - is a message header's trace context ours: the one rule
 * by which tern-milter continues an incoming trace and ternd makes one
 * the parent of its own. Pure: the header's trace fields (hdr_check_trace)
 * and the keys in, a verdict out; no I/O, no locks.
 *
 * Ours means: exactly one Traceparent field, which parses; Tracestate
 * fields that carry exactly one tern=2. signature; at most one Message-ID
 * field, kept whole (or none, which signs as ""); and the signature
 * verifies, under either key, over that Traceparent value and that
 * Message-ID. Anything else is at most foreign: a Traceparent that parses
 * is returned as a link, never as a parent.
 *
 * What the signature proves: that a holder of the key wrote this
 * Traceparent for a message with this Message-ID. It does not cover the
 * body or any other field, so a message that keeps both fields and
 * changes the rest still verifies.
 */
#ifndef TERN_TRACE_HEADER_H
#define TERN_TRACE_HEADER_H

#include "hdr_check.h"
#include "traceparent.h"

enum trace_origin {
	TRACE_NONE,		/* no Traceparent that parses */
	TRACE_FOREIGN,		/* one parses (the first), not signed by us */
	TRACE_OURS		/* the only one, signed by us for this Message-ID */
};

enum trace_origin trace_header_verify(const struct trace_keys *keys,
				      const struct hdr_trace_fields *in, struct traceparent *tp);

#endif
