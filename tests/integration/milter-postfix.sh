#!/bin/bash
# milter-postfix.sh - tern-milter in a real, isolated Postfix instance.
#
# swaks and Postfix's sendmail submit mail to a Postfix that calls the
# built tern-milter (smtpd_milters and non_smtpd_milters) and relays to
# smtp-sink, which dumps each message to a file. Asserts on the delivered
# bytes: one Traceparent and one Tracestate, well-formed, at the top, the
# signature recomputed with openssl; a forged trace is gone; a validly
# signed one is continued; a mail loop is refused at SMTP with 554 5.4.6;
# the milter's log line carries Postfix's queue id and the delivered trace.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/postfix.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (postfix start)"
for cmd in postfix smtp-sink swaks openssl; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
ensure_tern_user

top=$(tap_tmpdir)
milter_port=$(free_port)
smtp_port=$(free_port)
sink_port=$(free_port)

"$milter" -K "$top/trace.key"
chown tern "$top/trace.key"
key=$(cat "$top/trace.key")
# 127.0.0.1 is not trusted here, so traces must be signed to be continued.
printf '%s\n' "[global]" "trace_key_file = $top/trace.key" "[milter]" \
	"listen = inet:$milter_port@127.0.0.1" "trusted_networks = 192.0.2.0/24" \
	"max_received = 10" >"$top/tern.conf"
"$milter" -f -c "$top/tern.conf" >"$top/milter.log" 2>&1 &
milter_pid=$!
tap_bg_register $milter_pid
tap_check "tern-milter listens" wait_for_port "$milter_port"

mkdir "$top/sink" && chown nobody "$top/sink"
smtp-sink -u nobody -d "$top/sink/%M." "127.0.0.1:$sink_port" 100 >"$top/sink.log" 2>&1 &
tap_bg_register $!
tap_check "smtp-sink listens" wait_for_port "$sink_port"

pf=$top/pf
pf_create "$pf" "$smtp_port"
pf_relay_to "$pf" 127.0.0.1 "$sink_port"
pf_conf "$pf" "smtpd_milters = inet:127.0.0.1:$milter_port" \
	"non_smtpd_milters = inet:127.0.0.1:$milter_port" \
	"milter_default_action = tempfail" "milter_protocol = 6"
tap_check "postfix starts" pf_start "$pf"

# sign TRACEPARENT MESSAGE-ID - the tern=2. signature, computed by openssl
sign() {
	printf '%s\0%s' "$1" "$2" | openssl mac -binary -macopt "hexkey:$key" -macopt size:16 \
		BLAKE2BMAC | basenc --base64url | tr -d '='
}

# swaks_send NAME [swaks args...] - submit over SMTP; output in $top/NAME.swaks
swaks_send() {
	local name=$1
	shift
	swaks --server 127.0.0.1 --port "$smtp_port" --from sender@example.org \
		--to "rcpt@example.com" --header "Subject: $name" --body "body of $name" "$@" \
		>"$top/$name.swaks" 2>&1
}

# delivered NAME - the dump file of the message with Subject NAME (LF ends)
delivered() {
	grep -lx "Subject: $1" "$top"/sink/* 2>/dev/null | head -1
}

# sink_files - how many messages the sink holds
sink_files() {
	find "$top/sink" -type f | wc -l
}

# header_values FILE NAME - the values of every NAME: field in FILE's header
header_values() {
	sed -n '/^$/q; p' "$1" | sed -n "s/^$2: //p"
}

forged_tp=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
signed_tp=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01
tap_check "forged trace accepted by SMTP" swaks_send forged \
	--add-header "Traceparent: $forged_tp" --add-header "Tracestate: tern=2.AAAAAAAAAAAAAAAAAAAAAA" \
	--add-header "Tern-Inspect: date=fail"
tap_check "signed trace accepted by SMTP" swaks_send signed --header "Message-Id: <signed.1@example.org>" \
	--add-header "Traceparent: $signed_tp" \
	--add-header "Tracestate: tern=2.$(sign "$signed_tp" "<signed.1@example.org>")"
received=()
for i in $(seq 11); do
	received+=(--add-header "Received: from hop$i.example by hop$((i + 1)).example; Mon, 30 Nov 2026 10:00:00 +0000")
done
swaks_send loop "${received[@]}"
tap_is "mail loop refused at SMTP with 554 5.4.6" "$(grep '^<\*\*' "$top/loop.swaks" | head -1)" \
	'<** 554 5.4.6 message has 11 Received: headers, limit 10 (mail loop?)'
printf '%s\n' "From: sender@example.org" "To: rcpt@example.com" \
	"Date: Mon, 30 Nov 2026 10:00:00 +0000" "Subject: submitted" "" "via sendmail" >"$top/submitted.eml"
tap_check "sendmail submission accepted" pf_sendmail "$pf" -f sender@example.org rcpt@example.com \
	<"$top/submitted.eml"
tap_check "queue drains" pf_wait_empty "$pf" 30
tap_wait_is "three messages delivered, the loop refused" 3 sink_files

# check_trace NAME [WANT_TRACE_ID] - one signed trace context, continuing WANT if given
check_trace() {
	local name=$1 want=${2:-} file tp ts tid qid mid
	file=$(delivered "$name")
	if [ -z "$file" ]; then
		tap_fail "$name: delivered" "sink: $(ls "$top/sink")" "$(pf_log "$pf" | tail -20)"
		return
	fi
	tp=$(header_values "$file" Traceparent)
	ts=$(header_values "$file" Tracestate)
	tap_like "$name: exactly one well-formed Traceparent" "$tp" '^00-[0-9a-f]{32}-[0-9a-f]{16}-01$'
	mid=$(sed -n '/^$/q; p' "$file" | grep -i -m1 '^message-id:' | sed 's/^[^:]*: *//')
	tap_is "$name: Tracestate signs it with the Message-ID (${mid:-none})" "$ts" "tern=2.$(sign "$tp" "$mid")"
	tap_is "$name: Traceparent, Tracestate head the message (after Received:)" \
		"$(sed -n '/^$/q; p' "$file" | grep -v '^X-\|^Received:\|^[[:space:]]' | head -2 | cut -d: -f1 | tr '\n' ' ')" \
		"Traceparent Tracestate "
	tid=$(cut -d- -f2 <<<"$tp")
	if [ -n "$want" ]; then
		tap_is "$name: trace id continued" "$tid" "$want"
		tap_like "$name: new span id" "$(cut -d- -f3 <<<"$tp")" '^[0-9a-f]{16}$'
	fi
	# The milter's log line names Postfix's queue id and the same trace.
	qid=$(grep -o "^tern-milter: [0-9A-Za-z]*: trace=$tid" "$top/milter.log" | cut -d' ' -f2 | tr -d :)
	tap_like "$name: milter logged Postfix's queue id" "$qid" '^[0-9A-Za-z]{6,}$'
	tap_check "$name: Postfix delivered that queue id" \
		grep -q " ${qid:-none}: to=<rcpt@example.com>.*status=sent" "$pf/maillog"
}
check_trace forged
tap_is "forged: no trace of the forged fields" \
	"$(grep -c '4bf92f3577b34da6\|AAAAAAAAAAAAAAAAAAAAAA\|^Tern-Inspect' "$(delivered forged)")" 0
tap_check "forged: logged as replaced" \
	grep -q "origin=replaced client=unknown\[127.0.0.1\] from=<sender@example.org> nrcpt=1 verdict=accept$" \
	"$top/milter.log"
check_trace signed 0af7651916cd43dd8448eb211c80319c
check_trace submitted
tap_check "loop logged with verdict=reject" grep -qF \
	"verdict=reject reason=loop: message has 11 Received: headers, limit 10 (mail loop?)" "$top/milter.log"

# SIGUSR1 reloads: a new limit applies to the next message; a broken file
# is refused with file:line and the running configuration stays.
# loop_reply N - send N Received: headers, print the SMTP refusal
loop_reply() {
	local args=() i
	for i in $(seq "$1"); do
		args+=(--add-header "Received: from hop$i.example; Mon, 30 Nov 2026 10:00:00 +0000")
	done
	swaks_send "loop$1" "${args[@]}"
	grep '^<\*\*' "$top/loop$1.swaks" | head -1
}
sed -i 's/^max_received = 10$/max_received = 5/' "$top/tern.conf"
kill -USR1 "$milter_pid"
tap_check "SIGUSR1 reloads" wait_until 5 grep -q "configuration reloaded from $top/tern.conf" "$top/milter.log"
tap_is "the new max_received applies" "$(loop_reply 6)" \
	'<** 554 5.4.6 message has 6 Received: headers, limit 5 (mail loop?)'
echo "max_headers = lots" >>"$top/tern.conf"
kill -USR1 "$milter_pid"
tap_check "a broken file is refused with file:line" wait_until 5 grep -qF \
	"reload failed, keeping the running configuration: $top/tern.conf:7: max_headers = lots: expected a number" \
	"$top/milter.log"
tap_is "the running configuration stays" "$(loop_reply 6)" \
	'<** 554 5.4.6 message has 6 Received: headers, limit 5 (mail loop?)'

pf_stop "$pf"
kill -TERM "$milter_pid"
wait "$milter_pid"
tap_is "tern-milter stops cleanly on SIGTERM" "$?" 0
tap_is "no sanitizer reports" "$(grep -c 'Sanitizer\|runtime error:' "$top/milter.log")" 0
tap_check "logged its stop" grep -q "stopped$" "$top/milter.log"

tap_done
