#!/bin/bash
# demo.sh - the README's first quick-start command, contrib/demo.sh, on
# the build under test: the whole pipeline comes up, a burst goes through
# all four stages, and "stop" stops everything it started.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (postfix, ternd)"
: "${top_builddir:?top_builddir must be set (run through make check)}"
for port in 2525 2526 8891 9465 9466; do
	listening "$port" && tap_skip_all "port $port is in use"
done
demo=$here/../../contrib/demo.sh
export DEMO_DIR=$(tap_tmpdir)/demo DEMO_BUILDDIR=$top_builddir BURST=50
tap_on_exit "$demo stop >/dev/null 2>&1"

out=$("$demo" 2>&1)
rc=$?
tap_is "contrib/demo.sh start succeeds" "$rc" 0
tap_like "the burst reaches the smarthost" "$out" \
	'50 messages: front Postfix -> tern-milter -> ternd -> smarthost in'
tap_like "the configuration is shown" "$out" $'\n    \\[peer smarthost\\]\n'
trace=$(sed -n '/^==> ternq trace/,/^$/p' <<<"$out")
tap_like "ternq trace: the milter's verdict with Postfix's queue id" "$trace" \
	' milter +[0-9A-F]{10,}: verdict=accept, '
tap_like "ternq trace: ternd's acceptance" "$trace" ' accepted +[0-9A-Z]{13}: from=<demo@example\.org>'
tap_like "ternq trace: the attempt over TLS with the smarthost's queue id" "$trace" \
	' attempt +[0-9A-Z]{13}: to=<user@example\.com>, peer=smarthost, .*tls=(full|resumed).*status=sent .*queued_as=[0-9A-F]+'
tap_like "ternq trace: the final state" "$trace" ' final +[0-9A-Z]{13}: to=<user@example\.com>, status=sent'
tap_like "tern-report: the burst in the grand totals" "$out" $'\n +50 +sent\n'
tap_like "tern-report: the peer's row" "$out" $'\nsmarthost +50 +0 +0 '
tap_like "pflogsumm on the front's maillog: 50 delivered into ternd" "$out" $'\nPostfix into ternd: 50 +delivered\n'
tap_like "pflogsumm --syslog-name=tern on the demo's log_file: 50 delivered to the smarthost" "$out" \
	$'\nternd to the smarthost: 50 +delivered\n'
tap_like "metrics: 50 deliveries sent" "$out" 'tern_deliveries_total\{peer="smarthost",status="sent"\} 50'
"$demo" stop >/dev/null 2>&1
tap_is "demo.sh stop stops every listener" \
	"$(for p in 2525 2526 8891 9465 9466; do listening "$p" && echo "$p"; done)" ""
tap_done
