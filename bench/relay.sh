#!/bin/bash
# relay.sh - relaying through TLS: ternd vs Postfix's smtp client.
#
# What it measures: how fast a sender empties a queue of MESSAGES messages
# of SIZE bytes into one TLS peer over CONNECTIONS connections, and how
# much CPU the sender spends per message. Two senders:
#
#     ternd     its relay client: pooled connections, sessions kept in
#               LMDB, [peer] max_connections = CONNECTIONS
#     postfix   an isolated Postfix (tests/lib/postfix.sh) in its best
#               configuration for one smarthost: relayhost = the peer,
#               connection cache on (smtp_connection_cache_on_demand and
#               smtp_connection_cache_destinations), tlsmgr session cache
#               (smtp_tls_session_cache_database = btree:...),
#               smtp_tls_connection_reuse = yes with tlsproxy, and
#               CONNECTIONS as destination concurrency (initial and limit)
#               and as the smtp process limit
#
# Two peers, each started fresh for every run:
#
#     stunnel   stunnel4 (implicit TLS) in front of smtp-sink, which only
#               counts: a peer that should not be the bottleneck. ternd
#               has tls_wrapper = yes, Postfix smtp_tls_wrappermode = yes
#     smarthost a Postfix smarthost with STARTTLS (self-signed ECDSA P-256
#               test CA and certificate), discard transport behind it, its
#               queue on /dev/shm: realistic, but it costs CPU on the same
#               cores as the sender
#     chunk     bench/chunk-sink -T: implicit TLS in the sink itself
#               (OpenSSL), offers PIPELINING and CHUNKING, so ternd can keep
#               many BDAT transactions in flight (smtp-sink offers no
#               CHUNKING); one thread, only counts
#     chunk-stunnel  stunnel4 in front of a plain chunk-sink: the same
#               sink with stunnel doing TLS, to show which of the two is
#               cheaper (the peer_cpu column)
#
# Both senders verify the peer's certificate against the test CA for the
# name smarthost.test (ternd tls = verify; Postfix a "verify
# match=smarthost.test" TLS policy for the relayhost). Two networks:
#
#     loopback  straight to the peer on 127.0.0.1
#     delay     through bench/delay-proxy, which adds DELAY_MS of round
#               trip (DELAY_MS/2 each way); the kernel here has no netem
#     proxy0    through bench/delay-proxy with no delay (-d 0): what the
#               proxy's own CPU costs on these cores, without the round
#               trip (not run unless named in NETWORKS)
#
# One run: fill the sender's queue while it cannot relay, then let it go
# and time until the peer has every message and the sender's queue is
# empty.
#   - ternd: filled by bench/smtp-blast through its SMTP listener while its
#     only peer has no host (mail stays queued); then stopped, given the
#     real peer and started again: the timer starts at that start.
#   - Postfix: filled by smtp-blast through its smtpd while
#     "master_service_disable = qmgr/unix qmgr/fifo" keeps the queue
#     manager from running (messages wait in incoming/, as in ingest.sh);
#     then the line is removed and the timer starts at "postfix reload"
#     (master starts qmgr, followed by a "postqueue -f").
# CPU: every sender runs in its own cpuacct cgroup (v1, CGROUP_ROOT): the
# shell that starts ternd or "postfix start" joins the group before it
# execs, so all children are in it (for Postfix: master, qmgr, smtp,
# tlsmgr, tlsproxy, scache, trivial-rewrite). cpuacct.usage is read when
# the drain starts and when it ends; CPU per message is the difference
# divided by MESSAGES. The fill's CPU is not counted.
#
# TLS handshakes are counted at the peer, the same way for both senders:
# stunnel4 (debug = info) logs "TLS accepted: new session negotiated" or
# "previous session reused" per connection; the Postfix smarthost
# (smtpd_tls_loglevel = 2) logs "TLS connection established from" per TLS
# connection and "Reusing old session" per resumed one, so full = the
# first minus the second. TCP connections are counted there too. After the drain the sender is
# restarted (stop, start, same state) and RESTART_MSGS more messages are
# relayed to the same peer process: the handshakes of that phase show
# whether sessions survive a restart.
#
# Rounds: each round runs every network and peer with both senders, the
# sender order alternating from round to round; the summary gives medians
# and ratios ternd/Postfix against the targets: loopback >= 3x msgs/s and
# <= 0.33x CPU per message; delay >= 3x msgs/s. With a chunk peer and
# both networks, the relay-window targets of issue 17 too: ternd(delay) >=
# 0.8x ternd(loopback) and >= 10x Postfix(delay), same connections.
# With proxy0 in NETWORKS, ternd(delay)/ternd(proxy0) is printed as well:
# the same proxy on both sides, so only the round trip differs; and the
# window ratios round by round (a round's runs share one background load).
# For the chunk peers the end of a drain is the sink's own time stamp of
# its last message (first_us/last_us in its status file), not the 0.1 s
# poll; peer_cpu is the peer's processes' CPU (sink, stunnel4) over the
# drain, in % of one core (near 100 would mean the peer is the
# bottleneck) and in microseconds per message.
#
# How to run (as root; needs postfix, smtp-sink, stunnel4, openssl,
# python3 and a built tree: ternd, ternq, bench/smtp-blast and
# bench/delay-proxy, in-tree or in build/; binaries are copied first):
#
#     sudo bench/relay.sh                                  # full run
#     sudo MESSAGES=2000 ROUNDS=1 bench/relay.sh           # quick run
#     sudo NETWORKS=delay PEERS=stunnel bench/relay.sh     # one cell
#     sudo PEERS=chunk CONNECTIONS=8 MESSAGES=5000 ROUNDS=1 RESTART_MSGS=0 \
#          bench/relay.sh                                  # relay window
#
# The full run relays 8 x 20,000 messages per round; with 20 ms of delay
# and 4 connections Postfix alone takes minutes per run.
#
# Environment (defaults in brackets):
#     MESSAGES [20000]   messages per run      SIZE [10240]  bytes each
#     CONNECTIONS [4]    connections to the peer, both senders
#     ROUNDS [3]         rounds                DELAY_MS [20] added round trip
#     NETWORKS [loopback delay]; also proxy0   PEERS [stunnel smarthost]; also chunk, chunk-stunnel
#     VARIANTS [ternd postfix]    which senders
#     FILL_SESSIONS [20] smtp-blast sessions for the fill
#     PIPELINE_DEPTH []  ternd's max_pipeline_depth for the peer [its default]
#     RESTART_MSGS [200] messages relayed after the restart (0: no restart)
#     RUN_TIMEOUT [1800] seconds before a drain is considered stuck
#     PF_EXTRA []        diagnostics only: more main.cf settings for the
#                        Postfix sender, name=value words without spaces
#     SMARTHOST_EXTRA [] the same for the smarthost (diagnostics only)
#     BENCH_TMPDIR [/var/tmp]  where the senders' queues live
#     CGROUP_ROOT [/sys/fs/cgroup/cpuacct]  cgroup v1 cpuacct mount
#     TERND, TERNQ, SMTP_BLAST, DELAY_PROXY, CHUNK_SINK  binaries [in-tree, else build/]
#
# The inflight column is ternd's mean number of transactions in flight
# per connection over the drain, by Little's law: the sum of
# tern_delivery_transmission_seconds (scraped from its metrics_listen;
# each transaction from its first command written to its final reply
# read) over the drain's seconds and CONNECTIONS; the depth the window
# keeps on the wire, which max_pipeline_depth bounds.
#
# Output: the exact command, environment facts, one line per run, a
# summary. Not a test: no TAP; exits non-zero if a run loses mail or
# does not drain.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_src=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
# shellcheck disable=SC2034 # read by lib.sh's die
bench_name=relay
# shellcheck source=lib.sh
. "$here/lib.sh"

MESSAGES=${MESSAGES:-20000}
SIZE=${SIZE:-10240}
CONNECTIONS=${CONNECTIONS:-4}
ROUNDS=${ROUNDS:-3}
DELAY_MS=${DELAY_MS:-20}
NETWORKS=${NETWORKS:-loopback delay}
PEERS=${PEERS:-stunnel smarthost}
VARIANTS=${VARIANTS:-ternd postfix}
FILL_SESSIONS=${FILL_SESSIONS:-20}
RESTART_MSGS=${RESTART_MSGS:-200}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}
PF_EXTRA=${PF_EXTRA:-}
SMARTHOST_EXTRA=${SMARTHOST_EXTRA:-}
BENCH_TMPDIR=${BENCH_TMPDIR:-/var/tmp}
CGROUP_ROOT=${CGROUP_ROOT:-/sys/fs/cgroup/cpuacct}

ternd_bin=${TERND:-$(built src/ternd/ternd)}
ternq_bin=${TERNQ:-$(built src/ternq/ternq)}
blast_bin=${SMTP_BLAST:-$(built bench/smtp-blast)}
proxy_bin=${DELAY_PROXY:-$(built bench/delay-proxy)}
chunk_bin=${CHUNK_SINK:-$(built bench/chunk-sink)}

[ "$(id -u)" -eq 0 ] || die "must run as root (postfix start, ternd drops to user tern, cgroups)"
for cmd in postfix postconf postqueue smtp-sink stunnel4 openssl python3 ss curl; do
	command -v "$cmd" >/dev/null || die "$cmd not installed"
done
for b in "$ternd_bin" "$ternq_bin" "$blast_bin" "$proxy_bin" "$chunk_bin"; do
	[ -x "$b" ] || die "$b not built (run make -j2 in $top_src or build/)"
done
require_uint MESSAGES SIZE CONNECTIONS ROUNDS DELAY_MS FILL_SESSIONS RESTART_MSGS RUN_TIMEOUT
[ "$MESSAGES" -gt 0 ] && [ "$ROUNDS" -gt 0 ] && [ "$CONNECTIONS" -gt 0 ] && [ "$FILL_SESSIONS" -gt 0 ] ||
	die "MESSAGES, ROUNDS, CONNECTIONS and FILL_SESSIONS must be > 0"
for n in $NETWORKS; do case $n in loopback | delay | proxy0) ;; *) die "unknown network $n" ;; esac; done
for p in $PEERS; do case $p in stunnel | smarthost | chunk | chunk-stunnel) ;; *) die "unknown peer $p" ;; esac; done
for v in $VARIANTS; do case $v in ternd | postfix) ;; *) die "unknown variant $v" ;; esac; done
[ -w "$CGROUP_ROOT/cgroup.procs" ] && [ -r "$CGROUP_ROOT/cpuacct.usage" ] ||
	die "no cgroup v1 cpuacct hierarchy at $CGROUP_ROOT (set CGROUP_ROOT)"
[ -d "$BENCH_TMPDIR" ] && [ -w "$BENCH_TMPDIR" ] || die "BENCH_TMPDIR $BENCH_TMPDIR is not a writable directory"
export TMPDIR=$BENCH_TMPDIR
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=$BENCH_TMPDIR

# tap.sh: tmp dirs, free_port, wait_for_port and cleanup by PID at exit
# (also on Ctrl-C/TERM); postfix.sh registers "pf_stop" at exit too.
. "$top_src/tests/lib/tap.sh"
. "$top_src/tests/lib/postfix.sh"
# pki.sh: pki_make, the test CA and the smarthost.test certificate
. "$top_src/tests/lib/pki.sh"
# peer.sh: the delay proxy, chunk-sink, Postfix's best smtp client settings
# shellcheck source=peer.sh
. "$here/peer.sh"
# cgroup.sh: cg_make, cg_remove, cg_ns (cpuacct groups, one per sender)
# shellcheck source=cgroup.sh
. "$here/cgroup.sh"

# --- peers -----------------------------------------------------------------------

# peer_start PEER DIR - start a fresh peer below DIR; sets peer_port (where
# senders connect, before any delay proxy), peer_pids
peer_start() {
	local dir=$2 sink_port
	mkdir -p "$dir" && chmod 0755 "$dir"
	peer_dir=$dir
	case $1 in
	stunnel)
		sink_port=$(free_port) || die "no free port"
		smtp-sink -u nobody -c -m 1000 "127.0.0.1:$sink_port" 1024 >"$dir/sink.out" 2>"$dir/sink.err" &
		peer_pids="$!"
		tap_bg_register "$!"
		wait_for_port "$sink_port" || die "smtp-sink did not start: $(cat "$dir/sink.err")"
		stunnel_start "$dir" "$sink_port"
		peer_port=$stunnel_port peer_pids="$peer_pids $stunnel_pid"
		;;
	chunk)
		chunk_start "$dir" -T
		peer_port=$chunk_port peer_pids=$chunk_pid
		;;
	chunk-stunnel)
		chunk_start "$dir" ""
		stunnel_start "$dir" "$chunk_port"
		peer_port=$stunnel_port peer_pids="$chunk_pid $stunnel_pid"
		;;
	smarthost)
		peer_port=$(free_port) || die "no free port"
		# its queue on tmpfs: the smarthost's own fsyncs are not measured
		peer_pf=$(mktemp -d "$shm/tern-relay-smarthost.XXXXXX") || die "mktemp failed"
		chmod 0755 "$peer_pf"
		tap_on_exit "rm -rf $(printf '%q' "$peer_pf")"
		pf_create "$peer_pf/pf" "$peer_port" || die "pf_create (smarthost) failed"
		postconf -c "$peer_pf/pf/conf" -e \
			"smtpd_tls_cert_file = $pki/server.pem" "smtpd_tls_key_file = $pki/server.key" \
			"smtpd_tls_security_level = may" "smtpd_tls_loglevel = 2" \
			"default_transport = discard" "relay_transport = discard" \
			"default_process_limit = 100" \
			"smtpd_client_connection_count_limit = 0" \
			"smtpd_client_connection_rate_limit = 0" \
			"smtpd_client_message_rate_limit = 0" || die "postconf (smarthost) failed"
		if [ -n "$SMARTHOST_EXTRA" ]; then
			# shellcheck disable=SC2086 # name=value words
			postconf -c "$peer_pf/pf/conf" -e $SMARTHOST_EXTRA || die "postconf (SMARTHOST_EXTRA) failed"
		fi
		pf_start "$peer_pf/pf" || die "cannot start the smarthost"
		peer_pids=
		;;
	esac
}

# peer_stop PEER - stop the peer started last
peer_stop() {
	local pid
	case $1 in
	stunnel | chunk | chunk-stunnel)
		for pid in $peer_pids; do
			kill -TERM "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
		done
		;;
	smarthost)
		pf_stop "$peer_pf/pf"
		cp "$peer_pf/pf/maillog" "$peer_dir/smarthost.maillog" 2>/dev/null
		rm -rf "$peer_pf"
		;;
	esac
}

# peer_count PEER - print how many messages the peer has accepted
peer_count() {
	case $1 in
	stunnel) sink_count "$peer_dir/sink.out" ;;
	smarthost) grep -c ' (queue active)$' "$peer_pf/pf/maillog" 2>/dev/null || true ;;
	chunk | chunk-stunnel) chunk_field "$peer_dir/sink.status" messages ;;
	esac
}

# peer_cpu_ticks - print the CPU ticks of the peer's processes so far
# ("-" for the smarthost, whose processes come and go)
peer_cpu_ticks() {
	local pid t=0
	[ -n "$peer_pids" ] || { echo -; return; }
	for pid in $peer_pids; do
		t=$((t + $(proc_cpu_ticks "$pid")))
	done
	echo "$t"
}

# peer_log PEER - print the peer's log file that records connections
peer_log() {
	case $1 in
	stunnel | chunk-stunnel) echo "$peer_dir/stunnel.log" ;;
	smarthost) echo "$peer_pf/pf/maillog" ;;
	esac
}

# peer_mark PEER - print where peer_tls starts counting: a log line, or
# for chunk the sink's counters "conns full resumed" now
peer_mark() {
	local f=$peer_dir/sink.status
	case $1 in
	chunk) echo "$(chunk_field "$f" connections),$(chunk_field "$f" tls_full),$(chunk_field "$f" tls_resumed)" ;;
	*) log_lines "$(peer_log "$1")" ;;
	esac
}

# peer_tls PEER FROM - print "conns full resumed" seen by the peer in its
# log from line FROM on ("?" where the peer does not say)
peer_tls() {
	local log
	log=$(peer_log "$1")
	case $1 in
	chunk)
		local c f r
		IFS=, read -r c f r <<<"$2"
		sleep 0.1 # the sink writes its counters every 100 ms
		echo "$(($(chunk_field "$peer_dir/sink.status" connections) - c))" \
			"$(($(chunk_field "$peer_dir/sink.status" tls_full) - f))" \
			"$(($(chunk_field "$peer_dir/sink.status" tls_resumed) - r))"
		;;
	stunnel | chunk-stunnel)
		tail -n "+$2" "$log" | awk '
			/ accepted connection from / { c++ }
			/TLS accepted: new session negotiated/ { f++ }
			/TLS accepted: previous session reused/ { r++ }
			END { print c + 0, f + 0, r + 0 }'
		;;
	smarthost)
		tail -n "+$2" "$log" | awk '
			/postfix\/smtpd\[[0-9]+\]: connect from / { c++ }
			/postfix\/smtpd\[[0-9]+\]: [A-Za-z]+ TLS connection established from / { t++ }
			/postfix\/smtpd\[[0-9]+\]: .*: Reusing old session/ { r++ }
			END { print c + 0, t - r, r + 0 }'
		;;
	esac
}

# log_lines FILE - print the number of lines in FILE plus one (tail -n +N)
log_lines() {
	echo $(($(wc -l <"$1" 2>/dev/null || echo 0) + 1))
}

# --- senders ---------------------------------------------------------------------

# blast_fill PORT N - N messages of SIZE bytes into a sender's listener
blast_fill() {
	local out
	out=$("$blast" -c "$FILL_SESSIONS" -n "$2" -s "$SIZE" "127.0.0.1:$1" 2>&1)
	[[ $out == *" accepted=$2 failed=0 "* ]] || die "fill of $2 messages failed: $out"
}

# ternd_start_cg CG - start ternd (current configuration) inside cgroup CG
ternd_start_cg() {
	local starts
	starts=$(grep -c ": started: " "$TERND_LOG" 2>/dev/null)
	# shellcheck disable=SC2154 # _ternd_bin: set by tests/lib/ternd.sh
	(echo "$BASHPID" >"$1/cgroup.procs" && exec "$_ternd_bin" -f -c "$TERND_CONF" >>"$TERND_LOG" 2>&1) &
	TERND_PID=$!
	tap_bg_register "$TERND_PID"
	wait_until 10 _ternd_started "${starts:-0}" || die "ternd did not start: $(tail -n 5 "$TERND_LOG")"
}

# ternd_inflight PORT T0 T1 - print ternd's mean transactions in flight per
# connection from T0 to T1 (microseconds), scraped from its metrics on
# PORT: the sum of each transaction's time on the wire over the time and
# CONNECTIONS
ternd_inflight() {
	curl -s --max-time 10 "http://127.0.0.1:$1/metrics" | awk -v t="$(( $3 - $2 ))" -v c="$CONNECTIONS" '
		/^tern_delivery_transmission_seconds_sum[{ ]/ { s += $NF }
		END { if (t > 0 && c > 0) printf "%.1f\n", s * 1e6 / t / c; else print "-" }'
}

# pf_sender_tls DIR FROM - print "new reused" TLS connection lines of the
# sender's smtp client from maillog line FROM on: one per delivery (tlsproxy
# logs each new connection a second time; those lines are not counted)
pf_sender_tls() {
	tail -n "+$2" "$1/maillog" | awk '
		/postfix\/smtp\[[0-9]+\]: [A-Za-z]+ TLS connection established to / { n++ }
		/postfix\/smtp\[[0-9]+\]: [A-Za-z]+ TLS connection reused to / { r++ }
		END { print n + 0, r + 0 }'
}

# pf_incoming - print the number of finished queue files in incoming/
pf_incoming() {
	find "$1/queue/incoming" -type f -perm -u+x 2>/dev/null | wc -l
}

# drained VARIANT PEER TARGET - the peer has TARGET messages and the
# sender's queue is empty (the cheap peer counter is checked first)
drained() {
	[ "$(peer_count "$2")" -ge "$3" ] || return 1
	case $1 in
	ternd) ternd_holds 0 ;;
	postfix) [ "$(pf_queue_count "$sdir/pf")" -eq 0 ] ;;
	esac
}

# wait_drained VARIANT PEER TARGET - poll drained; sets t_done (0: timeout)
wait_drained() {
	local deadline
	deadline=$(($(now_us) + RUN_TIMEOUT * 1000000))
	t_done=0
	until drained "$@"; do
		[ "$(now_us)" -lt "$deadline" ] || return 1
		sleep 0.1
	done
	t_done=$(now_us)
}

# sender_restart VARIANT - stop and start the sender with the same state
sender_restart() {
	case $1 in
	ternd)
		ternd_stop || die "ternd exit status $? at stop: $(tail -n 5 "$TERND_LOG")"
		ternd_start_cg "$cg"
		;;
	postfix)
		pf_stop "$sdir/pf"
		(echo "$BASHPID" >"$cg/cgroup.procs" && pf_start "$sdir/pf") || die "cannot restart Postfix"
		;;
	esac
}

# run_one ROUND NETWORK PEER VARIANT - one timed drain plus the restart phase
run_one() {
	local round=$1 net=$2 peer=$3 v=$4 dir port wrapper in_port t0 ns0 ns1 cpu0 cpu1 busy steal pt0 pt1 pcpu
	local pl got secs_ msgs cpu_s us tls_run tls_rs s_tls f0 f1 fill_s rl mport inflight
	dir=$(tap_tmpdir) || die "mktemp failed"
	peer_start "$peer" "$dir/peer"
	port=$peer_port
	case $net in
	delay) proxy_start "$peer_port" ;;
	proxy0) proxy_start "$peer_port" 0 ;;
	esac
	[ "$net" = loopback ] || port=$proxy_port
	wrapper=no
	[ "$peer" = smarthost ] || wrapper=yes
	cg=$(cg_make "$round-$net-$peer-$v") || die "cannot create a cgroup below $CGROUP_ROOT"
	sdir=$dir/sender

	# Fill while the sender cannot relay.
	case $v in
	ternd)
		unset TERND_PEERS
		mport=$(free_port) || die "no free port"
		ternd_setup "$sdir" "metrics_listen = 127.0.0.1:$mport" || die "ternd did not start"
		in_port=$TERND_PORT
		f0=$(now_us)
		blast_fill "$in_port" "$MESSAGES"
		f1=$(now_us)
		wait_until 10 ternd_holds "$MESSAGES" || die "ternd holds $(ternd_queued) messages after the fill"
		ternd_stop || die "ternd exit status $? after the fill"
		sed -i '/^\[peer relay\]$/,$d' "$TERND_CONF"
		ternd_peer_conf "$port" "$wrapper" >>"$TERND_CONF"
		;;
	postfix)
		in_port=$(free_port) || die "no free port"
		pf_create "$sdir/pf" "$in_port" || die "pf_create failed"
		pf_sender_conf "$sdir/pf" "$port" "$wrapper" $((MESSAGES * 2 + RESTART_MSGS)) || die "cannot configure the Postfix sender"
		postconf -c "$sdir/pf/conf" -e "master_service_disable = qmgr/unix qmgr/fifo" || die "postconf failed"
		(echo "$BASHPID" >"$cg/cgroup.procs" && pf_start "$sdir/pf") || die "cannot start Postfix"
		f0=$(now_us)
		blast_fill "$in_port" "$MESSAGES"
		f1=$(now_us)
		wait_until 30 sh -c "[ \$(find '$sdir/pf/queue/incoming' -type f -perm -u+x | wc -l) -ge $MESSAGES ]"
		[ "$(pf_incoming "$sdir/pf")" -eq "$MESSAGES" ] ||
			die "Postfix holds $(pf_incoming "$sdir/pf") messages in incoming/ after the fill"
		[ "$(pf_queue_count "$sdir/pf")" -eq "$MESSAGES" ] || die "Postfix queue is not just incoming/"
		postconf -c "$sdir/pf/conf" -X master_service_disable || die "postconf -X failed"
		;;
	esac
	fill_s=$(secs "$f0" "$f1")
	[ "$(peer_count "$peer")" -eq 0 ] || die "the peer got mail during the fill"
	pl=$(peer_mark "$peer")
	rl=1
	[ "$v" = postfix ] && rl=$(log_lines "$sdir/pf/maillog")
	sync
	sleep 1

	# The timed drain.
	cpu0=$(cpu_snapshot)
	pt0=$(peer_cpu_ticks)
	ns0=$(cg_ns "$cg")
	t0=$(now_us)
	case $v in
	ternd) ternd_start_cg "$cg" ;;
	postfix)
		postfix -c "$sdir/pf/conf" reload >/dev/null 2>&1 || die "postfix reload failed"
		sleep 0.2
		postqueue -c "$sdir/pf/conf" -f || die "postqueue -f failed"
		;;
	esac
	wait_drained "$v" "$peer" "$MESSAGES" ||
		die "run $round $net/$peer/$v: not drained after ${RUN_TIMEOUT}s (peer has $(peer_count "$peer"))"
	ns1=$(cg_ns "$cg")
	pt1=$(peer_cpu_ticks)
	cpu1=$(cpu_snapshot)
	case $peer in chunk*) t_done=$(chunk_field "$peer_dir/sink.status" last_us) ;; esac
	pcpu=-
	[ "$pt0" = - ] || pcpu=$(awk -v a="$pt0" -v b="$pt1" -v t="$clk_tck" -v s="$(secs "$t0" "$t_done")" \
		-v n="$MESSAGES" 'BEGIN { printf "%.0f%%/%.0f", 100 * (b - a) / t / s, (b - a) / t * 1e6 / n }')
	got=$(peer_count "$peer")
	[ "$got" -eq "$MESSAGES" ] || die "run $round $net/$peer/$v: the peer got $got of $MESSAGES"
	secs_=$(secs "$t0" "$t_done")
	msgs=$(rate "$MESSAGES" "$t0" "$t_done")
	cpu_s=$(awk -v a="$ns0" -v b="$ns1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
	us=$(awk -v a="$ns0" -v b="$ns1" -v n="$MESSAGES" 'BEGIN { printf "%.0f", (b - a) / 1e3 / n }')
	read -r busy steal <<<"$(cpu_pct "$cpu0" "$cpu1")"
	inflight=-
	[ "$v" = ternd ] && inflight=$(ternd_inflight "$mport" "$t0" "$t_done")
	sleep 0.5 # the last log lines
	tls_run=$(peer_tls "$peer" "$pl")
	s_tls=-
	[ "$v" = postfix ] && s_tls=$(pf_sender_tls "$sdir/pf" "$rl" | tr ' ' /)

	# After a restart of the sender: RESTART_MSGS more to the same peer.
	tls_rs="- - -"
	if [ "$RESTART_MSGS" -gt 0 ]; then
		sender_restart "$v"
		pl=$(peer_mark "$peer")
		blast_fill "$in_port" "$RESTART_MSGS"
		wait_drained "$v" "$peer" $((MESSAGES + RESTART_MSGS)) ||
			die "run $round $net/$peer/$v: restart phase not drained (peer has $(peer_count "$peer"))"
		sleep 0.5
		tls_rs=$(peer_tls "$peer" "$pl")
	fi

	printf '%-5s %-8s %-13s %-7s %6s %7s %8s %9s %7s %6s %-14s %-14s %-9s %5s %5s %10s %8s\n' \
		"$round" "$net" "$peer" "$v" "$MESSAGES" "$fill_s" "$secs_" "$msgs" "$cpu_s" "$us" \
		"$(tr ' ' / <<<"$tls_run")" "$(tr ' ' / <<<"$tls_rs")" "$s_tls" "$busy%" "$steal%" "$pcpu" "$inflight"
	key=$peer/$net/$v
	rates[$key]="${rates[$key]:-} $msgs"
	[ "$inflight" = - ] || inflights[$key]="${inflights[$key]:-} $inflight"
	cpus[$key]="${cpus[$key]:-} $us"

	case $v in
	ternd) ternd_stop || die "ternd exit status $? at stop: $(tail -n 5 "$TERND_LOG")" ;;
	postfix) pf_stop "$sdir/pf" ;;
	esac
	[ "$net" = loopback ] || proxy_stop
	peer_stop "$peer"
	cg_remove "$cg"
	[ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$dir"
}

declare -A rates cpus inflights

echo "== relay benchmark: ternd vs Postfix's smtp client, through TLS"
echo "command:  ${cmdline}  (MESSAGES=$MESSAGES SIZE=$SIZE CONNECTIONS=$CONNECTIONS ROUNDS=$ROUNDS DELAY_MS=$DELAY_MS NETWORKS='$NETWORKS' PEERS='$PEERS' VARIANTS='$VARIANTS'${PF_EXTRA:+ PF_EXTRA='$PF_EXTRA'}${SMARTHOST_EXTRA:+ SMARTHOST_EXTRA='$SMARTHOST_EXTRA'} FILL_SESSIONS=$FILL_SESSIONS RESTART_MSGS=$RESTART_MSGS BENCH_TMPDIR=$BENCH_TMPDIR)"
echo "fill:     smtp-blast -c $FILL_SESSIONS -n $MESSAGES -s $SIZE 127.0.0.1:PORT (into the held sender)"
bench_facts
echo "postfix:  $(postconf -d mail_version); $(stunnel4 -version 2>&1 | awk '/^stunnel/ { print $1, $2; exit }'); $(openssl version)"
bench_tree
echo "ternd:    $("$ternd_bin" -V 2>&1) ($ternd_bin, sha256 $(sha "$ternd_bin"))"
echo "tools:    smtp-blast sha256 $(sha "$blast_bin"), delay-proxy sha256 $(sha "$proxy_bin"), chunk-sink sha256 $(sha "$chunk_bin")"

ensure_tern_user || die "cannot create user tern"
top=$(tap_tmpdir) || die "mktemp failed"
bench_copy_tern "$top" "$ternd_bin" "$ternq_bin" "$blast_bin" "$proxy_bin" "$chunk_bin"
blast=$top/bin/smtp-blast
proxy=$top/bin/delay-proxy
chunk=$top/bin/chunk-sink
clk_tck=$(getconf CLK_TCK)
pki=$top/pki
peer_pki
echo "tls:      test CA and smarthost.test certificate, ECDSA P-256; both senders verify the name"
echo "storage:  senders below $BENCH_TMPDIR ($(df --output=fstype "$BENCH_TMPDIR" | tail -n 1 | tr -d ' ')), smarthost queue below $shm"
case " $NETWORKS " in *" delay "*) proxy_report ;; esac
echo
echo "tls columns: TCP connections/full TLS handshakes/resumed ones, as the peer logged them;"
echo "pf_tls: Postfix sender's new/reused TLS connections (its own log); peer_cpu: the peer's processes, % of one core/us per message"
echo "inflight: ternd's transactions in flight per connection, the mean over the drain (Little's law: the sum of"
echo "          tern_delivery_transmission_seconds, each from its first command written to its final reply read,"
echo "          over the drain's seconds and CONNECTIONS)"
printf '%-5s %-8s %-13s %-7s %6s %7s %8s %9s %7s %6s %-14s %-14s %-9s %5s %5s %10s %8s\n' round network peer sender \
	msgs fill_s drain_s msgs/s cpu_s us/msg tls_drain tls_restart pf_tls cpu steal peer_cpu inflight
read -r -a variants <<<"$VARIANTS"
for ((r = 1; r <= ROUNDS; r++)); do
	order=("${variants[@]}")
	if ((r % 2 == 0)) && [ "${#variants[@]}" -eq 2 ]; then order=("${variants[1]}" "${variants[0]}"); fi
	for net in $NETWORKS; do
		for peer in $PEERS; do
			for v in "${order[@]}"; do
				run_one "$r" "$net" "$peer" "$v"
			done
		done
	done
done
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) at the end"

echo
echo "== summary (medians over $ROUNDS rounds; CPU = the sender's cgroup during the drain)"
printf '%-13s %-8s %10s %10s %8s %10s %10s %8s\n' peer network ternd/s postfix/s ratio \
	ternd_us pf_us cpu_ratio
for peer in $PEERS; do
	for net in $NETWORKS; do
		# shellcheck disable=SC2086 # the stored lists are space-separated
		{
			mt=$(median ${rates[$peer/$net/ternd]:-})
			mp=$(median ${rates[$peer/$net/postfix]:-})
			ct=$(median ${cpus[$peer/$net/ternd]:-})
			cp=$(median ${cpus[$peer/$net/postfix]:-})
		}
		printf '%-13s %-8s %10s %10s %8s %10s %10s %8s\n' "$peer" "$net" "$mt" "$mp" \
			"$(ratio "$mt" "$mp")" "$ct" "$cp" "$(ratio "$ct" "$cp")"
	done
done
echo
echo "== per-round ratios ternd/postfix (same round), min-max"
for peer in $PEERS; do
	for net in $NETWORKS; do
		read -r -a qr <<<"$(round_ratios "${rates[$peer/$net/ternd]:-}" "${rates[$peer/$net/postfix]:-}")"
		read -r -a qc <<<"$(round_ratios "${cpus[$peer/$net/ternd]:-}" "${cpus[$peer/$net/postfix]:-}")"
		printf '%-13s %-8s msgs/s %-12s cpu/msg %-12s\n' "$peer" "$net" "$(minmax "${qr[@]}")" "$(minmax "${qc[@]}")"
	done
done
echo
echo "== targets (medians)"
for peer in $PEERS; do
	for net in $NETWORKS; do
		# shellcheck disable=SC2086
		{
			q=$(ratio "$(median ${rates[$peer/$net/ternd]:-})" "$(median ${rates[$peer/$net/postfix]:-})")
			c=$(ratio "$(median ${cpus[$peer/$net/ternd]:-})" "$(median ${cpus[$peer/$net/postfix]:-})")
		}
		awk -v p="$peer" -v n="$net" -v q="$q" -v c="$c" 'BEGIN {
			printf "%-13s %-8s msgs/s >= 3x: %s", p, n,
				(q == "-" ? "n/a" : (q + 0 >= 3 ? "met (" q ")" : "NOT met (" q ")"))
			if (n == "loopback")
				printf "   CPU/msg <= 0.33x: %s",
					(c == "-" ? "n/a" : (c + 0 <= 0.33 ? "met (" c ")" : "NOT met (" c ")"))
			printf "\n" }'
	done
done
# The relay window (issue 17): ternd through the delay against its own
# loopback figure and against Postfix through the delay, chunk peers only.
for peer in $PEERS; do
	case $peer in chunk*) ;; *) continue ;; esac
	# shellcheck disable=SC2086
	{
		td=$(median ${rates[$peer/delay/ternd]:-})
		tl=$(median ${rates[$peer/loopback/ternd]:-})
		pd=$(median ${rates[$peer/delay/postfix]:-})
	}
	awk -v p="$peer" -v a="$(ratio "$td" "$tl")" -v b="$(ratio "$td" "$pd")" -v d="$DELAY_MS" 'BEGIN {
		printf "%-13s window   ternd(%dms)/ternd(loopback) >= 0.8: %s   ternd(%dms)/postfix(%dms) >= 10: %s\n", p, d,
			(a == "-" ? "n/a" : (a + 0 >= 0.8 ? "met (" a ")" : "NOT met (" a ")")), d, d,
			(b == "-" ? "n/a" : (b + 0 >= 10 ? "met (" b ")" : "NOT met (" b ")")) }'
	case " $NETWORKS " in *" proxy0 "*)
		# shellcheck disable=SC2086
		t0=$(median ${rates[$peer/proxy0/ternd]:-})
		printf '%-13s window   ternd(%dms)/ternd(proxy0) (the same proxy, no delay): %s\n' "$peer" "$DELAY_MS" \
			"$(ratio "$td" "$t0")"
		;;
	esac
	for net in $NETWORKS; do
		# shellcheck disable=SC2086
		printf '%-13s window   transactions in flight per connection, %s, median: %s of max_pipeline_depth %s\n' \
			"$peer" "$net" "$(median ${inflights[$peer/$net/ternd]:-})" "${PIPELINE_DEPTH:-32}"
	done
	for base in loopback proxy0; do
		q=$(round_ratios "${rates[$peer/delay/ternd]:-}" "${rates[$peer/$base/ternd]:-}")
		[ -n "$q" ] && printf '%-13s window   ternd(%dms)/ternd(%s) round by round: %s\n' \
			"$peer" "$DELAY_MS" "$base" "$q"
	done
done
