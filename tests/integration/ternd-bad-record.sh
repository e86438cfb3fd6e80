#!/bin/bash
# ternd-bad-record.sh - records read back from the queue database are
# checked as input from the network is (store_codec.c). Two queued
# messages are rewritten past ternd, with LMDB's own mdb_dump/mdb_load: A
# gets a 60,000-octet sender (once a heap overflow of the relay's command
# buffer), B a recipient with CRLF and an SMTP command in it (once
# injected on the relay connection). When ternd starts again with a peer,
# each is held with one log line naming it, nothing of either reaches the
# peer, a message sent after them is relayed, and ternd runs on, with no
# sanitizer report.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for c in smtp-sink swaks mdb_dump mdb_load python3; do
	command -v "$c" >/dev/null || tap_skip_all "$c not installed"
done

top=$(tap_tmpdir)
ternd_setup "$top/t" || exit 1	# peer "relay" without a host: mail stays queued
qa=$(send a a@example.org to-a@example.org)
qb=$(send b b@example.org to-b@example.org)
tap_like "A queued" "$qa" '^[0-9A-Z]{13}$'
tap_like "B queued" "$qb" '^[0-9A-Z]{13}$'
ternd_stop

# rewrite TABLE QID FIELD VALUE - replace the first string of a record
# (message: the sender; recipient 0: its address) and load it back over
# the old one. Layouts: store_codec.c (version 1).
rewrite() {
	local table=$1 qid=$2 value=$3 db=$TERND_DIR/state/queue
	mdb_dump -s "$table" "$db" | python3 -c '
import sys
table, qid, value = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode().decode("unicode_escape").encode("latin-1")
lines = sys.stdin.read().split("\n")
head, i, out = [], 0, None
while lines[i] != "HEADER=END":
	head.append(lines[i]); i += 1
head.append(lines[i]); i += 1
while lines[i] != "DATA=END":
	k, v = bytes.fromhex(lines[i].strip()), bytes.fromhex(lines[i + 1].strip())
	i += 2
	want = k == qid if table == "msg" else k == qid + b"\0\0\0\0"
	if not want:
		continue
	at = 116 if table == "msg" else 19	# the fixed part before the first string
	n = int.from_bytes(v[at:at + 2], "little")
	v = v[:at] + len(value).to_bytes(2, "little") + value + v[at + 2 + n:]
	out = (k, v)
assert out, "no record of " + sys.argv[2]
print("\n".join(head))
print(" " + out[0].hex())
print(" " + out[1].hex())
print("DATA=END")
' "$table" "$qid" "$value" >"$top/$table.dump" && mdb_load -s "$table" -f "$top/$table.dump" "$db"
}
tap_check "A's sender rewritten (60000 octets)" rewrite msg "$qa" "$(printf '%060000d' 0 | tr 0 s)@example.org"
tap_check "B's recipient rewritten (CRLF inside)" \
	rewrite rcpt "$qb" 'to-b@example.org>\r\nRCPT TO:<victim@example.org'

sport=$(free_port)
sink peer "$sport" "$top/dumps"
TERND_PEERS=$(printf '%s\n' "[peer relay]" "host = [127.0.0.1]" "port = $sport" "tls = none" \
	"[routes]" "* = relay")
ternd_setup "$top/t" || exit 1
held_a="^.*$qa: a queue record fails validation .*: message held, not relayed$"
held_b="^.*$qb: a queue record fails validation .*: message held, not relayed$"
tap_check "A is held, with a log line" wait_until 20 _atleast 1 "$held_a"
tap_check "B is held, with a log line" wait_until 20 _atleast 1 "$held_b"
qc=$(send c c@example.org to-c@example.org)
tap_like "C queued after them" "$qc" '^[0-9A-Z]{13}$'
tap_check "C is relayed" wait_until 20 _atleast 1 "$qc: to=<to-c@example.org>.*status=sent"
sleep 3	# three more scheduler passes: nothing more is logged of A or B
tap_is "A logged once" "$(nlog "$held_a")" 1
tap_is "B logged once" "$(nlog "$held_b")" 1
tap_is "ternd runs on" "$(kill -0 "$TERND_PID" 2>/dev/null && echo yes)" yes
tap_is "the peer got one message (C)" "$(files "$top/dumps")" 1
tap_is "no injected recipient reached the peer" \
	"$(cat "$top"/dumps/* 2>/dev/null | grep -c victim)" 0
tap_is "no attempt of A or B" "$(nlog "($qa|$qb): to=")" 0
tap_like "B listed as held" "$(ternq_ list | grep "^$qb")" "^$qb!"
tap_is "ternq show B: cannot read (damaged)" "$(ternq_ show "$qb" 2>&1)" "ternq: $qb: cannot read"
ternd_stop_checked
tap_done
