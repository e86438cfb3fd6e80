#!/bin/bash
# interop-opensmtpd.sh - ternd relays to OpenSMTPD (Debian 12's opensmtpd
# 6.8.0p2, unpacked by tests/lib/foreign_mta.sh) with its defaults: no
# PIPELINING offered (6.8 has no option for it and never offers it), and
# "smtp limit max-mails 100": every MAIL after the 100th of a session is
# answered "452 4.5.3 ... Too many messages sent" and the session stays
# open. Plain SMTP (tls = none), one connection. Asserts, by queue id,
# that all of $n messages are delivered, each once, within a bounded
# time; that each transaction refused with the 452 (on a reused
# connection: the session's limit, not the message's) was not sent, went
# again at once on a new connection and was then sent once, none
# deferred; and that the refusing connection took no more.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"
. "$here/../lib/foreign_mta.sh"

foreign_mta_need opensmtpd python3
blast=${top_builddir:-$here/../..}/bench/smtp-blast
[ -x "$blast" ] || tap_skip_all "bench/smtp-blast not built"

n=600 bound=40
top=$(tap_tmpdir)
smtpd_port=$(free_port)
smtpd_sink "$top/smtpd" "$smtpd_port" || { echo "Bail out! OpenSMTPD did not start"; exit 1; }
tap_is "OpenSMTPD does not offer PIPELINING" \
	"$(printf 'EHLO t\r\nQUIT\r\n' | timeout 10 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 10)
f = s.makefile("rb")
f.readline()
s.sendall(b"EHLO client.test\r\n")
ext = []
while True:
    l = f.readline().decode().rstrip()
    ext.append(l[4:].split(" ")[0].upper())
    if l[3:4] != "-":
        break
s.sendall(b"QUIT\r\n")
print("PIPELINING" in ext)' "$smtpd_port")" False

TERND_PEERS=$(printf '%s\n' "[peer smtpd]" "host = [127.0.0.1]" "port = $smtpd_port" "tls = none" \
	"max_connections = 1" "min_idle = 0" "[routes]" "* = smtpd")
ternd_setup "$top/ternd" "min_backoff = 5s" || exit 1

# all_delivered - ternd's queue and OpenSMTPD's are empty
all_delivered() {
	ternd_drained && smtpd_idle "$top/smtpd"
}
start=$SECONDS
blast_each_once "$n" "$top/smtpd/mail" "$bound" all_delivered -c 2
tap_diag "$((SECONDS - start)) s; $(ternq_ list --json | wc -l) messages left in ternd's queue"

peer_lines "$smtpd_port" sent | line_ids >"$top/sent"
tap_is "ternd logged $n deliveries, one per message" "$(sort -u "$top/sent" | wc -l)/$(wc -l <"$top/sent")" "$n/$n"
tap_is "all with tls=none" "$(peer_lines "$smtpd_port" sent | grep -c ', tls=none$')" "$n"
# OpenSMTPD does not log the MAILs it refuses; ternd says each one.
sed -nE 's/^.*: ([0-9A-Z]{13}): not sent to 127\.0\.0\.1\[127\.0\.0\.1\] \(refused at MAIL on a reused connection\): sent again at once$/\1/p' \
	"$TERND_LOG" | sort -u >"$top/refused"
tap_like "OpenSMTPD refused MAIL past 100 in a session" "$(wc -l <"$top/refused")" '^[1-9][0-9]*$'
tap_is "... each time with its 452 4.5.3, after 100 transactions, and ternd took no more" \
	"$(grep -c ": peer smtpd: 127\.0\.0\.1\[127\.0\.0\.1\] refused MAIL on a connection that carried 100 transactions (452 4\.5\.3 [^)]*Too many messages sent): it takes no more$" "$TERND_LOG")" \
	"$(wc -l <"$top/refused")"
tap_is "none deferred" "$(peer_lines "$smtpd_port" deferred | wc -l)" 0
tap_is "each refused message was then sent once" "$(comm -12 "$top/refused" "$top/sent" | wc -l)" "$(wc -l <"$top/refused")"

ternd_stop_checked
tap_done
