/*
 * smtp_data - the message content reader for DATA and BDAT: a pure state
 * machine that turns what the client sends into the canonical form tern
 * spools (CRLF line ends, not dot-stuffed), with no I/O and no allocation
 * beyond its own small state.
 *
 * DATA: the content ends only at CR LF "." CR LF (or "." CR LF as the
 * very first line). "<LF>.<LF>", "<CR>.<CR>", "<LF>.<CR><LF>" and every
 * other smuggling form never end it. Lines that start with "." lose that
 * first dot (RFC 5321 4.5.2).
 * BDAT: the caller pushes exactly the chunk's octets; nothing ends the
 * content but smtp_data_finish() after the LAST chunk.
 *
 * A bare LF or bare CR in the content is an error (SMTP_DATA_ERR_BARE)
 * unless normalize is set, in which case it becomes CRLF. Errors do not
 * stop the reader: it goes on consuming up to the end of the content (so
 * the session stays in step with the client) but produces no more output.
 * The caller replies once the content has ended, by the first error:
 * SIZE 552 5.3.4, LINE 554 5.6.0, BARE 550 5.6.2.
 */
#ifndef TERN_SMTP_DATA_H
#define TERN_SMTP_DATA_H

#include <stddef.h>

#define SMTP_DATA_ERR_SIZE 0x01		/* more than max_size octets of content */
#define SMTP_DATA_ERR_LINE 0x02		/* a line longer than max_line octets */
#define SMTP_DATA_ERR_BARE 0x04		/* bare CR or LF (and normalize is off) */

enum smtp_data_mode { SMTP_DATA_DOT, SMTP_DATA_BDAT };

struct smtp_data_limits {
	unsigned long long max_size;	/* canonical octets; 0 = no limit */
	size_t max_line;		/* octets without CRLF; 0 = no limit */
	int normalize;			/* bare CR/LF become CRLF instead of an error */
};

struct smtp_data;

struct smtp_data *smtp_data_new(enum smtp_data_mode mode, const struct smtp_data_limits *limits);
void smtp_data_reset(struct smtp_data *sd, enum smtp_data_mode mode);

/*
 * smtp_data_push - consume input, produce canonical output. Returns 1 when
 * the end of DATA content was consumed (never in BDAT mode), else 0.
 * *consumed <= inlen input octets were used (after the end, the rest
 * belongs to the next command); *produced <= outcap octets were written.
 * When out fills up, it returns 0 with *consumed < inlen: call again.
 * outcap must be at least 2.
 */
int smtp_data_push(struct smtp_data *sd, const char *in, size_t inlen, size_t *consumed,
		   char *out, size_t outcap, size_t *produced);

/* smtp_data_finish - BDAT LAST: flush a pending CR; returns octets produced */
size_t smtp_data_finish(struct smtp_data *sd, char *out, size_t outcap);

unsigned smtp_data_errors(const struct smtp_data *sd);
unsigned long long smtp_data_size(const struct smtp_data *sd);	/* canonical octets */
int smtp_data_dotlines(const struct smtp_data *sd);	/* a canonical line starts with '.' */
int smtp_data_8bit(const struct smtp_data *sd);		/* an octet above 127 was seen */
void smtp_data_free(struct smtp_data **sd);

/* smtp_data_scan - what smtp_data_dotlines() and smtp_data_8bit() say of
 * content that is canonical already, read in one call */
void smtp_data_scan(const char *p, size_t len, int *dotlines, int *eightbit);

#endif
