#!/bin/bash
# ternd-crash.sh - kill -9 ternd while clients send; nothing acknowledged
# may be lost (the durability rule).
#
# smtp-blast sends with several pipelining sessions and records the queue
# id of every message ternd acknowledged with 250, the moment it arrives.
# ternd is killed with SIGKILL at random moments and restarted, ROUNDS
# times (default 5 in make check; tests/stress runs more). Afterwards every
# acknowledged id must be in the queue with its body intact (ternq cat
# checks the digest), and no spool file may be orphaned.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
blast=${top_builddir:-$here/../..}/bench/smtp-blast
rounds=${ROUNDS:-5}

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"

top=$(tap_tmpdir)
ternd_setup "$top/t" "large_message_threshold = 16KB" || exit 1

# Messages of 10 KB go to segments, 20 KB ones to files of their own.
"$blast" -c 4 -n 100000 -s 10240 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast1.log" 2>&1 &
b1=$!
"$blast" -B -c 2 -n 100000 -s 20480 -o "$top/acked" "127.0.0.1:$TERND_PORT" >"$top/blast2.log" 2>&1 &
b2=$!
tap_bg_register "$b1" "$b2"

for round in $(seq "$rounds"); do
	sleep "0.$((RANDOM % 9 + 1))"
	ternd_kill9
	ternd_start || break
done
kill -TERM "$b1" "$b2" 2>/dev/null
wait "$b1" "$b2" 2>/dev/null
ternd_stop

acked=$(sort -u "$top/acked" | grep -c '^[0-9A-Z]\{13\}$')
tap_like "clients got acknowledgements across $rounds kills ($acked)" "$acked" '^[1-9][0-9]*$'
ternq_ list --json | python3 -c 'import json,sys; [print(json.loads(l)["queue_id"]) for l in sys.stdin]' \
	| sort -u >"$top/queued"
missing=$(sort -u "$top/acked" | comm -23 - "$top/queued" | wc -l)
tap_is "every acknowledged message is in the queue after $rounds crashes" "$missing" 0
bad=0
while read -r qid; do
	ternq_ cat "$qid" >/dev/null 2>"$top/cat.err" || bad=$((bad + 1))
done < <(sort -u "$top/acked" | shuf -n 200 --random-source=/dev/zero)
tap_is "their bodies are intact (digest checked, sample of 200)" "$bad" 0

# No orphans: every segment file and own file belongs to a queued message.
ternd_start
ternd_stop
ternq_ list --json | python3 -c 'import json,sys; [print(json.loads(l)["spool_file"]) for l in sys.stdin]' \
	| sort -u >"$top/files.want"
(cd "$TERND_DIR/spool" && ls seg/* own/* 2>/dev/null | sort) >"$top/files.have"
tap_is "spool files are exactly those of queued messages (no orphans)" \
	"$(diff "$top/files.have" "$top/files.want" && echo same)" same
tap_is "recovery found no damaged body" "$(grep -c 'recovery: checked .*, [1-9][0-9]* damaged' "$TERND_LOG")" 0
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
