#!/bin/bash
# interop-exim-tls.sh - ternd relays to Exim (Debian 12's exim4-daemon-light,
# unpacked by tests/lib/foreign_mta.sh, run as nobody) as its smarthost:
# STARTTLS with tls = verify against the test CA, CHUNKING (BDAT) and
# PIPELINING, one connection at a time of 100 messages each, Exim told to
# issue session tickets (tls_resumption_hosts = *). Asserts, by queue id,
# that every message ternd acknowledged is in Exim's queue exactly once,
# that Exim received each by BDAT over TLS, that the first connection made
# a full handshake and every later one resumed (ternd's tls= field, and
# Exim's own resumption mark), and the conn_use= numbers.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"
. "$here/../lib/foreign_mta.sh"

foreign_mta_need exim openssl
blast=${top_builddir:-$here/../..}/bench/smtp-blast
[ -x "$blast" ] || tap_skip_all "bench/smtp-blast not built"

n=300
top=$(tap_tmpdir)
pki_make "$top/pki" || tap_skip_all "cannot make the test PKI"
exim_port=$(free_port)
exim_smarthost "$top/exim" "$exim_port" "$top/pki" || { echo "Bail out! Exim did not start"; exit 1; }

TERND_PEERS=$(printf '%s\n' "[peer exim]" "host = [127.0.0.1]" "port = $exim_port" \
	"tls = verify" "tls_ca_file = $top/pki/ca.pem" "tls_servername = smarthost.test" \
	"max_connections = 1" "min_idle = 0" "max_messages_per_connection = 100" \
	"[routes]" "* = exim")
ternd_setup "$top/ternd" || exit 1

blast_each_once "$n" "$top/exim/spool/input" 50 ternd_drained -B -c 2
tap_is "Exim's queue holds exactly those" "$(exim_queued "$top/exim")" "$n"

# Exim's log: <= lines, each with X= (TLS) and, as 4.96 logs BDAT, K
mainlog=$top/exim/log/mainlog
tap_is "Exim received $n messages" "$(grep -c ' <= ' "$mainlog")" "$n"
tap_is "each over TLS 1.3" "$(grep ' <= ' "$mainlog" | grep -c ' X=TLS1\.3:')" "$n"
tap_is "each by CHUNKING (BDAT)" "$(grep ' <= ' "$mainlog" | grep -c ' K ')" "$n"
tap_is "Exim resumed the sessions of the later connections" \
	"$(grep ' <= ' "$mainlog" | grep -cE ' X=TLS1\.3:[^ ]*\*')" "$((n - 100))"

# ternd's log: one line per recipient
sent() {
	peer_lines "$exim_port" sent
}
tap_is "ternd logged $n deliveries" "$(sent | wc -l)" "$n"
tap_is "each with its own Exim id in the 250" \
	"$(sent | grep -oE ' OK id=[0-9A-Za-z-]+\), ' | sort -u | wc -l)" "$n"
tap_is "the first connection: full handshake" "$(sent | grep -c ', tls=full$')" 100
tap_is "the later ones: resumed" "$(sent | grep -c ', tls=resumed$')" "$((n - 100))"
tap_is "a connection's first transaction has no conn_use" "$(sent | grep -vc ', conn_use=')" "$((n / 100))"
tap_is "conn_use runs 2..100 on each connection" \
	"$(sent | sed -n 's/.*, conn_use=\([0-9]*\),.*/\1/p' | sort -n | uniq -c | awk '$1 != '$((n / 100))' || $2 < 2 || $2 > 100' | wc -l)" 0
tap_is "connections closed after 100 messages" "$(nlog "connection to .*:$exim_port closed: conn_use=100,")" "$((n / 100))"

ternd_stop_checked
tap_done
