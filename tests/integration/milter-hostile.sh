#!/bin/bash
# milter-hostile.sh - tern-milter gets header fields larger than a libmilter
# packet (64 KB), as Postfix sends them (header_size_limit = 102400), from
# tests/lib/milter_client.py (miltertest crashes on them): the configured
# check decides (check_header_limits = reject: 552 5.3.4), the connection
# is not dropped (which the MTA would turn into a 451 for ever).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter

command -v python3 >/dev/null || tap_skip_all "python3 not installed"
ensure_tern_user || exit 1
dir=$(tap_tmpdir)
port=$(free_port)
"$milter" -K "$dir/trace.key" && chown tern "$dir/trace.key"
printf '[global]\ntrace_key_file = %s/trace.key\n[milter]\nlisten = inet:%s@127.0.0.1\n' \
	"$dir" "$port" >"$dir/tern.conf"
"$milter" -f -v -c "$dir/tern.conf" >"$dir/milter.log" 2>&1 &
pid=$!
tap_bg_register $pid
tap_check "tern-milter listens" wait_for_port "$port"

# headers FILE BYTES - a valid header block plus X-Huge: with BYTES octets
headers() {
	{
		echo "From: a@example.org"
		echo "Date: Mon, 30 Nov 2026 10:00:00 +0000"
		echo "Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		echo "X-Huge: $(head -c "$2" /dev/zero | tr '\0' h)"
	} >"$1"
}
headers "$dir/h100k" 102400
out=$(python3 "$here/../lib/milter_client.py" "127.0.0.1:$port" "$dir/h100k")
tap_is "a 100 KB header field: every header step answered" "$(grep -c '^header continue$' <<<"$out")" 4
tap_is "... and refused by check_header_limits at the end of message, not dropped" \
	"$(tail -1 <<<"$out")" "eom reply 552 5.3.4 message header is 102540 bytes, limit 102400"
headers "$dir/h90k" 92160
out=$(python3 "$here/../lib/milter_client.py" "127.0.0.1:$port" "$dir/h90k")
tap_is "a 90 KB header field (over 64 KB, under the limit): accepted, forged Traceparent removed, new trace" \
	"$(grep '^eom' <<<"$out" | tr '\n' '|')" \
	"eom header-change Traceparent 1 <empty>|eom insert Tracestate 0|eom insert Traceparent 0|eom continue|"
tap_is "tern-milter is still running" "$(kill -0 "$pid" && echo yes)" yes
kill -TERM "$pid"
wait "$pid"
tap_is "tern-milter stops cleanly" "$?" 0
tap_done
