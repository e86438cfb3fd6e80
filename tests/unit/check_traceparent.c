/* check_traceparent - W3C traceparent parsing/formatting and tern signatures */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "traceparent.h"
#include "unit.h"

#define GOOD "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static const struct {
	const char *in;
	int ok;
} parse_cases[] = {
	{GOOD, 1},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", 1},
	{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", 0},	/* upper case */
	{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", 0},	/* zero trace id */
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", 0},	/* zero span id */
	{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0},	/* version ff */
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0},	/* unknown version */
	{"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", 0},	/* short trace id */
	{"00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01", 0},	/* long trace id */
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01", 0},	/* short span id */
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", 0},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", 0},
	{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902g7-01", 0},	/* not hex */
	{"", 0},
};

START_TEST(test_parse)
{
	struct traceparent tp;
	int rc = traceparent_parse(parse_cases[_i].in, strlen(parse_cases[_i].in), &tp);

	ck_assert_msg((rc == 0) == parse_cases[_i].ok, "\"%s\": rc %d", parse_cases[_i].in, rc);
}
END_TEST

START_TEST(test_roundtrip)
{
	struct traceparent tp, tp2;
	char out[TRACEPARENT_LEN + 1], tid[TRACE_ID_HEX + 1];

	ck_assert_int_eq(traceparent_parse(GOOD, strlen(GOOD), &tp), 0);
	traceparent_format(&tp, out);
	ck_assert_str_eq(out, GOOD);
	trace_id_hex(&tp, tid);
	ck_assert_str_eq(tid, "4bf92f3577b34da6a3ce929d0e0e4736");
	tp2 = tp;
	traceparent_new_span(&tp2);
	ck_assert_mem_eq(tp2.trace_id, tp.trace_id, sizeof(tp.trace_id));
	ck_assert(memcmp(tp2.span_id, tp.span_id, sizeof(tp.span_id)) != 0);
	ck_assert_int_eq(tp2.flags, 1);
	for (int i = 0; i < 100; i++) {
		traceparent_new(&tp);
		traceparent_format(&tp, out);
		ck_assert_uint_eq(strlen(out), TRACEPARENT_LEN);
		ck_assert_msg(traceparent_parse(out, strlen(out), &tp2) == 0, "%s", out);
	}
}
END_TEST

/* The signature is fixed: base64url(BLAKE2b-128(key, value NUL msgid)),
 * the Message-ID without its white space. The vectors were computed
 * independently (Python hashlib.blake2b, digest_size=16, and openssl's
 * BLAKE2BMAC). */
static const struct {
	const char *value, *msgid;	/* signed over */
	const char *sig;
	const char *check_msgid;	/* verified against */
	int ok;
} sign_cases[] = {
	{GOOD, "", "IvquqCH-4D4lAy5GPLQWAQ", "", 1},
	{GOOD, "<a@example.org>", "7WE8NXvia6XbBIUxllaRSA", "<a@example.org>", 1},
	{GOOD, "<b@example.org>", "YocK6PHTSiJ8pf3VU7ZQXQ", "<b@example.org>", 1},
	/* folding and surrounding white space do not count */
	{GOOD, " <a@example.org>\r\n\t", "7WE8NXvia6XbBIUxllaRSA", "<a@\r\n example.org>", 1},
	/* the same Traceparent and signature on another message */
	{GOOD, "<a@example.org>", "7WE8NXvia6XbBIUxllaRSA", "<b@example.org>", 0},
	{GOOD, "<a@example.org>", "7WE8NXvia6XbBIUxllaRSA", "", 0},
	{GOOD, "", "IvquqCH-4D4lAy5GPLQWAQ", "<a@example.org>", 0},
	/* tern before 2 signed the Traceparent alone: that verifies nothing */
	{GOOD, NULL, "g0dGFnKg4gN0Uxb_o06atw", "", 0},
};

START_TEST(test_sign)
{
	struct trace_key key;
	char sig[TRACE_SIG_LEN + 1];
	const char *cm = sign_cases[_i].check_msgid;

	for (int i = 0; i < TRACE_KEY_BYTES; i++)
		key.bytes[i] = (unsigned char)i;
	if (sign_cases[_i].msgid) {
		trace_sign(&key, sign_cases[_i].value, sign_cases[_i].msgid,
			   strlen(sign_cases[_i].msgid), sig);
		ck_assert_str_eq(sig, sign_cases[_i].sig);
	}
	ck_assert_int_eq(trace_verify(&key, sign_cases[_i].value, cm, strlen(cm), sign_cases[_i].sig),
			 sign_cases[_i].ok);
	snprintf(sig, sizeof(sig), "%s", sign_cases[_i].sig);
	sig[0] = sig[0] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(trace_verify(&key, sign_cases[_i].value, cm, strlen(cm), sig), 0);
	ck_assert_int_eq(trace_verify(&key, sign_cases[_i].value, cm, strlen(cm), "short"), 0);
	key.bytes[0] ^= 1;
	ck_assert_int_eq(trace_verify(&key, sign_cases[_i].value, cm, strlen(cm), sign_cases[_i].sig), 0);
}
END_TEST

START_TEST(test_tracestate_format)
{
	char state[TRACESTATE_TERN_LEN + 1], sig[TRACE_SIG_LEN + 1];

	tracestate_format("7WE8NXvia6XbBIUxllaRSA", state);
	ck_assert_str_eq(state, "tern=2.7WE8NXvia6XbBIUxllaRSA");
	ck_assert_int_eq(tracestate_find_sig(state, strlen(state), sig), 1);
	ck_assert_str_eq(sig, "7WE8NXvia6XbBIUxllaRSA");
}
END_TEST

static const struct {
	const char *state;
	int rc;
	const char *sig;
} state_cases[] = {
	{"tern=2.AAAAAAAAAAAAAAAAAAAAAA", 1, "AAAAAAAAAAAAAAAAAAAAAA"},
	{"vendor=x, tern=2.abcdefghijklmnopqrstu_ ,other=y", 1, "abcdefghijklmnopqrstu_"},
	{"vendor=x", 0, NULL},
	{"", 0, NULL},
	/* the unversioned signature of tern before 2, and unknown versions:
	 * read as unsigned, never as a signature */
	{"tern=AAAAAAAAAAAAAAAAAAAAAA", 0, NULL},
	{"vendor=x,tern=g0dGFnKg4gN0Uxb_o06atw", 0, NULL},
	{"tern=3.AAAAAAAAAAAAAAAAAAAAAA", 0, NULL},
	{"tern=2", 0, NULL},
	{"tern=", 0, NULL},
	{"tern=2.AAAAAAAAAAAAAAAAAAAAAA,tern=2.AAAAAAAAAAAAAAAAAAAAAA", -1, NULL},
	{"tern=AAAAAAAAAAAAAAAAAAAAAA,tern=2.AAAAAAAAAAAAAAAAAAAAAA", -1, NULL},
	{"tern=2.AAAAAAAAAAAAAAAAAAAAA", -1, NULL},
	{"tern=2.AAAAAAAAAAAAAAAAAAAAAA=", -1, NULL},
	{"tern=2.AAAAAAAAAAA+AAAAAAAAAA", -1, NULL},
	{"tern=2.AAAAAAAAAAAAAAAAAAAAAA\001", -1, NULL},
	{"tern=2.", -1, NULL},
};

START_TEST(test_tracestate)
{
	char sig[TRACE_SIG_LEN + 1];
	int rc = tracestate_find_sig(state_cases[_i].state, strlen(state_cases[_i].state), sig);

	ck_assert_int_eq(rc, state_cases[_i].rc);
	if (rc == 1)
		ck_assert_str_eq(sig, state_cases[_i].sig);
}
END_TEST

START_TEST(test_key_file)
{
	char dir[] = "/tmp/check_tp.XXXXXX", path[64], err[512];
	struct trace_key *key;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/key", dir);
	ck_assert_int_eq(trace_key_create(path, err, sizeof(err)), 0);
	ck_assert_int_eq(trace_key_create(path, err, sizeof(err)), -1);	/* never overwrites */
	key = trace_key_load(path, err, sizeof(err));
	ck_assert_msg(key != NULL, "%s", err);
	trace_key_free(&key);
	ck_assert_ptr_null(key);
	chmod(path, 0604);
	ck_assert_ptr_null(trace_key_load(path, err, sizeof(err)));
	ck_assert_msg(strstr(err, "accessible by others") != NULL, "%s", err);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_eq(write(fd, "abcd\n", 5), 5);
	close(fd);
	ck_assert_ptr_null(trace_key_load(path, err, sizeof(err)));
	ck_assert_msg(strstr(err, "64 hex") != NULL, "%s", err);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* signed_by - the signature of GOOD and "<m@x>" under the key in path */
static void signed_by(const char *path, char sig[TRACE_SIG_LEN + 1])
{
	char err[512];
	struct trace_key *key = trace_key_load(path, err, sizeof(err));

	ck_assert_msg(key != NULL, "%s", err);
	trace_sign(key, GOOD, "<m@x>", 5, sig);
	trace_key_free(&key);
}

/* verifies - does sig verify under keys */
static int verifies(const struct trace_keys *keys, const char *sig)
{
	return trace_keys_verify(keys, GOOD, "<m@x>", 5, sig);
}

/* trace_keys across rotations: a new key keeps the one before it, an
 * unchanged file keeps both, the next change drops the oldest */
START_TEST(test_keys_rotate)
{
	char dir[] = "/tmp/check_tp.XXXXXX", a[64], b[64], c[64], err[512];
	char sa[TRACE_SIG_LEN + 1], sb[TRACE_SIG_LEN + 1], sc[TRACE_SIG_LEN + 1];
	struct trace_keys k1, k2, k3, k4, none = {0};

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	snprintf(c, sizeof(c), "%s/c", dir);
	ck_assert_int_eq(trace_key_create(a, err, sizeof(err)), 0);
	ck_assert_int_eq(trace_key_create(b, err, sizeof(err)), 0);
	ck_assert_int_eq(trace_key_create(c, err, sizeof(err)), 0);
	signed_by(a, sa);
	signed_by(b, sb);
	signed_by(c, sc);

	ck_assert_int_eq(trace_keys_load(&k1, NULL, a, err, sizeof(err)), 0);	/* a start */
	ck_assert_ptr_null(k1.prev);
	ck_assert(verifies(&k1, sa) && !verifies(&k1, sb));
	ck_assert_int_eq(trace_keys_load(&k2, &k1, b, err, sizeof(err)), 1);	/* a -> b */
	ck_assert(verifies(&k2, sa) && verifies(&k2, sb) && !verifies(&k2, sc));
	trace_keys_free(&k1);	/* k2 holds copies */
	ck_assert(verifies(&k2, sa));
	ck_assert_int_eq(trace_keys_load(&k3, &k2, b, err, sizeof(err)), 0);	/* b again */
	ck_assert(verifies(&k3, sa) && verifies(&k3, sb));
	ck_assert_int_eq(trace_keys_load(&k4, &k3, c, err, sizeof(err)), 1);	/* b -> c */
	ck_assert(!verifies(&k4, sa) && verifies(&k4, sb) && verifies(&k4, sc));
	ck_assert(!verifies(&none, sa));

	chmod(c, 0644);
	ck_assert_int_eq(trace_keys_load(&k1, &k4, c, err, sizeof(err)), -1);
	ck_assert(k1.cur == NULL && k1.prev == NULL);
	ck_assert_msg(strstr(err, "accessible by others") != NULL, "%s", err);
	trace_keys_free(&k2);
	trace_keys_free(&k3);
	trace_keys_free(&k4);
	ck_assert(k4.cur == NULL && k4.prev == NULL);
	unlink(a);
	unlink(b);
	unlink(c);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("traceparent");
	TCase *tc = tcase_create("traceparent");

	if (sodium_init() < 0)
		return 99;
	tcase_add_loop_test(tc, test_parse, 0, N_ELEMENTS(parse_cases));
	tcase_add_test(tc, test_roundtrip);
	tcase_add_loop_test(tc, test_sign, 0, N_ELEMENTS(sign_cases));
	tcase_add_test(tc, test_tracestate_format);
	tcase_add_loop_test(tc, test_tracestate, 0, N_ELEMENTS(state_cases));
	tcase_add_test(tc, test_key_file);
	tcase_add_test(tc, test_keys_rotate);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
