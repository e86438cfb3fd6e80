#!/bin/bash
# ternd-slow-client.sh - clients that trickle their input cannot hold a
# session (slowloris). With command_timeout = 3s, data_timeout = 3s and
# min_data_rate = 100, side by side, over SMTP and LMTP:
#
#   1. a command line sent one octet a second, a DATA content and a BDAT
#      chunk sent one octet a second: each session gets exactly
#      "421 4.4.2 ternd.test Error: timeout exceeded" within 3 s plus a
#      margin of 2 s of its first slow octet, then the connection closes
#   2. DATA content at 50 octets a second (under min_data_rate): cut
#      once 3 s plus what its octets earned (50 t / 100 s) have passed,
#      at about 6 s
#   3. DATA content at 250 octets a second for 8 s (more than
#      data_timeout, over min_data_rate): queued, 250
#   4. each timeout is logged exactly once
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"

top=$(tap_tmpdir)
ternd_setup "$top/t" "command_timeout = 3s" "data_timeout = 3s" "min_data_rate = 100" || exit 1

smtp=127.0.0.1:$TERND_PORT
lmtp=unix:$TERND_LMTP
env='MAIL FROM:<slow@example.org>\r\nRCPT TO:<r@example.com>\r\n'
body=$(printf 'x%.0s' $(seq 2000))
line=$(printf 'y%.0s' $(seq 78))
fast="Subject: fast\\r\\n\\r\\n$(printf "$line\\\\r\\\\n%.0s" $(seq 25)).\\r\\n"
res=$(python3 "$here/../lib/slow_client.py" 12 \
	smtp-command "$smtp" 1 '' 'MAIL FROM:<never-ends@example.org>' \
	smtp-data "$smtp" 1 "EHLO c.test\\r\\n${env}DATA\\r\\n" "Subject: slow\\r\\n\\r\\n$body" \
	smtp-bdat "$smtp" 1 "EHLO c.test\\r\\n${env}BDAT 100 LAST\\r\\n" "$body" \
	lmtp-command "$lmtp" 1 '' 'LHLO never-ends.test' \
	lmtp-data "$lmtp" 1 "LHLO c.test\\r\\n${env}DATA\\r\\n" "Subject: slow\\r\\n\\r\\n$body" \
	lmtp-bdat "$lmtp" 1 "LHLO c.test\\r\\n${env}BDAT 100 LAST\\r\\n" "$body" \
	smtp-under-rate "$smtp" 50 "EHLO c.test\\r\\n${env}DATA\\r\\n" "Subject: slow\\r\\n\\r\\n$body" \
	smtp-over-rate "$smtp" 250 "EHLO c.test\\r\\n${env}DATA\\r\\n" "$fast")
tap_diag "$res"

# result NAME - the case's line without its name
result() {
	sed -n "s/^$1 //p" <<<"$res"
}
# within NAME LO HI - the case ended between LO and HI seconds
within() {
	local t
	t=$(result "$1" | awk '{ print $1 }')
	awk -v t="$t" -v lo="$2" -v hi="$3" 'BEGIN { exit !(t != "" && t >= lo && t <= hi) }'
}

cut='421 4.4.2 ternd.test Error: timeout exceeded | EOF'
for c in smtp-command smtp-data smtp-bdat lmtp-command lmtp-data lmtp-bdat; do
	tap_is "1: $c, one octet a second: 421 4.4.2, then the connection is closed" \
		"$(result "$c" | cut -d' ' -f2-)" "$cut"
	tap_check "1: $c: cut within command_timeout or data_timeout (3 s) plus 2 s" within "$c" 2.5 5
done
tap_is "2: DATA at 50 octets a second (min_data_rate 100): 421 4.4.2" \
	"$(result smtp-under-rate | cut -d' ' -f2-)" "$cut"
tap_check "2: ... cut at about 6 s (3 s + 50 t / 100 s)" within smtp-under-rate 5 7.5
tap_like "3: DATA at 250 octets a second for 8 s, longer than data_timeout: queued" \
	"$(result smtp-over-rate | cut -d' ' -f2-)" '^250 2\.0\.0 Ok: queued as [0-9A-Z]{13} \| open$'

tap_is "4: each of the 7 timeouts is logged once" \
	"$(grep -c ': timeout after ' "$TERND_LOG")" 7
tap_diag "$(grep ': timeout after ' "$TERND_LOG")"

ternd_stop_checked
tap_done
