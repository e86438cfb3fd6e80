#!/bin/bash
# ternd-ingest.sh - ternd's SMTP and LMTP listeners and its queue, with
# real clients: swaks, smtp-source, a Postfix delivering over LMTP, and a
# byte-exact conversation player for what those cannot send.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/postfix.sh"
. "$here/../lib/ternd.sh"
chat=$here/../lib/smtp_chat.py

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges, postfix start)"
for cmd in swaks smtp-source postfix python3; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done

top=$(tap_tmpdir)
ternd_setup "$top/t" "lmtp_socket_group = postfix" "message_size_limit = 20KB" "recipient_limit = 3" \
	"line_length_limit = 100" "max_inbound_sessions = 4" "max_errors = 5" \
	"inbound_networks = 127.0.0.1/32" || exit 1

# body_of FILE - a stored message without the Received: field ternd added
body_of() {
	awk 'NR == 1 && /^Received: / { skip = 1; next } skip && /^[ \t]/ { next } { skip = 0; print }' "$1"
}

# talk NAME - play $top/NAME.chat against the SMTP listener; print replies
talk() {
	python3 "$chat" "127.0.0.1:$TERND_PORT" "$top/$1.chat" "${@:2}"
}

# --- a message, byte for byte --------------------------------------------
printf 'From: a@example.org\r\nTo: b@example.com\r\nSubject: exact\r\nTraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\nline 1\r\n.line with a dot\r\n\r\nlast line\r\n' >"$top/exact.eml"
# swaks appends CRLF.CRLF to data that does not end in one
{ cat "$top/exact.eml"; printf '.\r\n'; } >"$top/exact.data"
swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com \
	--data @"$top/exact.data" >"$top/exact.swaks" 2>&1
qid=$(sed -n 's/^<-  250 2.0.0 Ok: queued as \([0-9A-Z]*\)$/\1/p' "$top/exact.swaks")
tap_like "SMTP: 250 2.0.0 Ok: queued as QID" "$qid" '^[0-9A-Z]{13}$'
ternd_sync
ternq_ cat "$qid" >"$top/exact.out"
tap_is "ternq cat: the stored bytes are what was sent, after our Received:" \
	"$(body_of "$top/exact.out" | od -c)" \
	"$(od -c <"$top/exact.eml")"
tap_like "ternq cat: Received: names the client, QID and recipient" \
	"$(head -4 "$top/exact.out" | tr -d '\r' | tr '\n' ' ')" \
	"^Received: from [^ ]+ \(\[127\.0\.0\.1\]\) 	by ternd\.test \(tern\) with ESMTP id $qid 	for <b@example\.com>; 	[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} 20[0-9]{2} "
# an unsigned Traceparent is not ours: a trace of its own, the foreign one a link
tid=$(ternq_ show "$qid" | sed -n 's/^trace_id: //p')
tap_like "ternq show: an unsigned Traceparent gives no trace id, a new one is drawn" \
	"$tid" '^[0-9a-f]{32}$'
tap_check "log: from=, size=, nrcpt=, trace=, the unverified trace at acceptance" \
	grep -q "$qid: from=<a@example.org>, size=$(wc -c <"$top/exact.out"), nrcpt=1, trace=$tid, unverified_trace=4bf92f3577b34da6a3ce929d0e0e4736 (queue active)" "$TERND_LOG"
tap_is "the new trace id is not the foreign one" "$tid" "${tid/4bf92f3577b34da6a3ce929d0e0e4736/}"

# --- BDAT, pipelined ----------------------------------------------------------
printf '%s\n' '<<' '> EHLO chunky\r\nMAIL FROM:<a@example.org> BODY=8BITMIME\r\nRCPT TO:<b@example.com>\r\nBDAT 12\r\nSubject: b\r\nBDAT 8 LAST\r\n\r\nbody\r\n' \
	'<' '<' '<' '<' '<' '> QUIT\r\n' '<' >"$top/bdat.chat"
out=$(talk bdat)
tap_like "BDAT: chunks accepted, LAST queues" "$(sed -n 6p <<<"$out")" '^250 2\.0\.0 Ok: queued as [0-9A-Z]{13}$'
bqid=$(sed -n 6p <<<"$out" | awk '{print $NF}')
ternd_sync
ternq_ cat "$bqid" >"$top/bdat.out"
tap_is "BDAT: stored content" "$(body_of "$top/bdat.out" | od -c)" \
	"$(printf 'Subject: b\r\n\r\nbody\r\n' | od -c)"

# --- errors, with their codes -------------------------------------------------
swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org \
	--to r1@example.com,r2@example.com,r3@example.com,r4@example.com >"$top/rcpt.swaks" 2>&1
tap_is "recipient_limit: the 4th RCPT gets 452 4.5.3" \
	"$(grep -c '^<\*\* *452 4\.5\.3' "$top/rcpt.swaks")" 1
tap_like "recipient_limit: the first three are queued" "$(grep '^<-  250 2.0.0 Ok: queued' "$top/rcpt.swaks")" 'queued as'
head -c 30000 /dev/zero | tr '\0' 'x' | fold -w 80 >"$top/big.body"
swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com \
	--body @"$top/big.body" >"$top/big.swaks" 2>&1
tap_like "message_size_limit: 552 5.3.4 after the content" "$(grep '^<\*\*' "$top/big.swaks" | tail -1)" \
	'^<\*\* +552 5\.3\.4 '
swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com \
	--body "$(head -c 150 /dev/zero | tr '\0' 'y')" >"$top/long.swaks" 2>&1
tap_like "line_length_limit: 554 5.6.0" "$(grep '^<\*\*' "$top/long.swaks" | tail -1)" '^<\*\* +554 5\.6\.0 '
printf '%s\n' '<<' '> EHLO t\r\n' '<' '> MAIL FROM:<a@example.org> SIZE=99999999\r\n' '<' \
	"> MAIL FROM:<a@example.org>\\r\\n" '<' '> RCPT TO:<b@nowhere.invalid>\r\n' '<' \
	"> $(head -c 600 /dev/zero | tr '\0' 'z')\\r\\n" '<' '> QUIT\r\n' '<' >"$top/errs.chat"
out=$(talk errs)
tap_is "SIZE= over the limit: 552 5.3.4 at MAIL" "$(sed -n 3p <<<"$out" | cut -c1-9)" "552 5.3.4"
tap_is "command line over 512 octets: 500 5.5.2" "$(sed -n 6p <<<"$out")" "500 5.5.2 Error: line too long"

# --- what must never end DATA -------------------------------------------------
n=0
for vector in '\n.\n' '\r.\r' '\r.\n' '\n.\r' '\n.\r\n' '\r\n.\n' '\r.\r\n' '\r\n.\r' \
	'\r\n\x00.\r\n' '\r\n.\x00\r\n'; do
	n=$((n + 1))
	printf '%s\n' '<<' '> EHLO t\r\nMAIL FROM:<a@example.org>\r\nRCPT TO:<b@example.com>\r\nDATA\r\n' \
		'<' '<' '<' '<' "> Subject: smuggle $n\\r\\n\\r\\nbefore${vector}MAIL FROM:<evil@example.org>\\r\\n" \
		'> RCPT TO:<victim@example.com>\r\nDATA\r\nSubject: smuggled\r\n\r\n.\r\n' '<' '> QUIT\r\n' '<' \
		>"$top/smuggle$n.chat"
	out=$(talk "smuggle$n")
	reply=$(sed -n 6p <<<"$out")
	case $vector in
	*x00*) want='^250 2\.0\.0 Ok: queued as' ;;	# NUL is data; the one end is the final CRLF.CRLF
	*) want='^550 5\.6\.2 ' ;;
	esac
	tap_like "smuggling vector $vector does not end DATA (one reply at the real end)" "$reply" "$want"
done
tap_is "no smuggled message was queued" "$(ternq_ list --json | grep -c evil@example.org)" 0

# --- normalize instead of reject ------------------------------------------------
# (checked at the end, after a reload with bare_newline = normalize)

# --- listeners' limits ----------------------------------------------------------
printf '%s\n' '<<' '> NOOP\r\n' '<' >"$top/hold.chat"
printf '%s\n' '<<' >"$top/greet.chat"
# Sessions run as fibers on ternd's session loops: four open sessions,
# each greeted, add no thread to those ternd had before them.
ls "/proc/$TERND_PID/task" | sort >"$top/tids.before"
# Each holds its session until the 5th has been answered ($top/release),
# not for a fixed time that a loaded machine can outrun.
pids=()
rm -f "$top/release"
for i in 1 2 3 4; do
	rm -f "$top/greeted$i"
	python3 -c '
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
if s.recv(100).startswith(b"220"):
    open(sys.argv[2], "w").close()
for _ in range(1200):
    if os.path.exists(sys.argv[3]):
        break
    time.sleep(0.05)' "$TERND_PORT" "$top/greeted$i" "$top/release" &
	pids+=($!)
done
greeted=0
for i in 1 2 3 4; do
	wait_until 10 test -e "$top/greeted$i" && greeted=$((greeted + 1))
done
new=$(ls "/proc/$TERND_PID/task" | sort | comm -13 "$top/tids.before" - | wc -l)
tap_is "4 sessions at once: each greeted, and no thread more than before them" "$greeted $new" "4 0"
tap_like "max_inbound_sessions: the 5th session gets 421 4.3.2" "$(talk greet)" '^421 4\.3\.2 '
: >"$top/release"
wait "${pids[@]}"
if ip addr show lo | grep -q '127.0.0.0/8\|127.0.0.1/8'; then
	tap_like "inbound_networks: 127.0.0.2 is refused with 554 5.7.1" \
		"$(talk greet --source 127.0.0.2)" '^554 5\.7\.1 '
fi
printf '%s\n' '<<' '> FOO\r\nBAR\r\nBAZ\r\nQUX\r\nQUUX\r\n' '<' '<' '<' '<' '<' '<' >"$top/errors.chat"
tap_like "max_errors: 421 4.7.0 after 5 errors" "$(talk errors | tail -1)" '^421 4\.7\.0 '

# --- Postfix delivering over LMTP -------------------------------------------------
pf=$top/pf
pf_port=$(free_port)
pf_create "$pf" "$pf_port"
pf_conf "$pf" "default_transport = lmtp:unix:$TERND_LMTP" "relay_transport = lmtp:unix:$TERND_LMTP" \
	"relayhost =" "lmtp_destination_recipient_limit = 50"
tap_check "postfix starts" pf_start "$pf"
swaks --server 127.0.0.1 --port "$pf_port" --from a@example.org --to x1@example.com,x2@example.net \
	--header "Subject: via postfix" >"$top/pf.swaks" 2>&1
tap_check "Postfix queue drains into ternd" pf_wait_empty "$pf" 30
# postlogd writes the maillog asynchronously: give it a moment
_pf_sent2() {
	[ "$(grep -c 'status=sent (250 2\.0\.0 <x[12]@example\.\(com\|net\)> Ok: queued as [0-9A-Z]\{13\})' "$pf/maillog")" -ge 2 ]
}
wait_until 10 _pf_sent2
tap_is "Postfix logged one LMTP 250 per recipient, with ternd's queue id" \
	"$(grep -c 'status=sent (250 2\.0\.0 <x[12]@example\.\(com\|net\)> Ok: queued as [0-9A-Z]\{13\})' "$pf/maillog")" 2
lqid=$(sed -n 's/.*status=sent (250 2\.0\.0 <x1@example\.com> Ok: queued as \([0-9A-Z]*\)).*/\1/p' "$pf/maillog")
ternd_sync
tap_is "ternq show: LMTP message with both recipients" \
	"$(ternq_ show "$lqid" --json | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["protocol"], sorted(r["address"] for r in m["recipients"]))')" \
	"LMTP ['x1@example.com', 'x2@example.net']"

# --- a close between transactions, as Postfix's LMTP connection cache does -------
# One client delivers a message, sends RSET and closes without QUIT; then
# another closes after MAIL: only the second lost anything, and only it
# is logged, with its queue id (its line, waited for, comes after the
# first close).
printf '%s\n' '<<' '> LHLO x\r\n' '<' '> MAIL FROM:<a@example.org>\r\n' '<' '> RCPT TO:<idle@example.com>\r\n' \
	'<' '> DATA\r\n' '<' '> Subject: idle\r\n\r\nhi\r\n.\r\n' '<' '> RSET\r\n' '<' >"$top/idle.chat"
printf '%s\n' '<<' '> LHLO x\r\n' '<' '> MAIL FROM:<a@example.org>\r\n' '<' >"$top/cut.chat"
lost0=$(grep -c 'lost connection' "$TERND_LOG")
python3 "$chat" "unix:$TERND_LMTP" "$top/idle.chat" >/dev/null
python3 "$chat" "unix:$TERND_LMTP" "$top/cut.chat" >/dev/null
_lost_more() { [ "$(grep -c 'lost connection' "$TERND_LOG")" -gt "$lost0" ]; }
wait_until 10 _lost_more
tap_is "LMTP: a close between transactions logs nothing; one after MAIL logs its queue id" \
	"$(grep 'lost connection' "$TERND_LOG" | tail -n +$((lost0 + 1)) | grep -oE '(NOQUEUE|[0-9A-Z]{13}): lost connection.*' \
		| sed -E 's/^[0-9A-Z]{13}:/QID:/')" "QID: lost connection from local"

# --- smtp-source into the SMTP listener -----------------------------------------
before=$(ternq_ list --json | wc -l)
smtp-source -s 2 -m 200 -l 2048 -f src@example.org -t dst@example.com "127.0.0.1:$TERND_PORT" >"$top/source.log" 2>&1
# in the queue database a moment after the 250 (the write-ahead log's
# checkpoint follows the reply): wait for it, then count exactly
_all_listed() { [ "$(($(ternq_ list --json | wc -l) - before))" -ge 200 ]; }
wait_until 10 _all_listed
tap_is "smtp-source: 200 messages queued" "$(($(ternq_ list --json | wc -l) - before))" 200

# --- restart keeps everything; control commands ----------------------------------
count=$(ternq_ list --json | wc -l)
ternd_stop
tap_is "ternd stops cleanly" "$?" 0
tap_check "ternq works while ternd is stopped" ternq_ show "$qid"
ternd_start
tap_is "after a restart the queue is intact" "$(ternq_ list --json | wc -l)" "$count"
tap_check "ternq cat verifies the digest after restart" ternq_ cat "$qid"
ternq_ hold "$qid" 2>/dev/null
tap_like "hold: marked ! in the listing" "$(ternq_ list | grep "^$qid")" "^$qid! "
tap_is "list --state hold" "$(ternq_ list --state hold --json | wc -l)" 1
ternq_ release "$qid" 2>/dev/null
tap_is "release" "$(ternq_ list --state hold --json | wc -l)" 0
ternq_ delete "$qid" 2>/dev/null
ternq_ show "$qid" >/dev/null 2>&1
tap_is "delete: ternq show exits 1 (not found)" "$?" 1
ternq_ bogus >/dev/null 2>&1
tap_is "usage error exits 2" "$?" 2
tap_like "stats: TOTAL row counts live recipients" "$(ternq_ stats | sed -n 2p)" \
	"^ +TOTAL +$(ternq_ list --json | python3 -c 'import json,sys; print(sum(len(json.loads(l)["recipients"]) for l in sys.stdin))') "

# --- reload: bare_newline = normalize ---------------------------------------------
sed -i 's/^max_errors = 5$/max_errors = 5\nbare_newline = normalize/' "$TERND_CONF"
kill -HUP "$TERND_PID"
wait_until 5 grep -q "configuration reloaded" "$TERND_LOG"
printf '%s\n' '<<' '> EHLO t\r\nMAIL FROM:<a@example.org>\r\nRCPT TO:<b@example.com>\r\nDATA\r\n' \
	'<' '<' '<' '<' '> Subject: n\r\n\r\nbare\nlf and bare\rcr\r\n.\r\n' '<' '> QUIT\r\n' '<' >"$top/norm.chat"
out=$(talk norm)
nqid=$(sed -n 6p <<<"$out" | awk '{print $NF}')
tap_like "normalize: accepted" "$(sed -n 6p <<<"$out")" '^250 2\.0\.0 Ok: queued as'
ternd_sync
tap_is "normalize: bare LF and CR became CRLF" "$(ternq_ cat "$nqid" | tail -3 | od -c)" \
	"$(printf '\r\nbare\r\nlf and bare\r\ncr\r\n' | tail -3 | od -c)"

pf_stop "$pf"
ternd_stop
tap_is "ternd stops cleanly at the end" "$?" 0
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
