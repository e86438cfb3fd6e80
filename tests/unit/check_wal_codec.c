/*
 * check_wal_codec - the spool log's envelope record: exact round trips
 * (message, recipients, Message-ID, flags, body length), the length a
 * short buffer needs, and a record that is torn (every shorter length)
 * or changed (every single bit) never decoding; headers that are not
 * a record's; limits the encoder refuses.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "store_codec.h"
#include "unit.h"
#include "wal_codec.h"

static struct q_rcpt rcpts[2];

/* sample - a record of two recipients, body of 1234 octets in the segment */
static struct wal_rec sample(void)
{
	struct wal_rec r = {0};

	memcpy(r.msg.qid, "0123456789ABCDEFGHJK", QID_LEN);
	r.msg.qid[QID_LEN] = '\0';
	r.msg.arrival_us = 1764600000123456ull;
	r.msg.size = 1234;
	r.msg.flags = QMSG_DOTLINES;
	r.msg.nrcpt = r.msg.nlive = 2;
	r.msg.seg_id = 7;
	r.msg.offset = 4096;
	memset(r.msg.digest, 0xd1, sizeof(r.msg.digest));
	memset(r.msg.trace_id, 0x11, sizeof(r.msg.trace_id));
	memset(r.msg.span_id, 0x22, sizeof(r.msg.span_id));
	r.msg.sender = (char *)"alice@example.org";
	r.msg.envid = (char *)"";
	r.msg.helo = (char *)"client.example.org";
	r.msg.client = (char *)"[127.0.0.1]";
	for (int i = 0; i < 2; i++) {
		rcpts[i].idx = (uint32_t)i;
		rcpts[i].state = RCPT_QUEUED;
		rcpts[i].next_us = r.msg.arrival_us;
		rcpts[i].addr = (char *)(i ? "bob@example.net" : "carol@example.com");
		rcpts[i].orcpt = (char *)"";
		rcpts[i].peer = (char *)"sink";
		rcpts[i].reply = (char *)"";
	}
	r.rcpts = rcpts;
	r.nrcpts = 2;
	r.msgid = (char *)"<1@example.org>";
	r.flags = WAL_REPLAY;
	r.body_len = 1234;
	return r;
}

START_TEST(test_round_trip)
{
	struct wal_rec in = sample(), out;
	struct wal_hdr h;
	unsigned char buf[4096], again[4096];
	size_t n = wal_rec_encode(&in, buf, sizeof(buf));

	ck_assert_uint_gt(n, WAL_HDR_LEN);
	ck_assert_uint_le(n, sizeof(buf));
	ck_assert_int_eq(memcmp(buf, "TWAL\1\1\0\0", 8), 0);
	ck_assert_int_eq(wal_hdr_decode(buf, WAL_HDR_LEN, &h), 0);
	ck_assert_uint_eq(h.payload_len, n - WAL_HDR_LEN);
	ck_assert_uint_eq(h.body_len, 1234);
	ck_assert_uint_eq(h.flags, WAL_REPLAY);
	ck_assert_int_eq(wal_rec_decode(buf, n, &out), 0);
	ck_assert_str_eq(out.msg.qid, in.msg.qid);
	ck_assert_uint_eq(out.msg.arrival_us, in.msg.arrival_us);
	ck_assert_uint_eq(out.msg.size, 1234);
	ck_assert_uint_eq(out.msg.seg_id, 7);
	ck_assert_uint_eq(out.msg.offset, 4096);
	ck_assert_int_eq(memcmp(out.msg.digest, in.msg.digest, Q_DIGEST_BYTES), 0);
	ck_assert_str_eq(out.msg.sender, "alice@example.org");
	ck_assert_str_eq(out.msg.client, "[127.0.0.1]");
	ck_assert_uint_eq(out.nrcpts, 2);
	ck_assert_str_eq(out.rcpts[0].addr, "carol@example.com");
	ck_assert_str_eq(out.rcpts[1].addr, "bob@example.net");
	ck_assert_str_eq(out.rcpts[1].peer, "sink");
	ck_assert_uint_eq(out.rcpts[1].idx, 1);
	ck_assert_str_eq(out.msgid, "<1@example.org>");
	ck_assert_uint_eq(out.flags, WAL_REPLAY);
	ck_assert_uint_eq(out.body_len, 1234);
	/* what decodes encodes back to the same octets */
	ck_assert_uint_eq(wal_rec_encode(&out, again, sizeof(again)), n);
	ck_assert_int_eq(memcmp(again, buf, n), 0);
	wal_rec_clear(&out);
	ck_assert_ptr_null(out.rcpts);
}
END_TEST

START_TEST(test_short_buffer)
{
	struct wal_rec in = sample();
	unsigned char buf[4096], small[40];
	size_t n = wal_rec_encode(&in, buf, sizeof(buf));

	ck_assert_uint_eq(wal_rec_encode(&in, NULL, 0), n);
	memset(small, 0xee, sizeof(small));
	ck_assert_uint_eq(wal_rec_encode(&in, small, sizeof(small)), n);
	for (size_t i = 0; i < sizeof(small); i++)
		ck_assert_uint_eq(small[i], 0xee);	/* nothing written past what fits */
	ck_assert_uint_eq(wal_rec_encode(&in, buf, n), n);	/* exactly enough */
}
END_TEST

START_TEST(test_torn)
{
	struct wal_rec in = sample(), out;
	unsigned char buf[4096];
	size_t n = wal_rec_encode(&in, buf, sizeof(buf));

	for (size_t len = 0; len < n; len++)
		ck_assert_int_eq(wal_rec_decode(buf, len, &out), -1);
	ck_assert_int_eq(wal_rec_decode(buf, n + 1, &out), -1);	/* trailing octet */
	for (size_t len = 0; len < WAL_HDR_LEN; len++) {
		struct wal_hdr h;

		ck_assert_int_eq(wal_hdr_decode(buf, len, &h), -1);
	}
}
END_TEST

/* no_flip_decodes - every single-bit flip of the n-octet record in buf
 * fails to decode, and buf is as it was afterwards */
static void no_flip_decodes(unsigned char *buf, size_t n)
{
	struct wal_rec out;

	for (size_t i = 0; i < n * 8; i++) {
		buf[i / 8] ^= (unsigned char)(1u << (i % 8));
		ck_assert_msg(wal_rec_decode(buf, n, &out) == -1, "octet %zu bit %zu", i / 8, i % 8);
		buf[i / 8] ^= (unsigned char)(1u << (i % 8));
	}
}

START_TEST(test_bit_flips)
{
	struct wal_rec in = sample(), out;
	unsigned char buf[4096];
	size_t n = wal_rec_encode(&in, buf, sizeof(buf));

	no_flip_decodes(buf, n);
	ck_assert_int_eq(wal_rec_decode(buf, n, &out), 0);
	wal_rec_clear(&out);
}
END_TEST

START_TEST(test_not_a_header)
{
	static const unsigned char zeros[WAL_HDR_LEN];
	unsigned char buf[WAL_HDR_LEN];
	struct wal_hdr h;

	ck_assert_int_eq(wal_hdr_decode(zeros, sizeof(zeros), &h), -1);	/* a hole */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, "TWAL\2\0\0\0", 8);	/* a version we do not know */
	ck_assert_int_eq(wal_hdr_decode(buf, sizeof(buf), &h), -1);
	memcpy(buf, "TWAL\1\4\0\0", 8);	/* a flag we do not know */
	ck_assert_int_eq(wal_hdr_decode(buf, sizeof(buf), &h), -1);
	memcpy(buf, "TWAL\1\3\0\0", 8);	/* replay and fill at once */
	ck_assert_int_eq(wal_hdr_decode(buf, sizeof(buf), &h), -1);
	memcpy(buf, "TWAL\1\1\0\0\1\0\0\1", 12);	/* payload over WAL_PAYLOAD_MAX */
	ck_assert_int_eq(wal_hdr_decode(buf, sizeof(buf), &h), -1);
	memcpy(buf, "TWAL\1\1\0\0\0\0\0\1", 12);	/* exactly WAL_PAYLOAD_MAX */
	ck_assert_int_eq(wal_hdr_decode(buf, sizeof(buf), &h), 0);
	ck_assert_uint_eq(h.payload_len, WAL_PAYLOAD_MAX);
}
END_TEST

START_TEST(test_fill)
{
	struct wal_rec in = {.flags = WAL_FILL, .body_len = 4096}, out, bad = {.flags = WAL_FILL | WAL_REPLAY};
	unsigned char buf[WAL_HDR_LEN];

	/* a fill record is its header alone, and reads back as it was */
	ck_assert_uint_eq(wal_rec_encode(&in, buf, sizeof(buf)), WAL_HDR_LEN);
	ck_assert_int_eq(wal_rec_decode(buf, sizeof(buf), &out), 0);
	ck_assert_uint_eq(out.flags, WAL_FILL);
	ck_assert_uint_eq(out.body_len, 4096);
	ck_assert_uint_eq(out.nrcpts, 0);
	wal_rec_clear(&out);
	/* every bit flip of it fails */
	no_flip_decodes(buf, sizeof(buf));
	/* a fill is never replayed */
	ck_assert_uint_eq(wal_rec_encode(&bad, buf, sizeof(buf)), 0);
}
END_TEST

START_TEST(test_inconsistent)
{
	struct wal_rec in = sample(), out;
	unsigned char buf[4096];
	size_t n;

	in.body_len = 1233;	/* not the message's size */
	n = wal_rec_encode(&in, buf, sizeof(buf));
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(wal_rec_decode(buf, n, &out), -1);
	in = sample();
	in.msg.flags |= QMSG_OWNFILE;	/* own file: no body in the segment */
	n = wal_rec_encode(&in, buf, sizeof(buf));
	ck_assert_int_eq(wal_rec_decode(buf, n, &out), -1);
	in.body_len = 0;
	n = wal_rec_encode(&in, buf, sizeof(buf));
	ck_assert_int_eq(wal_rec_decode(buf, n, &out), 0);
	ck_assert_uint_eq(out.body_len, 0);
	wal_rec_clear(&out);
	in = sample();
	in.msg.nrcpt = 3;	/* says 3, holds 2 */
	in.msg.nlive = 3;
	n = wal_rec_encode(&in, buf, sizeof(buf));
	ck_assert_int_eq(wal_rec_decode(buf, n, &out), -1);
	in = sample();
	in.rcpts[1].addr = (char *)"bob\r\n@example.net";	/* fails q_rcpt_decode */
	n = wal_rec_encode(&in, buf, sizeof(buf));
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(wal_rec_decode(buf, n, &out), -1);
}
END_TEST

START_TEST(test_limits)
{
	struct wal_rec in = sample();
	char id[WAL_MSGID_MAX + 2];
	unsigned char buf[4096];

	memset(id, 'i', sizeof(id) - 1);
	id[sizeof(id) - 1] = '\0';
	in.msgid = id;	/* one octet too long */
	ck_assert_uint_eq(wal_rec_encode(&in, buf, sizeof(buf)), 0);
	id[WAL_MSGID_MAX] = '\0';
	ck_assert_uint_gt(wal_rec_encode(&in, buf, sizeof(buf)), 0);
	in = sample();
	in.nrcpts = 0;	/* a message has recipients */
	ck_assert_uint_eq(wal_rec_encode(&in, buf, sizeof(buf)), 0);
	in = sample();
	in.msgid = NULL;	/* none: "" */
	ck_assert_uint_gt(wal_rec_encode(&in, buf, sizeof(buf)), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wal_codec");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_short_buffer);
	tcase_add_test(tc, test_torn);
	tcase_add_test(tc, test_bit_flips);
	tcase_add_test(tc, test_not_a_header);
	tcase_add_test(tc, test_fill);
	tcase_add_test(tc, test_inconsistent);
	tcase_add_test(tc, test_limits);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
