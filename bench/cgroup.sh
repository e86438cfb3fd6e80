# shellcheck shell=bash disable=SC2154 # bench_name, CGROUP_ROOT: set by the sourcing script
# bench/cgroup.sh - cgroup v1 cpuacct groups: the CPU of a set of processes
# (a sender, a path) however they fork, for relay.sh and pipeline.sh.
#
# A shell that writes its PID to GROUP/cgroup.procs before it starts a
# program puts that program and all its children in GROUP. Needs
# tests/lib/tap.sh (tap_on_exit), CGROUP_ROOT (the cpuacct mount, e.g.
# /sys/fs/cgroup/cpuacct) and bench_name. Never removes a group it did not
# make.

if [ -n "${_BENCH_CGROUP_LOADED:-}" ]; then return 0; fi
_BENCH_CGROUP_LOADED=1

# cg_make NAME - create a fresh cpuacct group; print its path (removed at exit)
cg_make() {
	local cg
	cg=$CGROUP_ROOT/tern-bench-$bench_name-$$-$1
	mkdir "$cg" || return 1
	tap_on_exit "cg_remove $(printf '%q' "$cg")"
	echo "$cg"
}

# cg_remove - move what is left in GROUP back to the root, remove GROUP
cg_remove() {
	local pid
	[ -d "$1" ] || return 0
	while read -r pid; do
		echo "$pid" >"$CGROUP_ROOT/cgroup.procs" 2>/dev/null
	done <"$1/cgroup.procs"
	rmdir "$1" 2>/dev/null
}

# cg_ns - print GROUP's CPU time so far, in nanoseconds
cg_ns() {
	cat "$1/cpuacct.usage"
}
