#!/bin/bash
# interop-exim-client.sh - Exim (Debian 12's exim4-daemon-light, unpacked
# by tests/lib/foreign_mta.sh, run as nobody) as the client of ternd:
# Exim queues $m messages of 3 recipients for lmtp.test and $m for
# smtp.test, then one queue run delivers the first over LMTP to ternd's
# socket (batch_max = 100: one transaction, a reply per recipient) and the
# second over SMTP to ternd's port (PIPELINING, CHUNKING). ternd keeps
# what it accepts (its peer has no host). Asserts, by queue id: each
# recipient's own LMTP reply, one ternd message per Exim message, 0 lost
# (every id Exim was given is in ternd's queue, with its 3 recipients),
# 0 duplicated, no deferral or failure on Exim's side.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/foreign_mta.sh"

foreign_mta_need exim python3 jq

m=250
top=$(tap_tmpdir)
ternd_setup "$top/ternd" "lmtp_socket_group = nogroup" || exit 1  # Exim's group here
exim=$top/exim
exim_port=$(free_port)
mkdir -p "$exim" && chmod 0755 "$exim"
{
	exim_main "$exim" "$exim_port" "queue_only = true" "acl_smtp_rcpt = accept_all"
	printf '%s\n' "begin acl" "accept_all:" "  accept" "begin routers" \
		"to_lmtp:" "  driver = accept" "  domains = lmtp.test" "  transport = ternd_lmtp" \
		"to_smtp:" "  driver = manualroute" "  domains = smtp.test" "  route_list = * 127.0.0.1" \
		"  self = send" "  transport = ternd_smtp" \
		"begin transports" \
		"ternd_lmtp:" "  driver = lmtp" "  socket = $TERND_LMTP" "  batch_max = 100" \
		"ternd_smtp:" "  driver = smtp" "  port = $TERND_PORT" "  allow_localhost" "  hosts_avoid_tls = *"
} >"$exim/exim.conf"
exim_daemon "$exim" "$exim_port" || { echo "Bail out! Exim did not start"; exit 1; }

# m messages of 3 recipients for each domain, on one connection
python3 - "$exim_port" "$m" >"$top/submit.log" 2>&1 <<-'PY'
	import smtplib, sys
	port, m = int(sys.argv[1]), int(sys.argv[2])
	s = smtplib.SMTP("127.0.0.1", port, "client.test", timeout=30)
	for d in ("lmtp", "smtp"):
	    for i in range(m):
	        rcpts = ["r%d.%d@%s.test" % (i, j, d) for j in range(3)]
	        s.sendmail("sender@example.org", rcpts,
	                   "Subject: %s %d\r\n\r\nbody %d\r\n" % (d, i, i))
	s.quit()
PY
wait_until 30 test "$(exim_queued "$exim")" -ge $((2 * m))
tap_is "Exim queued $((2 * m)) messages" "$(exim_queued "$exim")" $((2 * m))
(exim_run "$exim" -qf) >"$top/qrun.log" 2>&1
tap_is "Exim's queue run exits 0" "$?" 0
tap_is "Exim's queue is empty" "$(exim_queued "$exim")" 0
mainlog=$exim/log/mainlog
tap_is "no deferral or failure on Exim's side" "$(grep -cE ' (==|\*\*) ' "$mainlog")" 0
tap_is "each Exim message completed once" \
	"$(grep ' Completed' "$mainlog" | awk '{ print $3 }' | sort | uniq -c | awk '$1 == 1' | wc -l)" $((2 * m))

# delivered DOMAIN - "EXIMID RCPT REPLY" of each recipient Exim delivered to DOMAIN
delivered() {
	sed -nE "s/^[^ ]+ [^ ]+ ([^ ]+) [=-]> ([^ ]+ <)?([^ >]+@$1\\.test)>? .* C=\"(.*)\"\$/\\1 \\3 \\4/p" "$mainlog"
}
delivered lmtp >"$top/lmtp"
delivered smtp >"$top/smtp"
tap_is "LMTP: a reply per recipient" "$(wc -l <"$top/lmtp")" $((3 * m))
tap_is "each reply names its own recipient" \
	"$(awk '$5 != "<" $2 ">"' "$top/lmtp" | wc -l)" 0
tap_is "SMTP: each recipient delivered" "$(wc -l <"$top/smtp")" $((3 * m))

# qids FILE - "EXIMID QID" for each line of FILE, unique
qids() {
	sed -nE 's/^([^ ]+) .* queued as ([0-9A-Z]{13})$/\1 \2/p' "$1" | sort -u
}
for d in lmtp smtp; do
	qids "$top/$d" >"$top/$d.ids"
	tap_is "$d: one ternd message per Exim message" \
		"$(cut -d' ' -f1 "$top/$d.ids" | sort -u | wc -l)/$(cut -d' ' -f2 "$top/$d.ids" | sort -u | wc -l)/$(wc -l <"$top/$d.ids")" "$m/$m/$m"
done
ternd_sync
ternq_ list --json >"$top/q.json"
jq -r '"\(.queue_id) \(.recipients | length)"' "$top/q.json" | sort >"$top/queue"
cut -d' ' -f2 "$top/lmtp.ids" "$top/smtp.ids" | sort >"$top/given"
tap_is "ternd's queue holds $((2 * m)) messages" "$(wc -l <"$top/queue")" $((2 * m))
tap_is "no message lost: every id Exim was given is queued" \
	"$(cut -d' ' -f1 "$top/queue" | comm -13 - "$top/given" | wc -l)" 0
tap_is "no message twice: nothing else is queued" \
	"$(cut -d' ' -f1 "$top/queue" | comm -23 - "$top/given" | wc -l)" 0
tap_is "each with its 3 recipients" "$(awk '$2 != 3' "$top/queue" | wc -l)" 0

ternd_stop_checked
tap_done
