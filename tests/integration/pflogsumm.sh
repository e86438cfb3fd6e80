#!/bin/bash
# pflogsumm.sh - each hop's numbers from a log that Postfix and ternd
# share, counted as README and ternd(8) LOGGING say:
#     pflogsumm LOG                                     Postfix's hop
#     grep ' tern/' LOG | pflogsumm --syslog-name=tern  ternd's hop
# N messages through Postfix (LMTP) -> ternd -> smtp-sink: one delivery
# per message per hop.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/postfix.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (Postfix, ternd)"
for c in pflogsumm smtp-sink smtp-source postfix; do
	command -v $c >/dev/null || tap_skip_all "$c not installed"
done

N=20
top=$(tap_tmpdir)
peer=$(free_port)
sink peer "$peer" "$top/dump"
TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $peer" "tls = none" \
	"min_idle = 0" "[routes]" "* = sink")
ternd_setup "$top/t" "lmtp_socket_group = postfix" "[global]" "log_file = $top/ternd.log" || exit 1

pf=$top/pf
pf_port=$(free_port)
pf_create "$pf" "$pf_port"
pf_conf "$pf" "default_transport = lmtp:unix:$TERND_LMTP" "relay_transport = lmtp:unix:$TERND_LMTP" \
	"relayhost ="
tap_check "postfix starts" pf_start "$pf"
smtp-source -s 4 -m "$N" -l 2048 -f app@example.org -t user@example.com "127.0.0.1:$pf_port"
tap_check "Postfix hands every message to ternd" pf_wait_empty "$pf" 60
_relayed() { [ "$(grep -c ': to=<user@example\.com>, relay=.* status=sent ' "$top/ternd.log")" -ge "$N" ]; }
tap_check "ternd relays every message to the peer" wait_until 60 _relayed
# postlogd writes the maillog asynchronously
_pf_logged() { [ "$(grep -c 'postfix/lmtp\[.* status=sent ' "$pf/maillog")" -ge "$N" ]; }
wait_until 10 _pf_logged

# the combined log, as syslog would write it: both, in time order
sort -s -k1,3 "$pf/maillog" "$top/ternd.log" >"$top/mail.log"
# delivered OUTPUT - pflogsumm's "delivered" count
delivered() { sed -n 's/^ *\([0-9][0-9]*\) *delivered$/\1/p' "$1" | head -1; }

pflogsumm "$top/mail.log" >"$top/postfix-hop.txt" 2>&1
tap_is "pflogsumm LOG: Postfix's hop, one delivery per message" "$(delivered "$top/postfix-hop.txt")" "$N"
grep ' tern/' "$top/mail.log" | pflogsumm --syslog-name=tern >"$top/ternd-hop.txt" 2>&1
tap_is "grep ' tern/' LOG | pflogsumm --syslog-name=tern: ternd's hop, one per message" \
	"$(delivered "$top/ternd-hop.txt")" "$N"
pflogsumm --syslog-name=tern "$top/mail.log" >"$top/both.txt" 2>&1
tap_is "(without the grep, pflogsumm counts both hops: why README says grep)" \
	"$(delivered "$top/both.txt")" "$((2 * N))"
tap_done
