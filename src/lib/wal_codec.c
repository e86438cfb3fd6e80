/*
 * wal_codec - the envelope record before each body in a spool segment.
 *
 * Layout: the header (WAL_HDR_LEN octets: "TWAL", version, flags, two
 * zero octets, payload length (4), body length (8), BLAKE2b-128 of the
 * first 20 header octets and the payload), then the payload: the message
 * record (2-octet length, store_codec's layout), the number of recipients
 * (4), each recipient record (2-octet length, store_codec's layout), the
 * Message-ID (2-octet length, at most WAL_MSGID_MAX octets). A fill
 * record (WAL_FILL) has an empty payload: the body behind it is one the
 * log carries but does not describe (a body copied forward, whose queue
 * record is changed by its own transaction). Integers are
 * little-endian. Must never read outside the buffer it was given, never
 * do I/O.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "store_codec.h"
#include "wal_codec.h"
#include "xalloc.h"

#define WAL_VERSION 1
#define WAL_CHECK_AT 20			/* the check covers the header up to here */
#define WAL_CHECK_LEN 16

static const unsigned char wal_magic[4] = {'T', 'W', 'A', 'L'};

/* le_put - write v as width little-endian octets */
static void le_put(unsigned char *p, uint64_t v, size_t width)
{
	for (size_t i = 0; i < width; i++, v >>= 8)
		p[i] = (unsigned char)(v & 0xff);
}

/* le_get - read width little-endian octets */
static uint64_t le_get(const unsigned char *p, size_t width)
{
	uint64_t v = 0;

	for (size_t i = width; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* check_of - the record's check: header up to WAL_CHECK_AT, then the payload */
static void check_of(const unsigned char *rec, size_t payload_len, unsigned char out[WAL_CHECK_LEN])
{
	crypto_generichash_state h;

	crypto_generichash_init(&h, NULL, 0, WAL_CHECK_LEN);
	crypto_generichash_update(&h, rec, WAL_CHECK_AT);
	crypto_generichash_update(&h, rec + WAL_HDR_LEN, payload_len);
	crypto_generichash_final(&h, out, WAL_CHECK_LEN);
}

/* piece - append a 2-octet length and n octets at *len when they fit in cap */
static void piece(unsigned char *buf, size_t cap, size_t *len, const unsigned char *p, size_t n)
{
	if (*len + 2 + n <= cap) {
		le_put(buf + *len, n, 2);
		memcpy(buf + *len + 2, p, n);
	}
	*len += 2 + n;
}

/*
 * wal_rec_encode - encode r into buf; the length of the whole record (what
 * was written if it is <= cap, else what buf must hold: call again), or 0
 * if r cannot be a record (a field too long, too many recipients)
 */
size_t wal_rec_encode(const struct wal_rec *r, unsigned char *buf, size_t cap)
{
	unsigned char tmp[STORE_RECORD_MAX], check[WAL_CHECK_LEN];
	size_t len = WAL_HDR_LEN, n, idlen = r->msgid ? strlen(r->msgid) : 0;

	if (r->flags & WAL_FILL) {
		if (r->flags != WAL_FILL)
			return 0;
		goto header;
	}
	if (r->nrcpts == 0 || r->nrcpts > WAL_RCPTS_MAX || idlen > WAL_MSGID_MAX)
		return 0;
	if ((n = q_msg_encode(&r->msg, tmp, sizeof(tmp))) == 0)
		return 0;
	piece(buf, cap, &len, tmp, n);
	if (len + 4 <= cap)
		le_put(buf + len, r->nrcpts, 4);
	len += 4;
	for (size_t i = 0; i < r->nrcpts; i++) {
		if ((n = q_rcpt_encode(&r->rcpts[i], tmp, sizeof(tmp))) == 0)
			return 0;
		piece(buf, cap, &len, tmp, n);
	}
	piece(buf, cap, &len, (const unsigned char *)(r->msgid ? r->msgid : ""), idlen);
	if (len - WAL_HDR_LEN > WAL_PAYLOAD_MAX)
		return 0;
header:
	if (len > cap)
		return len;
	memcpy(buf, wal_magic, sizeof(wal_magic));
	buf[4] = WAL_VERSION;
	buf[5] = r->flags;
	buf[6] = buf[7] = 0;
	le_put(buf + 8, len - WAL_HDR_LEN, 4);
	le_put(buf + 12, r->body_len, 8);
	check_of(buf, len - WAL_HDR_LEN, check);
	memcpy(buf + WAL_CHECK_AT, check, WAL_CHECK_LEN);
	return len;
}

/* wal_hdr_decode - read a record header (its first WAL_HDR_LEN octets);
 * -1 if it is not one: the log ends there */
int wal_hdr_decode(const unsigned char *buf, size_t len, struct wal_hdr *h)
{
	memset(h, 0, sizeof(*h));
	if (len < WAL_HDR_LEN || memcmp(buf, wal_magic, sizeof(wal_magic)) != 0
	    || buf[4] != WAL_VERSION || (buf[5] & ~(WAL_REPLAY | WAL_FILL)) != 0
	    || buf[5] == (WAL_REPLAY | WAL_FILL) || buf[6] != 0 || buf[7] != 0)
		return -1;
	h->version = buf[4];
	h->flags = buf[5];
	h->payload_len = (uint32_t)le_get(buf + 8, 4);
	h->body_len = le_get(buf + 12, 8);
	if (h->payload_len > WAL_PAYLOAD_MAX)
		return -1;
	return 0;
}

/* take - the next 2-octet-length piece of the payload; NULL if it overruns */
static const unsigned char *take(const unsigned char *buf, size_t len, size_t *off, size_t *n)
{
	const unsigned char *p;

	if (len - *off < 2)
		return NULL;
	*n = (size_t)le_get(buf + *off, 2);
	if (len - *off - 2 < *n)
		return NULL;
	p = buf + *off + 2;
	*off += 2 + *n;
	return p;
}

/*
 * wal_rec_decode - decode a whole record (header and payload, exactly len
 * octets); -1 if its check fails or anything in it is malformed: the
 * message and recipient records as q_msg_decode and q_rcpt_decode check
 * them, as many recipients as the message says, the body length the
 * message's size (0 for a file of its own)
 */
int wal_rec_decode(const unsigned char *buf, size_t len, struct wal_rec *r)
{
	struct wal_hdr h;
	unsigned char check[WAL_CHECK_LEN];
	const unsigned char *p;
	size_t off = WAL_HDR_LEN, n;
	uint64_t count;

	memset(r, 0, sizeof(*r));
	if (wal_hdr_decode(buf, len, &h) < 0 || len != WAL_HDR_LEN + (size_t)h.payload_len)
		return -1;
	check_of(buf, h.payload_len, check);
	if (sodium_memcmp(check, buf + WAL_CHECK_AT, WAL_CHECK_LEN) != 0)
		return -1;
	r->flags = h.flags;
	r->body_len = h.body_len;
	if (h.flags & WAL_FILL)
		return h.payload_len == 0 ? 0 : -1;
	if ((p = take(buf, len, &off, &n)) == NULL || q_msg_decode(p, n, &r->msg) < 0)
		return -1;
	if (len - off < 4)
		goto bad;
	count = le_get(buf + off, 4);
	off += 4;
	if (count == 0 || count > WAL_RCPTS_MAX || count != r->msg.nrcpt)
		goto bad;
	r->rcpts = xcalloc((size_t)count, sizeof(*r->rcpts));
	for (; r->nrcpts < count; r->nrcpts++)
		if ((p = take(buf, len, &off, &n)) == NULL
		    || q_rcpt_decode(p, n, &r->rcpts[r->nrcpts]) < 0)
			goto bad;
	if ((p = take(buf, len, &off, &n)) == NULL || n > WAL_MSGID_MAX || memchr(p, '\0', n))
		goto bad;
	r->msgid = xstrndup((const char *)p, n);
	if (off != len || r->body_len != (r->msg.flags & QMSG_OWNFILE ? 0 : r->msg.size))
		goto bad;
	return 0;
bad:
	wal_rec_clear(r);
	return -1;
}

/* wal_rec_clear - free what wal_rec_decode allocated and zero r */
void wal_rec_clear(struct wal_rec *r)
{
	q_msg_clear(&r->msg);
	q_rcpts_free(&r->rcpts, r->nrcpts);
	free(r->msgid);
	memset(r, 0, sizeof(*r));
}
