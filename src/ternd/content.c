/*
 * content - a message's content as an inbound session receives it: our
 * Received: field first, then the canonical octets smtp_data gives, in
 * memory up to large_message_threshold and past it in a spool file of
 * the message's own (spool_own_*), with the digest and the first
 * CONTENT_PEEK octets (for the Traceparent and Message-ID checks) taken
 * on the way. Writes to that file may wait for the disk, so they run on
 * a helper thread (fiber_blocking), never on the session's loop. It
 * never answers the client and never talks to the committer: session.c
 * does both, with what content_seal and content_iov give it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "content.h"
#include "fiber.h"
#include "log.h"
#include "spool.h"
#include "ternd.h"
#include "xalloc.h"

/* content_init - an empty content, no file */
void content_init(struct content *ct)
{
	memset(ct, 0, sizeof(*ct));
	ct->own_fd = -1;
}

/* content_begin - a new message, opened by our Received: field, which
 * the session has written in ct->received (len octets); qid names its
 * own file if it needs one */
void content_begin(struct content *ct, const char *qid, size_t len)
{
	ct->received_len = len < sizeof(ct->received) ? len : sizeof(ct->received);
	ct->qid = qid;
	crypto_generichash_init(&ct->hash, NULL, 0, Q_DIGEST_BYTES);
	crypto_generichash_update(&ct->hash, (const unsigned char *)ct->received, ct->received_len);
	ct->body_len = ct->peek_len = 0;
}

/* own_write - append octets to the message's own spool file */
static int own_write(struct content *ct, const char *p, size_t n)
{
	if (spool_own_write(ct->own_fd, p, n) < 0)
		return -1;
	ct->own_len += n;
	return 0;
}

/* spill - move what is in memory to the file of its own, made first */
static int spill(struct content *ct)
{
	if (ct->own_fd < 0) {
		if ((ct->own_fd = spool_own_create(ternd.spool, ct->qid)) < 0)
			return -1;
		if (own_write(ct, ct->received, ct->received_len) < 0)
			return -1;
		ct->own_len = 0;	/* counts content only */
	}
	if (own_write(ct, ct->body, ct->body_len) < 0)
		return -1;
	ct->body_len = 0;
	return 0;
}

/* A spill as a helper thread runs it (fiber_blocking). */
struct spill_call {
	struct content *ct;
	const char *p;
	size_t n;		/* octets written after the spill, straight from p */
	int sync;		/* then fdatasync the file */
};

/* spill_run - the spill_call's work */
static int spill_run(void *arg)
{
	struct spill_call *c = arg;

	if (spill(c->ct) < 0 || (c->n > 0 && own_write(c->ct, c->p, c->n) < 0))
		return -1;
	return c->sync ? fdatasync(c->ct->own_fd) : 0;
}

/* content_add - n canonical octets: in memory up to threshold, then in
 * the file of its own; a failed write is logged once, and content_seal
 * refuses the message */
void content_add(struct content *ct, const char *p, size_t n, size_t threshold)
{
	crypto_generichash_update(&ct->hash, (const unsigned char *)p, n);
	if (ct->peek == NULL)
		ct->peek = xmalloc(CONTENT_PEEK);
	if (ct->peek_len < CONTENT_PEEK) {
		size_t k = n < CONTENT_PEEK - ct->peek_len ? n : CONTENT_PEEK - ct->peek_len;

		memcpy(ct->peek + ct->peek_len, p, k);
		ct->peek_len += k;
	}
	if (ct->own_failed)
		return;
	if (ct->own_fd < 0 && ct->body_len + n > ct->body_cap && ct->body_cap < threshold) {
		size_t want = ct->body_cap ? ct->body_cap : 65536;

		while (want < ct->body_len + n && want < threshold)
			want *= 2;
		if (want > threshold)
			want = threshold;
		ct->body = xreallocarray(ct->body, want, 1);
		ct->body_cap = want;
	}
	if (ct->body_len + n <= ct->body_cap) {
		memcpy(ct->body + ct->body_len, p, n);
		ct->body_len += n;
		return;
	}
	struct spill_call c = {ct, p, n > ct->body_cap ? n : 0, 0};

	if (fiber_blocking(spill_run, &c) < 0) {
		log_error("%s: cannot write spool file: %s", ct->qid, strerror(errno));
		ct->own_failed = 1;
		return;
	}
	if (n <= ct->body_cap) {
		memcpy(ct->body, p, n);
		ct->body_len = n;
	}
}

/* content_size - the message's size as stored, Received: field included */
uint64_t content_size(const struct content *ct)
{
	return ct->received_len + ct->own_len + ct->body_len;	/* own_len: content spilled */
}

/* content_seal - the content is complete: its digest, and a file of its
 * own written whole and synced (the committer's fsync names it); -1
 * (logged) when that file cannot be */
int content_seal(struct content *ct, unsigned char *digest, size_t digest_len)
{
	struct spill_call c = {ct, NULL, 0, 1};

	crypto_generichash_final(&ct->hash, digest, digest_len);
	if (ct->own_fd < 0)
		return 0;
	if (ct->own_failed || fiber_blocking(spill_run, &c) < 0) {
		log_error("%s: cannot write spool file: %s", ct->qid, strerror(errno));
		return -1;
	}
	return 0;
}

/* content_iov - a content in memory as the committer appends it (two
 * iovecs: the Received: field and the rest); 0 for one in its own file */
size_t content_iov(struct content *ct, struct iovec *iov)
{
	if (ct->own_fd >= 0)
		return 0;
	iov[0].iov_base = ct->received;
	iov[0].iov_len = ct->received_len;
	iov[1].iov_base = ct->body;
	iov[1].iov_len = ct->body_len;
	return 2;
}

/* content_committed - the message is queued: its own file, if any, is
 * the queue's now */
void content_committed(struct content *ct)
{
	if (ct->own_fd >= 0) {
		close(ct->own_fd);
		ct->own_fd = -1;
	}
}

/* own_remove - close and remove a partial own file (fiber_blocking:
 * freeing a large file's blocks may wait for the file system's journal) */
static int own_remove(void *arg)
{
	struct content *ct = arg;

	close(ct->own_fd);
	return spool_own_remove(ternd.spool, ct->qid);
}

/* content_reset - forget the message; remove a partial own file */
void content_reset(struct content *ct)
{
	if (ct->own_fd >= 0) {
		fiber_blocking(own_remove, ct);
		ct->own_fd = -1;
	}
	ct->body_len = ct->peek_len = ct->received_len = 0;
	free(ct->peek);
	ct->peek = NULL;
	ct->own_len = 0;
	ct->own_failed = 0;
}

/* content_free - content_reset, and the memory buffer given back */
void content_free(struct content *ct)
{
	content_reset(ct);
	free(ct->body);
	ct->body = NULL;
	ct->body_cap = 0;
}
