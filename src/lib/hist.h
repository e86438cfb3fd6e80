/*
 * hist - what happened to mail, kept after it has left the queue, for
 * ternq trace and tern-report: ternd's delivery history (an acceptance,
 * then one record per delivery attempt) and the milter's journal (one
 * record per message the milter decided on).
 *
 * Plain data only, shared by ternd, the milter, ternq and tern-report;
 * how it is kept is store_hist.c's and store_journal.c's business, how it
 * is encoded is store_codec.c's. It never includes the queue model
 * (queue.h): the milter sees only this.
 */
#ifndef TERN_HIST_H
#define TERN_HIST_H

#include <stdint.h>

#include "qid.h"

enum hist_kind { HIST_ACCEPT = 1, HIST_ATTEMPT = 2 };
enum hist_tls { HIST_TLS_NONE, HIST_TLS_FULL, HIST_TLS_RESUMED };
#define HIST_EXPIRED 4			/* attempt state: bounced by max_queue_lifetime */

struct hist_rec {
	uint8_t kind;			/* enum hist_kind */
	uint8_t state;			/* attempt: enum rcpt_state (queue.h) or HIST_EXPIRED */
	uint8_t tls;			/* attempt: enum hist_tls */
	uint16_t code;			/* attempt: reply code, 0 if none */
	uint32_t idx;			/* attempt: recipient index */
	uint32_t nrcpt;			/* acceptance: recipients */
	uint32_t conn_use;		/* attempt: transaction number on the connection */
	uint64_t time_us;
	uint64_t size;			/* acceptance */
	uint64_t delays_us[4];		/* attempt: before, rate wait, connection setup, transmission */
	unsigned char trace_id[16];
	unsigned char span_id[8];
	unsigned char link_trace_id[16];	/* acceptance: as q_msg's, zeros if none */
	unsigned char link_span_id[8];
	char qid[QID_LEN + 1];
	char *sender, *msgid, *client;	/* acceptance, else "" */
	char *rcpt;			/* attempt: the recipient; acceptance: all, one per line */
	char *peer, *relay, *dsn, *reply, *peer_qid;	/* attempt, else "" */
};

/* the milter's journal: one record per message it saw */
struct journal_rec {
	uint64_t time_us;
	unsigned char trace_id[16];
	unsigned char span_id[8];	/* the span the milter put in Traceparent */
	unsigned char parent_id[8];	/* a continued trace's previous span, or zeros */
	uint32_t nrcpt;
	char *mta_qid;			/* Postfix's {i}, or "" */
	char *client, *sender, *verdict;
};

const char *hist_state_name(unsigned state);
void hist_rec_clear(struct hist_rec *h);
void journal_rec_clear(struct journal_rec *j);

#endif
