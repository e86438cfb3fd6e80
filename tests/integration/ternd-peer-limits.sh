#!/bin/bash
# ternd-peer-limits.sh - what a peer says in EHLO it would refuse is not
# sent: a message over its SIZE bounces 5.3.4, one that needs SMTPUTF8 to
# a peer without it bounces 5.6.7, each with a DSN to the sender, and the
# peer sees no MAIL FROM for them; mail within the limits goes through.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/postfix.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges, postfix start)"
for cmd in swaks postfix python3; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
top=$(tap_tmpdir)

# The peer: Postfix with a 4000-octet SIZE and no SMTPUTF8, discarding.
pf=$top/pf
pf_port=$(free_port)
pf_create "$pf" "$pf_port"
pf_conf "$pf" "message_size_limit = 4000" "smtputf8_enable = no" \
	"default_transport = discard" "relay_transport = discard"
tap_check "postfix starts" pf_start "$pf"

TERND_PEERS=$(printf '%s\n' "[peer small]" "host = [127.0.0.1]" "port = $pf_port" "tls = none" \
	"min_idle = 0" "[routes]" "peer.test = small" "example.org = small")
ternd_setup "$top/t" || exit 1
unset TERND_PEERS

okq=$(send ok s@example.org ok@peer.test --body "small enough")
bigq=$(send big s@example.org big@peer.test --body "$(head -c 6000 /dev/zero | tr '\0' x | fold -w 70)")
# utf8_send SENDER RCPT - one message with MAIL ... SMTPUTF8; prints its queue id
utf8_send() {
	python3 - "$TERND_PORT" "$1" "$2" <<-'EOF'
		import smtplib, sys
		s = smtplib.SMTP("127.0.0.1", int(sys.argv[1]), "client.test", timeout=15)
		s.command_encoding = "utf-8"
		s.ehlo()
		s.docmd("MAIL FROM:<%s> SMTPUTF8" % sys.argv[2])
		s.docmd("RCPT TO:<%s>" % sys.argv[3])
		s.docmd("DATA")
		s.send(b"Subject: utf8\r\n\r\nbody\r\n.\r\n")
		code, reply = s.getreply()
		print(reply.decode().split()[-1])
		s.quit()
	EOF
}
utfq=$(utf8_send $'s\xc3\xa9@example.org' utf@peer.test)
asciiq=$(utf8_send s@example.org ascii@peer.test)
for q in "$okq" "$bigq" "$utfq" "$asciiq"; do
	wait_until 20 _atleast 1 ": $q: to=<[a-z]+@peer\\.test>, .*status=(sent|bounced) "
done
tap_like "within the limits: sent" "$(grep -E ": $okq: to=<ok@peer\\.test>, " "$TERND_LOG")" 'status=sent \(250 '
tap_like "over SIZE: bounced 5.3.4 before MAIL" "$(grep -E ": $bigq: to=<big@peer\\.test>, " "$TERND_LOG")" \
	"dsn=5\\.3\\.4, status=bounced \\(message size [0-9]+ exceeds size limit 4000 of server 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]\\)"
tap_like "SMTPUTF8 needed, not offered: bounced 5.6.7" "$(grep -E ": $utfq: to=<utf@peer\\.test>, " "$TERND_LOG")" \
	"dsn=5\\.6\\.7, status=bounced \\(SMTPUTF8 is required, but was not offered by host 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]\\)"
tap_like "SMTPUTF8 asked, envelope ASCII: sent without it" \
	"$(grep -E ": $asciiq: to=<ascii@peer\\.test>, " "$TERND_LOG")" 'status=sent \(250 '
tap_check "the big message's sender gets a DSN" \
	wait_until 20 _atleast 1 ": $bigq: sender non-delivery notification: [0-9A-Z]{13}"
wait_until 20 _pf_atleast 3 'postfix/discard\[[0-9]+\]: [0-9A-F]+: to=<'
tap_is "the peer took the small and the ASCII messages and the notification" \
	"$(pf_count 'postfix/smtpd\[[0-9]+\]: [0-9A-F]+: client=')" 3
tap_is "... and saw no MAIL FROM for the others" "$(pf_count 'big@peer\.test|utf@peer\.test')" 0
ternd_stop_checked
tap_done
