/* fuzz_hdr_check - libFuzzer target: header inspection over "Name: value\n" lines */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hdr_check.h"
#include "traceparent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct hdr_limits limits = {4096, 50, 5};
	struct hdr_check *hc = hdr_check_new(&limits);
	const char *p = (const char *)data, *end = p + size;
	struct hdr_trace_fields t;
	struct traceparent tp;
	char why[256], sig[TRACE_SIG_LEN + 1];

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *colon = memchr(p, ':', (size_t)(eol - p));

		if (colon)
			hdr_check_push(hc, p, (size_t)(colon - p), colon + 1, (size_t)(eol - colon - 1));
		p = nl ? nl + 1 : end;
	}
	for (enum check_id id = 0; id < CHECK_COUNT; id++)
		if (hdr_check_failed(hc, id, why, sizeof(why)) && strlen(why) >= sizeof(why))
			__builtin_trap();
	hdr_check_trace(hc, &t);
	if (t.traceparent)
		traceparent_parse(t.traceparent, t.traceparent_len, &tp);
	if (t.tracestate)
		tracestate_find_sig(t.tracestate, t.tracestate_len, sig);
	hdr_check_free(&hc);
	return 0;
}
