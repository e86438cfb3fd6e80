#!/bin/bash
# logging.sh - where ternd and tern-milter log in the foreground (-f), as
# ternd(8) and tern-milter(8) document it:
#   1. by default each line goes to syslog and to stderr (and log_file)
#   2. when $JOURNAL_STREAM names stderr (systemd's journal, which also
#      receives syslog), lines go to syslog and log_file only: each line
#      reaches the journal once
#   3. a JOURNAL_STREAM that names another file changes nothing
#   4. a fatal error still goes to stderr when it is the journal (a second
#      instance finds the first running), and so does an error before
#      logging starts (a bad configuration file)
# log_file shows what was logged; no syslog daemon is needed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
ensure_tern_user || tap_skip_all "cannot create the tern user"
top=$(tap_tmpdir)
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$top/trace.key" && chmod 0600 "$top/trace.key"

# conf DIR - a configuration for both daemons below DIR
conf() {
	mkdir -p "$1" && chmod 0755 "$1"
	printf '%s\n' "[global]" "state_dir = $1/state" "spool_dir = $1/spool" "run_dir = $1/run" \
		"log_file = $1/log" "trace_key_file = $top/trace.key" \
		"[milter]" "listen = inet:$(free_port)@127.0.0.1" \
		"[ternd]" "lmtp_listen = unix:$1/run/lmtp.sock" "smtp_listen =" \
		"[peer relay]" "[routes]" "* = relay" >"$1/tern.conf"
}

# starts DIR PATTERN - how many start lines DIR/log has
starts() {
	local n
	n=$(grep -c "$2" "$1/log" 2>/dev/null)
	echo "${n:-0}"
}

# _started DIR PATTERN N - DIR/log has more than N start lines
_started() {
	[ "$(starts "$1" "$2")" -gt "$3" ]
}

# run PROGRAM DIR JOURNAL - run PROGRAM -f with stderr to DIR/stderr and
# JOURNAL_STREAM set to JOURNAL (empty: unset; "self": DIR/stderr's
# DEV:INODE) until its start line is in log_file, then stop it; prints
# how many start lines stderr got, or "nostart". With a command as the
# fourth argument, runs it while the daemon is up.
run() {
	local prog=$1 dir=$2 journal=$3 pid pattern=": started: " before
	[ "$prog" = "$milter" ] && pattern=": starting on "
	before=$(starts "$dir" "$pattern")
	: >"$dir/stderr"
	[ -n "$journal" ] || journal=none
	[ "$journal" = self ] && journal=$(stat -c %d:%i "$dir/stderr")
	(	# the daemon's environment only
		unset JOURNAL_STREAM
		[ "$journal" = none ] || export JOURNAL_STREAM="$journal"
		exec "$prog" -f -c "$dir/tern.conf" 2>>"$dir/stderr"
	) &
	pid=$!
	tap_bg_register $pid
	if ! wait_until 15 _started "$dir" "$pattern" "$before"; then
		sed "s/^/# /" "$dir/stderr" >&2
		echo nostart
	else
		[ -z "${4:-}" ] || "$4"
		grep -c "$pattern" "$dir/stderr"
	fi
	kill -TERM $pid 2>/dev/null
	wait $pid 2>/dev/null
}

# second - start another instance on the same configuration, its stderr
# the journal by JOURNAL_STREAM, while the first runs: it must stop with a
# fatal error (within 10 s), which must reach its stderr
second() {
	local rc=0
	: >"$d/second"
	JOURNAL_STREAM=$(stat -c %d:%i "$d/second") timeout 10 "$bin" -f -c "$d/tern.conf" \
		2>>"$d/second" >/dev/null </dev/null || rc=$?
	echo "$rc" >"$d/second.rc"
}

for prog in ternd milter; do
	bin=$_ternd_bin
	[ $prog = milter ] && bin=$milter
	d=$top/$prog
	conf "$d"
	tap_is "$prog: without JOURNAL_STREAM the start line goes to stderr" "$(run "$bin" "$d" "")" 1
	tap_is "$prog: with JOURNAL_STREAM naming stderr, not to stderr" "$(run "$bin" "$d" self)" 0
	tap_is "$prog: ... but to log_file, once per start" \
		"$(grep -cE ": (started:|starting on) " "$d/log")" 2
	tap_is "$prog: a JOURNAL_STREAM naming another file changes nothing" \
		"$(run "$bin" "$d" "$(stat -c %d:%i "$top/trace.key")")" 1
	run "$bin" "$d" "" second >/dev/null
	tap_like "$prog: a second instance stops with a fatal error on stderr, the journal" \
		"$(cat "$d/second.rc") $(grep -c ': fatal: ' "$d/second")" "^[1-9][0-9]* 1$"
	# A configuration error comes before logging starts: stderr, always.
	sed -i '1a no_such_parameter = 1' "$d/tern.conf"	# in [global]
	: >"$d/err"
	rc=0
	JOURNAL_STREAM=$(stat -c %d:%i "$d/err") timeout 10 "$bin" -f -c "$d/tern.conf" \
		2>>"$d/err" >/dev/null </dev/null || rc=$?
	tap_is "$prog: a configuration error exits with status 2" "$rc" 2
	tap_like "$prog: ... and goes to stderr, the journal" "$(cat "$d/err")" "no_such_parameter"
done
tap_done
