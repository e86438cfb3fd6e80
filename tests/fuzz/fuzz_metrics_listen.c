/* fuzz_metrics_listen - libFuzzer target: the metrics_listen value parser */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *spec = malloc(size + 1), host[64], again[96];
	int port = 0, port2 = 0;

	if (spec == NULL)
		return 0;
	memcpy(spec, data, size);
	spec[size] = '\0';
	if (metrics_listen_parse(spec, host, sizeof(host), &port) == 0) {
		/* Whatever parses has a port in range and parses again the same. */
		if (port < 1 || port > 65535 || strlen(host) == 0)
			__builtin_trap();
		snprintf(again, sizeof(again), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
		if (metrics_listen_parse(again, host, sizeof(host), &port2) != 0 || port2 != port)
			__builtin_trap();
	}
	free(spec);
	return 0;
}
