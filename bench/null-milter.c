/*
 * null-milter - the floor for bench/milter-throughput.sh: a libmilter
 * milter that adds one header field to every message and does nothing
 * else.
 *
 *   null-milter -p inet:PORT@127.0.0.1 [-H NAME] [-T SECONDS]
 *
 * It negotiates away every protocol step the MTA lets it skip but two:
 * the end of message (header edits are only allowed there) and DATA,
 * answered at once as tern-milter does, asks for the one action it uses
 * (SMFIF_ADDHDRS), no macro lists of its own (Postfix 3.7 ignores an
 * empty one: strace shows the stage's defaults sent), and sets TCP_NODELAY on its listening
 * socket as tern-milter does. Both are what makes it a floor of CPU, not
 * of waiting: Postfix sends the DATA-stage macros even when DATA is
 * skipped, and alone they get no reply, so the milter's delayed ACK holds
 * Postfix's next packet behind Nagle (measured: 20.6 msgs/s with one
 * session when DATA was skipped, 139 when answered); and without
 * TCP_NODELAY the header edit and the reply after it meet the MTA's
 * delayed ACK the same way. -H names the field (default X-Null-Milter, value "1"), -T is
 * libmilter's timeout. It is a benchmark tool: it trusts its command line,
 * runs in the foreground and stops on SIGTERM/SIGINT (libmilter's own
 * signal handling). It must never do per-message work beyond that header.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmilter/mfapi.h>

static char *header_name = "X-Null-Milter";

/* null_negotiate - DATA and the end of message only, one action */
static sfsistat null_negotiate(SMFICTX *ctx, unsigned long f0, unsigned long f1,
			       unsigned long f2, unsigned long f3, unsigned long *pf0,
			       unsigned long *pf1, unsigned long *pf2, unsigned long *pf3)
{
	unsigned long skip = SMFIP_NOCONNECT | SMFIP_NOHELO | SMFIP_NOMAIL | SMFIP_NORCPT
		| SMFIP_NOBODY | SMFIP_NOHDRS | SMFIP_NOEOH | SMFIP_NOUNKNOWN;

	(void)ctx;
	(void)f2;
	(void)f3;
	if (!(f0 & SMFIF_ADDHDRS))
		return SMFIS_REJECT;
	*pf0 = SMFIF_ADDHDRS;
	*pf1 = f1 & skip;
	*pf2 = 0;
	*pf3 = 0;
	return SMFIS_CONTINUE;
}

/* null_data - DATA: answered at once, so the MTA's next packet is not held */
static sfsistat null_data(SMFICTX *ctx)
{
	(void)ctx;
	return SMFIS_CONTINUE;
}

/* null_eom - add the one header field and accept */
static sfsistat null_eom(SMFICTX *ctx)
{
	if (smfi_addheader(ctx, header_name, "1") != MI_SUCCESS)
		return SMFIS_TEMPFAIL;
	return SMFIS_CONTINUE;
}

static struct smfiDesc null_desc = {
	.xxfi_name = "null-milter",
	.xxfi_version = SMFI_VERSION,
	.xxfi_flags = SMFIF_ADDHDRS,
	.xxfi_data = null_data,
	.xxfi_eom = null_eom,
	.xxfi_negotiate = null_negotiate,
};

/* nodelay_listener - TCP_NODELAY on libmilter's listening socket (Linux
 * passes it on to accepted connections); libmilter does not expose it */
static void nodelay_listener(void)
{
	for (int fd = 3; fd < 256; fd++) {
		int listening = 0, one = 1;
		socklen_t len = sizeof(listening);

		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening
		    && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0
		    && errno != EOPNOTSUPP)
			fprintf(stderr, "null-milter: TCP_NODELAY: %s\n", strerror(errno));
	}
}

int main(int argc, char **argv)
{
	char *conn = NULL;
	int ch, timeout = 30;

	while ((ch = getopt(argc, argv, "p:H:T:")) != -1) {
		switch (ch) {
		case 'p':
			conn = optarg;
			break;
		case 'H':
			header_name = optarg;
			break;
		case 'T':
			timeout = atoi(optarg);
			break;
		default:
			conn = NULL;
			optind = argc + 1;
			break;
		}
	}
	if (conn == NULL || optind != argc) {
		fprintf(stderr, "usage: null-milter -p SOCKET [-H NAME] [-T SECONDS]\n");
		return 2;
	}
	if (smfi_setconn(conn) == MI_FAILURE || smfi_settimeout(timeout) == MI_FAILURE
	    || smfi_register(null_desc) == MI_FAILURE || smfi_opensocket(1) == MI_FAILURE) {
		fprintf(stderr, "null-milter: cannot listen on %s\n", conn);
		return 1;
	}
	nodelay_listener();
	return smfi_main() == MI_SUCCESS ? 0 : 1;
}
