#!/bin/bash
# ternd-disk-full.sh - a full disk while ternd receives and relays: no
# duplicate storm, no leaked segment files, ingest refused before the
# reserve for recording outcomes is gone, a start on a full disk.
#
# State and spool live on a small tmpfs. ternd relays to an smtp-sink
# that dumps every transaction (ternd's Received: names the queue id),
# at most 20 messages a second (max_message_rate), so that a backlog
# waits in the queue (300 messages: 15 s). The phases:
#  1. the store fails (the fault shim: every write under the tmpfs gets
#     ENOSPC, the queue database's included) for 8 s while a client keeps
#     sending: the outcomes of the attempts in flight cannot be
#     committed. No message may arrive twice, no segment file may pile up
#     (at most the segments holding queued mail + 1), and the storage
#     state is logged once;
#  2. the fault clears: the queue drains without a restart, nothing is lost;
#  3. the tmpfs filled by a file to below the reserve: MAIL gets 452 4.3.1,
#     said once in the log, while queued mail still drains;
#  4. filled to the last block with the store failing, ternd is stopped
#     and started again (once with the queue drained, once with mail
#     queued): it starts, refuses MAIL, and once space returns it drains
#     the queue and takes and relays mail again. A stop loses the outcomes
#     kept in memory: those messages (and only those) come once more.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
shim=${top_builddir:-$here/../..}/tests/fault/faultfs.so
blast=${top_builddir:-$here/../..}/bench/smtp-blast

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (tmpfs, and ternd drops privileges)"
[ -f "$shim" ] || tap_skip_all "faultfs.so not built (make check builds it)"
[ -x "$blast" ] || tap_skip_all "bench/smtp-blast not built"
command -v smtp-sink >/dev/null || tap_skip_all "smtp-sink not installed"

top=$(tap_tmpdir)
disk=$top/disk
mkdir -p "$disk"
mount -t tmpfs -o size=32m,mode=0755 tmpfs "$disk" || tap_skip_all "cannot mount a tmpfs"
tap_on_exit "umount -l '$disk'"
export FAULTFS_CONTROL=$top/fault FAULTFS_DIR=$disk
: >"$FAULTFS_CONTROL"
chmod 644 "$FAULTFS_CONTROL"

dumps=$top/dumps
mkdir -p "$dumps" && chmod 0777 "$dumps"
sport=$(free_port)
smtp-sink -c -u nobody -d "$dumps/%M." "127.0.0.1:$sport" 64 >"$top/sink.out" 2>&1 &
tap_bg_register "$!"
wait_for_port "$sport"

TERND_DISK=$disk
TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $sport" "tls = none" \
	"min_idle = 1" "max_connections = 4" "max_pipeline_depth = 2" "max_message_rate = 20/s" "[routes]" "* = sink")
mport=$(free_port)
export LD_PRELOAD=$shim ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
ternd_setup "$top/t" "queue_minfree = 3MB" "segment_size = 1MB" "min_backoff = 1s" \
	"max_backoff = 2s" "metrics_listen = 127.0.0.1:$mport" || exit 1
unset LD_PRELOAD
# reserve: queue_minfree, plus 256 KB for each transaction in flight
# now (the windows in use, 0 to 4 connections x 2): at least 3 MB
reserve_kb=3072

# copies - the most copies of one message the sink got so far
copies() {
	find "$dumps" -type f -exec grep -ho 'by ternd\.test (tern) with ESMTP id [0-9A-Z]\{13\}' {} + |
		awk '{ n[$NF]++ } END { m = 0; for (k in n) if (n[k] > m) m = n[k]; print m }'
}
# seg_files - files in spool_dir/seg now
seg_files() {
	find "$disk/spool/seg" -type f | wc -l
}
# mail_reply - the reply to MAIL FROM on a fresh SMTP session
mail_reply() {
	printf '%s\n' '<<' '> EHLO x\r\n' '<' '> MAIL FROM:<a@example.org>\r\n' '<' '> QUIT\r\n' '<' \
		>"$top/chat"
	python3 "$here/../lib/smtp_chat.py" "127.0.0.1:$TERND_PORT" "$top/chat" 2>/dev/null | sed -n 3p
}

# --- 1. the store fails while mail is relayed ---------------------------------------
"$blast" -c 2 -n 300 -s 4000 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast1.log" 2>&1
tap_like "a backlog queued" "$(cat "$top/blast1.log")" 'accepted=300 failed=0 '
sleep 2	# about 40 sent, 260 wait
echo "write=ENOSPC" >"$FAULTFS_CONTROL"
# a client keeps sending while the store fails: every batch fails
"$blast" -c 1 -n 1000000 -s 4000 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast2.log" 2>&1 &
bpid=$!
tap_bg_register "$bpid"
most=0
for _ in $(seq 40); do
	sleep 0.2
	n=$(seg_files)
	[ "$n" -gt "$most" ] && most=$n
done
live=$(ternq_ list --json | python3 -c 'import json,sys
print(len({json.loads(l)["spool_file"] for l in sys.stdin if "seg/" in json.loads(l)["spool_file"]}))')
tap_check "the store failing: the state is logged" \
	grep -q 'storage: delivery outcomes cannot be committed' "$TERND_LOG"
tap_is "... once in 8 s" "$(grep -c 'storage: delivery outcomes cannot be committed' "$TERND_LOG")" 1
tap_like "... tern_storage_state is 2" \
	"$(curl -s --max-time 10 "http://127.0.0.1:$mport/metrics" | grep '^tern_storage_state ')" \
	'^tern_storage_state 2$'
tap_like "... ternq stats says so" "$(ternq_ stats | grep '^storage:')" '^storage: failing for [0-9]+ s'
tap_check "... files in spool_dir/seg stayed within the live segments + 1 ($most, $live live)" \
	test "$most" -le $((live + 1))
during=$(copies)
tap_is "... no message was sent twice meanwhile (most copies of one: $during)" "$during" 1

# --- 2. the fault clears: the queue drains without a restart ------------------------
: >"$FAULTFS_CONTROL"
kill -TERM "$bpid" 2>/dev/null
wait "$bpid" 2>/dev/null
tap_check "the fault cleared: the queue drains" wait_until 120 ternd_drained
tap_check "... the state ended, logged" grep -q 'storage: commits succeed again after' "$TERND_LOG"
tap_like "... ternq stats: ok" "$(ternq_ stats | grep '^storage:')" '^storage: ok'
ternd_relay_outcome "$top/acked" "$dumps" "$top/ids"
tap_like "acknowledged ($ACKED)" "$ACKED" '^[1-9][0-9]*$'
tap_is "every acknowledged message reached the peer" "$LOST" 0
tap_is "no extra copy (kept outcomes are recorded, never sent again)" "$DUPS" 0
tap_check "no segment file left but the current one ($(seg_files))" test "$(seg_files)" -le 1
echo "# phase 1-2: acknowledged $ACKED, delivered $DELIVERED, lost $LOST, extra copies $DUPS," \
	"most segment files $most ($live live)"

# --- 3. below the reserve: ingest refused, delivery goes on -------------------------
"$blast" -c 2 -n 100 -s 4000 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast3.log" 2>&1
free_kb=$(df -k --output=avail "$disk" | tail -1)
# 2 MB under the reserve: the drain frees segments (1 MB each, the
# current one rotated away once empty) and must not lift it back above
head -c $(((free_kb - reserve_kb + 2048) * 1024)) /dev/zero >"$disk/fill" 2>/dev/null
tap_like "free space below the reserve of $reserve_kb KB: MAIL gets 452 4.3.1" "$(mail_reply)" '^452 4\.3\.1 '
mail_reply >/dev/null
tap_is "... said once in the log" "$(grep -c 'below the reserve of' "$TERND_LOG")" 1
tap_check "... and queued mail still drains" wait_until 60 ternd_drained
rm -f "$disk/fill"
tap_like "space back: MAIL gets 250" "$(mail_reply)" '^250 '

# --- 4. stop on a full disk, start again ---------------------------------------------
# full_stop_start WHAT - fill the disk to its last block with the store
# failing, stop ternd, start it again: it starts and refuses MAIL; then
# free the space: the queue drains without a restart
full_stop_start() {
	echo "write=ENOSPC" >"$FAULTFS_CONTROL"
	sleep 1
	head -c 64M /dev/zero >"$disk/fill" 2>/dev/null
	ternd_stop
	LD_PRELOAD=$shim ternd_start
	tap_is "$1: on a full disk, with the store failing, ternd starts" "$?" 0
	tap_is "... no fatal line" "$(grep 'fatal:' "$TERND_LOG")" ""
	tap_like "... MAIL gets 452 4.3.1" "$(mail_reply)" '^452 4\.3\.1 '
	rm -f "$disk/fill"
	: >"$FAULTFS_CONTROL"
	tap_check "... space back: the queue drains without a restart" wait_until 120 ternd_drained
}
"$blast" -c 2 -n 50 -s 4000 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast4.log" 2>&1
wait_until 60 ternd_drained
full_stop_start "queue drained"
"$blast" -c 2 -n 50 -s 4000 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast5.log" 2>&1
full_stop_start "50 messages queued"
"$blast" -c 1 -n 20 -s 4000 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast6.log" 2>&1
tap_like "... and mail is taken again" "$(cat "$top/blast6.log")" 'accepted=20 failed=0 '
tap_check "... and relayed" wait_until 60 ternd_drained
ternd_relay_outcome "$top/acked" "$dumps" "$top/ids"
tap_is "over all phases: nothing acknowledged lost" "$LOST" 0
# a restart loses the outcomes kept in memory: those messages come once more
uniq -d "$top/ids.all" >"$top/ids.dup"
grep -o '[0-9A-Z]\{13\}: cannot record the delivery attempt' "$TERND_LOG" | cut -c1-13 | sort -u \
	>"$top/ids.unrecorded"
tap_is "extra copies ($DUPS) only of messages in flight when the store failed" \
	"$(comm -23 "$top/ids.dup" "$top/ids.unrecorded" | wc -l)" 0
tap_is "no message more than twice" "$(copies)" "$([ "$DUPS" -gt 0 ] && echo 2 || echo 1)"
echo "# all phases: acknowledged $ACKED, delivered $DELIVERED, lost $LOST, extra copies $DUPS"
ternd_stop_checked
tap_done
