#!/bin/bash
# metrics.sh - the Prometheus endpoints of ternd and tern-milter
# (metrics_listen), scraped with curl and checked with promtool after
# known traffic:
#
#   ternd: 5 SMTP + 1 LMTP messages relayed to an smtp-sink peer over one
#   connection (max_connections = 1), 1 from <> refused with 5xx by a
#   second sink, 1 parked for a peer without host, then held with ternq;
#   exact counters, histogram counts, queue gauges (also after a restart,
#   which counts the queue anew), 404 and 405; build info, process
#   metrics, the queue database's map, recipients per peer (also after
#   the restart); then (restarted) a peer answering 550 5.1.1, 550 5.9.9,
#   550 without a code and 451 4.7.0: tern_delivery_codes_total by code
#   (5.9.9 is "other"), tern_queue_recipients 1 for the deferred one, 0
#   once ternq expires it, and 0 for the parked peer once ternq deletes
#   its held message; and a reload of a broken file, then a good one:
#   tern_config_last_reload_successful 0, then 1.
#
#   tern-milter in an isolated Postfix: 2 plain messages, 1 with a forged
#   trace, 1 without Date: (tagged), 1 mail loop (rejected); exact
#   verdict, check and trace counters; build info, process metrics,
#   journal drops; SIGUSR1 with a broken file, then a good one.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/postfix.sh"
. "$here/../lib/ternd.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "${top_builddir:-$here/../..}/config.h")
started=$(date +%s)

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges, postfix start)"
for cmd in curl promtool swaks smtp-sink postfix python3 ss; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done

top=$(tap_tmpdir)

# scrape PORT FILE - GET /metrics into FILE; prints the HTTP status
scrape() {
	curl -s -o "$2" -w '%{http_code}' --max-time 30 "http://127.0.0.1:$1/metrics"
}

# value FILE SERIES - the sample value of SERIES (name{labels}) in FILE
value() {
	awk -v s="$2" '$1 == s { print $2 }' "$1"
}

# metric_is PORT SERIES WANT [SERIES WANT...] - scrape, and is each SERIES WANT?
metric_is() {
	local port=$1
	shift
	scrape "$port" "$top/poll.prom" >/dev/null || return 1
	while [ $# -ge 2 ]; do
		[ "$(value "$top/poll.prom" "$1")" = "$2" ] || return 1
		shift 2
	done
}

# --- ternd ----------------------------------------------------------------------

sink_port=$(free_port)
hard_port=$(free_port)
tm_port=$(free_port)
smtp-sink -u nobody "127.0.0.1:$sink_port" 64 >"$top/sink.out" 2>&1 &
tap_bg_register $!
smtp-sink -u nobody -f rcpt "127.0.0.1:$hard_port" 64 >"$top/hard.out" 2>&1 &
tap_bg_register $!
codes_port=$(free_port)
python3 "$here/../lib/reply_peer.py" "$codes_port" >"$top/codes.out" 2>&1 &
tap_bg_register $!
tap_check "smtp-sinks listen" wait_for_port "$sink_port"
wait_for_port "$hard_port"
wait_for_port "$codes_port"

TERND_PEERS=$(printf '%s\n' \
	"[peer plain]" "host = [127.0.0.1]" "port = $sink_port" "tls = none" "min_idle = 0" \
	"max_connections = 1" "idle_timeout = 1h" \
	"[peer hard]" "host = [127.0.0.1]" "port = $hard_port" "tls = none" "min_idle = 0" \
	"max_connections = 1" \
	"[peer parked]" \
	"[peer codes]" "host = [127.0.0.1]" "port = $codes_port" "tls = none" "min_idle = 0" \
	"[routes]" "example.com = plain" "hard.test = hard" "parked.test = parked" \
	"codes.test = codes")
export TERND_PEERS
ternd_setup "$top/t" "metrics_listen = 127.0.0.1:$tm_port" || exit 1
unset TERND_PEERS
tap_check "ternd serves metrics on metrics_listen" grep -q ": metrics on http://127.0.0.1:$tm_port/metrics$" "$TERND_LOG"

python3 - "$TERND_PORT" "$TERND_LMTP" >"$top/send.out" 2>&1 <<-'EOF'
	import smtplib, sys
	port, lmtp = sys.argv[1:3]
	def msg(i):
	    return ("From: <app@example.org>\r\nTo: <r%d@example.com>\r\nSubject: m%d\r\n\r\nbody %d\r\n"
	            % (i, i, i)).encode()
	s = smtplib.SMTP("127.0.0.1", int(port), "client.test", timeout=60)
	for i in range(5):
	    s.sendmail("app@example.org", ["r%d@example.com" % i], msg(i))
	s.sendmail("", ["nouser@hard.test"], msg(5))
	s.sendmail("app@example.org", ["r7@parked.test"], msg(7))
	s.quit()
	l = smtplib.LMTP(lmtp, timeout=60)
	l.sendmail("app@example.org", ["r6@example.com"], msg(6))
	l.quit()
EOF
tap_is "8 messages accepted (SMTP and LMTP)" "$?" 0
tap_check "6 deliveries sent" wait_until 120 metric_is "$tm_port" 'tern_deliveries_total{peer="plain",status="sent"}' 6
tap_check "1 delivery bounced" wait_until 120 metric_is "$tm_port" 'tern_deliveries_total{peer="hard",status="bounced"}' 1

parked=$(ternq_ list --json | python3 -c 'import json,sys; print(" ".join(json.loads(l)["queue_id"] for l in sys.stdin if l.strip()))')
tap_like "one message left in the queue" "$parked" '^[0-9A-Z]{13}$'
tap_check "ternq hold" ternq_ hold "$parked"

# A delivery is counted before the queue gauges and the connection's state
# change (relay_result_done): wait for those too before the scrape.
wait_until 30 metric_is "$tm_port" 'tern_queue_messages{state="queued"}' 0 \
	'tern_queue_messages{state="hold"}' 1 'tern_queue_recipients{peer="plain"}' 0 \
	'tern_connections{peer="plain",state="idle"}' 1
code=$(scrape "$tm_port" "$top/ternd.prom")
tap_is "GET /metrics: 200" "$code" 200
tap_check "promtool check metrics: ternd" sh -c "promtool check metrics <'$top/ternd.prom' >'$top/promtool-ternd.out' 2>&1"
sed 's/^/# /' "$top/promtool-ternd.out"

# ternd_is SERIES WANT - SERIES's value in the scrape is WANT
ternd_is() {
	tap_is "$1 $2" "$(value "$top/ternd.prom" "$1")" "$2"
}
ternd_is 'tern_messages_received_total{listener="smtp"}' 7
ternd_is 'tern_messages_received_total{listener="lmtp"}' 1
ternd_is 'tern_recipients_received_total' 8
ternd_is 'tern_deliveries_total{peer="plain",status="deferred"}' 0
ternd_is 'tern_deliveries_total{peer="plain",status="bounced"}' 0
ternd_is 'tern_deliveries_total{peer="hard",status="sent"}' 0
ternd_is 'tern_delivery_transmission_seconds_count{peer="plain"}' 6
ternd_is 'tern_delivery_transmission_seconds_bucket{peer="plain",le="+Inf"}' 6
ternd_is 'tern_queue_delay_seconds_count{peer="plain"}' 6
ternd_is 'tern_queue_delay_seconds_count{peer="hard"}' 1
ternd_is 'tern_connections_opened_total{peer="plain"}' 1
ternd_is 'tern_connections{peer="plain",state="idle"}' 1
ternd_is 'tern_connections{peer="plain",state="busy"}' 0
ternd_is 'tern_transactions_total{peer="plain",reused="no"}' 1
ternd_is 'tern_transactions_total{peer="plain",reused="yes"}' 5
ternd_is 'tern_tls_handshakes_total{peer="plain",result="ok",resumed="no"}' 0
ternd_is 'tern_breaker_state{peer="plain"}' 0
ternd_is 'tern_bytes_sent_total{peer="plain",method="copy"}' 0
ternd_is 'tern_queue_messages{state="queued"}' 0
ternd_is 'tern_queue_messages{state="deferred"}' 0
ternd_is 'tern_queue_messages{state="hold"}' 1
ternd_is 'tern_notices_waiting' 0
# 8 acceptances, 7 delivery results and 1 hold went through the committer
ternd_is 'tern_commit_batch_messages_sum' 16
tap_is "tern_commit_seconds_count equals the batches" \
	"$(value "$top/ternd.prom" tern_commit_seconds_count)" \
	"$(value "$top/ternd.prom" tern_commit_batch_messages_count)"
tap_like "tern_bytes_sent_total by sendfile" \
	"$(value "$top/ternd.prom" 'tern_bytes_sent_total{peer="plain",method="sendfile"}')" '^[1-9][0-9]{2,}$'
tap_like "tern_queue_oldest_age_seconds: the held message's age" \
	"$(value "$top/ternd.prom" tern_queue_oldest_age_seconds)" '^[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?$'
tap_is "every series of a histogram has cumulative buckets" "$(awk '
	/_bucket\{/ { key = $1; sub(/,?le="[^"]*"/, "", key); if (key == last && $2 + 0 < prev) bad++
		last = key; prev = $2 + 0 }
	END { print bad + 0 }' "$top/ternd.prom")" 0
ternd_is 'tern_delivery_codes_total{peer="plain",dsn="2.0.0"}' 6
ternd_is 'tern_delivery_codes_total{peer="hard",dsn="5.3.0"}' 1
tap_is "a code's series appears with its first attempt" \
	"$(grep -c '^tern_delivery_codes_total{peer="codes"' "$top/ternd.prom")" 0
ternd_is 'tern_queue_recipients{peer="parked"}' 1
ternd_is 'tern_queue_recipients{peer="plain"}' 0
ternd_is 'tern_spans_dropped_total' 0
ternd_is 'tern_unroutable_total{reason="no_host"}' 1	# the parked recipient
ternd_is 'tern_unroutable_total{reason="no_route"}' 0
ternd_is 'tern_unroutable_total{reason="tls_context"}' 0

# std_checks NAME FILE - the standard series of a daemon's scrape
std_checks() {
	local f=$2 start
	tap_is "$1: tern_build_info{version=\"$version\"} 1" \
		"$(value "$f" "tern_build_info{version=\"$version\"}")" 1
	tap_is "$1: process metrics with their types" "$(grep -cxE '# TYPE (process_cpu_seconds_total counter|process_(resident_memory_bytes|virtual_memory_bytes|open_fds|max_fds|start_time_seconds) gauge)' "$f")" 6
	tap_like "$1: process_resident_memory_bytes" "$(value "$f" process_resident_memory_bytes)" '^[1-9][0-9]{6,}$'
	tap_like "$1: process_open_fds" "$(value "$f" process_open_fds)" '^([5-9]|[1-9][0-9]+)$'
	start=$(value "$f" process_start_time_seconds)
	tap_check "$1: process_start_time_seconds ($start) since the test started ($started)" \
		awk -v s="$start" -v t="$started" -v now="$(date +%s)" 'BEGIN { exit !(s >= t - 1 && s <= now + 1) }'
	tap_is "$1: tern_config_last_reload_successful" "$(value "$f" tern_config_last_reload_successful)" 1
}
std_checks ternd "$top/ternd.prom"
tap_check "tern_queue_map_used_bytes within tern_queue_map_size_bytes" awk \
	-v u="$(value "$top/ternd.prom" tern_queue_map_used_bytes)" \
	-v z="$(value "$top/ternd.prom" tern_queue_map_size_bytes)" 'BEGIN { exit !(u > 0 && u <= z) }'
tap_is "no address or domain in a label" "$(grep -cE '127\.0\.0\.1|example\.com|parked\.test' "$top/ternd.prom")" 0

tap_is "GET /other: 404" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "http://127.0.0.1:$tm_port/other")" 404
tap_is "POST /metrics: 405" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST -d x "http://127.0.0.1:$tm_port/metrics")" 405
tap_like "Content-Type names format 0.0.4" \
	"$(curl -s -o /dev/null -w '%{content_type}' --max-time 30 "http://127.0.0.1:$tm_port/metrics")" \
	'^text/plain; version=0\.0\.4'
tap_is "bound to the configured address only" \
	"$(ss -Hltn "sport = :$tm_port" | awk '{ print $4 }')" "127.0.0.1:$tm_port"

ternd_stop
tap_is "ternd stops cleanly" "$?" 0
ternd_start
code=$(scrape "$tm_port" "$top/ternd2.prom")
tap_is "after a restart: the queue counted anew (hold 1)" \
	"$(value "$top/ternd2.prom" 'tern_queue_messages{state="hold"}') $(value "$top/ternd2.prom" 'tern_queue_messages{state="queued"}')" "1 0"
# 8 acceptances, 7 deliveries and a hold moved the queue database's counts:
# they add up, so the restart took them without a walk of the queue
tap_is "after a restart: the counts per state were kept, not rebuilt" \
	"$(grep -c 'counts of messages per state rebuilt' "$TERND_LOG")" 0
tap_is "after a restart: counters start at 0" \
	"$(value "$top/ternd2.prom" 'tern_messages_received_total{listener="smtp"}')" 0
tap_is "after a restart: tern_queue_recipients kept in the queue (parked 1, plain 0)" \
	"$(value "$top/ternd2.prom" 'tern_queue_recipients{peer="parked"}') $(value "$top/ternd2.prom" 'tern_queue_recipients{peer="plain"}')" "1 0"

# Enhanced status codes, as the peer gave them (or the class's own)
python3 - "$TERND_PORT" >"$top/codes-send.out" 2>&1 <<-'EOF'
	import smtplib, sys
	s = smtplib.SMTP("127.0.0.1", int(sys.argv[1]), "client.test", timeout=60)
	for r in ("550-5.1.1", "550-5.9.9", "550", "451-4.7.0"):
	    s.sendmail("app@example.org", ["%s@codes.test" % r], b"Subject: c\r\n\r\nbody\r\n")
	s.quit()
EOF
tap_is "4 messages for the codes peer accepted" "$?" 0
tap_check "3 bounced by the codes peer" wait_until 60 metric_is "$tm_port" 'tern_deliveries_total{peer="codes",status="bounced"}' 3
tap_check "1 deferred by the codes peer" wait_until 60 metric_is "$tm_port" 'tern_deliveries_total{peer="codes",status="deferred"}' 1
wait_until 30 metric_is "$tm_port" 'tern_queue_recipients{peer="codes"}' 1
scrape "$tm_port" "$top/codes.prom" >/dev/null
tap_is "tern_delivery_codes_total of the codes peer: 5.1.1, other (5.9.9), 5.0.0 (none given), 4.7.0" \
	"$(grep '^tern_delivery_codes_total{peer="codes"' "$top/codes.prom" | sort | tr '\n' ' ')" \
	'tern_delivery_codes_total{peer="codes",dsn="4.7.0"} 1 tern_delivery_codes_total{peer="codes",dsn="5.0.0"} 1 tern_delivery_codes_total{peer="codes",dsn="5.1.1"} 1 tern_delivery_codes_total{peer="codes",dsn="other"} 1 '
tap_is "tern_queue_recipients: the deferred one" \
	"$(value "$top/codes.prom" 'tern_queue_recipients{peer="codes"}')" 1
deferred=$(ternq_ list --json --peer codes | python3 -c 'import json,sys; print(" ".join(json.loads(l)["queue_id"] for l in sys.stdin if l.strip()))')
tap_like "one message deferred for the codes peer" "$deferred" '^[0-9A-Z]{13}$'
# counts_after_restart WHAT D H - restart; tern_queue_messages from the
# queue database's counts (none rebuilt) is what ternq's walk of the
# queue lists, with D deferred and H held (the bounces' DSNs are queued)
counts_after_restart() {
	local listed
	ternd_stop
	ternd_start
	scrape "$tm_port" "$top/restart.prom" >/dev/null
	listed=$(ternq_ list --json | python3 -c 'import json, sys
n = {"queued": 0, "deferred": 0, "hold": 0}
for l in sys.stdin:
    if l.strip():
        n[json.loads(l)["state"]] += 1
print(n["queued"], n["deferred"], n["hold"])')
	tap_is "after a restart $1: tern_queue_messages as ternq lists the queue ($listed), the counts not rebuilt" \
		"$(value "$top/restart.prom" 'tern_queue_messages{state="queued"}') $(value "$top/restart.prom" 'tern_queue_messages{state="deferred"}') $(value "$top/restart.prom" 'tern_queue_messages{state="hold"}') $(grep -c 'counts of messages per state rebuilt' "$TERND_LOG")" \
		"$listed 0"
	tap_is "after a restart $1: $2 deferred, $3 held" "${listed#* }" "$2 $3"
}
counts_after_restart "with a deferred message" 1 1
tap_check "ternq expire the deferred one" ternq_ expire "$deferred"
tap_check "tern_queue_recipients of the codes peer: 0 after the expiry" \
	wait_until 30 metric_is "$tm_port" 'tern_queue_recipients{peer="codes"}' 0
tap_check "ternq delete the held one" ternq_ delete "$parked"
tap_check "tern_queue_recipients of the parked peer: 0 after the delete" \
	wait_until 30 metric_is "$tm_port" 'tern_queue_recipients{peer="parked"}' 0
counts_after_restart "after an expiry and a delete" 0 0
tap_check "promtool check metrics: ternd with codes" sh -c "promtool check metrics <'$top/codes.prom' >'$top/promtool-codes.out' 2>&1"
sed 's/^/# /' "$top/promtool-codes.out"

# signal_scrape PID SIGNAL LOG PATTERN URL FILE - send SIGNAL, wait for
# one more PATTERN line in LOG, scrape URL into FILE
signal_scrape() {
	local n
	n=$(grep -c "$4" "$3")
	kill "-$2" "$1"
	wait_until 10 sh -c "[ \$(grep -c '$4' '$3') -gt $n ]"
	curl -s -g -o "$6" --max-time 30 "$5"
}

# reload_flip NAME PID SIGNAL CONF URL LOG - a broken file, then the good
# one again: tern_config_last_reload_successful 0, then 1
reload_flip() {
	local name=$1 pid=$2 sig=$3 conf=$4 url=$5 log=$6 t0 t1
	cp "$conf" "$conf.good"
	printf '%s\n' "[global]" "no_such_parameter = 1" >>"$conf"
	signal_scrape "$pid" "$sig" "$log" 'reload failed' "$url" "$top/$name-bad.prom"
	tap_is "$name: a failed reload: tern_config_last_reload_successful 0" \
		"$(value "$top/$name-bad.prom" tern_config_last_reload_successful)" 0
	t0=$(value "$top/$name-bad.prom" tern_config_last_reload_success_timestamp_seconds)
	cp "$conf.good" "$conf"
	sleep 1
	signal_scrape "$pid" "$sig" "$log" 'configuration reloaded' "$url" "$top/$name-good.prom"
	tap_is "$name: a good reload: tern_config_last_reload_successful 1" \
		"$(value "$top/$name-good.prom" tern_config_last_reload_successful)" 1
	t1=$(value "$top/$name-good.prom" tern_config_last_reload_success_timestamp_seconds)
	tap_check "$name: the success timestamp moved ($t0 -> $t1)" test "$t1" -gt "$t0"
}
reload_flip ternd "$TERND_PID" HUP "$TERND_CONF" "http://127.0.0.1:$tm_port/metrics" "$TERND_LOG"
ternd_stop
tap_check "no sanitizer reports from ternd" ternd_sanitizer_clean

# --- tern-milter in Postfix ---------------------------------------------------------

ensure_tern_user
milter_port=$(free_port)
mm_port=$(free_port)
smtp_port=$(free_port)
msink_port=$(free_port)
"$milter" -K "$top/trace.key"
chown tern "$top/trace.key"
printf '%s\n' "[global]" "trace_key_file = $top/trace.key" "[milter]" \
	"listen = inet:$milter_port@127.0.0.1" "trusted_networks = 192.0.2.0/24" \
	"max_received = 10" "metrics_listen = [::1]:$mm_port" >"$top/tern.conf"
if ! ip -6 addr show lo 2>/dev/null | grep -q '::1'; then
	sed -i "s/^metrics_listen = .*/metrics_listen = 127.0.0.1:$mm_port/" "$top/tern.conf"
	mm_url=127.0.0.1
else
	mm_url='[::1]'
fi
"$milter" -f -c "$top/tern.conf" >"$top/milter.log" 2>&1 &
milter_pid=$!
tap_bg_register $milter_pid
tap_check "tern-milter listens" wait_for_port "$milter_port"
smtp-sink -u nobody "127.0.0.1:$msink_port" 64 >"$top/msink.out" 2>&1 &
tap_bg_register $!
wait_for_port "$msink_port"

pf=$top/pf
pf_create "$pf" "$smtp_port"
pf_relay_to "$pf" 127.0.0.1 "$msink_port"
# local_header_rewrite_clients empty: Postfix must not add the missing Date:
pf_conf "$pf" "smtpd_milters = inet:127.0.0.1:$milter_port" \
	"milter_default_action = tempfail" "milter_protocol = 6" "local_header_rewrite_clients ="
tap_check "postfix starts" pf_start "$pf"

# swaks_send NAME [swaks args...] - submit over SMTP; output in $top/NAME.swaks
swaks_send() {
	local name=$1
	shift
	swaks --server 127.0.0.1 --port "$smtp_port" --from sender@example.org \
		--to rcpt@example.com --header "Subject: $name" "$@" >"$top/$name.swaks" 2>&1
}
tap_check "plain 1 accepted" swaks_send plain1
tap_check "plain 2 accepted" swaks_send plain2
tap_check "forged trace accepted" swaks_send forged \
	--add-header "Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
printf '%s\r\n' "From: sender@example.org" "To: rcpt@example.com" "Subject: nodate" "" "no date" \
	>"$top/nodate.eml"
tap_check "no Date: accepted (tagged)" swaks_send nodate --data "@$top/nodate.eml"
received=()
for i in $(seq 11); do
	received+=(--add-header "Received: from hop$i.example; Mon, 30 Nov 2026 10:00:00 +0000")
done
swaks_send loop "${received[@]}"
tap_is "mail loop refused with 554 5.4.6" "$(grep -c '^<\*\* *554 5.4.6' "$top/loop.swaks")" 1

code=$(curl -s -g -o "$top/milter.prom" -w '%{http_code}' --max-time 30 "http://$mm_url:$mm_port/metrics")
tap_is "tern-milter GET /metrics: 200" "$code" 200
tap_check "promtool check metrics: tern-milter" sh -c "promtool check metrics <'$top/milter.prom' >'$top/promtool-milter.out' 2>&1"
sed 's/^/# /' "$top/promtool-milter.out"
milter_is() {
	tap_is "$1 $2" "$(value "$top/milter.prom" "$1")" "$2"
}
milter_is 'tern_milter_messages_total{verdict="accept"}' 3
milter_is 'tern_milter_messages_total{verdict="tag"}' 1
milter_is 'tern_milter_messages_total{verdict="reject"}' 1
milter_is 'tern_milter_messages_total{verdict="tempfail"}' 0
milter_is 'tern_milter_checks_failed_total{check="date"}' 1
milter_is 'tern_milter_checks_failed_total{check="loop"}' 1
milter_is 'tern_milter_checks_failed_total{check="from"}' 0
milter_is 'tern_milter_traces_total{origin="new"}' 4
milter_is 'tern_milter_traces_total{origin="replaced"}' 1
milter_is 'tern_milter_traces_total{origin="continued"}' 0
milter_is 'tern_milter_callback_seconds_count' 5
milter_is 'tern_milter_journal_dropped_total' 0
std_checks tern-milter "$top/milter.prom"
reload_flip tern-milter "$milter_pid" USR1 "$top/tern.conf" "http://$mm_url:$mm_port/metrics" "$top/milter.log"
tap_is "tern-milter GET /other: 404" \
	"$(curl -s -g -o /dev/null -w '%{http_code}' --max-time 30 "http://$mm_url:$mm_port/other")" 404

pf_stop "$pf"
kill -TERM "$milter_pid"
wait "$milter_pid"
tap_is "tern-milter stops cleanly" "$?" 0
tap_is "no sanitizer reports from tern-milter" "$(grep -c 'Sanitizer\|runtime error:' "$top/milter.log")" 0

tap_done
