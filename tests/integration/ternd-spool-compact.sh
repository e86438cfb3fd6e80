#!/bin/bash
# ternd-spool-compact.sh - long-deferred mail does not pin the spool
# (issue 18 §2): with small segments (segment_size = 256KB) and 1% of the
# mail (4 KB messages, each its own content) to a peer that refuses
# connections, the rest to a live smtp-sink:
#  1. once the live mail is delivered, the spool holds at most twice the
#     live octets plus one segment (ternq stats --json; the metrics
#     tern_spool_live_bytes and tern_spool_bytes agree with the segment
#     table), and every deferred body is intact (ternq cat, compared with
#     what was sent, byte for byte);
#  2. kill -9 while mail comes in and segments are copied forward, three
#     times: every acknowledged deferred message is still queued and
#     intact, recovery finds nothing damaged, and the bound holds again;
#  3. the dead peer comes up: every deferred message is delivered once,
#     its content as sent; the drained queue leaves no segment file.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v smtp-sink >/dev/null || tap_skip_all "smtp-sink not installed"
command -v curl >/dev/null || tap_skip_all "curl not installed"

N=${MESSAGES:-3000}		# phase 1; phase 2 sends as many again
SEG=262144
top=$(tap_tmpdir)
mkdir -p "$top/live" "$top/dead" && chmod 0777 "$top/live" "$top/dead"
sport=$(free_port)
dport=$(free_port)		# nothing listens there until phase 3
mport=$(free_port)
smtp-sink -c -u nobody -d "$top/live/%M." "127.0.0.1:$sport" 64 >"$top/sink.out" 2>&1 &
tap_bg_register "$!"
wait_for_port "$sport"

TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $sport" "tls = none" \
	"min_idle = 1" "max_connections = 4" \
	"[peer dead]" "host = [127.0.0.1]" "port = $dport" "tls = none" "min_idle = 0" \
	"[routes]" "dead.test = dead" "* = sink")
ternd_setup "$top/t" "segment_size = 256KB" "min_backoff = 1h" "max_backoff = 1h" \
	"metrics_listen = 127.0.0.1:$mport" || exit 1

# mail.py - the messages: number I goes to dead.test when I % 100 == 0,
# else to the sink; its content is made from I alone (4096 octets)
cat >"$top/mail.py" <<'EOF'
import hashlib, smtplib, sys, threading

def content(i):
    dom = "dead.test" if i % 100 == 0 else "live.test"
    head = ("From: <s@example.org>\r\nTo: <r%d@%s>\r\nSubject: m%d\r\n"
            "Message-ID: <m%d@compact.test>\r\n\r\n" % (i, dom, i, i)).encode()
    body, k = b"", 0
    while len(head) + len(body) < 4096 - 66:
        body += hashlib.sha256(b"%d:%d" % (i, k)).hexdigest().encode() + b"\r\n"
        k += 1
    return dom, head + body + b"x" * (4096 - len(head) - len(body) - 2) + b"\r\n"

def send(port, first, count, conns, out):
    lock, nxt, errs = threading.Lock(), [first], [0]
    log = open(out, "a")
    def worker():
        s = None
        while True:
            with lock:
                i = nxt[0]
                if i >= first + count:
                    break
                nxt[0] += 1
            dom, msg = content(i)
            try:
                if s is None:
                    s = smtplib.SMTP("127.0.0.1", port, "client.test", timeout=30)
                    s.ehlo()
                s.mail("s@example.org")
                code, _ = s.rcpt("r%d@%s" % (i, dom))
                if code != 250:
                    s.rset()
                    continue
                code, resp = s.data(msg)
                if code == 250:
                    with lock:
                        log.write("%d %s %s\n" % (i, resp.decode().split()[-1], dom))
                        log.flush()
            except Exception as e:
                with lock:
                    errs[0] += 1
                    if errs[0] <= 3:
                        sys.stderr.write("mail.py: %d: %r\n" % (i, e))
                try:
                    s.close()
                except Exception:
                    pass
                s = None
    ts = [threading.Thread(target=worker) for _ in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

if sys.argv[1] == "send":
    send(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
elif sys.argv[1] == "content":
    sys.stdout.buffer.write(content(int(sys.argv[2]))[1])
elif sys.argv[1] == "check-cat":
    # check-cat I FILE: FILE (ternq cat) is ternd's Received: and message I
    data = open(sys.argv[3], "rb").read()
    assert data.startswith(b"Received: "), "no Received:"
    at = 0
    while True:
        at = data.index(b"\r\n", at) + 2
        if data[at:at + 1] not in (b" ", b"\t"):
            break
    sys.exit(0 if data[at:] == content(int(sys.argv[2]))[1] else 1)
elif sys.argv[1] == "check-dumps":
    # check-dumps DIR ACKED: each dead.test message of ACKED dumped in DIR
    # once, its content as sent (smtp-sink writes LF); prints good, dups
    want = {}
    for line in open(sys.argv[3]):
        i, qid, dom = line.split()
        if dom == "dead.test":
            want[qid] = int(i)
    import os, re
    seen, good, dups = {}, 0, 0
    for name in os.listdir(sys.argv[2]):
        raw = open(os.path.join(sys.argv[2], name), "rb").read()
        m = re.search(rb"with ESMTP id ([0-9A-Z]{13})", raw)
        if not m or m.group(1).decode() not in want:
            continue
        qid = m.group(1).decode()
        if qid in seen:
            dups += 1
            continue
        seen[qid] = 1
        lines = raw.split(b"\n")
        i = 0
        while lines[i].startswith(b"X-"):
            i += 1
        i += 3                          # smtp-sink's Received:
        i += 1                          # ternd's
        while lines[i][:1] in (b" ", b"\t"):
            i += 1
        got = b"\n".join(lines[i:])
        good += got == content(want[qid])[1].replace(b"\r\n", b"\n") + b"\n"
    print(good, dups)
EOF

# stats KEY - one figure of ternq stats --json
stats() {
	ternq_ stats --json | jq -r ".$1"
}

# queued - messages in the queue
queued() {
	ternq_ list --json | wc -l
}

# live_drained - no message for the live sink is queued
live_drained() {
	[ "$(ternq_ list --json | grep -c '@live\.test')" -eq 0 ]
}

# no_segments - no segment file in the spool
no_segments() {
	[ "$(ls "$TERND_DIR/spool/seg" | wc -l)" -eq 0 ]
}

# dead_acked FILE - how many dead.test messages were acknowledged
dead_acked() {
	awk '$3 == "dead.test"' "$@" | sort -u | wc -l
}

# bound_holds - spool octets <= 2 x live octets + one segment
bound_holds() {
	local s l
	s=$(stats spool_bytes) l=$(stats live_bytes)
	[ "$s" -le $((2 * l + SEG)) ]
}

# all_intact FILE... - every acknowledged dead.test message is queued and
# its body (ternq cat) is what was sent; prints how many are
all_intact() {
	local i qid dom n=0
	while read -r i qid dom; do
		ternq_ cat "$qid" >"$top/cat" 2>"$top/cat.err" && [ ! -s "$top/cat.err" ] &&
			python3 "$top/mail.py" check-cat "$i" "$top/cat" && n=$((n + 1))
	done < <(awk '$3 == "dead.test"' "$@" | sort -u)
	echo "$n"
}

# metric NAME - a gauge's value from the metrics endpoint
metric() {
	curl -s "http://127.0.0.1:$mport/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}

# --- 1. the live mail drains, the deferred mail is copied forward ----------
python3 "$top/mail.py" send "$TERND_PORT" 1 "$N" 4 "$top/acked1"
tap_is "phase 1: every message acknowledged" "$(sort -u "$top/acked1" | wc -l)" "$N"
d1=$(dead_acked "$top/acked1")
tap_is "phase 1: 1% to the dead peer" "$d1" $((N / 100))
tap_check "phase 1: the live mail is delivered" wait_until 120 live_drained
tap_is "phase 1: the dead peer's stays" "$(queued)" "$d1"
live=$(stats live_bytes)
tap_is "phase 1: live octets are the deferred messages' (ternq stats)" \
	"$(stats segment_live_bytes)" "$live"
tap_check "phase 1: spool octets <= 2 x live + one segment" wait_until 20 bound_holds
tap_diag "phase 1: spool $(stats spool_bytes) octets in $(stats segments) segment files, live $live"
tap_like "phase 1: segments were copied forward and removed" \
	"$(grep -c 'copied forward' "$TERND_LOG")" '^[1-9][0-9]*$'
tap_is "phase 1: tern_spool_live_bytes is the live octets" "$(metric tern_spool_live_bytes)" "$live"
tap_check "phase 1: tern_spool_bytes at most the files' octets" \
	test "$(metric tern_spool_bytes)" -le "$(stats segment_bytes)"
tap_is "phase 1: every deferred body intact (ternq cat)" "$(all_intact "$top/acked1")" "$d1"

# --- 2. kill -9 while segments are copied forward --------------------------
python3 "$top/mail.py" send "$TERND_PORT" $((N + 1)) "$N" 4 "$top/acked2" &
sender=$!
tap_bg_register "$sender"
before=$(grep -c 'copied forward' "$TERND_LOG")
started=0
for round in 1 2 3; do
	sleep "$((RANDOM % 2)).$((RANDOM % 9 + 1))"
	ternd_kill9
	ternd_start && started=$((started + 1)) || break
done
wait "$sender"
tap_is "phase 2: ternd came back after each of 3 kills" "$started" 3
tap_diag "phase 2: $(($(grep -c 'copied forward' "$TERND_LOG") - before)) segments copied forward and removed while the kills happened"
d2=$(dead_acked "$top/acked1" "$top/acked2")
tap_check "phase 2: the live mail is delivered" wait_until 120 live_drained
tap_check "phase 2: the deferred mail stays ($d2 acknowledged)" test "$(queued)" -ge "$d2"
tap_is "phase 2: every acknowledged deferred body intact" \
	"$(all_intact "$top/acked1" "$top/acked2")" "$d2"
tap_is "phase 2: recovery found nothing damaged" \
	"$(grep -c 'checked .*, [1-9][0-9]* damaged\|missing committed data\|does not match' "$TERND_LOG")" 0
tap_check "phase 2: spool octets <= 2 x live + one segment" wait_until 20 bound_holds
tap_diag "phase 2: spool $(stats spool_bytes) octets in $(stats segments) segment files, live $(stats live_bytes)"

# --- 3. the dead peer comes up ---------------------------------------------
smtp-sink -c -u nobody -d "$top/dead/%M." "127.0.0.1:$dport" 64 >"$top/sink2.out" 2>&1 &
tap_bg_register "$!"
wait_for_port "$dport"
ternq_ peers reset dead >/dev/null 2>&1
ternq_ retry ALL >/dev/null 2>&1	# some went with the breaker's probe
tap_check "phase 3: the queue drains to the peer come back" wait_until 120 ternd_drained
cat "$top/acked1" "$top/acked2" >"$top/acked"
read -r good dups < <(python3 "$top/mail.py" check-dumps "$top/dead" "$top/acked")
tap_is "phase 3: every deferred message delivered, content as sent" "$good" "$d2"
tap_diag "phase 3: $dups extra copies (kill -9 in phase 2 may resend what was in flight)"
tap_check "phase 3: the drained queue keeps no segment file" wait_until 10 no_segments
tap_is "phase 3: ternq stats: nothing live, nothing on disk" "$(stats live_bytes) $(stats spool_bytes)" "0 0"
ternd_stop_checked
tap_done
