/*
 * hdr_check - inspection of a message header, pure and bounded.
 *
 * Fed by the milter's header callback (name and value as the MTA sends
 * them) and by the fuzzer. Keeps counters and at most
 * HDR_TRACEPARENT_MAX + HDR_TRACESTATE_MAX bytes of field values.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hdr_check.h"
#include "xalloc.h"

#define BAD_NAME_MAX 64

struct hdr_check {
	struct hdr_limits limits;
	long long nfields;
	unsigned long long size;
	long long nreceived;
	long long nfrom;
	long long ndate;
	int bad_nul, bad_cr;
	char bad_name[BAD_NAME_MAX + 1];	/* first field with bad bytes */
	int ntraceparent, ntracestate, ninspect, overflow;
	size_t traceparent_len, tracestate_len;
	char traceparent[HDR_TRACEPARENT_MAX];
	char tracestate[HDR_TRACESTATE_MAX];
	int nmsgid, msgid_overflow;
	size_t msgid_len;
	char msgid[HDR_MSGID_MAX];	/* the first Message-ID: value, trimmed */
};

/* check_name - the name of a check in tern.conf, logs and Tern-Inspect: */
const char *check_name(enum check_id id)
{
	static const char *const names[CHECK_COUNT] = {
		[CHECK_HEADER_LIMITS] = "header_limits", [CHECK_HEADER_BYTES] = "header_bytes",
		[CHECK_LOOP] = "loop", [CHECK_FROM] = "from", [CHECK_DATE] = "date",
		[CHECK_RECIPIENTS] = "recipients",
	};
	return (unsigned)id < CHECK_COUNT ? names[id] : "unknown";
}

/* hdr_check_new - start inspecting one message header */
struct hdr_check *hdr_check_new(const struct hdr_limits *limits)
{
	struct hdr_check *hc = xcalloc(1, sizeof(*hc));

	hc->limits = *limits;
	return hc;
}

/* name_is - case-insensitive comparison of a counted name with a word */
static int name_is(const char *name, size_t nlen, const char *word)
{
	return nlen == strlen(word) && strncasecmp(name, word, nlen) == 0;
}

/* scan_bytes - note a NUL, or a CR not followed by LF, in buf */
static void scan_bytes(struct hdr_check *hc, const char *name, size_t nlen,
		       const char *buf, size_t len)
{
	int nul = memchr(buf, '\0', len) != NULL, cr = 0;

	for (size_t i = 0; i < len && !cr; i++)
		cr = buf[i] == '\r' && (i + 1 == len || buf[i + 1] != '\n');
	if ((nul || cr) && !hc->bad_nul && !hc->bad_cr) {
		size_t n = nlen < BAD_NAME_MAX ? nlen : BAD_NAME_MAX;

		/* Only printable, '%'-free bytes reach an SMTP reply. */
		for (size_t i = 0; i < n; i++)
			hc->bad_name[i] = name[i] > ' ' && name[i] < 0x7f && name[i] != '%' ? name[i] : '?';
		hc->bad_name[n] = '\0';
		hc->bad_nul = nul;
		hc->bad_cr = !nul && cr;
	}
}

/* trim - strip leading and trailing white space from a counted value */
static const char *trim(const char *v, size_t *len)
{
	while (*len && (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n'))
		v++, (*len)--;
	while (*len && (v[*len - 1] == ' ' || v[*len - 1] == '\t'
			|| v[*len - 1] == '\r' || v[*len - 1] == '\n'))
		(*len)--;
	return v;
}

/* keep_trace_field - remember Traceparent/Tracestate values and the
 * Message-ID their signature covers, bounded */
static void keep_trace_field(struct hdr_check *hc, const char *name, size_t nlen,
			     const char *value, size_t vlen)
{
	if (name_is(name, nlen, "traceparent")) {
		if (hc->ntraceparent++ == 0) {
			value = trim(value, &vlen);
			if (vlen > sizeof(hc->traceparent)) {
				hc->overflow = 1;
				return;
			}
			memcpy(hc->traceparent, value, vlen);
			hc->traceparent_len = vlen;
		}
	} else if (name_is(name, nlen, "tracestate")) {
		size_t sep = hc->ntracestate++ ? 1 : 0;

		value = trim(value, &vlen);
		if (hc->tracestate_len + sep + vlen > sizeof(hc->tracestate)) {
			hc->overflow = 1;
			return;
		}
		if (sep)
			hc->tracestate[hc->tracestate_len++] = ',';
		memcpy(hc->tracestate + hc->tracestate_len, value, vlen);
		hc->tracestate_len += vlen;
	} else if (name_is(name, nlen, "message-id") && hc->nmsgid++ == 0) {
		value = trim(value, &vlen);
		if (vlen > sizeof(hc->msgid)) {
			hc->msgid_overflow = 1;
			return;
		}
		memcpy(hc->msgid, value, vlen);
		hc->msgid_len = vlen;
	}
}

/* hdr_check_push - account for one header field */
void hdr_check_push(struct hdr_check *hc, const char *name, size_t nlen,
		    const char *value, size_t vlen)
{
	hc->nfields++;
	hc->size += nlen + 2 + vlen + 2;	/* "name: value\r\n" */
	if (name_is(name, nlen, "received"))
		hc->nreceived++;
	else if (name_is(name, nlen, "from"))
		hc->nfrom++;
	else if (name_is(name, nlen, "date"))
		hc->ndate++;
	else if (name_is(name, nlen, "tern-inspect"))
		hc->ninspect++;
	scan_bytes(hc, name, nlen, name, nlen);
	scan_bytes(hc, name, nlen, value, vlen);
	keep_trace_field(hc, name, nlen, value, vlen);
}

/* hdr_check_failed - did check id fail; if so, why (for an SMTP reply) */
int hdr_check_failed(const struct hdr_check *hc, enum check_id id, char *why, size_t whylen)
{
	const struct hdr_limits *l = &hc->limits;

	switch (id) {
	case CHECK_HEADER_LIMITS:
		if (hc->size > l->max_header_size) {
			snprintf(why, whylen, "message header is %llu bytes, limit %llu",
				 hc->size, l->max_header_size);
			return 1;
		}
		if (hc->nfields > l->max_headers) {
			snprintf(why, whylen, "message has %lld header fields, limit %lld",
				 hc->nfields, l->max_headers);
			return 1;
		}
		return 0;
	case CHECK_HEADER_BYTES:
		if (hc->bad_nul || hc->bad_cr) {
			snprintf(why, whylen, "header field %s: contains %s", hc->bad_name,
				 hc->bad_nul ? "a NUL byte" : "a bare CR");
			return 1;
		}
		return 0;
	case CHECK_LOOP:
		if (hc->nreceived > l->max_received) {
			snprintf(why, whylen, "message has %lld Received: headers, limit %lld (mail loop?)",
				 hc->nreceived, l->max_received);
			return 1;
		}
		return 0;
	case CHECK_FROM:
		if (hc->nfrom == 0) {
			snprintf(why, whylen, "message has no From: header");
			return 1;
		}
		if (hc->nfrom > 1) {
			snprintf(why, whylen, "message has %lld From: headers, only one is allowed",
				 hc->nfrom);
			return 1;
		}
		return 0;
	case CHECK_DATE:
		if (hc->ndate == 0) {
			snprintf(why, whylen, "message has no Date: header");
			return 1;
		}
		return 0;
	default:
		return 0;
	}
}

/* hdr_check_trace - the trace context fields seen so far */
void hdr_check_trace(const struct hdr_check *hc, struct hdr_trace_fields *out)
{
	out->ntraceparent = hc->ntraceparent;
	out->ntracestate = hc->ntracestate;
	out->traceparent = hc->ntraceparent && !hc->overflow ? hc->traceparent : NULL;
	out->traceparent_len = hc->traceparent_len;
	out->tracestate = hc->ntracestate && !hc->overflow ? hc->tracestate : NULL;
	out->tracestate_len = hc->tracestate_len;
	out->overflow = hc->overflow;
	out->ninspect = hc->ninspect;
	out->nmessage_id = hc->nmsgid;
	out->message_id = hc->nmsgid && !hc->msgid_overflow ? hc->msgid : NULL;
	out->message_id_len = hc->msgid_len;
}

/* hdr_check_free - release the inspection state, clearing the pointer */
void hdr_check_free(struct hdr_check **hc)
{
	free(*hc);
	*hc = NULL;
}
