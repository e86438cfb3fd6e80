/* json_text.h - text of unknown encoding as a JSON string; a JSON
 * document whose numbers are written in their shortest round-trip form */
#ifndef TERN_JSON_TEXT_H
#define TERN_JSON_TEXT_H

#include <jansson.h>

json_t *json_text(const char *s);
char *json_dumps_short(const json_t *o, size_t flags);
int json_real_shortest(double x, char *buf, size_t len);

#endif
