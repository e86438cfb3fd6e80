# cutfs.sh - mount tests/fault/cutfs, cut it, mount it again.
#
# Set CUTFS_BIN, CUTFS_DISK (the backing directory), CUTFS_MNT and
# CUTFS_LOG (its standard error; the cut lines go there) first;
# CUTFS_ARGS may hold --torn. CUTFS_PID is the running instance. The
# caller sources tap.sh and util.sh.

# cutfs_skip_unless_usable - skip the whole test when cutfs cannot run here
cutfs_skip_unless_usable() {
	[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (FUSE allow_other)"
	[ -x "$CUTFS_BIN" ] || tap_skip_all "tests/fault/cutfs not built (configure found no fuse3: install libfuse3-dev fuse3)"
	command -v fusermount3 >/dev/null || tap_skip_all "fusermount3 not installed (Debian package fuse3)"
	[ -c /dev/fuse ] || modprobe fuse 2>/dev/null
	[ -c /dev/fuse ] || tap_skip_all "no /dev/fuse (the kernel has no FUSE)"
}

# cutfs_mount - mount cutfs over the backing directory, wait for it (in
# the test's own shell, never in a command substitution: CUTFS_PID is set)
cutfs_mount() {
	# shellcheck disable=SC2086 # CUTFS_ARGS is a list of options
	"$CUTFS_BIN" ${CUTFS_ARGS:-} "--seed=$RANDOM" "$CUTFS_DISK" "$CUTFS_MNT" -f \
		-o allow_other,default_permissions >>"$CUTFS_LOG" 2>&1 &
	CUTFS_PID=$!
	tap_bg_register "$CUTFS_PID"
	wait_until 10 mountpoint -q "$CUTFS_MNT"
}

# cutfs_cuts - how many cut lines the log has
cutfs_cuts() {
	grep -c '^cutfs: cut: ' "$CUTFS_LOG"
}

# _cutfs_cut_done N - the log has more than N cut lines
_cutfs_cut_done() {
	[ "$(cutfs_cuts)" -gt "$1" ]
}

# cutfs_cut_begin - cut the power (SIGUSR1) without waiting; CUTFS_CUTS is
# the count of cuts before it, for cutfs_cut_end
cutfs_cut_begin() {
	CUTFS_CUTS=$(cutfs_cuts)
	kill -USR1 "$CUTFS_PID"
}

# cutfs_cut_end - wait for the cut begun to be done, then unmount
cutfs_cut_end() {
	wait_until 10 _cutfs_cut_done "$CUTFS_CUTS" || return 1
	fusermount3 -u "$CUTFS_MNT" || fusermount3 -u -z "$CUTFS_MNT" || return 1
	wait "$CUTFS_PID" 2>/dev/null
	return 0
}
