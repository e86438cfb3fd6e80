#!/bin/bash
# ternd-queue-limit.sh - max_queue_messages: the count of queued messages
# that MAIL is refused at, through every path that moves it. The peer has
# no host (parked), so mail stays queued; messages from <> (no
# notification when one is expired).
#   1. max_queue_messages = 3: three messages are taken; a fourth MAIL
#      gets 452 4.3.1, logged
#   2. ternq delete of one: MAIL is taken again; a message completes it
#      to 3 again, and MAIL gets 452
#   3. ternq expire of one (a bounce without notification, the message
#      removed): MAIL is taken again
#   4. a restart with 3 queued: the count comes from recovery, MAIL 452
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
top=$(tap_tmpdir)
TERND_PEERS=$(printf '%s\n' "[peer park]" "[routes]" "* = park")
ternd_setup "$top/t" "max_queue_messages = 3" || exit 1

# send - one message from <>; the reply to its end of data
send() {
	printf '%s\n' '<<' '> EHLO x\r\n' '<' '> MAIL FROM:<>\r\n' '<' '> RCPT TO:<u@example.com>\r\n' '<' \
		'> DATA\r\n' '<' '> Subject: limit\r\n\r\nbody\r\n.\r\n' '<' '> QUIT\r\n' '<' >"$top/send"
	python3 "$here/../lib/smtp_chat.py" "127.0.0.1:$TERND_PORT" "$top/send" 2>/dev/null | sed -n 6p
}
# mail_reply - the reply to MAIL FROM on a fresh session, once the
# committer has recorded what came before
mail_reply() {
	ternd_sync
	printf '%s\n' '<<' '> EHLO x\r\n' '<' '> MAIL FROM:<>\r\n' '<' '> QUIT\r\n' '<' >"$top/mail"
	python3 "$here/../lib/smtp_chat.py" "127.0.0.1:$TERND_PORT" "$top/mail" 2>/dev/null | sed -n 3p
}
# queued - the queue ids, one per line
queued() {
	ternq_ list --json | python3 -c 'import json, sys
for l in sys.stdin: print(json.loads(l)["queue_id"])'
}
queued_count() {
	queued | wc -l
}
refused='452 4.3.1 Error: insufficient system storage'

# --- 1. up to the limit ------------------------------------------------------------------
for i in 1 2 3; do
	tap_like "1: message $i taken" "$(send)" '^250 '
done
tap_is "1: the fourth MAIL: 452 4.3.1" "$(mail_reply)" "$refused"
tap_is "1: ... logged" "$(grep -c 'NOQUEUE: reject: MAIL from \[127.0.0.1\]: 452 4.3.1 insufficient system storage (queue_minfree or max_queue_messages)' "$TERND_LOG")" 1

# --- 2. ternq delete ---------------------------------------------------------------------
tap_is "2: ternq delete of one" "$(ternq_ delete "$(queued | head -1)" 2>&1)" "ternq: delete: 1 message"
tap_like "2: MAIL is taken again" "$(mail_reply)" '^250 '
tap_like "2: a message completes the queue to 3" "$(send)" '^250 '
tap_is "2: ... and MAIL gets 452" "$(mail_reply)" "$refused"

# --- 3. ternq expire ---------------------------------------------------------------------
tap_is "3: ternq expire of one" "$(ternq_ expire "$(queued | head -1)" 2>&1)" "ternq: expire: 1 message"
tap_wait_is "3: the message left the queue, no notification queued" 2 queued_count
tap_like "3: MAIL is taken again" "$(mail_reply)" '^250 '
tap_like "3: a message completes the queue to 3" "$(send)" '^250 '

# --- 4. a restart ------------------------------------------------------------------------
ternd_restart
tap_is "4: restarted with 3 queued: MAIL gets 452" "$(mail_reply)" "$refused"
ternd_stop_checked
tap_done
