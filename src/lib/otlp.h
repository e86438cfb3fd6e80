/*
 * otlp - one delivery attempt as a line of OTLP/JSON (an
 * ExportTraceServiceRequest holding one ResourceSpans), the format the
 * OpenTelemetry Collector's otlpjsonfile receiver reads. Pure: no I/O.
 */
#ifndef TERN_OTLP_H
#define TERN_OTLP_H

#include <stddef.h>
#include <stdint.h>

/* one recipient's outcome: one span */
struct otlp_span {
	unsigned char span_id[8];
	const char *rcpt, *status, *dsn, *reply, *peer_qid;
	int ok;				/* sent: status OK, else ERROR */
};

struct otlp_attempt {
	const char *service, *host;	/* the resource */
	const char *qid, *peer, *relay, *tls;
	unsigned conn_use;
	uint64_t start_us, end_us;
	unsigned char trace_id[16];
	unsigned char parent_id[8];	/* the message's span */
	const struct otlp_span *spans;
	size_t nspans;
};

size_t otlp_line(const struct otlp_attempt *a, char *buf, size_t cap);

#endif
