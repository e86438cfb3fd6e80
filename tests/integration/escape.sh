#!/bin/bash
# escape.sh - text from mail never reaches a terminal or a log raw, and an
# envelope address cannot change how log tools count a line (issue 14,
# items 4 and 5). One message goes to ternd over SMTP with
#   - a Message-ID holding a title-setting OSC (ESC ] 2 ; ... BEL) and a
#     colour code (ESC [ 31 m),
#   - a sender "evil>, size=99999 ..." (a quoted local part that would set
#     pflogsumm's message size) and a recipient (domain) holding U+009B (CSI
#     as a C1 control, which UTF-8 terminals obey; the only control that
#     SMTPUTF8 lets into an address),
#   - a recipient with the quoted local part
#     "x>, relay=r, delay=1, status=sent (x)", which the scripted peer
#     refuses (550) with a reply holding ESC, colour codes and
#     ", tls=full, status=sent (x" of its own,
#   - ok@ (sent) and later@ (deferred by a 450 holding ESC ] 2 ; ... BEL,
#     so it stays queued).
# Then:
#   - no octet below 0x20 but newline, no DEL, no C1 control and nothing
#     that is not UTF-8 in ternq list, show, trace, stats, tern-report's
#     text, ternd's log_file and its stderr; the escapes are visible as \xHH
#   - ternq show --json and trace --json keep the exact values
#   - pflogsumm on the log_file, and tern-report, count the quoted
#     address as bounced, not delivered: 1 delivered, 1 deferred, 1 bounced;
#     pflogsumm takes the message's real size, not the sender's 99999
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
chat=$here/../lib/smtp_chat.py
report=${top_builddir:-$here/../..}/src/report/tern-report

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in python3 pflogsumm; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
ensure_tern_user || tap_skip_all "cannot create the tern user"

top=$(tap_tmpdir)

# --- the peer: 550 for the quoted address, 450 for later@, else 250 ----------
peer_port=$(free_port)
cat >"$top/peer.py" <<'PYEOF'
import socketserver, sys

class Peer(socketserver.StreamRequestHandler):
    def say(self, line):
        self.wfile.write(line + b"\r\n")
        self.wfile.flush()

    def handle(self):
        self.say(b"220 peer.test ESMTP")
        while True:
            line = self.rfile.readline()
            if not line:
                return
            verb = line[:4].upper()
            if verb in (b"EHLO", b"HELO"):
                self.say(b"250-peer.test")
                self.say(b"250-8BITMIME")
                self.say(b"250 SMTPUTF8")
            elif verb in (b"MAIL", b"RSET", b"NOOP"):
                self.say(b"250 2.0.0 Ok")
            elif verb == b"RCPT":
                if b"status=sent" in line:
                    self.say(b"550 5.1.1 \x1b[31mno such user\x1b[0m\x07, tls=full, status=sent (x")
                elif b"<later" in line:
                    self.say(b"450 4.2.0 \x1b]2;owned\x07 try later")
                else:
                    self.say(b"250 2.1.5 Ok")
            elif verb == b"DATA":
                self.say(b"354 go ahead")
                while self.rfile.readline() not in (b".\r\n", b""):
                    pass
                self.say(b"250 2.0.0 Ok: queued as PEER1")
            elif verb == b"QUIT":
                self.say(b"221 2.0.0 Bye")
                return
            else:
                self.say(b"502 5.5.2 Error: command not recognized")

class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

Server(("127.0.0.1", int(sys.argv[1])), Peer).serve_forever()
PYEOF
python3 "$top/peer.py" "$peer_port" >"$top/peer.log" 2>&1 &
tap_bg_register $!
tap_check "the scripted peer listens" wait_for_port "$peer_port"

# the DSN to the sender stays queued (a peer without a host), the rest goes to the peer
TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $peer_port" "tls = none" \
	"min_idle = 0" "max_connections = 1" "[peer keep]" "[routes]" "senders.test = keep" "* = sink")
ternd_setup "$top/ternd" "min_backoff = 1h" "max_backoff = 2h" "[global]" \
	"syslog_name = postfix/tern" "log_file = $top/ternd.syslog" || exit 1

# nlog REGEX - lines of ternd's log matching the extended REGEX
nlog() {
	grep -cE "$1" "$TERND_LOG"
}

# _atleast N REGEX - ternd's log has at least N lines matching REGEX
_atleast() {
	[ "$(nlog "$2")" -ge "$1" ]
}

# the hostile values, as Python literals (for the checks) and as sent
msgid='<\x1b]2;pwned\x07\x1b[31m@evil.test>'
sender='"evil>, size=99999 \xc2\x9b31m"@senders.test'
later='later@c\xc2\x9b32m.test'
quoted='"x>, relay=r, delay=1, status=sent (x)"@example.com'
cat >"$top/send.chat" <<EOF
<<
> EHLO client.test\r\n
<
> MAIL FROM:<$sender> SMTPUTF8\r\n
<
> RCPT TO:<ok@example.com>\r\n
<
> RCPT TO:<$later>\r\n
<
> RCPT TO:<$quoted>\r\n
<
> DATA\r\n
<
> Message-ID: $msgid\r\nSubject: escapes\r\n\r\nbody\r\n.\r\n
<
> QUIT\r\n
<
EOF
python3 "$chat" "127.0.0.1:$TERND_PORT" "$top/send.chat" >"$top/send.out" 2>&1
tap_is "ternd takes the message and its three recipients" \
	"$(cut -c1-3 "$top/send.out" | tr '\n' ' ')" "220 250 250 250 250 250 354 250 221 "
qid=$(sed -n 's/^250 2\.0\.0 Ok: queued as \([0-9A-Z]*\)$/\1/p' "$top/send.out")
tap_like "its queue id ($qid)" "$qid" '^[0-9A-Z]{13}$'
tap_check "the quoted address bounces, later@ is deferred, ok@ is sent" \
	wait_until 30 _atleast 3 ": $qid: to=<.*status=(bounced|deferred|sent) "
tap_check "the DSN to the sender is queued" wait_until 30 _atleast 1 ": from=<>, size="
dsn=$(sed -n 's/.*: \([0-9A-Z]\{13\}\): from=<>, size=.*/\1/p' "$TERND_LOG" | head -1)

# --- the text outputs ---------------------------------------------------------
ternq_ list >"$top/list.txt" 2>&1
ternq_ show "$qid" >"$top/show.txt" 2>&1
ternq_ show "$dsn" >"$top/show-dsn.txt" 2>&1
ternq_ trace "$qid" >"$top/trace.txt" 2>&1
ternq_ stats --by domain >"$top/stats.txt" 2>&1
"$report" -c "$TERND_CONF" --format text >"$top/report.txt" 2>&1
"$report" -c "$TERND_CONF" --format json >"$top/report.json" 2>&1
grep -v ': started: \|: stopping' "$TERND_LOG" >"$top/stderr.txt"

# clean FILE - every octet is a newline or printable, the whole is UTF-8
# without C1 controls; prints "clean" or what is wrong
clean() {
	python3 - "$1" <<'PYEOF'
import re, sys
data = open(sys.argv[1], "rb").read()
bad = sorted({b for b in data if (b < 0x20 and b != 0x0a) or b == 0x7f})
try:
    text = data.decode("utf-8")
    c1 = sorted({hex(ord(c)) for c in text if 0x80 <= ord(c) <= 0x9f})
except UnicodeDecodeError as e:
    text, c1 = "", ["not UTF-8: %s" % e]
print("clean" if data and not bad and not c1 else "empty" if not data else
      "control octets %s, C1/UTF-8: %s" % ([hex(b) for b in bad], c1))
PYEOF
}
for f in list show show-dsn trace stats report; do
	tap_is "ternq/tern-report text output $f: nothing raw" "$(clean "$top/$f.txt")" clean
done
tap_is "ternd's log_file: nothing raw" "$(clean "$top/ternd.syslog")" clean
tap_is "ternd's stderr log: nothing raw" "$(clean "$top/stderr.txt")" clean

# the escapes, as they show
tap_like "trace: the Message-ID escaped" "$(grep ' accepted ' "$top/trace.txt")" \
	'message-id=<\\x1b]2;pwned\\x07\\x1b\[31m@evil\.test>, trace='
tap_like "trace: the sender escaped" "$(grep ' accepted ' "$top/trace.txt")" \
	'from=<"evil>, size=99999 \\xc2\\x9b31m"@senders\.test>, '
tap_like "list: the deferred recipient escaped" "$(grep ' later@' "$top/list.txt")" \
	'^ {55}later@c\\xc2\\x9b32m\.test$'
tap_like "show: the sender escaped" "$(grep '^sender: ' "$top/show.txt")" \
	'^sender: <"evil>, size=99999 \\xc2\\x9b31m"@senders\.test>$'
tap_like "show: the peer's deferral, its ESC and BEL as '?' (from the reply reader)" \
	"$(grep '^recipient: <later' "$top/show.txt")" \
	'^recipient: <later@c\\xc2\\x9b32m\.test> state=deferred .* \(450 4\.2\.0 \?\]2;owned\? try later\)$'
tap_like "stats --by domain: the deferred recipient's domain escaped" "$(cat "$top/stats.txt")" \
	' c\\xc2\\x9b32m\.test +1 +1 '

# --- JSON keeps the exact values ----------------------------------------------
ternq_ show "$qid" --json >"$top/show.json"
ternq_ show "$dsn" --json >"$top/show-dsn.json"
ternq_ trace "$qid" --json >"$top/trace.json"
tap_is "--json: the exact Message-ID, sender and recipients (U+009B as \\u009b)" \
	"$(python3 - "$top" "$msgid" "$sender" "$later" "$quoted" <<'PYEOF'
import json, sys
top, msgid, sender, later, quoted = sys.argv[1:]
dec = lambda s: s.encode("latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8")
msgid, sender, later = dec(msgid), dec(sender), dec(later)
show = json.load(open(top + "/show.json"))
assert show["sender"] == sender, show["sender"]
assert [r["address"] for r in show["recipients"]] == ["ok@example.com", later, quoted], show
dsn = json.load(open(top + "/show-dsn.json"))
assert dsn["sender"] == "" and dsn["recipients"][0]["address"] == sender, dsn
t = json.load(open(top + "/trace.json"))
m, = t["messages"]
assert m["message_id"] == msgid, m["message_id"]
assert m["sender"] == sender, m["sender"]
got = sorted((a["recipient"], a["status"]) for a in m["attempts"])
assert got == sorted([("ok@example.com", "sent"), (later, "deferred"), (quoted, "bounced")]), got
print("exact")
PYEOF
)" exact

# --- item 5: the quoted address counts as bounced -------------------------------
size=$(sed -n "s/.*: $qid: from=<.*>, size=\([0-9]*\), nrcpt=3, .*/\1/p" "$top/ternd.syslog")
tap_like "the acceptance line: the sender cannot add a field ($size octets)" \
	"$(grep ": $qid: from=<" "$top/ternd.syslog")" \
	": $qid: from=<\"evil\\\\x3e\\\\x2c size=99999 \\\\xc2\\\\x9b31m\"@senders\\.test>, size=[0-9]+, nrcpt=3, trace=[0-9a-f]{32} \\(queue active\\)\$"
tap_is "the delivery line: the address and the reply cannot add a field" \
	"$(grep -c ": $qid: to=<\"x\\\\x3e\\\\x2c relay=r\\\\x2c delay=1\\\\x2c status=sent (x)\"@example\\.com>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:$peer_port, delay=[0-9.]*, delays=[0-9./]*, dsn=5\\.1\\.1, status=bounced (550 5\\.1\\.1 ?\\[31mno such user?\\[0m?\\\\x2c tls=full\\\\x2c status=sent (x), tls=none\$" "$top/ternd.syslog")" 1
pflogsumm --syslog-name=postfix/tern "$top/ternd.syslog" >"$top/pflogsumm.txt" 2>&1
tap_is "pflogsumm: 1 delivered, 1 deferred, 1 bounced, the message's own size" \
	"$(sed -n 's/^ *\([0-9]*\) *\(delivered\|deferred.*\|bounced\|bytes delivered\)$/\1 \2/p' "$top/pflogsumm.txt" | tr -s ' ' | tr '\n' ';')" \
	"1 delivered;1 deferred (1 deferrals);1 bounced;$size bytes delivered;"
tap_is "tern-report: 1 sent, 1 deferred, 1 bounced" \
	"$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print(t["sent"], t["deferred"], t["bounced"])' "$top/report.json")" \
	"1 1 1"
tap_like "tern-report text: the deferred recipient's domain escaped" "$(cat "$top/report.txt")" \
	'c\\xc2\\x9b32m\.test +1 +0 +1 +0 +0'
tap_like "tern-report text: the bounce reason" "$(cat "$top/report.txt")" \
	'bounced +5\.1\.1 +1 +550 5\.1\.1 \?\[31mno such user\?\[0m\?, tls=full, status=sent \(x'

ternd_stop_checked
tap_done
