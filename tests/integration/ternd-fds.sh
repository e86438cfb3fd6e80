#!/bin/bash
# ternd-fds.sh - out of file descriptors. ternd runs with its limit at
# 1,024 (soft and hard) and max_inbound_sessions = 5000, far more than
# fits. A client holds 1,500 SMTP connections open. ternd keeps
# descriptors for the relay, the store and the control socket and
# shares the rest between its two listeners, so:
#   - exactly as many SMTP sessions as its log says fit get a 220, every
#     other connection a 421 4.3.2 at once (none left waiting);
#   - the refusals are logged once in the minute, with a count;
#   - meanwhile, while those are held, an LMTP client (the MTA) gets its
#     220 and delivers a message, and ternq (the control socket) answers;
#   - ternd -n under the same limit warns, in these words, that the
#     configuration cannot fit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for c in swaks python3; do
	command -v "$c" >/dev/null || tap_skip_all "$c not installed"
done

top=$(tap_tmpdir)
# ternd under a limit of 1,024 descriptors, soft and hard
cat >"$top/ternd-1024" <<WRAP
#!/bin/bash
ulimit -Sn 1024 && ulimit -Hn 1024 || exit 1
exec "$_ternd_bin" "\$@"
WRAP
chmod 0755 "$top/ternd-1024"
ternd_use_bin "$top/ternd-1024"
ternd_setup "$top/t" "max_inbound_sessions = 5000" "command_timeout = 5m" || exit 1

# --- ternd -n ---------------------------------------------------------------------
"$top/ternd-1024" -n -c "$TERND_CONF" >/dev/null 2>"$top/n.err"
tap_is "ternd -n: exit 0" "$?" 0
# 6 open at start (stdio, two listeners, the control socket), a reserve of
# 64 spare + 9 control + 9 metrics + 2 x 16 for the peer's connections
tap_is "ternd -n warns that the sessions cannot fit the limit" "$(grep max_inbound_sessions "$top/n.err")" \
	"warning: max_inbound_sessions (5000 on each of 2 listeners) and the peers' 16 connections need 20120 file descriptors with the reserve, more than the limit of 1024: beyond 226 sessions a listener answers 421 4.3.2 (raise the hard limit, e.g. LimitNOFILE= in the unit, or lower max_inbound_sessions)"

# --- the flood --------------------------------------------------------------------
fit=$(sed -n 's/.*: file descriptors: limit 1024, .* at most \([0-9]*\) sessions per listener$/\1/p' "$TERND_LOG")
tap_like "ternd logs its budget under the limit of 1024 ($fit sessions per listener)" "$fit" '^[0-9]+$'
# hold N - open N connections, read each one's first line (20 s at most),
# print "220=A 421=B none=C" to the ready file, hold them until stdin closes
mkfifo "$top/hold.in"
cat >"$top/hold.py" <<'PY'
import resource, select, socket, sys, time
port, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 100, n + 100))
socks, first = [], {}
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    socks.append(s)
poll, deadline = select.poll(), time.time() + 20
for s in socks:
    poll.register(s, select.POLLIN)
byfd = {s.fileno(): s for s in socks}
while len(first) < n and time.time() < deadline:
    for fd, ev in poll.poll(500):
        line = byfd[fd].recv(200)
        first[fd] = line[:3].decode("ascii", "replace")
        poll.unregister(fd)
counts = {"220": 0, "421": 0}
for code in first.values():
    counts[code] = counts.get(code, 0) + 1
with open(out + ".tmp", "w") as f:
    f.write("220=%d 421=%d none=%d\n" % (counts["220"], counts["421"], n - len(first)))
import os; os.rename(out + ".tmp", out)
sys.stdin.read()
PY
python3 "$top/hold.py" "$TERND_PORT" 1500 "$top/hold.out" <"$top/hold.in" &
hold_pid=$!
tap_bg_register "$hold_pid"
exec 7>"$top/hold.in"	# the holder keeps its connections while this is open
tap_check "the holder has a first line from every connection" wait_until 60 test -e "$top/hold.out"
tap_is "as many 220 as fit, 421 4.3.2 for the rest at once, none left waiting" \
	"$(cat "$top/hold.out")" "220=$fit 421=$((1500 - fit)) none=0"
# the greeting must come while the holder keeps every one of its
# connections (fd 7 is still open): from the reserve, not from a
# descriptor freed by someone leaving (before, none came until then)
t0=${EPOCHREALTIME/[.,]/}
timeout 10 python3 - "$TERND_LMTP" >"$top/lmtp.first" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print(s.recv(200).decode().split("\r\n")[0])
PY
t1=${EPOCHREALTIME/[.,]/}
tap_diag "the LMTP greeting came after $(( (t1 - t0) / 1000 )) ms"
tap_like "meanwhile an LMTP client gets its 220" \
	"$(cat "$top/lmtp.first")" '^220 ternd\.test LMTP tern$'
tap_is "... while the $fit SMTP sessions that fit are still open" \
	"$(ss -Htn state established "( sport = :$TERND_PORT )" | wc -l)" "$fit"
swaks --socket "$TERND_LMTP" --protocol LMTP --from a@example.org --to b@example.org \
	--timeout 10 >"$top/lmtp.swaks" 2>&1
tap_check "... and delivers a message" grep -q '^<-  250 2\.0\.0 <b@example\.org> Ok: queued as' "$top/lmtp.swaks"
tap_check "ternq answers over the control socket" ternq_ list
refused=": warning: inet:127\\.0\\.0\\.1:$TERND_PORT: refused connection from \\[127\\.0\\.0\\.1\\]: out of file descriptors for sessions \\($fit per listener, the rest kept for the relay and the store\\) \\(0 more refused since the last warning\\)$"
tap_is "the refusals: one warning in the minute" "$(nlog ": refused connection from .*: out of file descriptors")" 1
tap_is "... the first, with its count" "$(nlog "$refused")" 1
exec 7>&-
wait "$hold_pid"
ternd_stop
tap_is "ternd stops cleanly" "$?" 0
tap_done
