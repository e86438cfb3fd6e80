/* fuzz_conf - libFuzzer target: tern.conf parsing */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), err[512];
	struct conf *conf;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	conf = conf_load_string(text, "fuzz.conf", err, sizeof(err));
	if (conf == NULL && strncmp(err, "fuzz.conf", 9) != 0)
		__builtin_trap();	/* every error names the file */
	conf_free(&conf);
	free(text);
	return 0;
}
