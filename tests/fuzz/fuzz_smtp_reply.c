/*
 * fuzz_smtp_reply - libFuzzer target: SMTP server replies.
 *
 * Input: 2 octets of settings (how to cut, a small output size), then
 * what the server sends. It is pushed whole, octet by octet and in
 * pseudo-random pieces (reusing the parser after smtp_reply_reset); all
 * three must give the same replies, the same error and the same held
 * state. Every reply is checked for bounds and consistency; single-line
 * replies written back parse to the same reply; the EHLO, queue id and
 * format helpers stay in their bounds. The held state never exceeds one
 * line and one reply's text.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smtp_reply.h"

#define HELD_MAX (SMTP_REPLY_LINE_MAX + 1 + SMTP_REPLY_TEXT_MAX)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
	uint64_t *prints;		/* one fingerprint per reply */
	size_t n;
	const char *why;		/* the error, or NULL */
	size_t held;			/* smtp_reply_buffered at the end */
};

/* check - abort on a broken invariant */
static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

/* fnv - FNV-1a over n octets, continuing from h */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ULL;
	return h;
}

/* fingerprint - everything a reply holds */
static uint64_t fingerprint(const struct smtp_reply *r)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	h = fnv(h, &r->code, sizeof(r->code));
	h = fnv(h, r->esc, strlen(r->esc));
	h = fnv(h, &r->nlines, sizeof(r->nlines));
	for (size_t i = 0; i < r->nlines; i++) {
		h = fnv(h, &r->len[i], sizeof(r->len[i]));
		h = fnv(h, smtp_reply_line(r, i), r->len[i]);
	}
	return h;
}

/* esc_ok - "" or class "." 1*3digit "." 1*3digit with the code's class */
static int esc_ok(const char *e, int code)
{
	size_t i = 2;

	if (e[0] == '\0')
		return 1;
	if (e[0] != '0' + code / 100 || e[1] != '.')
		return 0;
	for (int part = 0; part < 2; part++) {
		size_t start = i;

		while (e[i] >= '0' && e[i] <= '9')
			i++;
		if (i == start || i - start > 3)
			return 0;
		if (part == 0 && e[i++] != '.')
			return 0;
	}
	return e[i] == '\0';
}

/* printable - only printable ASCII, and exactly n octets before the NUL */
static int printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < ' ' || s[i] > '~')
			return 0;
	return s[n] == '\0';
}

/* reparse - a reply written back as one buffer, parsed again */
static void reparse(const struct smtp_reply *r, const char *line, size_t len)
{
	struct smtp_reply_parser *p = smtp_reply_new();
	struct smtp_reply again;

	check(smtp_reply_push(p, line, len) == (ssize_t)len);
	check(smtp_reply_next(p, &again) == 1);
	check(fingerprint(&again) == fingerprint(r));
	smtp_reply_free(&p);
}

/* inspect - bounds and consistency of one reply and the helpers over it */
static void inspect(const struct smtp_reply *r, size_t small)
{
	char out[SMTP_REPLY_FORMAT_MAX], id[SMTP_QUEUE_ID_MAX + 1];
	char line[SMTP_REPLY_LINE_MAX + 16];
	struct smtp_ehlo e;
	size_t sum = 0, n;

	check(r->code >= 200 && r->code <= 599);
	check(esc_ok(r->esc, r->code));
	check(r->nlines >= 1 && r->nlines <= SMTP_REPLY_LINES_MAX);
	check(r->textlen <= SMTP_REPLY_TEXT_MAX);
	for (size_t i = 0; i < r->nlines; i++) {
		check(r->off[i] == sum + i);
		check(strlen(smtp_reply_line(r, i)) == r->len[i]);
		sum += r->len[i];
	}
	check(sum == r->textlen);
	check(smtp_reply_line(r, r->nlines)[0] == '\0');

	n = smtp_reply_format(r, out, sizeof(out));
	check(n < sizeof(out) && printable(out, n));
	n = smtp_reply_format(r, out, small);
	check(small == 0 ? n == 0 : n < small && printable(out, n));

	if (smtp_reply_ehlo(r, &e) == 0) {
		check(r->code == 250);
		check((e.flags & ~0x1ffu) == 0 && (e.auth & ~3u) == 0);
		check(e.size == 0 || (e.flags & SMTP_EXT_SIZE));
		check(e.auth == 0 || (e.flags & SMTP_EXT_AUTH));
	} else {
		check(r->code != 250 && e.flags == 0 && e.size == 0 && e.auth == 0);
	}

	n = smtp_reply_queue_id(r, id, sizeof(id));
	check(n == strlen(id) && n <= SMTP_QUEUE_ID_MAX);
	check(n == 0 || r->code / 100 == 2);
	for (size_t i = 0; i < n; i++)
		check((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'z')
		      || (id[i] >= 'A' && id[i] <= 'Z') || id[i] == '-');

	/* One line written back parses to the same reply. */
	if (r->nlines == 1) {
		n = (size_t)snprintf(line, sizeof(line), "%03d %s%s", r->code, r->esc,
				     r->esc[0] ? " " : "");
		memcpy(line + n, smtp_reply_line(r, 0), r->len[0]);
		n += r->len[0];
		memcpy(line + n, "\r\n", 2);
		reparse(r, line, n + 2);
	}
}

/* feed - push in pieces (step 0: all at once; else pieces from the seed) */
static void feed(struct smtp_reply_parser *p, const char *in, size_t len, size_t step,
		 unsigned seed, size_t small, struct run *r)
{
	struct smtp_reply reply;
	size_t pos = 0;
	int rc = 0;

	r->n = 0;
	r->why = NULL;
	while (pos < len) {
		size_t n = len - pos;
		ssize_t used;

		if (step) {
			seed = seed * 1103515245u + 12345u;
			n = 1 + (seed >> 16) % step;
			if (n > len - pos)
				n = len - pos;
		}
		while (n > 0) {
			used = smtp_reply_push(p, in + pos, n);
			check(used > 0 && (size_t)used <= n);
			check(smtp_reply_buffered(p) <= HELD_MAX);
			if ((size_t)used < n)	/* a reply ended inside: it must be taken first */
				check(smtp_reply_push(p, in + pos + used, n - (size_t)used) == -1
				      && errno == EALREADY);
			pos += (size_t)used;
			n -= (size_t)used;
			while ((rc = smtp_reply_next(p, &reply)) == 1) {
				inspect(&reply, small);
				r->prints[r->n++] = fingerprint(&reply);
			}
			if (rc == 0) {
				check(smtp_reply_error(p) == NULL);
			} else {
				check(rc == -1 && errno == EPROTO && smtp_reply_error(p) != NULL);
				check(smtp_reply_buffered(p) == 0);
			}
		}
	}
	r->why = smtp_reply_error(p);
	r->held = smtp_reply_buffered(p);
}

/* same - two runs agree on everything */
static void same(const struct run *a, const struct run *b)
{
	check(a->n == b->n);
	check(memcmp(a->prints, b->prints, a->n * sizeof(a->prints[0])) == 0);
	check((a->why == NULL) == (b->why == NULL));
	check(a->why == NULL || strcmp(a->why, b->why) == 0);
	check(a->held == b->held);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smtp_reply_parser *p;
	struct run a, b, c;
	const char *in;
	size_t len, small;
	unsigned seed;

	if (size < 2)
		return 0;
	seed = data[0];
	small = data[1] % 40;
	in = (const char *)data + 2;
	len = size - 2;

	/* a reply needs at least one LF, so there are fewer than len + 1 */
	a.prints = malloc((len + 1) * sizeof(uint64_t));
	b.prints = malloc((len + 1) * sizeof(uint64_t));
	c.prints = malloc((len + 1) * sizeof(uint64_t));
	if (!a.prints || !b.prints || !c.prints)
		abort();

	p = smtp_reply_new();
	feed(p, in, len, 0, 0, small, &a);
	smtp_reply_free(&p);
	check(p == NULL);
	p = smtp_reply_new();
	feed(p, in, len, 1, 0, small, &b);
	same(&a, &b);
	smtp_reply_reset(p);
	feed(p, in, len, 1 + seed % 64, seed, small, &c);
	same(&a, &c);
	smtp_reply_free(&p);

	free(a.prints);
	free(b.prints);
	free(c.prints);
	return 0;
}
