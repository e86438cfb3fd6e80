#!/bin/bash
# ternd-crash-relay.sh - kill -9 ternd while it receives and relays; every
# acknowledged message reaches the peer at least once (RFC 5321 §6.1).
#
# smtp-blast sends with pipelining sessions and records the queue id of
# every message ternd acknowledged. ternd relays at the same time to an
# smtp-sink that dumps each transaction to a file. ternd is killed with
# SIGKILL at random moments (so in DATA, in a group commit, in a relay
# transaction, between the peer's 250 and the commit of that outcome) and
# restarted, ROUNDS times (5 in make check; tests/stress/run runs 20).
# Afterwards the queue must drain, every acknowledged queue id must be in a
# dump (ternd's Received: names it), and no spool file may be left. A
# message may arrive twice (at least once, never lost): the duplicates are
# counted and must stay within what can be in flight at a kill.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
blast=${top_builddir:-$here/../..}/bench/smtp-blast
rounds=${ROUNDS:-5}
conns=4

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v smtp-sink >/dev/null || tap_skip_all "smtp-sink not installed"
[ -x "$blast" ] || tap_skip_all "bench/smtp-blast not built"

top=$(tap_tmpdir)
dumps=$top/dumps
mkdir -p "$dumps" && chmod 0777 "$dumps"
sport=$(free_port)
smtp-sink -c -u nobody -d "$dumps/%M." "127.0.0.1:$sport" 64 >"$top/sink.out" 2>&1 &
tap_bg_register "$!"
wait_for_port "$sport"

TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $sport" "tls = none" \
	"min_idle = 1" "max_connections = $conns" "[routes]" "* = sink")
ternd_setup "$top/t" "large_message_threshold = 16KB" "min_backoff = 1s" "max_backoff = 2s" || exit 1

"$blast" -c 3 -n 100000 -s 10240 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast1.log" 2>&1 &
b1=$!
"$blast" -B -c 1 -n 100000 -s 20480 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast2.log" 2>&1 &
b2=$!
tap_bg_register "$b1" "$b2"

started=0
for round in $(seq "$rounds"); do
	sleep "0.$((RANDOM % 9 + 1))"
	ternd_kill9
	ternd_start && started=$((started + 1)) || break
done
kill -TERM "$b1" "$b2" 2>/dev/null
wait "$b1" "$b2" 2>/dev/null
tap_is "ternd came back after each of $rounds kills" "$started" "$rounds"

tap_check "the queue drains to the peer" wait_until 180 ternd_drained
ternd_stop

ternd_relay_outcome "$top/acked" "$dumps" "$top/ids"
tap_like "clients got acknowledgements across $rounds kills ($ACKED)" "$ACKED" '^[1-9][0-9]*$'
tap_is "every acknowledged message reached the peer" "$LOST" 0
dups=$DUPS
# At a kill, a message can be sent again if its outcome was not committed:
# at most one in flight per connection, plus one pipelined behind it.
tap_diag "$dups duplicate deliveries over $rounds kills ($DELIVERED messages)"
tap_check "duplicates ($dups) within what is in flight at the kills ($((rounds * conns * 2)))" \
	test "$dups" -le $((rounds * conns * 2))
tap_is "no spool file is left" "$(cd "$TERND_DIR/spool" && ls seg own | grep -c '^[0-9A-Z]')" 0
tap_is "recovery found no damaged body" "$(grep -c 'recovery: checked .*, [1-9][0-9]* damaged' "$TERND_LOG")" 0
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
