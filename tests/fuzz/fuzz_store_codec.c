/*
 * fuzz_store_codec - libFuzzer target: queue records from a hostile
 * database. Arbitrary bytes are decoded as a message, a recipient, a
 * history record and a milter journal record;
 * whatever decodes must encode back to exactly the same bytes, and not
 * fit in one octet less. A message or recipient that decodes must also
 * keep the limits of the way in (smtp_cmd.h, smtp_reply.h): lengths, no
 * control octet in a string, counts and parameters in range; checked
 * here on their own, not with the codec's q_text_ok.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smtp_cmd.h"
#include "smtp_reply.h"
#include "store_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* reencode - the decoded record's encoding must be the input, exactly */
static void reencode(size_t (*enc)(const void *, unsigned char *, size_t), const void *rec,
		     const uint8_t *data, size_t size)
{
	unsigned char *buf = malloc(size + 1);

	if (buf == NULL)
		abort();
	if (enc(rec, buf, size + 1) != size || memcmp(buf, data, size) != 0)
		__builtin_trap();
	if (size > 0 && enc(rec, buf, size - 1) != 0)
		__builtin_trap();
	free(buf);
}

/* upgraded - a record of the older layout (version 1: a message or
 * history record without the trace link, a recipient without its flags)
 * decoded into rec is written in the current one (version 2): its
 * encoding must decode, and encode again to itself (size: the input's) */
static void upgraded(size_t (*enc)(const void *, unsigned char *, size_t),
		     int (*dec)(const unsigned char *, size_t, void *), void (*clear)(void *),
		     const void *rec, void *again, size_t size)
{
	size_t cap = size + 64, n, n2;	/* version 2 adds the 24-octet link */
	unsigned char *buf = malloc(cap), *buf2 = malloc(cap);

	if (buf == NULL || buf2 == NULL)
		abort();
	if ((n = enc(rec, buf, cap)) == 0 || buf[0] != 2 || dec(buf, n, again) != 0)
		__builtin_trap();
	n2 = enc(again, buf2, cap);
	if (n2 != n || memcmp(buf, buf2, n) != 0)
		__builtin_trap();
	clear(again);
	free(buf);
	free(buf2);
}

static int dec_msg(const unsigned char *b, size_t n, void *m)
{
	return q_msg_decode(b, n, m);
}

static int dec_hist(const unsigned char *b, size_t n, void *h)
{
	return hist_rec_decode(b, n, h);
}

static int dec_rcpt(const unsigned char *b, size_t n, void *r)
{
	return q_rcpt_decode_layout(b, n, r);
}

static void clear_msg(void *m)
{
	q_msg_clear(m);
}

static void clear_hist(void *h)
{
	hist_rec_clear(h);
}

static void clear_rcpt(void *r)
{
	q_rcpt_clear(r);
}

/* enc_msg, enc_rcpt - the encoders with one signature */
static size_t enc_msg(const void *m, unsigned char *buf, size_t cap)
{
	return q_msg_encode(m, buf, cap);
}

static size_t enc_rcpt(const void *r, unsigned char *buf, size_t cap)
{
	return q_rcpt_encode(r, buf, cap);
}

static size_t enc_hist(const void *h, unsigned char *buf, size_t cap)
{
	return hist_rec_encode(h, buf, cap);
}

static size_t enc_journal(const void *j, unsigned char *buf, size_t cap)
{
	return journal_rec_encode(j, buf, cap);
}

/* rcpt_again - a recipient of version 1 (no flags) is written as
 * version 2; one of the current layout encodes back to its input */
static void rcpt_again(const struct q_rcpt *r, const uint8_t *data, size_t size)
{
	if (data[0] == 1) {
		struct q_rcpt r2;

		upgraded(enc_rcpt, dec_rcpt, clear_rcpt, r, &r2, size);
	} else {
		reencode(enc_rcpt, r, data, size);
	}
}

/* text - s is at most max octets, with no octet below 32 and no DEL */
static int text(const char *s, size_t max)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 32 || (unsigned char)s[i] == 127)
			return 0;
	return n <= max;
}

/* msg_valid - a decoded message as smtp_cmd would have let it in */
static int msg_valid(const struct q_msg *m)
{
	return text(m->sender, SMTP_PATH_MAX - 2) && text(m->envid, SMTP_ENVID_MAX)
	       && text(m->helo, SMTP_DOMAIN_MAX) && text(m->client, Q_CLIENT_MAX)
	       && m->nlive <= m->nrcpt && m->body_type <= BODY_BINARYMIME && m->ret <= RET_HDRS;
}

/* rcpt_valid - a decoded recipient likewise */
static int rcpt_valid(const struct q_rcpt *r)
{
	return text(r->addr, SMTP_PATH_MAX - 2) && text(r->orcpt, SMTP_ORCPT_MAX)
	       && text(r->peer, SCHED_PEER_MAX) && text(r->reply, SMTP_REPLY_FORMAT_MAX - 1)
	       && r->state <= RCPT_BOUNCED && (r->notify & ~0x0fu) == 0
	       && (!(r->notify & NOTIFY_NEVER) || r->notify == NOTIFY_NEVER);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct q_msg m;
	struct q_rcpt r;
	struct hist_rec h;
	struct journal_rec j;

	if (q_msg_decode(data, size, &m) == 0) {
		if (strlen(m.qid) != QID_LEN || !m.sender || !m.envid || !m.helo || !m.client
		    || !msg_valid(&m))
			__builtin_trap();
		if (data[0] == 1) {
			struct q_msg m2;

			upgraded(enc_msg, dec_msg, clear_msg, &m, &m2, size);
		} else {
			reencode(enc_msg, &m, data, size);
		}
		q_msg_clear(&m);
	} else if (m.sender || m.envid || m.helo || m.client) {
		__builtin_trap();	/* a failed decode leaves nothing allocated */
	}
	if (q_rcpt_decode(data, size, &r) == 0) {
		if (r.state > RCPT_BOUNCED || !r.addr || !r.orcpt || !r.peer || !r.reply
		    || !rcpt_valid(&r))
			__builtin_trap();
		rcpt_again(&r, data, size);
		q_rcpt_clear(&r);
	} else if (r.addr || r.orcpt || r.peer || r.reply) {
		__builtin_trap();
	}
	/* what fails the checks but not the layout decodes without them */
	if (q_rcpt_decode_layout(data, size, &r) == 0) {
		if (!r.addr || !r.orcpt || !r.peer || !r.reply)
			__builtin_trap();
		rcpt_again(&r, data, size);
		q_rcpt_clear(&r);
	}
	if (hist_rec_decode(data, size, &h) == 0) {
		if (strlen(h.qid) != QID_LEN || h.state > HIST_EXPIRED || h.tls > HIST_TLS_RESUMED
		    || !h.sender || !h.rcpt || !h.reply || !h.peer_qid)
			__builtin_trap();
		if (data[0] == 1) {
			struct hist_rec h2;

			upgraded(enc_hist, dec_hist, clear_hist, &h, &h2, size);
		} else {
			reencode(enc_hist, &h, data, size);
		}
		hist_rec_clear(&h);
	} else if (h.sender || h.rcpt || h.reply || h.peer_qid) {
		__builtin_trap();
	}
	if (journal_rec_decode(data, size, &j) == 0) {
		if (!j.mta_qid || !j.client || !j.sender || !j.verdict)
			__builtin_trap();
		reencode(enc_journal, &j, data, size);
		journal_rec_clear(&j);
	} else if (j.mta_qid || j.client || j.sender || j.verdict) {
		__builtin_trap();
	}
	return 0;
}
