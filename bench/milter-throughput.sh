#!/bin/bash
# milter-throughput.sh - Postfix alone, with a null milter, with OpenDKIM
# and with tern-milter, side by side in one run.
#
# What it measures: the throughput (msgs/s) of one isolated Postfix
# instance that receives mail from smtp-source over SMTP on 127.0.0.1 and
# delivers it to the discard transport, and the milter's CPU per message,
# in four variants that differ only in smtpd_milters:
#     postfix   no milter
#     null      bench/null-milter: adds one header field, nothing else (the
#               floor a libmilter milter costs; its header comment says how)
#     null-steps bench/null-milter -s: the same, but taking tern-milter's
#               protocol steps, actions and macros (the floor of what
#               tern-milter's checks ask of Postfix)
#     opendkim  OpenDKIM signing every message (rsa-sha256, a 2048-bit key
#               made for the run, relaxed/simple)
#     tern      tern-milter with its default checks and trace signing
# A run's wall time (e2e) starts when smtp-source starts and ends when the
# Postfix queue is empty and the maillog shows every message discarded;
# ingest is smtp-source's time alone (SMTP, milter, cleanup, queue file).
# Milter CPU is the milter process's utime+stime from /proc/PID/stat over
# the run, divided by the messages. Postfix is restarted before every run
# (queue empty, fresh processes) and the order of the variants rotates
# from round to round to cancel drift on a noisy box. smtp-source sends
# one message per session (no -d), as applications do, so every message
# is a new SMTP session and a new milter connection.
#
# Before the timed runs, each milter variant gets WARMUP untimed messages
# with milter_header_checks logging the field the milter adds: the script
# stops unless every one of them got it (so OpenDKIM really signs).
#
# How to run (as root; needs postfix, smtp-source, python3, opendkim and
# opendkim-genkey (Debian opendkim, opendkim-tools) for the opendkim
# variant; a built tern-milter and bench/null-milter, in-tree or in build/;
# both are copied first, so a rebuild cannot disturb a run):
#
#     sudo bench/milter-throughput.sh                        # full run
#     sudo MESSAGES=3000 ROUNDS=1 bench/milter-throughput.sh # quick run
#
# Environment (defaults in brackets):
#     MESSAGES [20000]  messages per run      SESSIONS [20]  parallel sessions
#     SIZE [10240]      payload bytes/message ROUNDS [3]     rounds of all variants
#     VARIANTS ["postfix null null-steps opendkim tern"]  which to run, in
#                       round 1's order
#     WARMUP [500]      untimed, checked messages per milter variant (0: none)
#     BENCH_TMPDIR [/dev/shm if present, else $TMPDIR or /tmp]  where the
#                       Postfix queue lives; /dev/shm (tmpfs) keeps disk
#                       fsync latency out of the measurement
#     RUN_TIMEOUT [900] seconds to wait for one run to drain
#     MILTER_SOCKET [inet]  inet: milters on 127.0.0.1:PORT (as deployed);
#                       unix: on UNIX-domain sockets (diagnostic)
#     TERN_MILTER [src/milter/tern-milter, else build/...]
#     NULL_MILTER [bench/null-milter, else build/...]
#     TERN_MILTER_B     a second tern-milter build, run as variant "tern-b"
#                       (add it to VARIANTS): two builds in the same rounds
#
# Output: the exact command, environment facts, one line per run and a
# summary: median msgs/s per variant, its ratio to Postfix alone, median
# milter CPU per message, and tern/null (targets: >= 0.95 msgs/s, <= 0.5 ms
# CPU per message); tern/null-steps is reported beside it, and both ratios
# round by round with their median (a round runs its variants one after
# another, so its ratio shares one background load). Not a test: it
# prints no TAP and exits non-zero only if a run fails (lost mail, a
# milter that did not do its job).
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
VARIANTS=${VARIANTS:-postfix null null-steps opendkim tern}
tern_bin=${TERN_MILTER:-$(built src/milter/tern-milter)}
null_bin=${NULL_MILTER:-$(built bench/null-milter)}
tern_b_bin=${TERN_MILTER_B:-}
if [ -z "${BENCH_TMPDIR:-}" ]; then
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then BENCH_TMPDIR=/dev/shm; else BENCH_TMPDIR=${TMPDIR:-/tmp}; fi
fi
export TMPDIR=$BENCH_TMPDIR

# tap.sh: tmp dirs, free_port, wait_for_port and cleanup by PID at exit
# (also on Ctrl-C/TERM); postfix.sh registers "pf_stop" at exit too.
. "$top_src/tests/lib/tap.sh"
. "$top_src/tests/lib/postfix.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root (postfix start)"
for cmd in postfix postconf smtp-source python3 ss; do
	command -v "$cmd" >/dev/null || die "$cmd not installed"
done
require_uint MESSAGES SESSIONS SIZE ROUNDS WARMUP RUN_TIMEOUT
[ "$MESSAGES" -gt 0 ] && [ "$ROUNDS" -gt 0 ] || die "MESSAGES and ROUNDS must be > 0"
case $MILTER_SOCKET in inet | unix) ;; *) die "MILTER_SOCKET must be inet or unix" ;; esac
read -r -a variants <<<"$VARIANTS"
[ "${#variants[@]}" -gt 0 ] || die "VARIANTS is empty"
for v in "${variants[@]}"; do
	case $v in
	postfix) ;;
	null | null-steps) [ -x "$null_bin" ] || die "bench/null-milter not built (make -j2, or set NULL_MILTER)" ;;
	opendkim)
		command -v opendkim >/dev/null && command -v opendkim-genkey >/dev/null ||
			die "opendkim not installed (apt-get install opendkim opendkim-tools)"
		;;
	tern) [ -x "$tern_bin" ] || die "tern-milter not built (make -j2, or set TERN_MILTER)" ;;
	tern-b) [ -x "$tern_b_bin" ] || die "variant tern-b needs TERN_MILTER_B" ;;
	*) die "unknown variant $v (postfix null null-steps opendkim tern tern-b)" ;;
	esac
done

# has_variant - true if VARIANTS names $1
has_variant() {
	local v
	for v in "${variants[@]}"; do [ "$v" = "$1" ] && return 0; done
	return 1
}

# milter_addr - print "LISTEN PF_ADDR" for milter NAME run as USER (socket
# per MILTER_SOCKET; a unix one in a directory of USER's own)
milter_addr() {
	local port
	if [ "$MILTER_SOCKET" = unix ]; then
		install -d -o "$2" -m 0755 "$top/$1.sock.d" || die "cannot make $top/$1.sock.d"
		echo "unix:$top/$1.sock.d/sock unix:$top/$1.sock.d/sock"
	else
		port=$(free_port) || die "no free port"
		echo "inet:$port@127.0.0.1 inet:127.0.0.1:$port"
	fi
}

# start_milter_wait - wait for LISTEN (inet:PORT@host or unix:PATH)
start_milter_wait() {
	local listen=$1 p
	case $listen in
	unix:*)
		wait_for_file "${listen#unix:}" || return 1
		chmod 0666 "${listen#unix:}"
		;;
	*)
		p=${listen#inet:}
		wait_for_port "${p%@*}"
		;;
	esac
}

# start_tern - tern-milter (binary $2) as variant $1, default checks
start_tern() {
	local name=$1 bin=$2 listen pfaddr
	read -r listen pfaddr <<<"$(milter_addr "$name" tern)"
	mkdir -p "$top/$name" && cp "$bin" "$top/$name/tern-milter" &&
		chmod 0755 "$top/$name/tern-milter" || die "cannot copy $bin"
	# Its own state_dir (the journal), tern's as deployed.
	install -d -o tern -m 0750 "$top/$name/state" || die "cannot make $top/$name/state"
	"$top/$name/tern-milter" -K "$top/$name/trace.key" >/dev/null || die "tern-milter -K failed"
	chown tern "$top/$name/trace.key"
	printf '%s\n' "[global]" "trace_key_file = $top/$name/trace.key" \
		"state_dir = $top/$name/state" "[milter]" "listen = $listen" >"$top/$name/tern.conf"
	"$top/$name/tern-milter" -f -c "$top/$name/tern.conf" >"$top/$name/milter.log" 2>&1 &
	milter_pid[$name]=$!
	tap_bg_register "$!"
	start_milter_wait "$listen" || die "$name did not start: $(cat "$top/$name/milter.log")"
	milter_pf[$name]=$pfaddr
	milter_hdr[$name]=Traceparent
	milter_desc[$name]="$top/$name/tern-milter, sha256 $(sha "$bin"), $("$bin" -V 2>&1)"
}

# start_null NAME [ARG] - bench/null-milter as variant NAME, with ARG
start_null() {
	local name=$1 listen pfaddr
	read -r listen pfaddr <<<"$(milter_addr "$name" nobody)"
	cp "$null_bin" "$top/$name" && chmod 0755 "$top/$name" || die "cannot copy $null_bin"
	# setpriv execs (runuser would fork): the PID is the milter's own
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$top/$name" -p "$listen" \
		-H X-Null-Milter ${2:+"$2"} >"$top/$name.log" 2>&1 &
	milter_pid[$name]=$!
	tap_bg_register "$!"
	start_milter_wait "$listen" || die "$name did not start: $(cat "$top/$name.log")"
	milter_pf[$name]=$pfaddr
	milter_hdr[$name]=X-Null-Milter
	milter_desc[$name]="$top/$name${2:+ $2}, sha256 $(sha "$null_bin")"
}

# start_opendkim - OpenDKIM in the foreground, signing for example.org
start_opendkim() {
	local listen pfaddr d
	read -r listen pfaddr <<<"$(milter_addr opendkim opendkim)"
	# OpenDKIM refuses a configuration or key below a directory others may
	# write (such as /dev/shm or /tmp): its own directory below /run.
	d=$(mktemp -d /run/bench-opendkim.XXXXXX) || die "mktemp below /run failed"
	tap_on_exit "rm -rf $(printf '%q' "$d")"
	opendkim-genkey -b 2048 -d example.org -s bench -D "$d" ||
		die "opendkim-genkey failed"
	chown -R opendkim "$d" && chmod 0700 "$d" && chmod 0600 "$d/bench.private" || die "chown $d failed"
	cat >"$d/opendkim.conf" <<-CONF
		Mode s
		Domain example.org
		Selector bench
		KeyFile $d/bench.private
		Canonicalization relaxed/simple
		SignatureAlgorithm rsa-sha256
		Socket $listen
		UserID opendkim
		Background no
		Syslog no
		UMask 000
	CONF
	opendkim -f -x "$d/opendkim.conf" >"$top/opendkim.log" 2>&1 &
	milter_pid[opendkim]=$!
	tap_bg_register "$!"
	start_milter_wait "$listen" || die "opendkim did not start: $(cat "$top/opendkim.log")"
	milter_pf[opendkim]=$pfaddr
	milter_hdr[opendkim]=DKIM-Signature
	milter_desc[opendkim]="$(opendkim -V 2>&1 | head -n 1), $(openssl version 2>/dev/null)"
}

# set_variant - stop Postfix, configure variant $1 (checked if $2 = check), start it
set_variant() {
	local v=$1 check=${2:-}
	pf_stop "$pf"
	if [ "$v" = postfix ]; then
		postconf -c "$pf/conf" -e "smtpd_milters =" || return 1
		postconf -c "$pf/conf" -X milter_protocol milter_default_action || return 1
	else
		postconf -c "$pf/conf" -e "smtpd_milters = ${milter_pf[$v]}" \
			"milter_protocol = 6" "milter_default_action = tempfail" || return 1
	fi
	if [ "$check" = check ]; then
		printf '/^%s:/ WARN bench-check-header\n' "${milter_hdr[$v]}" >"$pf/conf/milter_header_checks"
		postconf -c "$pf/conf" -e "milter_header_checks = regexp:$pf/conf/milter_header_checks" || return 1
	else
		postconf -c "$pf/conf" -X milter_header_checks || return 1
	fi
	pf_start "$pf" || return 1
	[ "$(pf_queue_count "$pf")" -eq 0 ] || die "queue not empty after restart"
}

# discarded - print how many messages the discard transport took so far
discarded() {
	grep -c ' status=sent (bench)' "$pf/maillog" 2>/dev/null || true
}

# send_and_drain - run smtp-source for N messages, wait until discarded;
# sets t0, t_ingest, t_done (microseconds) and src_rc
send_and_drain() {
	local n=$1 target src_pid deadline
	target=$(($(discarded) + n))
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
	while [ "$(pf_queue_count "$pf")" -ne 0 ] || [ "$(discarded)" -lt "$target" ]; do
		if [ "$(now_us)" -ge "$deadline" ]; then
			t_done=
			return 1
		fi
		sleep 0.05
	done
	t_done=$(now_us)
}

# warm_up - WARMUP untimed messages through variant $1, each checked for its header
warm_up() {
	local v=$1 w0 w1
	set_variant "$v" check || die "cannot start Postfix for $v"
	w0=$(grep -c 'bench-check-header' "$pf/maillog" 2>/dev/null)
	send_and_drain "$WARMUP" || die "warm-up $v did not drain"
	[ "$src_rc" -eq 0 ] || die "warm-up $v: smtp-source failed: $(tail -n 5 "$top/source.log")"
	w1=$(grep -c 'bench-check-header' "$pf/maillog" 2>/dev/null)
	[ $((w1 - w0)) -eq "$WARMUP" ] ||
		die "warm-up $v: $((w1 - w0)) of $WARMUP messages got ${milter_hdr[$v]}; see $pf/maillog (KEEP_TMP=1)"
	printf 'warm-up:  %-8s %s messages in %ss, every one with %s (not counted)\n' "$v" "$WARMUP" \
		"$(secs "$t0" "$t_done")" "${milter_hdr[$v]}"
}

# run_one - one timed run of variant $1 in round $2; prints a line, records it
run_one() {
	local v=$1 round=$2 d0 d1 m0=0 m1=0 cpu0 cpu1 ml0=0 ml1=0 got e2e ing busy steal ms cpu_s lines=-
	set_variant "$v" || die "cannot start Postfix for variant $v"
	sync
	sleep 2
	d0=$(discarded)
	case $v in tern*) ml0=$(grep -c ' verdict=' "$top/$v/milter.log") ;; esac
	[ "$v" = postfix ] || m0=$(proc_cpu_ticks "${milter_pid[$v]}")
	cpu0=$(cpu_snapshot)
	if ! send_and_drain "$MESSAGES"; then
		die "run $round/$v: not drained after ${RUN_TIMEOUT}s" \
			"(discarded $(($(discarded) - d0)) of $MESSAGES, queue $(pf_queue_count "$pf"));" \
			"see $pf/maillog (KEEP_TMP=1 keeps it)"
	fi
	cpu1=$(cpu_snapshot)
	[ "$v" = postfix ] || m1=$(proc_cpu_ticks "${milter_pid[$v]}")
	d1=$(discarded)
	got=$((d1 - d0))
	[ "$src_rc" -eq 0 ] || die "run $round/$v: smtp-source exit status $src_rc:" \
		"$(tail -n 5 "$top/source.log")"
	[ "$got" -eq "$MESSAGES" ] || die "run $round/$v: $got of $MESSAGES messages discarded"
	case $v in
	tern*)
		sleep 0.5 # let the milter finish logging its last lines
		ml1=$(grep -c ' verdict=' "$top/$v/milter.log")
		lines=$((ml1 - ml0))
		[ "$lines" -eq "$MESSAGES" ] || die "run $round/$v: tern-milter logged $lines verdicts for $MESSAGES messages"
		;;
	esac
	e2e=$(rate "$MESSAGES" "$t0" "$t_done")
	ing=$(rate "$MESSAGES" "$t0" "$t_ingest")
	read -r busy steal <<<"$(cpu_pct "$cpu0" "$cpu1")"
	if [ "$v" = postfix ]; then
		cpu_s=- ms=-
	else
		cpu_s=$(awk -v t=$((m1 - m0)) -v hz="$clk_tck" 'BEGIN { printf "%.2f", t / hz }')
		ms=$(awk -v t=$((m1 - m0)) -v hz="$clk_tck" -v n="$MESSAGES" 'BEGIN { printf "%.3f", 1000 * t / hz / n }')
		cpu_ms[$v]+=" $ms"
	fi
	printf '%-5s %-10s %7s %9s %9s %9s %9s %7s %8s %9s %5s %5s\n' "$round" "$v" "$got" \
		"$(secs "$t0" "$t_ingest")" "$ing" "$(secs "$t0" "$t_done")" "$e2e" "$lines" \
		"$cpu_s" "$ms" "$busy%" "$steal%"
	rates[$v]+=" $e2e"
	ingests[$v]+=" $ing"
}

# setup - start the milters and the Postfix instance
setup() {
	ensure_tern_user || die "cannot create user tern"
	top=$(tap_tmpdir) || die "mktemp failed"
	smtp_port=$(free_port) || die "no free port"
	has_variant null && start_null null
	has_variant null-steps && start_null null-steps -s
	has_variant opendkim && start_opendkim
	has_variant tern && start_tern tern "$tern_bin"
	has_variant tern-b && start_tern tern-b "$tern_b_bin"

	pf=$top/pf
	pf_create "$pf" "$smtp_port" || die "pf_create failed"
	# Same tuning in every variant: enough smtpd processes, no smtpd
	# limits, deliveries to discard (so the queue, not a peer, is measured).
	postconf -c "$pf/conf" -e \
		"default_process_limit = 100" \
		"default_transport = discard:bench" \
		"relay_transport = discard:bench" \
		"qmgr_message_active_limit = 40000" \
		"smtpd_client_connection_count_limit = 0" \
		"smtpd_client_connection_rate_limit = 0" \
		"smtpd_client_message_rate_limit = 0" || die "postconf failed"
}

clk_tck=$(getconf CLK_TCK)
src_running=
tap_on_exit '[ -n "$src_running" ] && kill "$src_running"'
declare -A milter_pid milter_pf milter_hdr milter_desc rates ingests cpu_ms med_rate med_cpu

echo "== milter throughput benchmark: Postfix alone, null milter, OpenDKIM, tern-milter"
echo "command:  ${cmdline}  (MESSAGES=$MESSAGES SESSIONS=$SESSIONS SIZE=$SIZE ROUNDS=$ROUNDS WARMUP=$WARMUP VARIANTS=\"$VARIANTS\" MILTER_SOCKET=$MILTER_SOCKET BENCH_TMPDIR=$BENCH_TMPDIR)"
echo "load:     smtp-source -s $SESSIONS -l $SIZE -m $MESSAGES -f sender@example.org -t rcpt@example.com 127.0.0.1:PORT"
bench_facts
bench_tree
echo "postfix:  $(postconf -d mail_version), deliveries to discard:bench"

setup
echo "queue:    $pf/queue ($(df --output=fstype "$pf/queue" 2>/dev/null | tail -n 1))"
for v in "${variants[@]}"; do
	[ "$v" = postfix ] && continue
	printf 'milter:   %-8s pid %s, %s, %s\n' "$v" "${milter_pid[$v]}" "${milter_pf[$v]}" "${milter_desc[$v]}"
done
echo

if [ "$WARMUP" -gt 0 ]; then
	for v in "${variants[@]}"; do
		[ "$v" = postfix ] || warm_up "$v"
	done
	echo
fi

printf '%-5s %-10s %7s %9s %9s %9s %9s %7s %8s %9s %5s %5s\n' round variant msgs \
	ingest_s ingest/s e2e_s e2e/s m_lines cpu_s ms/msg busy steal
n=${#variants[@]}
for ((r = 1; r <= ROUNDS; r++)); do
	for ((i = 0; i < n; i++)); do
		run_one "${variants[(i + r - 1) % n]}" "$r"
	done
done
pf_stop "$pf"

echo
echo "== summary (medians over $ROUNDS run(s) per variant)"
base=
has_variant postfix && base=$(median ${rates[postfix]})
printf '%-10s %9s %9s %12s %10s\n' variant e2e/s ingest/s vs_postfix ms_cpu/msg
for v in "${variants[@]}"; do
	# shellcheck disable=SC2086 # word splitting wanted: the list of runs
	e=$(median ${rates[$v]})
	# shellcheck disable=SC2086
	i=$(median ${ingests[$v]})
	# shellcheck disable=SC2086
	c=$([ "$v" = postfix ] && echo - || median ${cpu_ms[$v]})
	printf '%-10s %9s %9s %12s %10s\n' "$v" "$e" "$i" "$([ -n "$base" ] && ratio "$e" "$base" || echo -)" "$c"
	med_rate[$v]=$e
	med_cpu[$v]=$c
done
for t in tern tern-b; do
	has_variant "$t" && has_variant null || continue
	awk -v t="$t" -v tr="${med_rate[$t]}" -v nr="${med_rate[null]}" -v tc="${med_cpu[$t]}" \
		-v nc="${med_cpu[null]}" 'BEGIN {
		r = tr / nr
		printf "%s/null: msgs/s %.3f (target >= 0.95: %s), CPU/msg %.3f ms vs %.3f ms (%.2fx; target <= 0.5 ms: %s)\n",
			t, r, (r >= 0.95 ? "met" : "NOT met"), tc, nc, tc / nc, (tc <= 0.5 ? "met" : "NOT met") }'
done
for t in tern tern-b; do
	has_variant "$t" && has_variant null-steps || continue
	awk -v t="$t" -v tr="${med_rate[$t]}" -v nr="${med_rate[null-steps]}" \
		-v tc="${med_cpu[$t]}" -v nc="${med_cpu[null-steps]}" 'BEGIN {
		printf "%s/null-steps: msgs/s %.3f, CPU/msg %.3f ms vs %.3f ms (%.2fx; reported)\n",
			t, tr / nr, tc, nc, tc / nc }'
done

# tern over null and null-steps in each round (the same round, so the same
# background load), then their median: steadier than the ratio of the
# medians when the machine's speed drifts between rounds
for t in tern tern-b; do
	for f in null null-steps; do
		has_variant "$t" && has_variant "$f" || continue
		q=$(round_ratios "${rates[$t]}" "${rates[$f]}")
		# shellcheck disable=SC2086 # word splitting wanted: the list of ratios
		echo "$t/$f per round: $q; median $(median $q)"
	done
done
