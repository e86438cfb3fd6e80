# tests/lib/tap.sh - TAP output and test scaffolding for shell tests.
#
# Source this from integration tests, benchmarks and the demo:
#
#     . "$(dirname "$0")/../lib/tap.sh"
#
# It prints TAP for automake's tap-driver.sh (tap_ok, tap_check, ...,
# tap_done) and handles cleanup: temporary directories, background
# processes and registered commands are all cleaned up by an EXIT trap.
# Do not install your own EXIT trap; use tap_on_exit instead.
#
# Call the tap_* result functions from the main shell (not inside $(...)):
# the test counter lives in shell variables.  Cleanup registration
# (tap_tmpdir, tap_bg_register, tap_on_exit) is stored in files, so it
# also works from subshells.
#
# Safe under "set -u".  Requires bash >= 4.4, python3 for free_port.

if [ -n "${_TAP_SH_LOADED:-}" ]; then return 0; fi
_TAP_SH_LOADED=1

_tap_count=0      # tests run so far
_tap_failed=0     # tests that failed
_tap_planned=     # set once a plan line was printed

# Per-script session directory: holds tap_tmpdir directories plus the
# cleanup registry (.pids, .on_exit).  World-traversable (0755)
# because Postfix and tern daemons drop privileges and must reach sockets
# and queue directories below it.
_tap_root=$(mktemp -d "${TMPDIR:-/tmp}/tern-test.XXXXXX") || {
	echo "Bail out! tap.sh: mktemp -d failed"
	exit 1
}
chmod 0755 "$_tap_root"
: >"$_tap_root/.pids"
: >"$_tap_root/.on_exit"

# tap_diag - print each argument (multi-line allowed) as "# " diagnostics
tap_diag() {
	local arg line
	for arg in "$@"; do
		while IFS= read -r line || [ -n "$line" ]; do
			printf '# %s\n' "$line"
		done <<<"$arg"
	done
}

# tap_plan - print the plan "1..N" up front (optional; tap_done does it)
tap_plan() {
	_tap_planned=$1
	echo "1..$1"
}

# tap_ok - record a passing test
tap_ok() {
	_tap_count=$((_tap_count + 1))
	echo "ok $_tap_count - $1"
}

# tap_fail - record a failing test, with optional diagnostic lines
tap_fail() {
	local desc=$1
	shift
	_tap_count=$((_tap_count + 1))
	_tap_failed=$((_tap_failed + 1))
	echo "not ok $_tap_count - $desc"
	tap_diag "$@"
	tap_diag "test files: $_tap_root (set KEEP_TMP=1 to keep them)"
}

# tap_check - run a command; ok if it exits 0, else show its output
tap_check() {
	local desc=$1 out rc=0
	shift
	out=$("$@" 2>&1) || rc=$?
	if [ "$rc" -eq 0 ]; then
		tap_ok "$desc"
	else
		tap_fail "$desc" "command: $*" "exit status: $rc" "$out"
	fi
}

# tap_is - ok if GOT equals EXPECTED (string comparison)
tap_is() {
	if [ "$2" = "$3" ]; then
		tap_ok "$1"
	else
		tap_fail "$1" "     got: '$2'" "expected: '$3'"
	fi
}

# tap_wait_is DESCRIPTION EXPECTED CMD [ARG...] - wait (up to TAP_WAIT s,
# default 20) until CMD prints EXPECTED, then test its output as tap_is
# does. For a state that comes after the event the test saw (a commit
# after a log line or a reply, a delivered file after the peer's 250, a
# metric after a log line): wait for that state, not for the event.
tap_wait_is() {
	local desc=$1 want=$2
	shift 2
	wait_until "${TAP_WAIT:-20}" _tap_prints "$want" "$@"
	tap_is "$desc" "$("$@" 2>&1)" "$want"
}

# _tap_prints EXPECTED CMD [ARG...] - CMD prints EXPECTED
_tap_prints() {
	local want=$1
	shift
	[ "$("$@" 2>&1)" = "$want" ]
}

# tap_like - ok if GOT matches the extended regular expression REGEX
tap_like() {
	if [[ $2 =~ $3 ]]; then
		tap_ok "$1"
	else
		tap_fail "$1" "got: '$2'" "does not match: '$3'"
	fi
}

# tap_skip - record a skipped test: tap_skip DESCRIPTION REASON
tap_skip() {
	_tap_count=$((_tap_count + 1))
	echo "ok $_tap_count - $1 # SKIP $2"
}

# tap_skip_all - skip the whole test script (prints "1..0 # SKIP reason")
tap_skip_all() {
	echo "1..0 # SKIP $1"
	exit 0
}

# tap_done - print the plan if none was given; exit 1 if any test failed
tap_done() {
	if [ -z "$_tap_planned" ]; then
		echo "1..$_tap_count"
	fi
	if [ "$_tap_failed" -gt 0 ]; then
		tap_diag "$_tap_failed of $_tap_count tests failed"
		exit 1
	fi
	exit 0
}

# tap_tmpdir - create and print a fresh temporary directory (removed at exit)
tap_tmpdir() {
	local dir
	dir=$(mktemp -d "$_tap_root/tmp.XXXXXX") || return 1
	chmod 0755 "$dir"
	echo "$dir"
}

# tap_bg_register - kill PID(s) at exit (TERM, then KILL after 5 s)
tap_bg_register() {
	local pid
	for pid in "$@"; do
		echo "$pid" >>"$_tap_root/.pids"
	done
}

# tap_on_exit - run a shell command at exit (commands run in reverse order)
tap_on_exit() {
	printf '%s\n' "$1" >>"$_tap_root/.on_exit"
}

# _tap_cleanup - EXIT trap: run tap_on_exit commands, kill PIDs, remove tmp
_tap_cleanup() {
	local rc=$? cmd pid alive i
	trap - EXIT
	set +e

	if [ -s "$_tap_root/.on_exit" ]; then
		while IFS= read -r cmd; do
			eval "$cmd" </dev/null >/dev/null 2>&1
		done < <(tac "$_tap_root/.on_exit")
	fi

	alive=()
	while read -r pid; do
		if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
			alive+=("$pid")
		fi
	done <"$_tap_root/.pids"
	for ((i = 0; i < 50 && ${#alive[@]} > 0; i++)); do
		sleep 0.1
		for pid in "${!alive[@]}"; do
			kill -0 "${alive[$pid]}" 2>/dev/null || unset "alive[$pid]"
		done
	done
	for pid in "${alive[@]}"; do
		kill -KILL "$pid" 2>/dev/null
	done
	while read -r pid; do
		[ -n "$pid" ] && wait "$pid" 2>/dev/null
	done <"$_tap_root/.pids"

	if [ "${KEEP_TMP:-0}" = 1 ]; then
		echo "# KEEP_TMP=1: test files kept in $_tap_root"
	else
		rm -rf "$_tap_root"
	fi
	exit "$rc"
}
trap _tap_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# free_port - print a currently unused TCP port on 127.0.0.1
#
# Picks random ports in 20000-60000 outside the kernel's ephemeral range
# (so outgoing connections cannot grab them) and checks each by binding
# it. A port handed out stays reserved for as long as the script that
# asked for it runs, for every test script on the machine: a registry
# of "port pid" lines (/run/tern-test-ports as root, else
# $TMPDIR/tern-test-ports.UID; TERN_TEST_PORTS overrides), rewritten
# under flock without the entries of scripts that have ended. So a port
# a test keeps unbound on purpose (a peer that is down for now) cannot
# go to another script's daemon. What remains is the window between
# the check and the daemon binding the port, against processes that do
# not use this registry. TERN_TEST_PORT_RANGE=LO-HI narrows the range
# (selftest-ports.sh).
free_port() {
	python3 - "$$" <<-'EOF'
		import fcntl, os, random, socket, sys
		owner = int(sys.argv[1])
		uid = os.geteuid()
		path = os.environ.get("TERN_TEST_PORTS") or (
		    "/run/tern-test-ports" if uid == 0 else
		    "%s/tern-test-ports.%d" % (os.environ.get("TMPDIR", "/tmp"), uid))
		fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
		if os.fstat(fd).st_uid != uid:
		    sys.exit("free_port: %s belongs to another user" % path)
		fcntl.flock(fd, fcntl.LOCK_EX)  # released when this process exits

		def alive(pid):
		    try:
		        os.kill(pid, 0)
		    except ProcessLookupError:
		        return False
		    except PermissionError:
		        pass
		    return True

		data = b""
		while True:
		    chunk = os.read(fd, 65536)
		    if not chunk:
		        break
		    data += chunk
		held = []
		for line in data.decode(errors="replace").splitlines():
		    f = line.split()
		    if len(f) == 2 and f[0].isdigit() and f[1].isdigit() and alive(int(f[1])):
		        held.append((int(f[0]), int(f[1])))
		used = {port for port, _ in held}
		try:
		    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
		        eph_lo, eph_hi = map(int, f.read().split())
		except (OSError, ValueError):
		    eph_lo, eph_hi = 32768, 60999
		lo, hi = map(int, os.environ.get("TERN_TEST_PORT_RANGE", "20000-60000").split("-"))
		ports = [p for p in range(lo, hi + 1)
		         if p not in used and not eph_lo <= p <= eph_hi]
		if not ports:  # ephemeral range covers everything: ignore it
		    ports = [p for p in range(lo, hi + 1) if p not in used]
		random.shuffle(ports)
		for port in ports[:1000]:
		    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
		    try:
		        s.bind(("127.0.0.1", port))
		    except OSError:
		        continue
		    finally:
		        s.close()
		    held.append((port, owner))
		    os.lseek(fd, 0, os.SEEK_SET)
		    os.ftruncate(fd, 0)
		    os.write(fd, "".join("%d %d\n" % e for e in held).encode())
		    print(port)
		    sys.exit(0)
		sys.exit("free_port: no free port found")
	EOF
}

# wait_until, wait_for_port, wait_for_file, ensure_tern_user: shared with
# scripts that keep what they start (contrib/demo.sh).
. "$(dirname "${BASH_SOURCE[0]}")/util.sh"
