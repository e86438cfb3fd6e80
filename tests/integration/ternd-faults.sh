#!/bin/bash
# ternd-faults.sh - storage faults on the acceptance path: ENOSPC and EIO
# from write and fdatasync (spool) and from the LMDB commit answer
# 451 4.3.0, leave nothing half-visible, and lose no acknowledged message;
# ternd recovers when the fault clears. Faults come from an LD_PRELOAD
# shim (tests/fault/faultfs.so) steered through a control file.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
shim=${top_builddir:-$here/../..}/tests/fault/faultfs.so

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
[ -f "$shim" ] || tap_skip_all "faultfs.so not built (make check builds it)"

top=$(tap_tmpdir)
export FAULTFS_CONTROL=$top/fault FAULTFS_DIR=$top/t/spool
: >"$FAULTFS_CONTROL"
chmod 644 "$FAULTFS_CONTROL"
export LD_PRELOAD=$shim ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
ternd_setup "$top/t" "large_message_threshold = 16KB" || exit 1
unset LD_PRELOAD

# send SIZE - one message of about SIZE octets; prints the final reply
send() {
	local body
	body=$(head -c "$1" /dev/zero | tr '\0' 'x' | fold -w 70)
	swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com \
		--body "$body" 2>&1 | grep '^<[-*]' | tail -2 | head -1 | sed 's/^<[-*]* *//'
}

acked=()
# expect_ok SIZE WHAT
expect_ok() {
	local r
	r=$(send "$1")
	tap_like "$2: 250" "$r" '^250 2\.0\.0 Ok: queued as [0-9A-Z]{13}$'
	acked+=("$(awk '{print $NF}' <<<"$r")")
}

expect_ok 1000 "no fault"
for fault in write=ENOSPC write=EIO fdatasync=EIO fdatasync=ENOSPC fsync=EIO; do
	for size in 1000 30000; do
		# fsync only matters when a file is new: a segment after a failure, or an own file
		echo "$fault" >"$FAULTFS_CONTROL"
		r=$(send "$size")
		: >"$FAULTFS_CONTROL"
		if [ "$fault" = fsync=EIO ] && [ "$size" = 1000 ]; then
			# The current segment needs no directory fsync: accepted.
			tap_like "$fault, $size octets: no fsync needed, 250" "$r" '^250 2\.0\.0 '
			acked+=("$(awk '{print $NF}' <<<"$r")")
			continue
		fi
		tap_is "$fault, $size octets: 451 4.3.0" "$(cut -c1-9 <<<"$r")" "451 4.3.0"
		expect_ok "$size" "after $fault clears, $size octets"
	done
done

# The LMDB commit fails: the spool was synced, the records were not.
export FAULTFS_DIR_SAVED=$FAULTFS_DIR
ternd_stop
FAULTFS_DIR=$top/t/state LD_PRELOAD=$shim ternd_start
echo "fdatasync=EIO" >"$FAULTFS_CONTROL"
r=$(send 1000)
: >"$FAULTFS_CONTROL"
tap_is "LMDB commit fails (fdatasync EIO): 451 4.3.0" "$(cut -c1-9 <<<"$r")" "451 4.3.0"
expect_ok 1000 "after the LMDB fault clears"

ternd_stop
ternd_start
missing=0
for q in "${acked[@]}"; do
	ternq_ cat "$q" >/dev/null 2>&1 || missing=$((missing + 1))
done
tap_is "after restart: all ${#acked[@]} acknowledged messages intact" "$missing" 0
tap_is "nothing else in the queue" "$(ternq_ list --json | wc -l)" "${#acked[@]}"
ternq_ list --json | python3 -c 'import json,sys; [print(json.loads(l)["spool_file"]) for l in sys.stdin]' \
	| sort -u >"$top/files.want"
ternd_stop
(cd "$TERND_DIR/spool" && ls seg/* own/* 2>/dev/null | sort) >"$top/files.have"
tap_is "no orphaned spool files" "$(diff "$top/files.have" "$top/files.want" && echo same)" same
tap_check "errors were logged" grep -q "commit of 1 job failed: spool fdatasync: Input/output error" "$TERND_LOG"
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
