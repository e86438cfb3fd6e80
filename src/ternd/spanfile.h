/*
 * spanfile - ternd's otlp_spans_file: the OTLP/JSON lines of delivery
 * attempts (formatted by lib/otlp), written by a thread of their own so
 * that delivery never waits on the file.
 */
#ifndef TERN_SPANFILE_H
#define TERN_SPANFILE_H

#include "conf.h"

void spanfile_open(const struct conf *conf);
int spanfile_enabled(void);
void spanfile_add(char *line);
void spanfile_start(void);
void spanfile_stop(void);

#endif
