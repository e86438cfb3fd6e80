#!/bin/bash
# faults.sh - copies per message when the relay peer fails every Nth
# message, with and without CHUNKING (issue 34).
#
# What it measures: how many extra copies of a message a peer takes when
# its connections fail, and how many of them ternd's log announced. One
# run (tests/lib/fault_copies.sh does it; its header has the detail):
# smtp-blast sends MESSAGES messages of SIZE octets into ternd over
# SESSIONS sessions, each with a Message-ID of its own, and records the
# ids ternd accepted, while ternd relays them to its peer over
# CONNECTIONS connections (tls = none, max_pipeline_depth PIPELINE_DEPTH
# or its default), until smtp-blast is done and ternd's queue is empty.
# With SEND=before, the messages are queued first (the peer without a
# host), then ternd restarts with the peer: every window starts full. The
# peer is bench/chunk-sink with a fault every Nth message it
# takes (counted over the whole run) and a ledger line per message taken:
#
#     reset250:N    the 250 written, then the connection reset (SO_LINGER 0)
#     takereset:N   the message taken, no reply, then the reset
#     kill250:N     the 250 written, then ternd killed (-9); a supervisor
#                   starts ternd again by its pid each time it died
#                   (at most MAX_RESTARTS times per run)
#
# With -r (SINK_FLAGS, the default) the sink still takes the complete
# messages it had read behind the faulted one, without answering them: a
# peer that goes on with the input it holds while its replies are lost (a
# firewall's reset; a server that flushes its replies once per pipelined
# batch and dies before the flush). Without -r it drops them untaken.
#
# Two peers per mode: "serial" (chunk-sink -x: PIPELINING without
# CHUNKING, one transaction at a time) and "window" (CHUNKING: many BDAT
# transactions in flight on a connection).
#
# Per run: faults (and kills) at the sink, ternd restarts, accepted ids,
# ledger lines, lost (accepted ids missing from the ledger), extra copies
# (ledger lines beyond the first of each id), messages duplicated, most
# copies of one message, unacked (ids taken that ternd never acknowledged:
# a try cut off by a kill, which smtp-blast sent again under another id;
# not counted as extra), announced (ternd's warnings with Postfix's
# "message may be sent more than once", one per transaction that may have
# been delivered), and the drain's seconds. The summary gives medians over
# ROUNDS, the window/serial ratios of extra copies and most copies, and
# issue 34's "Done when" targets.
#
# How to run (as root; needs a built ternd, ternq, bench/smtp-blast and
# bench/chunk-sink, in-tree or in build/; the binaries are copied first):
#
#     sudo bench/faults.sh                               # 6 runs, 1 round
#     sudo MODES=takereset:10 KINDS=window bench/faults.sh   # one cell
#     sudo MESSAGES=1000 SESSIONS=4 bench/faults.sh      # quick check
#
# Environment (defaults in brackets):
#     MESSAGES [4000]    messages per run     SIZE [2048]  octets each
#     SESSIONS [16]      smtp-blast sessions  CONNECTIONS [8] to the peer
#     ROUNDS [1]         rounds of every mode and kind
#     MODES [reset250:10 takereset:10 kill250:100]
#     KINDS [serial window]
#     PIPELINE_DEPTH []  ternd's max_pipeline_depth [its default]
#     SEND [during]      during: smtp-blast sends while ternd relays;
#                        before: all queued first, then relayed
#     RUN_TIMEOUT [600]  seconds before a drain is given up
#     MAX_RESTARTS [200] ternd restarts per run before it is given up
#     SINK_FLAGS [-r]    more chunk-sink options; "" for a sink that drops
#                        what it had read behind a faulted message
#     BENCH_TMPDIR [/var/tmp]  where ternd's queue and the ledgers live
#     TERND, TERNQ, SMTP_BLAST, CHUNK_SINK  binaries [in-tree, else build/]
#
# Loopback only; everything it starts is stopped by its pid at exit. Not a
# test: no TAP; exits non-zero if a run loses mail or does not drain.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_src=$(cd "$here/.." && pwd)
cmdline="$0${*:+ $*}"
# shellcheck disable=SC2034 # read by lib.sh's die
bench_name=faults
# shellcheck source=lib.sh
. "$here/lib.sh"

MESSAGES=${MESSAGES:-4000}
SIZE=${SIZE:-2048}
SESSIONS=${SESSIONS:-16}
CONNECTIONS=${CONNECTIONS:-8}
ROUNDS=${ROUNDS:-1}
MODES=${MODES:-reset250:10 takereset:10 kill250:100}
KINDS=${KINDS:-serial window}
PIPELINE_DEPTH=${PIPELINE_DEPTH:-}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
MAX_RESTARTS=${MAX_RESTARTS:-200}
BENCH_TMPDIR=${BENCH_TMPDIR:-/var/tmp}
SEND=${SEND:-during}
SINK_FLAGS=${SINK_FLAGS--r}

ternd_bin=${TERND:-$(built src/ternd/ternd)}
ternq_bin=${TERNQ:-$(built src/ternq/ternq)}
blast_bin=${SMTP_BLAST:-$(built bench/smtp-blast)}
chunk_bin=${CHUNK_SINK:-$(built bench/chunk-sink)}

[ "$(id -u)" -eq 0 ] || die "must run as root (ternd drops to user tern; the sink kills it)"
for b in "$ternd_bin" "$ternq_bin" "$blast_bin" "$chunk_bin"; do
	[ -x "$b" ] || die "$b not built (run make -j2 in $top_src or build/)"
done
require_uint MESSAGES SIZE SESSIONS CONNECTIONS ROUNDS RUN_TIMEOUT MAX_RESTARTS
[ "$MESSAGES" -gt 0 ] && [ "$SESSIONS" -gt 0 ] && [ "$CONNECTIONS" -gt 0 ] && [ "$ROUNDS" -gt 0 ] ||
	die "MESSAGES, SESSIONS, CONNECTIONS and ROUNDS must be > 0"
for m in $MODES; do [[ $m =~ ^(reset250|takereset|kill250):[1-9][0-9]*$ ]] || die "unknown mode $m"; done
case $SEND in during | before) ;; *) die "SEND must be during or before" ;; esac
for k in $KINDS; do case $k in serial | window) ;; *) die "unknown peer kind $k" ;; esac; done
[ -d "$BENCH_TMPDIR" ] && [ -w "$BENCH_TMPDIR" ] || die "BENCH_TMPDIR $BENCH_TMPDIR is not a writable directory"
export TMPDIR=$BENCH_TMPDIR

# tap.sh: tmp dirs, free_port, cleanup by PID at exit (also on Ctrl-C)
. "$top_src/tests/lib/tap.sh"

echo "== faults benchmark: copies per message with a failing relay peer, serial and window"
echo "command:  ${cmdline}  (MESSAGES=$MESSAGES SIZE=$SIZE SESSIONS=$SESSIONS CONNECTIONS=$CONNECTIONS ROUNDS=$ROUNDS MODES='$MODES' KINDS='$KINDS' PIPELINE_DEPTH=${PIPELINE_DEPTH:-default} SEND=$SEND SINK_FLAGS='$SINK_FLAGS' BENCH_TMPDIR=$BENCH_TMPDIR)"
bench_facts
bench_tree
echo "ternd:    $("$ternd_bin" -V 2>&1) ($ternd_bin, sha256 $(sha "$ternd_bin"))"
echo "tools:    smtp-blast sha256 $(sha "$blast_bin"), chunk-sink sha256 $(sha "$chunk_bin")"

ensure_tern_user || die "cannot create user tern"
top=$(tap_tmpdir) || die "mktemp failed"
bench_copy_tern "$top" "$ternd_bin" "$ternq_bin" "$blast_bin" "$chunk_bin"
# shellcheck source=../tests/lib/fault_copies.sh
. "$top_src/tests/lib/fault_copies.sh"
# shellcheck disable=SC2034 # read by tests/lib/fault_copies.sh
{
	FC_SINK=$top/bin/chunk-sink FC_BLAST=$top/bin/smtp-blast
	FC_MESSAGES=$MESSAGES FC_SESSIONS=$SESSIONS FC_CONNECTIONS=$CONNECTIONS FC_SIZE=$SIZE
	FC_DEPTH=$PIPELINE_DEPTH FC_TIMEOUT=$RUN_TIMEOUT FC_MAX_RESTARTS=$MAX_RESTARTS FC_SEND=$SEND FC_SINK_FLAGS=$SINK_FLAGS
}

declare -A extra most announced faults
failed=0
fmt='%-5s %-13s %-6s %6s %5s %8s %8s %6s %4s %5s %6s %4s %7s %9s %7s %s\n'
echo
# shellcheck disable=SC2059 # the format is ours
printf "$fmt" round mode peer faults kills restarts accepted taken lost extra duped most unacked announced secs run
for ((r = 1; r <= ROUNDS; r++)); do
	for mode in $MODES; do
		for kind in $KINDS; do
			dir=$top/run-$r-${mode%%:*}-$kind
			status=ok
			if ! fc_run "$dir" "$mode" "$kind"; then
				echo "run $r $mode/$kind failed: $FC_ERR" >&2
				failed=1 status="FAILED (not drained: lost = what was still queued)"
			fi
			# shellcheck disable=SC2059
			printf "$fmt" "$r" "$mode" "$kind" "$FC_FAULTS" "$FC_KILLS" "$FC_RESTARTS" "$FC_ACCEPTED" \
				"$FC_TAKEN" "$FC_LOST" "$FC_EXTRA" "$FC_DUPED" "$FC_MOST" "$FC_UNACKED" "$FC_ANNOUNCED" "$FC_SECS" "$status"
			[ "$FC_LOST" -eq 0 ] || failed=1
			key=$mode/$kind
			extra[$key]="${extra[$key]:-} $FC_EXTRA"
			most[$key]="${most[$key]:-} $FC_MOST"
			announced[$key]="${announced[$key]:-} $FC_ANNOUNCED"
			faults[$key]="${faults[$key]:-} $FC_FAULTS"
			[ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$dir"
		done
	done
done
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) at the end"

# verdict OK TEXT - print TEXT with met / NOT met
verdict() {
	if [ "$1" = 1 ]; then echo "met ($2)"; else echo "NOT met ($2)"; fi
}

# le A B - 1 if A <= B (numbers, decimals allowed), else 0
le() {
	awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 <= b + 0) ? 1 : 0 }'
}

# scaled X F - print int(X * F), "-" if X is
scaled() {
	[ "$1" = - ] && { echo -; return; }
	awk -v x="$1" -v f="$2" 'BEGIN { print int(x * f) }'
}

echo
echo "== summary (medians over $ROUNDS rounds; a FAILED run counts with what it had done): window/serial"
printf '%-13s %13s %13s %8s %9s %12s %9s\n' mode extra_serial extra_window ratio most_s/w announced_w faults_w
targets=()
for mode in $MODES; do
	# shellcheck disable=SC2086 # the stored lists are space-separated
	{
		es=$(median ${extra[$mode/serial]:-}) ew=$(median ${extra[$mode/window]:-})
		ms=$(median ${most[$mode/serial]:-}) mw=$(median ${most[$mode/window]:-})
		aw=$(median ${announced[$mode/window]:-}) fw=$(median ${faults[$mode/window]:-})
	}
	printf '%-13s %13s %13s %8s %9s %12s %9s\n' "$mode" "$es" "$ew" "$(ratio "$ew" "$es")" "$ms/$mw" "$aw" "$fw"
	[ "$ew" = - ] && continue
	# issue 34's "Done when", for the window run against the serial one
	case ${mode%%:*} in
	reset250) bound=$(scaled "$fw" 1) what="faults" ;;
	takereset) bound=$(scaled "$es" 1.5) what="1.5x serial" ;;
	kill250) bound=$(scaled "$es" 2) what="2x serial" ;;
	esac
	line="$mode: extra <= $what: "
	if [ "$bound" = - ]; then line+="n/a"; else line+=$(verdict "$(le "$ew" "$bound")" "$ew <= $bound"); fi
	cap=3
	[ "$ms" != - ] && [ "$(le "$ms" 3)" = 0 ] && cap=$ms
	line+="; most copies <= $cap: $(verdict "$(le "$mw" "$cap")" "$mw")"
	case ${mode%%:*} in reset250 | takereset)
		line+="; announced >= extra: $(verdict "$(le "$ew" "$aw")" "$aw >= $ew")"
		;;
	esac
	targets+=("$line")
done
echo
echo "== issue 34 targets (window against serial, medians)"
printf '%s\n' "${targets[@]}"
exit "$failed"
