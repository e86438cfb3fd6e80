/*
 * hist - helpers of the history record types (hist.h): free a record's
 * strings, name an attempt's outcome. Plain data in, no I/O, no LMDB
 * (that is store_hist.c's and store_journal.c's).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "queue.h"

/* hist_state_name - an attempt's outcome as logs show it */
const char *hist_state_name(unsigned state)
{
	return state == HIST_EXPIRED ? "expired" : rcpt_state_name((enum rcpt_state)state);
}

/* hist_rec_clear - free a history record's strings and zero it */
void hist_rec_clear(struct hist_rec *h)
{
	char **s[] = {&h->sender, &h->msgid, &h->client, &h->rcpt, &h->peer, &h->relay,
		      &h->dsn, &h->reply, &h->peer_qid};

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		free(*s[i]);
	memset(h, 0, sizeof(*h));
}

/* journal_rec_clear - free a journal record's strings and zero it */
void journal_rec_clear(struct journal_rec *j)
{
	free(j->mta_qid);
	free(j->client);
	free(j->sender);
	free(j->verdict);
	memset(j, 0, sizeof(*j));
}
