#!/bin/bash
# daemon-fds.sh - the descriptors of ternd and tern-milter, as ternd(8)
# and tern-milter(8) document them:
#   1. a descriptor the starting shell left open (fd 7, on a file it holds
#      an flock(2) on) is closed by the daemon at start: the daemon has no
#      descriptor on that file, and another process takes the lock at once
#      (a milter started from a shell holding a lock kept it for 15 minutes)
#   2. every descriptor the daemon holds above 2 is close-on-exec
#      (O_CLOEXEC in /proc/PID/fdinfo), with everything it opens in use:
#      listeners, an inbound session, a relay connection, the metrics
#      endpoint, the queue, the spool, the milter's journal
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (the daemons drop privileges)"
for cmd in flock swaks smtp-sink python3 ss; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done

top=$(tap_tmpdir)
lock=$top/lockfile

# fds_on PID FILE - the daemon's descriptors that point at FILE
fds_on() {
	local fd
	for fd in /proc/"$1"/fd/*; do
		[ "$(readlink "$fd")" = "$2" ] && echo "${fd##*/}"
	done
}

# no_cloexec PID - "fd -> target" for each descriptor above 2 without O_CLOEXEC
no_cloexec() {
	local f fd flags
	for f in /proc/"$1"/fdinfo/*; do
		fd=${f##*/}
		[ "$fd" -gt 2 ] || continue
		flags=$(awk '/^flags:/ { print $2 }' "$f" 2>/dev/null) || continue
		[ -n "$flags" ] || continue	# closed meanwhile
		if (((8#$flags & 8#2000000) == 0)); then
			echo "$fd -> $(readlink "/proc/$1/fd/$fd")"
		fi
	done
}

# lock_free - another process takes the flock on $lock at once
lock_free() {
	flock -n -E 99 "$lock" true
}

# with_lock CMD... - run CMD with fd 7 open on $lock and locked (flock), as
# from a shell that holds a lock; fd 7 is closed again afterwards
with_lock() {
	local rc=0
	exec 7>"$lock"
	flock 7
	"$@" || rc=$?
	exec 7>&-
	return $rc
}

# accepted PID PORT... - PID holds an accepted connection on each of its
# ports PORT (one still in the listen queue belongs to no process)
accepted() {
	local pid=$1 port
	shift
	for port in "$@"; do
		ss -Htnp state established "( sport = :$port )" | grep -q "pid=$pid," || return 1
	done
}

# check_fds NAME PID - the checks of 1. and 2. on a running daemon
check_fds() {
	tap_is "$1 holds no descriptor on the starting shell's lock file" "$(fds_on "$2" "$lock" | tr '\n' ' ')" ""
	tap_check "another process takes that lock at once" lock_free
	tap_is "every descriptor of $1 above 2 is close-on-exec" "$(no_cloexec "$2" | tr '\n' ';')" ""
	tap_like "... and there are some ($1 is up and in use)" "$(ls /proc/"$2"/fdinfo | wc -l)" '^([6-9]|[1-9][0-9]+)$'
}

# --- ternd -------------------------------------------------------------------
sink_port=$(free_port)
smtp-sink -u nobody "127.0.0.1:$sink_port" 64 >"$top/sink.out" 2>&1 &
tap_bg_register $!
wait_for_port "$sink_port" || tap_diag "smtp-sink did not start"
metrics_port=$(free_port)
export TERND_PEERS="[peer relay]"$'\n'"host = [127.0.0.1]"$'\n'"port = $sink_port"$'\n'"tls = none"$'\n'"min_idle = 1"$'\n'"[routes]"$'\n'"* = relay"
with_lock ternd_setup "$top/t" "metrics_listen = 127.0.0.1:$metrics_port" || exit 1
unset TERND_PEERS

# queue_empty - nothing left in ternd's queue
queue_empty() {
	[ "$(ternq_ list --json | wc -l)" -eq 0 ]
}

swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com >/dev/null 2>&1
ternd_sync
wait_until 10 queue_empty
tap_check "a message went through ternd to the relay peer" queue_empty
# an inbound session and a metrics connection held open while the
# descriptors are read
exec 8<>"/dev/tcp/127.0.0.1/$TERND_PORT"
read -r -t 5 greeting <&8
tap_like "an SMTP session to ternd is open" "${greeting:-}" '^220 '
exec 9<>"/dev/tcp/127.0.0.1/$metrics_port"
tap_check "ternd has accepted the metrics connection" wait_until 10 accepted "$TERND_PID" "$metrics_port"
check_fds ternd "$TERND_PID"
exec 8>&- 9>&-
rc=0
ternd_stop || rc=$?
tap_is "ternd stops cleanly" "$rc" 0

# --- tern-milter -------------------------------------------------------------

# _milter_bg NAME - start tern-milter on $top/NAME.conf in the background; sets mpid
_milter_bg() {
	"$milter" -f -c "$top/$1.conf" >"$top/$1.log" 2>&1 &
	mpid=$!
}

# milter_start NAME - _milter_bg from a shell holding the lock, and wait
# until it has started
milter_start() {
	with_lock _milter_bg "$1"
	tap_bg_register "$mpid"
	wait_until 10 grep -qs ': starting on ' "$top/$1.log"
}

# milter_stop - SIGTERM, and test that it exits 0
milter_stop() {
	local rc=0
	kill -TERM "$mpid"
	wait "$mpid" || rc=$?
	tap_is "tern-milter stops cleanly" "$rc" 0
}

"$milter" -K "$top/trace.key" >/dev/null && chown tern "$top/trace.key"
mkdir -p "$top/m/state" && chown tern:tern "$top/m/state" && chmod 0750 "$top/m/state"
mport=$(free_port)
mmetrics=$(free_port)
printf '%s\n' "[global]" "state_dir = $top/m/state" "trace_key_file = $top/trace.key" \
	"[milter]" "listen = inet:$mport@127.0.0.1" "metrics_listen = 127.0.0.1:$mmetrics" >"$top/milter.conf"
milter_start milter
tap_check "tern-milter listens" wait_for_port "$mport"
tap_check "tern-milter serves metrics" wait_for_port "$mmetrics"
# an MTA connection (libmilter's) and a metrics connection held open
exec 8<>"/dev/tcp/127.0.0.1/$mport" 9<>"/dev/tcp/127.0.0.1/$mmetrics"
tap_check "tern-milter has accepted both" wait_until 10 accepted "$mpid" "$mport" "$mmetrics"
check_fds tern-milter "$mpid"
tap_is "tern-milter holds the MTA connection" \
	"$(ss -Htn state established "( sport = :$mport )" | wc -l)" 1
exec 8>&- 9>&-
milter_stop

# A unix listener is made by libmilter too, another way; as the tern
# user, in a directory of its own.
mkdir -p "$top/m" && chown tern:tern "$top/m"
printf '%s\n' "[global]" "state_dir = $top/m/state" "trace_key_file = $top/trace.key" \
	"[milter]" "listen = unix:$top/m/milter.sock" >"$top/milter-unix.conf"
milter_start milter-unix
tap_check "tern-milter listens on a unix socket" test -S "$top/m/milter.sock"
check_fds "tern-milter (unix socket)" "$mpid"
milter_stop
tap_done
