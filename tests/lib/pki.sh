# tests/lib/pki.sh - a throw-away test PKI for TLS peers on loopback.
#
#     . tests/lib/pki.sh
#     pki_make DIR || fail   # DIR/ca.pem, server.pem/.key, client.pem/.key
#
# One ECDSA P-256 CA ("tern relay test CA"), a server certificate for
# smarthost.test and a client certificate signed by it, valid two days,
# files 0644 (but client.key 0600) so that daemons that drop privileges
# (Postfix, stunnel4) can read them. openssl's output goes to DIR/pki.log.
# Used through tests/lib/relay.sh by the relay tests, and by bench/relay.sh.

if [ -n "${_PKI_SH_LOADED:-}" ]; then return 0; fi
_PKI_SH_LOADED=1

# pki_make DIR - create the CA, the smarthost.test server certificate and
# a client certificate (client.pem, client.key 0600) below DIR
pki_make() {
	mkdir -p "$1" || return 1
	(
		cd "$1" &&
			openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
				-keyout ca.key -out ca.pem -subj "/CN=tern relay test CA" \
				-addext "basicConstraints=critical,CA:TRUE" \
				-addext "keyUsage=critical,keyCertSign,cRLSign" &&
			for who in server client; do
				openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
					-keyout $who.key -out $who.csr -subj "/CN=$who.test" || exit 1
			done &&
			printf '%s\n' "subjectAltName=DNS:smarthost.test" "basicConstraints=CA:FALSE" \
				"keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >server.ext &&
			printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
				"extendedKeyUsage=clientAuth" >client.ext &&
			openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 2 -days 2 \
				-extfile server.ext -out server.pem &&
			openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -set_serial 3 -days 2 \
				-extfile client.ext -out client.pem
	) >"$1/pki.log" 2>&1 || return 1
	chmod 0644 "$1"/*
	chmod 0600 "$1/client.key"
}
