/* check_dsn - failure DSNs: exact form, parts, returned content, sanitizing, refusals */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsn.h"
#include "unit.h"

#define T_NOW 1732917600		/* Fri, 29 Nov 2024 22:00:00 +0000 */
#define T_ARRIVAL 1732785307		/* Thu, 28 Nov 2024 09:15:07 +0000 */
#define T_LAST 1732917510		/* Fri, 29 Nov 2024 21:58:30 +0000 */

static const char message[] =
	"Received: from app1.example.com (app1.example.com [192.0.2.10])\r\n"
	"\tby mail.example.com (tern) with ESMTP id 0CKQ7E2V3G1A8\r\n"
	"From: Alice <alice@example.com>\r\n"
	"To: Bob <bob@example.org>\r\n"
	"Subject: Invoice 42\r\n"
	"Message-ID: <42@app1.example.com>\r\n"
	"\r\n"
	"Dear Bob,\r\n"
	"please find the invoice attached.\r\n";

/* headers_len - octets of message's header block, the blank line excluded */
static size_t headers_len(void)
{
	return (size_t)(strstr(message, "\r\n\r\n") - message) + 2;
}

#define HEADERS_LEN headers_len()
#define P3_FULL "Content-Description: Undelivered Message\r\nContent-Type: message/rfc822\r\n\r\n"
#define P3_HDRS "Content-Description: Undelivered Message Headers\r\n" \
	"Content-Type: text/rfc822-headers\r\n\r\n"

/* The golden DSN for msg_basic(): every byte of it. */
static const char golden[] =
	"Date: Fri, 29 Nov 2024 22:00:00 +0000\r\n"
	"From: MAILER-DAEMON@mail.example.com (Mail Delivery System)\r\n"
	"To: <alice@example.com>\r\n"
	"Subject: Undelivered Mail Returned to Sender\r\n"
	"Message-ID: <0CKQ7E2V3G1A8.bounce.1@mail.example.com>\r\n"
	"Auto-Submitted: auto-replied\r\n"
	"MIME-Version: 1.0\r\n"
	"Content-Type: multipart/report; report-type=delivery-status;\r\n"
	"\tboundary=\"=_0CKQ7E2V3G1A8.bounce.1\"\r\n"
	"Content-Transfer-Encoding: 7bit\r\n"
	"\r\n"
	"This is a MIME-encapsulated message.\r\n"
	"\r\n"
	"--=_0CKQ7E2V3G1A8.bounce.1\r\n"
	"Content-Description: Notification\r\n"
	"Content-Type: text/plain; charset=us-ascii\r\n"
	"\r\n"
	"This is the mail system at host mail.example.com.\r\n"
	"\r\n"
	"I'm sorry to have to inform you that your message could not\r\n"
	"be delivered to one or more recipients. Its headers are attached below.\r\n"
	"\r\n"
	"For further assistance, please send mail to postmaster.\r\n"
	"\r\n"
	"If you do so, please include this problem report. You can\r\n"
	"delete your own text from the attached returned message.\r\n"
	"\r\n"
	"                   The mail system\r\n"
	"\r\n"
	"<bob@example.org>: host mx1.example.org said: 550 5.1.1 <bob@example.org>:\r\n"
	"    Recipient address rejected: User unknown in virtual mailbox table\r\n"
	"\r\n"
	"<carol@example.net>: connect to mx.example.net[198.51.100.7]:25: Connection\r\n"
	"    timed out\r\n"
	"\r\n"
	"--=_0CKQ7E2V3G1A8.bounce.1\r\n"
	"Content-Description: Delivery report\r\n"
	"Content-Type: message/delivery-status\r\n"
	"\r\n"
	"Reporting-MTA: dns; mail.example.com\r\n"
	"X-Tern-Queue-ID: 0CKQ7E2V3G1A8\r\n"
	"X-Tern-Sender: rfc822; alice@example.com\r\n"
	"Original-Envelope-Id: inv-42+x\r\n"
	"Arrival-Date: Thu, 28 Nov 2024 09:15:07 +0000\r\n"
	"\r\n"
	"Final-Recipient: rfc822; bob@example.org\r\n"
	"Original-Recipient: rfc822;Bob+Smith@example.org\r\n"
	"Action: failed\r\n"
	"Status: 5.1.1\r\n"
	"Remote-MTA: dns; mx1.example.org\r\n"
	"Diagnostic-Code: smtp; 550 5.1.1 <bob@example.org>: Recipient address\r\n"
	" rejected: User unknown in virtual mailbox table\r\n"
	"Last-Attempt-Date: Fri, 29 Nov 2024 21:58:30 +0000\r\n"
	"\r\n"
	"Final-Recipient: rfc822; carol@example.net\r\n"
	"Action: failed\r\n"
	"Status: 4.4.1\r\n"
	"Diagnostic-Code: X-Tern; connect to mx.example.net[198.51.100.7]:25:\r\n"
	" Connection timed out\r\n"
	"Last-Attempt-Date: Fri, 29 Nov 2024 21:58:30 +0000\r\n"
	"\r\n"
	"--=_0CKQ7E2V3G1A8.bounce.1\r\n"
	"Content-Description: Undelivered Message Headers\r\n"
	"Content-Type: text/rfc822-headers\r\n"
	"\r\n"
	"Received: from app1.example.com (app1.example.com [192.0.2.10])\r\n"
	"\tby mail.example.com (tern) with ESMTP id 0CKQ7E2V3G1A8\r\n"
	"From: Alice <alice@example.com>\r\n"
	"To: Bob <bob@example.org>\r\n"
	"Subject: Invoice 42\r\n"
	"Message-ID: <42@app1.example.com>\r\n"
	"\r\n"
	"--=_0CKQ7E2V3G1A8.bounce.1--\r\n";

static struct dsn_rcpt rcpts[2];

/* msg_basic - two failed recipients of message, RET=HDRS by default */
static struct dsn_msg msg_basic(void)
{
	struct dsn_msg m = {
		.reporting_mta = "mail.example.com",
		.unique_id = "0CKQ7E2V3G1A8.bounce.1",
		.now = T_NOW,
		.qid = "0CKQ7E2V3G1A8",
		.sender = "alice@example.com",
		.envid = "inv-42+2Bx",
		.arrival = T_ARRIVAL,
		.rcpt = rcpts,
		.nrcpt = 2,
		.ret = RET_NONE,
		.content = message,
		.content_len = sizeof(message) - 1,
		.full_max = 0,
	};

	rcpts[0] = (struct dsn_rcpt){
		.addr = "bob@example.org",
		.orcpt = "rfc822;Bob+2BSmith@example.org",
		.status = "5.1.1",
		.remote_mta = "mx1.example.org",
		.diagnostic = "550 5.1.1 <bob@example.org>: Recipient address rejected: "
			"User unknown in virtual mailbox table",
		.last_attempt = T_LAST,
	};
	rcpts[1] = (struct dsn_rcpt){
		.addr = "carol@example.net",
		.orcpt = NULL,
		.status = "4.4.1",
		.remote_mta = NULL,
		.diagnostic = "connect to mx.example.net[198.51.100.7]:25: Connection timed out",
		.last_attempt = T_LAST,
	};
	return m;
}

/*
 * canonical - CRLF lines only, no bare CR or LF, no NUL unless allowed,
 * lines within 998 octets, ends with CRLF
 */
static void canonical(const struct dsn_buf *b)
{
	size_t line = 0;

	ck_assert_uint_ge(b->len, 2);
	ck_assert(b->data[b->len] == '\0');
	ck_assert(memcmp(b->data + b->len - 2, "\r\n", 2) == 0);
	for (size_t i = 0; i < b->len; i++) {
		if (b->data[i] == '\r') {
			ck_assert_msg(i + 1 < b->len && b->data[i + 1] == '\n', "bare CR at %zu", i);
			ck_assert_uint_le(i - line, 998);
		} else if (b->data[i] == '\n') {
			ck_assert_msg(i > 0 && b->data[i - 1] == '\r', "bare LF at %zu", i);
			line = i + 1;
		}
	}
}

/* has_line - does a line of b start with prefix */
static int has_line(const struct dsn_buf *b, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *p = b->data; p != NULL && p < b->data + b->len;) {
		if ((size_t)(b->data + b->len - p) >= n && memcmp(p, prefix, n) == 0)
			return 1;
		p = memchr(p, '\n', (size_t)(b->data + b->len - p));
		if (p != NULL)
			p++;
	}
	return 0;
}

/* count_lines - lines of b equal to line */
static int count_lines(const struct dsn_buf *b, const char *line)
{
	char want[256];
	int n = 0;

	snprintf(want, sizeof(want), "\r\n%s\r\n", line);
	for (const char *p = b->data; (p = strstr(p, want)) != NULL; p += 2)
		n++;
	return n;
}

/* unfold - the first field of b named name, continuation lines joined */
static void unfold(const struct dsn_buf *b, const char *name, char *out, size_t outlen)
{
	char want[64];
	const char *p;
	size_t o = 0;

	snprintf(want, sizeof(want), "\n%s", name);
	ck_assert_ptr_nonnull(p = strstr(b->data, want));
	for (p++; *p != '\0' && o + 1 < outlen; p++) {
		if (p[0] == '\r' && p[1] == '\n') {
			if (p[2] != ' ' && p[2] != '\t')
				break;
			p++;
			continue;
		}
		out[o++] = *p;
	}
	out[o] = '\0';
}

/* part - the body of MIME part i (0-based) of b, copied into a new string */
static char *part(const struct dsn_buf *b, const char *boundary, int i)
{
	char delim[128];
	const char *p = b->data, *end;

	snprintf(delim, sizeof(delim), "\r\n--%s\r\n", boundary);
	for (int k = 0; k <= i; k++) {
		ck_assert_ptr_nonnull(p = strstr(p, delim));
		p += strlen(delim);
	}
	snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	ck_assert_ptr_nonnull(end = strstr(p, delim));
	return strndup(p, (size_t)(end - p));
}

START_TEST(test_golden)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};

	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	ck_assert_uint_eq(b.len, sizeof(golden) - 1);
	ck_assert_str_eq(b.data, golden);
	/* pure: the same inputs give the same bytes, in a reused buffer too */
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	ck_assert_str_eq(b.data, golden);
	dsn_buf_free(&b);
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.cap, 0);
}
END_TEST

/* Structure: the parts' headers and their order, whatever the fields say. */
START_TEST(test_structure)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	char *p1, *p2, *p3;
	const char *hdr_end;

	ck_assert_int_eq(dsn_build(&m, &b), 0);
	hdr_end = strstr(b.data, "\r\n\r\n");
	ck_assert_ptr_nonnull(hdr_end);
	/* every top-level field once, before the body */
	static const char *const fields[] = {"Date: ", "From: MAILER-DAEMON@mail.example.com",
		"To: <alice@example.com>", "Subject: Undelivered Mail Returned to Sender",
		"Message-ID: <", "Auto-Submitted: auto-replied", "MIME-Version: 1.0",
		"Content-Type: multipart/report; report-type=delivery-status;"};
	for (size_t i = 0; i < N_ELEMENTS(fields); i++) {
		const char *f = strstr(b.data, fields[i]), *again;

		ck_assert_msg(f != NULL && f < hdr_end, "%s", fields[i]);
		again = strstr(f + 1, fields[i]);
		ck_assert_msg(again == NULL || again > hdr_end, "%s twice", fields[i]);
	}
	ck_assert_int_eq(count_lines(&b, "--=_0CKQ7E2V3G1A8.bounce.1"), 3);
	ck_assert_int_eq(count_lines(&b, "--=_0CKQ7E2V3G1A8.bounce.1--"), 1);
	p1 = part(&b, "=_0CKQ7E2V3G1A8.bounce.1", 0);
	p2 = part(&b, "=_0CKQ7E2V3G1A8.bounce.1", 1);
	p3 = part(&b, "=_0CKQ7E2V3G1A8.bounce.1", 2);
	ck_assert(strstr(p1, "Content-Type: text/plain; charset=us-ascii\r\n\r\n") != NULL);
	ck_assert(strncmp(strstr(p2, "\r\n\r\n"), "\r\n\r\nReporting-MTA: dns; mail.example.com\r\n",
			  40) == 0);
	ck_assert(strstr(p2, "Content-Type: message/delivery-status\r\n\r\n") != NULL);
	ck_assert(strstr(p3, "Content-Type: text/rfc822-headers\r\n\r\n") != NULL);
	/* per-recipient groups, blank-line separated, in order */
	ck_assert(strstr(p2, "\r\n\r\nFinal-Recipient: rfc822; bob@example.org\r\n"
			 "Original-Recipient: rfc822;Bob+Smith@example.org\r\nAction: failed\r\n"
			 "Status: 5.1.1\r\nRemote-MTA: dns; mx1.example.org\r\n") != NULL);
	ck_assert(strstr(p2, "\r\n\r\nFinal-Recipient: rfc822; carol@example.net\r\n"
			 "Action: failed\r\nStatus: 4.4.1\r\nDiagnostic-Code: X-Tern; ") != NULL);
	/* the returned headers are the original's, byte for byte */
	ck_assert(strstr(p3, "\r\n\r\n") != NULL);
	ck_assert(memcmp(strstr(p3, "\r\n\r\n") + 4, message, HEADERS_LEN) == 0);
	ck_assert_uint_eq(strlen(strstr(p3, "\r\n\r\n") + 4), HEADERS_LEN);
	ck_assert_ptr_null(strstr(b.data, "Dear Bob"));
	free(p1);
	free(p2);
	free(p3);
	dsn_buf_free(&b);
}
END_TEST

/* RET: HDRS (and none) send the headers, FULL the message up to the limit. */
static const struct {
	enum smtp_ret ret;
	size_t full_max;
	int full;			/* message/rfc822 expected */
} rets[] = {
	{RET_NONE, 0, 0},
	{RET_HDRS, 0, 0},
	{RET_HDRS, 1000000, 0},
	{RET_FULL, 0, 1},		/* the default limit, DSN_FULL_MAX */
	{RET_FULL, sizeof(message) - 1, 1},
	{RET_FULL, sizeof(message) - 2, 0},	/* one octet over: headers only */
	{RET_FULL, 10, 0},
};

START_TEST(test_ret)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	char *p3;

	m.ret = rets[_i].ret;
	m.full_max = rets[_i].full_max;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	p3 = part(&b, "=_0CKQ7E2V3G1A8.bounce.1", 2);
	if (rets[_i].full) {
		ck_assert(strncmp(p3, P3_FULL, strlen(P3_FULL)) == 0);
		ck_assert_str_eq(p3 + strlen(P3_FULL), message);
		ck_assert(strstr(b.data, "recipients. It's attached below.\r\n") != NULL);
	} else {
		ck_assert(strncmp(p3, P3_HDRS, strlen(P3_HDRS)) == 0);
		ck_assert_uint_eq(strlen(p3 + strlen(P3_HDRS)), HEADERS_LEN);
		ck_assert(memcmp(p3 + strlen(P3_HDRS), message, HEADERS_LEN) == 0);
		ck_assert(strstr(b.data, "recipients. Its headers are attached below.\r\n") != NULL);
		ck_assert_ptr_null(strstr(b.data, "Dear Bob"));
	}
	free(p3);
	dsn_buf_free(&b);
}
END_TEST

/* No content, or content with no header line: two parts only. */
START_TEST(test_no_content)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};

	m.content = NULL;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	ck_assert_int_eq(count_lines(&b, "--=_0CKQ7E2V3G1A8.bounce.1"), 2);
	ck_assert(strstr(b.data, "be delivered to one or more recipients.\r\n") != NULL);
	ck_assert_ptr_null(strstr(b.data, "rfc822-headers"));
	m.content = "\r\nbody only\r\n";
	m.content_len = strlen(m.content);
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	ck_assert_int_eq(count_lines(&b, "--=_0CKQ7E2V3G1A8.bounce.1"), 2);
	ck_assert_ptr_null(strstr(b.data, "body only"));
	dsn_buf_free(&b);
}
END_TEST

/* Headers over DSN_HEADERS_MAX are cut at the last whole line within it. */
START_TEST(test_headers_max)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	size_t line = 100, n = 0, lines = (DSN_HEADERS_MAX / line) + 10;
	char *big = malloc(lines * line + 32), *p3;

	for (size_t i = 0; i < lines; i++, n += line) {
		memset(big + n, 'h', line - 2);
		memcpy(big + n, "X-Filler: ", 10);
		memcpy(big + n + line - 2, "\r\n", 2);
	}
	memcpy(big + n, "\r\nbody\r\n", 8);
	m.content = big;
	m.content_len = n + 8;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	p3 = part(&b, "=_0CKQ7E2V3G1A8.bounce.1", 2);
	ck_assert_uint_eq(strlen(strstr(p3, "\r\n\r\n") + 4), DSN_HEADERS_MAX / line * line);
	free(p3);
	free(big);
	dsn_buf_free(&b);
}
END_TEST

/* ORCPT: rfc822 decoded, utf-8 as received, anything else left out. */
static const struct {
	const char *orcpt;
	const char *line;		/* NULL: no Original-Recipient */
} orcpts[] = {
	{"rfc822;bob@example.org", "Original-Recipient: rfc822;bob@example.org"},
	{"RFC822;a+2Bb@example.org", "Original-Recipient: rfc822;a+b@example.org"},
	{"rfc822;a+2bb@example.org", "Original-Recipient: rfc822;a+b@example.org"},
	{"rfc822;a+zz@example.org", "Original-Recipient: rfc822;a+zz@example.org"},
	{"utf-8;j\\x{F6}rg@example.de", "Original-Recipient: utf-8;j\\x{F6}rg@example.de"},
	{"UTF-8;x@example.de", "Original-Recipient: utf-8;x@example.de"},
	{"rfc822;x+0D+0ABcc:+20evil@example.org", "Original-Recipient: rfc822;x??Bcc: evil@example.org"},
	{"rfc822;x+C3+B6@example.org", "Original-Recipient: rfc822;x??@example.org"},
	{"x400;c=us;a=;p=x", NULL},
	{"rfc822", NULL},
	{"rfc822;", NULL},
	{"", NULL},
	{NULL, NULL},
};

START_TEST(test_orcpt)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};

	rcpts[0].orcpt = orcpts[_i].orcpt;
	m.nrcpt = 1;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	if (orcpts[_i].line == NULL) {
		ck_assert(!has_line(&b, "Original-Recipient:"));
	} else {
		ck_assert_msg(count_lines(&b, orcpts[_i].line) == 1, "%s", orcpts[_i].line);
		ck_assert(strstr(b.data, orcpts[_i].line)[-1] == '\n');
	}
	ck_assert(!has_line(&b, "Bcc:"));
	dsn_buf_free(&b);
}
END_TEST

/*
 * Header injection: CR, LF and other controls in every outside field end
 * up as '?' or a space on the line they belong to, never a line of their own.
 */
START_TEST(test_injection)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	char diag[512];
	static const char *const forbidden[] = {"Bcc:", "X-Evil:", "Subject: spam",
		"Content-Type: text/html", "--=_0CKQ7E2V3G1A8.bounce.1\r\nContent-Type: text/html",
		"<evil>", ".", "From: evil"};

	m.sender = "alice@example.com\r\nBcc: victim@example.net";
	m.envid = "inv+0D+0AX-Evil:+201\nX-Evil: 2";
	m.qid = "QID\r\nX-Evil: 3";
	rcpts[0].addr = "bob@example.org\r\nSubject: spam";
	rcpts[0].orcpt = "rfc822;bob@example.org\r\nX-Evil: 4";
	rcpts[0].remote_mta = "mx1.example.org\r\nX-Evil: 5";
	rcpts[0].diagnostic = "550 5.1.1 bad\r\n\r\n--=_0CKQ7E2V3G1A8.bounce.1\r\n"
		"Content-Type: text/html\r\n\r\n<evil>\r\n.\r\nFrom: evil\rX-Evil: 6\n\x7f\x1b";
	rcpts[0].status = "5.1.1\r\nX-Evil: 7";
	rcpts[1].addr = "carol@example.net\nBcc: x@example.net";
	m.content = "Subject: hi\nX-Bare: lf\rX-Bare: cr\r\n\r\nbody\n";
	m.content_len = strlen(m.content);
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	for (size_t i = 0; i < N_ELEMENTS(forbidden); i++)
		ck_assert_msg(!has_line(&b, forbidden[i]), "line starting \"%s\"", forbidden[i]);
	ck_assert_int_eq(count_lines(&b, "--=_0CKQ7E2V3G1A8.bounce.1"), 3);
	ck_assert_int_eq(count_lines(&b, "--=_0CKQ7E2V3G1A8.bounce.1--"), 1);
	ck_assert(has_line(&b, "To: <alice@example.com??Bcc: victim@example.net>\r\n"));
	ck_assert(has_line(&b, "X-Tern-Sender: rfc822; alice@example.com??Bcc: victim@example.net\r\n"));
	ck_assert(has_line(&b, "Final-Recipient: rfc822; bob@example.org??Subject: spam\r\n"));
	ck_assert(has_line(&b, "Final-Recipient: rfc822; carol@example.net?Bcc: x@example.net\r\n"));
	ck_assert(has_line(&b, "Original-Envelope-Id: inv??X-Evil: 1?X-Evil: 2\r\n"));
	ck_assert(has_line(&b, "Original-Recipient: rfc822;bob@example.org??X-Evil: 4\r\n"));
	ck_assert(has_line(&b, "X-Tern-Queue-ID: QID??X-Evil:?3\r\n"));
	ck_assert(has_line(&b, "Remote-MTA: dns; mx1.example.org??X-Evil:?5\r\n"));
	ck_assert(has_line(&b, "Status: 5.0.0\r\n"));
	unfold(&b, "Diagnostic-Code:", diag, sizeof(diag));
	ck_assert_str_eq(diag, "Diagnostic-Code: smtp; 550 5.1.1 bad --=_0CKQ7E2V3G1A8.bounce.1 "
			 "Content-Type: text/html <evil> . From: evil X-Evil: 6");
	/* the returned headers, made canonical */
	ck_assert(strstr(b.data, "\r\n\r\nSubject: hi\r\nX-Bare: lf\r\nX-Bare: cr\r\n\r\n--=_") != NULL);
	dsn_buf_free(&b);
}
END_TEST

/* Long diagnostics are folded into short lines, then cut with "...". */
START_TEST(test_fold)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	char *diag = malloc(5000), *word = malloc(600), *p2, *p1;
	size_t n = 0;

	n += (size_t)sprintf(diag, "554 5.7.1");
	while (n < 4900)
		n += (size_t)sprintf(diag + n, " w%zu", n);
	memset(word, 'x', 599);
	word[599] = '\0';
	memcpy(word, "550 ", 4);
	rcpts[0].diagnostic = diag;
	rcpts[1].diagnostic = word;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	p1 = part(&b, "=_0CKQ7E2V3G1A8.bounce.1", 0);
	p2 = part(&b, "=_0CKQ7E2V3G1A8.bounce.1", 1);
	for (char *line = p2; line != NULL && *line != '\0';) {
		char *end = strstr(line, "\r\n");
		size_t len = end ? (size_t)(end - line) : strlen(line);

		ck_assert_uint_le(len, 78);
		if (line[0] == ' ')
			ck_assert(strspn(line, " ") < len);	/* never white space only */
		line = end ? end + 2 : NULL;
	}
	for (char *line = strstr(p1, "<bob@"); line != NULL && *line != '\0';) {
		char *end = strstr(line, "\r\n");
		size_t len = end ? (size_t)(end - line) : strlen(line);

		ck_assert_uint_le(len, 78);
		line = end ? end + 2 : NULL;
	}
	/* the first is cut at DSN_DIAG_MAX with "...", the word broken, not lost */
	ck_assert(strstr(p2, "...\r\nLast-Attempt-Date") != NULL);
	{
		size_t xs = 0;

		for (const char *q = strstr(p2, "Diagnostic-Code: smtp; 550"); *q != 'L'; q++)
			xs += *q == 'x';
		ck_assert_uint_eq(xs, 595);
	}
	free(p1);
	free(p2);
	free(diag);
	free(word);
	dsn_buf_free(&b);
}
END_TEST

/* The null sender gets nothing; other misuse is EINVAL; out is left empty. */
static const struct {
	const char *sender;
	const char *mta;
	const char *id;
	size_t nrcpt;
	const char *addr;
	time_t now;
	int err;
} refusals[] = {
	{"", "mail.example.com", "id1", 1, "b@x.org", T_NOW, EDESTADDRREQ},
	{"<>", "mail.example.com", "id1", 1, "b@x.org", T_NOW, EDESTADDRREQ},
	{NULL, "mail.example.com", "id1", 1, "b@x.org", T_NOW, EDESTADDRREQ},
	{"", NULL, NULL, 0, NULL, 0, EDESTADDRREQ},
	{"a@x.org", "", "id1", 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", NULL, "id1", 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com\r\nX: y", "id1", 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", ".example.com", "id1", 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com", "", 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com", NULL, 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com", "id\"1", 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com", "id..1", 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com", ".id1", 1, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com",
	 "01234567890123456789012345678901234567890123456789012345678901234", 1, "b@x.org", T_NOW,
	 EINVAL},
	{"a@x.org", "mail.example.com", "id1", 0, "b@x.org", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com", "id1", 1, "", T_NOW, EINVAL},
	{"a@x.org", "mail.example.com", "id1", 1, NULL, T_NOW, EINVAL},
	{"a@x.org", "mail.example.com", "id1", 1, "b@x.org", -1, EINVAL},
	{"a@x.org", "mail.example.com", "id1", 1, "b@x.org", T_NOW, 0},
	{"a@x.org", "mail.example.com",
	 "0123456789012345678901234567890123456789012345678901234567890123", 1, "b@x.org", T_NOW, 0},
};

START_TEST(test_refusals)
{
	struct dsn_rcpt r = {.addr = refusals[_i].addr, .status = "5.0.0"};
	struct dsn_rcpt ok = {.addr = "b@example.org"};
	struct dsn_msg m = {
		.reporting_mta = refusals[_i].mta, .unique_id = refusals[_i].id,
		.now = refusals[_i].now, .sender = refusals[_i].sender, .rcpt = &r,
		.nrcpt = refusals[_i].nrcpt,
	};
	struct dsn_msg prior = {
		.reporting_mta = "h.example", .unique_id = "x", .now = T_NOW,
		.sender = "s@example.org", .rcpt = &ok, .nrcpt = 1,
	};
	struct dsn_buf b = {0};

	/* a buffer with old contents: emptied on refusal */
	ck_assert_int_eq(dsn_build(&prior, &b), 0);
	ck_assert_uint_gt(b.len, 0);
	errno = 0;
	if (refusals[_i].err == 0) {
		ck_assert_int_eq(dsn_build(&m, &b), 0);
		canonical(&b);
	} else {
		ck_assert_int_eq(dsn_build(&m, &b), -1);
		ck_assert_int_eq(errno, refusals[_i].err);
		ck_assert_uint_eq(b.len, 0);
		ck_assert(b.data == NULL || b.data[0] == '\0');
	}
	dsn_buf_free(&b);
}
END_TEST

/* Content holding the boundary gets another one; the content is intact. */
START_TEST(test_boundary)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	char content[512];
	char *p3;

	snprintf(content, sizeof(content), "Subject: x\r\n\r\n--=_%s\r\n--=_%s.0\r\nbody\r\n",
		 m.unique_id, m.unique_id);
	m.content = content;
	m.content_len = strlen(content);
	m.ret = RET_FULL;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	ck_assert(strstr(b.data, "\tboundary=\"=_0CKQ7E2V3G1A8.bounce.1.1\"\r\n") != NULL);
	ck_assert_int_eq(count_lines(&b, "--=_0CKQ7E2V3G1A8.bounce.1.1"), 3);
	ck_assert_int_eq(count_lines(&b, "--=_0CKQ7E2V3G1A8.bounce.1.1--"), 1);
	p3 = part(&b, "=_0CKQ7E2V3G1A8.bounce.1.1", 2);
	ck_assert_str_eq(strstr(p3, "\r\n\r\n") + 4, content);
	free(p3);
	/* headers only: only the headers need to be free of it */
	m.ret = RET_HDRS;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	ck_assert(strstr(b.data, "\tboundary=\"=_0CKQ7E2V3G1A8.bounce.1\"\r\n") != NULL);
	dsn_buf_free(&b);
}
END_TEST

/* 8-bit: returned content makes the DSN 8bit; a UTF-8 sender needs SMTPUTF8. */
START_TEST(test_8bit)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	static const char content[] = "Subject: =?utf-8?q?x?=\r\nX-Name: J\xc3\xb6rg\r\n\r\nGr\xc3\xbc\xc3\x9f"
		"e\r\n";

	m.content = content;
	m.content_len = sizeof(content) - 1;
	ck_assert_int_eq(dsn_build(&m, &b), DSN_8BIT);
	canonical(&b);
	ck_assert(has_line(&b, "Content-Transfer-Encoding: 8bit\r\n\r\nThis is a MIME"));
	ck_assert(strstr(b.data, "Content-Type: text/rfc822-headers\r\n"
			 "Content-Transfer-Encoding: 8bit\r\n\r\nSubject:") != NULL);
	m.ret = RET_FULL;
	ck_assert_int_eq(dsn_build(&m, &b), DSN_8BIT);
	ck_assert(strstr(b.data, "Content-Type: message/rfc822\r\n"
			 "Content-Transfer-Encoding: 8bit\r\n\r\n") != NULL);

	m.content = message;
	m.content_len = sizeof(message) - 1;
	m.sender = "j\xc3\xb6rg@example.de";
	rcpts[0].addr = "\xe6\x97\xa5\xe6\x9c\xac@example.jp";
	rcpts[1].addr = "bad\xff\xfe@example.org";
	ck_assert_int_eq(dsn_build(&m, &b), DSN_SMTPUTF8);
	canonical(&b);
	ck_assert(has_line(&b, "To: <j\xc3\xb6rg@example.de>\r\n"));
	ck_assert(has_line(&b, "X-Tern-Sender: utf-8; j\\x{F6}rg@example.de\r\n"));
	ck_assert(has_line(&b, "Final-Recipient: utf-8; \\x{65E5}\\x{672C}@example.jp\r\n"));
	ck_assert(has_line(&b, "Final-Recipient: utf-8; bad\\x{FFFD}\\x{FFFD}@example.org\r\n"));
	ck_assert(has_line(&b, "<\\x{65E5}\\x{672C}@example.jp>: host mx1.example.org said:"));
	/* outside the To: field and the returned content, 7-bit only */
	for (const char *p = strstr(b.data, "\r\n\r\n"); p < strstr(b.data, "rfc822-headers"); p++)
		ck_assert((unsigned char)*p < 0x80);
	/* invalid UTF-8 in the sender becomes '?' in To: */
	m.sender = "x\xff@example.org";
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	ck_assert(has_line(&b, "To: <x?@example.org>\r\n"));
	ck_assert(has_line(&b, "X-Tern-Sender: utf-8; x\\x{FFFD}@example.org\r\n"));
	dsn_buf_free(&b);
}
END_TEST

/* Status and diagnostic variants; long addresses are cut. */
START_TEST(test_fields)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	char addr[2000];

	m.nrcpt = 1;
	rcpts[0].orcpt = NULL;
	rcpts[0].status = "2.0.0";
	rcpts[0].diagnostic = NULL;
	rcpts[0].remote_mta = "";
	rcpts[0].last_attempt = 0;
	m.envid = NULL;
	m.qid = NULL;
	m.arrival = 0;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	ck_assert(has_line(&b, "Status: 5.0.0\r\n"));
	ck_assert(has_line(&b, "<bob@example.org>: delivery failed, status 5.0.0\r\n"));
	static const char *const absent[] = {"Diagnostic-Code:", "Remote-MTA:", "Last-Attempt-Date:",
		"Original-Envelope-Id:", "X-Tern-Queue-ID:", "Arrival-Date:"};
	for (size_t i = 0; i < N_ELEMENTS(absent); i++)
		ck_assert_msg(!has_line(&b, absent[i]), "%s", absent[i]);
	rcpts[0].status = "5.7.26";
	rcpts[0].diagnostic = "  \r\n ";
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	ck_assert(has_line(&b, "Status: 5.7.26\r\n"));
	ck_assert(!has_line(&b, "Diagnostic-Code:"));
	rcpts[0].status = "5.1.1000";
	rcpts[0].diagnostic = "550";
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	ck_assert(has_line(&b, "Status: 5.0.0\r\n"));
	ck_assert(has_line(&b, "Diagnostic-Code: smtp; 550\r\n"));
	ck_assert(has_line(&b, "<bob@example.org>: 550\r\n"));	/* no host: no "said" */
	memset(addr, 'a', sizeof(addr) - 1);
	addr[sizeof(addr) - 1] = '\0';
	rcpts[0].addr = addr;
	ck_assert_int_eq(dsn_build(&m, &b), 0);
	canonical(&b);
	ck_assert(has_line(&b, "Final-Recipient: rfc822; aaaa"));
	ck_assert(strstr(b.data, "aaa...\r\nAction: failed") != NULL);
	dsn_buf_free(&b);
}
END_TEST

/* Dates: UTC, computed without the C library's zone machinery. */
static const struct {
	long long t;			/* past a 32-bit time_t's range: skipped there */
	const char *date;		/* NULL: refused */
} dates[] = {
	{0, "Date: Thu, 1 Jan 1970 00:00:00 +0000\r\n"},
	{951782400, "Date: Tue, 29 Feb 2000 00:00:00 +0000\r\n"},
	{1709251199, "Date: Thu, 29 Feb 2024 23:59:59 +0000\r\n"},
	{T_NOW, "Date: Fri, 29 Nov 2024 22:00:00 +0000\r\n"},
	{4102444800, "Date: Fri, 1 Jan 2100 00:00:00 +0000\r\n"},
	{253402300799, "Date: Fri, 31 Dec 9999 23:59:59 +0000\r\n"},
	{253402300800, NULL},
	{-1, NULL},
};

START_TEST(test_dates)
{
	struct dsn_msg m = msg_basic();
	struct dsn_buf b = {0};
	char arrival[80];

	if ((long long)(time_t)dates[_i].t != dates[_i].t)
		return;		/* a 32-bit time_t cannot hold it */
	m.now = (time_t)dates[_i].t;
	m.arrival = (time_t)dates[_i].t;
	if (dates[_i].date == NULL) {
		errno = 0;
		ck_assert_int_eq(dsn_build(&m, &b), -1);
		ck_assert_int_eq(errno, EINVAL);
	} else {
		ck_assert_int_eq(dsn_build(&m, &b), 0);
		ck_assert(strncmp(b.data, dates[_i].date, strlen(dates[_i].date)) == 0);
		snprintf(arrival, sizeof(arrival), "\r\nArrival-%s", dates[_i].date);
		if (dates[_i].t != 0)		/* 0: no arrival date */
			ck_assert(strstr(b.data, arrival) != NULL);
		else
			ck_assert_ptr_null(strstr(b.data, "Arrival-Date:"));
	}
	dsn_buf_free(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dsn");
	TCase *tc = tcase_create("dsn");

	tcase_add_test(tc, test_golden);
	tcase_add_test(tc, test_structure);
	tcase_add_loop_test(tc, test_ret, 0, N_ELEMENTS(rets));
	tcase_add_test(tc, test_no_content);
	tcase_add_test(tc, test_headers_max);
	tcase_add_loop_test(tc, test_orcpt, 0, N_ELEMENTS(orcpts));
	tcase_add_test(tc, test_injection);
	tcase_add_test(tc, test_fold);
	tcase_add_loop_test(tc, test_refusals, 0, N_ELEMENTS(refusals));
	tcase_add_test(tc, test_boundary);
	tcase_add_test(tc, test_8bit);
	tcase_add_test(tc, test_fields);
	tcase_add_loop_test(tc, test_dates, 0, N_ELEMENTS(dates));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
