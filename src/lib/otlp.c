/*
 * otlp - a delivery attempt as one OTLP/JSON line.
 *
 * Each recipient's outcome is a client span (kind 3) under the message's
 * trace, its parent the span ternd read from Traceparent; times are Unix
 * nanoseconds as decimal strings, ids lower-case hex, as the OTLP/JSON
 * mapping wants. Never emits a partial line: 0 when it does not fit.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "otlp.h"

struct out {
	char *p;
	size_t len, cap;
	int full;
};

/* emit - append text */
static void emit(struct out *o, const char *s, size_t n)
{
	if (o->full || n >= o->cap - o->len) {
		o->full = 1;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

/* lit - append a literal */
static void lit(struct out *o, const char *s)
{
	emit(o, s, strlen(s));
}

/* utf8_len - the length of a well-formed UTF-8 sequence at s, or 0 */
static size_t utf8_len(const unsigned char *s)
{
	size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;

	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* str - append a JSON string: quotes, backslashes and controls escaped,
 * octets that are not UTF-8 as '?' (JSON is UTF-8) */
static void str(struct out *o, const char *s)
{
	lit(o, "\"");
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		size_t n;

		if (c >= 0x80) {
			if ((n = utf8_len((const unsigned char *)s)) == 0) {
				lit(o, "?");
			} else {
				emit(o, s, n);
				s += n - 1;
			}
		} else if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c, esc[2] = '\0';
			lit(o, esc);
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			lit(o, esc);
		} else {
			emit(o, (const char *)&c, 1);
		}
	}
	lit(o, "\"");
}

/* hex - append octets as a JSON string of hex digits */
static void hex(struct out *o, const unsigned char *p, size_t n)
{
	char h[2 * 16 + 1];

	sodium_bin2hex(h, sizeof(h), p, n);	/* n <= 16: trace and span ids */
	lit(o, "\"");
	lit(o, h);
	lit(o, "\"");
}

/* attr - append one string attribute */
static void attr(struct out *o, const char *key, const char *value, int first)
{
	lit(o, first ? "{\"key\":" : ",{\"key\":");
	str(o, key);
	lit(o, ",\"value\":{\"stringValue\":");
	str(o, value);
	lit(o, "}}");
}

/* otlp_line - the attempt as one line (with its newline); its length, or 0 */
size_t otlp_line(const struct otlp_attempt *a, char *buf, size_t cap)
{
	struct out o = {buf, 0, cap, cap == 0};
	char num[256];

	lit(&o, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
	attr(&o, "service.name", a->service, 1);
	attr(&o, "host.name", a->host, 0);
	lit(&o, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"tern\"},\"spans\":[");
	for (size_t i = 0; i < a->nspans; i++) {
		const struct otlp_span *s = &a->spans[i];

		lit(&o, i ? ",{\"traceId\":" : "{\"traceId\":");
		hex(&o, a->trace_id, sizeof(a->trace_id));
		lit(&o, ",\"spanId\":");
		hex(&o, s->span_id, sizeof(s->span_id));
		lit(&o, ",\"parentSpanId\":");
		hex(&o, a->parent_id, sizeof(a->parent_id));
		snprintf(num, sizeof(num), ",\"name\":\"deliver\",\"kind\":3,\"startTimeUnixNano\":\"%" PRIu64
			 "000\",\"endTimeUnixNano\":\"%" PRIu64 "000\",\"attributes\":[", a->start_us,
			 a->end_us);
		lit(&o, num);
		attr(&o, "tern.queue_id", a->qid, 1);
		attr(&o, "tern.peer", a->peer, 0);
		attr(&o, "tern.relay", a->relay, 0);
		attr(&o, "tern.tls", a->tls, 0);
		snprintf(num, sizeof(num), ",{\"key\":\"tern.conn_use\",\"value\":{\"intValue\":\"%u\"}}",
			 a->conn_use);
		lit(&o, num);
		attr(&o, "tern.recipient", s->rcpt, 0);
		attr(&o, "tern.status", s->status, 0);
		attr(&o, "tern.dsn", s->dsn, 0);
		attr(&o, "tern.reply", s->reply, 0);
		attr(&o, "tern.peer_queue_id", s->peer_qid, 0);
		if (s->ok) {
			lit(&o, "],\"status\":{\"code\":1}}");
		} else {
			lit(&o, "],\"status\":{\"code\":2,\"message\":");
			str(&o, s->reply);
			lit(&o, "}}");
		}
	}
	lit(&o, "]}]}]}\n");
	return o.full ? 0 : o.len;
}
