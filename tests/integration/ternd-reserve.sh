#!/bin/bash
# ternd-reserve.sh - the storage reserve follows the pipeline windows in
# use, not every window at full depth (issue 34): state and spool on a
# 64 MB tmpfs, queue_minfree = 1MB.
#   1. ternd -n warns when the reserve at full depth (16 connections x 32
#      transactions x 256 KB, 128 MB) passes a quarter of spool_dir's file
#      system, with the exact figures; with 1 connection of depth 4, no
#      warning
#   2. a ternd whose peer has 16 connections but nothing to deliver keeps
#      queue_minfree alone as its reserve (ternq stats), so ingest goes on
#      (before: 1 MB + 128 MB, more than the disk: every MAIL got 452)
#   3. with 4 messages written to a CHUNKING peer that does not answer
#      (bench/chunk-sink stopped with SIGSTOP on its 2 warm connections),
#      the reserve is queue_minfree + 256 KB for each of the 1 to 4
#      transactions in flight; once the peer answers and the queue
#      drains, queue_minfree again
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (tmpfs, and ternd drops privileges)"
top=$(tap_tmpdir)
disk=$top/disk
mkdir -p "$disk"
mount -t tmpfs -o size=64m,mode=0755 tmpfs "$disk" || tap_skip_all "cannot mount a tmpfs"
tap_on_exit "umount -l '$disk'"
closed=$(free_port)	# reserved, never bound: connections are refused

# peers CONNS DEPTH - a peer that refuses connections, CONNS x DEPTH
peers() {
	printf '%s\n' "[peer wide]" "host = [127.0.0.1]" "port = $closed" "tls = none" "min_idle = 0" \
		"max_connections = $1" "max_pipeline_depth = $2" "[routes]" "* = wide"
}

TERND_DISK=$disk
TERND_PEERS=$(peers 16 32)
ternd_setup "$top/t" "queue_minfree = 1MB" "min_backoff = 60s" || exit 1
size_kb=$(($(stat -f -c '%b * %S' "$disk") / 1024))

# --- 1. ternd -n -------------------------------------------------------------------------
"$_ternd_bin" -n -c "$TERND_CONF" >/dev/null 2>"$top/n.err"
tap_is "ternd -n: the full-depth reserve passes a quarter of the spool's file system" \
	"$(grep -c "^warning: the storage reserve at full pipeline depth is $((1024 + 16 * 32 * 256)) KB (queue_minfree, plus 256 KB for each transaction that may be in flight: max_connections x max_pipeline_depth of each peer), more than a quarter of the $size_kb KB of spool_dir's file system$" "$top/n.err")" 1
sed "s/^max_connections = 16$/max_connections = 1/; s/^max_pipeline_depth = 32$/max_pipeline_depth = 4/" \
	"$TERND_CONF" >"$top/small.conf"
"$_ternd_bin" -n -c "$top/small.conf" >/dev/null 2>"$top/n2.err"
tap_is "ternd -n: 1 connection of depth 4, no warning of the reserve" \
	"$(grep -c 'storage reserve' "$top/n2.err")" 0

# --- 2. the reserve while nothing is in flight -------------------------------------------
tap_like "ternq stats: the reserve is queue_minfree alone" "$(ternq_ stats | grep '^storage: ')" \
	'^storage: ok: [0-9]+ KB free, reserve 1024 KB$'
printf '%s\n' '<<' '> EHLO x\r\n' '<' '> MAIL FROM:<a@example.org>\r\n' '<' '> QUIT\r\n' '<' >"$top/chat"
tap_like "MAIL is taken" "$(python3 "$here/../lib/smtp_chat.py" "127.0.0.1:$TERND_PORT" "$top/chat" 2>/dev/null | sed -n 3p)" \
	'^250 '

# --- 3. the reserve while transactions are in flight -----------------------------------
sink=${top_builddir:-$here/../..}/bench/chunk-sink
[ -x "$sink" ] || { tap_skip "3: bench/chunk-sink not built"; ternd_stop_checked; tap_done; exit; }
ternd_stop_checked
sport=$(free_port)
"$sink" -q -o "$top/sink.count" "127.0.0.1:$sport" &
spid=$!
tap_bg_register "$spid"
wait_for_port "$sport"
TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $sport" "tls = none" \
	"min_idle = 2" "max_connections = 2" "[routes]" "* = sink")
ternd_setup "$top/t3" "queue_minfree = 1MB" || exit 1
# reserve_kb - the reserve ternq stats says
reserve_kb() {
	ternq_ stats | sed -n 's/^storage: [a-z]*: [0-9]* KB free, reserve \([0-9]*\) KB.*$/\1/p'
}
# sink_has WHAT - the sink's counter line holds WHAT (connections=2, ...)
sink_has() {
	grep -q " $1 " "$top/sink.count" 2>/dev/null || grep -q "^$1 " "$top/sink.count" 2>/dev/null
}
tap_check "3: ternd keeps 2 warm connections to the peer" wait_until 30 sink_has connections=2
kill -STOP "$spid"
for i in 1 2 3 4; do
	swaks --server "127.0.0.1:$TERND_PORT" --from a@example.org --to "r$i@example.com" \
		--timeout 10 >"$top/swaks.$i" 2>&1
done
tap_is "3: 4 messages accepted" "$(grep -l '^<-  250 2\.0\.0 Ok: queued as' "$top"/swaks.* | wc -l)" 4
above() {
	local r
	r=$(reserve_kb)
	[ -n "$r" ] && [ "$r" -gt 1024 ]
}
tap_check "3: with the peer silent, the reserve grows past queue_minfree" wait_until 30 above
r=$(reserve_kb)
tap_like "3: ... by 256 KB for each of 1 to 4 transactions in flight ($r KB)" \
	"$(( (r - 1024) % 256 )):$(( (r - 1024) / 256 ))" '^0:[1-4]$'
kill -CONT "$spid"
tap_check "3: the peer answers: all 4 taken" wait_until 60 sink_has messages=4
back() {
	[ "$(reserve_kb)" = 1024 ]
}
tap_check "3: ... and the reserve is queue_minfree again" wait_until 30 back
ternd_stop_checked
kill -TERM "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
tap_done
