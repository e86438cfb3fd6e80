/*
 * qid - queue ids: unique, never reused, sortable by arrival.
 *
 * Formatting and parsing are pure; only qid_next() takes a lock.
 */
#include "config.h"

#include <string.h>

#include "qid.h"

#define QID_COUNTER_BITS 12

static const char qid_alphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/* qid_gen_init - start after the last id ever issued */
void qid_gen_init(struct qid_gen *gen, uint64_t last_issued)
{
	pthread_mutex_init(&gen->lock, NULL);
	gen->last = last_issued;
}

/* qid_next - a new id at time now_us (or later, to stay unique); returns its value */
uint64_t qid_next(struct qid_gen *gen, uint64_t now_us, char out[QID_LEN + 1])
{
	uint64_t v = now_us << QID_COUNTER_BITS;

	pthread_mutex_lock(&gen->lock);
	if (v <= gen->last)
		v = gen->last + 1;
	gen->last = v;
	pthread_mutex_unlock(&gen->lock);
	qid_format(v, out);
	return v;
}

/* qid_format - 13 base32 characters, most significant first */
void qid_format(uint64_t value, char out[QID_LEN + 1])
{
	for (int i = QID_LEN - 1; i >= 0; i--) {
		out[i] = qid_alphabet[value & 31];
		value >>= 5;
	}
	out[QID_LEN] = '\0';
}

/* qid_parse - the value of a queue id; -1 if s is not one */
int qid_parse(const char *s, uint64_t *value)
{
	uint64_t v = 0;

	if (strlen(s) != QID_LEN || strchr("0123456789ABCDEF", s[0]) == NULL)
		return -1;	/* 65 bits would not fit */
	for (int i = 0; i < QID_LEN; i++) {
		const char *p = s[i] ? strchr(qid_alphabet, s[i]) : NULL;

		if (p == NULL)
			return -1;
		v = v << 5 | (uint64_t)(p - qid_alphabet);
	}
	*value = v;
	return 0;
}

/* qid_time_us - the arrival time an id encodes */
uint64_t qid_time_us(uint64_t value)
{
	return value >> QID_COUNTER_BITS;
}
