/*
 * qid - queue ids: unique, never reused, sortable by arrival.
 *
 * A queue id is 13 characters of Crockford-style base32 (0-9, A-Z less
 * I, L, O, U) over 64 bits: microseconds since the epoch (52 bits) and a
 * 12-bit counter. The generator is a logical clock: it never goes
 * backwards, even if the system clock does, and it resumes after the
 * last id the queue ever issued (qid_gen_init), so ids are never reused.
 */
#ifndef TERN_QID_H
#define TERN_QID_H

#include <pthread.h>
#include <stdint.h>

#define QID_LEN 13

struct qid_gen {
	pthread_mutex_t lock;
	uint64_t last;
};

void qid_gen_init(struct qid_gen *gen, uint64_t last_issued);
uint64_t qid_next(struct qid_gen *gen, uint64_t now_us, char out[QID_LEN + 1]);
void qid_format(uint64_t value, char out[QID_LEN + 1]);
int qid_parse(const char *s, uint64_t *value);
uint64_t qid_time_us(uint64_t value);

#endif
