#!/bin/bash
# ternq-admin.sh - the administrator's queue commands beyond hold, release,
# delete and retry (ternq(1), issue 15 item 1):
#   1. ternq peers shows a peer whose connections are refused with its
#      breaker open and the last error; retry ALL cannot move its mail
#      while the breaker is open; ternq peers reset NAME closes it (logged
#      with the uid), and then retry ALL delivers to the peer come back;
#      a peer without a host is shown "parked" with its queued recipients
#   2. requeue (postsuper -r) routes again by the current [routes] after a
#      SIGHUP and schedules now, with selectors: exact counts, the others
#      untouched
#   3. expire (postsuper -e) bounces at once with a DSN ("expired by
#      admin") to the sender, logs the envelope and the uid and a
#      status=expired line, removes the message, counts as expired in the
#      history (tern-report); the others untouched
#   4. ternd stopped: requeue works from the configuration file; expire is
#      refused (the DSN is ternd's to queue), peers too
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"
report=${top_builddir:-$here/../..}/src/report/tern-report

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in swaks smtp-sink; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done

top=$(tap_tmpdir)
q='[0-9A-Z]{13}'
sink_port[down]=$(free_port)
sink_port[ok]=$(free_port)
sink ok "${sink_port[ok]}" "$top/ok"
# peers - down (nothing listens yet: refused), ok (takes everything), park
# (no host: its mail stays queued)
peers() {
	printf '%s\n' "[peer down]" "host = [127.0.0.1]" "port = ${sink_port[down]}" "tls = none" \
		"breaker_failures = 1" "breaker_cooldown = 1h" \
		"[peer ok]" "host = [127.0.0.1]" "port = ${sink_port[ok]}" "tls = none" \
		"[peer park]" "[routes]" "$@" "* = ok"
}
TERND_PEERS=$(peers "down.test = down" "park.test = park" "park2.test = park")
ternd_setup "$top/t" "min_backoff = 1h" "max_backoff = 1h" || exit 1

# run ARGS... - ternq ARGS; prints "EXIT:last line of stderr"
run() {
	local rc
	ternq_ "$@" >"$top/out" 2>"$top/err"
	rc=$?
	echo "$rc:$(tail -1 "$top/err")"
}
# peer_field PEER FIELD - a field of ternq peers --json for PEER
peer_field() {
	ternq_ peers --json | python3 -c 'import json,sys
for l in sys.stdin:
    o = json.loads(l)
    if o["peer"] == sys.argv[1]: print(o.get(sys.argv[2], "-"))' "$1" "$2"
}
# ids ARGS... - the queue ids ternq list shows with ARGS, sorted
# rpeer QID ADDR - the peer of one recipient (ternq show)
rpeer() { ternq_ show "$1" | sed -n "s/^recipient: <$2> .* peer=\([^ ]*\) .*/\1/p"; }
ids() { ternq_ list --json "$@" | sed 's/.*"queue_id": *"\([0-9A-Z]*\)".*/\1/' | sort | tr '\n' ' '; }
# queued QID - the message is in ternq list
queued() { ternq_ list --json | grep -q "\"$1\""; }
sorted() { printf '%s\n' "$@" | sort | tr '\n' ' '; }

# --- 1. peers, the open breaker, reset ---------------------------------------------------
d1=$(send d1 alice@example.org bob@down.test)
wait_until 10 _atleast 1 ": $d1: to=<bob@down\\.test>, .*status=deferred "
tap_is "1: down's breaker is open" "$(peer_field down breaker)" open
tap_like "1: ... with the connection's error" "$(peer_field down last_error)" "refused"
tap_is "1: ... and its queued recipient" "$(peer_field down queued_recipients)" 1
tap_is "1: ok's breaker is closed, nothing queued" \
	"$(peer_field ok breaker) $(peer_field ok queued_recipients)" "closed 0"
tap_is "1: park (no host) is shown parked, nothing queued" \
	"$(peer_field park breaker) $(peer_field park queued_recipients) $(peer_field park breaker_since)" \
	"parked 0 -"
ternq_ peers >"$top/peers.txt"
tap_is "1: ternq peers: the table, one line per peer plus the heading" \
	"$(grep -cE '^(-Peer-|down|ok|park) ' "$top/peers.txt")" 4
tap_like "1: ... down's line" "$(grep '^down ' "$top/peers.txt")" \
	'^down +open +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ [-+][0-9]{4} +0 +0 +1  .*refused'
tap_like "1: ... and when it opens again" "$(cat "$top/peers.txt")" "open until [0-9]{4}-"
sink down "${sink_port[down]}" "$top/down"
tap_is "1: retry ALL while the breaker is open: the message is made due" "$(run retry ALL)" \
	"0:ternq: retry: 1 message"
sleep 2
tap_is "1: ... but nothing moved" "$(ids)" "$d1 "
tap_is "1: ... the breaker is still open" "$(peer_field down breaker)" open
tap_is "1: peers reset nosuch: exit 1" "$(run peers reset nosuch)" \
	"1:ternq: peers reset: nosuch: no such relayed peer"
tap_is "1: peers reset park: parked, no breaker: exit 1" "$(run peers reset park)" \
	"1:ternq: peers reset: park: parked (no host): it has no breaker; its mail waits for a host"
tap_is "1: peers reset down --json: usage error" "$(run peers reset down --json | cut -d: -f1)" 2
tap_is "1: peers reset down" "$(run peers reset down)" "0:ternq: peers reset: down: breaker closed"
tap_is "1: ... logged with the uid" "$(nlog ': peer down: breaker closed by ternq \(uid 0\)$')" 1
tap_is "1: ... closed" "$(peer_field down breaker)" closed
# the message was made due by the retry above, and the breaker, while
# open, left it so: closing it is enough
wait_until 10 _atleast 1 ": $d1: removed$"
tap_is "1: ... the message is delivered to the peer come back, no retry needed" \
	"$(nlog ": $d1: to=<bob@down\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${sink_port[down]}, .*status=sent ")" 1

# --- 2. requeue after a change of [routes] ---------------------------------------------------
p1=$(send p1 s1@x.org u1@park.test)
p2=$(send p2 s2@x.org u2@park2.test)
p3=$(send p3 s1@x.org u3@park.test,u4@park2.test)
wait_until 5 queued "$p3"
tap_is "2: three messages parked" "$(ids --peer park)" "$(sorted "$p1" "$p2" "$p3")"
tap_is "2: ternq peers: park, parked, with its 4 queued recipients" \
	"$(ternq_ peers | grep '^park ' | tr -s ' ')" "park parked - 0 0 4 -"
tap_is "2: requeue ALL before the routes change: routed as before, due already" \
	"$(run requeue ALL)" "0:ternq: requeue: 0 messages (3 unchanged)"
TERND_PEERS=$(peers "down.test = down" "park2.test = park" "park.test = ok")
{ sed '/^\[peer /,$d' "$TERND_CONF"; printf '%s\n' "$TERND_PEERS"; } >"$top/conf.new"
cat "$top/conf.new" >"$TERND_CONF"
kill -HUP "$TERND_PID"
wait_until 10 _atleast 1 "configuration reloaded from "
tap_is "2: requeue ALL --domain nosuch.test: nothing" "$(run requeue ALL --domain nosuch.test)" \
	"0:ternq: requeue: 0 messages"
tap_is "2: requeue ALL --peer park --sender nobody@x.org: nothing" \
	"$(run requeue ALL --peer park --sender nobody@x.org)" "0:ternq: requeue: 0 messages"
tap_is "2: requeue ALL --domain park.test --sender s1@x.org: two" \
	"$(run requeue ALL --domain park.test --sender s1@x.org)" "0:ternq: requeue: 2 messages"
tap_is "2: ... logged" "$(nlog ": ($p1|$p3): requeued by ternq \\(uid 0\\)$")" 2
wait_until 10 _atleast 1 ": $p1: removed$"
tap_is "2: ... p1 goes to its new peer" \
	"$(nlog ": $p1: to=<u1@park\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${sink_port[ok]}, .*status=sent ")" 1
wait_until 10 _atleast 1 ": $p3: to=<u3@park\\.test>, .*status=sent "
tap_is "2: ... p3's park.test recipient too, its park2.test one stays" \
	"$(rpeer "$p3" u3@park.test) $(rpeer "$p3" u4@park2.test)" "ok park"
tap_is "2: ... p2 untouched" "$(ids)" "$(sorted "$p2" "$p3")"
tap_is "2: requeue p2: routed as before: unchanged" "$(run requeue "$p2")" \
	"0:ternq: requeue: 0 messages (1 unchanged)"

# --- 3. expire -------------------------------------------------------------------------------
e1=$(send e1 alice@example.org y@park2.test --header "Subject: expire me")
wait_until 5 queued "$e1"
tap_is "3: expire ALL --rcpt nobody@park2.test: nothing" "$(run expire ALL --rcpt nobody@park2.test)" \
	"0:ternq: expire: 0 messages"
tap_is "3: expire ALL --sender alice@example.org --peer park" \
	"$(run expire ALL --sender alice@example.org --peer park)" "0:ternq: expire: 1 message"
tap_is "3: ... one line with the envelope and the uid" \
	"$(grep -E ": $e1: expired by admin " "$TERND_LOG" | sed 's/.*: expired/expired/')" \
	"expired by admin (uid 0): from=<alice@example.org>, to=<y@park2.test>"
tap_like "3: ... the recipient's status=expired line" \
	"$(grep -E ": $e1: to=<y@park2\\.test>, " "$TERND_LOG")" \
	"relay=none, .*dsn=4\\.4\\.7, status=expired \\(expired by admin\\)"
wait_until 10 _atleast 1 ": $e1: removed$"
tap_is "3: ... the message left the queue" "$(ternq_ show "$e1" >/dev/null 2>&1; echo $?)" 1
tap_is "3: ... the others did not" "$(ids --peer park)" "$(sorted "$p2" "$p3")"
wait_until 10 _atleast 1 ": $e1: sender non-delivery notification: "
dsn=$(sed -nE "s/^.*: $e1: sender non-delivery notification: ($q)\$/\\1/p" "$TERND_LOG")
wait_until 10 _atleast 1 ": $dsn: removed$"
tap_is "3: the DSN goes to the sender" "$(nlog ": $dsn: to=<alice@example\\.org>, .*status=sent ")" 1
f=$(grep -l "^X-Tern-Queue-ID: $e1$" "$top"/ok/* 2>/dev/null | head -1)
tap_like "3: ... reporting the expiry" "$(cat "${f:-/dev/null}")" \
	$'\nFinal-Recipient: rfc822; y@park2\\.test\nAction: failed\nStatus: 4\\.4\\.7\n'
tap_like "3: ... with the admin's reason" "$(cat "${f:-/dev/null}")" $'\nDiagnostic-Code: X-Tern; expired by admin\n'
tap_like "3: ... and the original's headers" "$(cat "${f:-/dev/null}")" $'\nSubject: expire me\n'
"$report" -c "$TERND_CONF" --format json >"$top/r.json"
tap_is "3: tern-report counts one expired" \
	"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["expired"])' "$top/r.json")" 1
tap_is "3: expire of an unknown id: exit 1" "$(run expire ZZZZZZZZZZZZZ | cut -d: -f1)" 1

# --- 4. ternd stopped -------------------------------------------------------------------------
ternd_stop
tap_is "4: expire without ternd: refused" "$(run expire ALL)" \
	"2:ternq: expire needs ternd running: it queues a notification"
tap_is "4: ... nothing changed" "$(ids)" "$(sorted "$p2" "$p3")"
tap_is "4: peers without ternd" "$(run peers)" "2:ternq: peers needs ternd running: its peers live there"
TERND_PEERS=$(peers "down.test = down" "park.test = ok" "park2.test = ok")
{ sed '/^\[peer /,$d' "$TERND_CONF"; printf '%s\n' "$TERND_PEERS"; } >"$top/conf.new"
cat "$top/conf.new" >"$TERND_CONF"
tap_is "4: requeue ALL --rcpt u2@park2.test by ternq itself" "$(run requeue ALL --rcpt u2@park2.test)" \
	"0:ternq: requeue: 1 message"
tap_is "4: ... routed by the file's [routes]" "$(rpeer "$p2" u2@park2.test)" ok
tap_is "4: ... p3 untouched" "$(rpeer "$p3" u4@park2.test)" park
tap_done
