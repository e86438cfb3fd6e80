/*
 * check_otlp - a delivery attempt as an OTLP/JSON line: the exact bytes
 * for a sent and a deferred recipient, escaping of quotes, controls and
 * non-UTF-8 octets (a table), and no partial line when the buffer is
 * short.
 */
#include "config.h"

#include <string.h>

#include "otlp.h"
#include "unit.h"

static const char want[] =
	"{\"resourceSpans\":[{\"resource\":{\"attributes\":["
	"{\"key\":\"service.name\",\"value\":{\"stringValue\":\"ternd\"}},"
	"{\"key\":\"host.name\",\"value\":{\"stringValue\":\"mx1\"}}]},"
	"\"scopeSpans\":[{\"scope\":{\"name\":\"tern\"},\"spans\":["
	"{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":\"0101010101010101\","
	"\"parentSpanId\":\"b7ad6b7169203331\",\"name\":\"deliver\",\"kind\":3,"
	"\"startTimeUnixNano\":\"1700000000000001000\",\"endTimeUnixNano\":\"1700000000250000000\","
	"\"attributes\":[{\"key\":\"tern.queue_id\",\"value\":{\"stringValue\":\"0000000000AAA\"}},"
	"{\"key\":\"tern.peer\",\"value\":{\"stringValue\":\"smarthost\"}},"
	"{\"key\":\"tern.relay\",\"value\":{\"stringValue\":\"mx[192.0.2.1]:25\"}},"
	"{\"key\":\"tern.tls\",\"value\":{\"stringValue\":\"resumed\"}},"
	"{\"key\":\"tern.conn_use\",\"value\":{\"intValue\":\"2\"}},"
	"{\"key\":\"tern.recipient\",\"value\":{\"stringValue\":\"a@example.com\"}},"
	"{\"key\":\"tern.status\",\"value\":{\"stringValue\":\"sent\"}},"
	"{\"key\":\"tern.dsn\",\"value\":{\"stringValue\":\"2.0.0\"}},"
	"{\"key\":\"tern.reply\",\"value\":{\"stringValue\":\"250 2.0.0 Ok: queued as X1\"}},"
	"{\"key\":\"tern.peer_queue_id\",\"value\":{\"stringValue\":\"X1\"}}],"
	"\"status\":{\"code\":1}},"
	"{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":\"0202020202020202\","
	"\"parentSpanId\":\"b7ad6b7169203331\",\"name\":\"deliver\",\"kind\":3,"
	"\"startTimeUnixNano\":\"1700000000000001000\",\"endTimeUnixNano\":\"1700000000250000000\","
	"\"attributes\":[{\"key\":\"tern.queue_id\",\"value\":{\"stringValue\":\"0000000000AAA\"}},"
	"{\"key\":\"tern.peer\",\"value\":{\"stringValue\":\"smarthost\"}},"
	"{\"key\":\"tern.relay\",\"value\":{\"stringValue\":\"mx[192.0.2.1]:25\"}},"
	"{\"key\":\"tern.tls\",\"value\":{\"stringValue\":\"resumed\"}},"
	"{\"key\":\"tern.conn_use\",\"value\":{\"intValue\":\"2\"}},"
	"{\"key\":\"tern.recipient\",\"value\":{\"stringValue\":\"b\\\"q\\\\@example.com\"}},"
	"{\"key\":\"tern.status\",\"value\":{\"stringValue\":\"deferred\"}},"
	"{\"key\":\"tern.dsn\",\"value\":{\"stringValue\":\"4.2.0\"}},"
	"{\"key\":\"tern.reply\",\"value\":{\"stringValue\":\"450 \\u0009later \xc3\xa9 ?\"}},"
	"{\"key\":\"tern.peer_queue_id\",\"value\":{\"stringValue\":\"\"}}],"
	"\"status\":{\"code\":2,\"message\":\"450 \\u0009later \xc3\xa9 ?\"}}"
	"]}]}]}\n";

START_TEST(test_line)
{
	struct otlp_span s[2] = {
		{{1, 1, 1, 1, 1, 1, 1, 1}, "a@example.com", "sent", "2.0.0",
		 "250 2.0.0 Ok: queued as X1", "X1", 1},
		{{2, 2, 2, 2, 2, 2, 2, 2}, "b\"q\\@example.com", "deferred", "4.2.0",
		 "450 \tlater \xc3\xa9 \xff", "", 0},
	};
	struct otlp_attempt a = {"ternd", "mx1", "0000000000AAA", "smarthost", "mx[192.0.2.1]:25",
				 "resumed", 2, 1700000000000001ULL, 1700000000250000ULL,
				 {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21,
				  0x1c, 0x80, 0x31, 0x9c},
				 {0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}, s, 2};
	char buf[8192];
	size_t n = otlp_line(&a, buf, sizeof(buf));

	ck_assert_str_eq(buf, want);
	ck_assert_uint_eq(n, strlen(want));
	ck_assert_uint_eq(otlp_line(&a, buf, n + 1), n);	/* room for the NUL */
	ck_assert_uint_eq(otlp_line(&a, buf, n), 0);		/* never cut */
	ck_assert_uint_eq(otlp_line(&a, buf, 10), 0);
	ck_assert_uint_eq(otlp_line(&a, buf, 0), 0);
}
END_TEST

/* reply_of - the tern.reply value of a one-span line for reply */
static void reply_of(const char *reply, char *buf, size_t cap, char *value, size_t vcap)
{
	struct otlp_span s = {{1, 1, 1, 1, 1, 1, 1, 1}, "a@example.com", "deferred", "4.0.0", reply, "", 0};
	struct otlp_attempt a = {"ternd", "mx1", "0000000000AAA", "smarthost", "mx[192.0.2.1]:25",
				 "none", 1, 1, 2, {0}, {0}, &s, 1};
	const char *key = "{\"key\":\"tern.reply\",\"value\":{\"stringValue\":\"", *p, *e;

	ck_assert_uint_gt(otlp_line(&a, buf, cap), 0);
	ck_assert_ptr_nonnull(p = strstr(buf, key));
	p += strlen(key);
	ck_assert_ptr_nonnull(e = strstr(p, "\"}}"));
	ck_assert_uint_lt((size_t)(e - p), vcap);
	memcpy(value, p, (size_t)(e - p));
	value[e - p] = '\0';
}

/* every control character and DEL as \u00xx (lower case), '/' as itself;
 * UTF-8 that is not well-formed (overlong, surrogate, past U+10FFFF, a
 * lead octet that never starts a sequence) as one '?' per octet */
static const struct {
	const char *in, *want;
} escapes[] = {
	{"\n\r\b\f\t", "\\u000a\\u000d\\u0008\\u000c\\u0009"},
	{"\x01\x1b\x1f\x7f", "\\u0001\\u001b\\u001f\\u007f"},
	{"a/b \\u0041", "a/b \\\\u0041"},
	{"\xf0\x9f\x98\x80 \xe2\x82\xac", "\xf0\x9f\x98\x80 \xe2\x82\xac"},
	{"\xe0\x80\x80|\xed\xa0\x80|\xf4\x90\x80\x80", "???|???|????"},
	{"\xf5\x80\x80|\xc0\xaf|\xc3", "???|??|?"},
};

START_TEST(test_escapes)
{
	char buf[4096], value[256];

	reply_of(escapes[_i].in, buf, sizeof(buf), value, sizeof(value));
	ck_assert_str_eq(value, escapes[_i].want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("otlp");
	TCase *tc = tcase_create("otlp");

	tcase_add_test(tc, test_line);
	tcase_add_loop_test(tc, test_escapes, 0, N_ELEMENTS(escapes));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
