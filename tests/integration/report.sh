#!/bin/bash
# report.sh - tern-report over the history of a scripted ternd run with
# known traffic: 7 messages to an smtp-sink that accepts, 2 to one that
# refuses RCPT with 5xx (-f rcpt: bounced; the null sender gets no DSN),
# 1 to one that answers 4xx (-r rcpt: deferred, retried only in an hour),
# and 2 whose DSNs to a hostless peer stay queued. Then:
#   - --format json: the totals, per-peer counts and reasons are exact
#   - text: the same numbers in aligned rows; --quiet on an empty window
#     prints nothing
#   - html: well-formed (xmllint), two inline SVG charts, no scripts; the
#     host name in the title; in headless Chromium at 800 and 1600 px the
#     charts fill the width and every chart text lies inside its chart
#     (report_layout.js, injected into a copy), each column's header is
#     aligned as its cells, and an empty table (a window before the run)
#     has a row that says so; screenshots kept in the test's directory
#   - the new sections: top senders, message sizes; no milter journal
#     here, so no milter section
#   - csv: each --table has its header and its number of rows
#   - --merge of the same report twice doubles every count
#   - prom: promtool check metrics passes, written by rename (no temp file)
#   - promtool check rules contrib/prometheus/tern.rules.yml
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
report=${top_builddir:-$here/../..}/src/report/tern-report
srcdir=${top_srcdir:-$here/../..}

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in smtp-sink swaks python3 xmllint promtool; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
ensure_tern_user || tap_skip_all "cannot create the tern user"

top=$(tap_tmpdir)

# sink NAME [smtp-sink options...] - an smtp-sink on a free port
declare -A port
sink() {
	local name=$1
	shift
	port[$name]=$(free_port)
	mkdir -p "$top/$name" && chmod 0777 "$top/$name"
	smtp-sink -u nobody "$@" -d "$top/$name/%M." "127.0.0.1:${port[$name]}" 64 \
		>"$top/$name.out" 2>&1 &
	tap_bg_register "$!"
	wait_for_port "${port[$name]}"
}
sink ok
sink hard -f rcpt
sink soft -r rcpt

peer() {
	printf '%s\n' "[peer $1]" "host = [127.0.0.1]" "port = $2" "tls = none" "min_idle = 0" \
		"max_connections = 1"
}
TERND_PEERS=$(
	peer ok "${port[ok]}"
	peer hard "${port[hard]}"
	peer soft "${port[soft]}"
	# no host: the DSNs to senders.test stay queued, so the queue has a shape
	printf '%s\n' "[peer keep]" "[routes]" "ok.test = ok" "hard.test = hard" \
		"soft.test = soft" "* = keep"
)
export TERND_PEERS
start=$(date +%s)
ternd_setup "$top/ternd" "min_backoff = 1h" "max_backoff = 2h" || exit 1

# nlog REGEX - lines of ternd's log matching the extended REGEX
nlog() {
	grep -cE "$1" "$TERND_LOG"
}

# _atleast N REGEX - ternd's log has at least N lines matching REGEX
_atleast() {
	[ "$(nlog "$2")" -ge "$1" ]
}

# send FROM TO - one message to ternd over SMTP
send() {
	swaks --server 127.0.0.1 --port "$TERND_PORT" --from "$1" --to "$2" \
		--header "Subject: report test" >>"$top/swaks.log" 2>&1
}

for i in 1 2 3 4 5 6 7; do
	send app@senders.test "user$i@ok.test"
done
send app@senders.test nobody1@hard.test
send app@senders.test nobody2@hard.test
send app@senders.test later@soft.test
tap_check "ternd sends 7, bounces 2 and defers 1" wait_until 60 sh -c \
	"[ \$(grep -cE 'status=sent ' '$TERND_LOG') -ge 7 ] && [ \$(grep -cE 'status=bounced ' '$TERND_LOG') -ge 2 ] && [ \$(grep -cE 'status=deferred ' '$TERND_LOG') -ge 1 ]"
end=$(($(date +%s) + 2))

# --- json: exact totals, peers and reasons -----------------------------------------
rpt() {
	"$report" -c "$TERND_CONF" "$@"
}
rpt --format json >"$top/r.json"
tap_is "tern-report --format json exits 0" "$?" 0
jq() {
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"
}
tap_is "json totals: received, sent, deferred, bounced, expired" \
	"$(jq "$top/r.json" '" ".join(str(r["totals"][k]) for k in ("received","recipients","sent","deferred","bounced","expired"))')" \
	"12 12 7 1 2 0"
tap_is "json totals: bytes is the sum of the accepted sizes" \
	"$(jq "$top/r.json" 'r["totals"]["bytes"] > 0 and r["totals"]["bytes"] == sum(h["bytes"] for h in r["hourly"])')" True
tap_is "json peers: sent, deferred, bounced per peer" \
	"$(jq "$top/r.json" '" ".join("%s=%d/%d/%d" % (p["peer"], p["sent"], p["deferred"], p["bounced"]) for p in r["peers"])')" \
	"hard=0/0/2 ok=7/0/0 soft=0/1/0"
tap_is "json peers: 7 delays in the ok peer's histogram, p50 <= p90 <= p99" \
	"$(jq "$top/r.json" '[(sum(p["delay_histogram"]), p["delay_p50_ms"] <= p["delay_p90_ms"] <= p["delay_p99_ms"]) for p in r["peers"] if p["peer"] == "ok"][0]')" \
	"(7, True)"
tap_is "json peers: ok's 7 transactions on one connection (reuse 6 of 7)" \
	"$(jq "$top/r.json" '[(p["transactions"], p["connections"], p["reused"]) for p in r["peers"] if p["peer"] == "ok"][0]')" \
	"(7, 1, 6)"
tap_is "json reasons: grouped by enhanced status code" \
	"$(jq "$top/r.json" '" ".join("%s:%s=%d" % (x["status"], x["dsn"], x["count"]) for x in r["reasons"])')" \
	"$(printf 'bounced:%s=2 deferred:%s=1' \
		"$(sed -nE 's/.*to=<nobody1@hard\.test>.*dsn=([0-9.]+), status=bounced.*/\1/p' "$TERND_LOG")" \
		"$(sed -nE 's/.*to=<later@soft\.test>.*dsn=([0-9.]+), status=deferred.*/\1/p' "$TERND_LOG")")"
tap_is "json domains: ok.test first with 7" \
	"$(jq "$top/r.json" '(r["domains"][0]["domain"], r["domains"][0]["total"], len(r["domains"]), r["domains_exact"])')" \
	"('ok.test', 7, 3, True)"
tap_is "json queue: the deferred recipient and the 2 queued DSNs, by peer" \
	"$(jq "$top/r.json" '(r["queue"]["total"], sorted((p["peer"], p["total"]) for p in r["queue"]["peers"]))')" \
	"(3, [('keep', 2), ('soft', 1)])"
tap_is "json: the documented members of totals" \
	"$(jq "$top/r.json" 'sorted(r["totals"].keys())')" \
	"['bounced', 'bytes', 'deferred', 'delay_histogram', 'delay_p50_ms', 'delay_p90_ms', 'delay_p99_ms', 'expired', 'received', 'recipients', 'sent']"
tap_is "json: the documented members of a peer" \
	"$(jq "$top/r.json" 'sorted(r["peers"][0].keys())')" \
	"['bounced', 'connection_failures', 'connections', 'deferred', 'delay_histogram', 'delay_p50_ms', 'delay_p90_ms', 'delay_p99_ms', 'expired', 'handshake_failures', 'peer', 'reuse_ratio', 'reused', 'sent', 'tls_full', 'tls_resumed', 'tls_resumption_ratio', 'transactions']"
tap_is "json: every documented top-level member is there" \
	"$(jq "$top/r.json" 'sorted(r.keys())')" \
	"['delay_bounds_ms', 'domains', 'domains_exact', 'from', 'from_iso', 'generated', 'generated_iso', 'hosts', 'hosts_more', 'hourly', 'nodes', 'peers', 'queue', 'reasons', 'senders', 'senders_exact', 'series', 'sizes', 'to', 'to_iso', 'totals', 'version']"
tap_is "json hosts: this node's name" "$(jq "$top/r.json" 'r["hosts"]')" "['ternd.test']"
tap_is "json senders: app@ with 10 messages, and the 2 DSNs of the null sender" \
	"$(jq "$top/r.json" '[(s["sender"], s["messages"], s["recipients"], s["bytes"] > 0) for s in r["senders"]]')" \
	"[('app@senders.test', 10, 10, True), ('<>', 2, 2, True)]"
tap_is "json sizes: 12 messages, their bytes the total, the largest at most 16 KiB" \
	"$(jq "$top/r.json" '(sum(r["sizes"]["messages"]), sum(r["sizes"]["bytes"]) == r["totals"]["bytes"], 0 < r["sizes"]["max_bytes"] <= 16384)')" \
	"(12, True, True)"
tap_is "json series: 15-minute slots for a day, every recipient in them" \
	"$(jq "$top/r.json" '(r["series"]["step"], sum(p["sent"] for p in r["series"]["points"]), sum(p["received"] for p in r["series"]["points"]))')" \
	"(900, 7, 12)"
tap_is "json: no milter journal, no milter member" "$(jq "$top/r.json" '"milter" in r')" False

# --- text: the same numbers, aligned; --quiet on an empty window -------------------
rpt >"$top/r.txt"
tap_is "text: grand totals, one right-aligned number per line" \
	"$(sed -n '/^Grand Totals$/,/^$/p' "$top/r.txt" | grep -E '^ {8}[0-9] {3}(received|sent|deferred|bounced|expired)$|^ {7}12 {3}received$' | tr -s ' ' | tr '\n' ',')" \
	" 12 received, 7 sent, 1 deferred, 2 bounced, 0 expired,"
tap_is "text: per-peer rows, columns aligned under their headers" \
	"$(python3 - "$top/r.txt" <<-'PYEOF'
		import sys
		lines = open(sys.argv[1]).read().split("\n")
		i = lines.index("Relay Peers") + 2
		head = lines[i]
		ends = [head.index(c) + len(c) for c in ("sent", "deferred", "bounced")]
		rows = {}
		for line in lines[i + 1:]:
		    if not line:
		        break
		    # every number ends where its header ends (right-aligned)
		    rows[line.split()[0]] = [line[e - 3:e].strip() for e in ends]
		print(" ".join("%s=%s" % (k, "/".join(v)) for k, v in sorted(rows.items())))
	PYEOF
	)" "hard=0/0/2 ok=7/0/0 soft=0/1/0"
tap_like "text: the top domain row" "$(grep -E '^ok\.test ' "$top/r.txt")" '^ok\.test +7 +7 +0 +0 +0$'
tap_is "text: the host line under the first" "$(sed -n 2p "$top/r.txt")" "host: ternd.test"
tap_like "text: the top sender row" "$(sed -n '/^Top Senders$/,/^$/p' "$top/r.txt" | grep '^app@')" \
	'^app@senders\.test +10 +10 +[0-9]+$'
tap_like "text: message sizes, 12 in buckets" \
	"$(sed -n '/^Message Sizes (octets)$/,/^$/p' "$top/r.txt" | awk '/^[0-9]+K?-/ { n += $2 } END { print n }')" '^12$'
tap_is "text: no milter journal, no milter section" "$(grep -c '^Milter Verdicts' "$top/r.txt")" 0
rpt --quiet --from 2000-01-01 --to 2000-01-02T00:00 >"$top/quiet.txt" 2>&1
tap_is "--quiet with --from/--to on a window without traffic: exit 0" "$?" 0
tap_is "--quiet with --from/--to on a window without traffic: prints nothing" "$(wc -c <"$top/quiet.txt")" 0
rpt --quiet --from "@$start" --to "@$end" >"$top/quiet2.txt"
tap_like "--quiet on the window of the run still reports it" "$(grep -E 'sent$' "$top/quiet2.txt")" '^ +7 +sent$'

# --- html: well-formed, two SVG charts, self-contained -----------------------------
rpt --format html --output "$top/r.html"
tap_check "html: xmllint --html finds no error" xmllint --html --noout "$top/r.html"
tap_check "html: also well-formed XML" xmllint --noout "$top/r.html"
tap_is "html: two inline <svg> charts" "$(grep -o '<svg ' "$top/r.html" | wc -l)" 2
tap_is "html: no scripts, style sheets, images or frames" \
	"$(grep -ciE '<script|<link|<img|<iframe|<object|<embed|src=|url\(|@import' "$top/r.html")" 0
tap_is "html: no URL but the SVG namespace" \
	"$(grep -oiE '[a-z]+://[^\"]*' "$top/r.html" | sort -u)" "http://www.w3.org/2000/svg"
tap_is "html: the stacked volume chart's sent bars add up to 7" \
	"$(grep -oE '<title>[0-9]+ sent</title>' "$top/r.html" | awk -F'[<> ]' '{ n += $3 } END { print n }')" 7
tap_like "html: the host name in the title" "$(grep -o '<title>tern report: [^<]*' "$top/r.html")" \
	"^<title>tern report: ternd.test, "
tap_is "html: the charts scale to the page (viewBox, width 100%)" \
	"$(grep -c '<svg [^>]*width="100%" viewBox="0 0 960 320"' "$top/r.html")" 2
tap_is "html: y ticks on both charts (at least 4 each)" \
	"$(grep -c 'text-anchor="end">[0-9.]*</text>' "$top/r.html" | awk '{ print ($1 >= 8) }')" 1
tap_is "html: senders and sizes tables" \
	"$(grep -cE '<h2>(Top senders|Message sizes \(octets\))</h2>' "$top/r.html")" 2

# layout WIDTH NAME - chromium's verdict on page NAME.html at WIDTH px, and a
# screenshot
layout() {
	local profile
	profile=$(mktemp -d "$top/chromium.XXXXXX")
	awk -v js="$srcdir/tests/integration/report_layout.js" \
		'$0 == "</body>" { print "<script>"; while ((getline l < js) > 0) print l; print "</script>" } { print }' \
		"$top/$2.html" >"$top/$2.check.html"
	chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$profile" --window-size="$1,1000" --virtual-time-budget=3000 \
		--dump-dom "file://$top/$2.check.html" 2>>"$top/chromium.log" |
		sed -n 's|.*<title>\(LAYOUT-[^<]*\)</title>.*|\1|p' | head -1
	chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$profile" --window-size="$1,1400" --screenshot="$top/$2.$1.png" \
		"file://$top/$2.html" >>"$top/chromium.log" 2>&1
}
# A window that starts 20 minutes before a midnight (UTC): its first x tick
# label sits just right of the y axis, next to the y label "0" (it overlapped
# it at 1600 px until the x labels moved 4 units down).
edge=$(( ($(date +%s) / 86400) * 86400 - 1200 ))
rpt --format html --utc --from "@$edge" --to "@$((edge + 86400))" --output "$top/edge.html"
# A window before the run: every table is empty
rpt --format html --utc --from "@$((start - 2 * 86400))" --to "@$((start - 86400))" --output "$top/empty.html"
tap_is "html of an empty window: each empty table says so" \
	"$(grep -c '<td [^>]*colspan="[0-9]*"[^>]*>none in this window</td>' "$top/empty.html")" 4
if command -v chromium >/dev/null; then
	for w in 800 1600; do
		tap_like "html at $w px, an empty window: each table has a row, headers aligned as cells" \
			"$(layout "$w" empty)" '^LAYOUT-OK [0-9]+$'
		tap_like "html at $w px in Chromium: charts fill the width, no text outside its chart" \
			"$(layout "$w" r)" '^LAYOUT-OK [0-9]+$'
		tap_like "html at $w px, a window starting 20 min before a tick: no label overlaps" \
			"$(layout "$w" edge)" '^LAYOUT-OK [0-9]+$'
	done
else
	for w in 800 1600; do
		tap_skip "html at $w px, an empty window" "chromium not installed"
		tap_skip "html at $w px in Chromium" "chromium not installed"
		tap_skip "html at $w px, a window starting 20 min before a tick" "chromium not installed"
	done
fi

# --- csv: one table per --table -------------------------------------------------------
# csvrows TABLE - "header|rows" of one CSV table
csvrows() {
	rpt --format csv --table "$1" >"$top/$1.csv" || return
	printf '%s|%s' "$(head -1 "$top/$1.csv" | tr -d '\r')" "$(($(wc -l <"$top/$1.csv") - 1))"
}
tap_is "csv totals: header and one row" "$(csvrows totals)" \
	"from,to,received,recipients,bytes,sent,deferred,bounced,expired,delay_p50_ms,delay_p90_ms,delay_p99_ms|1"
tap_is "csv totals: the counts" "$(tail -1 "$top/totals.csv" | cut -d, -f3,4,6-9)" "12,12,7,1,2,0"
tap_is "csv hourly: one row per hour of the 24 h window (25 when it starts mid-hour)" \
	"$(csvrows hourly | cut -d'|' -f2)" "$((10#$(date +%M%S) == 0 ? 24 : 25))"
tap_is "csv peers: header and three peers" "$(csvrows peers)" \
	"peer,sent,deferred,bounced,expired,transactions,reused,connections,tls_full,tls_resumed,connection_failures,handshake_failures,reuse_ratio,tls_resumption_ratio,delay_p50_ms,delay_p90_ms,delay_p99_ms|3"
tap_is "csv domains: header and three domains" "$(csvrows domains)" \
	"domain,total,sent,deferred,bounced,expired,error|3"
tap_is "csv domains --top 1: one row" \
	"$(rpt --format csv --table domains --top 1 | tr -d '\r' | tail -n +2)" "ok.test,7,7,0,0,0,0"
tap_is "csv reasons: header and two codes" "$(csvrows reasons)" "status,dsn,count,example|2"
tap_is "csv senders: header and two senders" "$(csvrows senders)" "sender,messages,recipients,bytes,error|2"
tap_is "csv sizes: header and every bucket" "$(csvrows sizes)" "size,max_octets,messages,bytes|11"
tap_is "csv milter: only the header without a journal" "$(csvrows milter)" "verdict,check,messages|0"
tap_is "--since with --from/--to is a usage error" \
	"$(rpt --since 1h --from 2000-01-01 --to 2000-01-02 >/dev/null 2>&1; echo $?)" 2
tap_is "csv: an unknown table is a usage error" "$(rpt --format csv --table nope >/dev/null 2>&1; echo $?)" 2
tap_is "csv: a piece of a table's name is a usage error" "$(rpt --format csv --table tals >/dev/null 2>&1; echo $?)" 2

# --- merge: the same report twice doubles the counts ----------------------------------
"$report" --merge "$top/r.json" "$top/r.json" --format json >"$top/m.json"
tap_is "--merge exits 0" "$?" 0
tap_is "--merge: totals doubled, two nodes" \
	"$(jq "$top/m.json" '" ".join(str(x) for x in [r["nodes"]] + [r["totals"][k] for k in ("received","sent","deferred","bounced","expired","bytes")])')" \
	"$(jq "$top/r.json" '" ".join(str(x) for x in [2] + [2 * r["totals"][k] for k in ("received","sent","deferred","bounced","expired","bytes")])')"
tap_is "--merge: per-peer counts and histograms doubled" \
	"$(jq "$top/m.json" '[(p["peer"], p["sent"], p["bounced"], sum(p["delay_histogram"])) for p in r["peers"]]')" \
	"[('hard', 0, 4, 0), ('ok', 14, 0, 14), ('soft', 0, 0, 0)]"
tap_is "--merge: percentiles come from the merged buckets (same shape, same p90)" \
	"$(jq "$top/m.json" 'r["totals"]["delay_p90_ms"]')" "$(jq "$top/r.json" 'r["totals"]["delay_p90_ms"]')"
tap_is "--merge: reasons and queue doubled" \
	"$(jq "$top/m.json" '(sum(x["count"] for x in r["reasons"]), r["queue"]["total"])')" "(6, 6)"
"$report" --merge "$top/m.json" --format text >"$top/m.txt"
tap_like "--merge --format text: says how many nodes" "$(head -1 "$top/m.txt")" ', 2 nodes$'
tap_is "--merge: senders and sizes doubled, the host named once" \
	"$(jq "$top/m.json" '(r["senders"][0]["messages"], sum(r["sizes"]["messages"]), r["hosts"])')" \
	"(20, 24, ['ternd.test'])"
echo '{"version": 1, "totals": []}' >"$top/bad.json"
tap_is "--merge refuses a file that is not a report (exit 1)" \
	"$("$report" --merge "$top/r.json" "$top/bad.json" >/dev/null 2>&1; echo $?)" 1

# --- prom: a node_exporter textfile written by rename ---------------------------------
mkdir -p "$top/textfile"
rpt --format prom --output "$top/textfile/tern.prom"
tap_is "prom: exit 0" "$?" 0
tap_check "prom: promtool check metrics" sh -c "promtool check metrics <'$top/textfile/tern.prom'"
tap_is "prom: only the target file in the directory (the temp file was renamed)" \
	"$(ls -A "$top/textfile")" "tern.prom"
tap_like "prom: the sent gauge" "$(grep '^tern_report_deliveries{status="sent"}' "$top/textfile/tern.prom")" ' 7$'
ino=$(stat -c %i "$top/textfile/tern.prom")
strace_ok=0
if command -v strace >/dev/null; then
	# LeakSanitizer cannot run under ptrace: off for this run of a sanitizer build
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -e trace=rename,renameat,renameat2,fsync -o "$top/strace.txt" \
		"$report" -c "$TERND_CONF" --format prom --output "$top/textfile/tern.prom" \
		&& grep -qE 'fsync\(' "$top/strace.txt" && grep -qE 'rename(at2?)?\(.*tern-report\..*tern\.prom' "$top/strace.txt" && strace_ok=1
else
	"$report" -c "$TERND_CONF" --format prom --output "$top/textfile/tern.prom"
	[ "$(stat -c %i "$top/textfile/tern.prom")" != "$ino" ] && strace_ok=1
fi
tap_is "prom: a refresh is fsynced and renamed over the old file" "$strace_ok" 1
tap_is "prom: still only the target file" "$(ls -A "$top/textfile")" "tern.prom"

# --- the alerting rules ---------------------------------------------------------------
tap_check "promtool check rules contrib/prometheus/tern.rules.yml" \
	promtool check rules "$srcdir/contrib/prometheus/tern.rules.yml"

ternd_stop
tap_is "ternd, read all along by tern-report, stops cleanly" "$?" 0
tap_done
