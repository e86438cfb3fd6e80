#!/bin/bash
# tests/stress/memory.sh - ternd's memory is bounded by its configuration,
# not by the mail it has handled: relay MESSAGES (default 100,000) through
# ternd to an smtp-sink and compare ternd's resident set after half of
# them and after all of them: flat within 10%.
#
#     sudo tests/stress/memory.sh [BUILD_DIR]      # default: build/
#
# Leaks are the sanitizer build's job (LeakSanitizer reports at exit in
# every test of the suite under --sanitizers); this is about growth that
# is not a leak: caches, queues, fragmentation. Prints TAP.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
top_builddir=$(cd "${1:-$top_srcdir/build}" && pwd) || exit 2
export top_srcdir top_builddir
. "$top_srcdir/tests/lib/tap.sh"
. "$top_srcdir/tests/lib/ternd.sh"
blast=$top_builddir/bench/smtp-blast
messages=${MESSAGES:-100000}
half=$((messages / 2))

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v smtp-sink >/dev/null || tap_skip_all "smtp-sink not installed"

top=$(tap_tmpdir)
sport=$(free_port)
smtp-sink -c -u nobody "127.0.0.1:$sport" 256 >"$top/sink.out" 2>&1 &
tap_bg_register "$!"
wait_for_port "$sport"
TERND_PEERS=$(printf '%s\n' "[peer sink]" "host = [127.0.0.1]" "port = $sport" "tls = none" \
	"min_idle = 2" "max_connections = 8" "[routes]" "* = sink")
ternd_setup "$top/t" "history_retention = 1d" || exit 1

# rss FIELD - ternd's VmRSS, RssAnon or RssFile in kB
rss() {
	awk -v f="$1:" '$1 == f { print $2 }' "/proc/$TERND_PID/status"
}

# sent - deliveries ternd logged as sent
sent() {
	grep -c ' status=sent ' "$TERND_LOG"
}

# _sent_atleast N - at least N deliveries sent
_sent_atleast() {
	[ "$(sent)" -ge "$1" ]
}

"$blast" -c 10 -n "$half" -s 4096 "127.0.0.1:$TERND_PORT" >"$top/blast1.log" 2>&1
tap_check "the first $half messages are relayed" wait_until 600 _sent_atleast "$half"
rss_half=$(rss RssAnon) file_half=$(rss RssFile)
"$blast" -c 10 -n "$half" -s 4096 "127.0.0.1:$TERND_PORT" >"$top/blast2.log" 2>&1
tap_check "all $messages messages are relayed" wait_until 600 _sent_atleast "$messages"
rss_all=$(rss RssAnon) file_all=$(rss RssFile)
tap_diag "ternd RssAnon: $rss_half kB after $half messages, $rss_all kB after $messages" \
	"ternd RssFile (the mapped queue database, history included): $file_half -> $file_all kB"
# Anonymous memory is what the process holds; file-backed pages are the
# LMDB map (it grows with the history kept for history_retention) and
# the kernel reclaims them like any page cache.
tap_check "anonymous RSS after $messages is within 10% of that after $half ($rss_half -> $rss_all kB)" \
	test "$rss_all" -le $((rss_half + rss_half / 10))
rc=0
ternd_stop || rc=$?
tap_is "ternd stops cleanly" "$rc" 0
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
