#!/bin/bash
# milter-throughput.sh - Postfix throughput with and without tern-milter.
#
# What it measures: end-to-end throughput (msgs/s) of one isolated Postfix
# instance that receives mail from smtp-source over SMTP on 127.0.0.1 and
# relays it to smtp-sink on 127.0.0.1, once with tern-milter in
# smtpd_milters ("with") and once without ("without").  A run's wall time
# starts when smtp-source starts and ends when smtp-sink has received every
# message AND the Postfix queue is empty.  The smtp-source time alone
# (ingest: SMTP accept, milter, cleanup, queue file written) is recorded too.
# Both variants use the same main.cf except the three milter lines, Postfix
# is restarted before every run (queue empty, fresh processes), and runs
# alternate without/with, with/without, ... to cancel drift on a noisy box.
#
# How to run (as root; needs postfix, smtp-source, smtp-sink, python3; the
# tern-milter binary must be built, in-tree (make -j2) or in build/ as
# tests/run-suite does; it is copied first, so a rebuild cannot disturb a run):
#
#     sudo bench/milter-throughput.sh                      # full run
#     sudo MESSAGES=2000 ROUNDS=1 bench/milter-throughput.sh   # quick run
#
# Environment (defaults in brackets):
#     MESSAGES [20000]  messages per run      SESSIONS [20]  parallel sessions
#     SIZE [10240]      payload bytes/message ROUNDS [3]     without/with pairs
#     WARMUP [500]      untimed warm-up messages (0: none)
#     BENCH_TMPDIR [/dev/shm if present, else $TMPDIR or /tmp]  where the
#                       Postfix queue lives; /dev/shm (tmpfs) keeps disk
#                       fsync latency out of the measurement
#     RUN_TIMEOUT [900] seconds to wait for one run to drain
#     MILTER_SOCKET [inet]  inet: milter on 127.0.0.1:PORT (as deployed);
#                       unix: on a UNIX-domain socket (diagnostic: no TCP,
#                       so no Nagle/delayed-ACK interaction)
#     TERN_MILTER [src/milter/tern-milter, else build/src/milter/tern-milter]
#
# Output: the exact command, environment facts, one line per run and a
# summary (median msgs/s per variant, ratio with/without).  Not a test: it
# prints no TAP and exits non-zero only if a run fails (e.g. lost mail).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_src=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
# shellcheck disable=SC2034 # read by lib.sh's die
bench_name="milter-throughput"
# shellcheck source=lib.sh
. "$here/lib.sh"

MESSAGES=${MESSAGES:-20000}
SESSIONS=${SESSIONS:-20}
SIZE=${SIZE:-10240}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-500}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
MILTER_SOCKET=${MILTER_SOCKET:-inet}
milter=${TERN_MILTER:-}
if [ -z "$milter" ]; then
	milter=$top_src/src/milter/tern-milter
	[ -x "$milter" ] || milter=$top_src/build/src/milter/tern-milter
fi
if [ -z "${BENCH_TMPDIR:-}" ]; then
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then BENCH_TMPDIR=/dev/shm; else BENCH_TMPDIR=${TMPDIR:-/tmp}; fi
fi
export TMPDIR=$BENCH_TMPDIR

# tap.sh: tmp dirs, free_port, wait_for_port and cleanup by PID at exit
# (also on Ctrl-C/TERM); postfix.sh registers "pf_stop" at exit too.
. "$top_src/tests/lib/tap.sh"
. "$top_src/tests/lib/postfix.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root (postfix start)"
for cmd in postfix postconf smtp-source smtp-sink python3 ss; do
	command -v "$cmd" >/dev/null || die "$cmd not installed"
done
[ -x "$milter" ] || die "tern-milter not built (run make -j2 in $top_src, or set TERN_MILTER)"
require_uint MESSAGES SESSIONS SIZE ROUNDS WARMUP RUN_TIMEOUT
[ "$MESSAGES" -gt 0 ] && [ "$ROUNDS" -gt 0 ] || die "MESSAGES and ROUNDS must be > 0"
case $MILTER_SOCKET in inet | unix) ;; *) die "MILTER_SOCKET must be inet or unix" ;; esac

# milter_lines - print how many per-message verdict lines tern-milter logged
milter_lines() {
	grep -c ' verdict=' "$top/milter.log" 2>/dev/null || true
}

# set_variant - stop Postfix, configure "with" or "without" milter, start it
set_variant() {
	pf_stop "$pf"
	if [ "$1" = with ]; then
		postconf -c "$pf/conf" -e "smtpd_milters = $milter_pf" \
			"milter_protocol = 6" "milter_default_action = tempfail" || return 1
	else
		postconf -c "$pf/conf" -e "smtpd_milters =" || return 1
		postconf -c "$pf/conf" -X milter_protocol milter_default_action || return 1
	fi
	pf_start "$pf" || return 1
	[ "$(pf_queue_count "$pf")" -eq 0 ] || die "queue not empty after restart"
}

# drained - true once smtp-sink counted TARGET messages and the queue is empty
drained() {
	[ "$(sink_count "$top/sink.out")" -ge "$1" ] && [ "$(pf_queue_count "$pf")" -eq 0 ]
}

# send_and_drain - run smtp-source for N messages, wait until delivered;
# sets t0, t_ingest, t_done (microseconds) and src_rc
send_and_drain() {
	local n=$1 target src_pid deadline
	target=$(($(sink_count "$top/sink.out") + n))
	t0=$(now_us)
	smtp-source -s "$SESSIONS" -l "$SIZE" -m "$n" -f sender@example.org \
		-t rcpt@example.com "127.0.0.1:$smtp_port" >>"$top/source.log" 2>&1 &
	src_pid=$!
	src_running=$src_pid # killed by the exit hook if we are interrupted
	src_rc=0
	wait "$src_pid" || src_rc=$?
	src_running=
	t_ingest=$(now_us)
	deadline=$((t_ingest + RUN_TIMEOUT * 1000000))
	# drained polls the cheap sink counter; it scans the queue only once
	# that is reached.
	while ! drained "$target"; do
		if [ "$(now_us)" -ge "$deadline" ]; then
			t_done=
			return 1
		fi
		sleep 0.05
	done
	t_done=$(now_us)
}

# run_one - one timed run of VARIANT in ROUND; prints a line, records the rate
run_one() {
	local variant=$1 round=$2 c0 c1 m0 m1 cpu0 cpu1 ml0 ml1 got e2e ing busy steal
	set_variant "$variant" || die "cannot start Postfix for variant $variant"
	sync
	sleep 2
	c0=$(sink_count "$top/sink.out")
	ml0=$(milter_lines)
	m0=$(proc_cpu_ticks "$milter_pid")
	cpu0=$(cpu_snapshot)
	if ! send_and_drain "$MESSAGES"; then
		die "run $round/$variant: not drained after ${RUN_TIMEOUT}s" \
			"(sink got $(($(sink_count "$top/sink.out") - c0)) of $MESSAGES, queue $(pf_queue_count "$pf"));" \
			"see $pf/maillog (KEEP_TMP=1 keeps it)"
	fi
	cpu1=$(cpu_snapshot)
	m1=$(proc_cpu_ticks "$milter_pid")
	sleep 0.5 # let the milter finish logging its last lines
	ml1=$(milter_lines)
	c1=$(sink_count "$top/sink.out")
	got=$((c1 - c0))
	[ "$src_rc" -eq 0 ] || die "run $round/$variant: smtp-source exit status $src_rc:" \
		"$(tail -n 5 "$top/source.log")"
	[ "$got" -eq "$MESSAGES" ] || die "run $round/$variant: sink got $got of $MESSAGES messages"
	e2e=$(rate "$MESSAGES" "$t0" "$t_done")
	ing=$(rate "$MESSAGES" "$t0" "$t_ingest")
	read -r busy steal <<<"$(cpu_pct "$cpu0" "$cpu1")"
	printf '%-5s %-7s %8s %9s %9s %9s %9s %7s %11s %6s %6s\n' "$round" "$variant" "$got" \
		"$(secs "$t0" "$t_ingest")" "$ing" "$(secs "$t0" "$t_done")" "$e2e" \
		"$((ml1 - ml0))" "$(awk -v t=$((m1 - m0)) -v hz="$clk_tck" 'BEGIN { printf "%.2f", t / hz }')" \
		"$busy%" "$steal%"
	if [ "$variant" = with ]; then
		rates_with+=("$e2e")
		ingest_with+=("$ing")
	else
		rates_without+=("$e2e")
		ingest_without+=("$ing")
	fi
}

# setup - start smtp-sink, tern-milter and the Postfix instance
setup() {
	ensure_tern_user || die "cannot create user tern"
	top=$(tap_tmpdir) || die "mktemp failed"
	# Run a private copy: a concurrent rebuild cannot change it under us.
	cp "$milter" "$top/tern-milter" && chmod 0755 "$top/tern-milter" || die "cannot copy $milter"
	milter=$top/tern-milter
	milter_port=$(free_port) && smtp_port=$(free_port) && sink_port=$(free_port) ||
		die "no free port"

	# smtp-sink only counts (no -d): large backlog, up to 1000 connections.
	smtp-sink -u nobody -c -m 1000 "127.0.0.1:$sink_port" 1024 >"$top/sink.out" 2>"$top/sink.err" &
	tap_bg_register $!
	wait_for_port "$sink_port" || die "smtp-sink did not start: $(cat "$top/sink.err")"

	# tern-milter with its default checks, as in tests/integration.
	"$milter" -K "$top/trace.key" >/dev/null || die "tern-milter -K failed"
	chown tern "$top/trace.key"
	if [ "$MILTER_SOCKET" = unix ]; then
		milter_listen=unix:$top/milter.sock
		milter_pf=unix:$top/milter.sock
	else
		milter_listen=inet:$milter_port@127.0.0.1
		milter_pf=inet:127.0.0.1:$milter_port
	fi
	printf '%s\n' "[global]" "trace_key_file = $top/trace.key" "[milter]" \
		"listen = $milter_listen" >"$top/tern.conf"
	"$milter" -f -c "$top/tern.conf" >"$top/milter.log" 2>&1 &
	milter_pid=$!
	tap_bg_register "$milter_pid"
	if [ "$MILTER_SOCKET" = unix ]; then
		wait_for_file "$top/milter.sock" && chmod 0666 "$top/milter.sock"
	else
		wait_for_port "$milter_port"
	fi || die "tern-milter did not start: $(cat "$top/milter.log")"

	pf=$top/pf
	pf_create "$pf" "$smtp_port" || die "pf_create failed"
	pf_relay_to "$pf" 127.0.0.1 "$sink_port" || die "pf_relay_to failed"
	# Same tuning in both variants: no slow start towards the sink, enough
	# smtpd and smtp processes, connection reuse to the sink.
	postconf -c "$pf/conf" -e \
		"default_process_limit = 100" \
		"initial_destination_concurrency = 20" \
		"default_destination_concurrency_limit = 20" \
		"smtp_destination_concurrency_limit = 20" \
		"smtp_connection_cache_on_demand = yes" \
		"qmgr_message_active_limit = 40000" \
		"smtpd_client_connection_count_limit = 0" \
		"smtpd_client_connection_rate_limit = 0" \
		"smtpd_client_message_rate_limit = 0" || die "postconf failed"
}

clk_tck=$(getconf CLK_TCK)
src_running=
tap_on_exit '[ -n "$src_running" ] && kill "$src_running"'
rates_with=()
rates_without=()
ingest_with=()
ingest_without=()

echo "== tern-milter throughput benchmark"
echo "command:  ${cmdline}  (MESSAGES=$MESSAGES SESSIONS=$SESSIONS SIZE=$SIZE ROUNDS=$ROUNDS WARMUP=$WARMUP MILTER_SOCKET=$MILTER_SOCKET BENCH_TMPDIR=$BENCH_TMPDIR)"
echo "load:     smtp-source -s $SESSIONS -l $SIZE -m $MESSAGES -f sender@example.org -t rcpt@example.com 127.0.0.1:PORT"
bench_facts
echo "postfix:  $(postconf -d mail_version)"
echo "tern:     $("$milter" -V 2>&1) ($milter, sha256 $(sha "$milter"))"

setup
echo "queue:    $pf/queue ($(df --output=fstype "$pf/queue" 2>/dev/null | tail -n 1))"
echo "milter:   tern-milter pid $milter_pid, smtpd_milters = $milter_pf (default checks)"
echo

if [ "$WARMUP" -gt 0 ]; then
	set_variant with || die "cannot start Postfix"
	send_and_drain "$WARMUP" || die "warm-up run did not drain"
	[ "$src_rc" -eq 0 ] || die "warm-up: smtp-source failed: $(tail -n 5 "$top/source.log")"
	echo "warm-up:  $WARMUP messages with the milter in $(secs "$t0" "$t_done")s (not counted)"
	echo
fi

printf '%-5s %-7s %8s %9s %9s %9s %9s %7s %11s %6s %6s\n' round variant msgs \
	ingest_s ingest/s e2e_s e2e/s m_lines milter_cpu_s cpu steal
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then order=(without with); else order=(with without); fi
	for v in "${order[@]}"; do
		run_one "$v" "$r"
	done
done
pf_stop "$pf"

mw=$(median "${rates_with[@]}")
mo=$(median "${rates_without[@]}")
iw=$(median "${ingest_with[@]}")
io=$(median "${ingest_without[@]}")
echo
echo "== summary (medians over $ROUNDS runs per variant)"
printf 'without milter: e2e %8s msgs/s   ingest %8s msgs/s\n' "$mo" "$io"
printf 'with milter:    e2e %8s msgs/s   ingest %8s msgs/s\n' "$mw" "$iw"
awk -v w="$mw" -v o="$mo" -v iw="$iw" -v io="$io" 'BEGIN {
	r = w / o
	printf "ratio with/without: e2e %.3f (target >= 0.97: %s)   ingest %.3f\n",
		r, (r >= 0.97 ? "met" : "NOT met"), iw / io }'
