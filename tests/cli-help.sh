#!/bin/bash
# cli-help.sh - every program answers --help and -h with its usage on the
# standard output (status 0, nothing on the standard error), --version and
# -V with "tern VERSION" (the package's version, status 0), and a bad
# option with the usage on the standard error (status 2, nothing on the
# standard output). None of these read a configuration file: -c points
# at one that does not exist.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
build=${top_builddir:-$here/..}
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$build/config.h")
[ -n "$version" ] || tap_skip_all "no PACKAGE_VERSION in $build/config.h"
tmp=$(tap_tmpdir)

# run PROG ARG... - "STATUS|STDOUT|STDERR" of PROG, each output's first
# line, and how many lines it had
run() {
	local rc
	"$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
	printf '%s|%s (%s)|%s (%s)' "$rc" "$(head -1 "$tmp/out")" "$(wc -l <"$tmp/out")" \
		"$(head -1 "$tmp/err")" "$(wc -l <"$tmp/err")"
}

nocf=$tmp/no-such.conf
for p in src/ternd/ternd src/milter/tern-milter src/ternq/ternq src/report/tern-report; do
	name=${p##*/}
	bin=$build/$p
	[ -x "$bin" ] || { tap_fail "$name is built"; continue; }
	for h in --help -h; do
		tap_like "$name $h: usage on stdout, status 0, stderr empty" "$(run "$bin" -c "$nocf" "$h")" \
			"^0\\|usage: $name .* \\([1-9][0-9]*\\)\\| \\(0\\)\$"
	done
	for v in --version -V; do
		tap_is "$name $v: tern $version, status 0" "$(run "$bin" "$v")" "0|tern $version (1)| (0)"
	done
	tap_like "$name --no-such-option: usage on stderr, status 2, stdout empty" \
		"$(run "$bin" --no-such-option)" "^2\\| \\(0\\)\\|.*unrecognized option.* \\(([2-9]|[1-9][0-9]+)\\)\$"
	tap_like "$name --no-such-option: the usage follows the complaint" \
		"$(run "$bin" --no-such-option; sed -n 2p "$tmp/err")" "usage: $name "
done
tap_done
