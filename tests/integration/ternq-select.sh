#!/bin/bash
# ternq-select.sh - queue commands act on exactly what the admin names
# (ternq(1), issue 15 item 1):
#   1. hold, release, delete and retry with ALL take list's selectors
#      (--state, --peer, --older, --sender, --rcpt, --domain), act on
#      exactly the set list shows with them, and count only what changed;
#      a selector that matches nothing changes nothing
#   2. an option a command does not take is a usage error (exit 2)
#   3. "-" reads queue ids from standard input; an unknown one is
#      reported, the rest done, exit 1
#   4. a removal is logged with its sender, recipients and the uid; retry
#      leaves held mail held
#   5. the same selection when ternd is stopped (ternq writes itself)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v swaks >/dev/null || tap_skip_all "swaks not installed"

top=$(tap_tmpdir)
export TERND_PEERS="[peer a]"$'\n'"[peer b]"$'\n'"[routes]"$'\n'"b.example = b"$'\n'"* = a"
ternd_setup "$top/t" || exit 1
unset TERND_PEERS

# send FROM TO... - one message; prints its queue id
send() {
	local from=$1 to
	shift
	to=$(IFS=,; echo "$*")
	swaks --server 127.0.0.1 --port "$TERND_PORT" --from "$from" --to "$to" 2>&1 |
		sed -n 's/.*Ok: queued as \([0-9A-Z]*\).*/\1/p'
	ternd_sync
}
m1=$(send s1@x.org u1@a.example)
m2=$(send s2@x.org u2@b.example)
m3=$(send s1@x.org u3@a.example u4@b.example)
m4=$(send "<>" u5@c.example)
tap_is "four messages queued" "$(ternq_ list --json | wc -l)" 4

# ids ARGS... - the queue ids ternq list shows with ARGS, sorted
ids() { ternq_ list --json "$@" | sed 's/.*"queue_id": *"\([0-9A-Z]*\)".*/\1/' | sort | tr '\n' ' '; }
# sorted IDS... - the ids, sorted, as ids prints them
sorted() { printf '%s\n' "$@" | sort | tr '\n' ' '; }
# run ARGS... - ternq ARGS; prints "EXIT:last line of stderr"
run() {
	local rc
	ternq_ "$@" >/dev/null 2>"$top/err"
	rc=$?
	echo "$rc:$(tail -1 "$top/err")"
}

# --- 1. selectors, one at a time and combined -------------------------------------------
tap_is "delete ALL --peer nosuchpeer --older 7d: nothing" "$(run delete ALL --peer nosuchpeer --older 7d)" \
	"0:ternq: delete: 0 messages"
tap_is "... and the queue still has all four" "$(ids)" "$(sorted "$m1" "$m2" "$m3" "$m4")"
tap_is "hold ALL --peer nosuchpeer: nothing" "$(run hold ALL --peer nosuchpeer)" "0:ternq: hold: 0 messages"
tap_is "... nothing is held" "$(ids --state hold)" ""
tap_is "list --peer b" "$(ids --peer b)" "$(sorted "$m2" "$m3")"
tap_is "hold ALL --peer b: those two" "$(run hold ALL --peer b)" "0:ternq: hold: 2 messages"
tap_is "... exactly they are held" "$(ids --state hold)" "$(sorted "$m2" "$m3")"
tap_is "release ALL: the two held, the others unchanged" "$(run release ALL)" \
	"0:ternq: release: 2 messages (2 unchanged)"
tap_is "... nothing is held" "$(ids --state hold)" ""
tap_is "list --sender s1@x.org" "$(ids --sender s1@x.org)" "$(sorted "$m1" "$m3")"
tap_is "hold ALL --sender S1@X.ORG (case does not matter)" "$(run hold ALL --sender S1@X.ORG)" \
	"0:ternq: hold: 2 messages"
tap_is "... exactly they" "$(ids --state hold)" "$(sorted "$m1" "$m3")"
tap_is "hold ALL --sender '<>': the null sender's" "$(run hold ALL --sender '<>')" "0:ternq: hold: 1 message"
tap_is "... held now: three" "$(ids --state hold)" "$(sorted "$m1" "$m3" "$m4")"
tap_is "list --state hold --domain a.example" "$(ids --state hold --domain a.example)" "$(sorted "$m1" "$m3")"
tap_is "release ALL --state hold --domain a.example" "$(run release ALL --state hold --domain a.example)" \
	"0:ternq: release: 2 messages"
tap_is "... the null sender's stays held" "$(ids --state hold)" "$m4 "
tap_is "hold ALL --rcpt U4@b.example" "$(run hold ALL --rcpt U4@b.example)" "0:ternq: hold: 1 message"
tap_is "... that one" "$(ids --state hold)" "$(sorted "$m3" "$m4")"
tap_is "list --sender s1@x.org --domain b.example (combined)" "$(ids --sender s1@x.org --domain b.example)" "$m3 "
tap_is "release ALL --sender s1@x.org --domain b.example" \
	"$(run release ALL --sender s1@x.org --domain b.example)" "0:ternq: release: 1 message"
tap_is "release ALL --rcpt nobody@nowhere: nothing" "$(run release ALL --rcpt nobody@nowhere)" \
	"0:ternq: release: 0 messages"
tap_is "... the null sender's is still held" "$(ids --state hold)" "$m4 "
tap_is "list --older 1h: nothing is that old" "$(ids --older 1h)" ""
tap_is "retry ALL --older 1h: nothing" "$(run retry ALL --older 1h)" "0:ternq: retry: 0 messages"

# --- 2. options a command does not take --------------------------------------------------
tap_is "hold QID --peer a (a selector without ALL): usage error" "$(run hold "$m1" --peer a | cut -d: -f1)" 2
tap_is "hold ALL --by peer: usage error" "$(run hold ALL --by peer)" "2:ternq: hold does not take --by"
tap_is "cat QID --json: usage error" "$(run cat "$m1" --json)" "2:ternq: cat does not take --json"
tap_is "stats --state hold: usage error" "$(run stats --state hold)" "2:ternq: stats does not take --state"
tap_is "show QID --older 1d: usage error" "$(run show "$m1" --older 1d)" "2:ternq: show does not take --older"
tap_is "list --timeout 5s: usage error" "$(run list --timeout 5s)" "2:ternq: list does not take --timeout"
tap_is "... and none of them changed anything" "$(ids --state hold)" "$m4 "

# --- 3. queue ids from standard input -----------------------------------------------------
printf '%s\nZZZZZZZZZZZZZ\n%s\n' "$m1" "$m2" | ternq_ hold - >/dev/null 2>"$top/err"
tap_is "hold - with an unknown id: exit 1" "$?" 1
tap_like "... the unknown one is named" "$(cat "$top/err")" "ZZZZZZZZZZZZZ: not in the queue"
tap_is "... the others are held" "$(ids --state hold)" "$(sorted "$m1" "$m2" "$m4")"
tap_is "... and counted" "$(tail -1 "$top/err")" "ternq: hold: 2 messages"

# --- 4. log lines; retry leaves held mail alone -------------------------------------------
tap_is "retry of a held message changes nothing" "$(run retry "$m1")" "0:ternq: retry: 0 messages (1 unchanged)"
tap_is "... it stays held" "$(ternq_ show "$m1" | sed -n 's/^state: //p')" hold
tap_is "delete the null sender's" "$(run delete "$m4")" "0:ternq: delete: 1 message"
wait_until 5 grep -q "$m4: removed" "$TERND_LOG"
tap_like "... logged with sender, recipients and uid" "$(grep "$m4: removed" "$TERND_LOG")" \
	"$m4: removed by ternq \\(uid 0\\): from=<>, to=<u5@c\\.example>\$"
tap_is "one line per message changed: 2 released of 3 held" "$(run release ALL)" \
	"0:ternq: release: 2 messages (1 unchanged)"
tap_is "... logged once each" "$(grep -cE "($m1|$m2): released by ternq \\(uid 0\\)" "$TERND_LOG")" \
	"$(grep -cE "($m1|$m2): held by ternq" "$TERND_LOG")"

# --- 5. ternd stopped: ternq changes the queue itself, with the same selection ------------------
ternd_stop
tap_is "ternd stopped: delete ALL --peer b" "$(run delete ALL --peer b)" "0:ternq: delete: 2 messages"
tap_is "... leaves exactly the one for a" "$(ids)" "$m1 "
tap_done
