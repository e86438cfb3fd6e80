# tests/lib/pki.sh - a throw-away test PKI for TLS peers on loopback.
#
#     . tests/lib/pki.sh
#     pki_make DIR || fail        # DIR/ca.pem, DIR/server.pem, DIR/server.key
#
# One ECDSA P-256 CA ("tern relay test CA") and one server certificate for
# smarthost.test signed by it, valid two days, files 0644 so that daemons
# that drop privileges (Postfix, stunnel4) can read them. openssl's output
# goes to DIR/pki.log. Used by tests/integration/ternd-relay.sh and
# bench/relay.sh.

if [ -n "${_PKI_SH_LOADED:-}" ]; then return 0; fi
_PKI_SH_LOADED=1

# pki_make - create the CA and the smarthost.test certificate below DIR
pki_make() {
	local dir=$1
	mkdir -p "$dir" || return 1
	(
		cd "$dir" &&
			openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
				-keyout ca.key -out ca.pem -subj "/CN=tern relay test CA" \
				-addext "basicConstraints=critical,CA:TRUE" \
				-addext "keyUsage=critical,keyCertSign,cRLSign" &&
			openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
				-keyout server.key -out server.csr -subj "/CN=smarthost.test" &&
			printf '%s\n' "subjectAltName=DNS:smarthost.test" "basicConstraints=CA:FALSE" \
				"keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >server.ext &&
			openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 2 -days 2 \
				-extfile server.ext -out server.pem
	) >"$dir/pki.log" 2>&1 || return 1
	chmod 0644 "$dir"/*
}
