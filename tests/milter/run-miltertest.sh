#!/bin/bash
# run-miltertest.sh - run one miltertest Lua script against a real tern-milter.
#
# The automake LOG_COMPILER for tests/milter/*.lua. For each script it
# makes a key and a configuration (the script's "-- conf: name = value"
# lines go into [milter]), starts the built tern-milter on a free loopback
# port, runs miltertest, then checks:
#   - every "SIGCHECK <traceparent> <tracestate> [<message-id>]" line the
#     script printed: the signature is recomputed with openssl (BLAKE2BMAC),
#     independently of tern's own code;
#   - every "-- log: REGEX" line of the script matches the milter's log.
# Exit status: 0 pass, 1 fail, 99 hard error (automake's convention).
set -u
script=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
milter=${top_builddir:-$here/../..}/src/milter/tern-milter

command -v miltertest >/dev/null || { echo "miltertest not installed (Debian package miltertest)"; exit 99; }
ensure_tern_user || exit 99
dir=$(tap_tmpdir) || exit 99
port=$(free_port) || exit 99
"$milter" -K "$dir/trace.key" || exit 99
chown tern "$dir/trace.key"
key=$(cat "$dir/trace.key")
{
	printf '[global]\ntrace_key_file = %s/trace.key\n[milter]\n' "$dir"
	printf 'listen = inet:%s@127.0.0.1\n' "$port"
	sed -n 's/^-- conf: //p' "$script"
} >"$dir/tern.conf"

# sign - the tern=2. signature of a traceparent value and a Message-ID
# (none: ""), computed by openssl; sign_old - the unversioned one of tern
# before 2, over the traceparent alone
sign() {
	printf '%s\0%s' "$1" "${2-}" | openssl mac -binary -macopt "hexkey:$key" -macopt size:16 \
		BLAKE2BMAC | basenc --base64url | tr -d '='
}
sign_old() {
	printf '%s' "$1" | openssl mac -binary -macopt "hexkey:$key" -macopt size:16 BLAKE2BMAC \
		| basenc --base64url | tr -d '='
}

valid_tp=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01
valid_mid='<valid.1@client.example>'
"$milter" -f -v -c "$dir/tern.conf" >"$dir/milter.log" 2>&1 &
pid=$!
tap_bg_register $pid
if ! wait_for_port "$port" 10; then
	echo "tern-milter did not start:"; cat "$dir/milter.log"; exit 99
fi

rc=0
miltertest -D "sock=inet:$port@127.0.0.1" -D "valid_tp=$valid_tp" -D "valid_mid=$valid_mid" \
	-D "valid_ts=tern=2.$(sign "$valid_tp" "$valid_mid")" \
	-D "old_ts=tern=$(sign_old "$valid_tp")" -D "libdir=$here" -s "$script" >"$dir/out" 2>&1 || rc=1
cat "$dir/out"
while read -r _ tp ts mid; do
	want="tern=2.$(sign "$tp" "$mid")"
	if [ "$ts" != "$want" ]; then
		echo "FAIL: Tracestate '$ts' for '$tp' should be '$want'"
		rc=1
	fi
done < <(grep '^SIGCHECK ' "$dir/out")
# A log line is written after the reply: wait for each (5 s at most).
while IFS= read -r re; do
	if ! wait_until 5 grep -Eq -- "$re" "$dir/milter.log"; then
		echo "FAIL: no log line matches: $re"
		rc=1
	fi
done < <(sed -n 's/^-- log: //p' "$script")
# A clean stop, so that sanitizer builds report leaks and errors.
kill -TERM "$pid"
wait "$pid"
status=$?
if [ "$status" -ne 0 ] || grep -Eq 'Sanitizer|runtime error:' "$dir/milter.log"; then
	echo "FAIL: tern-milter exited with status $status or reported a sanitizer error"
	rc=1
fi
echo "--- tern-milter log:"
cat "$dir/milter.log"
exit $rc
