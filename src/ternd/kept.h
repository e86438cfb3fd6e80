/*
 * kept.h - outcomes of delivery attempts the committer could not record,
 * kept in memory so that their messages are not sent again (kept.c).
 */
#ifndef TERN_KEPT_H
#define TERN_KEPT_H

struct result;

/* Outcomes kept in memory at most; past it, one is not kept (logged): its
 * message stays due in the queue database and may be sent again. */
#define KEPT_MAX 4096

int kept_add(struct result *res, const char *peer, const char *why);
int kept_has(const char *qid);
void kept_retry(void);

#endif
