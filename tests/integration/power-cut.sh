#!/bin/bash
# power-cut.sh - cut the power under ternd while it receives and relays;
# every acknowledged message reaches the peer at least once.
#
# ternd's state_dir and spool_dir live on tests/fault/cutfs, a FUSE file
# system that at a cut keeps only what was made durable (file data by
# fsync/fdatasync, names by an fsync of their directory). kill -9 alone
# keeps the page cache, so a missing fsync of a directory never shows
# there; here it loses the file.
#
# smtp-blast sends (DATA and BDAT, segment-sized and own-file bodies) and
# records the queue id of every message ternd acknowledged; ternd relays at
# the same time to an smtp-sink that dumps each transaction. CUTS times (50
# by default; the whole test about 2.5 minutes here, 6 in the sanitizer
# suite), at a random moment: the disk is cut and ternd killed with SIGKILL at once,
# the file system is unmounted and mounted again ("power on"), ternd
# restarted. Then the queue must drain; every acknowledged id must be in a
# dump (ternd's Received: names it); the queue database opens (ternq list)
# after every cut; no recovery found a damaged body or a record failing
# validation. Duplicates are counted. CUTFS_TORN=1 makes the cuts torn (a
# random subset of what was pending survives; by default none of it).
# The losses traced on 2026-12-02 were cutfs's own: FUSE dropped cached
# pages of data.mdb under LMDB's writes, and LMDB built on stale pages
# (tests/integration/cutfs.sh shows the drop; tests/RELIABILITY.md).
# When a point fails, the queue left and the lost messages' log lines are
# printed.
#
# ternd writes a batch's envelope records and bodies to the spool segment,
# its write-ahead log, answers once they are flushed, then records the
# batch in LMDB; a cut between the two leaves acknowledged mail in the log
# alone, which recovery
# replays. The test counts the restarts that replayed some, and fails if
# none did (the path went untested).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"
build=${top_builddir:-$here/../..}
blast=$build/bench/smtp-blast
cuts=${CUTS:-50}
conns=4

CUTFS_BIN=$build/tests/fault/cutfs
. "$here/../lib/cutfs.sh"
cutfs_skip_unless_usable
command -v smtp-sink >/dev/null || tap_skip_all "smtp-sink not installed"
[ -x "$blast" ] || tap_skip_all "bench/smtp-blast not built"

top=$(tap_tmpdir)
CUTFS_DISK=$top/disk CUTFS_MNT=$top/mnt CUTFS_LOG=$top/cutfs.log CUTFS_ARGS=
mnt=$CUTFS_MNT
mkdir -p "$CUTFS_DISK" "$mnt" && chmod 0755 "$CUTFS_DISK" "$mnt"
[ "${CUTFS_TORN:-0}" = 1 ] && CUTFS_ARGS=--torn

# power_cut - cut the disk and kill ternd at once, unmount
power_cut() {
	cutfs_cut_begin
	kill -KILL "$TERND_PID" 2>/dev/null
	wait "$TERND_PID" 2>/dev/null
	cutfs_cut_end
}

tap_on_exit "kill -KILL \$(cat '$top/ternd.pid' 2>/dev/null) 2>/dev/null; sleep 0.2; fusermount3 -u -z '$mnt'"
: >"$CUTFS_LOG"
cutfs_mount || tap_skip_all "cutfs did not mount: $(tail -1 "$CUTFS_LOG")"

dumps=$top/dumps
sport=$(free_port)
sink sink "$sport" "$dumps"

TERND_DISK=$mnt
TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $sport" "tls = none" \
	"min_idle = 1" "max_connections = $conns" "[routes]" "* = sink")
ternd_setup "$top/t" "large_message_threshold = 16KB" "min_backoff = 1s" "max_backoff = 2s" || exit 1
echo "$TERND_PID" >"$top/ternd.pid"

"$blast" -c 3 -n 1000000 -s 10240 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast1.log" 2>&1 &
b1=$!
"$blast" -B -c 1 -n 1000000 -s 20480 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast2.log" 2>&1 &
b2=$!
tap_bg_register "$b1" "$b2"

started=0 opened=0 start=$SECONDS
for cut in $(seq "$cuts"); do
	sleep "0.$((RANDOM % 9 + 1))"
	power_cut || { tap_diag "cut $cut: the disk did not cut or unmount"; break; }
	cutfs_mount || { tap_diag "cut $cut: cutfs did not mount again"; break; }
	ternd_start || { tap_diag "cut $cut: ternd did not start"; break; }
	echo "$TERND_PID" >"$top/ternd.pid"
	started=$((started + 1))
	ternq_ list >/dev/null 2>>"$top/ternq.err" && opened=$((opened + 1))
done
kill -TERM "$b1" "$b2" 2>/dev/null
wait "$b1" "$b2" 2>/dev/null
tap_is "ternd came back after each of $cuts power cuts" "$started" "$cuts"
tap_is "the queue database opened after each cut (ternq list)" "$opened" "$cuts"

# _drain - wait for the queue to drain for as long as it keeps shrinking
# (a sanitizer build relays the backlog of 50 cuts slowly): it fails after
# 60 s without progress
_drain() {
	local last=-1 same=0 n
	while ! ternd_drained; do
		n=$(ternq_ list --json 2>/dev/null | wc -l)
		if [ "$n" = "$last" ]; then same=$((same + 1)); else same=0 last=$n; fi
		[ "$same" -lt 60 ] || return 1
		sleep 1
	done
}
tap_check "the queue drains to the peer" _drain
ternq_ list >"$top/left" 2>&1
ternd_stop

ternd_relay_outcome "$top/acked" "$dumps" "$top/ids"
tap_like "clients got acknowledgements across $cuts cuts ($ACKED)" "$ACKED" '^[1-9][0-9]*$'
tap_is "every acknowledged message reached the peer (lost: $(head -c 200 "$top/ids.lost" | tr '\n' ' '))" \
	"$LOST" 0
dups=$DUPS
# What a CI log needs to tell a lost message from a stuck one: what the
# queue held at the end, and each of the first lost messages' log lines.
if [ "$LOST" -gt 0 ] || [ -s "$top/left" ]; then
	tap_diag "left in the queue: $(head -c 600 "$top/left")"
	for id in $(head -3 "$top/ids.lost"); do
		tap_diag "$id in ternd's log: $(grep -F "$id" "$TERND_LOG" | tail -6)"
	done
	tap_diag "errors and warnings: $(grep -E ": (error|warning|fatal|panic): " "$TERND_LOG" | tail -8)"
fi
tap_diag "$cuts cuts in $((SECONDS - start)) s: $ACKED acknowledged, $DELIVERED delivered," \
	"$LOST lost, $dups duplicate deliveries"
tap_check "duplicates ($dups) within what is in flight at the cuts ($((cuts * conns * 2)))" \
	test "$dups" -le $((cuts * conns * 2))
tap_is "no spool file is left" "$(cd "$mnt/spool" && ls seg own | grep -c '^[0-9A-Z]')" 0
tap_is "recovery found no damaged body" \
	"$(grep -c 'recovery: checked .*, [1-9][0-9]* damaged' "$TERND_LOG")" 0
tap_is "no record failed validation, no recovery failed" \
	"$(grep -c 'fails validation\|recovery failed\|is damaged' "$TERND_LOG")" 0
replays=$(grep -c 'recovery: spool segment [0-9a-f]*: [1-9][0-9]* messages* replayed' "$TERND_LOG")
replayed=$(grep -o ': [0-9]* messages* replayed' "$TERND_LOG" | awk '{s += $2} END {print s + 0}')
tap_diag "$replays of $cuts restarts replayed acknowledged mail from the spool log ($replayed messages)"
tap_like "some restart replayed the log ($replays)" "$replays" '^[1-9][0-9]*$'
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
