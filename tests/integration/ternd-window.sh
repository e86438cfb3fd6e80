#!/bin/bash
# ternd-window.sh - many BDAT transactions in flight on one connection
# (RFC 2920 section 3.1, RFC 3030), checked on the wire against
# tests/lib/record_peer.py, which answers each final reply 300 ms late and
# logs, for each MAIL, how many final replies it had sent on the
# connection before that MAIL arrived ("mail K ahead F": K - F
# transactions in flight). Mail is queued while the peers have no host,
# then ternd restarts with them, so that each peer's messages wait
# together. Every sender is <>, so that no bounce makes a DSN.
#
#   1. max_pipeline_depth = 4, 10 messages: the window starts at one
#      transaction (the first is written alone) and grows by one for each
#      final reply (slow start) to 4, never more in flight; those written
#      behind another start with a pipelined RSET; each delivered once,
#      byte for byte, over one connection. max_pipeline_depth = 1: one at
#      a time, no RSET
#   2. max_pipeline_bytes = 12000 and messages of about 5300 octets: 2 in
#      flight; one of about 30000 octets goes alone
#   3. failures at the third transaction, with 3 in flight (the window
#      grown to 3 by the first two replies):
#      - 550 to its RCPT: that message bounces, the peer answers its BDAT
#        554, and the next transaction (behind its RSET) is not refused;
#        the other 5 sent once
#      - 451 to its BDAT: that message is deferred and sent later, the
#        transaction left open is closed by the pipelined RSET (no 503);
#        each of the 6 delivered once
#      - 421 to its MAIL, the connection closed: on a reused connection
#        that is the connection's end, not the message's: it is not sent
#        and goes again at once, as do the 2 written behind the 421 (a peer
#        that says 421 processes nothing after it); none deferred, none a
#        possible duplicate, each of the 8 delivered once
#      - the connection dropped after its content, the final reply lost:
#        it and those written behind it (as many as the window had grown
#        to), whose contents went out whole, are
#        each deferred "may be delivered twice" and logged once as a
#        possible duplicate ("message may be sent more than once"); each is
#        sent again alone; it arrives twice, the other 7 once
#      - the same drop with max_pipeline_bytes = 12000 (2 in flight): it
#        and the one written behind it are possible duplicates, and the one
#        loaded but held back by the byte bound is logged as never written
#   While the windows are full, ternd holds at most one spool file open
#   per connection (a body's file is closed once its BDAT content is
#   written), plus the segment it appends to.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/record.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"
top=$(tap_tmpdir)

peers_all="depth one bytes rcpt bdat r421 drop dropb"
declare -A port count
for s in $peers_all; do
	port[$s]=$(free_port)
done
count=([depth]=10 [one]=4 [bytes]=9 [rcpt]=6 [bdat]=6 [r421]=8 [drop]=8 [dropb]=6)

# peers WITH_HOSTS - the [peer] sections (no host: mail stays queued) and routes
peers() {
	local s
	for s in $peers_all; do
		printf '%s\n' "[peer $s]" "tls = none" "max_connections = 1" "min_idle = 0"
		case $s in
		one) echo "max_pipeline_depth = 1" ;;
		bytes | dropb) echo "max_pipeline_bytes = 12000" ;;
		*) echo "max_pipeline_depth = 4" ;;
		esac
		[ "$1" = yes ] && printf '%s\n' "host = [127.0.0.1]" "port = ${port[$s]}"
	done
	echo "[routes]"
	for s in $peers_all; do
		echo "$s.test = $s"
	done
}

# nlog REGEX - lines of ternd's log matching the extended REGEX
nlog() {
	grep -cE "$1" "$TERND_LOG"
}

# status PEER STATUS - delivery lines of PEER's mail with that status
status() {
	nlog ": [0-9A-Z]{13}: to=<rcpt[0-9]+@$1\\.test>, .*status=$2 "
}

# peer_log PEER REGEX - lines of the peer's log matching REGEX
peer_log() {
	grep -cE "$2" "$top/$1/log"
}

# window PEER - "FIRST MAX": MAILs written before the peer's first final
# reply on its first connection, and most transactions in flight when a
# MAIL arrived on any connection
window() {
	python3 - "$top/$1/log" <<-'EOF2'
		import re, sys
		first = most = 0
		for line in open(sys.argv[1]):
		    m = re.match(r"conn=(\d+) mail (\d+) ahead (\d+) size (\d+)$", line)
		    if m:
		        c, k, f = int(m.group(1)), int(m.group(2)), int(m.group(3))
		        first += c == 1 and f == 0
		        most = max(most, k - f)
		print(first, most)
	EOF2
}

# alone PEER SIZE - "yes" when the MAIL of SIZE octets or more arrived
# with nothing else in flight and the next MAIL on its connection after
# its final reply
alone() {
	python3 - "$top/$1/log" "$2" <<-'EOF2'
		import re, sys
		mails = [tuple(map(int, m.groups())) for m in
		         (re.match(r"conn=(\d+) mail (\d+) ahead (\d+) size (\d+)$", l)
		          for l in open(sys.argv[1])) if m]
		big = [x for x in mails if x[3] >= int(sys.argv[2])]
		ok = len(big) == 1 and big[0][1] - big[0][2] == 1
		after = [x for x in mails if x[0] == big[0][0] and x[1] == big[0][1] + 1] if big else []
		ok = ok and all(x[2] >= big[0][1] for x in after)
		print("yes" if ok else "no: %s" % big)
	EOF2
}

# alone_last PEER N - "yes" when the peer's last N MAILs each arrived with
# nothing else in flight: the possible duplicates, deferred, then each
# sent again alone
alone_last() {
	python3 - "$top/$1/log" "$2" <<-'EOF2'
		import re, sys
		mails = [tuple(map(int, m.groups())) for m in
		         (re.match(r"conn=(\d+) mail (\d+) ahead (\d+) size (\d+)$", l)
		          for l in open(sys.argv[1])) if m]
		last = mails[-int(sys.argv[2]):]
		print("yes" if all(x[1] - x[2] == 1 for x in last) else "no: %s" % last)
	EOF2
}

# --- queue the mail while no peer has a host ----------------------------------------

export TERND_PEERS
TERND_PEERS=$(peers no)
ternd_setup "$top/t" "min_backoff = 2s" "max_backoff = 4s" || exit 1
spec=""
for s in $peers_all; do
	spec="$spec $s:${count[$s]}"
	[ "$s" = bytes ] && spec="$spec:5=375"
done
# about 5000 octets each; the bytes peer's fifth, about 30000
recorder_queue $spec
ternd_sync
tap_is "57 messages are queued" "$(ternq_ list --json | wc -l)" 57
ternd_stop
tap_is "ternd stops cleanly" "$?" 0

# --- the peers, then ternd with their hosts ---------------------------------------------

recorder_start depth
recorder_start one
recorder_start bytes
recorder_start rcpt --fail "3:rcpt:550 5.1.1 <rcpt@rcpt.test>: Recipient address rejected"
recorder_start bdat --fail "3:bdat:451 4.3.0 Error: try again later"
recorder_start r421 --fail "3:mail:421 4.3.2 Service shutting down"
recorder_start drop --fail "3:drop"
recorder_start dropb --fail "3:drop"

TERND_PEERS=$(peers yes)
m_port=$(free_port)
ternd_setup "$top/t" "min_backoff = 2s" "max_backoff = 4s" "metrics_listen = 127.0.0.1:$m_port" || exit 1
# the most files in ternd's spool it held open at once while the windows
# were full (each peer's final replies come 300 ms late), and whether the
# spool's own directory was seen among its descriptors (the pattern works)
spool=$(realpath "$top/t/spool")
(
	most=0 dir=0
	while kill -0 "$TERND_PID" 2>/dev/null; do
		n=$(find "/proc/$TERND_PID/fd" -mindepth 1 -maxdepth 1 \( -lname "$spool/seg/?*" \
			-o -lname "$spool/own/?*" \) 2>/dev/null | wc -l)
		[ "$n" -gt "$most" ] && most=$n
		[ "$dir" -eq 0 ] && [ -n "$(find "/proc/$TERND_PID/fd" -mindepth 1 -maxdepth 1 \
			-lname "$spool/seg" 2>/dev/null)" ] && dir=1
		echo "$most $dir" >"$top/fds"
		sleep 0.02
	done
) &
sampler=$!
tap_bg_register "$sampler"
tap_check "the queue empties" wait_until 120 ternd_drained
curl -s --max-time 10 "http://127.0.0.1:$m_port/metrics" >"$top/metrics"
ternd_stop
tap_is "ternd stops cleanly" "$?" 0
q='[0-9A-Z]{13}'
# a peer that goes away is seen where ternd is at that moment: reading a
# reply, or writing the next transaction's commands or content (the reset
# came in first); which one depends on timing, the outcome does not
lost_phase='(receiving the reply|sending commands|sending the message)'

# --- 1. depth ----------------------------------------------------------------------------

wait "$sampler"
# 8 peers, a connection each, a window of up to 4 on most: with CHUNKING
# a body's file is closed once its content is written, not kept while
# its transaction waits for replies (before: up to 4 per window)
read -r fds seen <"$top/fds" || fds=0 seen=0
tap_diag "most spool files ternd held open at once: $fds"
tap_is "the sampler saw ternd's spool directory among its descriptors" "$seen" 1
tap_check "at most one spool file open per connection, and the segment appended to" \
	test "$fds" -le 9
tap_is "1: one connection" "$(peer_log depth '^conn=[0-9]+ EHLO ')" 1
tap_is "1: the first transaction alone before the first final reply, never more than 4 in flight" \
	"$(window depth)" "1 4"
tap_check "1: each written before the previous final reply starts with a pipelined RSET" \
	test "$(peer_log depth '^conn=1 RSET before$')" -ge "$(peer_log depth '^conn=1 MAIL before$')" -a \
	"$(peer_log depth '^conn=1 MAIL before$')" -ge 3
tap_is "1: 10 messages delivered once each, byte for byte" "$(intact depth)" "10 10"
tap_is "1: 10 logged sent" "$(status depth sent)" 10
tap_is "1: nothing refused" "$(peer_log depth ' reply ')" 0
tap_is "1: depth 1: one transaction at a time" "$(window one)" "1 1"
tap_is "1: ... each MAIL after the previous final reply" "$(peer_log one '^conn=1 MAIL after$')" 3
tap_is "1: ... no RSET" "$(peer_log one ' RSET ')" 0
tap_is "1: ... 4 messages delivered once each" "$(intact one)" "4 4"

# --- 2. bytes ----------------------------------------------------------------------------

tap_is "2: max_pipeline_bytes 12000: 2 in flight" "$(window bytes)" "1 2"
tap_is "2: the message larger than the bound went alone" "$(alone bytes 20000)" yes
tap_is "2: 9 messages delivered once each, byte for byte" "$(intact bytes)" "9 9"
tap_is "2: 9 logged sent" "$(status bytes sent)" 9

# --- 3. failures in the middle of a window ----------------------------------------------

tap_is "3: rcpt: 3 in flight" "$(window rcpt)" "1 3"
tap_is "3: rcpt: the peer refused one RCPT, then its BDAT" \
	"$(grep ' reply ' "$top/rcpt/log" | cut -d' ' -f3 | tr '\n' ' ')" "550 554 "
tap_is "3: rcpt: that message bounced at once" \
	"$(nlog ": $q: to=<rcpt[0-9]+@rcpt\\.test>, .*dsn=5\\.1\\.1, status=bounced \\(550 5\\.1\\.1 <rcpt@rcpt\\.test>: Recipient address rejected\\), tls=none$")" 1
tap_is "3: rcpt: the other 5 sent, none deferred" "$(status rcpt sent) $(status rcpt deferred)" "5 0"
tap_is "3: rcpt: 5 messages delivered once each" "$(intact rcpt)" "5 5"
tap_is "3: rcpt: one connection" "$(peer_log rcpt '^conn=[0-9]+ EHLO ')" 1

tap_is "3: bdat: 3 in flight" "$(window bdat)" "1 3"
tap_is "3: bdat: the peer refused one BDAT, and no MAIL after it (RSET came first)" \
	"$(grep ' reply ' "$top/bdat/log" | cut -d' ' -f3 | tr '\n' ' ')" "451 "
tap_is "3: bdat: that message deferred with the reply" \
	"$(nlog ": $q: to=<rcpt[0-9]+@bdat\\.test>, .*dsn=4\\.3\\.0, status=deferred \\(451 4\\.3\\.0 Error: try again later\\), tls=none$")" 1
tap_is "3: bdat: no other deferral" "$(status bdat deferred)" 1
tap_is "3: bdat: 6 logged sent (one on its second attempt)" "$(status bdat sent)" 6
tap_is "3: bdat: 6 messages delivered once each" "$(intact bdat)" "6 6"

tap_is "3: 421: the peer said 421 and closed" "$(peer_log r421 '^conn=1 421$')" 1
tap_is "3: 421: none deferred" "$(status r421 deferred)" 0
tap_is "3: 421: that message, refused on a reused connection, sent again at once" \
	"$(nlog_peer r421 "not sent to 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\] \\(refused at MAIL on a reused connection\\): sent again at once$")" 1
tap_is "3: 421: the 2 written behind it sent again at once" \
	"$(nlog_peer r421 "not sent to 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\] \\(written behind a 421\\): sent again at once$")" 2
tap_is "3: 421: no possible duplicate" "$(nlog_peer r421 "possible duplicate")" 0
tap_is "3: 421: 8 logged sent" "$(status r421 sent)" 8
tap_is "3: 421: 8 messages delivered once each" "$(intact r421)" "8 8"

tap_is "3: drop: the peer dropped the connection" "$(peer_log drop '^conn=1 drop$')" 1
# how many were in flight at the drop follows the window's growth: it, and
# at least one written behind it; each of them a possible duplicate
ndrop=$(status drop deferred)
tap_check "3: drop: it and those written behind it deferred, their final replies lost" \
	test "$ndrop" -ge 2 -a "$(nlog ": $q: to=<rcpt[0-9]+@drop\\.test>, .*dsn=4\\.4\\.2, status=deferred \\(lost connection with 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\] while $lost_phase \\(the message may be delivered twice\\)\\), tls=none$")" -eq "$ndrop"
tap_is "3: drop: each logged once as a possible duplicate" \
	"$(nlog_peer drop "possible duplicate: lost connection with 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\] while $lost_phase after its end of data -- message may be sent more than once$")" "$ndrop"
tap_is "3: drop: nothing sent again at once" "$(nlog_peer drop "sent again at once")" 0
tap_is "3: drop: each possible duplicate sent again alone" "$(alone_last drop "$ndrop")" yes
tap_is "3: drop: 8 logged sent" "$(status drop sent)" 8
tap_is "3: drop: every message arrived, only the one whose final reply was lost twice" \
	"$(intact drop)" "9 8"
tap_is "3: drop, 2 in flight: it and the one behind it deferred, may be delivered twice" \
	"$(nlog ": $q: to=<rcpt[0-9]+@dropb\\.test>, .*status=deferred \\(lost connection .*\\(the message may be delivered twice\\)\\), tls=none$")" 2
tap_is "3: drop, 2 in flight: the one held back by the byte bound logged as never written" \
	"$(nlog_peer dropb "not written \\(the connection was lost first\\): tried again at once$")" 1
tap_is "3: drop, 2 in flight: 2 possible duplicates logged" \
	"$(nlog_peer dropb "possible duplicate: .* -- message may be sent more than once$")" 2
tap_is "3: drop, 2 in flight: 6 logged sent" "$(status dropb sent)" 6
tap_is "3: drop, 2 in flight: every message arrived, only the one whose final reply was lost twice" \
	"$(intact dropb)" "7 6"
tap_is "3: no possible duplicate elsewhere" \
	"$(nlog ': possible duplicate: ')" $((ndrop + 2))
tap_is "3: counted by peer in tern_possible_duplicates_total before the stop" \
	"$(grep -E '^tern_possible_duplicates_total\{peer="(drop|dropb)"\} ' "$top/metrics" | awk '{ n += $2 } END { print n }')" $((ndrop + 2))
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
