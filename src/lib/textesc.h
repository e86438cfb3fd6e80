/*
 * textesc - text that came with mail (addresses, Message-IDs, peer
 * replies, HELO names), made safe to show on a terminal and to write to a
 * log line: the one escaper that ternq, tern-report's text and the log
 * module share.
 *
 * Every octet below 0x20, DEL (0x7f), each C1 control (U+0080..U+009F,
 * which terminals take as ESC + letter) and each octet that is not part
 * of well-formed UTF-8 (stray continuations, overlongs, surrogates, past
 * U+10FFFF, cut sequences) is written as \xHH, lower-case hex. Printable
 * ASCII and well-formed UTF-8 stay as they are. Newlines and tabs are
 * escaped too: one value, one line.
 *
 * The flags add octets for a value with a place in a line:
 *   TEXTESC_VALUE  also '\', so the escaping can be undone
 *   TEXTESC_ADDR   also ',', '<' and '>': an address in to=<...>,
 *                  from=<...> can end neither the brackets nor the field
 *   TEXTESC_REPLY  also a ',' that would start ", name=": reply text in
 *                  a line's last parentheses cannot add a field
 * Escaped text escapes to itself under TEXTESC_LINE, so a line whose
 * values were escaped with a flag can go through TEXTESC_LINE whole.
 *
 * Pure: no I/O (apart from textesc_line), no allocation (apart from
 * textesc_line), no locale.
 */
#ifndef TERN_TEXTESC_H
#define TERN_TEXTESC_H

#include <stdio.h>
#include <stddef.h>

#define TEXTESC_LINE 0x00
#define TEXTESC_VALUE 0x01
#define TEXTESC_ADDR (0x02 | TEXTESC_VALUE)
#define TEXTESC_REPLY (0x04 | TEXTESC_VALUE)

/* room for any text of n octets, escaped, and its terminator */
#define TEXTESC_SIZE(n) (4 * (size_t)(n) + 1)

/*
 * textesc - s escaped into out (cap > 0 octets): cut before an escape or
 * a UTF-8 character that would not fit, never inside one; always
 * terminated. Returns out.
 */
char *textesc(char *out, size_t cap, const char *s, unsigned flags);

/* textesc_line - one line to a stream: formatted, escaped whole
 * (TEXTESC_LINE, newlines in it included), then a newline */
void textesc_line(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
