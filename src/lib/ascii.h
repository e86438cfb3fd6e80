/*
 * ascii.h - locale-independent ASCII helpers for the protocol parsers:
 * SMTP keywords are compared without regard to ASCII case, whatever the
 * process locale says about other octets.
 */
#ifndef TERN_ASCII_H
#define TERN_ASCII_H

#include <stddef.h>

/* ascii_lc - ASCII lower case, whatever the locale */
static inline int ascii_lc(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* ascii_word_is - does the counted string equal word, ASCII case-insensitive */
static inline int ascii_word_is(const char *p, size_t n, const char *word)
{
	size_t i;

	for (i = 0; i < n && word[i] != '\0'; i++)
		if (ascii_lc((unsigned char)p[i]) != ascii_lc((unsigned char)word[i]))
			return 0;
	return i == n && word[i] == '\0';
}

#endif
