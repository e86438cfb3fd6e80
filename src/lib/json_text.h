/* json_text.h - text of unknown encoding as a JSON string */
#ifndef TERN_JSON_TEXT_H
#define TERN_JSON_TEXT_H

#include <jansson.h>

json_t *json_text(const char *s);

#endif
