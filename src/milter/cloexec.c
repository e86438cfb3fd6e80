/*
 * cloexec - libmilter's own descriptors close-on-exec, like tern's.
 *
 * libmilter (8.17) sets FD_CLOEXEC on its listening socket and on every
 * connection it accepts, but makes the pipe that wakes its worker pool
 * (mi_pool_controller_init, inside smfi_main) with plain pipe(2), which
 * it does not export to us. This definition takes the place of libc's
 * pipe() for the whole program, libmilter included (the executable's
 * symbol comes first in the dynamic linker's search, and a static
 * libmilter.a is linked against it too). tern-milter itself never calls
 * pipe(). Must never change what the call does beyond O_CLOEXEC.
 */
#include "config.h"

#include <fcntl.h>
#include <unistd.h>

/* pipe - pipe(2) with both ends close-on-exec */
int pipe(int fds[2])
{
	return pipe2(fds, O_CLOEXEC);
}
