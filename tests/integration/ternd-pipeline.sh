#!/bin/bash
# ternd-pipeline.sh - cross-transaction pipelining (RFC 2920 section 3.1)
# and the way message content is sent, checked on the wire against
# tests/lib/record_peer.py, which answers each end of data 300 ms late and
# logs whether each command arrived before or after its previous final
# reply. Mail is queued while its peers have no host, then ternd restarts
# with them, so that each peer's messages wait together:
#
#   1. BDAT: 10 messages over one connection; the window starts at one
#      transaction and grows with the replies, so MAILs (each after a
#      pipelined RSET) arrive before the previous final reply; each
#      delivered once, byte for byte, by sendfile(2)
#   2. DATA (no CHUNKING): MAIL 2..10 arrive with the previous end of data;
#      each delivered once, byte for byte
#   3. the peer takes message 3's content and the next MAIL, then drops the
#      connection: message 3 and those written behind it (as many as the
#      window had grown to), their contents written whole, are
#      deferred "may be delivered twice", each logged once as a possible
#      duplicate; every message arrives, message 3 twice, the queue
#      empties; a peer that closes the connection right after message 2's
#      final reply: those in flight are possible duplicates the same way (the peer could have taken them), and every message
#      arrives once
#   4. implicit TLS (stunnel4): content goes by the copy path on a kernel
#      without kTLS (sendfile=0 ktls=0), byte for byte
#   5. a final reply sitting unread when a write fails: the peer answers
#      message 1 at once and resets the connection, reading nothing more,
#      while ternd writes message 2 (7 MB, behind it) into a small receive
#      buffer: message 1's 250 is read before anything is decided, so it
#      is sent once and not deferred; message 2, its end of data never
#      written, is not sent: sent again at once
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/record.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in python3 stunnel4 openssl; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
top=$(tap_tmpdir)

declare -A port
for s in bdat data drop close tls tlsfront rst; do
	port[$s]=$(free_port)
done

# peers WITH_HOSTS - the [peer] sections (no host: mail stays queued) and routes
peers() {
	local s
	for s in bdat data drop close rst; do
		printf '%s\n' "[peer $s]" "tls = none" "max_connections = 1" "min_idle = 0"
		[ "$1" = yes ] && printf '%s\n' "host = [127.0.0.1]" "port = ${port[$s]}"
	done
	printf '%s\n' "[peer tls]" "tls = encrypt" "tls_wrapper = yes" "max_connections = 1" "min_idle = 0"
	[ "$1" = yes ] && printf '%s\n' "host = [127.0.0.1]" "port = ${port[tlsfront]}"
	printf '%s\n' "[routes]" "bdat.test = bdat" "data.test = data" "drop.test = drop" \
		"close.test = close" "tls.test = tls" "rst.test = rst"
}

# logged PEER WORD WHEN - commands WORD the peer logged as arriving WHEN
logged() {
	grep -c "^conn=[0-9]* $2 $3\$" "$top/$1/log"
}

# nlog REGEX - lines of ternd's log matching the extended REGEX
nlog() {
	grep -cE "$1" "$TERND_LOG"
}

# octets PEER - the size of everything the peer stored
octets() {
	cat "$top/$1"/msgs/* | wc -c
}

# --- a self-signed certificate for stunnel4 ---------------------------------------

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-keyout "$top/key.pem" -out "$top/cert.pem" -subj "/CN=record.test" >"$top/pki.log" 2>&1
chmod 0644 "$top/key.pem" "$top/cert.pem"

# --- queue the mail while no peer has a host ----------------------------------------

export TERND_PEERS
TERND_PEERS=$(peers no)
ternd_setup "$top/t" "min_backoff = 2s" "max_backoff = 4s" || exit 1
mkdir -p "$top/orig"
python3 - "$TERND_PORT" "$top/orig" <<-'EOF'
	import os, smtplib, sys
	port, orig = int(sys.argv[1]), sys.argv[2]
	s = smtplib.SMTP("127.0.0.1", port, "client.test", timeout=30)
	for peer, count in (("bdat", 10), ("data", 10), ("drop", 10), ("close", 5), ("tls", 3),
	                    ("rst", 2)):
	    for i in range(1, count + 1):
	        lines = ["From: <sender@client.test>", "To: <rcpt%d@%s.test>" % (i, peer),
	                 "Subject: %s %d" % (peer, i), "Date: Mon, 30 Nov 2026 00:00:00 +0000",
	                 "Message-ID: <%s.%d@client.test>" % (peer, i), ""]
	        lines += ["%s %d line %d %s" % (peer, i, k, "x" * 60) for k in range(40 * i)]
	        if i == 5:
	            lines += [".a line with a leading dot", "..two", "."]
	        if peer == "rst" and i == 2:
	            lines += ["%07d %s" % (k, "y" * 90) for k in range(7 * 1024 * 1024 // 100)]
	        body = "".join(l + "\r\n" for l in lines).encode()
	        open(os.path.join(orig, "%s.%d" % (peer, i)), "wb").write(body)
	        s.sendmail("sender@client.test", ["rcpt%d@%s.test" % (i, peer)], body)
	s.quit()
	EOF
ternd_sync
tap_is "40 messages are queued" "$(ternq_ list --json | wc -l)" 40
ternd_stop
tap_is "ternd stops cleanly" "$?" 0

# --- the peers, then ternd with their hosts ---------------------------------------------

recorder_start bdat
recorder_start data --no-chunking
recorder_start drop --drop-after 3
recorder_start close --close-after 2
recorder_start tls
recorder_start rst --delay 0 --fail 1:rst --rcvbuf 65536
printf '%s\n' "foreground = yes" "pid =" "[smtps]" "accept = 127.0.0.1:${port[tlsfront]}" \
	"connect = 127.0.0.1:${port[tls]}" "cert = $top/cert.pem" "key = $top/key.pem" \
	>"$top/stunnel.conf"
stunnel4 "$top/stunnel.conf" >"$top/stunnel.log" 2>&1 &
tap_bg_register $!
tap_check "stunnel4 listens" wait_for_port "${port[tlsfront]}"

TERND_PEERS=$(peers yes)
ternd_setup "$top/t" "min_backoff = 2s" "max_backoff = 4s" || exit 1
_empty() {
	[ "$(ternq_ list --json | wc -l)" -eq 0 ]
}
tap_check "the queue empties" wait_until 120 _empty
ternd_stop
tap_is "ternd stops cleanly" "$?" 0
q='[0-9A-Z]{13}'
# a peer that goes away is seen where ternd is at that moment: reading a
# reply, or writing the next transaction's commands or content (the reset
# came in first); which one depends on timing, the outcome does not
lost_phase='(receiving the reply|sending commands|sending the message)'

# --- 1. BDAT -------------------------------------------------------------------------

tap_is "1: one connection" "$(logged bdat EHLO first)" 1
tap_is "1: the first MAIL opens it" "$(logged bdat MAIL first)" 1
# the window starts at one and grows with the replies: how many MAILs go
# out before the previous final reply depends on when the replies come
pipelined=$(logged bdat MAIL before)
tap_check "1: MAILs arrive before the previous final reply (3 or more of 10)" test "$pipelined" -ge 3
tap_is "1: ... and the others after it" "$(logged bdat MAIL after)" $((9 - pipelined))
tap_check "1: each one sent before the previous final reply behind a pipelined RSET" \
	test "$(logged bdat RSET before)" -ge "$pipelined"
tap_is "1: 10 BDAT ... LAST" "$(grep -c ' BDAT ' "$top/bdat/log")" 10
tap_is "1: 10 messages delivered once each, byte for byte" "$(intact bdat)" "10 10"
tap_is "1: 10 logged sent" "$(nlog ": $q: to=<rcpt[0-9]+@bdat\\.test>, .*status=sent ")" 10
tap_is "1: all content by sendfile(2)" \
	"$(nlog ": peer bdat: connection to 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${port[bdat]} closed: conn_use=10, bytes sendfile=$(octets bdat) ktls=0 copy=0$")" 1

# --- 2. DATA --------------------------------------------------------------------------

tap_is "2: one connection" "$(logged data EHLO first)" 1
tap_is "2: MAIL 2..10 arrive before the previous final reply" "$(logged data MAIL before)" 9
tap_is "2: ... none after it" "$(logged data MAIL after)" 0
tap_is "2: no RSET between transactions" "$(grep -c ' RSET ' "$top/data/log")" 0
tap_is "2: 10 messages delivered once each, byte for byte (dots un-stuffed)" "$(intact data)" "10 10"
tap_is "2: 10 logged sent" "$(nlog ": $q: to=<rcpt[0-9]+@data\\.test>, .*status=sent ")" 10
tap_like "2: sendfile(2) without dot lines, the copy path with them" \
	"$(grep -E ": peer data: connection to .* closed: " "$TERND_LOG")" \
	"conn_use=10, bytes sendfile=[1-9][0-9]* ktls=0 copy=[1-9][0-9]*\$"

# --- 3. the final reply lost -----------------------------------------------------------

tap_is "3: the peer dropped one connection after the next MAIL" "$(grep -c ' drop$' "$top/drop/log")" 1
tap_is "3: every message arrived, one of them twice" "$(intact drop)" "11 10"
# how many were in flight at the drop or the close follows the window's
# growth; each of them is a possible duplicate, deferred and announced
ndrop=$(nlog ": $q: to=<rcpt[0-9]+@drop\\.test>, .*status=deferred ")
nclose=$(nlog ": $q: to=<rcpt[0-9]+@close\\.test>, .*status=deferred ")
tap_check "3: the dropped one and those behind it deferred, their final replies lost" \
	test "$ndrop" -ge 1 -a "$(nlog ": $q: to=<rcpt[0-9]+@drop\\.test>, .*status=deferred \\(lost connection with 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\] while $lost_phase \\(the message may be delivered twice\\)\\), tls=none$")" -eq "$ndrop"
tap_is "3: 10 messages logged sent" \
	"$(nlog ": $q: to=<rcpt[0-9]+@drop\\.test>, .*status=sent ")" 10
tap_is "3: closed after a final reply: every message arrived once" "$(intact close)" "5 5"
tap_is "3: ... on two connections" "$(logged close EHLO first)" 2
tap_check "3: ... those in flight deferred, may be delivered twice" \
	test "$nclose" -ge 1 -a "$(nlog ": $q: to=<rcpt[0-9]+@close\\.test>, .*status=deferred \\(lost connection .* \\(the message may be delivered twice\\)\\), tls=none$")" -eq "$nclose"
tap_is "3: ... 5 logged sent" "$(nlog ": $q: to=<rcpt[0-9]+@close\\.test>, .*status=sent ")" 5
# BDAT (ternd-window.sh tests the window): drop: message 3 and those
# written behind it; close: those written behind message 2
tap_is "3: nothing sent again at once" \
	"$(($(nlog_peer drop "sent again at once$") + $(nlog_peer close "sent again at once$")))" 0
# the close may be seen while reading the reply or while writing the
# next transaction's commands or content (a reset that came in first):
# the phase names which, "after its end of data" all three
tap_is "3: each logged once as a possible duplicate" \
	"$(nlog ": warning: $q: possible duplicate: lost connection with 127\.0\.0\.1\[127\.0\.0\.1\] while $lost_phase after its end of data -- message may be sent more than once$")" $((ndrop + nclose))

# --- 4. TLS ---------------------------------------------------------------------------

tap_is "4: 3 messages delivered once each through TLS, byte for byte" "$(intact tls)" "3 3"
tap_is "4: logged sent with tls=full" "$(nlog ": $q: to=<rcpt[0-9]+@tls\\.test>, .*status=sent .*, tls=full$")" 3
if [ -e /sys/module/tls ]; then
	# this kernel has a tls module: kTLS or not, all content is counted once
	tap_like "4: content by kTLS or the copy path" \
		"$(grep -E ": peer tls: connection to .* closed: " "$TERND_LOG")" \
		"conn_use=3, bytes sendfile=0 (ktls=$(octets tls) copy=0|ktls=0 copy=$(octets tls))\$"
else
	tap_is "4: no kTLS in this kernel: all content by the copy path" \
		"$(nlog ": peer tls: connection to 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${port[tlsfront]} closed: conn_use=3, bytes sendfile=0 ktls=0 copy=$(octets tls)$")" 1
fi

# --- 5. a final reply sitting unread when a write fails ----------------------------------

tap_is "5: the peer reset the connection after the first final reply" "$(grep -c ' rst$' "$top/rst/log")" 1
tap_like "5: the small message went first" "$(grep -E '^conn=1 mail ' "$top/rst/log")" \
	"^conn=1 mail 1 ahead 0 size [0-9]{4}\$"
tap_like "5: ... the large one was being written behind it when the reset came" \
	"$(grep -E ": peer rst: connection to .* closed: " "$TERND_LOG" | head -1)" \
	"closed: conn_use=1, bytes sendfile=[0-9]{7} ktls=0 copy=0\$"
tap_is "5: every message arrived once, byte for byte" "$(intact rst)" "2 2"
tap_is "5: none deferred" "$(nlog ": $q: to=<rcpt[0-9]+@rst\\.test>, .*status=deferred ")" 0
tap_is "5: 2 logged sent" "$(nlog ": $q: to=<rcpt[0-9]+@rst\\.test>, .*status=sent ")" 2
tap_is "5: the large one, its end of data never written, sent again at once" \
	"$(nlog_peer rst "not sent to 127\.0\.0\.1\[127\.0\.0\.1\] \(the connection was lost before its end of data\): sent again at once$")" 1
tap_is "5: no possible duplicate" "$(nlog_peer rst "possible duplicate")" 0
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
