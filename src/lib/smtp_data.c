/*
 * smtp_data - DATA and BDAT content into canonical form (CRLF line ends,
 * no dot-stuffing), as a state machine over raw octets: chunk boundaries
 * may fall anywhere, even inside CR LF "." CR LF.
 *
 * It must never end DATA on anything but CR LF "." CR LF (or "." CR LF
 * first), whatever normalize says; never write more than outcap octets
 * or read more than inlen; never hold output it could not write (an input
 * octet is consumed only once what it produces fits). No I/O, and the
 * only allocation is the object itself.
 *
 * Decisions the header leaves open:
 * - NUL is plain data, no error (Postfix passes it too): it is no line
 *   end, so "\r\n\0.\r\n" and "\r\n.\0\r\n" are content.
 * - A line start is "strict" after a real CR LF (or at the start) and
 *   "loose" after a bare CR or LF. "." is unstuffed at both (a client
 *   that ends lines with LF also stuffs them), but only a strict "."
 *   CR LF ends DATA. Normalize changes output and errors, never where
 *   the content ends.
 * - BDAT: smtp_data_finish() appends CR LF to a last line without one,
 *   so that every spooled body is canonical (an RFC 5322 message is
 *   lines that end in CR LF). The appended octets count in the size
 *   limit. In DATA mode smtp_data_finish() does nothing.
 * - Errors: only the first is kept, so smtp_data_errors() has at most
 *   one bit. Output stops at the octet that passes a limit (a CR LF is
 *   written whole or not at all), so it never depends on how the input
 *   was cut. Size (a bare CR or LF counting as CR LF), 8bit and dotlines
 *   go on being counted after an error.
 * - Misuse: outcap < 2 fails with -1 and EINVAL (finish: 0 and EINVAL,
 *   nothing done); push after the end (or after finish) returns 1 and
 *   consumes nothing.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smtp_data.h"
#include "xalloc.h"

enum data_state {
	S_BOL_STRICT,			/* line start after CR LF, or content start */
	S_BOL_LOOSE,			/* line start after a bare CR or LF */
	S_DOT,				/* strict line start, "." seen */
	S_DOT_CR,			/* strict line start, "." CR seen */
	S_TEXT,				/* inside a line */
	S_CR,				/* inside a line, CR seen */
	S_END,				/* DATA ended, or BDAT finished */
};

struct smtp_data {
	struct smtp_data_limits limits;
	enum smtp_data_mode mode;
	enum data_state state;
	unsigned errors;		/* the first error only */
	unsigned long long size;	/* canonical octets */
	size_t line_len;		/* octets in the current line */
	int dotlines;
	int eightbit;
};

/* smtp_data_new - a reader for one message's content */
struct smtp_data *smtp_data_new(enum smtp_data_mode mode, const struct smtp_data_limits *limits)
{
	struct smtp_data *sd = xcalloc(1, sizeof(*sd));

	sd->limits = *limits;
	smtp_data_reset(sd, mode);
	return sd;
}

/* smtp_data_reset - start over for the next message, same limits */
void smtp_data_reset(struct smtp_data *sd, enum smtp_data_mode mode)
{
	sd->mode = mode;
	sd->state = S_BOL_STRICT;
	sd->errors = 0;
	sd->size = 0;
	sd->line_len = 0;
	sd->dotlines = 0;
	sd->eightbit = 0;
}

/* fail - note an error unless one is noted already */
static void fail(struct smtp_data *sd, unsigned err)
{
	if (sd->errors == 0)
		sd->errors = err;
}

/* account - count n canonical octets against max_size */
static void account(struct smtp_data *sd, size_t n)
{
	if (sd->limits.max_size && n > sd->limits.max_size - sd->size)
		fail(sd, SMTP_DATA_ERR_SIZE);
	sd->size += n;
}

/* any_8bit - does p[0..n) hold an octet above 127; a word at a time */
static int any_8bit(const char *p, size_t n)
{
	const uint64_t high = 0x8080808080808080ULL;
	uint64_t acc = 0, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		acc |= w;
	}
	for (; i < n; i++)
		acc |= (unsigned char)p[i];
	return (acc & high) != 0;
}

/*
 * text - n octets of a line, none of them CR or LF. When a limit is
 * passed inside the run, the octets before that point are still written,
 * so that the output does not depend on where the input was cut.
 */
static void text(struct smtp_data *sd, const char *p, size_t n, char *out, size_t *o)
{
	const struct smtp_data_limits *l = &sd->limits;
	size_t keep = n;
	unsigned err = 0;

	if (sd->line_len == 0 && p[0] == '.')
		sd->dotlines = 1;
	if (!sd->eightbit)
		sd->eightbit = any_8bit(p, n);
	if (l->max_line && n > l->max_line - sd->line_len) {
		keep = l->max_line - sd->line_len;
		err = SMTP_DATA_ERR_LINE;
	}
	if (l->max_size && n > l->max_size - sd->size && l->max_size - sd->size < keep) {
		keep = (size_t)(l->max_size - sd->size);
		err = SMTP_DATA_ERR_SIZE;
	}
	if (sd->errors == 0) {
		memcpy(out + *o, p, keep);
		*o += keep;
	}
	if (err)
		fail(sd, err);
	sd->line_len = n > SIZE_MAX - sd->line_len ? SIZE_MAX : sd->line_len + n;
	sd->size += n;
}

/*
 * end_line - the line ends: a CR LF, or a bare CR or LF (bare). Writes
 * CR LF; returns 0, changing nothing, when out has no room for it.
 */
static int end_line(struct smtp_data *sd, int bare, char *out, size_t outcap, size_t *o)
{
	if (sd->errors == 0 && outcap - *o < 2)
		return 0;
	if (bare && !sd->limits.normalize)
		fail(sd, SMTP_DATA_ERR_BARE);
	account(sd, 2);
	if (sd->errors == 0) {
		out[(*o)++] = '\r';
		out[(*o)++] = '\n';
	}
	sd->line_len = 0;
	sd->state = bare ? S_BOL_LOOSE : S_BOL_STRICT;
	return 1;
}

/* smtp_data_push - consume input, produce canonical output */
int smtp_data_push(struct smtp_data *sd, const char *in, size_t inlen, size_t *consumed,
		   char *out, size_t outcap, size_t *produced)
{
	size_t i = 0, o = 0;
	int done = 0;

	*consumed = *produced = 0;
	if (outcap < 2) {
		errno = EINVAL;
		return -1;
	}
	if (sd->state == S_END)
		return 1;
	while (i < inlen && !done) {
		unsigned char c = (unsigned char)in[i];

		switch (sd->state) {
		case S_BOL_STRICT:
		case S_BOL_LOOSE:
			/* Only a strict "." may go on to end DATA. */
			if (sd->mode == SMTP_DATA_DOT && c == '.') {
				i++;
				sd->state = sd->state == S_BOL_STRICT ? S_DOT : S_TEXT;
			} else {
				sd->state = S_TEXT;
			}
			break;
		case S_DOT:
			if (c == '\r') {
				i++;
				sd->state = S_DOT_CR;
			} else {
				sd->state = S_TEXT;	/* the dot was stuffing */
			}
			break;
		case S_DOT_CR:
			if (c == '\n') {
				i++;
				sd->state = S_END;
				done = 1;
			} else if (!end_line(sd, 1, out, outcap, &o)) {
				goto full;	/* "." then a bare CR: an empty line */
			}
			break;
		case S_CR:
			if (!end_line(sd, c != '\n', out, outcap, &o))
				goto full;
			if (c == '\n')
				i++;
			break;
		case S_TEXT:
			if (c == '\r') {
				i++;
				sd->state = S_CR;
			} else if (c == '\n') {
				if (!end_line(sd, 1, out, outcap, &o))
					goto full;
				i++;
			} else {
				/* The hot path: a run up to the next CR or LF. */
				size_t win = inlen - i, n;
				const char *p = in + i, *lf, *cr;

				if (sd->errors == 0 && win > outcap - o)
					win = outcap - o;
				if (win == 0)
					goto full;
				lf = memchr(p, '\n', win);
				n = lf ? (size_t)(lf - p) : win;
				cr = memchr(p, '\r', n);
				if (cr)
					n = (size_t)(cr - p);
				text(sd, p, n, out, &o);
				i += n;
				/* Most runs end in CR LF: take it at once. */
				if (inlen - i >= 2 && in[i] == '\r' && in[i + 1] == '\n'
				    && end_line(sd, 0, out, outcap, &o))
					i += 2;
			}
			break;
		case S_END:
			done = 1;
			break;
		}
	}
full:
	*consumed = i;
	*produced = o;
	return sd->state == S_END;
}

/* smtp_data_finish - BDAT LAST: flush a pending CR; returns octets produced */
size_t smtp_data_finish(struct smtp_data *sd, char *out, size_t outcap)
{
	size_t o = 0;

	if (sd->mode != SMTP_DATA_BDAT || sd->state == S_END)
		return 0;
	if (outcap < 2) {
		errno = EINVAL;
		return 0;
	}
	if (sd->state == S_CR)
		(void)end_line(sd, 1, out, outcap, &o);	/* a CR at the very end is bare */
	else if (sd->line_len > 0)
		(void)end_line(sd, 0, out, outcap, &o);	/* last line without CR LF */
	sd->state = S_END;
	return o;
}

/* smtp_data_scan - dotlines and 8bit of content ternd wrote itself (a
 * DSN), found by a reader in BDAT mode as for received content; the
 * canonical output is discarded */
void smtp_data_scan(const char *p, size_t len, int *dotlines, int *eightbit)
{
	struct smtp_data sd = {0};	/* no limits */
	char out[4096];

	smtp_data_reset(&sd, SMTP_DATA_BDAT);
	while (len > 0) {
		size_t used, made;

		(void)smtp_data_push(&sd, p, len, &used, out, sizeof(out), &made);
		p += used;
		len -= used;
	}
	(void)smtp_data_finish(&sd, out, sizeof(out));
	*dotlines = sd.dotlines;
	*eightbit = sd.eightbit;
}

/* smtp_data_errors - SMTP_DATA_ERR_* of the first error, 0 if none */
unsigned smtp_data_errors(const struct smtp_data *sd)
{
	return sd->errors;
}

/* smtp_data_size - canonical octets so far */
unsigned long long smtp_data_size(const struct smtp_data *sd)
{
	return sd->size;
}

/* smtp_data_dotlines - did a canonical line start with '.' */
int smtp_data_dotlines(const struct smtp_data *sd)
{
	return sd->dotlines;
}

/* smtp_data_8bit - was an octet above 127 seen */
int smtp_data_8bit(const struct smtp_data *sd)
{
	return sd->eightbit;
}

/* smtp_data_free - destroy a reader; *sd becomes NULL */
void smtp_data_free(struct smtp_data **sd)
{
	free(*sd);
	*sd = NULL;
}
