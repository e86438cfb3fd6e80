# tests/lib/relay.sh - helpers for the relay tests: smtp-sink peers,
# ternd's log, swaks submissions and ternq's view of a recipient.
#
#     . tests/lib/tap.sh; . tests/lib/ternd.sh; . tests/lib/relay.sh
#     top=$(tap_tmpdir)          # sinks write $top/NAME.out, swaks $top/NAME.swaks
#     sink NAME PORT DIR [smtp-sink options]; send NAME FROM TO [swaks options]
#     smtps PORT TARGET PKI      # stunnel4, implicit TLS, in front of a sink
#
# Uses $top, ternd.sh's TERND_PORT and TERND_LOG, and $pf (a postfix.sh
# instance) for pf_count. Brings in pki.sh (pki_make, the test PKI).

. "$(dirname "${BASH_SOURCE[0]}")/pki.sh"

declare -A sink_pid sink_port
# sink NAME PORT DUMPDIR [smtp-sink options...] - start an smtp-sink that
# dumps each transaction to DUMPDIR and prints its counters to $top/NAME.out
sink() {
	local name=$1 port=$2 dir=$3
	shift 3
	mkdir -p "$dir" && chmod 0777 "$dir"
	smtp-sink -c -u nobody "$@" -d "$dir/%M." "127.0.0.1:$port" 64 >>"$top/$name.out" 2>&1 &
	sink_pid[$name]=$!
	sink_port[$name]=$port
	tap_bg_register "$!"
	wait_for_port "$port"
}

# smtps PORT TARGET PKI - stunnel4 (call it in the test's shell, not in
# $(...), so that it is stopped at exit) on PORT in front of 127.0.0.1:TARGET:
# implicit TLS (tls_wrapper, as on port 465) with PKI's smarthost.test
# certificate; its configuration and log are $top/stunnel.*
smtps() {
	printf '%s\n' "foreground = yes" "pid =" "[smtps]" "accept = 127.0.0.1:$1" \
		"connect = 127.0.0.1:$2" "cert = $3/server.pem" "key = $3/server.key" \
		>"$top/stunnel.conf"
	stunnel4 "$top/stunnel.conf" >"$top/stunnel.log" 2>&1 &
	tap_bg_register $!
	wait_for_port "$1"
}

# sink_stop NAME - stop a sink (and the connections it holds)
sink_stop() {
	kill -TERM "${sink_pid[$1]}" 2>/dev/null
	wait "${sink_pid[$1]}" 2>/dev/null
	wait_until 5 sh -c "! ss -Hltn 'sport = :${sink_port[$1]}' | grep -q ."
}

# files DIR - the number of dumped transactions in DIR
files() {
	find "$1" -type f | wc -l
}

# counters NAME - the sink's last "sess=S quit=Q mesg=M" counter line
counters() {
	tr '\r' '\n' <"$top/$1.out" | grep '^sess=' | tail -1
}

# nlog REGEX - lines of ternd's log matching the extended REGEX
nlog() {
	grep -cE "$1" "$TERND_LOG"
}

# _atleast N REGEX - ternd's log has at least N lines matching REGEX
_atleast() {
	[ "$(nlog "$2")" -ge "$1" ]
}

# send NAME FROM TO [swaks options...] - one message; prints its queue id
send() {
	local name=$1 from=$2 to=$3
	shift 3
	swaks --server 127.0.0.1 --port "$TERND_PORT" --from "$from" --to "$to" "$@" \
		>"$top/$name.swaks" 2>&1
	sed -n 's/^<-  250 2.0.0 Ok: queued as \([0-9A-Z]*\)$/\1/p' "$top/$name.swaks"
	ternd_sync
}

# rcpt_json QID FIELD - a field of the message's first recipient (ternq show --json)
rcpt_json() {
	ternq_ show "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["recipients"][0][sys.argv[1]])' "$2"
}

# pf_count REGEX - lines of the Postfix instance $pf's maillog matching REGEX
pf_count() {
	grep -cE "$1" "$pf/maillog"
}
_pf_atleast() {
	[ "$(pf_count "$2")" -ge "$1" ]
}


# peer_lines PORT STATUS - ternd's delivery lines (one per recipient) for
# the relay host on 127.0.0.1:PORT whose status matches the ERE STATUS
peer_lines() {
	grep -E ": [0-9A-Z]{13}: to=<[^>]*>, relay=[^,]*\[127\.0\.0\.1\]:$1, .*status=$2 " "$TERND_LOG"
}

# line_ids - the queue ids of the delivery lines on stdin, sorted
line_ids() {
	sed -nE 's/^.*: ([0-9A-Z]{13}): to=.*/\1/p' | sort
}

# blast_each_once N DUMPS TIMEOUT DONE [smtp-blast options...] - send N
# messages into ternd with bench/smtp-blast ($blast), wait up to TIMEOUT s
# for the command DONE (all delivered), then test by queue id that every
# message ternd acknowledged was delivered to DUMPS once (sets what
# ternd_relay_outcome sets; $top/acked holds the ids)
blast_each_once() {
	local n=$1 dumps=$2 timeout=$3 done=$4 rc=0
	shift 4
	"$blast" "$@" -n "$n" -d example.com -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast.log" 2>&1
	tap_is "ternd acknowledged $n messages" "$(sort -u "$top/acked" | wc -l)" "$n"
	wait_until "$timeout" "$done" || rc=$?
	tap_is "all delivered within ${timeout}s ($done)" "$rc" 0
	ternd_relay_outcome "$top/acked" "$dumps" "$top/ids"
	tap_is "every message delivered" "$DELIVERED" "$n"
	tap_is "no message lost" "$LOST" 0
	tap_is "no message twice" "$DUPS" 0
}
