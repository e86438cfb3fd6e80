#!/bin/bash
# ternd-reload.sh - SIGHUP reloads peers and routes: an unchanged peer
# keeps its warm connection, a new peer and route work at once (and have
# their metrics), a changed peer reconnects to its new host, the queued
# mail of a removed peer is routed again by the new [routes], and a peer
# added back keeps its one set of series.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in swaks smtp-sink curl; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
top=$(tap_tmpdir)
for s in a b c; do
	sink "$s" "$(free_port)" "$top/$s"
done

# peers A [B] - the [peer] and [routes] sections: a.test goes to sink a
# (warm, one connection), and with B also b.test to peer "pb" on sink B
peers() {
	printf '%s\n' "[peer pa]" "host = [127.0.0.1]" "port = $1" "tls = none" "min_idle = 1" \
		"max_connections = 1"
	[ -n "${2:-}" ] && printf '%s\n' "[peer pb]" "host = [127.0.0.1]" "port = $2" "tls = none" \
		"min_idle = 0" "breaker_failures = 1"
	printf '%s\n' "[routes]" "a.test = pa"
	[ -n "${2:-}" ] && printf '%s\n' "b.test = pb"
	[ -n "${3:-}" ] && printf '%s\n' "$3"
	return 0
}

# reconfigure ARGS... - rewrite the [peer]/[routes] part of tern.conf, SIGHUP,
# and wait for the reload to be logged
reconfigure() {
	local n
	n=$(nlog ': configuration reloaded from ')
	sed -i '/^\[peer /,$d' "$TERND_CONF"
	peers "$@" >>"$TERND_CONF"
	kill -HUP "$TERND_PID"
	wait_until 10 _atleast $((n + 1)) ': configuration reloaded from '
}

# pb_sent - the tern_deliveries_total lines of peer pb, status sent
pb_sent() {
	curl -sS --fail --noproxy '*' --max-time 10 "http://127.0.0.1:$mport/metrics" |
		grep '^tern_deliveries_total{peer="pb",status="sent"} '
}

# pb_breaker - pb's tern_breaker_state line
pb_breaker() {
	curl -sS --fail --noproxy '*' --max-time 10 "http://127.0.0.1:$mport/metrics" |
		grep '^tern_breaker_state{peer="pb"} '
}

# _pb_breaker_is N - pb_breaker is one line, with the value N
_pb_breaker_is() {
	[ "$(pb_breaker)" = "tern_breaker_state{peer=\"pb\"} $1" ]
}

# _pb_sent_is N - pb_sent is one line, with the value N
_pb_sent_is() {
	[ "$(pb_sent)" = "tern_deliveries_total{peer=\"pb\",status=\"sent\"} $1" ]
}

mport=$(free_port)
TERND_PEERS=$(peers "${sink_port[a]}")
ternd_setup "$top/t" "min_backoff = 1s" "max_backoff = 2s" "metrics_listen = 127.0.0.1:$mport" ||
	exit 1
unset TERND_PEERS
wait_until 10 _atleast 1 'peer pa: relaying to '
# the warm connection is open before the first message
wait_until 10 sh -c "ss -Htn 'dport = :${sink_port[a]}' | grep -q ESTAB"

q1=$(send a1 s@example.org u1@a.test)
wait_until 20 _atleast 1 ": $q1: to=<u1@a\\.test>, .*status=sent "
tap_is "before: a.test is delivered to sink a" "$(files "$top/a")" 1

# --- a new peer and route; pa unchanged ---------------------------------------------
reconfigure "${sink_port[a]}" "${sink_port[b]}"
tap_check "reload: peer pb starts" wait_until 10 _atleast 1 'peer pb: relaying to '
q2=$(send b1 s@example.org u2@b.test)
tap_like "reload: b.test is accepted once the route exists" "$q2" '^[0-9A-Z]{13}$'
wait_until 20 _atleast 1 ": $q2: to=<u2@b\\.test>, .*status=sent "
tap_is "reload: b.test goes to the new peer" "$(files "$top/b")" 1
# (the delivery is logged a moment before it is counted)
wait_until 10 _pb_sent_is 1
tap_is "reload: the new peer's delivery is counted" "$(pb_sent)" \
	'tern_deliveries_total{peer="pb",status="sent"} 1'
q3=$(send a2 s@example.org u3@a.test)
wait_until 20 _atleast 1 ": $q3: to=<u3@a\\.test>, .*status=sent "
tap_is "reload: pa's connection was not closed" "$(nlog 'peer pa: connection to .* closed')" 0
tap_like "reload: the second a.test message reused it" \
	"$(grep -E ": $q3: to=<u3@a\\.test>, " "$TERND_LOG")" ', conn_use=2, '

# --- pa moves to sink c ---------------------------------------------------------------
reconfigure "${sink_port[c]}" "${sink_port[b]}"
tap_check "change: logged" wait_until 10 _atleast 1 'peer pa: connection settings changed: its connections are reopened'
tap_check "change: the old connection is closed" wait_until 10 _atleast 1 'peer pa: connection to .* closed'
q4=$(send a3 s@example.org u4@a.test)
wait_until 20 _atleast 1 ": $q4: to=<u4@a\\.test>, .*status=sent "
tap_is "change: a.test now reaches sink c" "$(files "$top/c") $(files "$top/a")" "1 2"

# --- pb removed with mail queued for it; b.test now routed to pa ----------------------
sink_stop b
q5=$(send b2 s@example.org u5@b.test)
wait_until 20 _atleast 1 ": $q5: to=<u5@b\\.test>, .*status=deferred "
tap_check "remove: pb's breaker opened (breaker_failures = 1)" wait_until 10 _pb_breaker_is 1
reconfigure "${sink_port[c]}" "" "b.test = pa"
tap_check "remove: pb's queued recipient is routed again" \
	wait_until 20 _atleast 1 ": $q5: to=<u5@b\\.test>: peer pb is no longer configured: routed to pa"
tap_check "remove: and delivered through pa to sink c" \
	wait_until 30 _atleast 1 ": $q5: to=<u5@b\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${sink_port[c]}, .*status=sent "
tap_is "remove: sink c has both messages" "$(files "$top/c")" 2
tap_is "remove: a removed peer's breaker reads closed" "$(pb_breaker)" 'tern_breaker_state{peer="pb"} 0'
tap_is "the queue is empty" "$(ternq_ list --json | wc -l)" 0

# --- pb added back: its series once, its count kept -----------------------------------
reconfigure "${sink_port[c]}" "${sink_port[b]}"
tap_check "re-added: pb starts again" wait_until 10 _atleast 2 'peer pb: relaying to '
tap_is "re-added: one series for pb, still counting 1" "$(pb_sent)" \
	'tern_deliveries_total{peer="pb",status="sent"} 1'
tap_is "re-added: its breaker starts closed" "$(pb_breaker)" 'tern_breaker_state{peer="pb"} 0'
ternd_stop_checked
tap_done
