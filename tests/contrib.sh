#!/bin/bash
# contrib.sh - the Grafana dashboard in contrib/ is valid JSON, every query
# in it is valid PromQL (promtool parses it as a recording rule) scoped to
# the $instance variable, a panel repeats per peer, and every metric it
# uses is one the daemons document in their METRICS sections; the alerting
# rules pass promtool check rules and their unit tests (promtool test
# rules contrib/prometheus/tern.rules.test.yml). The example tern.conf
# names no sections "still to come", and the storage reserve's formula,
# with the per-transaction size src/ternd/storage.h has, is stated in
# ternd(8) alone: the example, tern.conf(5), ternq(1) and the README
# state no size per connection or transaction of their own.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"
top=$here/..
dash=$top/contrib/grafana/tern-dashboard.json
tmp=$(tap_tmpdir)

tap_check "tern-dashboard.json is JSON" python3 -m json.tool "$dash"
python3 - "$dash" "$tmp/rules.yml" "$tmp/metrics" <<-'EOF'
	import json, re, sys
	d = json.load(open(sys.argv[1]))
	exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
	with open(sys.argv[2], "w") as f:
	    f.write("groups:\n- name: dashboard\n  rules:\n")
	    for i, e in enumerate(exprs):
	        f.write("  - record: dashboard:expr%d\n    expr: %s\n" % (i, json.dumps(e)))
	names = set()
	for e in exprs:
	    for m in re.findall(r"\btern_[a-z_]+", e):
	        names.add(re.sub(r"_(bucket|sum|count)$", "", m))
	open(sys.argv[3], "w").write("\n".join(sorted(names)) + "\n")
EOF
if command -v promtool >/dev/null; then
	tap_check "promtool parses every dashboard query" promtool check rules "$tmp/rules.yml"
	tap_check "promtool check rules tern.rules.yml" promtool check rules "$top/contrib/prometheus/tern.rules.yml"
	tap_check "promtool test rules: TernDown, TernBreakerOpen across half-open scrapes" \
		sh -c "cd '$top/contrib/prometheus' && promtool test rules tern.rules.test.yml"
else
	tap_skip "promtool parses every dashboard query" "promtool not installed"
	tap_skip "promtool check rules tern.rules.yml" "promtool not installed"
	tap_skip "promtool test rules" "promtool not installed"
fi
grep -ho '^\.It Li tern_[a-z_]*' "$top/man/ternd.8" "$top/man/tern-milter.8" | awk '{ print $3 }' |
	sort -u >"$tmp/documented"
tap_is "the dashboard uses only documented metrics" "$(comm -23 "$tmp/metrics" "$tmp/documented")" ""
tap_is "an instance variable (a fleet seen per node)" \
	"$(python3 -c 'import json, sys; print([v["name"] for v in json.load(open(sys.argv[1]))["templating"]["list"]])' "$dash")" \
	"['datasource', 'instance', 'peer']"
tap_is "every selector is scoped to \$instance" "$(python3 - "$dash" <<-'EOF'
	import json, re, sys
	d = json.load(open(sys.argv[1]))
	for p in d["panels"]:
	    for t in p["targets"]:
	        for m in re.finditer(r"\b((?:tern|process)_[a-z_]+)(\{[^}]*\})?", t["expr"]):
	            if not m.group(2) or 'instance=~"$instance"' not in m.group(2):
	                print(p["title"], m.group(0))
EOF
)" ""
tap_is "a panel repeated per peer" \
	"$(python3 -c 'import json, sys; print(sum(p.get("repeat") == "peer" for p in json.load(open(sys.argv[1]))["panels"]))' "$dash")" 1
tap_like "the dashboard covers ternd and tern-milter" "$(tr '\n' ' ' <"$tmp/metrics")" \
	'tern_config_last_reload_successful .*tern_deliveries_total .*tern_delivery_codes_total .*tern_milter_journal_dropped_total .*tern_milter_messages_total .*tern_queue_messages .*tern_queue_recipients '
tap_is "the example tern.conf has no stale \"still to come\" sections" \
	"$(grep -c 'still to come' "$top/contrib/tern.conf.example")" 0
per=$(sed -n 's/^#define STORAGE_OUTCOME_RESERVE ((uint64_t)\([0-9]*\) \* 1024)$/\1/p' "$top/src/ternd/storage.h")
tap_is "ternd(8) states the reserve's formula with storage.h's $per KB" \
	"$(grep -c "^queue_minfree + $per KB x (transactions that may be in flight now)$" "$top/man/ternd.8")" 1
tap_is "... and nothing else states a reserve per connection or transaction" \
	"$(cat "$top/contrib/tern.conf.example" "$top/man/tern.conf.5" "$top/man/ternq.1" "$top/README.md" \
		| tr '\n' ' ' | grep -oiE '[0-9]+ ?KB (per|for each|x) [a-z ]{0,20}(connection|transaction)' )" ""
tap_done
