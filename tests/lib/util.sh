# tests/lib/util.sh - waiting and setup helpers for tests, benchmarks and
# the demo. tap.sh sources it; a script that must leave its daemons running
# (contrib/demo.sh) sources it alone, without tap.sh's cleanup at exit.

if [ -n "${_UTIL_SH_LOADED:-}" ]; then return 0; fi
_UTIL_SH_LOADED=1

# wait_until - run CMD every 0.1 s until it succeeds; fail after TIMEOUT s
wait_until() {
	local timeout=$1 now deadline
	shift
	now=${EPOCHREALTIME//[.,]/}
	deadline=$((now + timeout * 1000000))
	until "$@"; do
		now=${EPOCHREALTIME//[.,]/}
		if [ "$now" -ge "$deadline" ]; then
			return 1
		fi
		sleep 0.1
	done
}

# listening - true if a TCP socket listens on 127.0.0.1:PORT
# (checked with ss rather than by connecting, so that daemons such as
# milters do not see a spurious connection)
listening() {
	ss -Hltn "sport = :$1" | awk -v port="$1" '
		$4 ~ "^(127\\.0\\.0\\.1|0\\.0\\.0\\.0|\\*|\\[::\\]):" port "$" { found = 1 }
		END { exit !found }'
}

# wait_for_port - wait until 127.0.0.1:PORT accepts TCP (default 10 s)
wait_for_port() {
	wait_until "${2:-10}" listening "$1"
}

# wait_for_file - wait until PATH exists (default 10 s)
wait_for_file() {
	wait_until "${2:-10}" test -e "$1"
}

# ensure_tern_user - create the unprivileged system user "tern" if missing
ensure_tern_user() {
	id -u tern >/dev/null 2>&1 && return 0
	# A parallel test may win the race; re-check instead of failing.
	useradd --system --no-create-home --shell /usr/sbin/nologin \
		--user-group tern 2>/dev/null || id -u tern >/dev/null 2>&1
}
