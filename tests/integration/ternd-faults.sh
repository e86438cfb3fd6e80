#!/bin/bash
# ternd-faults.sh - storage faults on the acceptance path: ENOSPC and EIO
# from write and fdatasync (spool, the write-ahead log) answer 451 4.3.0,
# leave nothing half-visible, and lose no acknowledged message; a failed
# LMDB commit after the 250 is tried again until the message is queued,
# and if ternd is stopped meanwhile, the next start, on the same fault,
# starts without it and replays the log once the fault clears;
# ternd recovers when the fault clears. Last, a queue database whose map
# cannot grow (mmap fails): ternd stops with a fatal error and recovers at
# the next start. Faults come from an LD_PRELOAD
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

# The LMDB commit fails after the 250: the message was synced in the
# spool log, its records not yet in the database. The committer tries the
# transaction again (once a second) and the message is queued once the
# fault clears.
export FAULTFS_DIR_SAVED=$FAULTFS_DIR
ternd_stop
FAULTFS_DIR=$top/t/state LD_PRELOAD=$shim ternd_start
echo "fdatasync=EIO" >"$FAULTFS_CONTROL"
r=$(send 1000)
tap_like "LMDB commit fails (fdatasync EIO) after the log flush: 250" "$r" '^250 2\.0\.0 '
acked+=("$(awk '{print $NF}' <<<"$r")")
# _retrying - the committer said it tries the transaction again
_retrying() {
	grep -q '1 acknowledged message only in the spool log: trying again every second' "$TERND_LOG"
}
tap_check "... the committer tries the transaction again" wait_until 10 _retrying
# Stopped meanwhile, the message stays in the log for the next start; that
# start cannot replay it while the fault lasts, starts anyway, and the
# running ternd replays the log once the fault clears.
ternd_stop
tap_check "... stopped meanwhile: the message is left in the log for the next start" \
	grep -q '1 acknowledged message left in the spool log for the next start' "$TERND_LOG"
FAULTFS_DIR=$top/t/state LD_PRELOAD=$shim ternd_start
tap_is "... started again with the fault on: it starts" "$?" 0
tap_check "... without the log's mail, and says so" \
	grep -q 'recovery: the spool log holds acknowledged mail the queue database cannot take yet' "$TERND_LOG"
: >"$FAULTFS_CONTROL"
# _in_queue QID - ternq shows the message
_in_queue() {
	ternq_ show "$1" >/dev/null 2>&1
}
tap_check "... and the message is queued once the fault clears" wait_until 10 _in_queue "${acked[-1]}"
tap_check "... replayed by the running ternd" \
	grep -q 'recovery: the spool log is replayed: 1 acknowledged message recorded' "$TERND_LOG"
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

# --- the queue database cannot grow its map -------------------------------------
# A fresh ternd whose database starts with a 1 MB map; while the fault is
# on, mmap of data.mdb over 1 MB fails (ENOMEM), so the write that finds
# the map full cannot grow it. LMDB has dropped the old map by then, so
# ternd stops with a fatal error (as on a failed meta-page write) and
# recovers at the next start, where the map grows; no acknowledged
# message is lost.
blast=${top_builddir:-$here/../..}/bench/smtp-blast
echo "mmap=ENOMEM" >"$FAULTFS_CONTROL"
FAULTFS_DIR=$top/m/state FAULTFS_MMAP_OVER=1048576 LD_PRELOAD=$shim \
	ternd_setup "$top/m" "queue_map_size = 1MB" || exit 1
"$blast" -c 4 -n 3000 -s 2000 -o "$top/m.acked" "127.0.0.1:$TERND_PORT" >"$top/m.blast1" 2>&1 &
bpid=$!
tap_bg_register "$bpid"
# _ternd_gone - the ternd process has exited
_ternd_gone() {
	! kill -0 "$TERND_PID" 2>/dev/null
}
tap_check "map full, growth fails: ternd stops" wait_until 120 _ternd_gone
rc=0
wait "$TERND_PID" || rc=$?
tap_like "... with a fatal error, not a crash (exit status $rc)" "$rc" '^1$'
tap_check "... saying why" grep -q 'queue database: cannot grow its map to 2 MB: Cannot allocate memory: stopping, so that a restart can recover the queue' "$TERND_LOG"
: >"$FAULTFS_CONTROL"
ternd_start
wait "$bpid" 2>/dev/null
"$blast" -c 4 -n 500 -s 2000 -o "$top/m.acked" "127.0.0.1:$TERND_PORT" >"$top/m.blast2" 2>&1
tap_like "the fault cleared: after a restart the map grows, all 500 accepted" \
	"$(cat "$top/m.blast2")" 'accepted=500 failed=0 '
tap_check "the map grew beyond 1 MB" test "$(stat -c %s "$top/m/state/queue/data.mdb")" -gt 1048576
rc=0
ternd_stop || rc=$?
tap_is "ternd stops cleanly" "$rc" 0
ternd_start
ternq_ list --json | python3 -c 'import json,sys; [print(json.loads(l)["queue_id"]) for l in sys.stdin]' \
	| sort -u >"$top/m.queued"
tap_is "every acknowledged message is queued after the restarts" \
	"$(sort -u "$top/m.acked" | comm -23 - "$top/m.queued" | wc -l)" 0
tap_like "and there are more than 500" "$(wc -l <"$top/m.queued")" '^([5-9][0-9]{2}|[0-9]{4,})$'
ternd_stop
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
