#!/bin/bash
# ternd-privs.sh - privileges and secrets of ternd and tern-milter, as
# ternd(8) and tern.conf(5) document them:
#   1. ternd runs as the tern user with no capabilities; its LMTP socket is
#      0660 tern:tern, its control socket 0600 (no admin_group); the session
#      key, the database and the bodies 0600; state and spool 0700, run 0755;
#      nothing under state or spool is open to group or others
#   2. the keys live in sodium_malloc memory, which is locked (VmLck > 0)
#   3. a key_file that others can read stops ternd with a clear error;
#      a trace_key_file that others can read stops tern-milter likewise;
#      the milter's unix socket is 0660 tern:tern
#   4. started at the same moment, both daemons create a missing
#      state_dir and neither finds it owned by root (a race seen in CI)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v swaks >/dev/null || tap_skip_all "swaks not installed"

top=$(tap_tmpdir)
down=$(free_port)	# a peer with tls = may: ternd opens (creates) its session key
export TERND_PEERS="[peer relay]"$'\n'"host = [127.0.0.1]"$'\n'"port = $down"$'\n'"tls = may"$'\n'"min_idle = 0"$'\n'"[routes]"$'\n'"* = relay"
ternd_setup "$top/t" "large_message_threshold = 1KB" || exit 1
unset TERND_PEERS
t=$TERND_DIR
swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com >/dev/null 2>&1
swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com \
	--body "$(head -c 4000 /dev/zero | tr '\0' x | fold -w 70)" >/dev/null 2>&1
ternd_sync
tap_is "two messages queued (one small, one with a file of its own)" "$(ternq_ list --json | wc -l)" 2

# --- 1. users and modes ---------------------------------------------------------------

uid=$(id -u tern)
tap_is "ternd runs as tern (real, effective, saved, fs uid)" \
	"$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$TERND_PID/status")" "$uid $uid $uid $uid"
tap_is "ternd has no capabilities left" \
	"$(awk '/^Cap(Prm|Eff):/ { printf "%s ", $2 }' "/proc/$TERND_PID/status")" "0000000000000000 0000000000000000 "
mode() { stat -c '%A %U:%G' "$1"; }
tap_is "LMTP socket: 0660 tern:tern (lmtp_socket_group empty: the group of user)" \
	"$(mode "$TERND_LMTP")" "srw-rw---- tern:tern"
tap_is "control socket: 0600 tern:tern (no admin_group)" "$(mode "$t/run/control.sock")" "srw------- tern:tern"
tap_is "session key: 0600 tern:tern" "$(mode "$t/state/session.key")" "-rw------- tern:tern"
tap_is "data.mdb and lock.mdb: 0600 tern:tern" \
	"$(stat -c '%A %U:%G' "$t/state/queue/data.mdb" "$t/state/queue/lock.mdb" | sort -u)" "-rw------- tern:tern"
tap_is "spool segment and own file: 0600 tern:tern" \
	"$(find "$t/spool/seg" "$t/spool/own" -type f -exec stat -c '%A %U:%G' {} + | sort | uniq -c | sed 's/^ *//')" "2 -rw------- tern:tern"
tap_is "state and spool directories: 0700; run directory 0755" \
	"$(stat -c '%n %a' "$t/state" "$t/spool" "$t/run" "$t/state/queue" "$t/spool/seg" "$t/spool/own" | sed "s|$t/||")" \
	"$(printf '%s\n' 'state 700' 'spool 700' 'run 755' 'state/queue 700' 'spool/seg 700' 'spool/own 700')"
tap_is "nothing under state or spool is open to group or others" \
	"$(find "$t/state" "$t/spool" -perm /g=rwx,o=rwx | wc -l)" 0
tap_is "in run: only the pid file and the directory are readable by others, nothing writable" \
	"$(find "$t/run" -perm /o=rwx -printf '%P %m\n' | sort)" "$(printf '%s\n' ' 755' 'ternd.pid 644')"

# --- 2. keys in locked (sodium_malloc) memory --------------------------------------------

# AddressSanitizer turns mlock(2) into a no-op: nothing to see there.
asan=0
grep -q __asan_init "$_ternd_bin" && asan=1
if [ "$asan" = 1 ]; then
	tap_skip "ternd holds locked memory (the session key, sodium_malloc)" "ASan makes mlock a no-op"
else
	tap_like "ternd holds locked memory (the session key, sodium_malloc)" \
		"$(awk '/^VmLck:/ { print $2 }' "/proc/$TERND_PID/status")" '^[1-9][0-9]*$'
fi

# --- 3. keys readable by others are refused ------------------------------------------------

ternd_stop
chmod 0644 "$t/state/session.key"
"$_ternd_bin" -f -c "$TERND_CONF" >"$top/badkey.log" 2>&1
rc=$?
tap_like "ternd refuses a session key others can read (exit $rc)" "$rc" '^[1-9][0-9]*$'
tap_like "... with a clear error" "$(cat "$top/badkey.log")" \
	"$t/state/session\\.key: key is accessible by others \\(mode 0644\\); chmod 600 it"
chmod 0600 "$t/state/session.key"
tap_check "with 0600 again, ternd starts" ternd_start
tap_is "... and its queue is intact" "$(ternq_ list --json | wc -l)" 2
ternd_stop

"$milter" -K "$top/trace.key" >/dev/null && chown tern "$top/trace.key"
mkdir -p "$top/mrun" && chown tern:tern "$top/mrun"
printf '[global]\ntrace_key_file = %s\n[milter]\nlisten = unix:%s\n' \
	"$top/trace.key" "$top/mrun/milter.sock" >"$top/milter.conf"
chmod 0604 "$top/trace.key"
timeout 30 "$milter" -f -c "$top/milter.conf" >"$top/milter-bad.log" 2>&1
rc=$?
tap_like "tern-milter refuses a trace key others can read (exit $rc)" "$rc" '^[1-9][0-9]?$'
tap_like "... with a clear error" "$(cat "$top/milter-bad.log")" \
	"$top/trace\\.key: key is accessible by others \\(mode 0604\\); chmod 600 it"
chmod 0600 "$top/trace.key"
"$milter" -f -c "$top/milter.conf" >"$top/milter.log" 2>&1 &
mpid=$!
tap_bg_register $mpid
wait_for_file "$top/mrun/milter.sock"
tap_is "tern-milter's socket: 0660 tern:tern" "$(mode "$top/mrun/milter.sock")" "srw-rw---- tern:tern"
if [ "$asan" = 1 ]; then
	tap_skip "tern-milter holds locked memory (the trace key, sodium_malloc)" "ASan makes mlock a no-op"
else
	tap_like "tern-milter holds locked memory (the trace key, sodium_malloc)" \
		"$(awk '/^VmLck:/ { print $2 }' "/proc/$mpid/status")" '^[1-9][0-9]*$'
fi
kill -TERM $mpid
wait $mpid
tap_is "tern-milter stops cleanly" "$?" 0

# --- 4. both daemons create a missing state_dir at the same moment ----------------------
# Each creates it for the tern user. A directory the other has made but not
# yet given away must never be seen root-owned (which both refuse).

# _both_up DIR PORT - ternd's LMTP socket is there and tern-milter listens
_both_up() {
	[ -S "$1/run/lmtp.sock" ] && listening "$2"
}
up=0
for ((i = 1; i <= 20; i++)); do
	d=$top/race$i
	mkdir "$d" && chmod 0755 "$d"
	mport=$(free_port)
	printf '%s\n' "[global]" "state_dir = $d/state" "spool_dir = $d/spool" "run_dir = $d/run" \
		"trace_key_file = $top/trace.key" "[milter]" "listen = inet:$mport@127.0.0.1" \
		"[ternd]" "lmtp_listen = unix:$d/run/lmtp.sock" "smtp_listen =" "[peer relay]" \
		"[routes]" "* = relay" >"$d/tern.conf"
	"$milter" -f -c "$d/tern.conf" >"$d/milter.log" 2>&1 &
	m=$!
	"$_ternd_bin" -f -c "$d/tern.conf" >"$d/ternd.log" 2>&1 &
	t=$!
	tap_bg_register $m
	tap_bg_register $t
	wait_until 15 _both_up "$d" "$mport" && kill -0 $m 2>/dev/null && kill -0 $t 2>/dev/null &&
		up=$((up + 1))
	kill -KILL $m $t 2>/dev/null	# (tern-milter takes seconds to stop: not tested here)
	wait $m $t 2>/dev/null
done
tap_is "started together on a fresh state_dir, both run (20 rounds)" "$up" 20
tap_is "... and neither refused the directory" \
	"$(cat "$top"/race*/*.log | grep -c 'not by the tern user')" 0
tap_done
