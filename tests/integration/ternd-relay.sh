#!/bin/bash
# ternd-relay.sh - ternd relays its queue to [peer NAME]s: smtp-sink
# instances that accept, hard-reject, soft-reject, drop the connection
# after the end of data or before the greeting, and a real Postfix
# smarthost with STARTTLS and an ECDSA certificate made here. One ternd
# (min_backoff = 2s) with a peer per behaviour, chosen by recipient domain:
#
#   1. plain relay (smtp-blast, swaks): content byte for byte, dots
#      un-stuffed, Postfix-style log lines, empty queue, connection reuse
#   2. 5xx: bounced; a DSN to the sender through another peer (whose first
#      host is down); DSN parameters relayed; no DSN for <> or NOTIFY=NEVER
#   3. 4xx: deferred, ternq shows the reply and next_attempt; retried
#   4. no reply to the final dot: deferred "may be delivered twice"; retried
#   5. STARTTLS: tls = verify against Postfix (right and wrong name), no
#      STARTTLS offered; tls = encrypt and may
#   6. a transaction whose recipients were all refused (Postfix, DATA)
#      leaves the connection usable for the next message
#   7. a peer that closes the connection before its greeting
#   8. max_queue_lifetime (after a reload): bounced with 4.4.7 and a DSN
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/postfix.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges, postfix start)"
for cmd in swaks smtp-sink smtp-source postfix openssl python3 ss; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
blast=${top_builddir:-$here/../..}/bench/smtp-blast
[ -x "$blast" ] || tap_skip_all "bench/smtp-blast not built"

top=$(tap_tmpdir)

# --- helpers --------------------------------------------------------------------

# blast_intact DIR - how many dumps in DIR hold smtp-blast's message (-s 10240)
blast_intact() {
	python3 - "$1" <<-'EOF'
		import os, re, sys
		want = b"From: blast@example.org\nTo: sink@example.com\nSubject: smtp-blast\n\n"
		while len(want) + want.count(b"\n") + 80 < 10240:
		    want += b"x" * 76 + b"\n"
		want += b"\n"
		n = 0
		for name in os.listdir(sys.argv[1]):
		    lines = open(os.path.join(sys.argv[1], name), "rb").read().split(b"\n")
		    if b"X-Mail-Args: <blast@example.org>" not in lines:
		        continue
		    i = 0
		    while lines[i].startswith(b"X-"):
		        i += 1
		    i += 3                      # smtp-sink's Received:
		    if lines[i].startswith(b"Received: "):
		        i += 1
		        while lines[i][:1] in (b" ", b"\t"):
		            i += 1
		    # smtp-blast's own Message-ID: <blast.PID.N.T@HOST>
		    if re.fullmatch(rb"Message-ID: <blast\.[0-9]+\.[0-9]+\.[0-9]+@[^>]+>", lines[i]):
		        i += 1
		    n += b"\n".join(lines[i:]) == want
		print(n)
	EOF
}

# send_py SUBJECT FROM TO[,TO...] MAILPARAMS RCPTPARAMS - one message with
# ESMTP parameters (swaks has no DSN options); "%s" in RCPTPARAMS becomes
# the recipient. Prints its queue id.
send_py() {
	python3 - "$TERND_PORT" "$@" <<-'EOF'
		import smtplib, sys
		port, subject, frm, tos, mopts, ropts = sys.argv[1:7]
		s = smtplib.SMTP("127.0.0.1", int(port), "client.test", timeout=15)
		s.ehlo()
		s.mail(frm, mopts.split())
		for to in tos.split(","):
		    s.rcpt(to, [o.replace("%s", to) for o in ropts.split()])
		code, resp = s.data(("From: <%s>\r\nTo: <%s>\r\nSubject: %s\r\n\r\n%s body\r\n"
		                     % (frm, tos, subject, subject)).encode())
		s.quit()
		if code == 250:
		    print(resp.decode().split()[-1])
	EOF
}

# dump_content FILE - a dumped message as sent by its author: without
# smtp-sink's X-* lines and Received:, and without the Received: ternd added
dump_content() {
	python3 - "$1" <<-'EOF'
		import sys
		lines = open(sys.argv[1], "rb").read().split(b"\n")
		i = 0
		while lines[i].startswith(b"X-"):
		    i += 1
		assert lines[i].startswith(b"Received: from "), lines[i]
		i += 3
		assert lines[i].startswith(b"Received: from "), lines[i]
		i += 1
		while lines[i][:1] in (b" ", b"\t"):
		    i += 1
		sys.stdout.buffer.write(b"\n".join(lines[i:]))
	EOF
}

# --- certificates: an ECDSA P-256 CA and smarthost.test signed by it --------------

pki=$top/pki
pki_make "$pki"
tap_check "openssl: server certificate for smarthost.test verifies against the CA" \
	openssl verify -CAfile "$pki/ca.pem" -verify_hostname smarthost.test "$pki/server.pem"

# --- the smarthost: Postfix with STARTTLS, discarding what it accepts -------------

pf=$top/pf
pf_port=$(free_port)
pf_create "$pf" "$pf_port"
pf_conf "$pf" "smtpd_tls_cert_file = $pki/server.pem" "smtpd_tls_key_file = $pki/server.key" \
	"smtpd_tls_security_level = may" "smtpd_tls_loglevel = 1" \
	"default_transport = discard" "relay_transport = discard" \
	"smtpd_recipient_restrictions = check_recipient_access inline:{nouser@one.test=REJECT}"
# a second smtpd without CHUNKING: ternd uses DATA there
pf_port2=$(free_port)
pf_master "$pf" "127.0.0.1:$pf_port2 inet n - n - - smtpd -o smtpd_discard_ehlo_keywords=chunking"
tap_check "postfix starts" pf_start "$pf"

# --- the sinks and ternd ------------------------------------------------------------

for s in plain hard dsn soft drop notls nogreet may warm wrapped backup flaky rated; do
	sink_port[$s]=$(free_port)
done
down_port=$(free_port)	# nothing listens there
sink plain "${sink_port[plain]}" "$top/plain"
sink hard "${sink_port[hard]}" "$top/hard" -f rcpt
sink dsn "${sink_port[dsn]}" "$top/dsn"
sink soft "${sink_port[soft]}" "$top/soft1" -r rcpt
sink drop "${sink_port[drop]}" "$top/drop1" -q .
sink notls "${sink_port[notls]}" "$top/notls"
sink nogreet "${sink_port[nogreet]}" "$top/nogreet" -q connect
sink may "${sink_port[may]}" "$top/may"
sink backup "${sink_port[backup]}" "$top/backup"
sink rated "${sink_port[rated]}" "$top/rated"
# (the flaky peer's sink starts later: first nothing listens there)
# stunnel4 in front of a sink: implicit TLS (tls_wrapper), as on port 465
sink wrapped "${sink_port[wrapped]}" "$top/wrapped"
smtps_port=$(free_port)
smtps "$smtps_port" "${sink_port[wrapped]}" "$pki"
tap_is "stunnel4 listens for implicit TLS" "$?" 0
# -t 3: the sink drops a connection silent for 3 s; only NOOPs keep it
sink warm "${sink_port[warm]}" "$top/warm" -t 3

# peer NAME PORT [lines...] - a [peer NAME] section for 127.0.0.1:PORT
# peer NAME PORT [lines] - connections open on demand only (min_idle = 0),
# so that each check counts just the connections its own mail made
peer() {
	printf '%s\n' "[peer $1]" "host = [127.0.0.1]" "port = $2" "min_idle = 0" "${@:3}"
}
TERND_PEERS=$(
	peer plain "${sink_port[plain]}" "tls = none" "max_connections = 4" \
		"helo_name = out.ternd.test"
	peer hard "${sink_port[hard]}" "tls = none" "max_connections = 1"
	# two hosts: the first refuses connections (nothing listens on 127.0.0.2)
	printf '%s\n' "[peer dsnsink]" "host = [127.0.0.2], [127.0.0.1]" "port = ${sink_port[dsn]}" \
		"tls = none" "min_idle = 0"
	peer soft "${sink_port[soft]}" "tls = none" "max_connections = 1"
	peer drop "${sink_port[drop]}" "tls = none" "max_connections = 1"
	peer smarthost "$pf_port" "tls = verify" "tls_ca_file = $pki/ca.pem" \
		"tls_servername = smarthost.test" "max_connections = 2"
	peer wrongname "$pf_port" "tls = verify" "tls_ca_file = $pki/ca.pem" \
		"tls_servername = wrong.test" "max_connections = 1"
	peer notls "${sink_port[notls]}" "tls = verify" "tls_ca_file = $pki/ca.pem" \
		"max_connections = 1"
	peer smarthost1 "$pf_port2" "tls = verify" "tls_ca_file = $pki/ca.pem" \
		"tls_servername = smarthost.test" "max_connections = 1"
	peer nogreet "${sink_port[nogreet]}" "tls = none" "max_connections = 1"
	peer down "$down_port" "tls = none" "max_connections = 1"
	# encrypt: TLS without verification (the name is wrong, there is no CA)
	peer encrypt "$pf_port" "tls = encrypt" "tls_servername = wrong.test" "max_connections = 1"
	peer may "${sink_port[may]}" "tls = may" "max_connections = 1"
	# min_idle: opened at start, kept warm with NOOP, no mail routed here
	printf '%s\n' "[peer warm]" "host = [127.0.0.1]" "port = ${sink_port[warm]}" "tls = none" \
		"max_connections = 3" "min_idle = 2" "keepalive_interval = 1s"
	peer wrapped "$smtps_port" "tls = verify" "tls_wrapper = yes" "tls_ca_file = $pki/ca.pem" \
		"tls_servername = smarthost.test" "tls_min_version = TLSv1.3" "max_connections = 1"
	peer backupsink "${sink_port[backup]}" "tls = none" "max_connections = 1"
	peer rated "${sink_port[rated]}" "tls = none" "max_connections = 4" "max_message_rate = 50/s"
	peer flaky "${sink_port[flaky]}" "tls = none" "max_connections = 1" "breaker_failures = 2" \
		"breaker_cooldown = 3s" "backup_peer = backupsink"
	printf '%s\n' "[routes]" "rated.test = rated" "flaky.test = flaky" "wrapped.test = wrapped" "example.com = plain" "example.org = dsnsink" "hard.test = hard" \
		"soft.test = soft" "drop.test = drop" "tls.test = smarthost" \
		"wrongname.test = wrongname" "notls.test = notls" "one.test = smarthost1" \
		"nogreet.test = nogreet" "down.test = down" "encrypt.test = encrypt" "may.test = may"
)
export TERND_PEERS
ternd_setup "$top/t" "min_backoff = 2s" "max_backoff = 4s" || exit 1

# warm_conns - connections established to the warm sink
warm_conns() {
	ss -Htn state established "sport = :${sink_port[warm]}" | wc -l
}
tap_check "0: min_idle = 2 opens two connections at start, with no mail" wait_until 5 \
	sh -c "[ \$(ss -Htn state established 'sport = :${sink_port[warm]}' | wc -l) -eq 2 ]"
sleep 5
tap_is "0: keepalive_interval NOOPs keep them open past the peer's 3 s timeout" "$(warm_conns)" 2
unset TERND_PEERS
tap_is "ternd starts a relay for each of the 18 peers" \
	"$(nlog ': peer [a-z0-9]+: relaying to \[127\.0\.0\.1\] port [0-9]+, tls (none|may|encrypt|verify), [0-9] connections?$')" 17
tap_is "... and dsnsink with its two hosts" \
	"$(nlog ': peer dsnsink: relaying to \[127\.0\.0\.2\], \[127\.0\.0\.1\] port [0-9]+, tls none, 16 connections$')" 1

# Postfix-style delivery lines: QID: to=<...>, relay=..., [conn_use=N, ]delay=..., delays=..., dsn=..., status=... (...), tls=...
q='[0-9A-Z]{13}'
relay_re() { # relay_re PORT - relay= for [127.0.0.1]:PORT
	printf '127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:%s' "$1"
}
d='(conn_use=[0-9]+, )?delay=[0-9.]+, delays=[0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+'

# --- 1. plain relay: 100 pipelined messages plus 3 with dot lines -----------------------

printf '%s\r\n' "From: dots@example.org" "To: dots1@example.com" "Subject: dots 1" "" \
	".leading dot" "..two dots" "." "a line after a lone dot" ". dot space" "end" >"$top/dots1.eml"
printf '%s\r\n' "From: dots@example.org" "To: dots2@example.com" "Subject: dots 2" "" \
	"." ".." "..." "x" "." >"$top/dots2.eml"
# dots 3: about 300 KB (a spool file of its own), every line a dot line, so
# that dots meet the sender's 64 KB read boundaries
{
	printf '%s\r\n' "From: dots@example.org" "To: dots3@example.com" "Subject: dots 3" ""
	for ((i = 0; i < 12000; i++)); do
		printf '.%d\r\n..%d\r\n' "$i" "$((i * 7))"
	done
} >"$top/dots3.eml"
# (smtp-blast is a tool here, not under test: its leak reports under ASan
# would replace its summary line)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
	"$blast" -c 4 -n 100 "127.0.0.1:$TERND_PORT" >"$top/blast.out" 2>&1
tap_like "smtp-blast: 100 messages accepted" "$(cat "$top/blast.out")" '^messages=100 accepted=100 failed=0 '
dqid=()
for i in 1 2 3; do
	{ cat "$top/dots$i.eml"; printf '.\r\n'; } >"$top/dots$i.data"
	dqid[i]=$(send "dots$i" dots@example.org "dots$i@example.com" --data @"$top/dots$i.data")
done
tap_like "swaks: 3 messages with dot lines queued" "${dqid[*]}" "^$q $q $q\$"

wait_until 30 _atleast 103 ": $q: removed$"
tap_is "1: 103 transactions arrive at the sink" "$(files "$top/plain")" 103
tap_is "1: ternq: the queue is empty" "$(ternq_ list --json | wc -l)" 0
tap_is "1: ternq list says so, and only that (no heading)" "$(ternq_ list)" "Mail queue is empty"
sent_re=": ($q): to=<[^>]+@example\\.com>, relay=$(relay_re "${sink_port[plain]}"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok\\), tls=none$"
tap_is "1: 103 status=sent lines, Postfix style" "$(nlog "$sent_re")" 103
sent_ids=$(grep -E "$sent_re" "$TERND_LOG" | sed -E 's/^.*: ([0-9A-Z]{13}): to=.*/\1/' | sort)
removed_ids=$(grep -E ": $q: removed$" "$TERND_LOG" | sed -E 's/^.*: ([0-9A-Z]{13}): removed$/\1/' | sort)
tap_is "1: 103 distinct queue ids were sent" "$(uniq <<<"$sent_ids" | wc -l)" 103
tap_is "1: each sent message has its QID: removed line, and only those" "$removed_ids" "$sent_ids"
for i in 1 2 3; do
	tap_is "1: dots $i: logged sent to <dots$i@example.com>" \
		"$(nlog ": ${dqid[i]}: to=<dots$i@example\\.com>, relay=$(relay_re "${sink_port[plain]}"), $d, dsn=2\\.0\\.0, status=sent .*, tls=none$")" 1
	f=$(grep -l "^Subject: dots $i\$" "$top"/plain/* | head -1)
	dump_content "$f" >"$top/dots$i.got"
	{ tr -d '\r' <"$top/dots$i.eml"; echo; } >"$top/dots$i.want"
	tap_check "1: dots $i: the content arrives byte for byte, dots un-stuffed" \
		cmp "$top/dots$i.want" "$top/dots$i.got"
done
tap_is "1: the 100 smtp-blast messages arrive intact" "$(blast_intact "$top/plain")" 100
tap_is "1: the envelope: MAIL FROM without parameters (no SIZE offered)" \
	"$(cat "$top"/plain/* | grep -c '^X-Mail-Args: <blast@example\.org>$')" 100
tap_is "1: one RCPT per transaction" "$(cat "$top"/plain/* | grep -c '^X-Rcpt-Args: <')" 103
tap_is "1: helo_name is sent in EHLO" "$(cat "$top"/plain/* | grep -c '^X-Helo-Args: out\.ternd\.test$')" 103
# Connection reuse: smtp-sink's -c counters count sessions when they end,
# and ss the ones still open (idle_timeout is 60s): at most max_connections.
_plain_done() {
	[[ $(counters plain) =~ mesg=103$ ]]
}
wait_until 10 _plain_done
plain_open=$(ss -Htn state established "sport = :${sink_port[plain]}" | wc -l)
tap_like "1: connections reused: sessions ended + open = at most max_connections (4) for 103 messages" \
	"$(counters plain | sed -E 's/^sess=([0-9]+) .*/\1/') + $plain_open" '^0 \+ [1-4]$'

# --- 2. 5xx: bounced, a DSN to the sender via another peer; none for <> ------------------

# One message for two peers, with DSN parameters: sent to zoe (plain),
# refused for bob (hard). dsnsink's first host refuses connections.
bqid=$(send_py "hard 1" alice@example.org bob@hard.test,zoe@example.com \
	"RET=HDRS ENVID=relay-test-1" "NOTIFY=FAILURE,DELAY ORCPT=rfc822;%s")
tap_like "2: a message for bob@hard.test and zoe@example.com is queued" "$bqid" "^$q\$"
wait_until 10 _atleast 1 ": $bqid: removed$"
tap_is "2: RCPT 500 5.3.0: logged bounced" \
	"$(nlog ": $bqid: to=<bob@hard\\.test>, relay=$(relay_re "${sink_port[hard]}"), $d, dsn=5\\.3\\.0, status=bounced \\(500 5\\.3\\.0 Error: command failed\\), tls=none$")" 1
tap_is "2: the other recipient is sent by its own peer" \
	"$(nlog ": $bqid: to=<zoe@example\\.com>, relay=$(relay_re "${sink_port[plain]}"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok\\), tls=none$")" 1
tap_is "2: the message is removed once" "$(nlog ": $bqid: removed$")" 1
f=$(grep -l '^Subject: hard 1$' "$top"/plain/* | head -1)
tap_is "2: MAIL parameters are relayed to a peer that offers DSN" \
	"$(grep '^X-Mail-Args: ' "${f:-/dev/null}")" "X-Mail-Args: <alice@example.org> RET=HDRS ENVID=relay-test-1"
tap_is "2: RCPT parameters are relayed, for that peer's recipient only" \
	"$(grep '^X-Rcpt-Args: ' "${f:-/dev/null}")" "X-Rcpt-Args: <zoe@example.com> NOTIFY=FAILURE,DELAY ORCPT=rfc822;zoe@example.com"
# (bob's thread may log this after zoe's thread removed the message)
wait_until 10 _atleast 1 ": $bqid: sender non-delivery notification: "
dsnqid=$(sed -nE "s/^.*: $bqid: sender non-delivery notification: ($q)\$/\\1/p" "$TERND_LOG")
tap_like "2: a non-delivery notification is queued" "$dsnqid" "^$q\$"
tap_is "2: ... from <> to the sender" "$(nlog ": $dsnqid: from=<>, size=[0-9]+, nrcpt=1 \\(queue active\\)$")" 1
wait_until 10 _atleast 1 ": $dsnqid: removed$"
tap_is "2: the DSN is relayed to the sender's peer (dsnsink, its second host)" \
	"$(nlog ": $dsnqid: to=<alice@example\\.org>, relay=$(relay_re "${sink_port[dsn]}"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok\\), tls=none$")" 1
tap_is "2: the hard-rejecting sink got no message content" \
	"$(cat "$top"/hard/* 2>/dev/null | grep -c '^Subject: hard')" 0
tap_is "2: dsnsink got one message" "$(files "$top/dsn")" 1
f=$(find "$top/dsn" -type f | head -1)
hdrs=$(sed -n '/^$/q;p' "$f")
tap_like "2: DSN envelope: MAIL FROM:<>" "$hdrs" $'\nX-Mail-Args: <>\n'
tap_like "2: DSN envelope: RCPT TO:<alice@example.org>" "$hdrs" $'\nX-Rcpt-Args: <alice@example\\.org>\n'
tap_like "2: DSN From: MAILER-DAEMON" "$hdrs" $'\nFrom: MAILER-DAEMON@ternd\\.test \\(Mail Delivery System\\)\n'
tap_like "2: DSN To: the sender" "$hdrs" $'\nTo: <alice@example\\.org>\n'
tap_like "2: DSN Subject" "$hdrs" $'\nSubject: Undelivered Mail Returned to Sender\n'
tap_like "2: DSN is multipart/report; report-type=delivery-status" "$hdrs" \
	$'\nContent-Type: multipart/report; report-type=delivery-status;\n\tboundary="[^"]+"\n'
report=$(sed -n '/^Content-Type: message\/delivery-status$/,/^--/p' "$f")
tap_like "2: delivery-status: the message's ENVID" "$report" $'\nOriginal-Envelope-Id: relay-test-1\n'
tap_like "2: delivery-status: Final-Recipient, Original-Recipient, Action, Status, Remote-MTA, Diagnostic-Code" "$report" \
	$'\nFinal-Recipient: rfc822; bob@hard\\.test\nOriginal-Recipient: rfc822;bob@hard\\.test\nAction: failed\nStatus: 5\\.3\\.0\nRemote-MTA: dns; 127\\.0\\.0\\.1\nDiagnostic-Code: smtp; 500 5\\.3\\.0 Error: command failed\n'
tap_is "2: delivery-status: only the bounced recipient" "$(grep -c '^Final-Recipient:' <<<"$report")" 1
# RET=HDRS: the original's headers only
tap_like "2: the DSN returns the original's headers" "$(cat "$f")" \
	$'\nContent-Type: text/rfc822-headers\n\nReceived: from [^\n]*\n\tby ternd\\.test \\(tern\\) with ESMTP id '"$bqid"$'[;\n](.*\n)*Subject: hard 1\n'
tap_is "2: ... and not its body" "$(grep -c '^hard 1 body$' "$f")" 0

# (the same connection as the bounce above: max_connections = 1, idle_timeout 60s)
nqid=$(send hard2 '<>' carol@hard.test --header "Subject: hard 2")	# swaks: '<>' is the null sender
tap_like "2: a message from <> is queued" "$nqid" "^$q\$"
wait_until 10 _atleast 1 ": $nqid: removed$"
tap_is "2: <>: logged bounced by the sink's RCPT reply" \
	"$(grep -E ": $nqid: to=<carol@hard\\.test>, " "$TERND_LOG" | sed -E 's/^.*: ([0-9A-Z]{13}): /\1: /; s/(conn_use=[0-9]+, )?delay=[^,]*, delays=[^,]*/delay=D/')" \
	"$nqid: to=<carol@hard.test>, relay=127.0.0.1[127.0.0.1]:${sink_port[hard]}, delay=D, dsn=5.3.0, status=bounced (500 5.3.0 Error: command failed), tls=none"
tap_is "2: <>: no notification is queued" "$(nlog ": $nqid: sender non-delivery")" 0
vqid=$(send_py "hard 3" alice@example.org dan@hard.test "" "NOTIFY=NEVER")
wait_until 10 _atleast 1 ": $vqid: removed$"
tap_is "2: NOTIFY=NEVER: bounced" "$(nlog ": $vqid: to=<dan@hard\\.test>, .*status=bounced ")" 1
tap_is "2: NOTIFY=NEVER: no notification is queued" "$(nlog ": $vqid: sender non-delivery")" 0
sleep 1
tap_is "2: dsnsink still has one message" "$(files "$top/dsn")" 1
tap_is "2: only one from=<> (the DSN) in the log, besides the message from <>" \
	"$(grep -E ": $q: from=<>, " "$TERND_LOG" | grep -vc ": $nqid: ")" 1

# --- 3. 4xx: deferred with the reply, retried after min_backoff ------------------------

t0=$EPOCHREALTIME
sqid=$(send soft1 dave@example.org erin@soft.test --header "Subject: soft 1")
wait_until 10 _atleast 1 ": $sqid: to=<erin@soft\\.test>, .*status=deferred "
t1=$EPOCHREALTIME
ternq_ show "$sqid" --json >"$top/soft.json"
ternq_ list --json >"$top/soft.list"
# the sink recovers before the first retry (1.6 s at the earliest)
sink_stop soft
sink soft "${sink_port[soft]}" "$top/soft2"
tap_is "3: RCPT 450 4.3.0: logged deferred" \
	"$(nlog ": $sqid: to=<erin@soft\\.test>, relay=$(relay_re "${sink_port[soft]}"), $d, dsn=4\\.3\\.0, status=deferred \\(450 4\\.3\\.0 Error: command failed\\), tls=none$")" 1
tap_is "3: ternq show --json: deferred, one attempt, the reply as delay_reason" \
	"$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); r=m["recipients"][0]; print(m["state"], r["address"], r["state"], r["peer"], r["attempts"], r["delay_reason"])' "$top/soft.json")" \
	"deferred erin@soft.test deferred soft 1 450 4.3.0 Error: command failed"
na=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["recipients"][0]["next_attempt"])' "$top/soft.json")
# next_attempt is in whole seconds: attempt time + 2 s +-20%
tap_check "3: next_attempt is min_backoff (2s +-20%) after the attempt: $na in [$t0 + 1.6, $t1 + 2.4]" \
	python3 -c 'import sys, math; na, t0, t1 = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); sys.exit(not (math.floor(t0 + 1.6) <= na <= t1 + 2.4 and na + 1 > t1))' \
	"$na" "$t0" "$t1"
tap_like "3: ternq list --json: the message is deferred" "$(grep "\"$sqid\"" "$top/soft.list")" '"state": *"deferred"'
wait_until 15 _atleast 1 ": $sqid: removed$"
tap_is "3: after the sink recovers, delivered by a retry" \
	"$(nlog ": $sqid: to=<erin@soft\\.test>, relay=$(relay_re "${sink_port[soft]}"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok\\), tls=none$")" 1
# The old sink closed ternd's cached connection when it stopped; that dead
# connection must not cost an attempt (Postfix retries on a new one at once).
tap_is "3: no attempt is lost on the cached connection the old sink closed" \
	"$(grep -E ": $sqid: to=<erin@soft\\.test>, .*status=deferred \\(lost connection" "$TERND_LOG")" ""
tap_is "3: the recovered sink has the message" "$(grep -l '^Subject: soft 1$' "$top"/soft2/* 2>/dev/null | wc -l)" 1
tap_is "3: the queue is empty" "$(ternq_ list --json | wc -l)" 0
tap_is "3: no DSN for a deferral" "$(files "$top/dsn")" 1

# --- 4. connection lost after the end of data: deferred, "may be delivered twice" --------

rqid=$(send drop1 frank@example.org grace@drop.test --header "Subject: drop 1")
wait_until 10 _atleast 1 ": $rqid: to=<grace@drop\\.test>, .*status=deferred "
tap_is "4: no reply to the final dot: deferred, may be delivered twice" \
	"$(grep -E ": $rqid: to=<grace@drop\\.test>, .*status=deferred " "$TERND_LOG" | head -1 | sed -E 's/^.*: ([0-9A-Z]{13}): /\1: /; s/(conn_use=[0-9]+, )?delay=[^,]*, delays=[^,]*/delay=D/')" \
	"$rqid: to=<grace@drop.test>, relay=127.0.0.1[127.0.0.1]:${sink_port[drop]}, delay=D, dsn=4.4.2, status=deferred (lost connection with 127.0.0.1[127.0.0.1] while receiving the reply (the message may be delivered twice)), tls=none"
tap_is "4: ternq: still queued, deferred" "$(rcpt_json "$rqid" state)" deferred
sink_stop drop
sink drop "${sink_port[drop]}" "$top/drop2"
wait_until 15 _atleast 1 ": $rqid: removed$"
tap_is "4: delivered on retry once the sink behaves" \
	"$(nlog ": $rqid: to=<grace@drop\\.test>, relay=$(relay_re "${sink_port[drop]}"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok\\), tls=none$")" 1
tap_is "4: the behaving sink has it once" "$(grep -l '^Subject: drop 1$' "$top"/drop2/* 2>/dev/null | wc -l)" 1

# --- 5. STARTTLS with certificate verification ----------------------------------------

smtp-source -m 20 -s 2 -f henry@example.org -t ivan@tls.test "127.0.0.1:$TERND_PORT" \
	>"$top/source.out" 2>&1
wait_until 20 _atleast 20 ": $q: to=<ivan@tls\\.test>, .*status=sent "
# (Postfix offers CHUNKING: its reply to BDAT LAST says how many bytes)
tls_re=": $q: to=<ivan@tls\\.test>, relay=$(relay_re "$pf_port"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok: ([0-9]+ bytes )?queued as [0-9A-Za-z]+\\), tls=(full|resumed)$"
tap_is "5: 20 messages sent to Postfix with tls=full or resumed" "$(nlog "$tls_re")" 20
tap_is "5: nothing else was logged for them" "$(nlog ": $q: to=<ivan@tls\\.test>, ")" 20
wait_until 10 _pf_atleast 20 'postfix/discard\[[0-9]+\]: [0-9A-Za-z]+: to=<ivan@tls\.test>, .*status=sent'
tap_is "5: Postfix received 20 messages" "$(pf_count 'postfix/smtpd\[[0-9]+\]: [0-9A-Za-z]+: client=')" 20
tap_is "5: ... and discarded them" "$(pf_count 'postfix/discard\[[0-9]+\]: [0-9A-Za-z]+: to=<ivan@tls\.test>, .*status=sent')" 20
nconn=$(pf_count 'postfix/smtpd\[[0-9]+\]: connect from ')
tap_like "5: Postfix saw at most 2 connections (max_connections = 2)" "$nconn" '^[12]$'
tap_is "5: every connection used TLS (Postfix's smtpd log)" \
	"$(pf_count 'postfix/smtpd\[[0-9]+\]: (Anonymous|Trusted|Untrusted|Verified) TLS connection established from ')" "$nconn"

before=$(pf_count 'postfix/smtpd\[[0-9]+\]: [0-9A-Za-z]+: client=')
wqid=$(send wrong1 judy@example.org kim@wrongname.test --header "Subject: wrong name")
wait_until 10 _atleast 1 ": $wqid: to=<kim@wrongname\\.test>, .*status=deferred "
tap_is "5: tls_servername = wrong.test: deferred, the certificate does not verify" \
	"$(nlog ": $wqid: to=<kim@wrongname\\.test>, relay=none, $d, dsn=4\\.4\\.1, status=deferred \\(TLS certificate of 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:[0-9]+ does not verify for wrong\\.test: hostname mismatch\\), tls=none$")" 1
tap_like "5: ternq: the recipient stays deferred with that reason" \
	"$(rcpt_json "$wqid" state) $(rcpt_json "$wqid" delay_reason)" \
	'^deferred TLS certificate of 127\.0\.0\.1\[127\.0\.0\.1\]:[0-9]+ does not verify for wrong\.test: hostname mismatch$'
sleep 1
tap_is "5: Postfix received nothing more" "$(pf_count 'postfix/smtpd\[[0-9]+\]: [0-9A-Za-z]+: client=')" "$before"
tap_is "5: ... and no MAIL from ternd reached it" "$(pf_count 'judy@example\.org')" 0

tqid=$(send notls1 leo@example.org mia@notls.test --header "Subject: no starttls")
wait_until 10 _atleast 1 ": $tqid: to=<mia@notls\\.test>, .*status=deferred "
tap_is "5: tls = verify, no STARTTLS offered: deferred" \
	"$(nlog ": $tqid: to=<mia@notls\\.test>, relay=none, $d, dsn=4\\.4\\.1, status=deferred \\(TLS is required \\(tls = verify\\) but 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\] does not offer STARTTLS\\), tls=none$")" 1
tap_is "5: ternq: deferred, does not offer STARTTLS" "$(rcpt_json "$tqid" delay_reason)" \
	"TLS is required (tls = verify) but 127.0.0.1[127.0.0.1] does not offer STARTTLS"
tap_is "5: the plain sink got no transaction (no MAIL FROM)" "$(files "$top/notls")" 0
tap_like "5: ... it saw only sessions without a message" "$(counters notls)" 'mesg=0$'

eqid=$(send encrypt1 nora@example.org olga@encrypt.test --header "Subject: encrypt")
mqid=$(send may1 nora@example.org pia@may.test --header "Subject: may")
wait_until 10 _atleast 1 ": $eqid: to=<olga@encrypt\\.test>, "
wait_until 10 _atleast 1 ": $mqid: to=<pia@may\\.test>, "
tap_like "5: tls = encrypt: TLS without verifying the name" "$(grep -E ": $eqid: to=" "$TERND_LOG")" \
	"relay=$(relay_re "$pf_port"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok: ([0-9]+ bytes )?queued as [0-9A-Za-z]+\\), tls=full$"
tap_like "5: tls = may, no STARTTLS offered: sent in clear" "$(grep -E ": $mqid: to=" "$TERND_LOG")" \
	"relay=$(relay_re "${sink_port[may]}"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok\\), tls=none$"
tap_is "5: tls = may: the sink has it" "$(grep -l '^Subject: may$' "$top"/may/* 2>/dev/null | wc -l)" 1

# --- 6. a transaction whose recipients were all refused leaves the connection usable ---

# smarthost1 has one connection; Postfix refuses nouser@one.test. The next
# message on that connection must not meet a half-open transaction.
mxqid=$(send one0 '' nouser@one.test,ok1@one.test --header "Subject: one 0")
wait_until 10 _atleast 1 ": $mxqid: removed$"
tap_like "6: pipelined RCPTs: the refused one is bounced" "$(grep -E ": $mxqid: to=<nouser@one\\.test>, " "$TERND_LOG")" \
	"relay=$(relay_re "$pf_port2"), $d, dsn=5\\.7\\.1, status=bounced \\(554 5\\.7\\.1 <nouser@one\\.test>: Recipient address rejected: Access denied\\), tls=full$"
tap_like "6: ... and the accepted one sent with DATA" "$(grep -E ": $mxqid: to=<ok1@one\\.test>, " "$TERND_LOG")" \
	"relay=$(relay_re "$pf_port2"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok: queued as [0-9A-Za-z]+\\), tls=full$"
aqid=$(send one1 '' nouser@one.test --header "Subject: one 1")
wait_until 10 _atleast 1 ": $aqid: removed$"
tap_like "6: Postfix refuses the only recipient: bounced" \
	"$(grep -E ": $aqid: to=<nouser@one\\.test>, " "$TERND_LOG")" \
	"relay=$(relay_re "$pf_port2"), $d, dsn=5\\.7\\.1, status=bounced \\(554 5\\.7\\.1 <nouser@one\\.test>: Recipient address rejected: Access denied\\), tls=full$"
oqid=$(send one2 '' ok@one.test --header "Subject: one 2")
wait_until 10 _atleast 1 ": $oqid: (removed|to=.*status=deferred )"
tap_like "6: the next message on the same connection is sent" \
	"$(grep -E ": $oqid: to=<ok@one\\.test>, " "$TERND_LOG")" \
	"relay=$(relay_re "$pf_port2"), $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok: ([0-9]+ bytes )?queued as [0-9A-Za-z]+\\), tls=full$"

# --- 7. a peer that closes the connection before its greeting ------------------------

gqid=$(send nogreet1 nina@example.org omar@nogreet.test --header "Subject: no greeting")
wait_until 10 _atleast 1 ": $gqid: to=<omar@nogreet\\.test>, "
tap_is "7: no greeting: deferred, lost connection while receiving the reply" \
	"$(grep -E ": $gqid: to=<omar@nogreet\\.test>, " "$TERND_LOG" | head -1 | sed -E 's/^.*: ([0-9A-Z]{13}): /\1: /; s/(conn_use=[0-9]+, )?delay=[^,]*, delays=[^,]*/delay=D/')" \
	"$gqid: to=<omar@nogreet.test>, relay=none, delay=D, dsn=4.4.1, status=deferred (lost connection with 127.0.0.1[127.0.0.1] while receiving the reply), tls=none"
tap_is "7: ternq: still queued, deferred" "$(rcpt_json "$gqid" state)" deferred

# --- 8. max_queue_lifetime: a recipient still deferred is bounced, with a DSN ----------

# Clear what is still deferred, then reload with a 4 s queue lifetime. The
# peer "down" refuses connections: each attempt is deferred until then.
for id in "$wqid" "$tqid" "$gqid"; do
	ternq_ delete "$id" 2>/dev/null
done
sed -i 's/^max_backoff = 4s$/max_backoff = 4s\nmax_queue_lifetime = 4s/' "$TERND_CONF"
kill -HUP "$TERND_PID"
wait_until 5 _atleast 1 ": configuration reloaded from "
xqid=$(send expire1 paul@example.org quinn@down.test --header "Subject: expire 1")
wait_until 15 _atleast 1 ": $xqid: removed$"
tap_like "8: deferred while the peer is down" \
	"$(grep -E ": $xqid: to=<quinn@down\.test>, " "$TERND_LOG" | head -1)" \
	"relay=none, $d, dsn=4\\.4\\.1, status=deferred \\(connect to 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:$down_port: Connection refused\\), tls=none$"
tap_like "8: the attempt at the end of the lifetime bounces the recipient with 4.4.7" \
	"$(grep -E ": $xqid: to=<quinn@down\.test>, " "$TERND_LOG" | tail -1)" \
	"relay=none, $d, dsn=4\\.4\\.7, status=expired \\(message expired in the queue; last reason: connect to 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:$down_port: Connection refused\\), tls=none$"
# The scheduler queues the notification after the bounce's commit, so
# after "removed": wait for its own line.
wait_until 15 _atleast 1 ": $xqid: sender non-delivery notification: "
xdsn=$(sed -nE "s/^.*: $xqid: sender non-delivery notification: ($q)\$/\\1/p" "$TERND_LOG")
tap_like "8: a non-delivery notification is queued for the expired recipient" "$xdsn" "^$q\$"
[ -n "$xdsn" ] && wait_until 10 _atleast 1 ": $xdsn: removed$"
f=$(grep -l '^To: <paul@example\.org>$' "$top"/dsn/* 2>/dev/null | head -1)
tap_like "8: the DSN reaches the sender: Action failed, Status 4.4.7" \
	"$(sed -n '/^Final-Recipient:/,/^$/p' "${f:-/dev/null}")" \
	$'^Final-Recipient: rfc822; quinn@down\\.test\nAction: failed\nStatus: 4\\.4\\.7\n'

# --- 10. implicit TLS (tls_wrapper) through stunnel4 ------------------------------------
for i in 1 2 3; do
	wqid[$i]=$(send "wrapped$i" w@example.org "w$i@wrapped.test" --header "Subject: wrapped $i")
done
wait_until 15 _atleast 3 ": [0-9A-Z]+: to=<w[123]@wrapped\.test>, .* status=sent "
tap_is "10: three messages through implicit TLS, each verified" \
	"$(nlog ": [0-9A-Z]+: to=<w[123]@wrapped\.test>, relay=127\.0\.0\.1\[127\.0\.0\.1\]:$smtps_port, $d, dsn=2\.0\.0, status=sent .*, tls=(full|resumed)$")" 3
tap_is "10: the sink behind stunnel4 got them" "$(grep -l '^Subject: wrapped [123]$' "$top"/wrapped/* 2>/dev/null | wc -l)" 3

# --- 12. max_message_rate = 50/s, over 10 s ----------------------------------------------
"$blast" -c 4 -n 550 -s 2048 -d rated.test "127.0.0.1:$TERND_PORT" >"$top/rated.blast" 2>&1
wait_until 30 sh -c "[ \$(ls '$top/rated' | wc -l) -ge 550 ]"
rate=$(python3 - "$top/rated" <<'PYEOF'
import os, sys
t = sorted(os.stat(os.path.join(sys.argv[1], f)).st_mtime_ns for f in os.listdir(sys.argv[1]))
print("%.1f" % ((len(t) - 1) / ((t[-1] - t[0]) / 1e9)) if len(t) > 1 else "0")
PYEOF
)
tap_like "12: 550 messages arrived at the rate-limited peer" "$(ls "$top/rated" | wc -l)" '^550$'
tap_check "12: the measured send rate is 50/s within 10% ($rate/s)" \
	python3 -c "import sys; sys.exit(not 45 <= $rate <= 55)"

# --- 11. circuit breaker and backup peer ---------------------------------------------
bqid=$(send breaker1 b@example.org one@flaky.test --header "Subject: breaker 1")
wait_until 20 _atleast 1 ": $bqid: removed$"
tap_is "11: two connection failures open the breaker (breaker_failures = 2)" \
	"$(nlog ': warning: peer flaky: circuit breaker open for 3s after 2 failures \(connect to 127\.0\.0\.1\[127\.0\.0\.1\]:[0-9]+: Connection refused\); its mail goes to backupsink$')" 1
tap_like "11: while it is open, the mail goes to the backup peer" \
	"$(grep -E ": $bqid: to=<one@flaky\.test>, " "$TERND_LOG" | tail -1)" \
	"relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${sink_port[backup]}, $d, dsn=2\\.0\\.0, status=sent .*, tls=none$"
tap_is "11: the backup sink has it" "$(grep -l '^Subject: breaker 1$' "$top"/backup/* 2>/dev/null | wc -l)" 1
sink flaky "${sink_port[flaky]}" "$top/flaky"	# the peer recovers
sleep 4							# past the 3 s cooldown
bqid2=$(send breaker2 b@example.org two@flaky.test --header "Subject: breaker 2")
wait_until 15 _atleast 1 ": $bqid2: removed$"
tap_is "11: after the cooldown one probe goes through and the breaker closes" \
	"$(nlog ': peer flaky: circuit breaker (half-open: probing|closed)$')" 2
tap_is "11: mail goes to the recovered peer again" \
	"$(grep -l '^Subject: breaker 2$' "$top"/flaky/* 2>/dev/null | wc -l)" 1

# --- 9. TLS sessions survive a restart ----------------------------------------------
# The smarthost's ticket was sealed into the queue database: the first
# connection after a restart resumes instead of a full handshake.
ternd_restart
rqid=$(send resume r@example.org after-restart@tls.test --header "Subject: resume")
wait_until 15 _atleast 1 ": $rqid: removed$"
tap_like "9: the first connection after a restart resumes the kept TLS session" \
	"$(grep -E ": $rqid: to=<after-restart@tls\.test>, " "$TERND_LOG" | tail -1)" \
	"dsn=2\\.0\\.0, status=sent .*, tls=resumed$"
tap_is "9: the session key was created 0600" "$(stat -c %a "$TERND_DIR/state/session.key")" 600

# --- the end ---------------------------------------------------------------------------

ternd_stop
tap_is "ternd stops cleanly" "$?" 0
_plain_quit() {
	[[ $(counters plain) =~ ^sess=$plain_open\  ]]
}
wait_until 5 _plain_quit
tap_is "1: ternd's connections to the plain sink ended with QUIT when it stopped" \
	"$(counters plain)" "sess=$plain_open quit=$plain_open mesg=104"
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
