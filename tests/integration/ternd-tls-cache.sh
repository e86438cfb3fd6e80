#!/bin/bash
# ternd-tls-cache.sh - TLS sessions kept across restarts are sealed (AEAD)
# and bound to what they are about. Two peers reach the same server
# (stunnel4 in front of smtp-sink, implicit TLS): "a" with tls = verify,
# the test CA and a server name, "b" with tls = encrypt. Then:
#   1. the first connection after a restart resumes a's kept session
#   2. a's sealed session copied, in the queue database, under b's store
#      key is discarded (debug line), and b makes a full handshake: a
#      session is only offered under the settings it was made with
#   3. a session sealed the way ternd did before (crypto_secretbox,
#      nothing bound) is discarded at start, not misread
#   4. after tls_ca_file names another file (other CA bytes), the session
#      verified under the old one is discarded; the next one resumes
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in swaks smtp-sink stunnel4 openssl python3 mdb_dump mdb_load; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
python3 -c 'import ctypes.util, sys; sys.exit(not ctypes.util.find_library("sodium"))' \
	|| tap_skip_all "libsodium not found by ctypes"
ensure_tern_user || tap_skip_all "cannot create the tern user"

top=$(tap_tmpdir)
pki=$top/pki
pki_make "$pki" || tap_skip_all "cannot make the test PKI"

sink_port=$(free_port)
sink tls "$sink_port" "$top/sink"
tls_port=$(free_port)
smtps "$tls_port" "$sink_port" "$pki"
tap_is "stunnel4 listens" "$?" 0

# ternd, verbose (the discarded sessions are debug lines)
printf '#!/bin/sh\nexec %s -v "$@"\n' "${top_builddir:-$here/../..}/src/ternd/ternd" >"$top/ternd-v"
chmod 0755 "$top/ternd-v"
ternd_use_bin "$top/ternd-v"
peer() {
	printf '%s\n' "[peer $1]" "host = [127.0.0.1]" "port = $tls_port" "tls_wrapper = yes" \
		"min_idle = 0" "max_connections = 1" "${@:2}"
}
TERND_PEERS=$(
	peer a "tls = verify" "tls_ca_file = $pki/ca.pem" "tls_servername = smarthost.test"
	peer b "tls = encrypt"
	printf '%s\n' "[routes]" "a.test = a" "b.test = b"
)
ternd_setup "$top/ternd" || exit 1
db=$TERND_DIR/state/queue
akey="a/[127.0.0.1]/$tls_port/verify/smarthost.test"
bkey="b/[127.0.0.1]/$tls_port/encrypt/"

# re STRING - STRING as an extended regular expression that matches it
re() {
	printf '%s\n' "$1" | sed 's/[].[]/\\&/g'
}

# deliver NAME RCPT - send one message, wait until it is gone; print the
# tls= of its delivery
deliver() {
	local id
	id=$(send "$1" s@example.org "$2" --header "Subject: $1")
	wait_until 20 _atleast 1 ": $id: removed$"
	sed -nE "s/^.*: $id: to=<[^>]*>, .*status=sent .*, tls=([a-z]+)\$/\\1/p" "$TERND_LOG"
}

# sessions - the tls table of the queue database, one "key hexvalue" a line
sessions() {
	mdb_dump -s tls "$db" | python3 -c '
import sys
lines = sys.stdin.read().split("\n")
body = lines[lines.index("HEADER=END") + 1:lines.index("DATA=END")]
for k, v in zip(body[0::2], body[1::2]):
    print(bytes.fromhex(k.strip()).decode(), v.strip())'
}

# put_session KEY HEXVALUE - write one record into the tls table (ternd stopped)
put_session() {
	printf '%s\n' "VERSION=3" "format=bytevalue" "database=tls" "type=btree" "HEADER=END" \
		" $(printf '%s' "$1" | od -An -tx1 | tr -d ' \n')" " $2" "DATA=END" \
		| mdb_load -s tls "$db"
}

# --- 1. a restart: the kept session resumes ------------------------------------------
tap_is "1: the first delivery to a makes a full handshake" "$(deliver first one@a.test)" full
tap_like "1: its session is kept under a's store key" "$(sessions | cut -d' ' -f1)" "^$(re "$akey")\$"
ternd_restart
tap_is "1: after a restart, the first connection resumes it" "$(deliver second two@a.test)" resumed

# --- 2. a's session under b's key --------------------------------------------------------
ternd_stop
put_session "$bkey" "$(sessions | awk -v k="$akey" '$1 == k { print $2 }')"
tap_is "2: the queue database holds a's sealed session under both keys" \
	"$(sessions | awk '{ print $2 }' | uniq | wc -l) $(sessions | wc -l)" "1 2"
ternd_start
tap_is "2: b does not resume with a's session: a full handshake" "$(deliver moved one@b.test)" full
tap_is "2: the moved session is discarded, with a debug line" \
	"$(nlog "TLS session kept under $(re "$bkey"): not sealed for .*: discarded, a full handshake follows$")" 1

# --- 3. a session sealed as before (secretbox, nothing bound) ------------------------------
ternd_stop
old=$(sessions | awk -v k="$akey" '$1 == k { print $2 }' | python3 -c '
import ctypes, ctypes.util, hashlib, sys
sodium = ctypes.CDLL(ctypes.util.find_library("sodium"))
sodium.sodium_init()
key = bytes.fromhex(open(sys.argv[1]).read().strip())
bind = (sys.argv[2] + "/ca=" + hashlib.blake2b(open(sys.argv[3], "rb").read(), digest_size=32).hexdigest()).encode()
blob = bytes.fromhex(sys.stdin.read().strip())
der = ctypes.create_string_buffer(len(blob))
dlen = ctypes.c_ulonglong()
assert blob[0] == 2, "not a version 2 blob"
assert sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(der, ctypes.byref(dlen), None,
    blob[25:], ctypes.c_ulonglong(len(blob) - 25), bind, ctypes.c_ulonglong(len(bind)),
    blob[1:25], key) == 0, "does not open"
nonce = bytes(24)
out = ctypes.create_string_buffer(16 + dlen.value)
sodium.crypto_secretbox_easy(out, der.raw[:dlen.value], ctypes.c_ulonglong(dlen.value), nonce, key)
print((nonce + out.raw).hex())' "$TERND_DIR/state/session.key" "$akey" "$pki/ca.pem")
tap_like "3: a's session, resealed as before (secretbox)" "$old" '^[0-9a-f]{200,}$'
put_session "$akey" "$old"
ternd_start
tap_is "3: the old-format session is not offered: a full handshake" "$(deliver oldformat three@a.test)" full
tap_is "3: it is discarded at start, with a debug line" \
	"$(nlog "TLS session kept under $(re "$akey"): of an older format: discarded, a full handshake follows$")" 1

# --- 4. tls_ca_file changes --------------------------------------------------------------
# The same CA, and another one after it: the file's bytes differ.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout "$top/other.key" \
	-out "$top/other.pem" -subj "/CN=another CA" >/dev/null 2>&1
cat "$pki/ca.pem" "$top/other.pem" >"$top/ca2.pem"
chmod 0644 "$top/ca2.pem"
sed -i "s|^tls_ca_file = .*|tls_ca_file = $top/ca2.pem|" "$TERND_CONF"
ternd_restart
tap_is "4: after tls_ca_file changed, the session verified under the old file is not offered" \
	"$(deliver newca four@a.test)" full
tap_is "4: it is discarded, with a debug line" \
	"$(nlog "TLS session kept under $(re "$akey"): not sealed for .*: discarded, a full handshake follows$")" 1
ternd_restart
tap_is "4: the session made under the new file resumes after a restart" "$(deliver newca2 five@a.test)" resumed

tap_is "the sink got every message" "$(files "$top/sink")" 6
ternd_stop_checked
tap_done
