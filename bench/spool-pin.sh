#!/bin/bash
# spool-pin.sh - does long-deferred mail pin the spool? (issue 18 §2)
#
# The issue's scenario: 4 KB messages, 1% of them to a peer that refuses
# connections (nothing listens on its port), the rest to a live smtp-sink;
# ternd's state and spool on a DISK_MB (256) MB tmpfs, default
# segment_size (64MB), queue_minfree = MINFREE (16MB). ROUNDS rounds, each
# of PER_ROUND messages (the 1% of them to the dead peer sent in the same
# round, so they are spread over the segments), by bench/smtp-blast
# (pipelined DATA). After each round: the spool's octets on disk against
# the live octets (ternq stats --json: what queued messages hold), and
# the messages refused so far. The target: spool <= 2 x live + one
# segment at every sample once the live mail has gone out, and no message
# refused while the live octets fit on the disk.
#
#     sudo bench/spool-pin.sh                        # 100 rounds of 1,000
#     sudo TERND=/path/to/old/ternd bench/spool-pin.sh   # another build
#
# Prints one line per round and a summary; nothing is kept. Needs root
# (tmpfs mount, ternd drops privileges), smtp-sink, jq, a built tree.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top_src=$(cd "$here/.." && pwd)
bench_name=spool-pin
. "$here/lib.sh"
TERND_BIN=${TERND:-$(built src/ternd/ternd)}
TERNQ_BIN=$(built src/ternq/ternq)
. "$top_src/tests/lib/tap.sh"
. "$top_src/tests/lib/ternd.sh"

ROUNDS=${ROUNDS:-100}
PER_ROUND=${PER_ROUND:-1000}
DISK_MB=${DISK_MB:-256}
MINFREE=${MINFREE:-16MB}
require_uint ROUNDS PER_ROUND DISK_MB
[ "$(id -u)" -eq 0 ] || die "must run as root"
command -v smtp-sink >/dev/null || die "smtp-sink not installed"
command -v jq >/dev/null || die "jq not installed"
blast=$(built bench/smtp-blast)
[ -x "$blast" ] || die "bench/smtp-blast not built"

top=$(tap_tmpdir)
disk=$top/disk
mkdir -p "$disk" "$top/sink" && chmod 0777 "$top/sink"
mount -t tmpfs -o "size=${DISK_MB}m,mode=0755" tmpfs "$disk" || die "cannot mount a tmpfs"
trap 'kill -TERM "$TERND_PID" 2>/dev/null; wait "$TERND_PID" 2>/dev/null; umount "$disk"' EXIT
sport=$(free_port)
dport=$(free_port)
# smtp-sink without -d: it counts, dumps nothing (the sink is not the test)
smtp-sink -c -u nobody "127.0.0.1:$sport" 256 >"$top/sink.out" 2>&1 &
tap_bg_register "$!"
wait_for_port "$sport"
TERND_DISK=$disk
TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $sport" "tls = none" \
	"min_idle = 2" "max_connections = 8" \
	"[peer dead]" "host = [127.0.0.1]" "port = $dport" "tls = none" "min_idle = 0" \
	"[routes]" "dead.test = dead" "* = sink")
ternd_setup "$top/t" "queue_minfree = $MINFREE" "min_backoff = 1h" "max_backoff = 1h" ||
	die "ternd did not start"

seg=$((64 << 20))
refused=0 worst=0 viol=0
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs; ternd: ${TERND:-built tree}"
echo "# ${DISK_MB} MB tmpfs, segment_size 64MB, queue_minfree $MINFREE, 4 KB messages, 1% to a dead peer"
printf '%6s %9s %12s %12s %7s %9s\n' round sent spool_bytes live_bytes ratio refused
for r in $(seq "$ROUNDS"); do
	dead=$((PER_ROUND / 100))
	"$blast" -c 4 -n $((PER_ROUND - dead)) -s 4096 -d live.test "127.0.0.1:$TERND_PORT" >"$top/b1" 2>&1 &
	b1=$!
	"$blast" -c 1 -n "$dead" -s 4096 -d dead.test "127.0.0.1:$TERND_PORT" >"$top/b2" 2>&1
	wait "$b1"
	for f in "$top/b1" "$top/b2"; do
		n=$(sed -n 's/.* failed=\([0-9]*\) .*/\1/p' "$f")
		refused=$((refused + ${n:-0}))
	done
	# the live mail leaves; what stays is the dead peer's
	for _ in $(seq 100); do
		[ "$(ternq_ list --json | grep -c '@live\.test')" -eq 0 ] && break
		sleep 0.1
	done
	sleep 1.2	# one look at the segment table a second: let a pass run
	st=$(ternq_ stats --json)
	sb=$(jq -r .spool_bytes <<<"$st") lb=$(jq -r .live_bytes <<<"$st")
	ratio=$(awk -v s="$sb" -v l="$lb" 'BEGIN { printf "%.2f", l ? s / l : 0 }')
	[ "$sb" -gt $((2 * lb + seg)) ] && viol=$((viol + 1))
	[ "$sb" -gt "$worst" ] && worst=$sb
	printf '%6d %9d %12d %12d %7s %9d\n' "$r" $((r * PER_ROUND)) "$sb" "$lb" "$ratio" "$refused"
done
echo "# summary: $((ROUNDS * PER_ROUND)) sent, $refused refused, largest spool $worst octets," \
	"final live $lb octets; samples over 2 x live + one segment: $viol of $ROUNDS"
