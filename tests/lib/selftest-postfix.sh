#!/bin/bash
# tests/lib/selftest-postfix.sh - self-test for tests/lib/{tap,postfix}.sh.
#
# Creates an isolated Postfix instance that relays everything to an
# smtp-sink, submits one message over SMTP (swaks) and one with the
# instance's sendmail, and checks that both arrive in the sink's dump
# files.  Safe to run several copies in parallel.  KEEP_TMP=1 keeps files.

set -u
libdir=$(cd "$(dirname "$0")" && pwd)
. "$libdir/tap.sh"
. "$libdir/postfix.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (postfix start)"
for cmd in postfix smtp-sink swaks; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done

top=$(tap_tmpdir)
pf=$top/pf
sink=$top/sink
smtp_port=$(free_port)
sink_port=$(free_port)
tag=$$-$RANDOM

tap_check "pf_create" pf_create "$pf" "$smtp_port"
pf_relay_to "$pf" 127.0.0.1 "$sink_port"
tap_like "relayhost set" "$(postconf -c "$pf/conf" -h relayhost)" \
	"^\[127\.0\.0\.1\]:$sink_port\$"

# smtp-sink must drop root privileges (-u); its dump dir must be writable.
mkdir "$sink" && chown nobody "$sink"
smtp-sink -u nobody -d "$sink/%M." "127.0.0.1:$sink_port" 100 \
	>"$top/sink.log" 2>&1 &
tap_bg_register $!
tap_check "smtp-sink listens on $sink_port" wait_for_port "$sink_port"

tap_check "pf_start" pf_start "$pf"

tap_check "swaks to smtpd on $smtp_port" \
	swaks --server 127.0.0.1 --port "$smtp_port" \
	--from sender@example.org --to rcpt@example.com \
	--header "Subject: selftest swaks $tag" --body "via smtpd"

tap_check "pf_sendmail" pf_sendmail "$pf" -f sender@example.org \
	rcpt@example.com <<-EOF
	From: sender@example.org
	To: rcpt@example.com
	Subject: selftest sendmail $tag

	via sendmail
	EOF

tap_check "queue drains" pf_wait_empty "$pf" 30

# sink_has - true if a dump file has exactly the line SUBJECT (CR ignored)
sink_has() {
	cat "$sink"/* 2>/dev/null | tr -d '\r' | grep -qxF "$1"
}
for via in swaks sendmail; do
	if wait_until 5 sink_has "Subject: selftest $via $tag"; then
		tap_ok "sink got the $via message"
	else
		tap_fail "sink got the $via message" "sink files:" \
			"$(ls -l "$sink")" "--- maillog:" "$(pf_log "$pf")"
	fi
done
tap_is "two deliveries logged" \
	"$(grep -c 'relay=127\.0\.0\.1.*status=sent' "$pf/maillog")" 2

master=$(awk '{ print $1; exit }' "$pf/queue/pid/master.pid")
pf_stop "$pf"
if kill -0 "$master" 2>/dev/null; then
	tap_fail "pf_stop stops master $master" "$(ps -fp "$master")"
else
	tap_ok "pf_stop stops master $master"
fi

tap_done
