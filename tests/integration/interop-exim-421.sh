#!/bin/bash
# interop-exim-421.sh - ternd relays to Exim (Debian 12's exim4-daemon-light,
# unpacked by tests/lib/foreign_mta.sh, run as nobody) that closes each
# connection after 10 messages (smtp_accept_max_per_connection = 10: a 421
# to the next MAIL), in the middle of ternd's window of pipelined BDAT
# transactions, over STARTTLS with tls = verify; 30 connections, so that
# the race between the close and the replies in flight is met often.
# Asserts, by queue id, that every message is in Exim's queue exactly
# once; that the transaction Exim refused with its 421 (on a reused
# connection: the connection's end, not the message's) and those written
# behind it were not sent and went again at once, each then sent once,
# none deferred and none a possible duplicate; and that every line ternd
# logs for the connection names the TLS the connection had.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"
. "$here/../lib/foreign_mta.sh"

foreign_mta_need exim openssl
blast=${top_builddir:-$here/../..}/bench/smtp-blast
[ -x "$blast" ] || tap_skip_all "bench/smtp-blast not built"

n=300 per=10
top=$(tap_tmpdir)
pki_make "$top/pki" || tap_skip_all "cannot make the test PKI"
exim_port=$(free_port)
exim_smarthost "$top/exim" "$exim_port" "$top/pki" "smtp_accept_max_per_connection = $per" ||
	{ echo "Bail out! Exim did not start"; exit 1; }

TERND_PEERS=$(printf '%s\n' "[peer exim]" "host = [127.0.0.1]" "port = $exim_port" \
	"tls = verify" "tls_ca_file = $top/pki/ca.pem" "tls_servername = smarthost.test" \
	"max_connections = 1" "min_idle = 0" "[routes]" "* = exim")
ternd_setup "$top/ternd" "min_backoff = 1s" "max_backoff = 2s" || exit 1

blast_each_once "$n" "$top/exim/spool/input" 50 ternd_drained -B -c 2
tap_is "Exim's queue holds exactly those" "$(exim_queued "$top/exim")" "$n"
mainlog=$top/exim/log/mainlog
tap_is "Exim received $n messages" "$(grep -c ' <= ' "$mainlog")" "$n"
# Exim answers 421 to every MAIL past the limit, those ternd had
# pipelined too, then closes.
refused=$(grep -c 'rejected MAIL command .*: too many messages in one connection' "$mainlog")
tap_like "Exim refused MAIL past $per on each connection" "$refused" '^[1-9][0-9]*$'

peer_lines "$exim_port" sent | line_ids >"$top/sent"
tap_is "ternd logged $n deliveries, one per message" "$(sort -u "$top/sent" | wc -l)/$(wc -l <"$top/sent")" "$n/$n"
tap_is "no delivery line says tls=none" "$(peer_lines "$exim_port" sent | grep -c ', tls=none$')" 0
tap_is "at most $per transactions per connection" \
	"$(peer_lines "$exim_port" sent | sed -n 's/.*, conn_use=\([0-9]*\),.*/\1/p' | sort -n | tail -1)" "$per"
# The transaction refused with the 421, and those written behind it: not
# sent (a peer that says 421 processes nothing after it), sent again at
# once on a new connection, never deferred.
sed -nE 's/^.*: ([0-9A-Z]{13}): not sent to 127\.0\.0\.1\[127\.0\.0\.1\] \((refused at MAIL on a reused connection|written behind a 421)\): sent again at once$/\1/p' \
	"$TERND_LOG" | sort -u >"$top/retried"
tap_like "the transactions refused with the 421s, and those behind them, were sent again" \
	"$(wc -l <"$top/retried")" '^[1-9][0-9]*$'
tap_is "each of them was then sent once" "$(comm -12 "$top/retried" "$top/sent" | wc -l)" "$(wc -l <"$top/retried")"
r421=$(grep -c ': not sent to .* (refused at MAIL on a reused connection): sent again at once$' "$TERND_LOG")
tap_is "ternd read no more 421s than Exim sent" "$((r421 <= refused))" 1
peer_lines "$exim_port" deferred >"$top/deferred"
tap_is "none deferred" "$(wc -l <"$top/deferred")" 0
tap_is "no possible duplicate" "$(grep -c 'possible duplicate' "$TERND_LOG")" 0
tap_is "no line for the connection says tls=none" "$(peer_lines "$exim_port" '[a-z]+' | grep -c ', tls=none$')" 0

ternd_stop_checked
tap_done
