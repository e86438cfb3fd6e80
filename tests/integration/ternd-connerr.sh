#!/bin/bash
# ternd-connerr.sh - a connection that fails names its cause, in Postfix's
# words, in the delivery log line and in the recipient's delay reason
# (ternq show): one peer per cause, chosen by recipient domain.
#
#   refused    nothing listens on the port      connect to H[A]:P: Connection refused
#   noroute    an unreachable route             connect to H[A]:P: No route to host
#   ctimeout   a full accept queue: SYNs are    connect to H[A]:P: Connection timed out
#              dropped
#   nxdomain   the name server says NXDOMAIN    Host or domain name not found. ...: Host not found
#   servfail   the name server says SERVFAIL    ...: Host not found, try again
#   greeting   accepts TCP, never greets        conversation timed out ... (not a connect timeout)
#   alert      TLS 1.2 server wants a client    TLS handshake with H[A]:P failed: alert received:
#              certificate                      handshake failure
#   verify     a certificate from a CA ternd    TLS certificate of H[A]:P does not verify for
#              does not know, tls = verify      smarthost.test: unable to get local issuer certificate
#
# The test runs in its own network and mount namespaces (unshare -n -m):
# loopback, an unreachable route to 192.0.2.0/24, and an /etc/resolv.conf that points at a
# small name server on 127.0.0.1 (NXDOMAIN for nosuch.invalid, SERVFAIL
# for the rest). Nothing of it reaches the host.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${_TERN_CONNERR_NS:-}" ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
	_TERN_CONNERR_NS=1 exec unshare -n -m --propagation private "$BASH" "$0" "$@"
fi
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/pki.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges, network namespace)"
[ -n "${_TERN_CONNERR_NS:-}" ] || tap_skip_all "unshare not installed"
for cmd in openssl python3 ip; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
ip link set lo up || tap_skip_all "cannot bring up lo in a network namespace"
ip route add unreachable 192.0.2.0/24 || tap_skip_all "cannot add an unreachable route"

top=$(tap_tmpdir)
pki_make "$top/pki" || tap_skip_all "cannot make the test PKI"

# the name server: NXDOMAIN for nosuch.invalid, SERVFAIL for anything else
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$top/resolv.conf"
chmod 0644 "$top/resolv.conf"
mount --bind "$top/resolv.conf" /etc/resolv.conf || tap_skip_all "cannot bind-mount /etc/resolv.conf"
python3 - "$top/dns.ready" >"$top/dns.log" 2>&1 <<-'EOF' &
	import socket, sys
	s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	s.bind(("127.0.0.1", 53))
	open(sys.argv[1], "w").close()
	while True:
	    q, peer = s.recvfrom(512)
	    end = 12
	    while q[end] != 0:
	        end += q[end] + 1
	    name = q[12:end + 1]
	    rcode = 3 if name == b"\x06nosuch\x07invalid\x00" else 2
	    # the header: the id, QR, RD and RA, the rcode; the question echoed
	    s.sendto(q[:2] + bytes([0x81, 0x80 | rcode]) + b"\x00\x01\x00\x00\x00\x00\x00\x00" + q[12:end + 5], peer)
EOF
tap_bg_register $!
wait_for_file "$top/dns.ready" || tap_fail "the name server is up"

refused_port=$(free_port)	# nothing listens there
greeting_port=$(free_port)
ctimeout_port=$(free_port)
alert_port=$(free_port)
verify_port=$(free_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); time.sleep(3600)' "$greeting_port" &
tap_bg_register $!
# a backlog of 0 holds one connection, its own: the kernel drops later SYNs
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(0)
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
open(sys.argv[2], "w").close(); time.sleep(3600)' "$ctimeout_port" "$top/ctimeout.ready" &
tap_bg_register $!
wait_for_file "$top/ctimeout.ready" || tap_fail "the full listener is up"
openssl s_server -quiet -tls1_2 -Verify 1 -CAfile "$top/pki/ca.pem" -cert "$top/pki/server.pem" \
	-key "$top/pki/server.key" -accept "127.0.0.1:$alert_port" >"$top/alert.log" 2>&1 </dev/null &
tap_bg_register $!
openssl s_server -quiet -cert "$top/pki/server.pem" -key "$top/pki/server.key" \
	-accept "127.0.0.1:$verify_port" >"$top/verify.log" 2>&1 </dev/null &
tap_bg_register $!
for p in "$greeting_port" "$alert_port" "$verify_port"; do
	wait_for_port "$p" || tap_fail "a test peer listens on $p"
done

# peer NAME HOST PORT [SETTING...] - a [peer] section, timeouts 2 s, no breaker
peer() {
	printf '%s\n' "[peer $1]" "host = $2" "port = $3" "min_idle = 0" "max_connections = 1" \
		"breaker_failures = 1000" "connect_timeout = 2s" "command_timeout = 2s" "${@:4}"
}
names=(refused noroute ctimeout nxdomain servfail greeting alert verify)
peers=$(
	peer refused "[127.0.0.1]" "$refused_port" "tls = none"
	peer noroute "[192.0.2.1]" 25 "tls = none"
	peer ctimeout "[127.0.0.1]" "$ctimeout_port" "tls = none"
	peer nxdomain nosuch.invalid 25 "tls = none"
	peer servfail nxtry.invalid 25 "tls = none"
	peer greeting "[127.0.0.1]" "$greeting_port" "tls = none"
	peer alert "[127.0.0.1]" "$alert_port" "tls = encrypt" "tls_wrapper = yes"
	peer verify "[127.0.0.1]" "$verify_port" "tls = verify" "tls_wrapper = yes" \
		"tls_servername = smarthost.test"
	echo "[routes]"
	for n in "${names[@]}"; do
		echo "$n.test = $n"
	done
)
export TERND_PEERS=$peers
ternd_setup "$top/t" "min_backoff = 30s" "max_backoff = 60s" || exit 1
unset TERND_PEERS

declare -A qid
while read -r d id; do
	qid[${d%.test}]=$id
done < <(python3 - "$TERND_PORT" "${names[@]/%/.test}" <<-'EOF'
	import smtplib, sys
	s = smtplib.SMTP("127.0.0.1", int(sys.argv[1]), "client.test", timeout=60)
	s.ehlo()
	for d in sys.argv[2:]:
	    s.mail("a@client.test")
	    s.rcpt("u@" + d)
	    code, resp = s.data(("From: <a@client.test>\r\nTo: <u@%s>\r\n\r\nconnerr\r\n" % d).encode())
	    print(d, resp.decode().split()[-1] if code == 250 else "refused %d" % code)
	s.quit()
EOF
)
n=0
for name in "${names[@]}"; do
	[[ ${qid[$name]:-} =~ ^[0-9A-Z]{13}$ ]] && n=$((n + 1))
done
tap_is "ternd queues one message for each of the ${#names[@]} peers" "$n" "${#names[@]}"

# deferred NAME - ternd's first deferral line for the message to NAME.test,
# from "relay=" on, without the delays
deferred() {
	grep -E ": ${qid[$1]}: to=<u@$1\\.test>, .*status=deferred " "$TERND_LOG" | head -1 |
		sed -E 's/^.*: [0-9A-Z]{13}: to=<[^>]*>, //; s/delay=[^,]*, delays=[^,]*, //'
}
_deferred() {
	[ -n "$(deferred "$1")" ]
}
# reason NAME - the recipient's state and delay reason, as ternq show --json has them
reason() {
	ternq_ show "${qid[$1]}" --json 2>/dev/null |
		python3 -c 'import json,sys; r = json.load(sys.stdin)["recipients"][0]; print(r["state"] + ": " + r["delay_reason"])'
}

lo="127.0.0.1[127.0.0.1]"
declare -A want=(
	[refused]="4.4.1 connect to $lo:$refused_port: Connection refused"
	[noroute]="4.4.1 connect to 192.0.2.1[192.0.2.1]:25: No route to host"
	[ctimeout]="4.4.1 connect to $lo:$ctimeout_port: Connection timed out"
	[nxdomain]="4.4.4 Host or domain name not found. Name service error for name=nosuch.invalid type=A: Host not found"
	[servfail]="4.4.3 Host or domain name not found. Name service error for name=nxtry.invalid type=A: Host not found, try again"
	[greeting]="4.4.1 conversation timed out with $lo while receiving the reply"
	[alert]="4.4.1 TLS handshake with $lo:$alert_port failed: alert received: handshake failure"
	[verify]="4.4.1 TLS certificate of $lo:$verify_port does not verify for smarthost.test: unable to get local issuer certificate"
)
for name in "${names[@]}"; do
	wait_until 30 _deferred "$name"
	read -r dsn why <<<"${want[$name]}"
	tap_is "$name: the log line names the cause" "$(deferred "$name")" \
		"relay=none, dsn=$dsn, status=deferred ($why), tls=none"
	tap_is "$name: ternq show: deferred, the same reason" "$(reason "$name")" "deferred: $why"
done

ternd_stop_checked
tap_done
