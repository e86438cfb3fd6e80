# shellcheck shell=bash disable=SC2154 # top_src: set by the sourcing script
# bench/lib.sh - helpers shared by the benchmark scripts.
#
#     here=$(cd "$(dirname "$0")" && pwd); top_src=$(cd "$here/.." && pwd)
#     bench_name=relay        # prefix of die's messages
#     . "$here/lib.sh"
#
# Pure helpers (time, rates, medians, CPU counters) plus the facts every
# script prints before its runs. It loads nothing else: scripts source
# tests/lib/tap.sh (cleanup by PID, free_port) and tests/lib/postfix.sh
# themselves, because some of them must set TMPDIR first. Safe under
# "set -u"; needs bash >= 4.4.

if [ -n "${_BENCH_LIB_LOADED:-}" ]; then return 0; fi
_BENCH_LIB_LOADED=1

# die - print an error to stderr and exit 1 (tap.sh's EXIT trap cleans up)
die() {
	echo "${bench_name:-bench}: $*" >&2
	exit 1
}

# built - print the in-tree binary if it exists, else the one in build/
built() {
	if [ -x "$top_src/$1" ]; then echo "$top_src/$1"; else echo "$top_src/build/$1"; fi
}

# require_uint - die unless each named variable holds a non-negative integer
require_uint() {
	local v
	for v in "$@"; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer"
	done
}

# now_us - print the current time in microseconds
now_us() {
	local t=${EPOCHREALTIME//[.,]/}
	echo "$t"
}

# secs - print microseconds A..B as seconds with 3 decimals
secs() {
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1e6 }'
}

# rate - print N messages over microseconds A..B as msgs/s
rate() {
	awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.1f", n / ((b - a) / 1e6) }'
}

# cpu_snapshot - print "busy total steal" jiffies of all CPUs from /proc/stat
cpu_snapshot() {
	awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i
		print t - $5 - $6, t, $9; exit }' /proc/stat
}

# cpu_pct - print "busy% steal%" between two cpu_snapshot outputs
cpu_pct() {
	awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ")
		t = y[2] - x[2]; if (t <= 0) t = 1
		printf "%.0f %.0f", 100 * (y[1] - x[1]) / t, 100 * (y[3] - x[3]) / t }'
}

# proc_cpu_ticks - print PID's user+system CPU time in clock ticks
proc_cpu_ticks() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	stat=${stat##*) } # skip "pid (comm) "; fields now start at field 3
	awk '{ print $12 + $13 }' <<<"$stat"
}

# median - print the median of the numbers given as arguments ("-" if none)
median() {
	[ $# -gt 0 ] || { echo -; return; }
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratio - print A/B with 2 decimals ("-" if either is missing)
ratio() {
	case "$1$2" in *-*) echo -; return ;; esac
	awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'
}

# round_ratios "A..." "B..." - print A/B round by round, space-separated:
# two lists of per-round figures in round order, "-" where one is missing
# or zero; as many as the shorter list has
round_ratios() {
	local -a a b q=()
	local i
	read -r -a a <<<"$1"
	read -r -a b <<<"$2"
	for ((i = 0; i < ${#a[@]} && i < ${#b[@]}; i++)); do
		q+=("$(ratio "${a[i]}" "${b[i]}")")
	done
	echo "${q[*]}"
}

# minmax - print "min-max" of the numbers given as arguments
minmax() {
	[ $# -gt 0 ] || { echo -; return; }
	printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'
}

# sink_count - print the last "mesg=" counter smtp-sink -c wrote to FILE
sink_count() {
	local last
	last=$(tail -c 80 "$1" 2>/dev/null | tr '\r' '\n' | grep 'mesg=' | tail -n 1)
	last=${last##*mesg=}
	echo "${last:-0}"
}

# chunk_field FILE NAME - print counter NAME (messages, bytes, connections,
# tls_full, tls_resumed, first_us, last_us) from bench/chunk-sink's -o FILE
chunk_field() {
	local line v
	line=$(cat "$1" 2>/dev/null) || { echo 0; return; }
	v=${line##*"$2"=}
	v=${v%% *}
	[[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo 0
}

# bench_facts - print the date, host and tree lines every script starts with
bench_facts() {
	echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "host:     $(uname -srm), nproc $(nproc), $(awk '/MemTotal/ { printf "%.1f GiB RAM", $2 / 1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# bench_tree - print the tree's commit line (the binaries printed after it ran)
bench_tree() {
	echo "tree:     $top_src at $(git -C "$top_src" rev-parse --short HEAD 2>/dev/null || echo '?')" \
		"($(git -C "$top_src" status --porcelain --untracked-files=no 2>/dev/null | wc -l) modified files; the binaries below are what ran)"
}

# sha - print the first 12 hex digits of FILE's sha256
sha() {
	sha256sum "$1" | cut -c1-12
}

# bench_copy_tern - private copies of ternd, ternq and the bench tools named
# after them (paths) below DIR/bin, then load tests/lib/ternd.sh on them:
# a concurrent rebuild cannot change what runs. Sets top_builddir.
bench_copy_tern() {
	local dir=$1 ternd=$2 ternq=$3 tool
	shift 3
	mkdir -p "$dir/bin/src/ternd" "$dir/bin/src/ternq" || die "mkdir failed"
	cp "$ternd" "$dir/bin/src/ternd/ternd" && cp "$ternq" "$dir/bin/src/ternq/ternq" ||
		die "cannot copy the binaries"
	for tool in "$@"; do
		cp "$tool" "$dir/bin/" || die "cannot copy $tool"
	done
	chmod -R a+rX "$dir/bin"
	# shellcheck disable=SC2034 # read by tests/lib/ternd.sh
	top_builddir=$dir/bin
	# shellcheck source=../tests/lib/ternd.sh
	. "$top_src/tests/lib/ternd.sh"
}
