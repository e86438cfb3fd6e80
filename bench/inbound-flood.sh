#!/bin/bash
# inbound-flood.sh - ternd's memory under a flood of idle connections,
# and after it (issue 36: memory bounded by configuration, given back
# when the load ends).
#
# What it measures: one ternd (SMTP on 127.0.0.1, no LMTP listener, so
# that the SMTP one has every descriptor sessions may have; max_inbound_
# sessions = CONNS + 100; its file limit at NOFILE, which must hold 2 per
# session and the reserve, see ternd(8)) is flooded by one client
# from 127.0.0.1 that opens CONNS connections, reads each greeting, sends
# EHLO on each and reads the reply (so every session has run a command),
# holds them HOLD seconds and closes them all. RSS (VmRSS and RssAnon from
# /proc/PID/status) is read
#   - idle, SETTLE seconds after the start (after one session, so that
#     the loops' arenas exist);
#   - with all CONNS sessions open (and EHLO answered);
#   - AFTER seconds after they closed;
# and the summary gives the growth per open session (target <= 32 KB)
# and the RSS after against the idle one (target: within 25%).
# Throughout, a probe connects from 127.0.0.2 every PROBE_MS ms and times
# its 220 greeting (target: every one within 1 s); the summary gives the
# count, the worst and how many took over 1 s.
#
# How to run (as root; python3; a built tree, in-tree or in build/):
#
#     sudo bench/inbound-flood.sh
#     sudo CONNS=2000 AFTER=10 bench/inbound-flood.sh     # quick check
#
# Environment (defaults in brackets):
#     CONNS [10000]  connections held      HOLD [10]   seconds held open
#     AFTER [60]     seconds after closing  SETTLE [3]  seconds before idle RSS
#     NOFILE [ulimit -Hn] ternd's and the flood's file limit  PROBE_MS [250]
#     TERND          binary [in-tree, else build/]
# Not a test: no TAP; exits non-zero if ternd or the flood fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top_src=$(cd "$here/.." && pwd)
bench_name=inbound-flood
. "$here/lib.sh"

CONNS=${CONNS:-10000}
HOLD=${HOLD:-10}
AFTER=${AFTER:-60}
SETTLE=${SETTLE:-3}
NOFILE=${NOFILE:-$(ulimit -Hn)}
PROBE_MS=${PROBE_MS:-250}
require_uint CONNS HOLD AFTER SETTLE NOFILE PROBE_MS
ternd_bin=${TERND:-$(built src/ternd/ternd)}
[ "$(id -u)" -eq 0 ] || die "must run as root (ternd drops to user tern)"
command -v python3 >/dev/null || die "python3 not installed"
[ -x "$ternd_bin" ] || die "$ternd_bin not built (run make -j2 in $top_src or build/)"

# tap.sh: tmp dirs, free_port and cleanup by PID at exit (also on Ctrl-C)
. "$top_src/tests/lib/tap.sh"
. "$top_src/tests/lib/ternd.sh"
top=$(tap_tmpdir)
cat >"$top/ternd-nofile" <<WRAP
#!/bin/bash
ulimit -n $NOFILE || exit 1
exec "$ternd_bin" "\$@"
WRAP
chmod 0755 "$top/ternd-nofile"
ternd_use_bin "$top/ternd-nofile"

# rss - print "VmRSS RssAnon" of ternd in kB
rss() {
	awk '/^VmRSS:/ { v = $2 } /^RssAnon:/ { a = $2 } END { print v, a }' "/proc/$TERND_PID/status"
}

echo "inbound-flood: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), tree $(git -C "$top_src" describe --always --dirty 2>/dev/null)," \
	"ternd sha256 $(sha256sum "$ternd_bin" | cut -c1-12), load $(cut -d' ' -f1 /proc/loadavg), $(nproc) CPUs"
echo "CONNS=$CONNS HOLD=$HOLD AFTER=$AFTER NOFILE=$NOFILE"
ternd_setup "$top/t" "max_inbound_sessions = $((CONNS + 100))" "command_timeout = 10m" ||
	die "ternd did not start"
ternd_stop
sed -i 's|^lmtp_listen = .*|lmtp_listen =|' "$TERND_CONF"
ternd_start || die "ternd did not start without its LMTP listener"

# the probe: a greeting timed from 127.0.0.2, every PROBE_MS ms, until stopped
python3 - "$TERND_PORT" "$PROBE_MS" "$top/probe.txt" <<'PY' &
import socket, sys, time
port, every, out = int(sys.argv[1]), int(sys.argv[2]) / 1000, sys.argv[3]
with open(out, "w", buffering=1) as f:
    while True:
        t0 = time.monotonic()
        try:
            s = socket.socket()
            s.settimeout(10)
            s.bind(("127.0.0.2", 0))
            s.connect(("127.0.0.1", port))
            line = s.recv(200)
            took = time.monotonic() - t0
            s.sendall(b"QUIT\r\n")
            s.close()
            f.write("%.4f %s\n" % (took, line[:3].decode("ascii", "replace") or "EOF"))
        except OSError as e:
            f.write("%.4f %s\n" % (time.monotonic() - t0, type(e).__name__))
        time.sleep(max(0.0, every - (time.monotonic() - t0)))
PY
probe_pid=$!
tap_bg_register "$probe_pid"
sleep "$SETTLE"
read -r idle_rss idle_anon < <(rss)
echo "idle:              VmRSS $idle_rss kB, RssAnon $idle_anon kB"

# the flood: CONNS connections, greeted and EHLO answered, then it writes
# "open" and holds them until its stdin closes
mkfifo "$top/flood.in"
cat >"$top/flood.py" <<'PY'
import os, resource, selectors, socket, sys
port, n, nofile, state = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
def say(what):
    with open(state + ".tmp", "w") as f:
        f.write(what + "\n")
    os.rename(state + ".tmp", state)
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    socks.append(s)
sel = selectors.DefaultSelector()
buf = {}
for s in socks:
    sel.register(s, selectors.EVENT_READ)
    buf[s] = b""
stage = {s: 0 for s in socks}    # 0: greeting, 1: EHLO reply, 2: done
done = 0
while done < n:
    for key, _ in sel.select(30):
        s = key.fileobj
        data = s.recv(4096)
        if not data:
            say("failed: a connection closed (%d done)" % done)
            sys.exit(1)
        buf[s] += data
        # a reply ends with a line "NNN " (not "NNN-")
        lines = buf[s].split(b"\r\n")
        if not any(len(l) >= 4 and l[3:4] == b" " for l in lines):
            continue
        if not buf[s].startswith(b"220" if stage[s] == 0 else b"250"):
            say("failed: %r" % buf[s][:60])
            sys.exit(1)
        buf[s] = b""
        if stage[s] == 0:
            s.sendall(b"EHLO flood.example\r\n")
            stage[s] = 1
        else:
            stage[s] = 2
            sel.unregister(s)
            done += 1
say("open")
sys.stdin.read()
for s in socks:
    s.close()
say("closed")
PY
python3 "$top/flood.py" "$TERND_PORT" "$CONNS" "$NOFILE" "$top/flood.state" <"$top/flood.in" &
flood_pid=$!
tap_bg_register "$flood_pid"
exec 7>"$top/flood.in"
t0=$(now_us)
_flood_is() { [ "$(cat "$top/flood.state" 2>/dev/null)" = "$1" ] || grep -q '^failed' "$top/flood.state" 2>/dev/null; }
wait_until 600 _flood_is open || die "the flood did not open its connections in 600 s"
grep '^failed' "$top/flood.state" && die "the flood failed"
t1=$(now_us)
sleep 1
read -r open_rss open_anon < <(rss)
echo "$CONNS open ($(secs "$t0" "$t1") s to open): VmRSS $open_rss kB, RssAnon $open_anon kB, sessions $(ls "/proc/$TERND_PID/fd" | wc -l) fds"
sleep "$HOLD"
read -r held_rss held_anon < <(rss)
echo "after $HOLD s held:  VmRSS $held_rss kB, RssAnon $held_anon kB"
exec 7>&-
wait_until 60 _flood_is closed || die "the flood did not close"
wait "$flood_pid"
_ternd_fds_back() { [ "$(ls "/proc/$TERND_PID/fd" | wc -l)" -lt 100 ]; }
wait_until 60 _ternd_fds_back || die "ternd still holds the sessions' descriptors 60 s after they closed"
t2=$(now_us)
sleep "$AFTER"
read -r after_rss after_anon < <(rss)
echo "$AFTER s after closing: VmRSS $after_rss kB, RssAnon $after_anon kB"
# where the rest is: the largest resident mappings (heap arenas, stacks)
awk '/^[0-9a-f]+-[0-9a-f]+ / { m = $1 " " $6 } /^Rss:/ && $2 > 256 { print "    " $2 " kB " m }' \
	"/proc/$TERND_PID/smaps" | sort -rn | head -5
sleep 1
kill "$probe_pid" 2>/dev/null
wait "$probe_pid" 2>/dev/null
ternd_stop || die "ternd did not stop cleanly"

awk -v c="$CONNS" -v i="$idle_rss" -v o="$open_rss" -v a="$after_rss" 'BEGIN {
	per = (o - i) / c
	printf "per open session: %.1f kB of VmRSS (target <= 32 kB): %s\n", per, per <= 32 ? "met" : "NOT met"
	printf "after / idle: %.2f (target <= 1.25): %s\n", a / i, a <= 1.25 * i ? "met" : "NOT met" }'
awk '{ n++; if ($1 > worst) worst = $1; if ($1 > 1 || $2 != "220") bad++ }
	END { printf "probe from 127.0.0.2: %d greetings, worst %.3f s, %d over 1 s or not 220 (target 0): %s\n",
		n, worst, bad, bad ? "NOT met" : "met" }' "$top/probe.txt"
