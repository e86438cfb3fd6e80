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
ternd_stop_checked
tap_done
