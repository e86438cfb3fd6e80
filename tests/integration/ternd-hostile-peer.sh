#!/bin/bash
# ternd-hostile-peer.sh - ternd's relay client against peers that misbehave
# (tests/lib/hostile_peer.py, one per fault, chosen by recipient domain).
# Timeouts are 3 s here; backoff 2-4 s; the breaker never opens.
#
#   1. each fault defers the message with the right reason and keeps it
#      queued: connection refused; reset mid-content; a stalled reply (one
#      octet a second) at the greeting, EHLO, MAIL, RCPT, DATA and after the
#      end of data, cut at the timeout as a deadline on the whole reply;
#      421 at each of those stages; an endless multi-line reply; a 100 MB
#      reply line; under tls = encrypt or verify, a STARTTLS handshake
#      answered with garbage and a peer without STARTTLS
#   2. nothing reached those peers in clear: no MAIL FROM before TLS
#   3. ternd's RSS stays bounded (+50 MB) through the endless and 100 MB
#      replies; it is still running
#   4. junk after the 220 to STARTTLS is thrown away: delivered over TLS
#   5. once each peer behaves, every message is delivered, once
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in openssl python3 ss; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done

top=$(tap_tmpdir)
q='[0-9A-Z]{13}'

# a self-signed certificate for hostile.test (its own CA under tls = verify)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-keyout "$top/peer.key" -out "$top/peer.pem" -subj "/CN=hostile.test" \
	-addext "subjectAltName=DNS:hostile.test" >"$top/pki.log" 2>&1
chmod 0644 "$top/peer.key" "$top/peer.pem"

# The faults: NAME MODE TLS-POLICY [hostile_peer options]
faults=(
	"stallgreeting stall:greeting none"
	"stallehlo stall:ehlo none"
	"stallmail stall:mail none"
	"stallrcpt stall:rcpt none"
	"stalldata stall:data none"
	"stalldot stall:dot none"
	"r421greeting 421:greeting none"
	"r421ehlo 421:ehlo none"
	"r421mail 421:mail none"
	"r421rcpt 421:rcpt none"
	"r421data 421:data none"
	"r421dot 421:dot none"
	"resetdata reset:content none"
	"endless endless:ehlo none"
	"hugeline hugeline:mail none"
	"tlsgarbenc tlsgarbage encrypt"
	"tlsgarbver tlsgarbage verify"
	"notlsenc notls encrypt"
	"notlsver notls verify"
	"junk220 junk220 encrypt"
)
declare -A port mode policy qid
peers=
routes=
for f in "${faults[@]}"; do
	read -r name m pol <<<"$f"
	port[$name]=$(free_port)
	mode[$name]=$m
	policy[$name]=$pol
	python3 "$here/../lib/hostile_peer.py" "${port[$name]}" "$top/$name.log" "$m" \
		--tls "$top/peer.pem" "$top/peer.key" --behave "$top/$name.behave" \
		>"$top/$name.out" 2>&1 &
	tap_bg_register $!
	peers+="[peer $name]"$'\n'"host = [127.0.0.1]"$'\n'"port = ${port[$name]}"$'\n'
	peers+="tls = $pol"$'\n'"tls_servername = hostile.test"$'\n'"tls_ca_file = $top/peer.pem"$'\n'
	peers+="min_idle = 0"$'\n'"max_connections = 1"$'\n'"breaker_failures = 1000"$'\n'
	peers+="connect_timeout = 3s"$'\n'"command_timeout = 3s"$'\n'"data_timeout = 3s"$'\n'
	routes+="$name.test = $name"$'\n'
done
refused_port=$(free_port)	# nothing listens there
peers+="[peer refused]"$'\n'"host = [127.0.0.1]"$'\n'"port = $refused_port"$'\n'"tls = none"$'\n'
peers+="min_idle = 0"$'\n'"max_connections = 1"$'\n'"breaker_failures = 1000"$'\n'
for name in "${!port[@]}"; do
	wait_for_port "${port[$name]}" || tap_fail "hostile peer $name listens"
done
export TERND_PEERS="$peers[routes]"$'\n'"${routes}refused.test = refused"
ternd_setup "$top/t" "min_backoff = 2s" "max_backoff = 4s" || exit 1
unset TERND_PEERS

# nlog REGEX - lines of ternd's log matching the extended REGEX
nlog() {
	grep -cE "$1" "$TERND_LOG"
}
_atleast() {
	[ "$(nlog "$2")" -ge "$1" ]
}
# rss - ternd's resident set size in kB
rss() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$TERND_PID/status"
}
# rcpt FIELD QID - a field of the message's recipient (ternq show --json)
rcpt() {
	ternq_ show "$2" --json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["recipients"][0][sys.argv[1]])' "$1"
}

# send DOMAIN... - one message to user@DOMAIN for each; prints "DOMAIN QID" lines.
# resetdata.test gets 8 MB of content, so that the reset comes mid-content.
send() {
	python3 - "$TERND_PORT" "$@" <<-'EOF'
		import smtplib, sys
		port, domains = sys.argv[1], sys.argv[2:]
		s = smtplib.SMTP("127.0.0.1", int(port), "client.test", timeout=60)
		s.ehlo()
		for d in domains:
		    body = "hostile %s\r\n" % d
		    if d.startswith("resetdata"):
		        body += ("x" * 78 + "\r\n") * 100000
		    msg = "From: <a@client.test>\r\nTo: <u@%s>\r\nSubject: hostile %s\r\n\r\n%s" % (d, d, body)
		    r1 = s.mail("a@client.test")
		    r2 = s.rcpt("u@" + d)
		    if r2[0] != 250:
		        print(d, "refused", r1, r2); s.rset(); continue
		    code, resp = s.data(msg.encode())
		    print(d, resp.decode().split()[-1] if code == 250 else "refused %d" % code)
		s.quit()
	EOF
}

rss0=$(rss)
names=("${!port[@]}" refused)
while read -r d id; do
	qid[${d%.test}]=$id
done < <(send "${names[@]/%/.test}")
n=0
for name in "${names[@]}"; do
	[[ ${qid[$name]:-} =~ ^$q$ ]] && n=$((n + 1))
done
tap_is "ternd queues one message for each of the ${#names[@]} peers" "$n" "${#names[@]}"

# --- 1. deferred with the right reason, still queued --------------------------------

# deferred NAME - ternd's first deferral line for the message to NAME.test,
# from "relay=" on, without the delay
deferred() {
	grep -E ": ${qid[$1]}: to=<u@$1\\.test>, .*status=deferred " "$TERND_LOG" | head -1 |
		sed -E 's/^.*: [0-9A-Z]{13}: to=<[^>]*>, //; s/(conn_use=[0-9]+, )?delay=[^,]*, delays=[^,]*, //'
}
# The expected deferral: where the conversation stopped decides the relay
# (none before EHLO succeeded), the status code and the reason.
lost="127.0.0.1[127.0.0.1]"
timedout="conversation timed out with $lost while receiving the reply"
declare -A want=(
	[refused]="none 4.4.1 connect to $lost:$refused_port: Connection refused"
	[resetdata]="peer 4.4.2 lost connection with $lost while sending the message"
	[stallgreeting]="none 4.4.1 $timedout"
	[stallehlo]="none 4.4.1 $timedout"
	[stallmail]="peer 4.4.2 $timedout"
	[stallrcpt]="peer 4.4.2 $timedout"
	[stalldata]="peer 4.4.2 $timedout"
	[stalldot]="peer 4.4.2 $timedout (the message may be delivered twice)"
	[r421greeting]="none 4.4.1 host $lost refused to talk to me: 421 4.3.2 hostile: greeting"
	[r421ehlo]="none 4.4.1 host $lost refused EHLO: 421 4.3.2 hostile: ehlo"
	[r421mail]="peer 4.3.2 421 4.3.2 hostile: mail"
	[r421rcpt]="peer 4.3.2 421 4.3.2 hostile: rcpt"
	[r421data]="peer 4.3.2 421 4.3.2 hostile: data"
	[r421dot]="peer 4.3.2 421 4.3.2 hostile: dot"
	[endless]="none 4.4.1 protocol error from $lost: too many lines in reply"
	[hugeline]="peer 4.4.2 protocol error from $lost: reply line too long"
	[tlsgarbenc]="none 4.4.1 TLS handshake with $lost:${port[tlsgarbenc]} failed: wrong version number"
	[tlsgarbver]="none 4.4.1 TLS handshake with $lost:${port[tlsgarbver]} failed: wrong version number"
	[notlsenc]="none 4.4.1 TLS is required (tls = encrypt) but $lost does not offer STARTTLS"
	[notlsver]="none 4.4.1 TLS is required (tls = verify) but $lost does not offer STARTTLS"
)
faulty=()
for name in "${names[@]}"; do
	[ "$name" = junk220 ] || faulty+=("$name")
done
rss1=$rss0
for name in "${faulty[@]}"; do
	wait_until 60 _atleast 1 ": ${qid[$name]}: to=<u@$name\\.test>, .*status=deferred "
	read -r relay dsn reason <<<"${want[$name]}"
	[ "$relay" = peer ] && relay="$lost:${port[$name]}"
	tap_is "1: $name: deferred ($reason)" "$(deferred "$name")" \
		"relay=$relay, dsn=$dsn, status=deferred ($reason), tls=none"
	tap_is "1: $name: ternq show: still queued, deferred, the reason kept" \
		"$(rcpt state "${qid[$name]}"): $(rcpt delay_reason "${qid[$name]}")" "deferred: $reason"
	r=$(rss)
	[ "$r" -gt "$rss1" ] && rss1=$r
done

# --- 2. never a plain-text MAIL FROM under tls = encrypt | verify ----------------------

for name in tlsgarbenc tlsgarbver notlsenc notlsver; do
	tap_like "2: $name (tls = ${policy[$name]}): connections tried, no MAIL FROM received" \
		"$(grep -c ' connect$' "$top/$name.log") connections, $(grep -c ' < MAIL' "$top/$name.log") MAIL" \
		'^[1-9][0-9]* connections, 0 MAIL$'
done
tap_is "2: the garbled handshakes were garbage after STARTTLS" \
	"$(grep -c ' fault tlsgarbage$' "$top/tlsgarbenc.log" | sed 's/^[1-9][0-9]*$/yes/')" yes

# --- 3. bounded memory, still running ------------------------------------------------

# the endless and 100 MB replies came several times (retries); wait for a third
wait_until 60 _atleast 3 ": ${qid[hugeline]}: to=<u@hugeline\\.test>, .*status=deferred "
wait_until 60 _atleast 3 ": ${qid[endless]}: to=<u@endless\\.test>, .*status=deferred "
r=$(rss)
[ "$r" -gt "$rss1" ] && rss1=$r
tap_check "3: ternd's RSS stays within +50 MB of its start (${rss0} kB -> at most ${rss1} kB)" \
	test "$rss1" -lt $((rss0 + 51200))
tap_is "3: ternd is still running" "$(kill -0 "$TERND_PID" && echo yes)" yes

# --- 4. junk after the 220 to STARTTLS is dropped: the handshake succeeds ------------------

wait_until 30 _atleast 1 ": ${qid[junk220]}: removed$"
tap_like "4: junk220: sent over TLS" \
	"$(grep -E ": ${qid[junk220]}: to=<u@junk220\\.test>, " "$TERND_LOG")" \
	"relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${port[junk220]}, delay=[0-9.]+, delays=[0-9./]+, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok: queued as HOSTILE1\\), tls=full$"
tap_is "4: the peer saw STARTTLS, its junk, TLS, then EHLO and MAIL" \
	"$(sed -n '3,7p' "$top/junk220.log" | cut -c1-12 | tr '\n' '|')" \
	"1 < STARTTLS|1 fault junk|1 tls|1 < EHLO ter|1 < MAIL FRO|"

# --- 5. once the peers behave, every message is delivered, once ----------------------------

for name in "${!port[@]}"; do
	: >"$top/$name.behave"
done
python3 "$here/../lib/hostile_peer.py" "$refused_port" "$top/refused.log" ok >"$top/refused.out" 2>&1 &
tap_bg_register $!
for name in "${faulty[@]}"; do
	wait_until 60 _atleast 1 ": ${qid[$name]}: removed$"
done
for name in "${faulty[@]}"; do
	tap_is "5: $name: sent once the peer behaves, and the peer accepted it once" \
		"$(nlog ": ${qid[$name]}: to=<u@$name\\.test>, .*status=sent ") $(grep -c ' accepted$' "$top/$name.log")" "1 1"
done
for name in tlsgarbenc tlsgarbver notlsenc notlsver; do
	tap_is "5: $name: every MAIL FROM came after a TLS handshake on its connection" \
		"$(awk '$2 == "tls" { tls[$1] = 1 } $2 == "<" && $3 == "MAIL" && !tls[$1] { bad++ } END { print bad + 0 }' "$top/$name.log")" 0
done
# A stalled reply is cut at the timeout, long before its 120 octets (one a
# second) are complete: the timeout is a deadline on the whole reply.
for stage in greeting ehlo mail rcpt data dot; do
	log=$top/stall$stage.log
	tap_like "5: stall at $stage: ternd cut every stalled reply mid-way" \
		"$(grep -c "^[0-9]* fault stall:$stage\$" "$log") faults, $(grep -cE '^[0-9]+ stalled reply cut after ([0-9]|[1-9][0-9])/120 octets$' "$log") cut, $(grep -c 'stalled reply complete' "$log") complete" \
		'^([1-9][0-9]*) faults, \1 cut, 0 complete$'
done
tap_is "5: the queue is empty" "$(ternq_ list --json | wc -l)" 0
ternd_stop; rc=$?
tap_is "5: ternd stops cleanly" "$rc" 0
tap_done
