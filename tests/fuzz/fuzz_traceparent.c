/* fuzz_traceparent - libFuzzer target: traceparent and tracestate parsing */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "traceparent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct traceparent tp;
	char out[TRACEPARENT_LEN + 1], sig[TRACE_SIG_LEN + 1];

	if (traceparent_parse((const char *)data, size, &tp) == 0) {
		/* Whatever parses must format back to exactly the input. */
		traceparent_format(&tp, out);
		if (memcmp(out, data, size) != 0)
			__builtin_trap();
	}
	if (tracestate_find_sig((const char *)data, size, sig) == 1 && strlen(sig) != TRACE_SIG_LEN)
		__builtin_trap();
	return 0;
}
