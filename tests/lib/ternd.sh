# tests/lib/ternd.sh - start the built ternd for a test, on loopback.
#
#     . tests/lib/tap.sh; . tests/lib/ternd.sh
#     ternd_setup DIR [tern.conf lines for [ternd]...]   # config, start, wait
#     TERND_PEERS=$'[peer a]\nhost = ...\n[routes]\n* = a' ternd_setup DIR ...
#     ternq_ list --json                                  # the built ternq
#     ternd_restart / ternd_kill9 / ternd_stop / ternd_stop_checked (tests exit 0)
#     wait_until 10 ternd_holds N                         # N messages queued
#
# Sets TERND_DIR, TERND_PORT (SMTP), TERND_LMTP (unix socket path),
# TERND_CONF, TERND_PID, TERND_LOG. State, spool and run directories live
# under DIR; the daemon drops privileges to the tern user.
#
# The configuration ends with "[peer relay]" (no host: mail stays queued)
# and "[routes] * = relay", unless TERND_PEERS is set and not empty: then
# its text (the [peer NAME] sections and the [routes] section, lines
# separated by newlines) is written there instead.
#
# TERND_DISK, when set, holds the state and spool directories instead of
# DIR (the power-cut test puts them on its simulated disk).
#
# TERND_BIN and TERNQ_BIN, when set before sourcing, name the programs to
# run (the install test runs the installed ones); default: the build's.
# ternd_use_bin PATH makes later starts run PATH (a benchmark comparing
# two builds).
#
# TERND_PRELOAD, when set, is put in ternd's LD_PRELOAD (before the test's
# own): tests/fault/slowsync.so makes its commits slow, for the races of
# the tests (tests/RELIABILITY.md).

_ternd_bin=${TERND_BIN:-${top_builddir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}/src/ternd/ternd}
_ternq_bin=${TERNQ_BIN:-${top_builddir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}/src/ternq/ternq}

# ternd_setup - write a configuration under DIR and start ternd
ternd_setup() {
	TERND_DIR=$1
	shift
	mkdir -p "$TERND_DIR" && chmod 0755 "$TERND_DIR" || return 1
	ensure_tern_user || return 1
	TERND_PORT=$(free_port)
	TERND_LMTP=$TERND_DIR/run/lmtp.sock
	TERND_CONF=$TERND_DIR/tern.conf
	TERND_LOG=$TERND_DIR/ternd.log
	{
		printf '%s\n' "[global]" "hostname = ternd.test" "state_dir = ${TERND_DISK:-$TERND_DIR}/state" \
			"spool_dir = ${TERND_DISK:-$TERND_DIR}/spool" "run_dir = $TERND_DIR/run" "[ternd]" \
			"lmtp_listen = unix:$TERND_LMTP" "smtp_listen = inet:127.0.0.1:$TERND_PORT"
		printf '%s\n' "$@"
		if [ -n "${TERND_PEERS:-}" ]; then
			printf '%s\n' "$TERND_PEERS"
		else
			printf '%s\n' "[peer relay]" "[routes]" "* = relay"
		fi
	} >"$TERND_CONF"
	ternd_start
}

# ternd_use_bin PATH - run PATH from the next ternd_start on
ternd_use_bin() {
	_ternd_bin=$1
}

# ternd_spawn - start ternd with the current configuration, without
# waiting for it (a supervisor that polls the state itself)
ternd_spawn() {
	local preload=${LD_PRELOAD:-}

	[ -n "${TERND_PRELOAD:-}" ] && preload=$TERND_PRELOAD${preload:+:$preload}
	LD_PRELOAD=$preload "$_ternd_bin" -f -c "$TERND_CONF" >>"$TERND_LOG" 2>&1 &
	TERND_PID=$!
	tap_bg_register "$TERND_PID"
}

# ternd_start - start ternd with the current configuration, wait for it
ternd_start() {
	local starts
	starts=$(grep -c ": started: " "$TERND_LOG" 2>/dev/null)
	starts=${starts:-0}
	ternd_spawn
	# The port accepts as soon as it is bound; ternd is ready when it says so.
	if ! wait_until 10 _ternd_started "$starts"; then
		echo "# ternd did not start:" >&2
		sed 's/^/# /' "$TERND_LOG" >&2
		return 1
	fi
}

# _ternd_started N - the log has more than N "started:" lines
_ternd_started() {
	local n
	n=$(grep -c ": started: " "$TERND_LOG" 2>/dev/null)
	[ "${n:-0}" -gt "$1" ]
}

# ternd_stop - SIGTERM and wait; returns ternd's exit status
ternd_stop() {
	local rc=0
	kill -TERM "$TERND_PID" 2>/dev/null
	wait "$TERND_PID" || rc=$?
	return $rc
}

# ternd_kill9 - kill -9, as a crash would
ternd_kill9() {
	kill -KILL "$TERND_PID" 2>/dev/null
	wait "$TERND_PID" 2>/dev/null
	return 0
}

# ternd_restart - stop (cleanly) and start again
ternd_restart() {
	ternd_stop
	ternd_start
}

# ternq_ - the built ternq with the test configuration
ternq_() {
	"$_ternq_bin" -c "$TERND_CONF" "$@"
}

# ternd_sync - return once the queue database holds every message ternd
# has acknowledged so far. ternd answers 250 after the spool log's flush
# and records the message in LMDB a few milliseconds later; a queue
# operation (here a hold of an id no message has) goes through the
# committer behind those records and is answered after their commit, so
# its answer is a barrier. Call it between a 250 and a ternq query.
ternd_sync() {
	ternq_ hold 0000000000000 >/dev/null 2>&1
	return 0
}

# ternd_queued - print the number of messages in ternd's queue
ternd_queued() {
	ternq_ stats 2>/dev/null | awk '$1 == "TOTAL" { print $2; f = 1 } END { if (!f) print -1 }'
}

# ternd_holds N - ternd's queue holds N messages (the queue database is
# written just after the 250s, off the reply path: poll it with wait_until)
ternd_holds() {
	[ "$(ternd_queued)" -eq "$1" ]
}

# ternd_drained - the queue is empty
ternd_drained() {
	[ "$(ternq_ list --json | wc -l)" -eq 0 ]
}

# ternd_relay_outcome ACKED DUMPS OUT - compare the queue ids a client
# recorded as acknowledged (file ACKED) with those of the messages an
# smtp-sink dumped to DUMPS (ternd's Received: names them). Writes
# OUT.acked, OUT.delivered (sorted, unique), OUT.all (every delivery) and
# OUT.lost; sets ACKED,
# DELIVERED, LOST (counts) and DUPS (deliveries beyond the first).
ternd_relay_outcome() {
	sort -u "$1" | grep '^[0-9A-Z]\{13\}$' >"$3.acked"
	find "$2" -type f -exec grep -ho 'by ternd\.test (tern) with ESMTP id [0-9A-Z]\{13\}' {} + |
		awk '{ print $NF }' | sort >"$3.all"
	sort -u "$3.all" >"$3.delivered"
	comm -23 "$3.acked" "$3.delivered" >"$3.lost"
	ACKED=$(wc -l <"$3.acked")
	DELIVERED=$(wc -l <"$3.delivered")
	LOST=$(wc -l <"$3.lost")
	DUPS=$(($(wc -l <"$3.all") - DELIVERED))
}

# ternd_sanitizer_clean - no sanitizer report in the log
ternd_sanitizer_clean() {
	! grep -q 'Sanitizer\|runtime error:' "$TERND_LOG"
}

# ternd_stop_checked - stop ternd, and test that it exits 0 and that its
# log has no sanitizer report
ternd_stop_checked() {
	local rc=0
	ternd_stop || rc=$?
	tap_is "ternd stops cleanly" "$rc" 0
	tap_check "no sanitizer reports" ternd_sanitizer_clean
}
