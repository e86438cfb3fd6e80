/*
 * metrics_http - the Prometheus endpoint: GET /metrics on metrics_listen,
 * served by libmicrohttpd from its own thread.
 *
 * Bounded on purpose: one thread, at most METRICS_HTTP_CONNECTIONS
 * connections, each closed after METRICS_HTTP_TIMEOUT idle seconds; the
 * socket is bound to the configured address only. It answers 404 for any
 * other path and 405 for any method but GET and HEAD. It must never touch
 * what it reports on: it only reads the registry (metrics.c).
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "metrics.h"
#include "xalloc.h"

#define METRICS_HTTP_CONNECTIONS 8
#define METRICS_HTTP_TIMEOUT 10		/* seconds */

struct metrics_server {
	struct MHD_Daemon *daemon;
};

/* reply - queue a response; text is static unless must_free */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, char *text, size_t len,
			     int must_free, const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, text, must_free
								 ? MHD_RESPMEM_MUST_FREE
								 : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc;

	if (r == NULL) {
		if (must_free)
			free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	rc = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* handle - one request */
static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_len, void **state)
{
	static char not_found[] = "404 not found: the metrics are on /metrics\n";
	static char not_allowed[] = "405 method not allowed: use GET\n";
	size_t len;
	char *text;

	(void)cls, (void)version, (void)upload;
	*upload_len = 0;	/* a request body is ignored */
	*state = NULL;
	if (strcmp(url, "/metrics") != 0)
		return reply(conn, MHD_HTTP_NOT_FOUND, not_found, sizeof(not_found) - 1, 0,
			     "text/plain; charset=utf-8");
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed, sizeof(not_allowed) - 1,
			     0, "text/plain; charset=utf-8");
	text = metrics_render(&len);
	return reply(conn, MHD_HTTP_OK, text, len, 1, "text/plain; version=0.0.4; charset=utf-8");
}

/* metrics_serve - start the endpoint on spec, or NULL with err */
struct metrics_server *metrics_serve(const char *spec, char *err, size_t errlen)
{
	struct sockaddr_in6 sin6 = {0};
	struct sockaddr_in sin = {0};
	struct sockaddr *sa;
	struct metrics_server *srv;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
	char host[128];
	int port;

	if (metrics_listen_parse(spec, host, sizeof(host), &port) < 0) {
		snprintf(err, errlen, "metrics_listen = %s: expected HOST:PORT or [IPV6]:PORT", spec);
		return NULL;
	}
	if (inet_pton(AF_INET, host, &sin.sin_addr) == 1) {
		sin.sin_family = AF_INET;
		sin.sin_port = htons((uint16_t)port);
		sa = (struct sockaddr *)&sin;
	} else if (inet_pton(AF_INET6, host, &sin6.sin6_addr) == 1) {
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons((uint16_t)port);
		sa = (struct sockaddr *)&sin6;
		flags |= MHD_USE_IPv6;
	} else {
		snprintf(err, errlen, "metrics_listen = %s: %s is not an IP address", spec, host);
		return NULL;
	}
	srv = xcalloc(1, sizeof(*srv));
	srv->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, NULL,
				       MHD_OPTION_SOCK_ADDR, sa,
				       MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_HTTP_CONNECTIONS,
				       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_HTTP_TIMEOUT,
				       MHD_OPTION_END);
	if (srv->daemon == NULL) {
		snprintf(err, errlen, "metrics_listen = %s: cannot listen (in use? not a local address?)",
			 spec);
		free(srv);
		return NULL;
	}
	return srv;
}

/* metrics_server_stop - stop the endpoint */
void metrics_server_stop(struct metrics_server **srv)
{
	if (*srv == NULL)
		return;
	MHD_stop_daemon((*srv)->daemon);
	free(*srv);
	*srv = NULL;
}
