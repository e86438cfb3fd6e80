#!/bin/bash
# ternd-auth.sh - the relay client's credentials and guards: SMTP AUTH
# against a Postfix smarthost with Cyrus SASL (sasldb), client
# certificates, the circuit breaker by error rate, max_connection_rate.
#
#   1. AUTH PLAIN and LOGIN with the right password: delivered, Postfix
#      logs sasl_method and sasl_username
#   2. a wrong password: deferred 4.7.0 with the 535 reply, nothing sent
#   3. tls = may and a peer without STARTTLS that offers AUTH: no AUTH, no
#      mail, deferred 4.7.0; a TLS peer without AUTH: deferred 4.7.0
#   4. a client certificate: Postfix logs a Trusted TLS connection and
#      relays for it; without it, Anonymous, and relaying is refused
#   5. a password file or key file that group or others may read: ternd
#      refuses to start and names the file
#   6. breaker_error_rate: a peer refusing every RCPT with 4xx opens the
#      breaker after 20 attempts; mail goes to backup_peer; it closes
#      when the peer recovers
#   7. max_connection_rate = 2/s: six connections take at least 2 s
#   8. breaker_latency: a peer that answers DATA after 1 s opens the
#      breaker while its first transactions still run past 500 ms, not
#      after 20 finished ones; the rest goes to backup_peer
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/postfix.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges, postfix start)"
for cmd in swaks smtp-sink smtp-source postfix openssl python3 ss saslpasswd2; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
ls /usr/lib/*/sasl2/libsasldb.so* >/dev/null 2>&1 ||
	tap_skip_all "libsasl2-modules (sasldb) not installed"

top=$(tap_tmpdir)

# --- helpers --------------------------------------------------------------------


# line QID RCPT - ternd's last delivery line for the recipient, from "to="
line() {
	grep -E ": $1: to=<$2>, " "$TERND_LOG" | tail -1 | sed -E 's/^.*: to=/to=/; s/(conn_use=[0-9]+, )?delay=[^,]*, delays=[^,]*/delay=D/'
}

# --- certificates: a CA, smarthost.test and a client, all ECDSA P-256 -------------

pki=$top/pki
pki_make "$pki"
tap_check "openssl: the client certificate verifies against the CA" \
	openssl verify -CAfile "$pki/ca.pem" -purpose sslclient "$pki/client.pem"

# --- the smarthost: Postfix with STARTTLS and Cyrus SASL from a sasldb -----------

pf=$top/pf
pf_port=$(free_port)
pf_create "$pf" "$pf_port"
# Debian's Postfix reads Cyrus SASL's smtpd.conf from CONFIG_DIR/sasl
# (whatever cyrus_sasl_config_path says); the chroot is off here.
sasl=$pf/conf/sasl
mkdir -p "$sasl"
echo 's3cret pass' | saslpasswd2 -p -c -f "$sasl/sasldb2" -u tern.test relayuser
chmod 0644 "$sasl/sasldb2"
for conf in smtpd:"PLAIN LOGIN" smtplogin:"LOGIN"; do
	printf '%s\n' "pwcheck_method: auxprop" "auxprop_plugin: sasldb" \
		"sasldb_path: $sasl/sasldb2" "mech_list: ${conf#*:}" >"$sasl/${conf%%:*}.conf"
done
chmod 0755 "$sasl"

# Only authenticated mail passes (4: a port that relays for client certificates)
pf_conf "$pf" "smtpd_tls_cert_file = $pki/server.pem" "smtpd_tls_key_file = $pki/server.key" \
	"smtpd_tls_security_level = may" "smtpd_tls_loglevel = 1" \
	"smtpd_sasl_auth_enable = yes" "smtpd_sasl_type = cyrus" "cyrus_sasl_config_path = $sasl" \
	"smtpd_sasl_local_domain = tern.test" \
	"smtpd_relay_restrictions = permit_sasl_authenticated, reject" \
	"default_transport = discard" "relay_transport = discard"
declare -A pfp
for svc in login plain noauth ccert; do
	pfp[$svc]=$(free_port)
done
pf_master "$pf" "127.0.0.1:${pfp[login]} inet n - n - - smtpd -o syslog_name=postfix/login -o smtpd_sasl_path=smtplogin"
pf_master "$pf" "127.0.0.1:${pfp[plain]} inet n - n - - smtpd -o syslog_name=postfix/plain -o smtpd_tls_security_level=none"
pf_master "$pf" "127.0.0.1:${pfp[noauth]} inet n - n - - smtpd -o syslog_name=postfix/noauth -o smtpd_sasl_auth_enable=no"
pf_master "$pf" "127.0.0.1:${pfp[ccert]} inet n - n - - smtpd -o syslog_name=postfix/ccert -o smtpd_sasl_auth_enable=no -o smtpd_tls_ask_ccert=yes -o smtpd_tls_CAfile=$pki/ca.pem -o smtpd_relay_restrictions=permit_tls_all_clientcerts,reject"
tap_check "postfix starts" pf_start "$pf"
for svc in login plain noauth ccert; do
	wait_for_port "${pfp[$svc]}"
done

# --- the sinks, the password files and ternd --------------------------------------

for s in soft backup rate slow; do
	sink_port[$s]=$(free_port)
done
sink soft "${sink_port[soft]}" "$top/soft1" -r rcpt
sink backup "${sink_port[backup]}" "$top/backup"
sink rate "${sink_port[rate]}" "$top/rate"
sink slow "${sink_port[slow]}" "$top/slow" -w 1

printf 's3cret pass\n' >"$top/good.pw"
printf 'wrong pass\r\nsecond line\n' >"$top/bad.pw"
chmod 0600 "$top/good.pw" "$top/bad.pw"

# peer NAME PORT [lines] - a [peer NAME] at 127.0.0.1:PORT, opened on demand
peer() {
	printf '%s\n' "[peer $1]" "host = [127.0.0.1]" "port = $2" "min_idle = 0" "${@:3}"
}
verify=("tls = verify" "tls_ca_file = $pki/ca.pem" "tls_servername = smarthost.test")
TERND_PEERS=$(
	peer auth "$pf_port" "${verify[@]}" "auth_user = relayuser" "auth_password_file = $top/good.pw"
	peer login "${pfp[login]}" "${verify[@]}" "auth_user = relayuser" "auth_password_file = $top/good.pw"
	peer badpw "$pf_port" "${verify[@]}" "auth_user = relayuser" "auth_password_file = $top/bad.pw"
	peer plain "${pfp[plain]}" "tls = may" "auth_user = relayuser" "auth_password_file = $top/good.pw"
	peer noauth "${pfp[noauth]}" "${verify[@]}" "auth_user = relayuser" "auth_password_file = $top/good.pw"
	peer ccert "${pfp[ccert]}" "${verify[@]}" "tls_cert_file = $pki/client.pem" "tls_key_file = $pki/client.key"
	peer nocert "${pfp[ccert]}" "${verify[@]}"
	peer flaky "${sink_port[soft]}" "tls = none" "max_connections = 1" "breaker_error_rate = 0.5" "breaker_window = 60s" \
		"breaker_cooldown = 3s" "backup_peer = backupsink"
	peer backupsink "${sink_port[backup]}" "tls = none"
	peer rated "${sink_port[rate]}" "tls = none" "max_connections = 6" "max_messages_per_connection = 1" \
		"max_connection_rate = 2/s"
	peer slow "${sink_port[slow]}" "tls = none" "max_connections = 4" "breaker_latency = 500ms" \
		"backup_peer = backupsink"
	printf '%s\n' "[routes]" "slow.test = slow" "auth.test = auth" "login.test = login" "badpw.test = badpw" \
		"plain.test = plain" "noauth.test = noauth" "ccert.test = ccert" "nocert.test = nocert" \
		"flaky.test = flaky" "rated.test = rated"
)
export TERND_PEERS
# min_backoff = 60s: a deferred recipient is not retried during the test
ternd_setup "$top/t" "min_backoff = 60s" || exit 1
unset TERND_PEERS
d='delay=D'
q='[0-9A-Z]{13}'

# --- 1. AUTH with the right password ------------------------------------------------

aqid=$(send auth1 a@example.org alice@auth.test --header "Subject: auth plain")
lqid=$(send login1 a@example.org larry@login.test --header "Subject: auth login")
wait_until 20 _atleast 1 ": $aqid: to=<alice@auth\\.test>, "
wait_until 20 _atleast 1 ": $lqid: to=<larry@login\\.test>, "
tap_like "1: AUTH PLAIN over STARTTLS: sent" "$(line "$aqid" 'alice@auth\.test')" \
	"^to=<alice@auth\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:$pf_port, $d, dsn=2\\.0\\.0, status=sent \\(250 2\\.0\\.0 Ok: ([0-9]+ bytes )?queued as [0-9A-Za-z]+\\), tls=full$"
tap_like "1: AUTH LOGIN (the only mechanism offered): sent" "$(line "$lqid" 'larry@login\.test')" \
	"^to=<larry@login\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${pfp[login]}, $d, dsn=2\\.0\\.0, status=sent "
wait_until 10 _pf_atleast 2 'postfix/discard\[[0-9]+\]: [0-9A-Za-z]+: to=<(alice@auth|larry@login)\.test>, .*status=sent'
tap_is "1: Postfix: the PLAIN client authenticated as relayuser" \
	"$(pf_count 'postfix/smtpd\[[0-9]+\]: [0-9A-Za-z]+: client=unknown\[127\.0\.0\.1\], sasl_method=PLAIN, sasl_username=relayuser@tern\.test$')" 1
tap_is "1: Postfix: the LOGIN client authenticated as relayuser" \
	"$(pf_count 'postfix/login/smtpd\[[0-9]+\]: [0-9A-Za-z]+: client=unknown\[127\.0\.0\.1\], sasl_method=LOGIN, sasl_username=relayuser@tern\.test$')" 1
tap_is "1: Postfix relayed (discarded) both" \
	"$(pf_count 'postfix/discard\[[0-9]+\]: [0-9A-Za-z]+: to=<(alice@auth|larry@login)\.test>, .*status=sent')" 2
tap_is "1: the password is not in ternd's log" "$(grep -c 's3cret' "$TERND_LOG")" 0
tap_is "1: nor its base64 in any form (PLAIN payload)" \
	"$(grep -cF "$(printf '\0relayuser\0s3cret pass' | base64)" "$TERND_LOG")" 0

# --- 2. a wrong password ---------------------------------------------------------------

bqid=$(send badpw1 b@example.org bob@badpw.test --header "Subject: bad password")
wait_until 20 _atleast 1 ": $bqid: to=<bob@badpw\\.test>, "
tap_is "2: wrong password: deferred 4.7.0 with Postfix's 535 reply" "$(line "$bqid" 'bob@badpw\.test')" \
	"to=<bob@badpw.test>, relay=none, $d, dsn=4.7.0, status=deferred (SASL authentication failed; server 127.0.0.1[127.0.0.1] said: 535 5.7.8 Error: authentication failed: authentication failure), tls=none"
tap_is "2: ternq: deferred, the 535 text is the delay reason" \
	"$(rcpt_json "$bqid" state) $(rcpt_json "$bqid" delay_reason)" \
	"deferred SASL authentication failed; server 127.0.0.1[127.0.0.1] said: 535 5.7.8 Error: authentication failed: authentication failure"
tap_is "2: Postfix logged the failed PLAIN authentication" \
	"$(pf_count 'postfix/smtpd\[[0-9]+\]: warning: unknown\[127\.0\.0\.1\]: SASL PLAIN authentication failed')" 1
tap_is "2: nothing from the wrong password reached Postfix's queue" "$(pf_count 'bob@badpw\.test|b@example\.org')" 0

# --- 3. no TLS, or no AUTH offered ---------------------------------------------------------

pqid=$(send plain1 c@example.org carol@plain.test --header "Subject: plain")
nqid=$(send noauth1 c@example.org nick@noauth.test --header "Subject: noauth")
wait_until 20 _atleast 1 ": $pqid: to=<carol@plain\\.test>, "
wait_until 20 _atleast 1 ": $nqid: to=<nick@noauth\\.test>, "
tap_is "3: tls = may, no STARTTLS offered: deferred 4.7.0, AUTH never in clear" "$(line "$pqid" 'carol@plain\.test')" \
	"to=<carol@plain.test>, relay=none, $d, dsn=4.7.0, status=deferred (auth_user is set, but the connection to 127.0.0.1[127.0.0.1] is not encrypted (no STARTTLS offered): AUTH and mail go only over TLS), tls=none"
wait_until 10 _pf_atleast 1 'postfix/plain/smtpd\[[0-9]+\]: disconnect from '
tap_like "3: the plain smtpd offered AUTH, and saw only EHLO (no AUTH, no MAIL)" \
	"$(grep -E 'postfix/plain/smtpd\[[0-9]+\]: disconnect from ' "$pf/maillog")" \
	'disconnect from unknown\[127\.0\.0\.1\] ehlo=1 commands=1$'
tap_is "3: ... and logged no SASL at all" "$(pf_count 'postfix/plain/smtpd.*(sasl_|SASL)')" 0
tap_is "3: TLS peer that offers no AUTH: deferred 4.7.0" "$(line "$nqid" 'nick@noauth\.test')" \
	"to=<nick@noauth.test>, relay=none, $d, dsn=4.7.0, status=deferred (peer offers no AUTH (PLAIN or LOGIN): 127.0.0.1[127.0.0.1], and auth_user is set), tls=none"
tap_is "3: ... no MAIL reached it" "$(pf_count 'postfix/noauth/smtpd\[[0-9]+\]: [0-9A-Za-z]+: client=')" 0

# --- 4. client certificate --------------------------------------------------------------

cqid=$(send ccert1 '' cert@ccert.test --header "Subject: ccert")
xqid=$(send nocert1 '' nocert@nocert.test --header "Subject: nocert")
wait_until 20 _atleast 1 ": $cqid: to=<cert@ccert\\.test>, "
wait_until 20 _atleast 1 ": $xqid: to=<nocert@nocert\\.test>, "
tap_like "4: with the client certificate: relayed" "$(line "$cqid" 'cert@ccert\.test')" \
	"^to=<cert@ccert\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${pfp[ccert]}, $d, dsn=2\\.0\\.0, status=sent "
tap_is "4: Postfix: one Trusted TLS connection (the certificate verified)" \
	"$(pf_count 'postfix/ccert/smtpd\[[0-9]+\]: Trusted TLS connection established from unknown\[127\.0\.0\.1\]')" 1
tap_like "4: without it: Postfix refuses to relay" "$(line "$xqid" 'nocert@nocert\.test')" \
	"^to=<nocert@nocert\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${pfp[ccert]}, $d, dsn=5\\.7\\.1, status=bounced \\(554 5\\.7\\.1 <nocert@nocert\\.test>: Recipient address rejected: Access denied\\), tls=full$"
tap_is "4: ... over an Anonymous TLS connection" \
	"$(pf_count 'postfix/ccert/smtpd\[[0-9]+\]: Anonymous TLS connection established from unknown\[127\.0\.0\.1\]')" 1

# --- 5. secrets others may read: ternd refuses to start ------------------------------

# refuse NAME PEERLINES... - run ternd on a configuration with that peer;
# prints its exit status and output
refuse() {
	local dir=$top/$1
	shift
	mkdir -p "$dir"
	printf '%s\n' "[global]" "hostname = ternd.test" "state_dir = $dir/state" "spool_dir = $dir/spool" \
		"run_dir = $dir/run" "[ternd]" "smtp_listen = inet:127.0.0.1:$(free_port)" "$@" \
		"[routes]" "* = p" >"$dir/tern.conf"
	timeout 20 "$_ternd_bin" -f -c "$dir/tern.conf" >"$dir/out" 2>&1
	echo "rc=$?"
	grep -o 'ternd.*' "$dir/out" | sed -E 's/^ternd(\[[0-9]+\])?: //'
}
printf 's3cret pass\n' >"$top/open.pw"
chmod 0644 "$top/open.pw"
tap_is "5: auth_password_file mode 0644: ternd refuses to start, naming the file" \
	"$(refuse open "[peer p]" "host = [127.0.0.1]" "port = $pf_port" "auth_user = u" \
		"auth_password_file = $top/open.pw")" \
	"rc=1
fatal: [peer p] auth_password_file $top/open.pw: group or others may read or write it (mode 0644): chmod 600 it"
cp "$pki/client.key" "$top/open.key"
chmod 0640 "$top/open.key"
tap_is "5: tls_key_file mode 0640: refused too" \
	"$(refuse openkey "[peer p]" "host = [127.0.0.1]" "tls_cert_file = $pki/client.pem" \
		"tls_key_file = $top/open.key")" \
	"rc=1
fatal: [peer p] tls_key_file $top/open.key: group or others may read or write it (mode 0640): chmod 600 it"
cp "$pki/server.key" "$top/other.key"
chmod 0600 "$top/other.key"
tap_is "5: a key that is not the certificate's: refused" \
	"$(refuse wrongkey "[peer p]" "host = [127.0.0.1]" "tls_cert_file = $pki/client.pem" \
		"tls_key_file = $top/other.key")" \
	"rc=1
fatal: [peer p] tls_key_file $top/other.key: cannot load a PEM private key: key values mismatch"
tap_is "5: auth_user with tls = none: refused" \
	"$(refuse notls "[peer p]" "host = [127.0.0.1]" "tls = none" "auth_user = u" \
		"auth_password_file = $top/good.pw")" \
	"rc=1
fatal: [peer p] auth_user needs TLS, but tls = none: AUTH is only sent over TLS (set tls = encrypt or verify)"

# --- 6. breaker_error_rate -------------------------------------------------------------

smtp-source -m 25 -s 1 -f f@example.org -t fred@flaky.test "127.0.0.1:$TERND_PORT" >"$top/flaky.source" 2>&1
wait_until 60 _atleast 25 ": $q: to=<fred@flaky\\.test>, "
tap_is "6: 20 attempts deferred by the peer's 4xx" \
	"$(nlog ": $q: to=<fred@flaky\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${sink_port[soft]}, .*dsn=4\\.[0-9.]+, status=deferred ")" 20
tap_is "6: then the breaker opens, saying why" \
	"$(nlog ': warning: peer flaky: circuit breaker open for 3s after 20 of 20 attempts in 60s failed temporarily \(breaker_error_rate 0\.5\); its mail goes to backupsink$')" 1
tap_is "6: the other 5 messages went to the backup peer" \
	"$(nlog ": $q: to=<fred@flaky\\.test>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${sink_port[backup]}, .*status=sent ")" 5
tap_is "6: the backup sink has them" "$(files "$top/backup")" 5
sink_stop soft
sink soft "${sink_port[soft]}" "$top/soft2"	# the peer recovers
sleep 4						# past the 3 s cooldown
rqid=$(send flaky2 f@example.org ruth@flaky.test --header "Subject: recovered")
wait_until 20 _atleast 1 ": $rqid: removed$"
tap_is "6: after the cooldown, a probe closes the breaker" \
	"$(nlog ': peer flaky: circuit breaker (half-open: probing|closed)$')" 2
tap_is "6: mail goes to the recovered peer again" "$(files "$top/soft2")" 1

# --- 7. max_connection_rate = 2/s ------------------------------------------------------

smtp-source -m 6 -s 1 -f r@example.org -t rita@rated.test "127.0.0.1:$TERND_PORT" >"$top/rated.source" 2>&1
wait_until 60 sh -c "[ \$(find '$top/rate' -type f | wc -l) -ge 6 ]"
tap_is "7: six messages, one connection each, arrived" "$(files "$top/rate")" 6
span=$(python3 - "$top/rate" <<'PYEOF'
import os, sys
t = sorted(os.stat(os.path.join(sys.argv[1], f)).st_mtime_ns for f in os.listdir(sys.argv[1]))
print("%.2f" % ((t[-1] - t[0]) / 1e9))
PYEOF
)
tap_check "7: six connections at 2/s took at least 2 s (first to last: ${span}s)" \
	python3 -c "import sys; sys.exit(not $span >= 2.0)"
tap_is "7: none of them was deferred (waiting is no failure)" \
	"$(nlog ": $q: to=<rita@rated\\.test>, .*status=deferred ")" 0

# --- 8. breaker_latency -----------------------------------------------------------------

before=$(files "$top/backup")
smtp-source -m 30 -s 1 -f s@example.org -t sam@slow.test "127.0.0.1:$TERND_PORT" >"$top/slow.source" 2>&1
wait_until 90 _atleast 30 ": $q: to=<sam@slow\\.test>, .*status=sent "
tap_is "8: transactions still running past 500ms open the breaker, before any finished" \
	"$(nlog ': warning: peer slow: circuit breaker open for 30s after [4-8] transactions running over 500ms and none faster in 60s \(breaker_latency 500ms\); its mail goes to backupsink$')" 1
nslow=$(files "$top/slow")
# in flight when it opens: one per connection (4), and one more pipelined behind each
tap_like "8: the slow peer got 4 to 8 of the 30 (those in flight finish)" "$nslow" '^[4-8]$'
tap_is "8: the backup peer got the rest" "$(($(files "$top/backup") - before))" "$((30 - nslow))"

# --- the end ---------------------------------------------------------------------------

ternd_stop
tap_is "ternd stops cleanly" "$?" 0
tap_check "no sanitizer reports" ternd_sanitizer_clean
tap_done
