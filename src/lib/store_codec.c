/*
 * store_codec - the byte layout of queue records in LMDB.
 *
 * Layout: a version octet, then fields in a fixed order; integers are
 * little-endian of fixed width, strings a 16-bit length then the octets.
 * Adding a field means a new version; decoders accept the versions they
 * know. Must never read outside the buffer it was given.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "smtp_cmd.h"
#include "smtp_reply.h"
#include "store_codec.h"
#include "xalloc.h"

#define MSG_VERSION 2		/* 2: the trace link at the end; 1 still read */
#define RCPT_VERSION 2		/* 2: the flags at the end; 1 still read */
#define HIST_VERSION 2		/* 2: the trace link at the end; 1 still read */
#define JOURNAL_VERSION 1

struct wbuf {
	unsigned char *p;
	size_t len, cap;
	int overflow;
};

struct rbuf {
	const unsigned char *p;
	size_t len, off;
	int bad;
	int layout_only;		/* q_rcpt_decode_layout: contents unchecked */
};

/* put - append n octets */
static void put(struct wbuf *w, const void *src, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = 1;
		return;
	}
	memcpy(w->p + w->len, src, n);
	w->len += n;
}

/* put_uint - append an unsigned integer of width octets, little-endian */
static void put_uint(struct wbuf *w, uint64_t v, size_t width)
{
	unsigned char b[8];

	for (size_t i = 0; i < width; i++, v >>= 8)
		b[i] = (unsigned char)(v & 0xff);
	put(w, b, width);
}

/* put_str - append a length-prefixed string (NULL is "") */
static void put_str(struct wbuf *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n > 0xffff) {
		w->overflow = 1;
		return;
	}
	put_uint(w, n, 2);
	put(w, s ? s : "", n);	/* never memcpy from NULL, even 0 octets */
}

/* get - take n octets into dst */
static void get(struct rbuf *r, void *dst, size_t n)
{
	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		memset(dst, 0, n);
		return;
	}
	memcpy(dst, r->p + r->off, n);
	r->off += n;
}

/* get_uint - take an unsigned little-endian integer of width octets */
static uint64_t get_uint(struct rbuf *r, size_t width)
{
	unsigned char b[8];
	uint64_t v = 0;

	get(r, b, width);
	for (size_t i = width; i-- > 0;)
		v = v << 8 | b[i];
	return v;
}

/* get_str - take a length-prefixed string; NUL inside is corruption */
static char *get_str(struct rbuf *r)
{
	size_t n = (size_t)get_uint(r, 2);
	char *s;

	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		return xstrdup("");
	}
	s = xstrndup((const char *)r->p + r->off, n);
	if (strlen(s) != n)
		r->bad = 1;
	r->off += n;
	return s;
}

/* get_text - take a string that goes into SMTP commands, log lines and
 * DSNs: at most max octets and no control octet (CR, LF, NUL, ...), the
 * limits smtp_cmd and smtp_reply put on it on the way in */
static char *get_text(struct rbuf *r, size_t max)
{
	char *s = get_str(r);

	if (!r->layout_only && !q_text_ok(s, max))
		r->bad = 1;
	return s;
}

/* q_text_ok - s has at most max octets, none of them a control octet */
int q_text_ok(const char *s, size_t max)
{
	size_t n = 0;

	for (; s[n] != '\0'; n++)
		if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] == 0x7f || n >= max)
			return 0;
	return 1;
}

/* q_msg_encode - encode a message record; 0 if it does not fit */
size_t q_msg_encode(const struct q_msg *m, unsigned char *buf, size_t cap)
{
	struct wbuf w = {buf, 0, cap, 0};

	put_uint(&w, MSG_VERSION, 1);
	put(&w, m->qid, QID_LEN);
	put_uint(&w, m->arrival_us, 8);
	put_uint(&w, m->size, 8);
	put_uint(&w, m->flags, 4);
	put_uint(&w, m->body_type, 1);
	put_uint(&w, m->ret, 1);
	put_uint(&w, m->nrcpt, 4);
	put_uint(&w, m->nlive, 4);
	put_uint(&w, m->seg_id, 8);
	put_uint(&w, m->offset, 8);
	put(&w, m->digest, sizeof(m->digest));
	put(&w, m->trace_id, sizeof(m->trace_id));
	put(&w, m->span_id, sizeof(m->span_id));
	put_str(&w, m->sender);
	put_str(&w, m->envid);
	put_str(&w, m->helo);
	put_str(&w, m->client);
	put(&w, m->link_trace_id, sizeof(m->link_trace_id));
	put(&w, m->link_span_id, sizeof(m->link_span_id));
	return w.overflow ? 0 : w.len;
}

/* q_msg_decode - decode a message record; -1 if it is malformed */
int q_msg_decode(const unsigned char *buf, size_t len, struct q_msg *m)
{
	struct rbuf r = {buf, len, 0, 0, 0};
	uint64_t version;

	memset(m, 0, sizeof(*m));
	if ((version = get_uint(&r, 1)) != MSG_VERSION && version != 1)
		r.bad = 1;
	get(&r, m->qid, QID_LEN);
	m->qid[QID_LEN] = '\0';
	m->arrival_us = get_uint(&r, 8);
	m->size = get_uint(&r, 8);
	m->flags = (uint32_t)get_uint(&r, 4);
	m->body_type = (uint8_t)get_uint(&r, 1);
	m->ret = (uint8_t)get_uint(&r, 1);
	m->nrcpt = (uint32_t)get_uint(&r, 4);
	m->nlive = (uint32_t)get_uint(&r, 4);
	m->seg_id = get_uint(&r, 8);
	m->offset = get_uint(&r, 8);
	get(&r, m->digest, sizeof(m->digest));
	get(&r, m->trace_id, sizeof(m->trace_id));
	get(&r, m->span_id, sizeof(m->span_id));
	m->sender = get_text(&r, SMTP_ADDR_MAX);
	m->envid = get_text(&r, SMTP_ENVID_MAX);
	m->helo = get_text(&r, SMTP_DOMAIN_MAX);
	m->client = get_text(&r, Q_CLIENT_MAX);
	if (version >= 2) {
		get(&r, m->link_trace_id, sizeof(m->link_trace_id));
		get(&r, m->link_span_id, sizeof(m->link_span_id));
	}
	if (r.bad || r.off != len || strlen(m->qid) != QID_LEN || m->nlive > m->nrcpt
	    || m->body_type > BODY_BINARYMIME || m->ret > RET_HDRS) {
		q_msg_clear(m);
		return -1;
	}
	return 0;
}

/* q_rcpt_encode - encode a recipient record; 0 if it does not fit */
size_t q_rcpt_encode(const struct q_rcpt *rc, unsigned char *buf, size_t cap)
{
	struct wbuf w = {buf, 0, cap, 0};

	put_uint(&w, RCPT_VERSION, 1);
	put_uint(&w, rc->idx, 4);
	put_uint(&w, rc->state, 1);
	put_uint(&w, rc->notify, 1);
	put_uint(&w, rc->attempts, 4);
	put_uint(&w, rc->next_us, 8);
	put_str(&w, rc->addr);
	put_str(&w, rc->orcpt);
	put_str(&w, rc->peer);
	put_str(&w, rc->reply);
	put_uint(&w, rc->flags, 1);
	return w.overflow ? 0 : w.len;
}

/* notify_ok - NOTIFY= bits as smtp_cmd gives them: NEVER alone, or others */
static int notify_ok(unsigned notify)
{
	unsigned all = NOTIFY_NEVER | NOTIFY_SUCCESS | NOTIFY_FAILURE | NOTIFY_DELAY;

	return (notify & ~all) == 0 && (!(notify & NOTIFY_NEVER) || notify == NOTIFY_NEVER);
}

/* rcpt_decode - decode a recipient record; -1 if it is malformed */
static int rcpt_decode(struct rbuf *r, struct q_rcpt *rc)
{
	uint64_t version;

	memset(rc, 0, sizeof(*rc));
	if ((version = get_uint(r, 1)) != RCPT_VERSION && version != 1)
		r->bad = 1;
	rc->idx = (uint32_t)get_uint(r, 4);
	rc->state = (uint8_t)get_uint(r, 1);
	rc->notify = (uint8_t)get_uint(r, 1);
	rc->attempts = (uint32_t)get_uint(r, 4);
	rc->next_us = get_uint(r, 8);
	rc->addr = get_text(r, SMTP_ADDR_MAX);
	rc->orcpt = get_text(r, SMTP_ORCPT_MAX);
	rc->peer = get_text(r, SCHED_PEER_MAX);
	rc->reply = get_text(r, SMTP_REPLY_FORMAT_MAX - 1);
	if (version >= 2)
		rc->flags = (uint8_t)get_uint(r, 1);
	if (r->bad || r->off != r->len
	    || (!r->layout_only && (rc->state > RCPT_BOUNCED || !notify_ok(rc->notify)
				    || (rc->flags & ~RCPT_FLAGS_ALL)))) {
		q_rcpt_clear(rc);
		return -1;
	}
	return 0;
}

/* q_rcpt_decode - decode a recipient record; -1 if it is malformed or
 * its contents break the limits they had on the way in */
int q_rcpt_decode(const unsigned char *buf, size_t len, struct q_rcpt *rc)
{
	struct rbuf r = {buf, len, 0, 0, 0};

	return rcpt_decode(&r, rc);
}

/* q_rcpt_decode_layout - decode a recipient record's layout, not checking
 * what it holds; -1 if even the layout is broken */
int q_rcpt_decode_layout(const unsigned char *buf, size_t len, struct q_rcpt *rc)
{
	struct rbuf r = {buf, len, 0, 0, 1};

	return rcpt_decode(&r, rc);
}

/* hist_rec_encode - encode a history record; 0 if it does not fit */
size_t hist_rec_encode(const struct hist_rec *h, unsigned char *buf, size_t cap)
{
	struct wbuf w = {buf, 0, cap, 0};

	put_uint(&w, HIST_VERSION, 1);
	put_uint(&w, h->kind, 1);
	put_uint(&w, h->state, 1);
	put_uint(&w, h->tls, 1);
	put_uint(&w, h->code, 2);
	put_uint(&w, h->idx, 4);
	put_uint(&w, h->nrcpt, 4);
	put_uint(&w, h->conn_use, 4);
	put_uint(&w, h->time_us, 8);
	put_uint(&w, h->size, 8);
	for (size_t i = 0; i < 4; i++)
		put_uint(&w, h->delays_us[i], 8);
	put(&w, h->trace_id, sizeof(h->trace_id));
	put(&w, h->span_id, sizeof(h->span_id));
	put(&w, h->qid, QID_LEN);
	put_str(&w, h->sender);
	put_str(&w, h->msgid);
	put_str(&w, h->client);
	put_str(&w, h->rcpt);
	put_str(&w, h->peer);
	put_str(&w, h->relay);
	put_str(&w, h->dsn);
	put_str(&w, h->reply);
	put_str(&w, h->peer_qid);
	put(&w, h->link_trace_id, sizeof(h->link_trace_id));
	put(&w, h->link_span_id, sizeof(h->link_span_id));
	return w.overflow || strlen(h->qid) != QID_LEN ? 0 : w.len;
}

/* hist_rec_decode - decode a history record; -1 if it is malformed */
int hist_rec_decode(const unsigned char *buf, size_t len, struct hist_rec *h)
{
	struct rbuf r = {buf, len, 0, 0, 0};
	uint64_t version;

	memset(h, 0, sizeof(*h));
	if ((version = get_uint(&r, 1)) != HIST_VERSION && version != 1)
		r.bad = 1;
	h->kind = (uint8_t)get_uint(&r, 1);
	h->state = (uint8_t)get_uint(&r, 1);
	h->tls = (uint8_t)get_uint(&r, 1);
	h->code = (uint16_t)get_uint(&r, 2);
	h->idx = (uint32_t)get_uint(&r, 4);
	h->nrcpt = (uint32_t)get_uint(&r, 4);
	h->conn_use = (uint32_t)get_uint(&r, 4);
	h->time_us = get_uint(&r, 8);
	h->size = get_uint(&r, 8);
	for (size_t i = 0; i < 4; i++)
		h->delays_us[i] = get_uint(&r, 8);
	get(&r, h->trace_id, sizeof(h->trace_id));
	get(&r, h->span_id, sizeof(h->span_id));
	get(&r, h->qid, QID_LEN);
	h->qid[QID_LEN] = '\0';
	h->sender = get_str(&r);
	h->msgid = get_str(&r);
	h->client = get_str(&r);
	h->rcpt = get_str(&r);
	h->peer = get_str(&r);
	h->relay = get_str(&r);
	h->dsn = get_str(&r);
	h->reply = get_str(&r);
	h->peer_qid = get_str(&r);
	if (version >= 2) {
		get(&r, h->link_trace_id, sizeof(h->link_trace_id));
		get(&r, h->link_span_id, sizeof(h->link_span_id));
	}
	if (r.bad || r.off != len || strlen(h->qid) != QID_LEN
	    || (h->kind != HIST_ACCEPT && h->kind != HIST_ATTEMPT)
	    || h->state > HIST_EXPIRED || h->tls > HIST_TLS_RESUMED) {
		hist_rec_clear(h);
		return -1;
	}
	return 0;
}

/* journal_rec_encode - encode a milter journal record; 0 if it does not fit */
size_t journal_rec_encode(const struct journal_rec *j, unsigned char *buf, size_t cap)
{
	struct wbuf w = {buf, 0, cap, 0};

	put_uint(&w, JOURNAL_VERSION, 1);
	put_uint(&w, j->time_us, 8);
	put(&w, j->trace_id, sizeof(j->trace_id));
	put(&w, j->span_id, sizeof(j->span_id));
	put(&w, j->parent_id, sizeof(j->parent_id));
	put_uint(&w, j->nrcpt, 4);
	put_str(&w, j->mta_qid);
	put_str(&w, j->client);
	put_str(&w, j->sender);
	put_str(&w, j->verdict);
	return w.overflow ? 0 : w.len;
}

/* journal_rec_decode - decode a milter journal record; -1 if it is malformed */
int journal_rec_decode(const unsigned char *buf, size_t len, struct journal_rec *j)
{
	struct rbuf r = {buf, len, 0, 0, 0};

	memset(j, 0, sizeof(*j));
	if (get_uint(&r, 1) != JOURNAL_VERSION)
		r.bad = 1;
	j->time_us = get_uint(&r, 8);
	get(&r, j->trace_id, sizeof(j->trace_id));
	get(&r, j->span_id, sizeof(j->span_id));
	get(&r, j->parent_id, sizeof(j->parent_id));
	j->nrcpt = (uint32_t)get_uint(&r, 4);
	j->mta_qid = get_str(&r);
	j->client = get_str(&r);
	j->sender = get_str(&r);
	j->verdict = get_str(&r);
	if (r.bad || r.off != len) {
		journal_rec_clear(j);
		return -1;
	}
	return 0;
}
