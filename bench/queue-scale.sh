#!/bin/bash
# queue-scale.sh - ternd's memory and restart time with a large queue.
#
# What it measures: one ternd (SMTP listener on 127.0.0.1, state and spool
# on the real disk below BENCH_TMPDIR) is filled with QUEUED messages of
# SIZE bytes by bench/smtp-blast (SESSIONS sessions, pipelined DATA).
# Nothing leaves ternd's queue in this release, so they all stay QUEUED.
#
#   - RSS from /proc/PID/status (VmRSS, and its parts RssAnon: heap and
#     stacks, RssFile: mapped file pages, i.e. LMDB's map and the binary),
#     before the fill (the fixed base), after every FILL_STEPS-th of the
#     fill, after the fill, and after restarts; the summary divides the
#     growth by QUEUED (target: <= 256 bytes per queued message);
#   - restart time with the full queue (target < 5 s): SIGTERM, then start
#     ternd and time, from the exec, (1) the "started:" log line and (2) the
#     first answered SMTP greeting (a client connecting every 5 ms).  Done
#     twice: "warm" (the queue's files still in the page cache, as after
#     a plain restart) and "cold" (the page cache of the queue's files, and
#     only theirs, dropped with posix_fadvise(DONTNEED) before the start,
#     as after a reboot; other files on the machine are not touched);
#   - the fill rate per step (does ingest slow down as the queue grows?),
#     the disk space used, the time "ternq stats" takes on the queue, and
#     ternd's CPU use while idle, empty and with the full queue (the
#     scheduler looks for due recipients once a second).
#
# How to run (as root; needs python3, a built tree: make -j2, in-tree or
# in build/; binaries are copied first):
#
#     sudo bench/queue-scale.sh                    # 1,000,000 messages
#     sudo QUEUED=300000 bench/queue-scale.sh      # if the fill is too slow
#     sudo QUEUED=20000 bench/queue-scale.sh       # quick check
#
# The default uses about 1.6 GB on BENCH_TMPDIR's file system (1 KB bodies
# plus a Received: field in the spool, ~490 bytes of LMDB per message); the
# script checks with df first for a generous 4 GB and stops if there is not
# that much (lower QUEUED then).
#
# Environment (defaults in brackets):
#     QUEUED [1000000]  messages to queue     SIZE [1024]  bytes per message
#     SESSIONS [50]     smtp-blast sessions   FILL_STEPS [10]  RSS samples
#     BENCH_TMPDIR [/var/tmp]  where the queue lives (not tmpfs/ramfs)
#     SETTLE [2]        seconds to wait before reading RSS
#     IDLE [10]         seconds over which ternd's idle CPU use is measured
#     TERND, TERNQ, SMTP_BLAST  binaries [in-tree, else build/]
#
# ternd runs with max_queue_messages = 2 x QUEUED (the default, 1000000,
# would refuse the last messages of a 1M fill) and otherwise defaults.
# Not a test: no TAP; exits non-zero if the fill or a restart fails.
#
# CASE=dead-peer: the second case (issue 18): RCPTS recipients (1,000,000)
# deferred to a peer that refuses connections (a loopback port nobody
# listens on), held by its circuit breaker for DURATION seconds (240; the
# issue's full run is DURATION=1800), while a live peer (a sink in
# bench/rcpt-load.py) gets one message every LAT_EVERY seconds (10).
# The backlog is built by bench/rcpt-load.py fill: RCPTS / PER_MSG messages
# (PER_MSG [1000] = ternd's default recipient_limit) over FILL_SESSIONS
# [4] pipelined sessions, while the peer is already refusing (so the
# breaker opens after breaker_failures = 5 attempts and the rest of the
# fill is held unread). Both peers have ternd's defaults (breaker_cooldown
# 30s, breaker_max_cooldown 10m, min_idle 2, max_connections 16), tls =
# none. Measured over the hold (samples every SAMPLE [60] seconds and in
# total), targets in brackets:
#   - ternd's CPU from /proc/PID/stat (utime + stime), % of one core [< 1];
#   - queue-database write transactions: the committer's group commits
#     (tern_commit_batch_messages_count; one LMDB write transaction each)
#     and the jobs in them (_sum), per minute, against the probes (the
#     log's "half-open: probing" lines) and the live messages (each is an
#     acceptance and a delivery) [bounded by those, not by RCPTS];
#   - connections tried to the dead peer (tern_connections_tried_total)
#     and the breaker's transitions (log lines);
#   - a live message's delivery: the client's 250 to the sink's end of
#     data, per sample, p50 and max [<= 100 ms];
#   - RSS: VmRSS, RssAnon, RssFile with 0 queued (after the start) and with
#     the backlog (after the fill, at the end of the hold, and after a
#     restart with the backlog), the growth divided by RCPTS (and by the
#     messages) [<= 64 B per queued recipient].
#
#     sudo CASE=dead-peer bench/queue-scale.sh                # 4 min hold
#     sudo CASE=dead-peer DURATION=1800 bench/queue-scale.sh  # the full 30 min
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_src=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
# shellcheck disable=SC2034 # read by lib.sh's die
bench_name="queue-scale"
# shellcheck source=lib.sh
. "$here/lib.sh"

QUEUED=${QUEUED:-1000000}
SIZE=${SIZE:-1024}
SESSIONS=${SESSIONS:-50}
FILL_STEPS=${FILL_STEPS:-10}
SETTLE=${SETTLE:-2}
IDLE=${IDLE:-10}
BENCH_TMPDIR=${BENCH_TMPDIR:-/var/tmp}
CASE=${CASE:-fill}
RCPTS=${RCPTS:-1000000}
PER_MSG=${PER_MSG:-1000}
FILL_SESSIONS=${FILL_SESSIONS:-4}
DURATION=${DURATION:-240}
SAMPLE=${SAMPLE:-60}
LAT_EVERY=${LAT_EVERY:-10}

ternd_bin=${TERND:-$(built src/ternd/ternd)}
ternq_bin=${TERNQ:-$(built src/ternq/ternq)}
blast_bin=${SMTP_BLAST:-$(built bench/smtp-blast)}

[ "$(id -u)" -eq 0 ] || die "must run as root (ternd drops to user tern)"
for cmd in python3 ss df; do
	command -v "$cmd" >/dev/null || die "$cmd not installed"
done
for b in "$ternd_bin" "$ternq_bin" "$blast_bin"; do
	[ -x "$b" ] || die "$b not built (run make -j2 in $top_src or build/)"
done
require_uint QUEUED SIZE SESSIONS FILL_STEPS SETTLE IDLE RCPTS PER_MSG FILL_SESSIONS DURATION SAMPLE LAT_EVERY
case $CASE in
fill) ;;
dead-peer)
	[ "$PER_MSG" -gt 0 ] && [ "$RCPTS" -ge "$PER_MSG" ] && [ "$SAMPLE" -gt 0 ] && [ "$LAT_EVERY" -gt 0 ] ||
		die "PER_MSG, SAMPLE and LAT_EVERY must be > 0, RCPTS >= PER_MSG"
	QUEUED=$((RCPTS / PER_MSG)) # messages, for the space check below
	;;
*) die "CASE must be fill or dead-peer" ;;
esac
[ "$QUEUED" -gt 0 ] && [ "$SESSIONS" -gt 0 ] && [ "$FILL_STEPS" -gt 0 ] ||
	die "QUEUED, SESSIONS and FILL_STEPS must be > 0"
[ -d "$BENCH_TMPDIR" ] && [ -w "$BENCH_TMPDIR" ] || die "BENCH_TMPDIR $BENCH_TMPDIR is not a writable directory"
fstype=$(df --output=fstype "$BENCH_TMPDIR" | tail -n 1 | tr -d ' ')
case $fstype in
tmpfs | ramfs) die "BENCH_TMPDIR $BENCH_TMPDIR is on $fstype: use a disk-backed directory" ;;
esac
# Space: body + Received: field (~300 bytes) in the spool, ~1 KB of LMDB
# records and B-tree per message (generous), plus 1 GB and queue_minfree.
need_kb=$(((QUEUED * (SIZE + 2048) / 1024) + 1024 * 1024 + 100 * 1024))
[ "$CASE" = dead-peer ] && need_kb=$((RCPTS * 400 / 1024 + 1024 * 1024 + 100 * 1024))
avail_kb=$(df --output=avail -k "$BENCH_TMPDIR" | tail -n 1 | tr -d ' ')
[ "$avail_kb" -ge "$need_kb" ] ||
	die "not enough space on $BENCH_TMPDIR: $((avail_kb / 1024)) MB free, about $((need_kb / 1024)) MB needed (lower QUEUED)"
export TMPDIR=$BENCH_TMPDIR

# tap.sh: tmp dirs, free_port and cleanup by PID at exit (also on Ctrl-C)
. "$top_src/tests/lib/tap.sh"

# rss - print "VmRSS RssAnon RssFile" of PID in kB
rss() {
	awk '/^VmRSS:/ { v = $2 } /^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 }
		END { print v + 0, a + 0, f + 0 }' "/proc/$1/status"
}

# show_rss - print a labelled RSS line for the running ternd
show_rss() {
	local v a f
	read -r v a f <<<"$(rss "$TERND_PID")"
	printf '%-26s VmRSS %8d kB   RssAnon %8d kB   RssFile %8d kB   queued %s\n' \
		"$1" "$v" "$a" "$f" "${2:--}"
}

# idle_cpu - print ternd's CPU use (% of one core) over IDLE seconds of no load
idle_cpu() {
	local a b
	a=$(awk '{ print $14 + $15 }' "/proc/$TERND_PID/stat")
	sleep "$IDLE"
	b=$(awk '{ print $14 + $15 }' "/proc/$TERND_PID/stat")
	awk -v t=$((b - a)) -v hz="$clk_tck" -v s="$IDLE" 'BEGIN { printf "%.1f", 100 * t / hz / s }'
}

# per_msg - print (B - A) kB / N messages as bytes per message
per_msg() {
	awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", (b - a) * 1024 / n }'
}

# queued_now - print the number of messages ternd logged as queued
queued_now() {
	grep -c ' (queue active)$' "$TERND_LOG" 2>/dev/null || true
}

# filled - true once ternd logged QUEUED queued messages
filled() {
	[ "$(queued_now)" -ge "$QUEUED" ]
}

# evict - drop the page cache of every file below the given directories
# (posix_fadvise DONTNEED: only these files; other tenants are untouched)
evict() {
	sync
	python3 - "$@" <<-'EOF'
		import os, sys
		for top in sys.argv[1:]:
		    for d, _, files in os.walk(top):
		        for f in files:
		            try:
		                fd = os.open(os.path.join(d, f), os.O_RDONLY)
		            except OSError:
		                continue
		            try:
		                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
		            finally:
		                os.close(fd)
	EOF
}

# cached_mb - print how many MB of the files below DIR are in the page cache
cached_mb() {
	if command -v fincore >/dev/null; then
		find "$@" -type f -print0 | xargs -0r fincore -b -n -o RES 2>/dev/null |
			awk '{ s += $1 } END { printf "%.0f", s / 1048576 }'
	else
		echo "?"
	fi
}

# start_poll SIZE T0 - after ternd was started at T0 (microseconds) with
# its log SIZE bytes long, print "ms_to_started ms_to_greeting"
start_poll() {
	python3 - "$TERND_LOG" "$1" "$TERND_PORT" "$2" <<-'EOF'
		import socket, sys, time
		log, off, port, t0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) / 1e6
		started = greeted = None
		deadline = time.time() + 120
		while (started is None or greeted is None) and time.time() < deadline:
		    if started is None:
		        with open(log, "rb") as f:
		            f.seek(off)
		            if b": started: " in f.read():
		                started = time.time() - t0
		    if greeted is None:
		        try:
		            s = socket.create_connection(("127.0.0.1", port), timeout=1)
		            s.settimeout(120)
		            if s.recv(512).startswith(b"220"):
		                greeted = time.time() - t0
		                s.sendall(b"QUIT\r\n")
		                s.recv(512)
		            s.close()
		        except OSError:
		            pass
		    time.sleep(0.005)
		fmt = lambda v: "%.0f" % (v * 1000) if v is not None else "timeout"
		print(fmt(started), fmt(greeted))
	EOF
}

# restart - SIGTERM, optionally evict, timed start; prints a result line
restart() {
	local kind=$1 s0 s1 t0 st gr cached q size
	s0=$(now_us)
	ternd_stop || die "ternd exit status $? at stop: $(tail -n 5 "$TERND_LOG")"
	s1=$(now_us)
	if [ "$kind" = cold ]; then
		evict "$TERND_DIR/state" "$TERND_DIR/spool"
	fi
	cached=$(cached_mb "$TERND_DIR/state" "$TERND_DIR/spool")
	# Started here, in the main shell, so that ternd_stop can wait for it.
	size=$(stat -c %s "$TERND_LOG")
	t0=$(now_us)
	# shellcheck disable=SC2154 # _ternd_bin: set by tests/lib/ternd.sh
	"$_ternd_bin" -f -c "$TERND_CONF" >>"$TERND_LOG" 2>&1 &
	TERND_PID=$!
	tap_bg_register "$TERND_PID"
	read -r st gr < <(start_poll "$size" "$t0")
	[ "$st" != timeout ] && [ "$gr" != timeout ] || die "ternd did not come back: $(tail -n 5 "$TERND_LOG")"
	q=$(grep ': queue: [0-9]* messages' "$TERND_LOG" | tail -n 1 | sed 's/.*queue: \([0-9]*\) messages.*/\1/')
	printf 'restart %-5s stop %6.3f s   start->started %6s ms   start->greeting %6s ms   (queue files cached: %s MB; ternd says queue: %s messages)\n' \
		"$kind" "$(secs "$s0" "$s1")" "$st" "$gr" "$cached" "$q"
	[ "$q" = "$QUEUED" ] || die "after restart ternd reports $q queued messages, expected $QUEUED"
	restart_started[$kind]=$st
	restart_greeted[$kind]=$gr
}

# case_start PARAMS FILL TOOL - the command, the facts, the binaries
# (private copies, with TOOL, below a new $top) and the storage lines
case_start() {
	echo "command:  ${cmdline}  ($1 BENCH_TMPDIR=$BENCH_TMPDIR)"
	echo "fill:     $2"
	bench_facts
	bench_tree
	echo "tern:     $("$ternd_bin" -V 2>&1) ($ternd_bin, sha256 $(sha "$ternd_bin"))"
	ensure_tern_user || die "cannot create user tern"
	top=$(tap_tmpdir) || die "mktemp failed"
	bench_copy_tern "$top" "$ternd_bin" "$ternq_bin" "$3"
	echo "storage:  $top: $fstype on $(df --output=source "$top" | tail -n 1), $((avail_kb / 1024)) MB free, about $((need_kb / 1024)) MB needed"
}

declare -A restart_started restart_greeted
clk_tck=$(getconf CLK_TCK)
if [ "$CASE" = dead-peer ]; then
	# shellcheck source=queue-scale-dead-peer.sh
	. "$here/queue-scale-dead-peer.sh"
	exit 0
fi

echo "== ternd queue scale: RSS and restart time with a large queue"
case_start "QUEUED=$QUEUED SIZE=$SIZE SESSIONS=$SESSIONS FILL_STEPS=$FILL_STEPS" \
	"smtp-blast -c $SESSIONS -n $((QUEUED / FILL_STEPS)) -s $SIZE 127.0.0.1:PORT, $FILL_STEPS times" "$blast_bin"
blast=$top/bin/smtp-blast

ternd_setup "$top/t" "max_queue_messages = $((QUEUED * 2))" || die "ternd did not start"
echo "ternd:    pid $TERND_PID, smtp 127.0.0.1:$TERND_PORT"
echo
sleep "$SETTLE"
read -r base_v base_a base_f <<<"$(rss "$TERND_PID")"
show_rss "before the fill (base)" 0
echo "idle CPU, empty queue: $(idle_cpu)% of one core over ${IDLE}s"

step=$((QUEUED / FILL_STEPS))
sent=0
fill_t0=$(now_us)
for ((i = 1; i <= FILL_STEPS; i++)); do
	n=$step
	[ "$i" -eq "$FILL_STEPS" ] && n=$((QUEUED - sent))
	out=$("$blast" -c "$SESSIONS" -n "$n" -s "$SIZE" "127.0.0.1:$TERND_PORT" 2>&1)
	[[ $out == *" accepted=$n failed=0 "* ]] || die "fill step $i failed: $out"
	sent=$((sent + n))
	printf 'fill %2d/%d: %s\n' "$i" "$FILL_STEPS" "${out#messages=* accepted=* failed=* }"
	show_rss "  after $sent" "$sent"
done
fill_t1=$(now_us)
echo "fill:     $QUEUED messages in $(secs "$fill_t0" "$fill_t1") s," \
	"$(awk -v n="$QUEUED" -v a="$fill_t0" -v b="$fill_t1" 'BEGIN { printf "%.0f", n / ((b - a) / 1e6) }') msgs/s overall"
wait_until 30 filled || true
[ "$(queued_now)" -eq "$QUEUED" ] || die "ternd logged $(queued_now) queued messages, expected $QUEUED"
t0=$(now_us)
total=$(ternq_ stats | awk '$1 == "TOTAL" { print $2 }')
echo "ternq:    stats says TOTAL $total, in $(secs "$t0" "$(now_us)") s"
[ "$total" = "$QUEUED" ] || die "ternq stats TOTAL $total, expected $QUEUED"
echo "disk:     spool $(du -sm "$TERND_DIR/spool" | cut -f1) MB, state $(du -sm "$TERND_DIR/state" | cut -f1) MB" \
	"(data.mdb apparent size $(($(stat -c %s "$TERND_DIR/state/queue/data.mdb" 2>/dev/null || echo 0) / 1048576)) MB)"
sleep "$SETTLE"
read -r fill_v fill_a fill_f <<<"$(rss "$TERND_PID")"
show_rss "after the fill" "$QUEUED"
echo "idle CPU, full queue: $(idle_cpu)% of one core over ${IDLE}s"
echo

restart warm
show_rss "  at the greeting" "$QUEUED"
sleep "$SETTLE"
read -r warm_v warm_a warm_f <<<"$(rss "$TERND_PID")"
show_rss "after the warm restart" "$QUEUED"
restart cold
show_rss "  at the greeting" "$QUEUED"
sleep "$SETTLE"
read -r cold_v cold_a cold_f <<<"$(rss "$TERND_PID")"
show_rss "after the cold restart" "$QUEUED"
echo "idle CPU, full queue after the restart: $(idle_cpu)% of one core over ${IDLE}s"
# One more message after the restart: the queue still works.
out=$("$blast" -c 1 -n 1 -s "$SIZE" "127.0.0.1:$TERND_PORT" 2>&1)
[[ $out == *" accepted=1 failed=0 "* ]] || die "no message accepted after the restart: $out"
ternd_stop || die "ternd exit status $? at the final stop"

echo
echo "== summary ($QUEUED queued messages of $SIZE bytes; base = before the fill)"
printf '%-24s %12s %12s %12s\n' "bytes per queued msg" VmRSS RssAnon RssFile
printf '%-24s %12s %12s %12s\n' "after the fill" "$(per_msg "$base_v" "$fill_v" "$QUEUED")" \
	"$(per_msg "$base_a" "$fill_a" "$QUEUED")" "$(per_msg "$base_f" "$fill_f" "$QUEUED")"
printf '%-24s %12s %12s %12s\n' "after the warm restart" "$(per_msg "$base_v" "$warm_v" "$QUEUED")" \
	"$(per_msg "$base_a" "$warm_a" "$QUEUED")" "$(per_msg "$base_f" "$warm_f" "$QUEUED")"
printf '%-24s %12s %12s %12s\n' "after the cold restart" "$(per_msg "$base_v" "$cold_v" "$QUEUED")" \
	"$(per_msg "$base_a" "$cold_a" "$QUEUED")" "$(per_msg "$base_f" "$cold_f" "$QUEUED")"
worst=$(printf '%s\n' "$(per_msg "$base_v" "$fill_v" "$QUEUED")" "$(per_msg "$base_v" "$warm_v" "$QUEUED")" \
	"$(per_msg "$base_v" "$cold_v" "$QUEUED")" | sort -g | tail -n 1)
awk -v w="$worst" 'BEGIN { printf "RAM per queued message <= 256 B (VmRSS, worst case): %s (%s B)\n", (w <= 256 ? "met" : "NOT met"), w }'
for k in warm cold; do
	awk -v k="$k" -v s="${restart_started[$k]}" -v g="${restart_greeted[$k]}" 'BEGIN {
		printf "restart (%s) < 5 s: %s (started: %s ms, greeting: %s ms)\n", k,
			((s < 5000 && g < 5000) ? "met" : "NOT met"), s, g }'
done
