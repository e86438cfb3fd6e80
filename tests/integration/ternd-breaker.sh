#!/bin/bash
# ternd-breaker.sh - the circuit breaker holds a failing peer at the cost
# of its probes (min_backoff 60 s: a deferred recipient is not retried
# here, so what reaches a peer after its breaker opened is probes and the
# attempts already in flight):
#
#   1. 8 connections to a peer that never finishes its greeting, timing
#      out together (breaker_failures 3): the breaker opens once, with
#      one cooldown (30 s: section 2 must run inside it, on a loaded
#      machine too), not once per connection
#   2. while it is open, mail waiting for that peer is neither read nor
#      rewritten: no job committed but their acceptance (tern_commit_batch_messages_sum),
#      no connection, the recipients' next attempt and reply unchanged
#   3. a peer that answers 421 after DATA (breaker_error_rate 0.5): the
#      breaker opens once; over 10 s each probe is one connection and two
#      transitions (half-open, open again), the cooldown doubling per
#      failed probe (2 s, then 4 s, then 8 s); it never closes
#   4. a peer that refuses connections, with min_idle 2 warm connections
#      retried every connect_timeout (1 s): once its breaker is open, no
#      connection is tried at all (tern_connections_tried_total), the warm
#      ones neither
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in swaks smtp-source curl python3; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
top=$(tap_tmpdir)

tx_port=$(free_port)
mute_port=$(free_port)
m_port=$(free_port)
refused_port=$(free_port) # nobody listens there
python3 "$here/../lib/hostile_peer.py" "$tx_port" "$top/tx421.log" 421:dot >"$top/tx421.out" 2>&1 &
tap_bg_register $!
python3 "$here/../lib/hostile_peer.py" "$mute_port" "$top/mute.log" stall:greeting >"$top/mute.out" 2>&1 &
tap_bg_register $!
wait_for_port "$tx_port" && wait_for_port "$mute_port" || tap_fail "the hostile peers listen"

# peer NAME PORT [lines] - a [peer NAME] at 127.0.0.1:PORT, opened on demand
peer() {
	printf '%s\n' "[peer $1]" "host = [127.0.0.1]" "port = $2" "tls = none" "min_idle = 0" "${@:3}"
}
TERND_PEERS=$(
	peer tx421 "$tx_port" "max_connections = 2" "breaker_error_rate = 0.5" "breaker_window = 60s" \
		"breaker_failures = 1000" "breaker_cooldown = 2s" "breaker_max_cooldown = 8s"
	peer mute "$mute_port" "max_connections = 8" "connect_timeout = 2s" "breaker_failures = 3" \
		"breaker_cooldown = 30s" "breaker_max_cooldown = 60s"
	printf '%s\n' "[peer refused]" "host = [127.0.0.1]" "port = $refused_port" "tls = none" "min_idle = 2" \
		"connect_timeout = 1s" "breaker_failures = 1" "breaker_cooldown = 60s"
	printf '%s\n' "[routes]" "tx421.test = tx421" "mute.test = mute" "refused.test = refused"
)
export TERND_PEERS
ternd_setup "$top/t" "min_backoff = 60s" "max_backoff = 60s" "metrics_listen = 127.0.0.1:$m_port" || exit 1
unset TERND_PEERS

# connects NAME - connections the hostile peer NAME accepted
connects() {
	grep -c '^[0-9]* connect$' "$top/$1.log"
}
# commits - jobs group committed so far (tern_commit_batch_messages_sum)
commits() {
	curl -s --max-time 10 "http://127.0.0.1:$m_port/metrics" |
		sed -n 's/^tern_commit_batch_messages_sum \([0-9.e+]*\)$/\1/p'
}
# opened NAME - lines saying NAME's breaker opened, any reason
opened() {
	nlog ": warning: peer $1: circuit breaker open for "
}

# --- 1. 8 connections timing out together -----------------------------------------------

pids=()
for i in 1 2 3 4 5 6 7 8; do
	send "mute$i" m@example.org "m$i@mute.test" --header "Subject: mute $i" >/dev/null &
	pids+=($!)
done
wait "${pids[@]}"
tap_check "1: the breaker opens" wait_until 15 _atleast 1 ': warning: peer mute: circuit breaker open for'
sleep 1
tap_is "1: 8 connections were tried together" "$(connects mute)" 8
tap_is "1: it opened once, after the third failure, for breaker_cooldown (30s)" \
	"$(opened mute)/$(nlog ': warning: peer mute: circuit breaker open for 30s after 3 failures \(')" 1/1

# --- 2. while open: nothing read, nothing written -----------------------------------------

commits_before=$(commits)
c_before=$(connects mute)
q1=$(send held1 h@example.org held1@mute.test --header "Subject: held 1")
q2=$(send held2 h@example.org held2@mute.test --header "Subject: held 2")
sent_at=$(date +%s)
next1=$(rcpt_json "$q1" next_attempt)
sleep 2
# (send waits for each acceptance's commit with a queue operation of
# its own, ternd_sync: two jobs more)
tap_is "2: the only jobs committed meanwhile are the two acceptances" \
	"$(commits)" "$((commits_before + 2 + 2))"
tap_is "2: no connection to the peer" "$(connects mute)" "$c_before"
tap_is "2: the waiting recipient's next attempt is unchanged" "$(rcpt_json "$q1" next_attempt)" "$next1"
tap_check "2: ... and is not pushed to the breaker's end ($next1 <= $sent_at)" test "$next1" -le "$sent_at"
tap_is "2: no attempt was recorded for it" "$(rcpt_json "$q2" attempts)" 0
tap_is "2: nor a delay reason" "$(rcpt_json "$q2" delay_reason)" ""
tap_is "2: the breaker is still open" "$(opened mute)" 1

# --- 3. 421 after DATA ------------------------------------------------------------------

smtp-source -m 26 -s 2 -f f@example.org -t fred@tx421.test "127.0.0.1:$TERND_PORT" >"$top/tx.source" 2>&1
wait_until 20 _atleast 1 ': warning: peer tx421: circuit breaker open for 2s after 20 of 20 attempts in 60s failed temporarily \(breaker_error_rate 0\.5\); its mail waits$'
c_open=$(connects tx421)
sleep 10
probes=$(nlog ': peer tx421: circuit breaker half-open: probing$')
reopened=$(nlog ': warning: peer tx421: circuit breaker open for [0-9]+s after a failed probe \(its transaction failed temporarily\); its mail waits$')
tap_like "3: probes in 10 s, as the cooldowns allow: 1 to 3 (got $probes)" "$probes" '^[1-3]$'
tap_is "3: the breaker opened once from closed, and again only after each failed probe" \
	"$(opened tx421)" "$((1 + reopened))"
tap_is "3: each probe failed and opened it again" "$reopened" "$probes"
tap_is "3: no success of an earlier attempt closed it" "$(nlog ': peer tx421: circuit breaker closed$')" 0
tap_is "3: the cooldown doubled per failed probe: 2s, 4s, 8s" \
	"$(grep -oE 'peer tx421: circuit breaker open for [0-9]+s' "$TERND_LOG" | grep -oE '[0-9]+s$' | head -3 | tr '\n' ' ')" \
	"$(printf '%s ' 2s 4s 8s | cut -d' ' -f1-$((1 + reopened))) "
c_end=$(connects tx421)
tap_check "3: after it opened, connections: the probes and at most the 2 in flight (got $((c_end - c_open)))" \
	test "$((c_end - c_open))" -le "$((probes + 2))"
tap_is "3: every connection the peer saw is one logged attempt" "$c_end" \
	"$(nlog ': [0-9A-Z]{13}: to=<fred@tx421\.test>, relay=127\.0\.0\.1\[127\.0\.0\.1\]:[0-9]+, .*status=deferred ')"

# --- 4. a refusing peer: no connection tried while open, warm ones neither ----------------

# tried - connections tried to the refusing peer (tern_connections_tried_total)
tried() {
	curl -s --max-time 10 "http://127.0.0.1:$m_port/metrics" |
		sed -n 's/^tern_connections_tried_total{peer="refused"} \([0-9]*\)$/\1/p'
}
w0=$(tried)
sleep 3
w1=$(tried)
tap_check "4: closed, with no mail: the 2 warm connections are retried each second ($w0 -> $w1)" \
	test "$((w1 - w0))" -ge 2
send ref1 r@example.org ref1@refused.test --header "Subject: refused" >/dev/null
tap_check "4: the breaker opens after 1 failure" wait_until 15 _atleast 1 \
	': warning: peer refused: circuit breaker open for 60s after 1 failure \(connect to 127\.0\.0\.1\[127\.0\.0\.1\]:[0-9]+: Connection refused\); its mail waits$'
sleep 1.5
o0=$(tried)
sleep 4
tap_is "4: while it is open, no connection is tried over 4 s, warm ones neither" "$(tried)" "$o0"

ternd_stop_checked
tap_done
