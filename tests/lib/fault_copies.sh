# shellcheck shell=bash disable=SC2034 # FC_* and TERND_PEERS: read by the caller, tests/lib/ternd.sh
# tests/lib/fault_copies.sh - ternd relaying to a peer that fails every
# Nth message (bench/chunk-sink -f), and the copies the peer took counted
# per Message-ID. Shared by tests/integration/ternd-fault-copies.sh and
# bench/faults.sh.
#
#     . tests/lib/tap.sh; . tests/lib/ternd.sh; . tests/lib/fault_copies.sh
#     FC_SINK=.../bench/chunk-sink FC_BLAST=.../bench/smtp-blast
#     FC_MESSAGES=400 FC_SESSIONS=4 FC_CONNECTIONS=4 FC_SIZE=2048
#     fc_run DIR reset250:10 window || echo "$FC_ERR"
#     echo "$FC_FAULTS $FC_LOST $FC_EXTRA $FC_DUPED $FC_MOST $FC_ANNOUNCED"
#
# One run (fc_run DIR MODE KIND; KIND "window": the sink offers CHUNKING,
# "serial": chunk-sink -x, DATA only):
#   1. chunk-sink -f MODE -i DIR/ledger $FC_SINK_FLAGS (e.g. -r) on a free
#      port; for kill250 it kills the pid in ternd's RUN_DIR/ternd.pid;
#   2. ternd below DIR/ternd relaying to it (tls = none, max_connections =
#      FC_CONNECTIONS, max_pipeline_depth FC_DEPTH if set, else its
#      default; min_backoff 1s, so that deferred possible duplicates come
#      back soon);
#   3. smtp-blast sends FC_MESSAGES messages of FC_SIZE octets over
#      FC_SESSIONS sessions, each with a Message-ID of its own, and
#      records the ids ternd accepted (-m DIR/ids). FC_SEND=during (the
#      default): while ternd relays; FC_SEND=before: while the peer has no
#      host (mail stays queued), then ternd is stopped, given the sink and
#      started, so that every window starts full;
#   4. until smtp-blast has ended, ternd runs and its queue is empty; a
#      ternd that died (kill250) is started again, by its pid, at most
#      FC_MAX_RESTARTS times, all within FC_TIMEOUT seconds;
#   5. ternd and the sink stopped by their pids, then the counts.
# Sets FC_ACCEPTED (ids ternd acknowledged), FC_TAKEN (ledger lines),
# FC_FAULTS and FC_KILLS (the sink's), FC_RESTARTS, FC_LOST (accepted ids
# not in the ledger), FC_EXTRA (ledger lines beyond the first of each
# id), FC_DUPED (ids taken more than once), FC_MOST (most copies of one
# id), FC_UNACKED (ids taken that ternd never acknowledged to smtp-blast:
# a try whose reply a kill cut off, sent again under another id),
# FC_ANNOUNCED (ternd's warnings "... -- message may be sent more than
# once", one per transaction that may have been delivered; the deferral
# lines that say "may be delivered twice" are not counted, so that no
# transaction counts twice), FC_SECS (from the first relay on); on
# failure returns 1 with FC_ERR. ternd's log stays in DIR/ternd/ternd.log.

FC_MESSAGES=${FC_MESSAGES:-400}
FC_SESSIONS=${FC_SESSIONS:-4}
FC_CONNECTIONS=${FC_CONNECTIONS:-4}
FC_SIZE=${FC_SIZE:-2048}
FC_DEPTH=${FC_DEPTH:-}
FC_TIMEOUT=${FC_TIMEOUT:-300}
FC_MAX_RESTARTS=${FC_MAX_RESTARTS:-200}
FC_SEND=${FC_SEND:-during}
FC_SINK_FLAGS=${FC_SINK_FLAGS:-}

# fc_alive PID - PID is a process that has not exited (a zombie has)
fc_alive() {
	local st
	st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# fc_field NAME - counter NAME from the sink's status file
fc_field() {
	sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$_fc_dir/sink.status" 2>/dev/null | grep . || echo 0
}

# fc_peer - the [peer relay] and [routes] sections for the sink
fc_peer() {
	printf '%s\n' "[peer relay]" "host = [127.0.0.1]" "port = $_fc_port" "tls = none" \
		"max_connections = $FC_CONNECTIONS" "min_idle = 0" \
		${FC_DEPTH:+"max_pipeline_depth = $FC_DEPTH"} "[routes]" "* = relay"
}

# fc_drain BLAST_PID - wait until smtp-blast has ended and ternd runs
# with an empty queue, starting ternd again when it died (bounded); 1
# with FC_ERR otherwise
fc_drain() {
	local deadline=$((SECONDS + FC_TIMEOUT))
	FC_RESTARTS=0
	until ! fc_alive "$1" && fc_alive "$TERND_PID" && ternd_holds 0; do
		if ! fc_alive "$TERND_PID"; then
			wait "$TERND_PID" 2>/dev/null
			if [ "$FC_RESTARTS" -ge "$FC_MAX_RESTARTS" ]; then
				FC_ERR="ternd died $((FC_RESTARTS + 1)) times (FC_MAX_RESTARTS=$FC_MAX_RESTARTS)"
				return 1
			fi
			FC_RESTARTS=$((FC_RESTARTS + 1))
			ternd_spawn
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			FC_ERR="not drained after ${FC_TIMEOUT}s: $(ternd_queued) queued, $(fc_field messages) taken"
			return 1
		fi
		sleep 0.1
	done
}

# fc_count - the figures from the ids, the ledger and ternd's log
fc_count() {
	local d=$_fc_dir
	sort -u "$d/ids" >"$d/ids.sorted"
	sort "$d/ledger" | uniq -c | sort -rn >"$d/copies"
	FC_ACCEPTED=$(wc -l <"$d/ids.sorted")
	FC_TAKEN=$(wc -l <"$d/ledger")
	FC_LOST=$(awk '{ print $2 }' "$d/copies" | sort | comm -23 "$d/ids.sorted" - | wc -l)
	FC_EXTRA=$((FC_TAKEN - $(wc -l <"$d/copies")))
	FC_DUPED=$(awk '$1 > 1' "$d/copies" | wc -l)
	FC_UNACKED=$(awk '{ print $2 }' "$d/copies" | sort | comm -13 "$d/ids.sorted" - | wc -l)
	FC_MOST=$(awk 'NR == 1 { print $1 } END { if (NR == 0) print 0 }' "$d/copies")
	FC_ANNOUNCED=$(grep -c 'message may be sent more than once' "$TERND_LOG")
	FC_FAULTS=$(fc_field faults)
	FC_KILLS=$(fc_field kills)
}

# fc_blast DIR - smtp-blast into ternd in the background; sets _fc_blast
fc_blast() {
	"$FC_BLAST" -c "$FC_SESSIONS" -n "$FC_MESSAGES" -s "$FC_SIZE" -m "$1/ids" \
		"127.0.0.1:$TERND_PORT" >"$1/blast.out" 2>&1 &
	_fc_blast=$!
	tap_bg_register "$_fc_blast"
}

# fc_run DIR MODE KIND - one run (see above)
fc_run() {
	local mode=$2 sink_pid t0 rc=0
	local -a opts=(-q -i "$1/ledger" -o "$1/sink.status" -f "$mode") flags
	read -r -a flags <<<"$FC_SINK_FLAGS"
	opts+=("${flags[@]}")
	_fc_dir=$1
	FC_ERR='' FC_RESTARTS=0
	mkdir -p "$1" && chmod 0755 "$1" && : >"$1/ledger" && : >"$1/ids" || { FC_ERR="cannot make $1"; return 1; }
	[ "$3" = serial ] && opts+=(-x)
	[ "${mode%%:*}" = kill250 ] && opts+=(-p "$1/ternd/run/ternd.pid")
	_fc_port=$(free_port) || { FC_ERR="no free port"; return 1; }
	"$FC_SINK" "${opts[@]}" "127.0.0.1:$_fc_port" 2>"$1/sink.err" &
	sink_pid=$!
	tap_bg_register "$sink_pid"
	wait_for_port "$_fc_port" || { FC_ERR="chunk-sink did not start: $(cat "$1/sink.err")"; return 1; }

	TERND_PEERS=
	[ "$FC_SEND" = during ] && TERND_PEERS=$(fc_peer)
	ternd_setup "$1/ternd" "min_backoff = 1s" "max_backoff = 2s" || { FC_ERR="ternd did not start"; return 1; }
	t0=$EPOCHREALTIME
	fc_blast "$1"
	if [ "$FC_SEND" = before ]; then
		wait "$_fc_blast"
		if ! wait_until 30 ternd_holds "$(grep -c . "$1/ids")"; then
			FC_ERR="ternd holds $(ternd_queued) after the fill: $(cat "$1/blast.out")"
		elif ! ternd_stop; then
			FC_ERR="ternd exit status $? after the fill"
		else
			sed -i '/^\[peer relay\]$/,$d' "$TERND_CONF"
			fc_peer >>"$TERND_CONF"
			t0=$EPOCHREALTIME
			ternd_start || FC_ERR="ternd did not start with its peer"
		fi
	fi
	# bash reports each killed ternd on stderr when it reaps it: not here
	[ -z "$FC_ERR" ] && fc_drain "$_fc_blast" 2>>"$1/reaped.log"
	FC_SECS=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	if [ -z "$FC_ERR" ] && ! grep -q " accepted=$FC_MESSAGES failed=0 " "$1/blast.out"; then
		FC_ERR="smtp-blast: $(cat "$1/blast.out")"
	fi
	[ -n "$FC_ERR" ] && rc=1
	if fc_alive "$TERND_PID"; then
		ternd_stop || { rc=1; FC_ERR="${FC_ERR:+$FC_ERR; }ternd exit status $? at stop"; }
	fi
	kill -TERM "$sink_pid" "$_fc_blast" 2>/dev/null
	wait "$sink_pid" "$_fc_blast" 2>/dev/null
	fc_count
	return $rc
}
