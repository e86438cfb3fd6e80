#!/bin/bash
# daemon-signals.sh - a reload or reopen signal sent while a daemon starts
# is taken once it has started; it never kills it (ternd(8), tern-milter(8),
# SIGNALS). STARTS times for each daemon (default 40): start it in the
# foreground, wait (a busy loop, no sleep) for its first socket to exist,
# send at once every signal that reloads or reopens (ternd: SIGHUP, SIGUSR1,
# SIGUSR2; tern-milter: SIGUSR1, SIGUSR2; its SIGHUP stops, as in every
# libmilter program), then wait for what they do (two reloads or one, and
# one reopen of log_file, logged by that pid) or for the process to end,
# and check that it runs, serves (ternd: the SMTP greeting; tern-milter: a
# whole message through milter_client.py) and stops with status 0.
# The first socket exists long before the daemon could take a signal: a
# daemon that blocks its signals only after opening it dies of the first
# one (status 129 or 138) in most rounds.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter
starts=${STARTS:-40}

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (the daemons drop privileges)"

top=$(tap_tmpdir)
chmod 0755 "$top"
log=$top/tern.log
install -m 0640 -o tern -g "$(id -gn tern)" /dev/null "$log" 2>/dev/null || {
	ensure_tern_user && install -m 0640 -o tern -g "$(id -gn tern)" /dev/null "$log"
} || exit 1

# alive PID - PID runs (a zombie does not); no fork, for the busy loops
alive() {
	local stat
	read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# logged PROG PID WHAT - how many lines PROG[PID] logged matching WHAT
logged() {
	grep -c "$1\\[$2\\]: $3" "$log"
}

# settled PROG PID RELOADS - PID ended, or it logged RELOADS reloads and a reopen
settled() {
	! alive "$2" || { [ "$(logged "$1" "$2" 'configuration reloaded from')" -ge "$3" ] &&
		[ "$(logged "$1" "$2" 'log_file .* reopened')" -ge 1 ]; }
}

# greets - ternd answers an SMTP connection with its 220 greeting
greets() {
	local line=
	exec 3<>"/dev/tcp/127.0.0.1/$TERND_PORT" || return 1
	read -r -t 10 line <&3
	printf 'QUIT\r\n' >&3
	exec 3<&-
	[[ $line == "220 "* ]]
}

# milter_serves - a whole message through the milter gets its final reply
milter_serves() {
	python3 "$here/../lib/milter_client.py" "unix:$msock" "$top/headers" 2>&1 | grep -q '^eom '
}

# round PROG PID RELOADS SERVES - after the signals: what is wrong with this
# start ("exited with status N", or what is missing); sends PID SIGTERM
round() {
	local prog=$1 pid=$2 reloads=$3 serves=$4 rc=0 bad= n
	wait_until 30 settled "$prog" "$pid" "$reloads"
	if ! alive "$pid"; then
		wait "$pid" || rc=$?
		echo "exited with status $rc"
		return
	fi
	n=$(logged "$prog" "$pid" 'configuration reloaded from')
	[ "$n" -eq "$reloads" ] || bad="$bad reloads=$n"
	n=$(logged "$prog" "$pid" 'log_file .* reopened')
	[ "$n" -eq 1 ] || bad="$bad reopens=$n"
	"$serves" || bad="$bad not-serving"
	kill -TERM "$pid"
	echo "${bad:-stopping} $pid"
}

# stopped - each "stopping PID" line of the input: PID's exit status is 0
# (the milter takes 5 s to stop, libmilter's poll: the rounds do not wait
# for it one by one)
stopped() {
	local line pid rc
	while read -r line; do
		pid=${line##* }
		if [ "${line% *}" = stopping ]; then
			rc=0
			wait "$pid" || rc=$?
			[ "$rc" -eq 0 ] && line=ok || line="stop-status=$rc"
		fi
		echo "$line"
	done
}

# tally NAME FILE - one test: every round of FILE ok; the others as diagnostics
tally() {
	local failed
	failed=$(grep -vc '^ok$' "$2")
	tap_diag "$1: $failed of $starts starts failed" "$(grep -v '^ok$' "$2" | sort | uniq -c)"
	tap_is "$1: $starts starts, signalled as soon as a socket exists: each runs, takes every signal, serves, stops with 0" \
		"$failed" 0
}

# --- ternd: SIGHUP, SIGUSR1 (reload), SIGUSR2 (reopen) -----------------------------------
ternd_setup "$top/t" "[global]" "log_file = $log" || exit 1
ternd_stop
for ((i = 1; i <= starts; i++)); do
	rm -f "$TERND_LMTP"
	"$_ternd_bin" -f -c "$TERND_CONF" >>"$TERND_LOG" 2>&1 &
	pid=$!
	tap_bg_register "$pid"
	until [ -S "$TERND_LMTP" ] || ! alive "$pid"; do :; done
	kill -HUP "$pid" && kill -USR1 "$pid" && kill -USR2 "$pid"
	round ternd "$pid" 2 greets >"$top/round"
	stopped <"$top/round"	# before the next one takes the pid file
done >"$top/ternd.rounds"
tally ternd "$top/ternd.rounds"

# --- tern-milter: SIGUSR1 (reload), SIGUSR2 (reopen) -----------------------------------
"$milter" -K "$top/trace.key" >/dev/null && chown tern "$top/trace.key"
mkdir -m 0750 "$top/msock" && chown tern "$top/msock"
printf '%s\n' "From: <a@example.org>" "Subject: signals" "Message-ID: <signals@example.org>" \
	>"$top/headers"
for ((i = 1; i <= starts; i++)); do
	# A socket of its own: the one before, stopping, removes its own.
	msock=$top/msock/$i.sock
	printf '%s\n' "[global]" "state_dir = $top/m" "trace_key_file = $top/trace.key" \
		"log_file = $log" "[milter]" "listen = unix:$msock" >"$top/milter.conf"
	"$milter" -f -c "$top/milter.conf" >>"$top/milter.out" 2>&1 &
	pid=$!
	tap_bg_register "$pid"
	until [ -S "$msock" ] || ! alive "$pid"; do :; done
	kill -USR1 "$pid" && kill -USR2 "$pid"
	round milter "$pid" 1 milter_serves
done >"$top/milter.started"
stopped <"$top/milter.started" >"$top/milter.rounds"
tally tern-milter "$top/milter.rounds"
tap_done
