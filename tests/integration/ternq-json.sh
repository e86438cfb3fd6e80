#!/bin/bash
# ternq-json.sh - ternq list --json reads as postqueue -j does (ternq(1),
# JSON; issue 15 item 7): every member postqueue(1) documents, with its
# meaning, so the queries admins run on postqueue -j give the right sets:
#   queue_name (active, deferred, hold), queue_id, arrival_time,
#   message_size, forced_expire, sender, recipients[] (those still to be
#   delivered: address, and delay_reason when there is one)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v swaks >/dev/null || tap_skip_all "swaks not installed"
command -v jq >/dev/null || tap_skip_all "jq not installed"

top=$(tap_tmpdir)
dead=$(free_port)	# nothing listens: connections are refused, mail deferred
export TERND_PEERS="[peer park]"$'\n'"[peer dead]"$'\n'"host = [127.0.0.1]"$'\n'"port = $dead"$'\n'"tls = none"$'\n'"min_idle = 0"$'\n'"[routes]"$'\n'"dead.example = dead"$'\n'"* = park"
ternd_setup "$top/t" "min_backoff = 1h" || exit 1
unset TERND_PEERS

send() {
	swaks --server 127.0.0.1 --port "$TERND_PORT" --from "$1" --to "$2" 2>&1 |
		sed -n 's/.*Ok: queued as \([0-9A-Z]*\).*/\1/p'
	ternd_sync
}
active=$(send a@x.org u1@park.example)
held=$(send b@x.org u2@park.example)
deferred=$(send c@x.org u3@dead.example)
ternq_ hold "$held" 2>/dev/null
_deferred() { [ "$(ternq_ show "$deferred" | sed -n 's/^state: //p')" = deferred ]; }
tap_check "the message for the dead peer is deferred" wait_until 20 _deferred

ternq_ list --json >"$top/q.json"
# q JQ-PROGRAM - jq -r over the listing, output sorted on one line
q() { jq -r "$1" "$top/q.json" | sort | tr '\n' ' '; }

tap_is "every postqueue -j member is there" \
	"$(jq -r '[has("queue_name","queue_id","arrival_time","message_size","forced_expire","sender","recipients")] | all' "$top/q.json" | sort -u)" true
tap_is "select(.queue_name == \"deferred\") | .queue_id" "$(q 'select(.queue_name == "deferred") | .queue_id')" "$deferred "
tap_is "select(.queue_name == \"hold\") | .queue_id" "$(q 'select(.queue_name == "hold") | .queue_id')" "$held "
tap_is "select(.queue_name == \"active\") | .queue_id" "$(q 'select(.queue_name == "active") | .queue_id')" "$active "
tap_is "forced_expire is false" "$(q '.forced_expire')" "false false false "
tap_is ".recipients[].address" "$(q '.recipients[].address')" "u1@park.example u2@park.example u3@dead.example "
tap_is "select(.recipients[].delay_reason) | .queue_id: only the deferred one has a reason" \
	"$(q 'select(.recipients[] | .delay_reason) | .queue_id')" "$deferred "
tap_like "... and says why" "$(q 'select(.queue_id == "'"$deferred"'") | .recipients[0].delay_reason')" 'refused|connect'
tap_is "sender and message_size" "$(q 'select(.queue_id == "'"$active"'") | "\(.sender) \(.message_size > 0)"')" "a@x.org true "
tap_is "arrival_time is within the last minute" \
	"$(q "select(.queue_id == \"$active\") | (now - .arrival_time | floor) < 60")" "true "
tap_is "tern's own members stay beside them" "$(q 'select(.queue_id == "'"$held"'") | .state')" "hold "
ternd_stop
tap_done
