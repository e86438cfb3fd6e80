#!/bin/bash
# pipeline.sh - the deployed path as users see it: an application's mail
# to a TLS peer through Postfix, through Postfix + tern, or through ternd.
#
# What it measures (issue 17, section 4): an application (bench/smtp-blast,
# SESSIONS sessions, DATA, pipelined) sends MESSAGES messages of SIZE bytes
# into the path; the clock runs from the moment smtp-blast starts (its
# first byte) to the last message at the peer. Three paths:
#
#     postfix   app -> Postfix -> peer: Postfix's smtp client in its best
#               configuration for one smarthost (bench/peer.sh
#               pf_sender_conf: connection cache, tlsmgr session cache,
#               smtp_tls_connection_reuse with tlsproxy, CONNECTIONS smtp
#               processes and destination concurrency)
#     milter    app -> Postfix + tern-milter (smtpd_milters, inet socket)
#               -> LMTP (unix socket, Postfix's default lmtp concurrency)
#               -> ternd -> peer: the deployment of DESIGN.md
#     ternd     app -> ternd's SMTP listener -> peer
#
# Postfix's and ternd's queues live below BENCH_TMPDIR (default /var/tmp,
# a disk: durability is paid for). ternd relays with tls = verify,
# max_connections = CONNECTIONS (bench/peer.sh ternd_peer_conf); Postfix
# verifies the same name. Both reach the peer over implicit TLS.
#
# The peer (PEER):
#     chunk     bench/chunk-sink -T: TLS in the sink itself, offers
#               PIPELINING and CHUNKING; the end of a run is its own time
#               stamp of its last message
#     smtp-sink stunnel4 (implicit TLS) in front of Postfix's smtp-sink,
#               which offers no CHUNKING (the peer of the issue's table);
#               the end is found by polling its counter every 0.1 s
# Two networks: loopback, and delay (bench/delay-proxy between the last
# hop and the peer, +DELAY_MS of round trip).
#
# CPU per message, two figures: cpu_ms is the whole machine's, busy
# jiffies of all CPUs from /proc/stat over the run divided by MESSAGES (so
# it includes smtp-blast, the peer and the delay proxy, the same for every
# path, and whatever else runs on the machine: compare figures of one run
# only, on a quiet machine); path_ms is the path's own processes (Postfix
# with all its daemons, tern-milter, ternd) from a cgroup v1 cpuacct group
# (CGROUP_ROOT): the shell joins the group while it starts them, so
# everything they fork is counted, and leaves it before the application
# starts. path_ms is what to compare on a machine others are using. Every run starts
# a fresh peer and a fresh path; a run fails if the peer does not get
# every message or the path's queues are not empty at the end. The
# count of messages beyond MESSAGES at the peer (duplicates) is printed.
#
# How to run (as root; needs postfix, smtp-sink, stunnel4, openssl and a
# built tree: ternd, ternq, tern-milter, bench/smtp-blast,
# bench/delay-proxy, bench/chunk-sink, in-tree or in build/; the binaries
# are copied first):
#
#     sudo bench/pipeline.sh                         # about 4 minutes here
#     sudo ROUNDS=3 MESSAGES=5000 bench/pipeline.sh  # medians of 3 rounds
#     sudo PEER=smtp-sink bench/pipeline.sh          # the issue's old peer
#
# Environment (defaults in brackets):
#     MESSAGES [3000]   messages per run       SIZE [10240]  bytes each
#     SESSIONS [8]      application sessions   CONNECTIONS [8] to the peer
#     ROUNDS [1]        rounds (path order rotates from round to round)
#     DELAY_MS [20]     NETWORKS [loopback delay]   PATHS [postfix milter ternd]
#     PEER [chunk]      chunk or smtp-sink
#     RUN_TIMEOUT [900] seconds before a run is considered stuck
#     BENCH_TMPDIR [/var/tmp]  PF_EXTRA [] more main.cf settings (diagnostics)
#     CGROUP_ROOT [/sys/fs/cgroup/cpuacct]  cgroup v1 cpuacct mount
#     TERND, TERNQ, TERN_MILTER, SMTP_BLAST, DELAY_PROXY, CHUNK_SINK  binaries
#
# Targets at DELAY_MS (medians): ternd >= 20x postfix; milter >= 4x postfix.
# Not a test: no TAP; exits non-zero if a run loses mail or does not end.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_src=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
# shellcheck disable=SC2034 # read by lib.sh's die
bench_name=pipeline
# shellcheck source=lib.sh
. "$here/lib.sh"

MESSAGES=${MESSAGES:-3000}
SIZE=${SIZE:-10240}
SESSIONS=${SESSIONS:-8}
CONNECTIONS=${CONNECTIONS:-8}
ROUNDS=${ROUNDS:-1}
DELAY_MS=${DELAY_MS:-20}
NETWORKS=${NETWORKS:-loopback delay}
PATHS=${PATHS:-postfix milter ternd}
PEER=${PEER:-chunk}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
BENCH_TMPDIR=${BENCH_TMPDIR:-/var/tmp}
PF_EXTRA=${PF_EXTRA:-}
CGROUP_ROOT=${CGROUP_ROOT:-/sys/fs/cgroup/cpuacct}

ternd_bin=${TERND:-$(built src/ternd/ternd)}
ternq_bin=${TERNQ:-$(built src/ternq/ternq)}
milter_bin=${TERN_MILTER:-$(built src/milter/tern-milter)}
blast_bin=${SMTP_BLAST:-$(built bench/smtp-blast)}
proxy_bin=${DELAY_PROXY:-$(built bench/delay-proxy)}
chunk_bin=${CHUNK_SINK:-$(built bench/chunk-sink)}

[ "$(id -u)" -eq 0 ] || die "must run as root (postfix start, ternd drops to user tern)"
for cmd in postfix postconf smtp-sink stunnel4 openssl python3 ss; do
	command -v "$cmd" >/dev/null || die "$cmd not installed"
done
for b in "$ternd_bin" "$ternq_bin" "$milter_bin" "$blast_bin" "$proxy_bin" "$chunk_bin"; do
	[ -x "$b" ] || die "$b not built (run make -j2 in $top_src or build/)"
done
require_uint MESSAGES SIZE SESSIONS CONNECTIONS ROUNDS DELAY_MS RUN_TIMEOUT
[ "$MESSAGES" -gt 0 ] && [ "$ROUNDS" -gt 0 ] && [ "$CONNECTIONS" -gt 0 ] && [ "$SESSIONS" -gt 0 ] ||
	die "MESSAGES, ROUNDS, CONNECTIONS and SESSIONS must be > 0"
for n in $NETWORKS; do case $n in loopback | delay) ;; *) die "unknown network $n" ;; esac; done
for p in $PATHS; do case $p in postfix | milter | ternd) ;; *) die "unknown path $p" ;; esac; done
case $PEER in chunk | smtp-sink) ;; *) die "unknown peer $PEER" ;; esac
[ -w "$CGROUP_ROOT/cgroup.procs" ] && [ -r "$CGROUP_ROOT/cpuacct.usage" ] ||
	die "no cgroup v1 cpuacct hierarchy at $CGROUP_ROOT (set CGROUP_ROOT)"
[ -d "$BENCH_TMPDIR" ] && [ -w "$BENCH_TMPDIR" ] || die "BENCH_TMPDIR $BENCH_TMPDIR is not a writable directory"
export TMPDIR=$BENCH_TMPDIR

# tap.sh: tmp dirs, free_port, wait_for_port and cleanup by PID at exit;
# postfix.sh registers "pf_stop" at exit too; pki.sh: the test CA.
. "$top_src/tests/lib/tap.sh"
. "$top_src/tests/lib/postfix.sh"
. "$top_src/tests/lib/pki.sh"
# shellcheck source=peer.sh
. "$here/peer.sh"
# shellcheck source=cgroup.sh
. "$here/cgroup.sh"

# peer_start DIR - a fresh peer below DIR; sets peer_port, peer_dir
peer_start() {
	peer_dir=$1
	mkdir -p "$peer_dir" && chmod 0755 "$peer_dir" || die "mkdir failed"
	case $PEER in
	chunk)
		chunk_start "$peer_dir" -T
		peer_port=$chunk_port peer_pids=$chunk_pid
		;;
	smtp-sink)
		sink_port=$(free_port) || die "no free port"
		smtp-sink -u nobody -c -m 1000 "127.0.0.1:$sink_port" 1024 >"$peer_dir/sink.out" 2>"$peer_dir/sink.err" &
		peer_pids=$!
		tap_bg_register "$!"
		wait_for_port "$sink_port" || die "smtp-sink did not start: $(cat "$peer_dir/sink.err")"
		stunnel_start "$peer_dir" "$sink_port"
		peer_port=$stunnel_port peer_pids="$peer_pids $stunnel_pid"
		;;
	esac
}

# peer_stop - stop the peer's processes
peer_stop() {
	local pid
	for pid in $peer_pids; do
		kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
}

# peer_count - print how many messages the peer has accepted
peer_count() {
	case $PEER in
	chunk) chunk_field "$peer_dir/sink.status" messages ;;
	smtp-sink) sink_count "$peer_dir/sink.out" ;;
	esac
}

# path_start PATH DIR PORT - start PATH below DIR relaying to 127.0.0.1:PORT;
# sets entry (the application's port)
path_start() {
	local path=$1 dir=$2 port=$3 mport
	case $path in
	ternd | milter)
		# shellcheck disable=SC2034 # read by tests/lib/ternd.sh
		TERND_PEERS=$(ternd_peer_conf "$port" yes)
		if [ "$path" = ternd ]; then
			ternd_setup "$dir/ternd" || die "ternd did not start: $(tail -n 5 "$dir/ternd/ternd.log")"
			entry=$TERND_PORT
			return
		fi
		mport=$(free_port) || die "no free port"
		ternd_setup "$dir/ternd" "lmtp_socket_group = postfix" "[global]" "trace_key_file = $top/trace.key" \
			"[milter]" "listen = inet:$mport@127.0.0.1" ||
			die "ternd did not start: $(tail -n 5 "$dir/ternd/ternd.log")"
		"$milter" -f -c "$TERND_CONF" >"$dir/milter.log" 2>&1 &
		milter_pid=$!
		tap_bg_register "$milter_pid"
		wait_for_port "$mport" || die "tern-milter did not start: $(cat "$dir/milter.log")"
		;;
	esac
	entry=$(free_port) || die "no free port"
	pf_create "$dir/pf" "$entry" || die "pf_create failed"
	if [ "$path" = postfix ]; then
		pf_sender_conf "$dir/pf" "$port" yes $((MESSAGES * 2)) || die "cannot configure Postfix"
	else
		postconf -c "$dir/pf/conf" -e "smtpd_milters = inet:127.0.0.1:$mport" "milter_protocol = 6" \
			"milter_default_action = tempfail" "relayhost =" \
			"default_transport = lmtp:unix:$TERND_LMTP" "relay_transport = lmtp:unix:$TERND_LMTP" \
			"qmgr_message_active_limit = $((MESSAGES * 2))" "default_process_limit = 100" \
			"smtpd_client_connection_count_limit = 0" "smtpd_client_connection_rate_limit = 0" \
			"smtpd_client_message_rate_limit = 0" || die "cannot configure Postfix"
		if [ -n "$PF_EXTRA" ]; then
			# shellcheck disable=SC2086 # name=value words
			postconf -c "$dir/pf/conf" -e $PF_EXTRA || die "postconf PF_EXTRA failed"
		fi
	fi
	pf_start "$dir/pf" || die "cannot start Postfix: $(tail -n 5 "$dir/pf/maillog")"
}

# path_empty PATH DIR - the path's queues are empty
path_empty() {
	case $1 in
	postfix) [ "$(pf_queue_count "$2/pf")" -eq 0 ] ;;
	ternd) ternd_holds 0 ;;
	milter) [ "$(pf_queue_count "$2/pf")" -eq 0 ] && ternd_holds 0 ;;
	esac
}

# path_stop PATH DIR - stop what path_start started
path_stop() {
	case $1 in
	postfix) pf_stop "$2/pf" ;;
	milter)
		pf_stop "$2/pf"
		kill -TERM "$milter_pid" 2>/dev/null
		wait "$milter_pid" 2>/dev/null
		ternd_stop || die "ternd exit status $? at stop: $(tail -n 5 "$TERND_LOG")"
		;;
	ternd) ternd_stop || die "ternd exit status $? at stop: $(tail -n 5 "$TERND_LOG")" ;;
	esac
}

# run_one ROUND NETWORK PATH - one timed run
run_one() {
	local round=$1 net=$2 path=$3 dir port t0 t_end deadline out ingest cpu0 cpu1 got extra
	local busy steal ms msgs secs_ cg ns0 ns1 pms
	dir=$(tap_tmpdir) || die "mktemp failed"
	peer_start "$dir/peer"
	port=$peer_port
	if [ "$net" = delay ]; then
		proxy_start "$peer_port"
		port=$proxy_port
	fi
	# the path's processes (and all they fork) in a group of their own
	cg=$(cg_make "$round-$net-$path") || die "cannot create a cgroup below $CGROUP_ROOT"
	echo "$$" >"$cg/cgroup.procs" || die "cannot join $cg"
	path_start "$path" "$dir" "$port"
	echo "$$" >"$CGROUP_ROOT/cgroup.procs" || die "cannot leave $cg"
	sync
	sleep 1

	cpu0=$(cpu_snapshot)
	ns0=$(cg_ns "$cg")
	t0=$(now_us)
	out=$("$blast" -c "$SESSIONS" -n "$MESSAGES" -s "$SIZE" "127.0.0.1:$entry" 2>&1)
	[[ $out == *" accepted=$MESSAGES failed=0 "* ]] || die "run $round $net/$path: the application's mail was not all accepted: $out"
	deadline=$((t0 + RUN_TIMEOUT * 1000000))
	until [ "$(peer_count)" -ge "$MESSAGES" ]; do
		[ "$(now_us)" -lt "$deadline" ] || die "run $round $net/$path: the peer has $(peer_count) of $MESSAGES after ${RUN_TIMEOUT}s"
		sleep 0.1
	done
	t_end=$(now_us)
	cpu1=$(cpu_snapshot)
	ns1=$(cg_ns "$cg")
	[ "$PEER" = chunk ] && t_end=$(chunk_field "$peer_dir/sink.status" last_us)
	wait_until 60 path_empty "$path" "$dir" || die "run $round $net/$path: queues not empty at the end"
	sleep 0.5
	got=$(peer_count)
	extra=$((got - MESSAGES))
	ingest=$(sed -n 's/.* rate=\([0-9.]*\).*/\1/p' <<<"$out")
	secs_=$(secs "$t0" "$t_end")
	msgs=$(rate "$MESSAGES" "$t0" "$t_end")
	read -r busy steal <<<"$(cpu_pct "$cpu0" "$cpu1")"
	ms=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$clk_tck" -v n="$MESSAGES" 'BEGIN { split(a, x, " "); split(b, y, " ")
		printf "%.2f", (y[1] - x[1]) / t * 1000 / n }')
	pms=$(awk -v a="$ns0" -v b="$ns1" -v n="$MESSAGES" 'BEGIN { printf "%.2f", (b - a) / 1e6 / n }')
	printf '%-5s %-8s %-8s %6s %8s %9s %9s %8s %8s %5s %5s %5s\n' "$round" "$net" "$path" "$MESSAGES" \
		"$secs_" "$msgs" "$ingest" "$ms" "$pms" "$busy%" "$steal%" "$extra"
	rates[$net/$path]="${rates[$net/$path]:-} $msgs"
	cpus[$net/$path]="${cpus[$net/$path]:-} $ms"
	pcpus[$net/$path]="${pcpus[$net/$path]:-} $pms"

	path_stop "$path" "$dir"
	[ "$net" = delay ] && proxy_stop
	peer_stop
	cg_remove "$cg"
	[ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$dir"
}

declare -A rates cpus pcpus

echo "== pipeline benchmark: the application's mail to a TLS peer, end to end"
echo "command:  ${cmdline}  (MESSAGES=$MESSAGES SIZE=$SIZE SESSIONS=$SESSIONS CONNECTIONS=$CONNECTIONS ROUNDS=$ROUNDS DELAY_MS=$DELAY_MS NETWORKS='$NETWORKS' PATHS='$PATHS' PEER=$PEER BENCH_TMPDIR=$BENCH_TMPDIR${PF_EXTRA:+ PF_EXTRA='$PF_EXTRA'})"
echo "app:      smtp-blast -c $SESSIONS -n $MESSAGES -s $SIZE (DATA, pipelined) into the path"
bench_facts
echo "postfix:  $(postconf -d mail_version); $(stunnel4 -version 2>&1 | awk '/^stunnel/ { print $1, $2; exit }'); $(openssl version)"
bench_tree
echo "ternd:    $("$ternd_bin" -V 2>&1) ($ternd_bin, sha256 $(sha "$ternd_bin"))"
echo "tools:    tern-milter sha256 $(sha "$milter_bin"), smtp-blast $(sha "$blast_bin"), delay-proxy $(sha "$proxy_bin"), chunk-sink $(sha "$chunk_bin")"

ensure_tern_user || die "cannot create user tern"
top=$(tap_tmpdir) || die "mktemp failed"
bench_copy_tern "$top" "$ternd_bin" "$ternq_bin" "$blast_bin" "$proxy_bin" "$chunk_bin" "$milter_bin"
blast=$top/bin/smtp-blast
proxy=$top/bin/delay-proxy
chunk=$top/bin/chunk-sink
milter=$top/bin/tern-milter
clk_tck=$(getconf CLK_TCK)
pki=$top/pki
peer_pki
"$milter" -K "$top/trace.key" >/dev/null && chown tern "$top/trace.key" || die "tern-milter -K failed"
echo "storage:  queues below $BENCH_TMPDIR ($(df --output=fstype "$BENCH_TMPDIR" | tail -n 1 | tr -d ' '))"
echo "peer:     $PEER, implicit TLS, test CA, ECDSA P-256; Postfix and ternd verify the name smarthost.test"
case " $NETWORKS " in *" delay "*) proxy_report ;; esac
echo
echo "secs: smtp-blast's start to the last message at the peer; ingest: smtp-blast's own msgs/s;"
echo "cpu_ms: machine CPU (all cores, /proc/stat) per message over that time; path_ms: the path's processes' CPU"
echo "per message (cpuacct); busy/steal: machine, over that time; dups: messages beyond MESSAGES at the peer"
printf '%-5s %-8s %-8s %6s %8s %9s %9s %8s %8s %5s %5s %5s\n' round network path msgs secs msgs/s ingest cpu_ms path_ms busy steal dups
read -r -a paths <<<"$PATHS"
for ((r = 1; r <= ROUNDS; r++)); do
	for net in $NETWORKS; do
		for ((i = 0; i < ${#paths[@]}; i++)); do
			run_one "$r" "$net" "${paths[$(((i + r - 1) % ${#paths[@]}))]}"
		done
	done
done
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) at the end"

echo
echo "== summary (medians over $ROUNDS rounds; ratios against postfix in the same network)"
printf '%-8s %-8s %10s %8s %9s %9s\n' network path msgs/s ratio cpu_ms path_ms
for net in $NETWORKS; do
	# shellcheck disable=SC2086 # the stored lists are space-separated
	base=$(median ${rates[$net/postfix]:-})
	for path in $PATHS; do
		# shellcheck disable=SC2086
		m=$(median ${rates[$net/$path]:-})
		# shellcheck disable=SC2086
		printf '%-8s %-8s %10s %8s %9s %9s\n' "$net" "$path" "$m" "$(ratio "$m" "$base")" \
			"$(median ${cpus[$net/$path]:-})" "$(median ${pcpus[$net/$path]:-})"
	done
done
echo
echo "== targets at ${DELAY_MS} ms (medians)"
# shellcheck disable=SC2086
{
	base=$(median ${rates[delay/postfix]:-})
	qt=$(ratio "$(median ${rates[delay/ternd]:-})" "$base")
	qm=$(ratio "$(median ${rates[delay/milter]:-})" "$base")
}
awk -v a="$qt" -v b="$qm" 'BEGIN {
	printf "app -> ternd >= 20x postfix: %s\n", (a == "-" ? "n/a" : (a + 0 >= 20 ? "met (" a ")" : "NOT met (" a ")"))
	printf "postfix + tern >= 4x postfix: %s\n", (b == "-" ? "n/a" : (b + 0 >= 4 ? "met (" b ")" : "NOT met (" b ")")) }'
