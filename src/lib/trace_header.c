/*
 * trace_header - the verdict on a header's trace context, for
 * tern-milter and ternd alike (trace_header.h states the rule).
 */
#include "config.h"

#include <string.h>

#include "trace_header.h"

/* trace_header_verify - NONE, FOREIGN (tp: the first Traceparent) or
 * OURS (tp: the only one, and our signature over it and the Message-ID
 * verifies); keys may hold none */
enum trace_origin trace_header_verify(const struct trace_keys *keys,
				      const struct hdr_trace_fields *in, struct traceparent *tp)
{
	char value[HDR_TRACEPARENT_MAX + 1], sig[TRACE_SIG_LEN + 1];

	if (in->traceparent == NULL || traceparent_parse(in->traceparent, in->traceparent_len, tp) < 0)
		return TRACE_NONE;
	/* The signature binds the one Message-ID: one that is not there
	 * signs as "", one of two, or one too long to keep, as nothing. */
	if (in->ntraceparent != 1 || in->tracestate == NULL || in->nmessage_id > 1
	    || (in->nmessage_id == 1 && in->message_id == NULL)
	    || tracestate_find_sig(in->tracestate, in->tracestate_len, sig) != 1)
		return TRACE_FOREIGN;
	memcpy(value, in->traceparent, in->traceparent_len);	/* parsed: at most the max */
	value[in->traceparent_len] = '\0';
	return trace_keys_verify(keys, value, in->message_id ? in->message_id : "",
				 in->message_id ? in->message_id_len : 0, sig)
		? TRACE_OURS : TRACE_FOREIGN;
}
