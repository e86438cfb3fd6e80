#!/bin/bash
# cutfs.sh - the power-cut simulator itself (tests/fault/cutfs), which
# power-cut.sh trusts: at a cut it keeps exactly what was made durable,
# and while it runs a file read through a shared map shows what pwrite
# wrote, however often another process opens or stats the file.
#
# The second point failed before cutfs kept FUSE from dropping cached
# pages (2026-12-02: 16 to 22 stale reads in each of three 10-second
# runs, none with the fix): LMDB, which reads data.mdb that way, then
# copied stale pages into new transactions, and power-cut.sh lost
# acknowledged mail the cut had nothing to do with.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/util.sh"
build=${top_builddir:-$here/../..}
mapcheck=$build/tests/fault/mapcheck
CUTFS_BIN=$build/tests/fault/cutfs
. "$here/../lib/cutfs.sh"
cutfs_skip_unless_usable
[ -x "$mapcheck" ] || tap_skip_all "tests/fault/mapcheck not built"

top=$(tap_tmpdir)
CUTFS_DISK=$top/disk CUTFS_MNT=$top/mnt CUTFS_LOG=$top/cutfs.log CUTFS_ARGS=
m=$CUTFS_MNT
mkdir -p "$CUTFS_DISK" "$m"
: >"$CUTFS_LOG"
tap_on_exit "fusermount3 -u -z '$m' 2>/dev/null"
cutfs_mount || tap_skip_all "cutfs did not mount: $(tail -1 "$CUTFS_LOG")"

# A shared map sees each pwrite while the file is opened and stated.
"$mapcheck" "$m/map" 5 >"$top/mapcheck.out" 2>&1 &
mc=$!
tap_bg_register "$mc"
while kill -0 "$mc" 2>/dev/null; do
	cat "$m/map" >/dev/null 2>&1
	stat "$m/map" >/dev/null 2>&1
done
wait "$mc"
tap_like "a shared map shows every pwrite while another process opens the file" \
	"$(cat "$top/mapcheck.out")" '^writes [1-9][0-9]* stale 0$'
rm -f "$m/map"

# Made durable first (sync FILE is an fsync of FILE, a directory too),
# then changed without a sync.
mkdir "$m/d" && sync "$m"
for f in synced rewritten renamed removed; do
	printf '%s\n' "$f" >"$m/d/$f" && sync "$m/d/$f"
done
sync "$m/d"
printf 'new\n' >"$m/d/rewritten"
printf 'extended\n' >>"$m/d/synced"
printf 'data\n' >"$m/d/unnamed" && sync "$m/d/unnamed"
printf 'gone\n' >"$m/d/unsynced"
mv "$m/d/renamed" "$m/d/moved"
rm "$m/d/removed"

cutfs_cut_begin
cutfs_cut_end
tap_is "the cut is done and the file system unmounts" "$?" 0
cutfs_mount
tap_is "the file system mounts again" "$?" 0
tap_is "a synced file in a synced directory keeps its synced bytes" "$(cat "$m/d/synced")" "synced"
tap_is "a synced file rewritten without a sync has its old bytes" "$(cat "$m/d/rewritten")" "rewritten"
tap_check "a synced file whose directory was not synced is gone" test ! -e "$m/d/unnamed"
tap_check "a file never synced is gone" test ! -e "$m/d/unsynced"
tap_check "a rename without a sync of the directory is undone" \
	test -e "$m/d/renamed" -a ! -e "$m/d/moved"
tap_is "an unlink without a sync of the directory is undone" "$(cat "$m/d/removed")" "removed"
tap_is "nothing else is in the directory" "$(cd "$m/d" && ls | tr '\n' ' ')" \
	"removed renamed rewritten synced "
fusermount3 -u "$m"
wait "$CUTFS_PID" 2>/dev/null
tap_done
