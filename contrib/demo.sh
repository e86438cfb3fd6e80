#!/bin/bash
# demo.sh - the whole tern pipeline on loopback, in a scratch directory.
#
#     contrib/demo.sh [start]     (as root) install, build, bring it all up, send mail
#     contrib/demo.sh stop        (as root) stop everything the demo started
#
# "start" installs the Debian packages, builds tern in build/, and starts,
# below DEMO_DIR (default /var/tmp/tern-demo):
#
#     client --SMTP--> Postfix "front" (127.0.0.1:2525)
#                        | smtpd_milters: tern-milter (127.0.0.1:8891)
#                        | default_transport: LMTP to ternd (DEMO_DIR/run/lmtp.sock)
#                        v
#                      ternd --STARTTLS, verified--> Postfix "smarthost"
#                                                    (127.0.0.1:2526, discards)
#
# then sends BURST (default 1000) messages through it and shows what an
# admin looks at: the configuration, ternq stats, ternq trace of one
# message, the delivery report and the metrics. Running it again stops
# the previous demo and starts afresh; "stop" leaves DEMO_DIR for a look.
# Nothing outside DEMO_DIR and build/ is touched, except that the tern user
# is created. Postfix reaches ternd's LMTP socket through its group
# (lmtp_socket_group = postfix) and nothing else of tern's. The system
# Postfix instance must not listen on the demo's ports.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
D=${DEMO_DIR:-/var/tmp/tern-demo}
BURST=${BURST:-1000}
build=${DEMO_BUILDDIR:-$top/build}
FRONT_PORT=2525 SMARTHOST_PORT=2526 MILTER_PORT=8891
METRICS_TERND=9465 METRICS_MILTER=9466

. "$top/tests/lib/util.sh"
. "$top/tests/lib/postfix.sh"

# say - a progress line
say() {
	printf '\n==> %s\n' "$*"
}

# die - an error, then exit 1 (what runs stays running; "stop" stops it)
die() {
	printf 'demo: %s\n' "$@" >&2
	exit 1
}

# demo_stop - stop whatever a previous demo left running
demo_stop() {
	local pid
	for pf in "$D/front" "$D/smarthost"; do
		[ -f "$pf/conf/main.cf" ] && pf_stop "$pf" 2>/dev/null
	done
	for f in "$D"/*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		kill -TERM "$pid" 2>/dev/null && wait_until 15 sh -c "! kill -0 $pid 2>/dev/null"
		rm -f "$f"
	done
	return 0
}

# start_daemon NAME COMMAND... - start a tern daemon in the foreground mode,
# logging to $D/NAME.log, its pid in $D/NAME.pid
start_daemon() {
	local name=$1
	shift
	setsid "$@" >>"$D/$name.log" 2>&1 </dev/null &
	echo $! >"$D/$name.pid"
}

[ "$(id -u)" -eq 0 ] || die "run as root (or with sudo): $0 ${1:-start}"
case ${1:-start} in
stop)
	demo_stop
	echo "demo stopped; its files stay in $D"
	exit 0
	;;
start) ;;
*)
	echo "usage: $0 [start|stop]" >&2
	exit 2
	;;
esac
[[ $BURST =~ ^[1-9][0-9]*$ ]] || die "BURST must be a positive number"

say "stopping a previous demo, if any"
demo_stop
rm -rf "$D"
mkdir -p "$D" && chmod 0755 "$D"

if [ -z "${DEMO_BUILDDIR:-}" ]; then
	say "installing packages and building (contrib/build.sh $build)"
	"$top/contrib/build.sh" "$build" >"$D/build.log" 2>&1 || {
		tail -30 "$D/build.log"
		die "the build failed; see $D/build.log"
	}
fi
ternd=$build/src/ternd/ternd milter=$build/src/milter/tern-milter ternq=$build/src/ternq/ternq
report=$build/src/report/tern-report

for port in $FRONT_PORT $SMARTHOST_PORT $MILTER_PORT $METRICS_TERND $METRICS_MILTER; do
	listening "$port" && die "127.0.0.1:$port is in use (the system Postfix?); stop it first"
done
ensure_tern_user || die "cannot create the tern user"

say "a self-signed certificate for the smarthost (ECDSA P-256)"
mkdir -p "$D/pki"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
	-keyout "$D/pki/smarthost.key" -out "$D/pki/smarthost.pem" -subj "/CN=smarthost.demo" \
	-addext "subjectAltName=DNS:smarthost.demo" >"$D/pki/openssl.log" 2>&1 ||
	die "openssl failed: $(cat "$D/pki/openssl.log")"
chmod 0644 "$D/pki/smarthost.pem" "$D/pki/smarthost.key"

say "the smarthost: Postfix on 127.0.0.1:$SMARTHOST_PORT with STARTTLS, discarding what it accepts"
pf_create "$D/smarthost" "$SMARTHOST_PORT" || die "cannot create the smarthost instance"
pf_conf "$D/smarthost" "smtpd_tls_cert_file = $D/pki/smarthost.pem" \
	"smtpd_tls_key_file = $D/pki/smarthost.key" "smtpd_tls_security_level = may" \
	"smtpd_tls_loglevel = 1" "default_transport = discard" "relay_transport = discard"
pf_start "$D/smarthost" || die "the smarthost did not start; see $D/smarthost/maillog"

say "tern.conf for tern-milter and ternd"
"$milter" -K "$D/trace.key" >/dev/null 2>&1 || die "cannot create the trace key"
chown tern "$D/trace.key"
cat >"$D/tern.conf" <<EOF
# tern.conf written by contrib/demo.sh: a worked example (see tern.conf(5)).
[global]
hostname = ternd.demo
trace_key_file = $D/trace.key
state_dir = $D/state
spool_dir = $D/spool
run_dir = $D/run
# Both daemons also write their log lines here, as syslog would: pflogsumm
# reads it (no syslog daemon needed).
log_file = $D/tern.log

[milter]
listen = inet:$MILTER_PORT@127.0.0.1
metrics_listen = 127.0.0.1:$METRICS_MILTER

[ternd]
# Postfix submits through this socket (tern:postfix, 0660) and can do
# nothing else: the queue and the control socket are tern's alone.
lmtp_listen = unix:$D/run/lmtp.sock
lmtp_socket_group = postfix
smtp_listen =
metrics_listen = 127.0.0.1:$METRICS_TERND

# The smarthost, over STARTTLS, its certificate verified against the
# self-signed one made above, two connections kept warm.
[peer smarthost]
host = [127.0.0.1]
port = $SMARTHOST_PORT
tls = verify
tls_ca_file = $D/pki/smarthost.pem
tls_servername = smarthost.demo
min_idle = 2
max_connections = 4

[routes]
* = smarthost
EOF
sed 's/^/    /' "$D/tern.conf"

say "starting tern-milter and ternd"
start_daemon tern-milter "$milter" -f -c "$D/tern.conf"
start_daemon ternd "$ternd" -f -c "$D/tern.conf"
wait_for_port "$MILTER_PORT" 15 ||
	die "tern-milter did not start; $D/tern-milter.log says:" "$(tail -n 5 "$D/tern-milter.log")"
wait_for_file "$D/run/lmtp.sock" 15 ||
	die "ternd did not start; $D/ternd.log says:" "$(tail -n 5 "$D/ternd.log")"

say "the front Postfix on 127.0.0.1:$FRONT_PORT: tern-milter, then LMTP to ternd"
pf_create "$D/front" "$FRONT_PORT" || die "cannot create the front instance"
pf_conf "$D/front" "smtpd_milters = inet:127.0.0.1:$MILTER_PORT" "milter_default_action = tempfail" \
	"default_transport = lmtp:unix:$D/run/lmtp.sock" "relay_transport = lmtp:unix:$D/run/lmtp.sock"
pf_start "$D/front" || die "the front Postfix did not start; see $D/front/maillog"

say "sending $BURST messages to the front Postfix (smtp-source, 10 sessions)"
start=$EPOCHREALTIME
smtp-source -s 10 -m "$BURST" -l 4096 -f demo@example.org -t user@example.com \
	-M demo.test "127.0.0.1:$FRONT_PORT" || die "smtp-source failed"
# _arrived - the smarthost has discarded every message, and ternd has
# recorded each delivery (the smarthost may log one before ternd has read
# its reply)
_arrived() {
	[ "$(grep -c 'postfix/discard\[.* status=sent ' "$D/smarthost/maillog")" -ge "$BURST" ] &&
		[ "$(grep -c ': to=<user@example\.com>, relay=.* status=sent ' "$D/ternd.log")" -ge "$BURST" ]
}
wait_until 300 _arrived || die "not every message reached the smarthost; see $D/*.log and */maillog"
printf '%d messages: front Postfix -> tern-milter -> ternd -> smarthost in %.1f s\n' \
	"$BURST" "$(awk -v a="$start" -v b="$EPOCHREALTIME" "BEGIN { print b - a }")"

say "ternq stats: the queue (empty: everything was delivered)"
"$ternq" -c "$D/tern.conf" stats
qid=$(grep -o 'status=sent (250 2.0.0 <[^>]*> Ok: queued as [0-9A-Z]*)' "$D/front/maillog" |
	head -1 | sed 's/.* //; s/)$//')
say "ternq trace $qid: one message, end to end"
"$ternq" -c "$D/tern.conf" trace "$qid"
if [ -x "$report" ]; then
	say "tern-report: what happened"
	"$report" -c "$D/tern.conf"
fi
say "pflogsumm: each hop's deliveries (README, Logs)"
pflogsumm "$D/front/maillog" 2>/dev/null | grep -m1 ' delivered$' | sed 's/^ */Postfix into ternd: /'
pflogsumm --syslog-name=tern "$D/tern.log" 2>/dev/null | grep -m1 ' delivered$' |
	sed 's/^ */ternd to the smarthost: /'
say "metrics"
echo "ternd:       http://127.0.0.1:$METRICS_TERND/metrics"
echo "tern-milter: http://127.0.0.1:$METRICS_MILTER/metrics"
curl -s "http://127.0.0.1:$METRICS_TERND/metrics" | grep -E '^tern_(deliveries_total|tls_handshakes_total)' || true

say "the demo runs on; its files, logs and maillogs are in $D"
echo "stop it with: $0 stop"
