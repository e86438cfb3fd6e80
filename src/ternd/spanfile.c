/*
 * spanfile - ternd's span file (otlp_spans_file): one OTLP/JSON line per
 * delivery attempt, appended by a thread of its own. Delivery threads
 * only format the line and put it in a bounded ring; when the ring is
 * full the line is dropped and counted, never waited for. The file is
 * opened once, before privileges are dropped; a change takes a restart.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "privs.h"
#include "ring.h"
#include "spanfile.h"
#include "stats.h"

#define SPANFILE_RING 4096

static struct {
	int fd;
	struct ring *ring;
} sp = {.fd = -1};

/* spanfile_open - open otlp_spans_file for appending (as root); empty: off */
void spanfile_open(const struct conf *conf)
{
	const char *path = conf->ternd.otlp_spans_file;

	char err[600];

	if (path[0] == '\0')
		return;
	/* as root: a regular file with one name, never a link or a FIFO */
	if ((sp.fd = privs_open_file(path, O_WRONLY | O_APPEND | O_CREAT, 0640, err, sizeof(err))) < 0)
		log_fatal("otlp_spans_file %s", err);
}

/* spanfile_enabled - is there a span file */
int spanfile_enabled(void)
{
	return sp.fd >= 0;
}

/* spanfile_add - queue one line (taken over); dropped and counted when full */
void spanfile_add(char *line)
{
	int rc = ring_put(sp.ring, &line);

	if (rc < 0) {
		free(line);
		if (rc == RING_FULL)
			metric_add(stats.spans_dropped, 1);
	}
}

/* write_lines - append queued lines, one write each (appends stay whole) */
static void write_lines(void *items, size_t n, void *arg)
{
	char **lines = items;

	(void)arg;
	for (size_t i = 0; i < n; i++) {
		if (write(sp.fd, lines[i], strlen(lines[i])) < 0) {
			log_warning("otlp_spans_file: write: %s", strerror(errno));
			metric_add(stats.spans_dropped, 1);
		}
		free(lines[i]);
	}
}

/* spanfile_start - start the writer, if there is a file */
void spanfile_start(void)
{
	if (sp.fd < 0)
		return;
	sp.ring = ring_start("otlp_spans_file", "span line", sizeof(char *), SPANFILE_RING,
			     write_lines, NULL);
	if (sp.ring == NULL)
		log_fatal("cannot start the span writer thread");
}

/* spanfile_stop - write what is queued and stop */
void spanfile_stop(void)
{
	ring_free(&sp.ring);
}
