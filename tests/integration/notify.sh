#!/bin/bash
# notify.sh - the service manager's readiness protocol (sd_notify), as
# systemd's Type=notify units use it: each daemon started with
# NOTIFY_SOCKET pointing at a datagram socket the test reads
# (tests/lib/notify_socket.py).
#
#   ternd: READY=1 once, and only when its SMTP listener accepts;
#   STATUS=queue: 0 messages, then 1 message after one is queued (within
#   2 s); SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1; a reload
#   of a broken file: RELOADING=1, a "reload failed" STATUS, READY=1;
#   SIGTERM: STOPPING=1. Every notification from ternd's own pid (what
#   NotifyAccess=main accepts).
#
#   tern-milter: READY=1 when its socket accepts, STATUS= with the socket;
#   SIGUSR1: RELOADING=1 then READY=1; SIGTERM: STOPPING=1; same pid.
#
#   Without NOTIFY_SOCKET (every other test) nothing is sent.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
build=${top_builddir:-$here/../..}
milter=$build/src/milter/tern-milter

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
grep -q '^#define HAVE_LIBSYSTEMD 1' "$build/config.h" 2>/dev/null ||
	tap_skip_all "built without libsystemd: no notifications"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"
top=$(tap_tmpdir)
chmod 0755 "$top"

# listen NAME [PORT] - a notification socket $top/NAME.sock writing
# $top/NAME.out; waits until it is bound
listen() {
	python3 "$here/../lib/notify_socket.py" "$top/$1.sock" "$top/$1.out" ${2:+"$2"} \
		>"$top/$1.bound" 2>"$top/$1.err" &
	tap_bg_register $!
	wait_until 10 grep -q bound "$top/$1.bound"
}

# count NAME PATTERN - lines of $top/NAME.out matching PATTERN (grep -E)
count() {
	grep -cE "$2" "$top/$1.out" 2>/dev/null
}

# last NAME PATTERN N - the last N lines matching PATTERN, joined by
# spaces, each cut at 80 characters
last() {
	grep -E "$2" "$top/$1.out" | tail -n "$3" | cut -c1-80 | tr '\n' ' '
}

# _atleast NAME N PATTERN - at least N such lines
_atleast() {
	[ "$(count "$1" "$3")" -ge "$2" ]
}

# --- ternd ----------------------------------------------------------------------

port=$(free_port)
listen ternd "$port"
# TERND_PORT is chosen by ternd_setup (free_port): make it ours, which
# the listener knows, then put free_port back
eval "tap_$(declare -f free_port)"
free_port() { echo "$port"; }
export NOTIFY_SOCKET=$top/ternd.sock
ternd_setup "$top/t" || exit 1
unset NOTIFY_SOCKET
eval "$(declare -f tap_free_port | sed '1s/^tap_free_port/free_port/')"
tap_is "ternd listens on the port the listener knows" "$TERND_PORT" "$port"
tap_check "READY=1 arrives" wait_until 10 _atleast ternd 1 '^pid=[0-9]+ READY=1$'
tap_is "the SMTP listener accepted when READY=1 arrived" "$(grep '^connect=' "$top/ternd.out")" "connect=ok"
tap_check "STATUS=queue: 0 messages" wait_until 5 _atleast ternd 1 '^pid=[0-9]+ STATUS=queue: 0 messages$'
tap_is "STATUS came before READY" "$(grep -m2 -oE 'STATUS=queue: 0|READY=1' "$top/ternd.out" | tr '\n' ' ')" "STATUS=queue: 0 READY=1 "

python3 - "$TERND_PORT" <<-'EOF2'
	import smtplib, sys
	s = smtplib.SMTP("127.0.0.1", int(sys.argv[1]), "client.test", timeout=30)
	s.sendmail("app@example.org", ["r@example.com"], b"Subject: m\r\n\r\nbody\r\n")
	s.quit()
EOF2
tap_is "one message queued (peer without host)" "$?" 0
tap_check "STATUS=queue: 1 message within 2 s" wait_until 2 _atleast ternd 1 '^pid=[0-9]+ STATUS=queue: 1 message$'
sleep 2
tap_is "the status is sent once per change, not every second" "$(count ternd 'STATUS=queue: 1 message$')" 1

kill -HUP "$TERND_PID"
tap_check "SIGHUP: READY=1 again" wait_until 10 _atleast ternd 2 'READY=1$'
tap_like "SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1" \
	"$(last ternd 'RELOADING|READY' 2)" \
	'^pid=[0-9]+ RELOADING=1\|MONOTONIC_USEC=[0-9]+ pid=[0-9]+ READY=1 $'

cp "$TERND_CONF" "$top/good.conf"
printf '%s\n' "[ternd]" "no_such_parameter = 1" >>"$TERND_CONF"
kill -HUP "$TERND_PID"
tap_check "a failed reload: READY=1 again" wait_until 10 _atleast ternd 3 'READY=1$'
tap_like "a failed reload: RELOADING=1, the failure as STATUS, READY=1" \
	"$(last ternd 'RELOADING|READY|STATUS=reload' 3)" \
	'RELOADING=1\|MONOTONIC_USEC=[0-9]+ pid=[0-9]+ STATUS=reload failed, running the previous configuration: .* pid=[0-9]+ READY=1 $'
cp "$top/good.conf" "$TERND_CONF"
kill -HUP "$TERND_PID"
tap_check "a good reload after it: the queue status again" \
	wait_until 10 _atleast ternd 2 'STATUS=queue: 1 message$'

ternd_stop
tap_is "ternd stops cleanly" "$?" 0
tap_check "SIGTERM: STOPPING=1" _atleast ternd 1 'STOPPING=1$'
tap_is "every notification from ternd's pid" "$(grep -c '^pid=' "$top/ternd.out")" \
	"$(grep -c "^pid=$TERND_PID " "$top/ternd.out")"
tap_is "READY=1 four times: the start and three reloads" "$(count ternd 'READY=1$')" 4

# --- tern-milter ------------------------------------------------------------------

mport=$(free_port)
listen milter "$mport"
printf '%s\n' "[milter]" "listen = inet:$mport@127.0.0.1" "trace = no" >"$top/milter.conf"
NOTIFY_SOCKET=$top/milter.sock "$milter" -f -c "$top/milter.conf" >"$top/milter.log" 2>&1 &
mpid=$!
tap_bg_register $mpid
tap_check "tern-milter: READY=1 arrives" wait_until 10 _atleast milter 1 'READY=1$'
tap_is "tern-milter: its socket accepted when READY=1 arrived" "$(grep '^connect=' "$top/milter.out")" "connect=ok"
tap_is "tern-milter: STATUS names the socket" "$(count milter "^pid=[0-9]+ STATUS=listening on inet:$mport@127.0.0.1\$")" 1
kill -USR1 $mpid
tap_check "tern-milter SIGUSR1: READY=1 again" wait_until 10 _atleast milter 2 'READY=1$'
tap_like "tern-milter SIGUSR1: RELOADING=1, then READY=1" \
	"$(last milter 'RELOADING|READY' 2)" \
	'^pid=[0-9]+ RELOADING=1\|MONOTONIC_USEC=[0-9]+ pid=[0-9]+ READY=1 $'
kill -TERM $mpid
wait $mpid
tap_is "tern-milter stops cleanly" "$?" 0
tap_check "tern-milter SIGTERM: STOPPING=1" _atleast milter 1 'STOPPING=1$'
tap_is "every notification from tern-milter's pid" "$(grep -c '^pid=' "$top/milter.out")" \
	"$(grep -c "^pid=$mpid " "$top/milter.out")"
tap_is "no sanitizer reports" "$(grep -c 'Sanitizer\|runtime error:' "$top/milter.log" "$TERND_LOG" | awk -F: '{ s += $2 } END { print s }')" 0

tap_done
