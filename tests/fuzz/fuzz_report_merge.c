/*
 * fuzz_report_merge - libFuzzer target: tern-report --merge's JSON reader.
 *
 * Input: a JSON report from a hostile node. Checks that the window reader
 * and the merge agree (a report whose window cannot be read is refused),
 * that a refused report changes nothing, and that a merged one leaves
 * every table within its cap and the outputs writable.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* check - abort on a broken invariant */
static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	uint64_t from = 1732838400ULL * 1000000, to = from + 86400ULL * 1000000;
	struct report r;
	struct rpt_counts before;
	const char *why;
	char err[256];
	FILE *sink;
	int rc;

	check(report_init(&r, from, to, &why) == 0);
	before = r.total;
	rc = report_merge_json(&r, buf, size, err, sizeof(err));
	if (rc < 0) {
		check(memcmp(&before, &r.total, sizeof(before)) == 0);
		check(r.npeers == 0 && r.ndomains == 0 && r.nreasons == 0 && r.nodes == 1);
		check(err[0] != '\0');
	} else {
		check(r.npeers <= RPT_PEERS_MAX && r.ndomains <= RPT_DOMAINS_MAX
		      && r.nreasons <= RPT_REASONS_MAX && r.nodes >= 2);
		report_finish(&r);
		if ((sink = fopen("/dev/null", "w")) != NULL) {
			report_json(&r, sink);
			report_text(&r, sink, 10);
			report_html(&r, sink, 10);
			report_prom(&r, sink);
			fclose(sink);
		}
	}
	{
		uint64_t f, t;

		if (report_merge_window(buf, size, &f, &t) == 0)
			check(f < t);
	}
	report_free(&r);
	return 0;
}
