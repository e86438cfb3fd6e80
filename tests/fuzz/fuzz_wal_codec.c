/*
 * fuzz_wal_codec - libFuzzer target: the spool log's envelope records
 * from a hostile or torn segment. Arbitrary bytes are read as a record
 * header and as a whole record, with the check computed over them first
 * (else almost nothing would get past it) and as they come; whatever
 * decodes must encode to a record that decodes again to the same
 * encoding, whose header says its own length, and that does not fit in
 * one octet less.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "wal_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* stable - r (decoded) encodes to a record that decodes to the same octets */
static void stable(const struct wal_rec *r)
{
	size_t n = wal_rec_encode(r, NULL, 0), m;
	unsigned char *a, *b;
	struct wal_rec again;
	struct wal_hdr h;

	if (n == 0)
		__builtin_trap();	/* what decoded must be a record */
	if ((a = malloc(n)) == NULL || (b = malloc(n)) == NULL)
		abort();
	if (wal_rec_encode(r, a, n) != n || wal_rec_encode(r, a, n - 1) != n)
		__builtin_trap();
	if (wal_hdr_decode(a, n, &h) < 0 || WAL_HDR_LEN + (size_t)h.payload_len != n
	    || wal_rec_decode(a, n, &again) < 0)
		__builtin_trap();
	m = wal_rec_encode(&again, b, n);
	if (m != n || memcmp(a, b, n) != 0)
		__builtin_trap();
	wal_rec_clear(&again);
	free(a);
	free(b);
}

/* try - decode data as a whole record; if it decodes, it is stable */
static void try(const uint8_t *data, size_t size)
{
	struct wal_rec r;
	struct wal_hdr h;

	if (wal_hdr_decode(data, size, &h) == 0 && h.payload_len > WAL_PAYLOAD_MAX)
		__builtin_trap();
	if (wal_rec_decode(data, size, &r) == 0) {
		stable(&r);
		wal_rec_clear(&r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;

	if (sodium_init() < 0)
		abort();
	try(data, size);
	if (size < WAL_HDR_LEN || (fixed = malloc(size)) == NULL)
		return 0;
	/* the same bytes with the header's length and check made right */
	{
		crypto_generichash_state h;
		size_t payload = size - WAL_HDR_LEN;

		memcpy(fixed, data, size);
		memcpy(fixed, "TWAL\1", 5);
		fixed[5] &= WAL_REPLAY;
		fixed[6] = fixed[7] = 0;
		for (int i = 0; i < 4; i++)
			fixed[8 + i] = (uint8_t)(payload >> (8 * i));
		crypto_generichash_init(&h, NULL, 0, 16);
		crypto_generichash_update(&h, fixed, 20);
		crypto_generichash_update(&h, fixed + WAL_HDR_LEN, payload);
		crypto_generichash_final(&h, fixed + 20, 16);
	}
	try(fixed, size);
	free(fixed);
	return 0;
}
