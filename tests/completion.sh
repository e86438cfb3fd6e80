#!/bin/bash
# completion.sh - contrib/bash-completion/tern offers, for each of the four
# programs, exactly the options its man page's SYNOPSIS names (so a new
# option without completion fails here), the fixed values of --state,
# --by, --format and --table (--table's those of tern-report(1)), ternq's
# commands, the peer names of the configuration file (-c FILE, or the
# default) after --peer and "peers reset", and file names where the
# argument is a file.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
top=$here/..
tmp=$(tap_tmpdir)
. "$top/contrib/bash-completion/tern"

# comp LINE - the completions bash offers at the end of LINE, sorted, one line
comp() {
	local line=$1 spec
	COMP_LINE=$line
	COMP_POINT=${#line}
	read -ra COMP_WORDS <<<"$line"
	[[ $line == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	spec=$(complete -p "${COMP_WORDS[0]}")
	spec=${spec#*-F }
	"${spec%% *}" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
	[ ${#COMPREPLY[@]} -eq 0 ] || printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}

# synopsis PAGE - the options the SYNOPSIS of PAGE names, sorted, one line
synopsis() {
	sed -n '/^\.Sh SYNOPSIS/,/^\.Sh /p' "$1" | awk '
		{ on = 0; sub(/^\./, "", $1)
		  for (i = 1; i <= NF; i++) {
			if ($i == "Fl") { on = 1; continue }
			if ($i ~ /^[A-Z][a-z]$/ || $i == "|") { if ($i != "|") on = 0; continue }
			if (!on) continue
			if ($i ~ /^\\-/) { print "-" substr($i, 2); continue }
			for (j = 1; j <= length($i); j++) print "-" substr($i, j, 1)
		  } }' | sort -u | tr '\n' ' '
}

# offered PROGRAM [COMMANDS...] - every option the completion offers
# PROGRAM (after each of COMMANDS too), sorted, one line
offered() {
	local p=$1 c
	shift
	{
		comp "$p -" | tr ' ' '\n'
		for c in "$@"; do comp "$p $c -" | tr ' ' '\n'; done
	} | grep '^-.' | sort -u | tr '\n' ' '
}

tap_is "ternd: the options of ternd(8)" "$(offered ternd)" "$(synopsis "$top/man/ternd.8")"
tap_is "tern-milter: the options of tern-milter(8)" "$(offered tern-milter)" \
	"$(synopsis "$top/man/tern-milter.8")"
tap_is "tern-report: the options of tern-report(1)" "$(offered tern-report)" \
	"$(synopsis "$top/man/tern-report.1")"
tap_is "ternq: the options of ternq(1), before and after each command" \
	"$(offered ternq list show cat hold requeue expire peers stats trace)" "$(synopsis "$top/man/ternq.1")"
tap_is "ternq: the commands" "$(comp "ternq ")" \
	"cat delete expire hold list peers release requeue retry show stats trace "
tap_is "ternq -c FILE: the commands after it" "$(comp "ternq -c /etc/tern/tern.conf st")" "stats "
tap_is "ternq list --state" "$(comp "ternq list --state ")" "deferred hold queued "
tap_is "ternq stats --by" "$(comp "ternq stats --by ")" "domain peer "
tap_is "ternq hold: ALL, -, --timeout and the selectors that go with ALL" "$(comp "ternq hold ")" \
	"- --domain --older --peer --rcpt --sender --state --timeout ALL "
tap_is "ternq expire: as hold" "$(comp "ternq expire ")" \
	"- --domain --older --peer --rcpt --sender --state --timeout ALL "
tap_is "ternq peers: reset and its options" "$(comp "ternq peers ")" "--json --timeout --utc reset "
printf '%s\n' "[global]" "[peer smarthost]" "host = a" " [peer backup] " "[peer b2]" "[routes]" \
	"#[peer commented]" >"$tmp/peers.conf"
tap_is "ternq peers reset: the peer names of -c FILE" "$(comp "ternq -c $tmp/peers.conf peers reset ")" \
	"b2 backup smarthost "
tap_is "ternq list --peer: the peer names beginning with the word" \
	"$(comp "ternq -c $tmp/peers.conf list --peer b")" "b2 backup "
tap_is "ternq hold ALL --peer: as list" "$(comp "ternq -c $tmp/peers.conf hold ALL --peer s")" "smarthost "
tap_is "ternq peers reset: no file to read, no guess" "$(comp "ternq -c $tmp/none.conf peers reset ")" ""
tap_is "tern-report --format" "$(comp "tern-report --format ")" "csv html json prom text "
tap_is "tern-report --table: the tables of tern-report(1)" "$(comp "tern-report --table ")" \
	"$(sed -n '/^\.It Fl \\-table Ar name/,/^\.It /s/^\.Cm \([a-z]*\).*/\1/p' "$top/man/tern-report.1" \
		| sort | tr '\n' ' ')"
tap_is "tern-report --top: no guess" "$(comp "tern-report --top ")" ""
mkdir "$tmp/d" && : >"$tmp/d/a.conf" && : >"$tmp/d/b.json"
tap_is "ternd -c: file names" "$(comp "ternd -c $tmp/d/a")" "$tmp/d/a.conf "
tap_is "tern-milter -K: file names" "$(comp "tern-milter -K $tmp/d/")" "$tmp/d/a.conf $tmp/d/b.json "
tap_is "tern-report --merge: file names after it" "$(comp "tern-report --merge $tmp/d/b")" \
	"$tmp/d/b.json "
tap_is "tern-report --output: file names" "$(comp "tern-report --output $tmp/d/b")" "$tmp/d/b.json "
tap_done
