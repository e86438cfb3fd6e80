/* content.h - a message's content as an inbound session receives it */
#ifndef TERND_CONTENT_H
#define TERND_CONTENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <sodium.h>

#define CONTENT_PEEK 65536	/* the first octets kept for the headers' checks */
#define CONTENT_RECEIVED_MAX 1024

struct content {
	const char *qid;		/* the transaction's, from content_begin */
	char received[CONTENT_RECEIVED_MAX];	/* our Received: field, first */
	size_t received_len;
	char *body;			/* in memory up to the threshold */
	size_t body_len, body_cap;
	int own_fd;			/* else a spool file of its own; -1: none */
	int own_failed;			/* a write to it failed: refused at the end */
	uint64_t own_len;		/* content octets in that file */
	char *peek;			/* the first CONTENT_PEEK octets (NULL
					 * between messages) */
	size_t peek_len;
	crypto_generichash_state hash;
};

void content_init(struct content *ct);
void content_begin(struct content *ct, const char *qid, size_t len);
void content_add(struct content *ct, const char *p, size_t n, size_t threshold);
uint64_t content_size(const struct content *ct);
int content_seal(struct content *ct, unsigned char *digest, size_t digest_len);
size_t content_iov(struct content *ct, struct iovec *iov);
void content_committed(struct content *ct);
void content_reset(struct content *ct);
void content_free(struct content *ct);

#endif
