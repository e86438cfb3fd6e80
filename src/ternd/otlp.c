/*
 * otlp - ternd's span file (otlp_spans_file): one OTLP/JSON line per
 * delivery attempt, appended by a thread of its own. Delivery threads
 * only format the line and put it in a bounded ring; when the ring is
 * full the line is dropped and counted, never waited for. The file is
 * opened once, before privileges are dropped; a change takes a restart.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "privs.h"
#include "otlp.h"
#include "stats.h"
#include "ternd.h"
#include "xalloc.h"

#define OTLP_RING 4096

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work;
	char *ring[OTLP_RING];
	size_t head, count;
	unsigned long long dropped;
	int fd, running, stopping;
	pthread_t thread;
} sp = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .fd = -1};

/* otlp_open - open otlp_spans_file for appending (as root); empty: off */
void otlp_open(const struct conf *conf)
{
	const char *path = conf->ternd.otlp_spans_file;

	char err[600];

	if (path[0] == '\0')
		return;
	/* as root: a regular file with one name, never a link or a FIFO */
	if ((sp.fd = privs_open_file(path, O_WRONLY | O_APPEND | O_CREAT, 0640, err, sizeof(err))) < 0)
		log_fatal("otlp_spans_file %s", err);
}

/* otlp_enabled - is there a span file */
int otlp_enabled(void)
{
	return sp.fd >= 0;
}

/* otlp_add - queue one line (taken over); dropped and counted when full */
void otlp_add(char *line)
{
	pthread_mutex_lock(&sp.lock);
	if (!sp.running || sp.stopping || sp.count == OTLP_RING) {
		sp.dropped += sp.running && !sp.stopping;
		metric_add(stats.spans_dropped, sp.running && !sp.stopping);
		pthread_mutex_unlock(&sp.lock);
		free(line);
		return;
	}
	sp.ring[(sp.head + sp.count++) % OTLP_RING] = line;
	pthread_cond_signal(&sp.work);
	pthread_mutex_unlock(&sp.lock);
}

/* writer - append queued lines, one write each (appends stay whole) */
static void *writer(void *arg)
{
	for (;;) {
		unsigned long long dropped;
		char *line;

		pthread_mutex_lock(&sp.lock);
		while (sp.count == 0 && !sp.stopping)
			pthread_cond_wait(&sp.work, &sp.lock);
		if (sp.count == 0) {
			pthread_mutex_unlock(&sp.lock);
			break;	/* stopping, and drained */
		}
		line = sp.ring[sp.head];
		sp.head = (sp.head + 1) % OTLP_RING;
		sp.count--;
		dropped = sp.dropped;
		sp.dropped = 0;
		pthread_mutex_unlock(&sp.lock);
		if (dropped)
			log_warning("otlp_spans_file: %llu span line%s dropped: the writer could not keep up",
				    dropped, dropped == 1 ? "" : "s");
		if (write(sp.fd, line, strlen(line)) < 0) {
			log_warning("otlp_spans_file: write: %s", strerror(errno));
			metric_add(stats.spans_dropped, 1);
		}
		free(line);
	}
	return arg;
}

/* otlp_start - start the writer, if there is a file */
void otlp_start(void)
{
	if (sp.fd < 0)
		return;
	if (pthread_create(&sp.thread, NULL, writer, NULL) != 0)
		log_fatal("cannot start the span writer thread");
	sp.running = 1;
}

/* otlp_stop - write what is queued and stop */
void otlp_stop(void)
{
	if (!sp.running)
		return;
	pthread_mutex_lock(&sp.lock);
	sp.stopping = 1;
	pthread_cond_signal(&sp.work);
	pthread_mutex_unlock(&sp.lock);
	pthread_join(sp.thread, NULL);
	sp.running = 0;
}
