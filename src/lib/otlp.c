/*
 * otlp - a delivery attempt as one OTLP/JSON line.
 *
 * Each recipient's outcome is a client span (kind 3) under the message's
 * trace, its parent the span ternd read from Traceparent; times are Unix
 * nanoseconds as decimal strings, ids lower-case hex, as the OTLP/JSON
 * mapping wants. The line is built with jansson, so it is JSON by
 * construction; text from mail or from a peer that is not UTF-8 becomes
 * '?' first (JSON is UTF-8). Never emits a partial line: 0 when it does
 * not fit.
 *
 * The escapes stay what the span file has always held: jansson writes a
 * control character as \t, \n, \r, \b, \f or \u00XX (upper case) and DEL
 * as itself; the writer below turns each into \u00xx (lower case), so a
 * line is the same octets as before the switch to jansson.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "json_text.h"
#include "otlp.h"
#include "xalloc.h"

struct out {
	char *p;
	size_t len, cap;
	int full;
	enum { O_TEXT, O_STRING, O_ESCAPE, O_HEX } state;
	int hex_left;			/* O_HEX: digits of \uXXXX still to come */
};

/* emit - append octets; full (and nothing more) when they do not fit,
 * leaving room for the NUL */
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

/* emit_control - a control character (or DEL) as \u00xx */
static void emit_control(struct out *o, unsigned char c)
{
	char esc[8];

	snprintf(esc, sizeof(esc), "\\u%04x", c);
	emit(o, esc, 6);
}

/* short_escape - the control character of jansson's \b \f \n \r \t, or -1 */
static int short_escape(unsigned char c)
{
	switch (c) {
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	default:
		return -1;
	}
}

/* dump_octets - json_dump_callback's sink: jansson's text, its escapes
 * inside strings rewritten as the header says */
static int dump_octets(const char *buf, size_t n, void *arg)
{
	struct out *o = arg;

	for (size_t i = 0; i < n && !o->full; i++) {
		unsigned char c = (unsigned char)buf[i];
		int ctl;

		switch (o->state) {
		case O_TEXT:
			if (c == '"')
				o->state = O_STRING;
			emit(o, buf + i, 1);
			break;
		case O_STRING:
			if (c == '\\') {
				o->state = O_ESCAPE;	/* written with what follows */
				break;
			}
			if (c == '"')
				o->state = O_TEXT;
			if (c == 0x7f)
				emit_control(o, c);
			else
				emit(o, buf + i, 1);
			break;
		case O_ESCAPE:
			o->state = O_STRING;
			if (c == 'u') {
				emit(o, "\\u", 2);
				o->state = O_HEX;
				o->hex_left = 4;
			} else if ((ctl = short_escape(c)) >= 0) {
				emit_control(o, (unsigned char)ctl);
			} else {
				emit(o, "\\", 1);
				emit(o, buf + i, 1);
			}
			break;
		case O_HEX:
			c = c >= 'A' && c <= 'F' ? (unsigned char)(c - 'A' + 'a') : c;
			emit(o, (const char *)&c, 1);
			if (--o->hex_left == 0)
				o->state = O_STRING;
			break;
		}
	}
	return o->full ? -1 : 0;
}

/* hex - octets as a JSON string of hex digits */
static json_t *hex(const unsigned char *p, size_t n)
{
	char h[2 * 16 + 1];

	sodium_bin2hex(h, sizeof(h), p, n);	/* n <= 16: trace and span ids */
	return json_string(h);
}

/* attr - one string attribute */
static json_t *attr(const char *key, const char *value)
{
	return json_pack("{s:s,s:{s:o}}", "key", key, "value", "stringValue", json_text(value));
}

/* span - one recipient's span */
static json_t *span(const struct otlp_attempt *a, const struct otlp_span *s)
{
	char start[32], end[32], use[16];
	json_t *status;

	snprintf(start, sizeof(start), "%" PRIu64 "000", a->start_us);
	snprintf(end, sizeof(end), "%" PRIu64 "000", a->end_us);
	snprintf(use, sizeof(use), "%u", a->conn_use);
	status = s->ok ? json_pack("{s:i}", "code", 1)
		       : json_pack("{s:i,s:o}", "code", 2, "message", json_text(s->reply));
	return json_pack("{s:o,s:o,s:o,s:s,s:i,s:s,s:s,s:[o,o,o,o,{s:s,s:{s:s}},o,o,o,o,o],s:o}",
			 "traceId", hex(a->trace_id, sizeof(a->trace_id)),
			 "spanId", hex(s->span_id, sizeof(s->span_id)),
			 "parentSpanId", hex(a->parent_id, sizeof(a->parent_id)),
			 "name", "deliver", "kind", 3,
			 "startTimeUnixNano", start, "endTimeUnixNano", end,
			 "attributes",
			 attr("tern.queue_id", a->qid), attr("tern.peer", a->peer),
			 attr("tern.relay", a->relay), attr("tern.tls", a->tls),
			 "key", "tern.conn_use", "value", "intValue", use,
			 attr("tern.recipient", s->rcpt), attr("tern.status", s->status),
			 attr("tern.dsn", s->dsn), attr("tern.reply", s->reply),
			 attr("tern.peer_queue_id", s->peer_qid),
			 "status", status);
}

/* otlp_line - the attempt as one line (with its newline); its length, or 0 */
size_t otlp_line(const struct otlp_attempt *a, char *buf, size_t cap)
{
	struct out o = {buf, 0, cap, cap == 0, O_TEXT, 0};
	json_t *spans = json_array(), *line;

	for (size_t i = 0; i < a->nspans; i++)
		if (json_array_append_new(spans, span(a, &a->spans[i])) < 0)
			o.full = 1;	/* no partial line: none at all */
	line = json_pack("{s:[{s:{s:[o,o]},s:[{s:{s:s},s:o}]}]}",
			 "resourceSpans",
			 "resource", "attributes",
			 attr("service.name", a->service), attr("host.name", a->host),
			 "scopeSpans", "scope", "name", "tern", "spans", spans);
	if (line == NULL || json_dump_callback(line, dump_octets, &o, JSON_COMPACT) < 0)
		o.full = 1;
	json_decref(line);
	emit(&o, "\n", 1);
	return o.full ? 0 : o.len;
}
