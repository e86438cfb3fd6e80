/*
 * ring - a bounded queue of fixed-size items and the one thread that
 * drains it: producers copy an item in and go on; the thread takes all
 * that is queued and hands it to the write callback as one batch.
 * A producer never waits on the writer: when the ring is full the item
 * is refused (ring_put returns RING_FULL, the item stays the caller's)
 * and counted, and the writer logs the count before its next batch as
 * "NAME: N NOUNs dropped: the writer could not keep up".
 *
 * Used for tern-milter's journal and ternd's span file.
 *
 * ring_stop() writes what is queued and joins the thread; a ring_put()
 * after it (or on a NULL ring) refuses without counting (RING_STOPPED), so a producer
 * that outlives the writer (libmilter's sessions after smfi_main) is
 * safe as long as the ring is not freed.
 *
 *	struct ring *r = ring_start("journal", "record", sizeof(rec), 4096, write_fn, db);
 *	if (ring_put(r, &rec) < 0)
 *		rec_clear(&rec);
 *	ring_stop(r);
 *	ring_free(&r);
 */
#ifndef TERN_RING_H
#define TERN_RING_H

#include <stddef.h>

/* write - the writer thread's callback: n items (n > 0), each item_size
 * octets, in the order they were put; it owns what they point to */
#define RING_FULL (-1)		/* refused and counted: the writer is behind */
#define RING_STOPPED (-2)	/* refused: no writer any more */

typedef void (*ring_write_fn)(void *items, size_t n, void *arg);

struct ring;

struct ring *ring_start(const char *name, const char *noun, size_t item_size, size_t cap,
			ring_write_fn write, void *arg);
int ring_put(struct ring *r, const void *item);
void ring_stop(struct ring *r);
void ring_free(struct ring **r);

#endif
