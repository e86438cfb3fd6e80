#!/bin/bash
# trace.sh - a message followed end to end: Postfix with tern-milter hands
# it over LMTP to ternd, which relays it to a scripted SMTP peer (a small
# Python server that says "queued as SINKnnnn", defers later@ once and
# refuses bad@). Then:
#   - ternq trace by trace id, ternd queue id, Message-ID and --rcpt shows
#     the milter's verdict with Postfix's queue id, ternd's acceptance, the
#     attempts (two for the deferred-then-sent recipient) with the peer's
#     queue id, and each recipient's final state; --json carries the same
#   - pflogsumm, fed ternd's own log file (syslog_name = postfix/tern),
#     counts exactly the deliveries, deferrals and bounces of the run
#   - otlp_spans_file: one OTLP/JSON line per attempt, in the message's
#     trace, parented on the span ternd read from Traceparent
#   - with the milter out of the way (SMTP straight to ternd): a forged
#     Traceparent on our trace id, and a validly signed pair copied from
#     another message (the signature binds the Message-ID), are recorded
#     under a new trace id with the foreign one as an unverified link, and
#     ternq trace of our trace shows no hop of theirs; a pair signed for
#     its own Message-ID is continued; one signed for the first of two
#     Message-ID fields is not (tern-milter's rule, one verifier for both)
#   - key rotation: a new trace_key_file and a reload (ternd SIGHUP,
#     tern-milter SIGUSR1): the milter signs with the new key and ternd
#     continues that trace; a message signed with the key before, still on
#     its way, is continued too, one signed two keys back is not; a key
#     file a reload cannot read keeps the keys read before
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/postfix.sh"
. "$here/../lib/ternd.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges, postfix start)"
for cmd in postfix swaks python3 pflogsumm mdb_stat; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
ensure_tern_user || tap_skip_all "cannot create the tern user"

top=$(tap_tmpdir)

# --- the peer: queued-as ids, one deferral for later@, 550 for bad@ ----------------
peer_port=$(free_port)
cat >"$top/peer.py" <<'PYEOF'
import socketserver, sys

class Peer(socketserver.StreamRequestHandler):
    served = 0
    deferred = set()

    def say(self, line):
        self.wfile.write(line.encode() + b"\r\n")
        self.wfile.flush()

    def handle(self):
        rcpts = []
        self.say("220 peer.test ESMTP")
        while True:
            line = self.rfile.readline()
            if not line:
                return
            cmd = line.decode("latin-1").strip()
            verb = cmd[:4].upper()
            if verb in ("EHLO", "HELO"):
                self.say("250-peer.test")
                self.say("250 8BITMIME")
            elif verb == "MAIL" or verb == "RSET" or verb == "NOOP":
                rcpts = []
                self.say("250 2.0.0 Ok")
            elif verb == "RCPT":
                if "<bad@" in cmd:
                    self.say("550 5.1.1 <bad@example.com>: Recipient address rejected: User unknown")
                elif "<later@" in cmd and "later" not in Peer.deferred:
                    Peer.deferred.add("later")
                    self.say("450 4.2.0 <later@example.com>: try again later")
                else:
                    rcpts.append(cmd.split("<", 1)[1].split(">", 1)[0])
                    self.say("250 2.1.5 Ok")
            elif verb == "DATA":
                self.say("354 End data with <CR><LF>.<CR><LF>")
                while self.rfile.readline() not in (b".\r\n", b""):
                    pass
                Peer.served += 1
                print("SINK%04d %s" % (Peer.served, " ".join(rcpts)), flush=True)
                self.say("250 2.0.0 Ok: queued as SINK%04d" % Peer.served)
            elif verb == "QUIT":
                self.say("221 2.0.0 Bye")
                return
            else:
                self.say("502 5.5.2 Error: command not recognized")

class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

Server(("127.0.0.1", int(sys.argv[1])), Peer).serve_forever()
PYEOF
python3 "$top/peer.py" "$peer_port" >"$top/peer.log" 2>&1 &
tap_bg_register $!
tap_check "the scripted peer listens" wait_for_port "$peer_port"

# --- ternd (and the milter, from the same tern.conf) -------------------------------
"$milter" -K "$top/trace.key"
chown tern "$top/trace.key"
milter_port=$(free_port)
TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $peer_port" "tls = none" \
	"min_idle = 0" "max_connections = 1" "[routes]" "* = sink")
ternd_setup "$top/ternd" "min_backoff = 2s" "otlp_spans_file = $top/spans.json" "lmtp_socket_group = postfix" \
	"[global]" "syslog_name = postfix/tern" "log_file = $top/ternd.syslog" \
	"trace_key_file = $top/trace.key" "[milter]" "listen = inet:$milter_port@127.0.0.1" || exit 1
"$milter" -f -c "$TERND_CONF" >"$top/milter.log" 2>&1 &
milter_pid=$!
tap_bg_register $milter_pid
tap_check "tern-milter listens" wait_for_port "$milter_port"

# --- Postfix: the milter, then LMTP to ternd ---------------------------------------
pf=$top/pf
pf_port=$(free_port)
pf_create "$pf" "$pf_port"
pf_conf "$pf" "smtpd_milters = inet:127.0.0.1:$milter_port" "milter_protocol = 6" \
	"milter_default_action = tempfail" \
	"default_transport = lmtp:unix:$TERND_LMTP" "relay_transport = lmtp:unix:$TERND_LMTP" \
	"relayhost ="
tap_check "postfix starts" pf_start "$pf"

# nlog REGEX - lines of ternd's log matching the extended REGEX
nlog() {
	grep -cE "$1" "$TERND_LOG"
}

# _atleast N REGEX - ternd's log has at least N lines matching REGEX
_atleast() {
	[ "$(nlog "$2")" -ge "$1" ]
}

swaks --server 127.0.0.1 --port "$pf_port" --from a@example.org \
	--to ok@example.com,later@example.com --header "Subject: traced" \
	--header "Message-Id: <traced.1@example.org>" >"$top/m1.swaks" 2>&1
swaks --server 127.0.0.1 --port "$pf_port" --from a@example.org --to bad@example.com \
	--header "Subject: refused" --header "Message-Id: <refused.1@example.org>" \
	>"$top/m2.swaks" 2>&1
tap_check "Postfix hands both messages to ternd" pf_wait_empty "$pf" 60

pfqid=$(sed -n 's/.*postfix\/smtpd\[[0-9]*\]: \([0-9A-Za-z]*\): client=.*/\1/p' "$pf/maillog" | head -1)
qid=$(sed -n 's/.*status=sent (250 2\.0\.0 <ok@example\.com> Ok: queued as \([0-9A-Z]*\)).*/\1/p' "$pf/maillog")
bqid=$(sed -n 's/.*status=sent (250 2\.0\.0 <bad@example\.com> Ok: queued as \([0-9A-Z]*\)).*/\1/p' "$pf/maillog")
tid=$(sed -n "s/.*: $pfqid: trace=\([0-9a-f]\{32\}\) origin=new .* verdict=accept\$/\1/p" "$top/milter.log")
tap_like "Postfix queued the first message (queue id $pfqid)" "$pfqid" '^[0-9A-Za-z]+$'
tap_like "ternd accepted it over LMTP (queue id $qid)" "$qid" '^[0-9A-Z]{13}$'
tap_like "the milter logged its trace id ($tid)" "$tid" '^[0-9a-f]{32}$'
tap_check "ternd delivers later@ at the retry and removes the message" \
	wait_until 60 _atleast 1 ": $qid: removed$"
tap_check "the refused message is bounced and its DSN delivered" \
	wait_until 60 _atleast 1 ": [0-9A-Z]{13}: to=<a@example\\.org>, .*status=sent "

# the peer's queue ids, as it logged them
ok_sink=$(sed -n 's/^\(SINK[0-9]*\) ok@example\.com$/\1/p' "$top/peer.log")
later_sink=$(sed -n 's/^\(SINK[0-9]*\) later@example\.com$/\1/p' "$top/peer.log")
tap_like "the peer queued ok@ and later@ separately ($ok_sink, $later_sink)" "$ok_sink $later_sink" \
	'^SINK[0-9]{4} SINK[0-9]{4}$'

# --- the history index ----------------------------------------------------------
# ternd writes a history record's lookup index once it is idle (store_hist.c):
# then no record is left pending, and the lookups below go through it.
# (check_history covers lookups of pending records.)
_table_entries() { mdb_stat -s "$1" "$TERND_DIR/state/queue" | awk '/Entries:/ { print $2 }'; }
_nothing_pending() { [ "$(_table_entries hpend)" = 0 ]; }
tap_check "ternd indexes the history while idle: no record pending" wait_until 10 _nothing_pending
tap_is "the index: q per record (8), t, m and r per acceptance (3, 2, 4)" "$(_table_entries hidx)" 17

# --- ternq trace, text -----------------------------------------------------------
ternq_ trace "$tid" >"$top/by-trace.txt" 2>&1
tap_is "trace by trace id: exit 0, milter, acceptance, three attempts, two final states, in order" \
	"$(sed -E 's/^[0-9-]+ [0-9:.]+ [-+][0-9]{4} +//; s/^ +//' "$top/by-trace.txt" | awk '{print $1}' | tr '\n' ' ')" \
	"milter accepted attempt attempt attempt final final "
tap_like "the milter line has Postfix's queue id and the verdict" \
	"$(grep ' milter ' "$top/by-trace.txt")" \
	" milter    $pfqid: verdict=accept, client=127\\.0\\.0\\.1, from=<a@example\\.org>, nrcpt=2, trace=$tid, span=[0-9a-f]{16}\$"
tap_like "the acceptance line has ternd's queue id and the Message-ID" \
	"$(grep ' accepted ' "$top/by-trace.txt")" \
	" accepted  $qid: from=<a@example\\.org>, size=[0-9]+, nrcpt=2, client=local, message-id=<traced\\.1@example\\.org>, trace=$tid, span=[0-9a-f]{16}\$"
tap_is "later@: deferred, then sent with the peer's queue id" \
	"$(grep ' attempt .*to=<later@' "$top/by-trace.txt" | sed -E 's/.*(status=[a-z]+) \(([0-9]+).*\)(, queued_as=[A-Z0-9]+)?$/\1 \2\3/' | tr '\n' ' ')" \
	"status=deferred 450 status=sent 250, queued_as=$later_sink "
tap_like "ok@: one attempt, sent, peer and relay shown, with the peer's queue id" \
	"$(grep ' attempt .*to=<ok@' "$top/by-trace.txt")" \
	" attempt   $qid: to=<ok@example\\.com>, peer=sink, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:$peer_port, tls=none, conn_use=1, delays=[0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok: queued as $ok_sink\\), queued_as=$ok_sink\$"
tap_is "final states" "$(grep ' final ' "$top/by-trace.txt" | sed 's/^ *//' | sort)" \
	"final     $qid: to=<later@example.com>, status=sent
final     $qid: to=<ok@example.com>, status=sent"
ternq_ trace "$qid" >"$top/by-qid.txt" 2>&1
tap_is "trace by ternd's queue id: the same path" "$(cat "$top/by-qid.txt")" "$(cat "$top/by-trace.txt")"
ternq_ trace "traced.1@example.org" >"$top/by-msgid.txt" 2>&1
tap_is "trace by Message-ID (without <>): the same path" "$(cat "$top/by-msgid.txt")" "$(cat "$top/by-trace.txt")"
ternq_ trace --rcpt LATER@example.com >"$top/by-rcpt.txt" 2>&1
tap_is "trace --rcpt (any case): the same path" "$(cat "$top/by-rcpt.txt")" "$(cat "$top/by-trace.txt")"
ternq_ trace "$pfqid" >"$top/by-pfqid.txt" 2>&1
tap_is "trace by Postfix's queue id (from the milter's journal): the same path" \
	"$(cat "$top/by-pfqid.txt")" "$(cat "$top/by-trace.txt")"
ternq_ trace --rcpt nobody@example.com >"$top/none.txt" 2>&1
tap_is "trace of an unknown recipient: exit 1" "$?" 1
ternq_ trace 0123456789abcdef0123456789abcdef >/dev/null 2>&1
tap_is "trace of an unknown trace id: exit 1" "$?" 1

# --- ternq trace --json -------------------------------------------------------------
ternq_ trace "$tid" --json >"$top/trace.json"
tap_is "--json: one object with the milter, the message, its attempts and final states" \
	"$(python3 - "$top/trace.json" "$tid" "$pfqid" "$qid" "$ok_sink" "$later_sink" <<'PYEOF'
import json, sys
path, tid, pfqid, qid, ok_sink, later_sink = sys.argv[1:]
lines = open(path).read().splitlines()
assert len(lines) == 1, lines
t = json.loads(lines[0])
assert t["trace_ids"] == [tid], t["trace_ids"]
m, = t["milter"]
assert (m["queue_id"], m["verdict"], m["trace_id"], m["nrcpt"]) == (pfqid, "accept", tid, 2), m
msg, = t["messages"]
assert (msg["queue_id"], msg["trace_id"], msg["message_id"], msg["nrcpt"], msg["client"]) == \
    (qid, tid, "<traced.1@example.org>", 2, "local"), msg
assert msg["span_id"] == m["span_id"], (msg["span_id"], m["span_id"])
assert m["time"] <= msg["time"] <= msg["attempts"][0]["time"]
att = [(a["recipient"], a["status"], a["code"], a["dsn"], a["peer"], a["tls"],
        a["tls_resumed"], a["peer_queue_id"]) for a in msg["attempts"]]
assert sorted(att) == [
    ("later@example.com", "deferred", 450, "4.2.0", "sink", "none", False, ""),
    ("later@example.com", "sent", 250, "2.0.0", "sink", "none", False, later_sink),
    ("ok@example.com", "sent", 250, "2.0.0", "sink", "none", False, ok_sink),
], att
assert [a["time"] for a in msg["attempts"]] == sorted(a["time"] for a in msg["attempts"])
assert all(set(a["delays"]) == {"before", "rate_wait", "connection", "transmission"}
           for a in msg["attempts"])
assert sorted((r["address"], r["state"]) for r in msg["recipients"]) == \
    [("later@example.com", "sent"), ("ok@example.com", "sent")], msg["recipients"]
print("ok")
PYEOF
)" ok
ternq_ trace "$bqid" --json >"$top/bounce.json"
tap_is "--json: the refused recipient bounced with 5.1.1" \
	"$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["messages"][0]; a=m["attempts"][0]; print(a["recipient"], a["status"], a["dsn"], m["recipients"][0]["state"])' "$top/bounce.json")" \
	"bad@example.com bounced 5.1.1 bounced"

# --- pflogsumm on ternd's log file --------------------------------------------------
tap_like "log_file lines are syslog-formatted, as postfix/tern/ternd" \
	"$(grep -m1 ": $qid: to=<ok@example\\.com>, " "$top/ternd.syslog")" \
	"^[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [^ ]+ postfix/tern/ternd\\[[0-9]+\\]: $qid: to=<ok@example\\.com>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:$peer_port, (conn_use=[0-9]+, )?delay=[0-9.]+, delays=[0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok: queued as $ok_sink\\), tls=none\$"
pflogsumm --syslog-name=postfix/tern "$top/ternd.syslog" >"$top/pflogsumm.txt" 2>&1
# ok@, later@ (at the retry) and the DSN to a@ were sent; later@ was
# deferred once; bad@ bounced
tap_is "pflogsumm counts 3 delivered, 1 deferred (1 deferral), 1 bounced" \
	"$(sed -n 's/^ *\([0-9]*\) *\(delivered\|deferred.*\|bounced\)$/\1 \2/p' "$top/pflogsumm.txt" | tr -s ' ' | tr '\n' ';')" \
	"3 delivered;1 deferred (1 deferrals);1 bounced;"

# --- otlp_spans_file -------------------------------------------------------------
span=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["messages"][0]["span_id"])' "$top/trace.json")
tap_is "OTLP: one line per attempt, each a ResourceSpans in the message's trace under its span" \
	"$(python3 - "$top/spans.json" "$tid" "$span" "$qid" <<'PYEOF'
import json, sys
path, tid, span, qid = sys.argv[1:]
mine = []
for line in open(path):
    req = json.loads(line)
    rs, = req["resourceSpans"]
    attrs = {a["key"]: a["value"]["stringValue"] for a in rs["resource"]["attributes"]}
    assert attrs["service.name"] == "ternd", attrs
    for s in rs["scopeSpans"][0]["spans"]:
        a = {x["key"]: list(x["value"].values())[0] for x in s["attributes"]}
        if a["tern.queue_id"] != qid:
            continue
        assert s["traceId"] == tid, (s["traceId"], tid)
        assert s["parentSpanId"] == span, (s["parentSpanId"], span)
        assert len(s["spanId"]) == 16 and s["spanId"] != span
        assert int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"]) > 0
        mine.append((a["tern.recipient"], a["tern.status"], a["tern.peer_queue_id"], s["status"]["code"]))
print(sorted(mine))
PYEOF
)" "[('later@example.com', 'deferred', '', 2), ('later@example.com', 'sent', '$later_sink', 1), ('ok@example.com', 'sent', '$ok_sink', 1)]"

# --- forged trace context, straight to ternd (no milter on the way) ----------------
# mac - the keyed BLAKE2b-128 of stdin, base64url, computed by openssl;
# sign TRACEPARENT MESSAGE-ID - the tern=2. signature
# (of the key in KEYFILE, default trace.key)
mac() {
	openssl mac -binary -macopt "hexkey:$(cat "${1:-$top/trace.key}")" -macopt size:16 BLAKE2BMAC \
		| basenc --base64url | tr -d '='
}
sign() {
	printf '%s\0%s' "$1" "$2" | mac "${3:-}"
}
ours_tp="00-$tid-$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["milter"][0]["span_id"])' "$top/trace.json")-01"
own_tp=00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01
# name MESSAGE-ID TRACEPARENT TRACESTATE
forge() {
	swaks --server 127.0.0.1 --port "$TERND_PORT" --from f@example.org --to ok@example.com \
		--header "Subject: $1" --header "Message-Id: $2" --header "Traceparent: $3" \
		--header "Tracestate: $4" >"$top/$1.swaks" 2>&1
}
removed=$(nlog ": removed$")
forge forged "<forged.1@example.org>" "$ours_tp" "tern=2.AAAAAAAAAAAAAAAAAAAAAA"
forge copied "<copied.1@example.org>" "$ours_tp" "tern=2.$(sign "$ours_tp" "<traced.1@example.org>")"
# tern before 2 signed the Traceparent alone, unversioned
forge oldsig "<oldsig.1@example.org>" "$ours_tp" "tern=$(printf '%s' "$ours_tp" | mac)"
forge signed "<signed.1@example.org>" "$own_tp" "tern=2.$(sign "$own_tp" "<signed.1@example.org>")"
for m in forged copied oldsig signed; do
	tap_check "ternd accepts the $m message over SMTP" grep -q '^<-  250 2.0.0 Ok: queued as' "$top/$m.swaks"
done
tap_check "ternd delivers the four" wait_until 30 _atleast $((removed + 4)) ": removed$"
tap_is "ternd logs the three unverified traces as such, with new trace ids" \
	"$(grep -E 'from=<f@example\.org>, .*trace=' "$TERND_LOG" | grep -c "trace=[0-9a-f]\{32\}, unverified_trace=$tid (queue active)")" 3
for m in forged copied oldsig; do
	ternq_ trace "$m.1@example.org" >"$top/$m.txt" 2>&1
	tap_like "$m: recorded under a new trace, ours only as an unverified link" \
		"$(grep ' accepted ' "$top/$m.txt")" \
		" accepted  [0-9A-Z]{13}: from=<f@example\\.org>, size=[0-9]+, nrcpt=1, client=\\[127\\.0\\.0\\.1\\], message-id=<$m\\.1@example\\.org>, trace=[0-9a-f]{32}, span=[0-9a-f]{16}, link=$tid-${ours_tp:36:16} \\(unverified, not ours\\)\$"
	tap_is "$m: its trace is not ours" "$(grep -c " trace=$tid" "$top/$m.txt")" 0
done
ternq_ trace "forged.1@example.org" --json >"$top/forged.json"
tap_is "--json: the link, unverified" \
	"$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["messages"][0]; print(m["trace_id"] != sys.argv[2], m["links"])' "$top/forged.json" "$tid")" \
	"True [{'trace_id': '$tid', 'span_id': '${ours_tp:36:16}', 'verified': False}]"
ternq_ trace "$tid" >"$top/by-trace-after.txt" 2>&1
tap_is "trace by our trace id: the same path as before, no forged hop" \
	"$(cat "$top/by-trace-after.txt")" "$(cat "$top/by-trace.txt")"
ternq_ trace "signed.1@example.org" >"$top/signed.txt" 2>&1
tap_like "a pair signed for its own Message-ID is continued, without a link" \
	"$(grep ' accepted ' "$top/signed.txt")" \
	" message-id=<signed\\.1@example\\.org>, trace=${own_tp:3:32}, span=${own_tp:36:16}\$"
# signed for the first of two Message-ID fields: the milter would not
# continue it, nor does ternd
two_tp=00-6bf92f3577b34da6a3ce929d0e0e4736-20f067aa0ba902b7-01
swaks --server 127.0.0.1 --port "$TERND_PORT" --from f@example.org --to ok@example.com \
	--header "Subject: twomid" --header "Message-Id: <twomid.1@example.org>" \
	--add-header "Message-Id: <twomid.2@example.org>" --header "Traceparent: $two_tp" \
	--header "Tracestate: tern=2.$(sign "$two_tp" "<twomid.1@example.org>")" >"$top/twomid.swaks" 2>&1
tap_check "ternd accepts the message with two Message-ID fields" \
	grep -q '^<-  250 2.0.0 Ok: queued as' "$top/twomid.swaks"
tap_check "ternd delivers it" wait_until 30 _atleast $((removed + 5)) ": removed$"
ternq_ trace "twomid.1@example.org" >"$top/twomid.txt" 2>&1
tap_like "two Message-ID fields, the signed one first: a new trace, theirs only as an unverified link" \
	"$(grep ' accepted ' "$top/twomid.txt")" \
	" message-id=<twomid\\.1@example\\.org>, trace=[0-9a-f]{32}, span=[0-9a-f]{16}, link=${two_tp:3:32}-${two_tp:36:16} \\(unverified, not ours\\)\$"

# --- key rotation ------------------------------------------------------------------
cp "$top/trace.key" "$top/key.a"
# rotate KEYFILE - install KEYFILE as trace_key_file (a rename, as an admin
# would), reload ternd and wait for the reload to be logged
rotate() {
	local n
	n=$(nlog ': configuration reloaded from ')
	install -o tern -m 0600 "$1" "$top/trace.key.new" && mv -f "$top/trace.key.new" "$top/trace.key"
	kill -HUP "$TERND_PID"
	wait_until 10 _atleast $((n + 1)) ': configuration reloaded from '
}
# sent NAME KEYFILE - a message with a new trace context signed with
# KEYFILE for its Message-ID <NAME.1@example.org>, straight to ternd;
# prints the trace id of the Traceparent it carried, or "refused" when
# ternd did not answer 250
sent() {
	local tp
	tp=00-$(openssl rand -hex 16)-$(openssl rand -hex 8)-01
	forge "$1" "<$1.1@example.org>" "$tp" "tern=2.$(sign "$tp" "<$1.1@example.org>" "$2")"
	if grep -q '^<-  250 2.0.0 Ok: queued as' "$top/$1.swaks"; then echo "${tp:3:32}"; else echo refused; fi
}
# trace_of NAME - the trace id ternd recorded for <NAME.1@example.org>
trace_of() {
	ternq_ trace "$1.1@example.org" 2>&1 | sed -n 's/.* accepted .*, trace=\([0-9a-f]*\),.*/\1/p'
}
"$milter" -K "$top/key.b"
"$milter" -K "$top/key.c"
tap_check "ternd reloads with a new key" rotate "$top/key.b"
tap_is "ternd logs the change of key" "$(nlog ": trace_key_file $top/trace\.key: a new key; the one before it verifies too, until the key changes again$")" 1
t_b=$(sent rot-b "$top/key.b")
t_a=$(sent rot-a "$top/key.a")
mreloads=$(grep -c 'configuration reloaded from ' "$top/milter.log")
kill -USR1 "$milter_pid"
_milter_reloaded() { [ "$(grep -c 'configuration reloaded from ' "$top/milter.log")" -gt "$mreloads" ]; }
tap_check "tern-milter reloads" wait_until 10 _milter_reloaded
swaks --server 127.0.0.1 --port "$pf_port" --from a@example.org --to ok@example.com \
	--header "Subject: after the rotation" --header "Message-Id: <rot-m.1@example.org>" \
	>"$top/rot-m.swaks" 2>&1
tap_check "Postfix hands the message signed with the new key to ternd" pf_wait_empty "$pf" 60
t_m=$(sed -n 's/.*: trace=\([0-9a-f]\{32\}\) origin=new .* verdict=accept$/\1/p' "$top/milter.log" | tail -1)
tap_check "ternd delivers the three" wait_until 30 _atleast $((removed + 8)) ": removed$"
tap_is "signed with the new key: its trace goes on in ternd" "$(trace_of rot-b)" "$t_b"
tap_is "signed with the key before, on its way: its trace goes on" "$(trace_of rot-a)" "$t_a"
tap_like "the milter, reloaded, gave the message a new trace ($t_m)" "$t_m" '^[0-9a-f]{32}$'
tap_is "the milter signs with the new key, and ternd goes on with its trace" "$(trace_of rot-m)" "$t_m"
tap_check "ternd reloads with a third key" rotate "$top/key.c"
t_a2=$(sent rot-a2 "$top/key.a")
chmod 0644 "$top/trace.key"
kill -HUP "$TERND_PID"
tap_check "a reload with a key file others can read is logged, the keys stay" wait_until 10 _atleast 1 \
	": trace_key_file $top/trace\.key: key is accessible by others \(mode 0644\); chmod 600 it: the keys read before still verify$"
t_c=$(sent rot-c "$top/key.c")
t_b2=$(sent rot-b2 "$top/key.b")
tap_check "ternd delivers the three" wait_until 30 _atleast $((removed + 11)) ": removed$"
t=$(trace_of rot-a2)
tap_like "two keys back: recorded under a new trace, not its own ($t_a2)" "$t" '^[0-9a-f]{32}$'
tap_is "two keys back: the trace is not ours" "$([ "$t" != "$t_a2" ] && echo new)" new
tap_is "the key before the current one still verifies, after a reload that could not read it" \
	"$(trace_of rot-b2)" "$t_b2"
tap_is "the current key verifies, after a reload that could not read it" "$(trace_of rot-c)" "$t_c"

ternd_stop
tap_is "ternd stops cleanly" "$?" 0
tap_done
