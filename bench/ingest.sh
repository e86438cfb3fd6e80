#!/bin/bash
# ingest.sh - durable ingest: ternd vs a queue-only Postfix vs smtp-sink.
#
# What it measures: how many messages per second the servers named in
# SERVERS (by default the first three below) accept on 127.0.0.1 from the
# same clients, in one run:
#
#     ternd     ternd's SMTP listener; it answers 250 once a batch's envelope
#               records and bodies are fdatasynced in the spool segment (its
#               write-ahead log); the synchronous LMDB commit follows
#     postfix   an isolated Postfix whose smtpd + cleanup write and fsync the
#               queue file as usual, but which never delivers (see below)
#     sink      smtp-sink: no durability at all, the protocol ceiling
#     ternd-mem ternd with its state and spool on tmpfs (/dev/shm): the same
#               program, with flushes that cost nothing; not run unless
#               named in SERVERS.  ternd/ternd-mem is what durability costs
#               ternd, apart from everything else it does per message
#     ternd-b   another build of ternd (TERND_B), run exactly like ternd:
#               for comparing two builds in the same run; not run unless
#               named in SERVERS
#
# ternd's state and spool and Postfix's queue are on the same real file
# system, below BENCH_TMPDIR (not tmpfs: durability costs are the point).
# The clients, each with SESSIONS parallel sessions of SIZE-byte messages:
#
#     source    smtp-source -s SESSIONS -l SIZE -m MESSAGES ... (no -d: a
#               new session per message; one command, one reply, no
#               pipelining); msgs/s from its wall time
#     blast     bench/smtp-blast -c SESSIONS -n MESSAGES -s SIZE: one
#               connection per session, MAIL+RCPT+DATA pipelined; msgs/s
#               and p50/p99 accept latency (end of content -> final reply)
#     bdat      smtp-blast -B: MAIL+RCPT+BDAT LAST+content in one write.
#               smtp-sink does not offer CHUNKING, so that cell is skipped
#     lone      smtp-blast -c 1 -n LONE_MESSAGES: one session, DATA, the
#               latency a server adds to a message when nothing else
#               queues for the CPU: its P99 is held to the same target
#               as blast's (which measures it with SESSIONS clients
#               keeping two cores busy)
#
# Every run gets a fresh, empty server (new ternd state/spool dirs, a new
# Postfix instance, a new smtp-sink), and checks that the server holds
# exactly MESSAGES messages afterwards.  Within a round each client runs
# against the servers back to back, in an order that rotates from round
# to round (ternd/postfix/sink, postfix/sink/ternd, ...), so that
# the figures compared were measured close together on a noisy box.  The
# summary gives per client the median msgs/s of each server, the ratios
# ternd/postfix (reported, no target) and ternd/sink (target >= 0.85),
# ternd's P99 accept latency (target <= 1.5 x the device's fdatasync P99,
# the larger of the probes before and after the runs: that bounds what
# any durable server can do; smtp-sink's own P99, printed beside it, is
# what waiting for the CPU alone costs with that many clients), BDAT
# against DATA (target: BDAT ingest >= DATA ingest) and ternd's flushes
# per accepted message (target <= 0.05):
# ternd runs with bench/flushcount.so preloaded, which counts fsync,
# fdatasync, msync and O_DSYNC writes (LMDB's meta page) of the whole
# process, from just before the client starts until its last commit.
#
# Keeping Postfix from delivering: "master_service_disable = qmgr/unix
# qmgr/fifo".  master then never starts the queue manager, so each message
# stays in incoming/ exactly as smtpd+cleanup wrote it: the queue file
# write, its fsync and the 250 are unchanged, and nothing else (no active
# queue, no delivery attempt, no deferred-queue rewrite, no bounce logs)
# competes for the disk and the CPU.  The form is name/type since Postfix
# 2.11 ("." was for 2.6-2.10), and this instance's qmgr is a "unix"
# service: "qmgr.fifo" would silently disable nothing.  The one side effect is a cleanup warning per message ("unable
# to look up public/qmgr"), a log line in place of the usual qmgr wake-up.
# defer_transports was rejected: qmgr would still move every message to
# active/ and then rewrite it into deferred/ with a defer log, doubling
# Postfix's disk work; a HOLD action adds a rename into hold/.
#
# How to run (as root; needs postfix, smtp-source, smtp-sink, python3, a
# built tree: make -j2, in-tree or in build/; binaries are copied first, so
# a rebuild cannot disturb a run):
#
#     sudo bench/ingest.sh                                    # full run
#     sudo MESSAGES=2000 ROUNDS=1 bench/ingest.sh             # quick run
#
# About 10-15 min on 2 cores with the defaults (Postfix is the slow part).
#
# Environment (defaults in brackets):
#     MESSAGES [20000]  messages per run       SESSIONS [20]  parallel sessions
#     SIZE [10240]      bytes per message      ROUNDS [3]     rounds
#     CLIENTS [source blast bdat lone]   which clients to run
#     LONE_MESSAGES [2000]  messages per run of the lone client
#     SERVERS [ternd postfix sink]  which servers to run
#     WARMUP [500]      untimed messages per server before round 1 (0: none)
#     BENCH_TMPDIR [/var/tmp]  where queues live; must not be tmpfs/ramfs
#                       (ALLOW_TMPFS=1 overrides, for a diagnostic only)
#     FSYNC_PROBES [200]  iterations of the fdatasync latency probe
#     RUN_TIMEOUT [900] seconds before a client is considered stuck
#     TERND, TERNQ, SMTP_BLAST  binaries [in-tree, else build/]
#     TERND_B           the ternd-b binary (required with ternd-b)
#
# Output: the exact command, environment facts, one line per run and a
# summary.  Not a test: no TAP; exits non-zero only if a run fails (a
# client error, or a server that does not hold every accepted message).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_src=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
# shellcheck disable=SC2034 # read by lib.sh's die
bench_name=ingest
# shellcheck source=lib.sh
. "$here/lib.sh"

MESSAGES=${MESSAGES:-20000}
SESSIONS=${SESSIONS:-20}
SIZE=${SIZE:-10240}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-500}
FSYNC_PROBES=${FSYNC_PROBES:-200}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
CLIENTS=${CLIENTS:-source blast bdat lone}
LONE_MESSAGES=${LONE_MESSAGES:-2000}
SERVERS=${SERVERS:-ternd postfix sink}
BENCH_TMPDIR=${BENCH_TMPDIR:-/var/tmp}

ternd_bin=${TERND:-$(built src/ternd/ternd)}
ternd_b_bin=${TERND_B:-}
ternq_bin=${TERNQ:-$(built src/ternq/ternq)}
blast_bin=${SMTP_BLAST:-$(built bench/smtp-blast)}
flushcount_so=${FLUSHCOUNT:-$(built bench/flushcount.so)}

[ "$(id -u)" -eq 0 ] || die "must run as root (postfix start, ternd drops to user tern)"
for cmd in postfix postconf smtp-source smtp-sink python3 ss; do
	command -v "$cmd" >/dev/null || die "$cmd not installed"
done
for b in "$ternd_bin" "$ternq_bin" "$blast_bin" "$flushcount_so"; do
	[ -x "$b" ] || die "$b not built (run make -j2 in $top_src or build/)"
done
require_uint MESSAGES SESSIONS SIZE ROUNDS WARMUP FSYNC_PROBES RUN_TIMEOUT LONE_MESSAGES
[ "$MESSAGES" -gt 0 ] && [ "$ROUNDS" -gt 0 ] && [ "$SESSIONS" -gt 0 ] && [ "$LONE_MESSAGES" -gt 0 ] ||
	die "MESSAGES, LONE_MESSAGES, SESSIONS and ROUNDS must be > 0"
for c in $CLIENTS; do case $c in source | blast | bdat | lone) ;; *) die "unknown client $c" ;; esac; done
for s in $SERVERS; do case $s in ternd | ternd-mem | ternd-b | postfix | sink) ;; *) die "unknown server $s" ;; esac; done
if [[ " $SERVERS " == *" ternd-b "* ]]; then
	[ -x "$ternd_b_bin" ] || die "ternd-b needs TERND_B, an executable ternd"
fi
[ -d "$BENCH_TMPDIR" ] && [ -w "$BENCH_TMPDIR" ] || die "BENCH_TMPDIR $BENCH_TMPDIR is not a writable directory"
fstype=$(df --output=fstype "$BENCH_TMPDIR" | tail -n 1 | tr -d ' ')
case $fstype in
tmpfs | ramfs)
	[ "${ALLOW_TMPFS:-0}" = 1 ] ||
		die "BENCH_TMPDIR $BENCH_TMPDIR is on $fstype: durability would not be measured (ALLOW_TMPFS=1 to force)"
	;;
esac
export TMPDIR=$BENCH_TMPDIR

# tap.sh: tmp dirs, free_port, wait_for_port and cleanup by PID at exit
# (also on Ctrl-C/TERM); postfix.sh registers "pf_stop" at exit too.
. "$top_src/tests/lib/tap.sh"
. "$top_src/tests/lib/postfix.sh"

# fsync_probe - print p50/p99/mean of fdatasync after a 10 KB append and of
# fdatasync after a 4 KB in-place rewrite, in a file below DIR
fsync_probe() {
	python3 - "$1" "$FSYNC_PROBES" <<-'EOF'
		import os, sys, time
		path = os.path.join(sys.argv[1], "fsync-probe")
		n = max(int(sys.argv[2]), 1)
		def stats(v):
		    v.sort()
		    return "p50 %.3f ms  p99 %.3f ms  mean %.3f ms  max %.3f ms" % (
		        v[len(v) // 2] * 1e3, v[min(int(len(v) * 0.99), len(v) - 1)] * 1e3,
		        sum(v) / len(v) * 1e3, v[-1] * 1e3)
		fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
		try:
		    app, rew = [], []
		    for i in range(n):
		        os.write(fd, b"x" * 10240)
		        t = time.perf_counter(); os.fdatasync(fd); app.append(time.perf_counter() - t)
		    for i in range(n):
		        os.pwrite(fd, bytes([i & 0xff]) * 4096, 0)
		        t = time.perf_counter(); os.fdatasync(fd); rew.append(time.perf_counter() - t)
		finally:
		    os.close(fd)
		    os.unlink(path)
		print("fdatasync, 10 KB append    x%d: %s" % (n, stats(app)))
		print("fdatasync, 4 KB rewrite    x%d: %s" % (n, stats(rew)))
	EOF
}

# ehlo_has - true if the server on 127.0.0.1:PORT announces KEYWORD in EHLO
ehlo_has() {
	python3 - "$1" "$2" <<-'EOF'
		import socket, sys
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
		f = s.makefile("rb")
		f.readline()
		s.sendall(b"EHLO probe.example\r\n")
		words = []
		while True:
		    line = f.readline().decode("ascii", "replace")
		    words.append(line[4:].split(" ")[0].strip().upper())
		    if len(line) < 4 or line[3] != "-":
		        break
		s.sendall(b"QUIT\r\n")
		f.readline()
		sys.exit(0 if sys.argv[2].upper() in words else 1)
	EOF
}

# ternd_count - print how many messages ternd logged as queued
ternd_count() {
	grep -c ' (queue active)$' "$TERND_LOG" 2>/dev/null || true
}

# pf_incoming - print the number of finished queue files in incoming/
# (cleanup makes a file executable once it is complete)
pf_incoming() {
	find "$srv_dir/pf/queue/incoming" -type f -perm -u+x 2>/dev/null | wc -l
}

# server_count - print how many messages the running server holds/counted
server_count() {
	case $1 in
	ternd*) ternd_count ;;
	postfix) pf_incoming ;;
	sink) sink_count "$srv_dir/sink.out" ;;
	esac
}

# server_start - start a fresh, empty SERVER; sets srv_dir, srv_port, srv_pid
server_start() {
	srv_dir=$(tap_tmpdir) || die "mktemp failed"
	srv_pid=
	case $1 in
	ternd*)
		if [ "$1" = ternd-mem ]; then
			rm -rf "$srv_dir"
			srv_dir=$(mktemp -d /dev/shm/tern-bench.XXXXXX) && chmod 0755 "$srv_dir" ||
				die "mktemp in /dev/shm failed"
			mem_dir=$srv_dir
		fi
		ternd_use_bin "$top/bin/src/ternd/ternd"
		[ "$1" = ternd-b ] && ternd_use_bin "$top/bin/src/ternd/ternd-b"
		# flushes counted in $srv_dir/flushes (bench/flushcount.c)
		head -c 32 /dev/zero >"$srv_dir/flushes" && chmod 0666 "$srv_dir/flushes" ||
			die "cannot create the flush counter"
		LD_PRELOAD=$top/bin/flushcount.so FLUSHCOUNT_FILE=$srv_dir/flushes \
			ternd_setup "$srv_dir/ternd" || die "$1 did not start"
		[ "$1" = ternd-mem ] && mem_pid=$TERND_PID
		srv_port=$TERND_PORT
		srv_pid=$TERND_PID
		;;
	postfix)
		srv_port=$(free_port) || die "no free port"
		pf_create "$srv_dir/pf" "$srv_port" || die "pf_create failed"
		# Queue only (see the header comment), and no limits that
		# would slow down 20 sessions from one client.
		postconf -c "$srv_dir/pf/conf" -e \
			"master_service_disable = qmgr/unix qmgr/fifo" \
			"default_process_limit = 100" \
			"smtpd_client_connection_count_limit = 0" \
			"smtpd_client_connection_rate_limit = 0" \
			"smtpd_client_message_rate_limit = 0" || die "postconf failed"
		pf_start "$srv_dir/pf" || die "cannot start Postfix"
		srv_pid=$(awk '{ print $1; exit }' "$srv_dir/pf/queue/pid/master.pid")
		;;
	sink)
		srv_port=$(free_port) || die "no free port"
		smtp-sink -u nobody -c "127.0.0.1:$srv_port" 1024 >"$srv_dir/sink.out" 2>"$srv_dir/sink.err" &
		srv_pid=$!
		tap_bg_register "$srv_pid"
		wait_for_port "$srv_port" || die "smtp-sink did not start: $(cat "$srv_dir/sink.err")"
		;;
	esac
	[ "$(server_count "$1")" -eq 0 ] || die "$1 is not empty at start"
}

# server_stop - stop SERVER and remove its files
server_stop() {
	case $1 in
	ternd*)
		ternd_stop || die "$1 exit status $? at stop: $(tail -n 5 "$TERND_LOG")"
		;;
	postfix)
		if pgrep -g "$srv_pid" -x qmgr >/dev/null; then
			die "a Postfix qmgr ran: master_service_disable did not work"
		fi
		pf_stop "$srv_dir/pf"
		;;
	sink)
		kill -TERM "$srv_pid" 2>/dev/null
		wait "$srv_pid" 2>/dev/null
		;;
	esac
	rm -rf "$srv_dir"
	mem_pid= mem_dir=
}

# mem_cleanup - at exit (also after Ctrl-C): stop a ternd-mem still
# running, then remove its directory in /dev/shm, which tap.sh does not own
mem_cleanup() {
	if [ -n "$mem_pid" ]; then
		kill -KILL "$mem_pid" 2>/dev/null
		wait "$mem_pid" 2>/dev/null
	fi
	[ -z "$mem_dir" ] || rm -rf "$mem_dir"
}

# run_client - run CLIENT for N messages at the current server; sets
# r_rate, r_secs, r_p50, r_p99, r_ok (1 if the client reported no failure)
run_client() {
	local client=$1 n=$2 out t0 t1 rc=0
	r_p50=- r_p99=- r_ok=1
	case $client in
	source)
		t0=$(now_us)
		timeout "$RUN_TIMEOUT" smtp-source -s "$SESSIONS" -l "$SIZE" -m "$n" \
			-f sender@example.org -t rcpt@example.com "127.0.0.1:$srv_port" \
			>"$top/client.out" 2>&1 || rc=$?
		t1=$(now_us)
		r_secs=$(secs "$t0" "$t1")
		r_rate=$(rate "$n" "$t0" "$t1")
		# smtp-source exits 0 even when the server refuses mail; it
		# prints the error, so any output is a failure.
		if [ "$rc" -ne 0 ] || [ -s "$top/client.out" ]; then r_ok=0; fi
		;;
	blast | bdat | lone)
		local opt=(-c "$SESSIONS")
		[ "$client" = bdat ] && opt+=(-B)
		[ "$client" = lone ] && opt=(-c 1)
		timeout "$RUN_TIMEOUT" "$blast" "${opt[@]}" -n "$n" -s "$SIZE" \
			"127.0.0.1:$srv_port" >"$top/client.out" 2>&1 || rc=$?
		out=$(tail -n 1 "$top/client.out")
		[[ $out =~ seconds=([0-9.]+)\ rate=([0-9.]+)\ p50_ms=([0-9.]+)\ p99_ms=([0-9.]+) ]] || {
			r_ok=0 r_secs=- r_rate=-
			return
		}
		r_secs=${BASH_REMATCH[1]} r_rate=${BASH_REMATCH[2]}
		r_p50=${BASH_REMATCH[3]} r_p99=${BASH_REMATCH[4]}
		[[ $out == *" accepted=$n failed=0 "* ]] && [ "$rc" -eq 0 ] || r_ok=0
		;;
	esac
}

# flushes - print the flushes ternd made so far: fsync, fdatasync, msync,
# O_DSYNC writes (bench/flushcount.so's counter file), and their sum
flushes() {
	python3 -c 'import struct, sys; c = struct.unpack("<4Q", open(sys.argv[1], "rb").read(32)); print(*c, sum(c))' \
		"$srv_dir/flushes"
}

# wait_count - wait (up to 10 s) until SERVER holds N messages; print it
wait_count() {
	local got i
	for ((i = 0; i < 100; i++)); do
		got=$(server_count "$1")
		[ "$got" -ge "$2" ] && break
		sleep 0.1
	done
	echo "$got"
}

# client_messages CLIENT - how many messages a run of CLIENT sends
client_messages() {
	if [ "$1" = lone ]; then echo "$LONE_MESSAGES"; else echo "$MESSAGES"; fi
}

# run_one - one timed run of CLIENT against a fresh SERVER in ROUND
run_one() {
	local client=$1 server=$2 round=$3 cpu0 cpu1 t0 t1 busy steal got key cpu_s=- fpm=- fsplit
	local n
	local -a f0 f1
	n=$(client_messages "$client")
	if [ "$server" = sink ] && [ "$client" = bdat ] && [ "$sink_chunking" = no ]; then
		printf '%-5s %-6s %-7s %s\n' "$round" "$client" "$server" \
			"skipped: smtp-sink does not offer CHUNKING (BDAT)"
		return
	fi
	server_start "$server"
	sync
	sleep 2
	cpu0=$(cpu_snapshot)
	t0=$(proc_cpu_ticks "$srv_pid")
	[[ $server == ternd* ]] && read -r -a f0 <<<"$(flushes)"
	run_client "$client" "$n"
	t1=$(proc_cpu_ticks "$srv_pid")
	cpu1=$(cpu_snapshot)
	[[ $server == ternd* ]] && cpu_s=$(awk -v t=$((t1 - t0)) -v hz="$clk_tck" 'BEGIN { printf "%.2f", t / hz }')
	got=$(wait_count "$server" "$n")
	if [[ $server == ternd* ]]; then
		sleep 0.5	# the LMDB commits that follow the last 250
		read -r -a f1 <<<"$(flushes)"
		fpm=$(awk -v a="${f0[4]}" -v b="${f1[4]}" -v n="$n" 'BEGIN { printf "%.4f", (b - a) / n }')
		fsplit="fsync $((f1[0] - f0[0])), fdatasync $((f1[1] - f0[1])), msync $((f1[2] - f0[2])), O_DSYNC writes $((f1[3] - f0[3]))"
	fi
	[ "$r_ok" = 1 ] || die "run $round $client/$server failed: $(tail -n 5 "$top/client.out")"
	[ "$got" -eq "$n" ] ||
		die "run $round $client/$server: server holds $got of $n messages"
	read -r busy steal <<<"$(cpu_pct "$cpu0" "$cpu1")"
	printf '%-5s %-6s %-7s %7s %8s %9s %8s %8s %9s %5s %5s %9s\n' "$round" "$client" "$server" \
		"$got" "$r_secs" "$r_rate" "$r_p50" "$r_p99" "$cpu_s" "$busy%" "$steal%" "$fpm"
	[[ $server == ternd* ]] && echo "      flushes: $fsplit"
	key=$client/$server
	fpms[$key]="${fpms[$key]:-} $fpm"
	rates[$key]="${rates[$key]:-} $r_rate"
	p50s[$key]="${p50s[$key]:-} $r_p50"
	p99s[$key]="${p99s[$key]:-} $r_p99"
	server_stop "$server"
}

# setup - private copies of the binaries, then load tests/lib/ternd.sh
setup() {
	ensure_tern_user || die "cannot create user tern"
	top=$(tap_tmpdir) || die "mktemp failed"
	# Private copies: a concurrent rebuild cannot change them under us.
	bench_copy_tern "$top" "$ternd_bin" "$ternq_bin" "$blast_bin" "$flushcount_so"
	if [[ " $SERVERS " == *" ternd-b "* ]]; then
		cp "$ternd_b_bin" "$top/bin/src/ternd/ternd-b" || die "cannot copy $ternd_b_bin"
	fi
	tap_on_exit mem_cleanup
	blast=$top/bin/smtp-blast
}

clk_tck=$(getconf CLK_TCK)
declare -A rates p50s p99s fpms
mem_pid= mem_dir=		# a running ternd-mem and its directory

echo "== durable ingest benchmark: ternd vs Postfix (queue only) vs smtp-sink"
echo "command:  ${cmdline}  (MESSAGES=$MESSAGES LONE_MESSAGES=$LONE_MESSAGES SESSIONS=$SESSIONS SIZE=$SIZE ROUNDS=$ROUNDS WARMUP=$WARMUP CLIENTS='$CLIENTS' SERVERS='$SERVERS' BENCH_TMPDIR=$BENCH_TMPDIR)"
echo "clients:  source: smtp-source -s $SESSIONS -l $SIZE -m $MESSAGES -f sender@example.org -t rcpt@example.com 127.0.0.1:PORT"
echo "          blast:  smtp-blast -c $SESSIONS -n $MESSAGES -s $SIZE 127.0.0.1:PORT   (DATA, pipelined)"
echo "          bdat:   smtp-blast -B -c $SESSIONS -n $MESSAGES -s $SIZE 127.0.0.1:PORT   (BDAT)"
echo "          lone:   smtp-blast -c 1 -n $LONE_MESSAGES -s $SIZE 127.0.0.1:PORT   (DATA, one session)"
bench_facts
echo "postfix:  $(postconf -d mail_version)"
bench_tree
echo "tern:     $("$ternd_bin" -V 2>&1) ($ternd_bin, sha256 $(sha "$ternd_bin"))"
[[ " $SERVERS " == *" ternd-b "* ]] &&
	echo "ternd-b:  $("$ternd_b_bin" -V 2>&1) ($ternd_b_bin, sha256 $(sha "$ternd_b_bin"))"
echo "blast:    $blast_bin, sha256 $(sha "$blast_bin")"

setup
dev=$(df --output=source "$top" | tail -n 1)
echo "storage:  $top: $fstype on $dev ($(findmnt -no OPTIONS -T "$top" 2>/dev/null)," \
	"write cache: $(cat "/sys/block/$(basename "$dev")/queue/write_cache" 2>/dev/null || echo unknown))"
fsync_probe "$top" >"$top/probe.before" || die "fsync probe failed"
sed 's/^/before:   /' "$top/probe.before"

srv_dir=$top
server_start sink
if ehlo_has "$srv_port" CHUNKING; then sink_chunking=yes; else sink_chunking=no; fi
server_stop sink
echo "sink:     smtp-sink -u nobody -c 127.0.0.1:PORT 1024 (CHUNKING: $sink_chunking)"
echo

if [ "$WARMUP" -gt 0 ]; then
	for s in $SERVERS; do
		server_start "$s"
		run_client blast "$WARMUP"
		[ "$r_ok" = 1 ] || die "warm-up against $s failed: $(tail -n 5 "$top/client.out")"
		server_stop "$s"
	done
	echo "warm-up:  $WARMUP messages with smtp-blast against each server (not counted)"
	echo
fi

printf '%-5s %-6s %-7s %7s %8s %9s %8s %8s %9s %5s %5s %9s\n' round client server msgs \
	seconds msgs/s p50_ms p99_ms ternd_cpu cpu steal flush/msg
read -r -a servers <<<"$SERVERS"
for ((r = 1; r <= ROUNDS; r++)); do
	# Rotate the server order from round to round.
	order=()
	for ((i = 0; i < ${#servers[@]}; i++)); do
		order+=("${servers[$(((i + r - 1) % ${#servers[@]}))]}")
	done
	for c in $CLIENTS; do
		for s in "${order[@]}"; do
			run_one "$c" "$s" "$r"
		done
	done
done
echo
fsync_probe "$top" >"$top/probe.after"
sed 's/^/after:    /' "$top/probe.after"
# the device's fdatasync P99 (10 KB appends): the larger of the two probes
dev_p99=$(sed -n 's/^fdatasync, 10 KB append .* p99 \([0-9.]*\) ms.*/\1/p' "$top/probe.before" \
	"$top/probe.after" | sort -g | tail -n 1)
echo "device:   fdatasync P99 ${dev_p99:-?} ms (10 KB appends, the larger of before and after)"
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) at the end"

echo
echo "== summary (medians over $ROUNDS rounds; msgs/s; latency in ms from smtp-blast)"
printf '%-6s %9s %9s %9s %12s %11s %9s %9s %9s %9s\n' client ternd postfix sink \
	ternd/postfix ternd/sink t_p50 t_p99 pf_p99 s_p99
for c in $CLIENTS; do
	# shellcheck disable=SC2086 # the stored lists are space-separated
	{
		mt=$(median ${rates[$c/ternd]:-})
		mp=$(median ${rates[$c/postfix]:-})
		ms=$(median ${rates[$c/sink]:-})
		lt50=$(median ${p50s[$c/ternd]:-})
		lt99=$(median ${p99s[$c/ternd]:-})
		lp99=$(median ${p99s[$c/postfix]:-})
		sp99=$(median ${p99s[$c/sink]:-})
	}
	[ "$c" = source ] && lt50=- lt99=- lp99=- sp99=-
	printf '%-6s %9s %9s %9s %12s %11s %9s %9s %9s %9s\n' "$c" "$mt" "$mp" "$ms" \
		"$(ratio "$mt" "$mp")" "$(ratio "$mt" "$ms")" "$lt50" "$lt99" "$lp99" "$sp99"
done
echo
echo "== per-round ratios (same round, so the same background load), min-max"
for c in $CLIENTS; do
	# shellcheck disable=SC2086
	read -r -a rt <<<"${rates[$c/ternd]:-}"
	read -r -a qp <<<"$(round_ratios "${rates[$c/ternd]:-}" "${rates[$c/postfix]:-}")"
	read -r -a qs <<<"$(round_ratios "${rates[$c/ternd]:-}" "${rates[$c/sink]:-}")"
	printf '%-6s ternd/postfix %-14s ternd/sink %-14s ternd rates %s\n' "$c" \
		"$(minmax "${qp[@]}")" "$(minmax "${qs[@]}")" "$(minmax "${rt[@]}")"
done
# versus VARIANT TITLE - ternd against another ternd server, medians
versus() {
	[[ " $SERVERS " == *" $1 "* ]] || return 0
	echo
	echo "== $2"
	for c in $CLIENTS; do
		# shellcheck disable=SC2086
		{
			mt=$(median ${rates[$c/ternd]:-})
			mv=$(median ${rates[$c/$1]:-})
			lt99=$(median ${p99s[$c/ternd]:-})
			lv99=$(median ${p99s[$c/$1]:-})
		}
		printf '%-6s ternd %s msgs/s (P99 %s ms), %s %s msgs/s (P99 %s ms): %s\n' "$c" "$mt" \
			"$lt99" "$1" "$mv" "$lv99" "$(ratio "$mt" "$mv")"
	done
}
versus ternd-mem "what durability costs ternd: ternd (disk) / ternd-mem (tmpfs), medians"
versus ternd-b "two builds: ternd / ternd-b, medians"
echo
echo "== targets (ternd/postfix: reported, no target)"
# shellcheck disable=SC2086
{
	data_rate=$(median ${rates[blast/ternd]:-})
	bdat_rate=$(median ${rates[bdat/ternd]:-})
}
for c in $CLIENTS; do
	# shellcheck disable=SC2086
	{
		mt=$(median ${rates[$c/ternd]:-})
		ms=$(median ${rates[$c/sink]:-})
		lt99=$(median ${p99s[$c/ternd]:-})
		sp99=$(median ${p99s[$c/sink]:-})
		fm=$(median ${fpms[$c/ternd]:-})
	}
	awk -v c="$c" -v s="$(ratio "$mt" "$ms")" -v l="$lt99" -v d="${dev_p99:-}" -v f="$fm" \
		-v n="$SESSIONS" -v k="$sp99" 'BEGIN {
		if (c == "lone")	# reported: the target names the clients at SESSIONS sessions
			printf "%-6s ternd/sink %s (reported)", c, s
		else
			printf "%-6s ternd/sink >= 0.85: %s", c,
				(s == "-" ? "n/a" : (s + 0 >= 0.85 ? "met (" s ")" : "NOT met (" s ")"))
		if (c != "source" && l != "-" && d != "")
			printf "   P99 <= 1.5 x fdatasync P99 (%.2f ms): %s%s", 1.5 * d,
				(l + 0 <= 1.5 * d ? "met (" l ")" : "NOT met (" l ")"),
				(k != "-" && k != "" ? "; smtp-sink P99 " k : "")
		if (f != "-" && f != "" && c != "lone")
			printf "   flushes/msg <= 0.05 at %d sessions: %s", n,
				(f + 0 <= 0.05 ? "met (" f ")" : "NOT met (" f ")")
		printf "\n" }'
done
if [ -n "$data_rate" ] && [ -n "$bdat_rate" ] && [ "$data_rate" != - ] && [ "$bdat_rate" != - ]; then
	awk -v b="$bdat_rate" -v d="$data_rate" 'BEGIN {
		printf "bdat   BDAT ingest >= DATA ingest: %s (%s vs %s msgs/s)\n",
			(b + 0 >= d + 0 ? "met" : "NOT met"), b, d }'
fi
