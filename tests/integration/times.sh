#!/bin/bash
# times.sh - times an admin can line up (issue 15 item 6): the same
# message's arrival in ternq list, show and trace and in tern-report's text,
# run under two zones (America/New_York, -0500/-0400; Asia/Kolkata, +0530),
# is local time with the offset, exactly what date(1) makes of the JSON's
# epoch; --utc gives +0000; the JSON keeps the epoch and adds ISO 8601;
# tern-report --since today|yesterday|-24h|DATE selects the right window.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v swaks >/dev/null || tap_skip_all "swaks not installed"
command -v jq >/dev/null || tap_skip_all "jq not installed"
for z in America/New_York Asia/Kolkata; do
	[ -e "/usr/share/zoneinfo/$z" ] || tap_skip_all "tzdata: no $z"
done
report=${top_builddir:-$here/../..}/src/report/tern-report

top=$(tap_tmpdir)
dead=$(free_port)	# nothing listens: the message is deferred and stays
export TERND_PEERS="[peer dead]"$'\n'"host = [127.0.0.1]"$'\n'"port = $dead"$'\n'"tls = none"$'\n'"min_idle = 0"$'\n'"[routes]"$'\n'"* = dead"
ternd_setup "$top/t" "min_backoff = 1h" || exit 1
unset TERND_PEERS

# not across a midnight of either zone: "today" must be one day throughout
for z in America/New_York Asia/Kolkata; do
	left=$(( $(TZ=$z date -d tomorrow\ 00:00 +%s) - $(date +%s) ))
	[ "$left" -lt 120 ] && sleep $((left + 2))
done

qid=$(swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@x.org --to u@park.example 2>&1 |
	sed -n 's/.*Ok: queued as \([0-9A-Z]*\).*/\1/p')
tap_like "ternd queued the message" "$qid" '^[0-9A-Z]{13}$'
_deferred() { [ "$(ternq_ show "$qid" | sed -n 's/^state: //p')" = deferred ]; }
tap_check "... and deferred it (its peer is down)" wait_until 20 _deferred

# re TEXT - TEXT as an extended regular expression (a '+' of an offset)
re() { sed 's/[.+]/\\&/g' <<<"$1"; }
# human ISO - "2026-12-01T08:49:33.647-05:00" as "2026-12-01 08:49:33.647 -0500"
human() { sed -E 's/T/ /; s/([-+][0-9]{2}):([0-9]{2})$/ \1\2/' <<<"$1"; }

epochs=
for z in America/New_York Asia/Kolkata; do
	export TZ=$z
	ternq_ show "$qid" --json >"$top/show.json"
	epoch=$(jq -r .arrival_time "$top/show.json")
	iso=$(jq -r .arrival_time_iso "$top/show.json")
	epochs="$epochs$epoch "
	want=$(date -d "@$epoch" '+%Y-%m-%d %H:%M:%S %z')	# date(1)'s view, to the second
	off=$(date -d "@$epoch" +%z)
	tap_like "$z: show --json: arrival_time_iso is the epoch in ISO 8601, local, with the offset" \
		"$iso" "^$(date -d "@$epoch" +%Y-%m-%dT%H:%M:%S)\\.[0-9]{3}$(re "$(date -d "@$epoch" +%:z)")\$"
	at=$(human "$iso")
	tap_is "$z: ... which date(1) reads as the same time" "${at%.* *} ${at##* }" "$want"
	tap_is "$z: show: arrival_time, local with the offset" \
		"$(ternq_ show "$qid" | sed -n 's/^arrival_time: //p')" "$at"
	tap_like "$z: show: the recipient's next attempt, local with the offset" \
		"$(ternq_ show "$qid" | grep '^recipient: ')" \
		"next_attempt=[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} [-+][0-9]{4}( |\$)"
	tap_is "$z: show --json: next_attempt_iso is next_attempt" \
		"$(python3 -c 'import json,sys,datetime; r=json.load(open(sys.argv[1]))["recipients"][0]; print(int(datetime.datetime.fromisoformat(r["next_attempt_iso"]).timestamp()) - r["next_attempt"])' "$top/show.json")" 0
	tap_is "$z: list: the arrival column, mailq's layout kept" \
		"$(ternq_ list | grep "^$qid")" "$(printf '%-13s  %8s %-29s  %s' "$qid" \
		"$(jq -r .message_size "$top/show.json")" "$at" a@x.org)"
	tap_is "$z: list: the recipient under the sender column" \
		"$(ternq_ list | grep -n 'u@park.example' | cut -d: -f2-)" "$(printf '%55su@park.example' '')"
	tap_is "$z: list: the header over the columns" "$(ternq_ list | head -1)" \
		"-Queue ID-     --Size-- ---------Arrival Time--------  -Sender/Recipient-------"
	tap_is "$z: list --json: the same epoch and ISO string" \
		"$(ternq_ list --json | jq -r 'select(.queue_id == "'"$qid"'") | "\(.arrival_time) \(.arrival_time_iso)"')" \
		"$epoch $iso"
	# trace: the acceptance (the history's own time), its text from its JSON
	ternq_ trace "$qid" --json >"$top/trace.json"
	tiso=$(jq -r '.messages[0].time_iso' "$top/trace.json")
	tsec=$(jq -r '.messages[0].time | floor' "$top/trace.json")
	tap_like "$z: trace --json: time_iso local with the offset" "$tiso" \
		"^$(date -d "@$tsec" +%Y-%m-%dT%H:%M:%S)\\.[0-9]{3}$(re "$(date -d "@$tsec" +%:z)")\$"
	tap_is "$z: trace: the acceptance line begins with that time" \
		"$(ternq_ trace "$qid" | grep " accepted  $qid:" | cut -c1-29)" "$(human "$tiso")"
	tap_like "$z: trace: the attempt line too" "$(ternq_ trace "$qid" | grep " attempt   $qid:")" \
		"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}\\.[0-9]{3} $(re "$off") attempt   $qid: to=<u@park\\.example>"
	tap_like "$z: trace: the final state under the event column" \
		"$(ternq_ trace "$qid" | grep " final ")" "^ {29} final     $qid: to=<u@park\\.example>, status=deferred\$"
	# tern-report: the hour the message arrived in, as the zone has it
	"$report" -c "$TERND_CONF" >"$top/r.txt"
	tap_like "$z: tern-report: the window, local with the offset" "$(head -1 "$top/r.txt")" \
		"^tern-report: [0-9-]{10} [0-9:]{8}\\.[0-9]{3} [-+][0-9]{4} to [0-9-]{10} [0-9:]{8}\\.[0-9]{3} $(re "$(date +%z)")\$"
	tap_like "$z: tern-report: the arrival's hour in the per-hour table" \
		"$(grep "^$(date -d "@$epoch" '+%Y-%m-%d %H:00 %z') " "$top/r.txt")" '^.{22} +1 +0 +[01] +0 +0 '
	"$report" -c "$TERND_CONF" --format json >"$top/r.json"
	tap_is "$z: tern-report --format json: from_iso is from, with the zone's offset" \
		"$(jq -r '(.from_iso | test("[-+][0-9]{2}:[0-9]{2}$")) and (.from_iso[0:19] == (.from | localtime | strftime("%Y-%m-%dT%H:%M:%S")))' "$top/r.json")" true
	tap_is "$z: tern-report --format json: the hour's hour_iso" \
		"$(jq -r '[.hourly[] | select(.received > 0) | .hour_iso[0:16]] | join(" ")' "$top/r.json")" \
		"$(date -d "@$epoch" '+%Y-%m-%dT%H:00')"
	# --since, in the zone
	since() { "$report" -c "$TERND_CONF" --since "$@" --format json | jq -r '"\(.totals.received) \(.from_iso[0:23]) \(.to_iso[0:23])"'; }
	today=$(date +%Y-%m-%d)
	tap_like "$z: --since today: from local midnight, the message in it" "$(since today)" \
		"^1 ${today}T00:00:00\\.000 "
	yday=$(date -d yesterday +%Y-%m-%d)
	tap_is "$z: --since yesterday: the whole day before, midnight to midnight, without it" \
		"$(since yesterday)" "0 ${yday}T00:00:00.000 ${today}T00:00:00.000"
	tap_is "$z: --since yesterday, text: the window's first line" \
		"$("$report" -c "$TERND_CONF" --since yesterday | head -1)" \
		"tern-report: $(date -d "$yday 00:00" '+%Y-%m-%d %H:%M:%S.000 %z') to $(date -d "$today 00:00" '+%Y-%m-%d %H:%M:%S.000 %z')"
	tap_like "$z: --since -24h: the last day, the message in it" "$(since -24h)" '^1 '
	tap_like "$z: --since DATE (today's): the message in it" "$(since "$today")" "^1 ${today}T00:00:00\\.000 "
	# UTC's date, not the zone's: east of Greenwich the zone may be a day
	# ahead, and its midnight UTC still to come
	utoday=$(date -u +%Y-%m-%d)
	tap_like "$z: --since DATE with an offset: that instant" "$(since "${utoday}T00:00:00+00:00")" \
		"^[01] $(date -d "${utoday}T00:00:00+00:00" +%Y-%m-%dT%H:%M:%S)\\.000 "
	tap_is "$z: --since tomorrow's DATE: not in the past, exit 2" \
		"$("$report" -c "$TERND_CONF" --since "$(date -d tomorrow +%F)" >/dev/null 2>&1; echo $?)" 2
	# --utc: +0000, the same epoch
	tap_is "$z: show --utc: UTC, +0000" "$(ternq_ show "$qid" --utc | sed -n 's/^arrival_time: //p' | cut -c1-19,24-)" \
		"$(date -u -d "@$epoch" '+%Y-%m-%d %H:%M:%S +0000')"
	tap_like "$z: list --utc: +0000" "$(ternq_ list --utc | grep "^$qid")" " [0-9:.]{12} \\+0000  a@x\\.org\$"
	tap_like "$z: trace --utc: +0000" "$(ternq_ trace "$qid" --utc | grep " accepted ")" '^[0-9-]{10} [0-9:.]{12} \+0000 accepted '
	tap_is "$z: show --json --utc: the epoch unchanged, the ISO string in UTC" \
		"$(ternq_ show "$qid" --json --utc | jq -r '"\(.arrival_time) \(.arrival_time_iso[19:])"')" "$epoch ${iso:19:4}+00:00"
	tap_like "$z: tern-report --utc: the window in UTC" "$("$report" -c "$TERND_CONF" --utc | head -1)" \
		'^tern-report: [0-9-]{10} [0-9:.]{12} \+0000 to [0-9-]{10} [0-9:.]{12} \+0000$'
	tap_is "$z: tern-report --since yesterday --utc: UTC's yesterday" \
		"$("$report" -c "$TERND_CONF" --since yesterday --utc --format json | jq -r '"\(.from_iso) \(.to_iso)"')" \
		"$(date -u -d yesterday +%F)T00:00:00.000+00:00 $(date -u +%F)T00:00:00.000+00:00"
	unset TZ
done
tap_is "the JSON's epoch is the same under both zones" "$(tr ' ' '\n' <<<"$epochs" | sort -u | grep -c .)" 1
tap_is "stats does not take --utc: usage error" "$(ternq_ stats --utc >/dev/null 2>&1; echo $?)" 2
tap_is "cat does not take --utc: it says so" "$(ternq_ cat "$qid" --utc 2>&1 >/dev/null)" "ternq: cat does not take --utc"
ternd_stop
tap_done
