#!/bin/bash
# ternd-client-limit.sh - one client address cannot take every session
# (Postfix anvil's smtpd_client_connection_count_limit). With
# max_client_sessions = 3, max_inbound_sessions = 8 and the default
# client_limit_exceptions (127.0.0.1, ::1):
#
#   1. 127.0.0.2 gets 3 sessions (220); its 4th and 20 more attempts get
#      exactly "421 4.7.0 ternd.test Error: too many connections from
#      [127.0.0.2]" and EOF, while 127.0.0.3 still gets 220
#   2. 127.0.0.1 (an exception) is not counted: 4 sessions, all 220; then
#      the listener is full (3 + 1 + 4 = 8): 127.0.0.4 and 10 more from
#      127.0.0.1 get 421 4.3.2
#   3. LMTP over its unix socket is never counted: 5 sessions, all 220
#   4. when one of 127.0.0.2's sessions ends, it gets a session again
#   5. the 31 refusals are two warnings: one per limit (and minute)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"

top=$(tap_tmpdir)
ternd_setup "$top/t" "max_client_sessions = 3" "max_inbound_sessions = 8" || exit 1

out=$(python3 - "$TERND_PORT" "$TERND_LMTP" "$here/../lib" <<-'EOF'
	import socket, sys, time
	sys.path.insert(0, sys.argv[3])
	from smtp_chat import connect
	port, lmtp = sys.argv[1], sys.argv[2]
	def session(source, target=None):
	    """a connection and its first line, and the next when it is a 421"""
	    if target:
	        s = connect(target, None)
	    else:
	        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	        s.bind((source, 0))
	        s.connect(("127.0.0.1", int(port)))
	    s.settimeout(10)
	    f = s.makefile("rb")
	    first = f.readline().decode().rstrip("\r\n")
	    if first.startswith("421"):
	        first += " | " + (f.readline().decode().rstrip("\r\n") or "EOF")
	    return s, first
	def summary(lines):
	    return " + ".join("%d x %s" % (lines.count(x), x) for x in sorted(set(lines)))
	held = [session("127.0.0.2") for i in range(3)]
	print("1a", summary([g[:3] for _, g in held]))
	print("1b", session("127.0.0.2")[1])
	other = session("127.0.0.3")    # kept open, as the others: 3 + 1 + 4 = 8
	print("1c", other[1][:3])
	print("1d", summary([session("127.0.0.2")[1] for i in range(20)]))
	local = [session("127.0.0.1") for i in range(4)]
	print("2a", summary([g[:3] for _, g in local]))
	print("2b", session("127.0.0.4")[1])
	print("2c", summary([session("127.0.0.1")[1] for i in range(10)]))
	lm = [session(None, "unix:" + lmtp) for i in range(5)]
	print("3", summary([g[:3] for _, g in lm]))
	held[0][0].close()
	# the session ends when ternd reads the EOF: try again until it has
	end = time.monotonic() + 10
	while True:
	    s, g = session("127.0.0.2")
	    if g.startswith("220") or time.monotonic() > end:
	        break
	    s.close()
	    time.sleep(0.1)
	print("4", g)
EOF
)
tap_diag "$out"
line() {
	sed -n "s/^$1 //p" <<<"$out"
}
tap_is "1: 127.0.0.2 gets its 3 sessions" "$(line 1a)" "3 x 220"
tap_is "1: its 4th: 421 4.7.0, closed" "$(line 1b)" \
	"421 4.7.0 ternd.test Error: too many connections from [127.0.0.2] | EOF"
tap_is "1: meanwhile 127.0.0.3 gets 220" "$(line 1c)" 220
tap_is "1: 20 more from 127.0.0.2: each 421 4.7.0" "$(line 1d)" \
	"20 x 421 4.7.0 ternd.test Error: too many connections from [127.0.0.2] | EOF"
tap_is "2: 127.0.0.1 is in client_limit_exceptions: 4 sessions" "$(line 2a)" "4 x 220"
tap_is "2: the listener full (8 sessions): 127.0.0.4 gets 421 4.3.2" "$(line 2b)" \
	"421 4.3.2 ternd.test Error: too many sessions, try again later | EOF"
tap_is "2: ... and 10 more from 127.0.0.1" "$(line 2c)" \
	"10 x 421 4.3.2 ternd.test Error: too many sessions, try again later | EOF"
tap_is "3: the LMTP socket is not counted per client: 5 sessions" "$(line 3)" "5 x 220"
tap_like "4: one of 127.0.0.2's sessions closed: it gets a session again" "$(line 4)" '^220 '
tap_is "5: 21 refusals at max_client_sessions: one warning" \
	"$(grep -c 'refused connection from \[127\.0\.0\.2\]: max_client_sessions (3) reached (0 more refused since the last warning)$' "$TERND_LOG")" 1
tap_is "5: 11 refusals at max_inbound_sessions: one warning" \
	"$(grep -c 'refused connection from \[127\.0\.0\.4\]: max_inbound_sessions (8) reached (0 more refused since the last warning)$' "$TERND_LOG")" 1
tap_is "5: no other refusal lines" "$(grep -c 'refused connection' "$TERND_LOG")" 2

ternd_stop_checked
tap_done
