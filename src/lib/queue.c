/*
 * queue - the queue model's helpers: free a message's or a recipient's
 * strings, name a recipient's state. Plain data in, no I/O, no LMDB
 * (that is store_queue.c's).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "queue.h"

/* rcpt_state_name - the name of a recipient state in ternq and logs */
const char *rcpt_state_name(enum rcpt_state state)
{
	static const char *const names[] = {"queued", "deferred", "sent", "bounced"};

	return (unsigned)state <= RCPT_BOUNCED ? names[state] : "unknown";
}

/* q_msg_clear - free a message's strings and zero it */
void q_msg_clear(struct q_msg *m)
{
	free(m->sender);
	free(m->envid);
	free(m->helo);
	free(m->client);
	memset(m, 0, sizeof(*m));
}

/* q_rcpt_clear - free a recipient's strings and zero it */
void q_rcpt_clear(struct q_rcpt *r)
{
	free(r->addr);
	free(r->orcpt);
	free(r->peer);
	free(r->reply);
	memset(r, 0, sizeof(*r));
}

/* q_rcpts_free - free an array of recipients */
void q_rcpts_free(struct q_rcpt **rcpts, size_t n)
{
	for (size_t i = 0; *rcpts && i < n; i++)
		q_rcpt_clear(&(*rcpts)[i]);
	free(*rcpts);
	*rcpts = NULL;
}
