#!/bin/bash
# tests/lib/selftest-ports.sh - self-test for tap.sh's free_port: two test
# scripts running at once never get the same port, even one neither has
# bound yet, and a script that has ended leaves nothing reserved.
#
# Two scripts (separate bash processes, each with tap.sh) ask for PORTS
# ports each, from a range of RANGE ports, without binding any. Without
# a registry shared between scripts they would meet about PORTS^2/RANGE
# = 10 times (none at all about once in 750,000 runs), so the second test
# fails on such a free_port. Each free_port is a python3 start (0.4 s
# here, several seconds beside CPU hogs): the waits below are for the
# state and only bounded, generously, against a hang. The registry
# here is a private one (TERN_TEST_PORTS), so the test neither sees nor
# fills the suite's.

set -u
libdir=$(cd "$(dirname "$0")" && pwd)
. "$libdir/tap.sh"

PORTS=40
RANGE=160
top=$(tap_tmpdir)
export TERN_TEST_PORTS=$top/registry TERN_TEST_PORT_RANGE=24000-$((24000 + RANGE - 1))

# asker NAME - a script of its own that reserves PORTS ports into
# $top/NAME, then waits for $top/go before it ends (its reservations
# live as long as it does); sets asker_pid
asker() {
	bash -c '. "$1/tap.sh"; for ((i = 0; i < $2; i++)); do free_port || exit 1; done >"$3"
		touch "$3.done"; wait_until 900 test -e "$4"' \
		"$1" "$libdir" "$PORTS" "$top/$1" "$top/go" >/dev/null 2>&1 &
	asker_pid=$!
	tap_bg_register "$asker_pid"
}

asker a
pid_a=$asker_pid
asker b
pid_b=$asker_pid

wait_until 600 test -e "$top/a.done" -a -e "$top/b.done"
tap_is "each script got $PORTS ports" "$(sort -u "$top/a" | wc -l) $(sort -u "$top/b" | wc -l)" \
	"$PORTS $PORTS"
tap_is "no port went to both scripts" \
	"$(comm -12 <(sort "$top/a") <(sort "$top/b") | wc -l)" 0
tap_is "while they run, the registry holds all $((2 * PORTS)) for them" \
	"$(awk -v a="$pid_a" -v b="$pid_b" '$2 == a || $2 == b' "$TERN_TEST_PORTS" | wc -l)" \
	"$((2 * PORTS))"

touch "$top/go"
wait "$pid_a" "$pid_b"
mine=$(free_port)
tap_is "once they have ended, the next call drops their reservations" \
	"$(cat "$TERN_TEST_PORTS")" "$mine $$"
tap_done
