#!/bin/bash
# ternd-reuse.sh - where a connection's reuse ends, checked against
# tests/lib/record_peer.py. Mail is queued while the peers have no host,
# then ternd restarts with them, so that each peer's messages wait
# together; each peer has one connection (max_connections = 1), and every
# sender is <>, so that no bounce makes a DSN.
#
#   1. a peer that refuses every MAIL after the 4th of a session with
#      "452 4.5.3 ... Too many messages sent" and keeps the session open
#      (OpenSMTPD's max-mails), with BDAT windows and without PIPELINING
#      or CHUNKING at all: the refused transaction is not sent (no
#      deferral, no attempt counted) and goes again at once on a new
#      connection; the refusing connection takes no more and closes; all
#      12 messages arrive once, over 3 connections of at most 4 each, none
#      deferred (before: deferred at each MAIL refusal, the queue stalled
#      on the reused connection)
#   2. max_messages_per_connection = 3 counts every transaction, a refused
#      one too: of 6 messages, the second refused at RCPT, 3 transactions
#      go over each of 2 connections (before: 4 on the first)
#   3. three transactions in a row deferred by the peer's 451 end the
#      connection's reuse: the first connection takes no more (those in
#      flight are answered), the rest go over a new one, and every message
#      arrives once in the end
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/record.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"
top=$(tap_tmpdir)

peers_all="maxw maxs limit row"
declare -A port count
for s in $peers_all; do
	port[$s]=$(free_port)
done
count=([maxw]=12 [maxs]=12 [limit]=6 [row]=6)

# peers WITH_HOSTS - the [peer] sections (no host: mail stays queued) and routes
peers() {
	local s
	for s in $peers_all; do
		printf '%s\n' "[peer $s]" "tls = none" "max_connections = 1" "min_idle = 0"
		[ "$s" = limit ] && echo "max_messages_per_connection = 3"
		[ "$1" = yes ] && printf '%s\n' "host = [127.0.0.1]" "port = ${port[$s]}"
	done
	echo "[routes]"
	for s in $peers_all; do
		echo "$s.test = $s"
	done
}

# status PEER STATUS - delivery lines of PEER's mail with that status
status() {
	grep -cE ": [0-9A-Z]{13}: to=<rcpt[0-9]+@$1\\.test>, .*status=$2 " "$TERND_LOG"
}

# per_conn PEER - the MAIL commands of each connection the peer saw, in order
per_conn() {
	python3 - "$top/$1/log" <<-'EOF2'
		import collections, re, sys
		n = collections.OrderedDict()
		for line in open(sys.argv[1]):
		    m = re.match(r"conn=(\d+) (MAIL|EHLO) ", line)
		    if m:
		        n.setdefault(m.group(1), 0)
		        n[m.group(1)] += m.group(2) == "MAIL"
		print(" ".join(str(v) for v in n.values()))
	EOF2
}

# --- queue the mail while no peer has a host ----------------------------------------

export TERND_PEERS
TERND_PEERS=$(peers no)
ternd_setup "$top/t" "min_backoff = 2s" "max_backoff = 4s" || exit 1
spec=""
for s in $peers_all; do
	spec="$spec $s:${count[$s]}"
done
recorder_queue $spec
ternd_sync
tap_is "36 messages are queued" "$(ternq_ list --json | wc -l)" 36
ternd_stop
tap_is "ternd stops cleanly" "$?" 0

# --- the peers, then ternd with their hosts ---------------------------------------------

recorder_start maxw --delay 0.05 --max-mails 4
recorder_start maxs --delay 0.05 --max-mails 4 --no-chunking --no-pipelining
recorder_start limit --delay 0.05 --fail "2:rcpt:550 5.1.1 <rcpt2@limit.test>: Recipient address rejected"
recorder_start row --delay 0.05 --fail "1:bdat:451 4.3.0 Error: try again later" \
	--fail "2:bdat:451 4.3.0 Error: try again later" --fail "3:bdat:451 4.3.0 Error: try again later"
TERND_PEERS=$(peers yes)
ternd_setup "$top/t" "min_backoff = 2s" "max_backoff = 4s" || exit 1
tap_check "the queue empties" wait_until 60 ternd_drained
ternd_stop
tap_is "ternd stops cleanly" "$?" 0

# --- 1. a peer that refuses MAIL past its limit ------------------------------------------

for s in maxw maxs; do
	tap_is "1: $s: 12 messages delivered once each" "$(intact $s)" "12 12"
	tap_is "1: $s: none deferred" "$(status $s deferred)" 0
	tap_is "1: $s: 12 logged sent" "$(status $s sent)" 12
	tap_is "1: $s: 4 accepted on each of 3 connections" \
		"$(grep -c '^conn=[0-9]* mail [1-4] ' "$top/$s/log") $(grep -c '^conn=[0-9]* EHLO ' "$top/$s/log")" "12 3"
	tap_is "1: $s: each refusing connection said so once and took no more" \
		"$(grep -cE ": peer $s: 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\] refused MAIL on a connection that carried 4 transactions \\(452 4\\.5\\.3 Error: Too many messages sent\\): it takes no more$" "$TERND_LOG")" 2
	tap_like "1: $s: the refused ones not sent, sent again at once" \
		"$(nlog_peer $s "not sent to 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\] \\(refused at MAIL on a reused connection\\): sent again at once$")" '^[1-9][0-9]*$'
done
tap_is "1: maxs: one MAIL refused per connection (no PIPELINING)" \
	"$(grep -c '^conn=[0-9]* max-mails$' "$top/maxs/log")" 2

# --- 2. every transaction counts toward max_messages_per_connection ---------------------

tap_is "2: limit: the refused recipient bounced" "$(status limit bounced)" 1
tap_is "2: limit: 3 transactions on each of 2 connections" "$(per_conn limit)" "3 3"
tap_is "2: limit: 5 messages delivered once each" "$(intact limit)" "5 5"

# --- 3. transactions deferred in a row end the reuse -----------------------------------

tap_is "3: row: the connection closed after 3 deferrals in a row" \
	"$(grep -cE ": peer row: 3 transactions in a row deferred by 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]: the connection takes no more$" "$TERND_LOG")" 1
tap_like "3: row: fewer than 6 transactions on the first connection, more connections after it" \
	"$(per_conn row)" '^[3-5]( [0-9]+)+$'
tap_is "3: row: 6 messages delivered once each" "$(intact row)" "6 6"
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
