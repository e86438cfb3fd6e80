#!/bin/bash
# log-reopen.sh - SIGUSR2 makes ternd and tern-milter open log_file again
# by its name (ternd(8), tern-milter(8), SIGNALS), as
# contrib/logrotate/tern expects:
#   1. log_file in a directory only root may write (as /var/log): the
#      file the daemon made as root at its start is the tern user's, so
#      a SIGUSR2 with no rotation reopens it; moved away, a new one made
#      for tern, SIGUSR2: later lines go to the new file, none to the old
#   2. moved away with no new file: the daemon cannot make one there, says
#      so in the old file, and goes on writing to it
#   3. contrib/logrotate/tern, run by logrotate: both daemons reopen the
#      new file, signalled through their pid files (another program
#      named ternd is not); a clean stop leaves run_dir empty
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (the daemons drop privileges)"
command -v swaks >/dev/null || tap_skip_all "swaks not installed"

top=$(tap_tmpdir)
chmod 0755 "$top"
mkdir -m 0755 "$top/log"	# root's, like /var/log
log=$top/log/tern.log
ternd_setup "$top/t" "[global]" "log_file = $log" || exit 1

send() {
	swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to "$1" >/dev/null 2>&1
}
# rotate - what logrotate's "create 0640 tern adm" does
rotate() {
	mv "$log" "$log.1"
	install -m 0640 -o tern -g "$(id -gn tern)" /dev/null "$log"
}

# --- 1. ternd ----------------------------------------------------------------------
send one@example.com
tap_like "ternd writes log_file" "$(grep -c 'from=<a@example.org>' "$log")" '^[1-9]'
tap_is "the log_file ternd made as root is tern's, mode 0640" "$(stat -c '%U %a' "$log")" "tern 640"
kill -USR2 "$TERND_PID"
wait_until 5 grep -q 'log_file .* reopened\|cannot reopen' "$log"
tap_like "SIGUSR2 right after a start as root: ternd reopens it" "$(cat "$log")" \
	"ternd\\[$TERND_PID\\]: log_file $log reopened"
rotate
kill -USR2 "$TERND_PID"
wait_until 5 grep -q 'log_file .* reopened' "$log"
tap_like "SIGUSR2: ternd says so in the new file" "$(cat "$log")" "ternd\\[$TERND_PID\\]: log_file $log reopened"
send two@example.com
wait_until 5 grep -q 'nrcpt=1' "$log"
tap_is "a later message is logged in the new file" "$(grep -c 'from=<a@example.org>, size=' "$log")" 1
tap_is "... and not in the old one" "$(grep -c 'from=<a@example.org>, size=' "$log.1")" 1
tap_is "ternd is still running" "$(kill -0 "$TERND_PID" 2>/dev/null && echo yes)" yes

# --- 2. no new file: the old one stays in use -------------------------------------------
mv "$log" "$log.2"
kill -USR2 "$TERND_PID"
wait_until 5 grep -q 'cannot reopen' "$log.2"
tap_like "no new file, and tern may not make one: a warning, in the file still open" "$(cat "$log.2")" \
	"cannot reopen log_file $log: Permission denied; still writing to the old file"
tap_is "... no file was made by root" "$(test -e "$log" && echo made)" ""
send three@example.com
wait_until 5 sh -c "[ \$(grep -c 'size=' '$log.2') -ge 2 ]"
tap_is "... and lines still reach the old file" "$(grep -c 'from=<a@example.org>, size=' "$log.2")" 2
ternd_stop

# --- tern-milter ------------------------------------------------------------------
"$milter" -K "$top/trace.key" >/dev/null && chown tern "$top/trace.key"
mport=$(free_port)
printf '%s\n' "[global]" "state_dir = $top/m" "trace_key_file = $top/trace.key" "log_file = $log" \
	"[milter]" "listen = inet:$mport@127.0.0.1" >"$top/milter.conf"
"$milter" -f -c "$top/milter.conf" >"$top/milter.out" 2>&1 &
mpid=$!
tap_bg_register $mpid
tap_check "tern-milter listens" wait_for_port "$mport"
tap_is "the log_file tern-milter made as root is tern's" "$(stat -c '%U %a' "$log")" "tern 640"
kill -USR2 "$mpid"
wait_until 5 grep -q 'log_file .* reopened\|cannot reopen' "$log"
tap_like "SIGUSR2 right after a start as root: tern-milter reopens it" "$(cat "$log")" \
	"milter\\[$mpid\\]: log_file $log reopened"
rotate
kill -USR2 "$mpid"
wait_until 5 grep -q 'log_file .* reopened' "$log"
tap_like "SIGUSR2: tern-milter reopens log_file" "$(cat "$log")" "milter\\[$mpid\\]: log_file $log reopened"
tap_is "tern-milter is still running" "$(kill -0 "$mpid" 2>/dev/null && echo yes)" yes
kill -TERM "$mpid"
wait "$mpid"

# --- 3. the shipped logrotate file, run by logrotate ---------------------------------
# Both daemons with one run_dir, and a program of another owner named
# ternd: logrotate signals the pids of the daemons' pid files, not every
# process called ternd; a clean stop then leaves run_dir empty.
if command -v logrotate >/dev/null; then
	run=$TERND_DIR/run
	rm -f "$log" "$log".*
	sed -e "s|^/var/log/tern.log|$log|" -e "s|/run/tern/|$run/|g" \
		"$top_srcdir/contrib/logrotate/tern" >"$top/logrotate.conf"
	cp /bin/sleep "$top/ternd"
	"$top/ternd" 600 &
	decoy=$!
	tap_bg_register $decoy
	ternd_start || exit 1
	printf '%s\n' "[global]" "state_dir = $top/m" "run_dir = $run" "trace_key_file = $top/trace.key" \
		"log_file = $log" "[milter]" "listen = unix:$run/milter.sock" >"$top/milter.conf"
	"$milter" -f -c "$top/milter.conf" >"$top/milter.out" 2>&1 &
	mpid=$!
	tap_bg_register $mpid
	tap_check "tern-milter writes its pid file" wait_until 5 grep -qx "$mpid" "$run/tern-milter.pid"
	tap_is "ternd's pid file holds its pid" "$(cat "$run/ternd.pid")" "$TERND_PID"
	tap_check "logrotate runs contrib/logrotate/tern" \
		logrotate -f -s "$top/logrotate.state" "$top/logrotate.conf"
	wait_until 5 sh -c "[ \$(grep -c 'log_file .* reopened' '$log' 2>/dev/null) -ge 2 ]"
	tap_like "ternd reopened the new file" "$(cat "$log" 2>/dev/null)" "ternd\\[$TERND_PID\\]: log_file $log reopened"
	tap_like "tern-milter reopened the new file" "$(cat "$log" 2>/dev/null)" "milter\\[$mpid\\]: log_file $log reopened"
	tap_is "the old file is $log.1, tern's" "$(stat -c %U "$log.1")" tern
	tap_is "the other program named ternd was not signalled" "$(kill -0 $decoy 2>/dev/null && echo alive)" alive
	kill $decoy
	ternd_stop
	kill -TERM "$mpid"
	wait "$mpid"
	tap_is "a clean stop of both leaves run_dir empty (sockets, pid files)" "$(ls -A "$run")" ""
else
	tap_skip "logrotate runs contrib/logrotate/tern" "logrotate not installed"
fi
tap_done
