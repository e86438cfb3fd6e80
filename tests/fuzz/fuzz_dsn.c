/*
 * fuzz_dsn - libFuzzer target: failure DSNs from hostile fields.
 *
 * Input: 1 octet of settings (RET, limit), then NUL-separated fields:
 * sender, recipient, ORCPT, status, remote MTA, diagnostic, ENVID,
 * second recipient, content. Checks that the null sender alone is
 * refused, that the output is canonical (CRLF only), that the top-level
 * header is exactly ours, that the boundary delimits exactly the parts we
 * wrote, that every line of parts 1 and 2 is ours (a known field, text
 * of ours, or a continuation) and at most 998 octets, and that building
 * twice gives the same bytes.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* check - abort on a broken invariant */
static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

/* field - the next NUL-terminated field of in (a copy), "" past the end */
static char *field(const char **in, const char *end)
{
	const char *nul = memchr(*in, '\0', (size_t)(end - *in));
	size_t n = nul ? (size_t)(nul - *in) : (size_t)(end - *in);
	char *s = malloc(n + 1);

	if (s == NULL)
		abort();
	memcpy(s, *in, n);
	s[n] = '\0';
	*in += nul ? n + 1 : n;
	return s;
}

/* starts - does the line start with prefix */
static int starts(const char *line, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && memcmp(line, prefix, n) == 0;
}

/* our_line - may this line of parts 1 and 2 be there */
static int our_line(const char *l, size_t n)
{
	static const char *const ours[] = {
		"Content-Description: ", "Content-Type: ", "This is the mail system",
		"I'm sorry", "be delivered", "For further", "If you do so", "delete your own",
		"                   The mail system", "<", "    ", "Reporting-MTA: dns; ",
		"X-Tern-Queue-ID: ", "X-Tern-Sender: ", "Original-Envelope-Id: ", "Arrival-Date: ",
		"Final-Recipient: ", "Original-Recipient: ", "Action: failed", "Status: ",
		"Remote-MTA: dns; ", "Diagnostic-Code: ", "Last-Attempt-Date: ", " ",
	};

	if (n == 0)
		return 1;
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (starts(l, n, ours[i]))
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const top[] = {"Date: ", "From: MAILER-DAEMON@mx.example.org ",
		"To: <", "Subject: Undelivered Mail Returned to Sender",
		"Message-ID: <fuzz.1@mx.example.org>", "Auto-Submitted: auto-replied",
		"MIME-Version: 1.0", "Content-Type: multipart/report; report-type=delivery-status;",
		"\tboundary=\"=_fuzz.1", "Content-Transfer-Encoding: ", ""};
	const char *in = (const char *)data + 1, *end = (const char *)data + size;
	struct dsn_buf b = {0}, again = {0};
	struct dsn_rcpt r[2];
	struct dsn_msg m;
	char *f[9], delim[80];
	size_t dn, nlines = 0, delims = 0, closes = 0;
	int rc, in_third = 0;

	if (size < 1)
		return 0;
	for (size_t i = 0; i < 9; i++)
		f[i] = field(&in, end);
	memset(r, 0, sizeof(r));
	r[0].addr = f[1][0] ? f[1] : "x@example.org";
	r[0].orcpt = f[2];
	r[0].status = f[3];
	r[0].remote_mta = f[4];
	r[0].diagnostic = f[5];
	r[0].last_attempt = 1732917510;
	r[1].addr = f[7][0] ? f[7] : "y@example.org";
	r[1].diagnostic = f[5];
	memset(&m, 0, sizeof(m));
	m.reporting_mta = "mx.example.org";
	m.unique_id = "fuzz.1";
	m.now = 1732917600;
	m.qid = f[6];
	m.sender = f[0];
	m.envid = f[6];
	m.arrival = 1732785307;
	m.rcpt = r;
	m.nrcpt = data[0] & 1 ? 2 : 1;
	m.ret = data[0] & 2 ? RET_FULL : RET_HDRS;
	m.full_max = data[0] >> 2;
	m.content = f[8];
	m.content_len = strlen(f[8]);

	rc = dsn_build(&m, &b);
	if (f[0][0] == '\0' || strcmp(f[0], "<>") == 0) {
		check(rc == -1 && errno == EDESTADDRREQ && b.len == 0);
		goto out;
	}
	check(rc >= 0 && (rc & ~(DSN_8BIT | DSN_SMTPUTF8)) == 0);
	check(dsn_build(&m, &again) == rc && again.len == b.len
	      && memcmp(again.data, b.data, b.len) == 0);
	check(b.data[b.len] == '\0');

	/* The boundary, from the Content-Type field. */
	{
		const char *bd = strstr(b.data, "\tboundary=\""), *q;

		check(bd != NULL);
		bd += 11;
		q = strchr(bd, '"');
		check(q != NULL && (size_t)(q - bd) <= 70);
		dn = (size_t)snprintf(delim, sizeof(delim), "--%.*s", (int)(q - bd), bd);
	}

	/* Line by line. */
	for (size_t pos = 0; pos < b.len;) {
		const char *l = b.data + pos, *lf = memchr(l, '\n', b.len - pos);
		size_t n;

		check(lf != NULL && lf > l && lf[-1] == '\r');
		n = (size_t)(lf - l) - 1;
		check(memchr(l, '\r', n) == NULL);
		pos += n + 2;
		if (nlines < sizeof(top) / sizeof(top[0]))
			check(starts(l, n, top[nlines]) && (top[nlines][0] != '\0' || n == 0));
		nlines++;
		if (n >= dn && memcmp(l, delim, dn) == 0) {
			if (n == dn) {
				delims++;
				in_third = delims == 3;
				continue;
			}
			check(n == dn + 2 && memcmp(l + dn, "--", 2) == 0 && pos == b.len);
			closes++;
			continue;
		}
		if (in_third)
			continue;	/* the returned content: theirs, made canonical */
		check(n <= 998);
		if (delims > 0)
			check(our_line(l, n));
	}
	check(delims == 2 || delims == 3);
	check(closes == 1);
	check(!(rc & DSN_8BIT) || delims == 3);
out:
	for (size_t i = 0; i < 9; i++)
		free(f[i]);
	dsn_buf_free(&b);
	dsn_buf_free(&again);
	return 0;
}
