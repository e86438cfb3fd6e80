#!/bin/bash
# root-paths.sh - no path operation as root in a directory the tern user
# can write (issue 14, item 1), as ternd(8) SECURITY says:
#   1. a racer running as tern renames a symbolic link over each socket
#      as it appears in RUN_DIR (ternd's LMTP and control sockets,
#      tern-milter's unix socket): across 50 starts of each daemon, a
#      root-owned 0600 canary file keeps its owner and mode;
#   2. a FIFO, a symbolic link or a hard link as ternd's pid file: start-up
#      fails within a second with a clear error;
#   3. a FIFO as log_file: the same.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
build=${top_builddir:-$here/../..}
milter=$build/src/milter/tern-milter
racer=$build/tests/lib/symlink_racer

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (the attack is on root's path operations)"
[ -x "$racer" ] || tap_skip_all "tests/lib/symlink_racer not built (make check builds it)"
ensure_tern_user || tap_skip_all "no tern user"

top=$(tap_tmpdir)
chmod 0755 "$top"
canary=$top/canary
echo secret >"$canary"
chmod 0600 "$canary"
mkdir -p "$top/run"
chown tern:tern "$top/run"
"$milter" -K "$top/trace.key" >/dev/null && chown tern "$top/trace.key"
mport=$(free_port)
cat >"$top/tern.conf" <<-CONF
	[global]
	state_dir = $top/state
	spool_dir = $top/spool
	run_dir = $top/run
	trace_key_file = $top/trace.key
	log_file = $top/tern.log
	[milter]
	listen = unix:$top/run/milter.sock
	[ternd]
	lmtp_listen = unix:$top/run/lmtp.sock
	smtp_listen = inet:127.0.0.1:$mport
	[peer relay]
	[routes]
	* = relay
CONF

setpriv --reuid=tern --regid=tern --init-groups "$racer" "$top/run" "$canary" >"$top/racer.out" 2>&1 &
rpid=$!
tap_bg_register $rpid
# the daemons start only once the racer watches RUN_DIR
wait_until 10 grep -qx watching "$top/racer.out" || tap_diag "the racer does not watch: $(cat "$top/racer.out")"

# clear_run - what a round left in RUN_DIR (the racer's links too)
clear_run() {
	find "$top/run" -mindepth 1 -delete
}

# one_start BIN UP - start BIN -f, wait until UP (a command) is true or
# it has exited, then kill it
one_start() {
	local bin=$1 up=$2 pid
	"$bin" -f -c "$top/tern.conf" >>"$top/daemon.out" 2>&1 &
	pid=$!
	wait_until 10 "$up" $pid
	kill -KILL $pid 2>/dev/null
	wait $pid 2>/dev/null
}
# _ternd_up PID - ternd logged "started", or died
_ternd_up() {
	! kill -0 "$1" 2>/dev/null || [ "$(grep -c 'ternd\[[0-9]*\]: started' "$top/tern.log" 2>/dev/null)" -ge "$round" ]
}
# _milter_up PID - tern-milter logged "starting on", or died
_milter_up() {
	! kill -0 "$1" 2>/dev/null || [ "$(grep -c 'milter\[[0-9]*\]: starting on' "$top/tern.log" 2>/dev/null)" -ge "$round" ]
}

canary_ok() {
	[ "$(stat -c '%U:%G %a' "$canary")" = "root:root 600" ]
}

for ((round = 1; round <= 50; round++)); do
	clear_run
	one_start "$_ternd_bin" _ternd_up
	canary_ok || break
done
tap_is "50 starts of ternd against the racer: the canary stays root:root 0600" \
	"$(stat -c '%U:%G %a' "$canary")" "root:root 600"
tap_is "... the racer did swap sockets (it ran)" "$(grep -c '^swapped ' "$top/racer.out" | awk '{print ($1 > 0)}')" 1
chown root:root "$canary"
chmod 0600 "$canary"

swaps=$(grep -c '^swapped milter.sock' "$top/racer.out")
for ((round = 1; round <= 50; round++)); do
	clear_run
	one_start "$milter" _milter_up
	canary_ok || break
done
tap_is "50 starts of tern-milter against the racer: the canary stays root:root 0600" \
	"$(stat -c '%U:%G %a' "$canary")" "root:root 600"
tap_is "... the racer did swap the milter's socket" \
	"$(( $(grep -c '^swapped milter.sock' "$top/racer.out") > swaps ))" 1
kill -TERM $rpid 2>/dev/null
wait $rpid 2>/dev/null
clear_run

# --- 2. the pid file: FIFO, symbolic link, hard link --------------------------------------
# timed_start - run ternd; print its exit status and how long it took (s)
timed_start() {
	local t0 t1 rc
	t0=$(date +%s%N)
	timeout 10 "$_ternd_bin" -f -c "$top/tern.conf" >"$top/start.out" 2>&1
	rc=$?
	t1=$(date +%s%N)
	echo "$rc $(( (t1 - t0) / 1000000000 ))"
}
setpriv --reuid=tern --regid=tern --init-groups mkfifo "$top/run/ternd.pid"
r=$(timed_start)
tap_like "a FIFO as pid file: ternd stops at once with an error (exit, seconds: $r)" "$r" '^1 0$'
tap_like "... saying why" "$(cat "$top/start.out")" "ternd\\.pid: not a regular file: refusing to use it"
rm -f "$top/run/ternd.pid"
setpriv --reuid=tern --regid=tern --init-groups ln -s "$canary" "$top/run/ternd.pid"
r=$(timed_start)
tap_like "a symbolic link as pid file: refused (exit, seconds: $r)" "$r" '^1 0$'
tap_like "... saying why" "$(cat "$top/start.out")" "ternd\\.pid: is a symbolic link: refusing to follow it"
rm -f "$top/run/ternd.pid"
echo 1 >"$top/run/victim" && chown tern:tern "$top/run/victim"
setpriv --reuid=tern --regid=tern --init-groups ln "$top/run/victim" "$top/run/ternd.pid"
r=$(timed_start)
tap_like "a hard link as pid file: refused (exit, seconds: $r)" "$r" '^1 0$'
tap_like "... saying why" "$(cat "$top/start.out")" "ternd\\.pid: has more than one name \\(a hard link\\): refusing to use it"
tap_is "... and the other name is untouched" "$(cat "$top/run/victim")" 1
clear_run

# --- 3. log_file as a FIFO ------------------------------------------------------------------
mkfifo "$top/fifo.log"
sed -i "s|^log_file = .*|log_file = $top/fifo.log|" "$top/tern.conf"
r=$(timed_start)
tap_like "a FIFO as log_file: ternd stops at once (exit, seconds: $r)" "$r" '^1 0$'
tap_like "... saying why" "$(cat "$top/start.out")" "fifo\\.log: not a regular file: refusing to use it"
tap_done
