/*
 * null-milter - the floor for bench/milter-throughput.sh: a libmilter
 * milter that adds one header field to every message and does nothing
 * else.
 *
 *   null-milter -p inet:PORT@127.0.0.1 [-H NAME] [-T SECONDS] [-s]
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
 * libmilter's timeout.
 *
 * -s takes tern-milter's protocol steps instead (the floor of what its
 * checks ask of the MTA): CONNECT, MAIL and the headers without a reply
 * where the MTA offers that, RCPT answered (check_recipients = tempfail,
 * the default, may refuse one), DATA and the end of message; the same
 * actions and macro lists as tm_negotiate() in src/milter/callbacks.c,
 * which it must follow. Its callbacks do nothing but answer.
 *
 * It is a benchmark tool: it trusts its command line,
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
static int tern_steps;			/* -s */
static int nr_conn, nr_mail, nr_hdr;	/* what -s got without a reply */

/* null_negotiate - DATA and the end of message only, one action; with -s
 * tern-milter's steps, actions and macros */
static sfsistat null_negotiate(SMFICTX *ctx, unsigned long f0, unsigned long f1,
			       unsigned long f2, unsigned long f3, unsigned long *pf0,
			       unsigned long *pf1, unsigned long *pf2, unsigned long *pf3)
{
	unsigned long skip = SMFIP_NOCONNECT | SMFIP_NOHELO | SMFIP_NOMAIL | SMFIP_NORCPT
		| SMFIP_NOBODY | SMFIP_NOHDRS | SMFIP_NOEOH | SMFIP_NOUNKNOWN;
	unsigned long actions = SMFIF_ADDHDRS;

	(void)f2;
	(void)f3;
	if (tern_steps) {
		skip = SMFIP_NOHELO | SMFIP_NOBODY | SMFIP_NOUNKNOWN | SMFIP_NOEOH
			| (f1 & (SMFIP_NR_CONN | SMFIP_NR_MAIL | SMFIP_NR_HDR));
		nr_conn = (f1 & SMFIP_NR_CONN) != 0;
		nr_mail = (f1 & SMFIP_NR_MAIL) != 0;
		nr_hdr = (f1 & SMFIP_NR_HDR) != 0;
		actions |= SMFIF_CHGHDRS | SMFIF_SETSYMLIST;
	}
	if ((f0 & actions) != actions)
		return SMFIS_REJECT;
	*pf0 = actions;
	*pf1 = f1 & skip;
	*pf2 = 0;
	*pf3 = 0;
	if (tern_steps
	    && (smfi_setsymlist(ctx, SMFIM_CONNECT, "{client_addr} {daemon_name}") != MI_SUCCESS
		|| smfi_setsymlist(ctx, SMFIM_ENVFROM, "{auth_authen}") != MI_SUCCESS
		|| smfi_setsymlist(ctx, SMFIM_EOM, "{i}") != MI_SUCCESS))
		return SMFIS_REJECT;
	return SMFIS_CONTINUE;
}

/* null_connect, null_envfrom, null_envrcpt, null_header - -s only: answer
 * as tern-milter does, without a reply where one was negotiated away */
static sfsistat null_connect(SMFICTX *ctx, char *host, _SOCK_ADDR *addr)
{
	(void)ctx;
	(void)host;
	(void)addr;
	return nr_conn ? SMFIS_NOREPLY : SMFIS_CONTINUE;
}

static sfsistat null_envfrom(SMFICTX *ctx, char **argv)
{
	(void)ctx;
	(void)argv;
	return nr_mail ? SMFIS_NOREPLY : SMFIS_CONTINUE;
}

static sfsistat null_envrcpt(SMFICTX *ctx, char **argv)
{
	(void)ctx;
	(void)argv;
	return SMFIS_CONTINUE;
}

static sfsistat null_header(SMFICTX *ctx, char *name, char *value)
{
	(void)ctx;
	(void)name;
	(void)value;
	return nr_hdr ? SMFIS_NOREPLY : SMFIS_CONTINUE;
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

	while ((ch = getopt(argc, argv, "p:H:T:s")) != -1) {
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
		case 's':
			tern_steps = 1;
			null_desc.xxfi_flags |= SMFIF_CHGHDRS | SMFIF_SETSYMLIST;
			null_desc.xxfi_connect = null_connect;
			null_desc.xxfi_envfrom = null_envfrom;
			null_desc.xxfi_envrcpt = null_envrcpt;
			null_desc.xxfi_header = null_header;
			break;
		default:
			conn = NULL;
			optind = argc + 1;
			break;
		}
	}
	if (conn == NULL || optind != argc) {
		fprintf(stderr, "usage: null-milter -p SOCKET [-H NAME] [-T SECONDS] [-s]\n");
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
