#!/bin/bash
# ternd-notice.sh - a non-delivery notification is never lost: it is written
# to the queue database in the transaction that records the bounce, and
# queued as a message from there. A storage error while queueing it (ENOSPC
# on the spool, from the faultfs shim) is retried after min_backoff; a crash
# after the bounce leaves it for the next start. Either way the sender gets
# exactly one notification, with the bounce's status and the original's
# queue id.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"
shim=${top_builddir:-$here/../..}/tests/fault/faultfs.so

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
[ -f "$shim" ] || tap_skip_all "faultfs.so not built (make check builds it)"
for cmd in swaks smtp-sink curl; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done

top=$(tap_tmpdir)
q='[0-9A-Z]{13}'
export FAULTFS_CONTROL=$top/fault FAULTFS_DIR=$top/t/spool
: >"$FAULTFS_CONTROL"
chmod 644 "$FAULTFS_CONTROL"

# hard refuses every RCPT (500 5.3.0); dsn takes the notifications. hard
# starts only once a fault is in force, so the bounce comes when we want it.
sink_port[hard]=$(free_port)
sink_port[dsn]=$(free_port)
sink dsn "${sink_port[dsn]}" "$top/dsn"
TERND_PEERS=$(printf '%s\n' "[peer hard]" "host = [127.0.0.1]" "port = ${sink_port[hard]}" \
	"tls = none" "[peer dsn]" "host = [127.0.0.1]" "port = ${sink_port[dsn]}" "tls = none" \
	"[routes]" "hard.test = hard" "* = dsn")
export LD_PRELOAD=$shim ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
mport=$(free_port)
ternd_setup "$top/t" "min_backoff = 1s" "max_backoff = 1s" "metrics_listen = 127.0.0.1:$mport" ||
	exit 1
# waiting - tern_notices_waiting from the metrics endpoint
waiting() {
	curl -s "http://127.0.0.1:$mport/metrics" | sed -n 's/^tern_notices_waiting //p'
}

# bounce_under_fault N - a message for bob@hard.test, deferred while hard is
# down, then bounced by hard while spool writes fail (ENOSPC); prints its id
bounce_under_fault() {
	local id
	id=$(send "m$1" alice@example.org bob@hard.test --header "Subject: notice $1")
	wait_until 10 _atleast 1 ": $id: to=<bob@hard\\.test>, .*status=deferred " >&2
	echo "write=ENOSPC" >"$FAULTFS_CONTROL"
	sink hard "${sink_port[hard]}" "$top/hard" -f rcpt
	wait_until 20 _atleast 1 ": $id: to=<bob@hard\\.test>, .*status=bounced " >&2
	wait_until 10 _atleast 1 ": $id: cannot queue the non-delivery notification: " >&2
	sink_stop hard
	echo "$id"
}

# --- 1. a storage error while queueing the notification: retried --------------------

id1=$(bounce_under_fault 1)
tap_like "1: the message is bounced by hard" \
	"$(grep -E ": $id1: to=<bob@hard\\.test>, " "$TERND_LOG" | tail -1)" \
	"dsn=5\\.3\\.0, status=bounced \\(500 5\\.3\\.0 Error: command failed\\)"
tap_like "1: queueing the notification fails with the spool's error, and says when it retries" \
	"$(grep -E ": $id1: cannot queue the non-delivery notification: " "$TERND_LOG" | head -1)" \
	"No space left on device \\(next try in 1 s\\)$"
wait_until 10 _atleast 1 ": $id1: removed$"
tap_is "1: the bounced message has left the queue" "$(nlog ": $id1: removed$")" 1
tap_is "1: no notification is queued while the fault lasts" \
	"$(nlog ": $id1: sender non-delivery notification: ")" 0
sleep 2
tap_is "1: ... even after min_backoff" "$(nlog ": $id1: sender non-delivery notification: ")" 0
tap_is "1: tern_notices_waiting shows it" "$(waiting)" 1
tap_is "1: so does ternq list" "$(ternq_ list)" \
	$'Mail queue is empty\n-- 1 non-delivery notification waiting to be queued.'
: >"$FAULTFS_CONTROL"
wait_until 10 _atleast 1 ": $id1: sender non-delivery notification: "
dsn1=$(sed -nE "s/^.*: $id1: sender non-delivery notification: ($q)\$/\\1/p" "$TERND_LOG")
tap_like "1: the fault cleared: the notification is queued" "$dsn1" "^$q\$"
tap_is "1: tern_notices_waiting is 0 again" "$(waiting)" 0
wait_until 10 _atleast 1 ": $dsn1: removed$"
tap_is "1: ... and relayed to the sender's peer" \
	"$(nlog ": $dsn1: to=<alice@example\\.org>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${sink_port[dsn]}, .*status=sent ")" 1
f=$(grep -l "^X-Tern-Queue-ID: $id1$" "$top"/dsn/* | head -1)
tap_like "1: the notification reports the bounce" "$(cat "${f:-/dev/null}")" \
	$'\nFinal-Recipient: rfc822; bob@hard\\.test\nAction: failed\nStatus: 5\\.3\\.0\nRemote-MTA: dns; 127\\.0\\.0\\.1\nDiagnostic-Code: smtp; 500 5\\.3\\.0 Error: command failed\n'
tap_like "1: ... and returns the original's headers" "$(cat "${f:-/dev/null}")" \
	$'\nSubject: notice 1\n'

# --- 2. a crash after the bounce: the next start queues the notification ------------

id2=$(bounce_under_fault 2)
tap_like "2: a second message is bounced under the fault" "$id2" "^$q\$"
wait_until 10 _atleast 1 ": $id2: removed$"
tap_is "2: the bounced message has left the queue" "$(nlog ": $id2: removed$")" 1
ternd_kill9
: >"$FAULTFS_CONTROL"
unset LD_PRELOAD
ternd_start
wait_until 10 _atleast 1 ": $id2: sender non-delivery notification: "
dsn2=$(sed -nE "s/^.*: $id2: sender non-delivery notification: ($q)\$/\\1/p" "$TERND_LOG")
tap_like "2: after kill -9 and a restart, the notification is queued" "$dsn2" "^$q\$"
wait_until 10 _atleast 1 ": $dsn2: removed$"
tap_is "2: ... and relayed" "$(nlog ": $dsn2: to=<alice@example\\.org>, .*status=sent ")" 1
sleep 1
tap_is "exactly one notification per bounced message reached the sender" \
	"$(cat "$top"/dsn/* | grep -c '^Final-Recipient: rfc822; bob@hard\.test$')" 2
tap_is "the queue is empty" "$(ternq_ list --json | wc -l)" 0
tap_is "ternq list: empty, no notification waiting, no heading" "$(ternq_ list)" "Mail queue is empty"
ternd_stop_checked
tap_done
