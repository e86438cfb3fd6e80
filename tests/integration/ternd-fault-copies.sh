#!/bin/bash
# ternd-fault-copies.sh - a relay peer that resets the connection on every
# 10th message it takes (issue 34): nothing acknowledged is lost, and
# every extra copy the peer takes was announced in ternd's log.
#
# tests/lib/fault_copies.sh runs it: 400 messages of 2 KB queued through
# smtp-blast (4 sessions, each with its own Message-ID), then relayed over
# 4 connections to bench/chunk-sink offering CHUNKING (ternd keeps a
# window of BDAT transactions in flight, default max_pipeline_depth),
# which writes one ledger line per message it takes. Two shapes:
#   reset250:10   the 10th message's 250 is written, then a TCP reset
#   takereset:10  the 10th message is taken, no reply, then a TCP reset
# and in both, -r: the messages the sink had read behind it are taken too,
# their replies lost with the connection (a peer that flushes its replies
# once per pipelined batch and dies before the flush, or a firewall's
# reset). Each of those was written whole and never answered: a possible
# duplicate, which ternd must say.
# For each, whatever the timing:
#   - the sink faulted at least 40 times (every 10th of >= 400 taken);
#   - 0 lost: every Message-ID ternd accepted is in the ledger;
#   - every extra copy announced: ternd's log lines with "may be
#     delivered twice" or "may be sent more than once" (one per
#     transaction) >= ledger lines beyond the first copy of each id.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/fault_copies.sh"
FC_SINK=${top_builddir:-$here/../..}/bench/chunk-sink
FC_BLAST=${top_builddir:-$here/../..}/bench/smtp-blast
# shellcheck disable=SC2034 # read by tests/lib/fault_copies.sh
FC_MESSAGES=400 FC_SESSIONS=4 FC_CONNECTIONS=4 FC_SIZE=2048 FC_TIMEOUT=25 FC_SINK_FLAGS=-r

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
[ -x "$FC_SINK" ] || tap_skip_all "bench/chunk-sink not built"
[ -x "$FC_BLAST" ] || tap_skip_all "bench/smtp-blast not built"
top=$(tap_tmpdir)

for mode in reset250:10 takereset:10; do
	if ! fc_run "$top/${mode%%:*}" "$mode" window; then
		tap_fail "$mode: the run completes" "$FC_ERR" "$(tail -n 5 "$TERND_LOG")"
		continue
	fi
	tap_ok "$mode: $FC_MESSAGES accepted, relayed in ${FC_SECS}s through $FC_FAULTS faults"
	tap_check "$mode: the sink faulted on every 10th message taken ($FC_FAULTS of $FC_TAKEN)" \
		test "$FC_FAULTS" -ge $((FC_MESSAGES / 10)) -a "$FC_FAULTS" -eq $((FC_TAKEN / 10))
	tap_is "$mode: no accepted message lost" "$FC_LOST" 0
	extra="$FC_EXTRA extra copies of $FC_DUPED messages, at most $FC_MOST of one"
	tap_check "$mode: every extra copy announced ($FC_ANNOUNCED announced, $extra)" \
		test "$FC_ANNOUNCED" -ge "$FC_EXTRA"
done
tap_done
