/*
 * fuzz_smtp_data - libFuzzer target: DATA/BDAT content reader.
 *
 * Input: 4 octets of settings (mode, normalize, max_line, max_size, how to
 * cut), then the content. The content is fed whole, byte by byte through a
 * 2-octet out buffer, and in pseudo-random pieces (reusing the reader
 * after smtp_data_reset); all three must agree exactly. The result is also
 * checked against a naive octet-at-a-time model: DATA ends at the first
 * CR LF "." CR LF (or "." CR LF first), the output is a prefix of the
 * model's canonical form and equal to it without error, and it never
 * holds a bare CR or LF.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smtp_data.h"

#define NOT_ENDED ((size_t)-1)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
	char *out;
	size_t outlen;
	size_t end;			/* where DATA ended, or NOT_ENDED */
	unsigned errors;
	unsigned long long size;
	int dotlines, eightbit;
};

/* check - abort on a broken invariant */
static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

/* feed - push in pieces (step 0: all at once; else pieces from the seed) */
static void feed(struct smtp_data *sd, const char *in, size_t len, size_t step, unsigned seed,
		 size_t outcap, struct run *r)
{
	char buf[65536];
	size_t pos = 0;

	r->outlen = 0;
	r->end = NOT_ENDED;
	check(outcap <= sizeof(buf));
	while (pos < len && r->end == NOT_ENDED) {
		size_t n = len - pos, off = 0;

		if (step) {
			seed = seed * 1103515245u + 12345u;
			n = 1 + (seed >> 16) % step;
			if (n > len - pos)
				n = len - pos;
		}
		while (off < n) {
			size_t used, made;
			int end = smtp_data_push(sd, in + pos + off, n - off, &used, buf, outcap, &made);

			check(end == 0 || end == 1);
			check(used <= n - off && made <= outcap);
			check(used > 0 || made > 0 || end);
			memcpy(r->out + r->outlen, buf, made);
			r->outlen += made;
			off += used;
			if (end) {
				r->end = pos + off;
				break;
			}
		}
		pos += n;
	}
	{
		char fin[2];
		size_t made = smtp_data_finish(sd, fin, sizeof(fin));

		check(made <= 2);
		memcpy(r->out + r->outlen, fin, made);
		r->outlen += made;
	}
	r->errors = smtp_data_errors(sd);
	r->size = smtp_data_size(sd);
	r->dotlines = smtp_data_dotlines(sd);
	r->eightbit = smtp_data_8bit(sd);
}

/* same - two runs agree on everything */
static void same(const struct run *a, const struct run *b)
{
	check(a->outlen == b->outlen && memcmp(a->out, b->out, a->outlen) == 0);
	check(a->end == b->end && a->errors == b->errors && a->size == b->size);
	check(a->dotlines == b->dotlines && a->eightbit == b->eightbit);
}

/* marker - where DATA must end: the first CR LF "." CR LF, or "." CR LF first */
static size_t marker(const char *in, size_t len)
{
	if (len >= 3 && memcmp(in, ".\r\n", 3) == 0)
		return 3;
	for (size_t i = 0; i + 5 <= len; i++)
		if (memcmp(in + i, "\r\n.\r\n", 5) == 0)
			return i + 5;
	return NOT_ENDED;
}

/*
 * model - the canonical form, one octet at a time: every CR LF, bare CR
 * and bare LF ends a line; a DATA line loses a leading dot; BDAT content
 * gets a final CR LF. *bare: a bare CR or LF was seen.
 */
static size_t model(const char *in, size_t len, int dot, int ended, char *out, int *bare,
		    int *dotlines)
{
	size_t i = 0, o = 0, line = 0;
	int bol = 1;

	*bare = *dotlines = 0;
	while (i < len) {
		char c = in[i];

		if (bol && dot && c == '.') {
			i++;
			bol = 0;
			continue;
		}
		bol = 0;
		if (c == '\r' && i + 1 < len && in[i + 1] == '\n') {
			i += 2;
		} else if (c == '\r' && i + 1 == len && dot && !ended) {
			break;		/* pending: may yet be CR LF */
		} else if (c == '\r' || c == '\n') {
			i++;
			*bare = 1;
		} else {
			if (line == o && c == '.')
				*dotlines = 1;
			out[o++] = c;
			i++;
			continue;
		}
		out[o++] = '\r';
		out[o++] = '\n';
		line = o;
		bol = 1;
	}
	if (!dot && o > line) {
		out[o++] = '\r';
		out[o++] = '\n';
	}
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smtp_data_limits lim;
	enum smtp_data_mode mode;
	struct smtp_data *sd;
	struct run a, b, c;
	const char *in;
	char *ref;
	size_t len, reflen, end, content;
	unsigned seed;
	int bare, dotlines, eight = 0;

	if (size < 4)
		return 0;
	mode = data[0] & 1 ? SMTP_DATA_BDAT : SMTP_DATA_DOT;
	lim.normalize = data[0] >> 1 & 1;
	lim.max_line = data[0] & 4 ? data[1] : 0;
	lim.max_size = data[0] & 8 ? data[2] : 0;
	seed = data[3];
	in = (const char *)data + 4;
	len = size - 4;

	a.out = malloc(2 * len + 2);
	b.out = malloc(2 * len + 2);
	c.out = malloc(2 * len + 2);
	ref = malloc(2 * len + 2);
	if (!a.out || !b.out || !c.out || !ref)
		abort();

	sd = smtp_data_new(mode, &lim);
	feed(sd, in, len, 0, 0, 65536, &a);
	smtp_data_free(&sd);
	check(sd == NULL);
	sd = smtp_data_new(mode, &lim);
	feed(sd, in, len, 1, 0, 2, &b);
	same(&a, &b);
	smtp_data_reset(sd, mode);
	feed(sd, in, len, 1 + seed % 64, seed, 2 + seed % 13, &c);
	same(&a, &c);
	smtp_data_free(&sd);

	/* Where it ends: exactly at the first end marker, never in BDAT. */
	end = mode == SMTP_DATA_DOT ? marker(in, len) : NOT_ENDED;
	check(a.end == end);
	content = end == NOT_ENDED ? len : end - 3;

	/* What it produces: the model's canonical form, or a prefix of it. */
	reflen = model(in, content, mode == SMTP_DATA_DOT, end != NOT_ENDED, ref, &bare, &dotlines);
	check(a.outlen <= reflen && memcmp(a.out, ref, a.outlen) == 0);
	check(a.size == reflen);
	check(a.dotlines == dotlines);
	if (a.errors == 0)
		check(a.outlen == reflen);
	check((a.errors & (a.errors - 1)) == 0);
	check(!bare || lim.normalize || a.errors != 0);
	check(a.errors != SMTP_DATA_ERR_BARE || (bare && !lim.normalize));
	if (lim.max_size)
		check(a.outlen <= lim.max_size);
	for (size_t i = 0; i < (end == NOT_ENDED ? len : end); i++)
		eight |= (unsigned char)in[i] >= 0x80;
	check(a.eightbit == eight);
	for (size_t i = 0; i < a.outlen; i++) {
		if (a.out[i] == '\r')
			check(i + 1 < a.outlen && a.out[i + 1] == '\n');
		if (a.out[i] == '\n')
			check(i > 0 && a.out[i - 1] == '\r');
	}
	free(a.out);
	free(b.out);
	free(c.out);
	free(ref);
	return 0;
}
