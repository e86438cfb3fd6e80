/*
 * mapcheck - does a file read through a shared map show what pwrite just
 * wrote to it? The access pattern of LMDB on data.mdb (pages written with
 * pwrite, read through a read-only MAP_SHARED map), for tests/fault/cutfs:
 *
 *     mapcheck FILE SECONDS
 *
 * For SECONDS, writes each of 64 pages in turn with pwrite (every word of
 * a page the same new number) and reads the page back through the map at
 * once; prints "writes N stale M", M being the reads that did not see
 * the write, and exits 0 if M is 0, 1 if not, 2 on an error. A file
 * system whose kernel page cache drops pages under a write (FUSE with its
 * default invalidations, while another process opens or stats the file)
 * shows stale reads here.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGES 64
#define WORDS (4096 / sizeof(long))

int main(int argc, char **argv)
{
	static long page[WORDS];
	const volatile long *map;
	long v = 0, writes = 0, stale = 0;
	time_t end;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: mapcheck FILE SECONDS\n");
		return 2;
	}
	end = time(NULL) + atoi(argv[2]);
	if ((fd = open(argv[1], O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0
	    || ftruncate(fd, 4096 * PAGES) < 0) {
		perror(argv[1]);
		return 2;
	}
	map = mmap(NULL, 4096 * PAGES, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	while (time(NULL) < end) {
		for (size_t k = 0; k < PAGES; k++) {
			v++;
			for (size_t i = 0; i < WORDS; i++)
				page[i] = v;
			if (pwrite(fd, page, sizeof(page), (off_t)(k * sizeof(page))) != (ssize_t)sizeof(page)) {
				perror("pwrite");
				return 2;
			}
			writes++;
			if (map[k * WORDS] != v || map[k * WORDS + WORDS - 1] != v)
				stale++;
		}
	}
	printf("writes %ld stale %ld\n", writes, stale);
	return stale == 0 ? 0 : 1;
}
