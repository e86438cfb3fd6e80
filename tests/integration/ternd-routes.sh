#!/bin/bash
# ternd-routes.sh - a configuration mistake defers mail, it never bounces
# it: a domain with no route gets 451 4.4.4 at RCPT (warned about once a
# minute, counted in tern_unroutable_total), and is delivered once a
# reload adds the route; a route to a peer without a host accepts and
# queues, as does a route to a peer whose TLS context a reload could not
# build; a non-delivery notification with no route waits in the queue
# until a reload brings one; ternd -n and the start-up log name the
# unroutable domains.
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
sink a "$(free_port)" "$top/a"
sink hard "$(free_port)" "$top/hard" -f rcpt	# refuses every RCPT: 5xx, a bounce

# peers [ROUTE...] - a.example goes to sink a, hard.example to the sink that
# refuses, p.example to "park" (no host); the ROUTEs are added
peers() {
	printf '%s\n' "[peer pa]" "host = [127.0.0.1]" "port = ${sink_port[a]}" "tls = none" \
		"min_idle = 0" "[peer hard]" "host = [127.0.0.1]" "port = ${sink_port[hard]}" \
		"tls = none" "min_idle = 0" "[peer park]" "[routes]" "a.example = pa" \
		"hard.example = hard" "p.example = park" "$@"
}

# metric REASON - the value of tern_unroutable_total{reason="REASON"}
metric() {
	curl -sS --fail --noproxy '*' --max-time 10 "http://127.0.0.1:$mport/metrics" |
		sed -n "s/^tern_unroutable_total{reason=\"$1\"} //p"
}

# notices - how many messages in the queue have the null sender (notifications)
notices() {
	ternq_ list --json | grep -c '"sender": *""'
}

# _metric_is REASON N
_metric_is() {
	[ "$(metric "$1")" = "$2" ]
}

mport=$(free_port)
TERND_PEERS=$(peers)
ternd_setup "$top/t" "min_backoff = 1s" "max_backoff = 1s" "metrics_listen = 127.0.0.1:$mport" ||
	exit 1
unset TERND_PEERS

# --- ternd -n and the start-up log ---------------------------------------------------
rc=0
"$_ternd_bin" -n -c "$TERND_CONF" >"$top/n.out" 2>"$top/n.err" || rc=$?
tap_is "ternd -n: exit 0" "$rc" 0
tap_is "ternd -n: the unroutable domains on stderr" "$(cat "$top/n.err")" \
"warning: no default route (*): recipients in other domains are deferred with 451 4.4.4
warning: route p.example: peer park has no host: its mail is accepted and stays queued"
tap_check "ternd -n: the settings on stdout" grep -qx 'p.example = park' "$top/n.out"
tap_is "start-up: no default route, in the log" \
	"$(nlog 'warning: no default route \(\*\): recipients in other domains are deferred with 451 4\.4\.4$')" 1
tap_is "start-up: the peer without a host, in the log" \
	"$(nlog 'warning: route p\.example: peer park has no host: its mail is accepted and stays queued$')" 1
tap_is "no recipient counted yet" "$(metric no_route) $(metric no_host) $(metric tls_context)" "0 0 0"

# --- no route: 451 4.4.4, one warning, counted ---------------------------------------
for i in 1 2 3 4 5; do
	send "b$i" s@example.org "u$i@b.example" >/dev/null
done
tap_is "no route: RCPT gets 451 4.4.4" "$(grep '^<\*\* ' "$top/b1.swaks")" \
	'<** 451 4.4.4 <u1@b.example>: Recipient address rejected: no [routes] entry matches this domain'
n=0
for i in 1 2 3 4 5; do
	grep -q '^<\*\* 451 4\.4\.4 <u'"$i"'@b\.example>: ' "$top/b$i.swaks" && n=$((n + 1))
done
tap_is "no route: every one of the 5 is deferred" "$n" 5
tap_is "no route: nothing is queued" "$(ternq_ list --json | wc -l)" 0
tap_is "no route: one warning for the 5 within the minute" \
	"$(nlog 'warning: no \[routes\] entry matches domain b\.example: its recipients are deferred with 451 4\.4\.4')" 1
tap_check "no route: counted 5 times" wait_until 10 _metric_is no_route 5

# --- a peer without a host: accepted, queued, warned about ---------------------------
qp=$(send p1 s@example.org u@p.example)
tap_like "no host: accepted" "$qp" '^[0-9A-Z]{13}$'
tap_check "no host: warned about, with the recipients waiting" \
	wait_until 10 _atleast 1 'warning: peer park has no host: 1 recipient wait in the queue$'
tap_is "no host: counted" "$(metric no_host)" 1
tap_is "no host: still queued, not bounced" "$(rcpt_json "$qp" state)" queued

# --- a bounce to a sender with no route: the notification waits ---------------------
qh=$(send h1 alice@nodsn.example bob@hard.example)
tap_check "bounce: the message bounces" \
	wait_until 20 _atleast 1 ": $qh: to=<bob@hard\\.example>, .*status=bounced "
tap_check "bounce: its notification has no route and waits" wait_until 10 _atleast 1 \
	"warning: $qh: no route for the notification to <alice@nodsn\\.example>: it is queued and waits for a route$"
# The warning is logged before the notification's commit: wait for the queue.
tap_wait_is "bounce: the notification is in the queue" 1 notices

# --- the routes added: the client's retry is delivered, the notification too -------
n=$(nlog ': configuration reloaded from ')
sed -i '/^\[peer /,$d' "$TERND_CONF"
{
	peers "b.example = pa" "nodsn.example = pa" "t.example = badtls"
	# a new peer whose TLS context cannot be built (its CA file is missing)
	printf '%s\n' "[peer badtls]" "host = [127.0.0.1]" "port = ${sink_port[a]}" "tls = verify" \
		"tls_ca_file = $top/no-such-ca.pem" "min_idle = 0"
} >>"$TERND_CONF"
kill -HUP "$TERND_PID"
wait_until 10 _atleast $((n + 1)) ': configuration reloaded from '
tap_check "reload: the new peer without a TLS context is not added" \
	wait_until 5 _atleast 1 'peer badtls: not added: \[peer badtls\] tls_ca_file .*: cannot open: '
qb=$(send b6 s@example.org u1@b.example)
tap_like "route added: the retry is accepted" "$qb" '^[0-9A-Z]{13}$'
tap_check "route added: and delivered" \
	wait_until 20 _atleast 1 ": $qb: to=<u1@b\\.example>, .*status=sent "
tap_check "route added: the notification is routed again and delivered" \
	wait_until 20 _atleast 1 ": to=<alice@nodsn\\.example>, .*status=sent "
tap_is "route added: sink a has both" "$(files "$top/a")" 2
tap_is "still one no-route warning at RCPT" \
	"$(nlog 'warning: no \[routes\] entry matches domain ')" 1

# --- a peer whose TLS context the reload could not build: accepted, it waits ---------
qt=$(send t1 s@example.org u@t.example)
tap_like "no TLS context: accepted" "$qt" '^[0-9A-Z]{13}$'
tap_check "no TLS context: warned about, with the recipients waiting" wait_until 10 _atleast 1 \
	'warning: peer badtls has no TLS context \(see the reload that added it\): 1 recipient wait in the queue$'
tap_is "no TLS context: counted" "$(metric tls_context)" 1
tap_is "no TLS context: still queued, not bounced" "$(rcpt_json "$qt" state)" queued
tap_is "only the two waiting messages are left" "$(ternq_ list --json | wc -l)" 2
ternd_stop_checked
tap_done
