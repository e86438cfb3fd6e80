# shellcheck shell=bash disable=SC2154 # the globals below: set by the sourcing script
# bench/peer.sh - the relay peer's side of the benchmarks: the delay proxy,
# bench/chunk-sink as a TLS peer, and Postfix's smtp client in its best
# configuration for one smarthost. Shared by relay.sh and pipeline.sh.
#
# Needs tests/lib/tap.sh (free_port, wait_for_port, tap_bg_register) and
# bench/lib.sh loaded first, and these globals: proxy (the delay-proxy
# binary), chunk (the chunk-sink binary), top (a private directory),
# pki (tests/lib/pki.sh's directory), DELAY_MS, CONNECTIONS and PF_EXTRA.

if [ -n "${_BENCH_PEER_LOADED:-}" ]; then return 0; fi
_BENCH_PEER_LOADED=1

# chunk_start DIR TLS - start chunk-sink below DIR (TLS: -T implicit TLS
# with the smarthost.test certificate, or "" for plain); sets chunk_port,
# chunk_pid; its counters go to DIR/sink.status (chunk_field reads them)
chunk_start() {
	chunk_port=$(free_port) || die "no free port"
	# shellcheck disable=SC2086 # TLS: zero or one word
	"$chunk" $2 ${2:+-C "$pki/server.pem" -K "$pki/server.key"} -n smarthost.test -o "$1/sink.status" \
		"127.0.0.1:$chunk_port" 2>"$1/sink.err" &
	chunk_pid=$!
	tap_bg_register "$chunk_pid"
	wait_for_port "$chunk_port" || die "chunk-sink did not start: $(cat "$1/sink.err")"
}

# stunnel_start DIR TARGET_PORT - stunnel4 (implicit TLS, the smarthost.test
# certificate, debug = info into DIR/stunnel.log) in front of TARGET_PORT;
# sets stunnel_port, stunnel_pid
stunnel_start() {
	stunnel_port=$(free_port) || die "no free port"
	printf '%s\n' "foreground = yes" "pid =" "debug = info" "[smtps]" \
		"accept = 127.0.0.1:$stunnel_port" "connect = 127.0.0.1:$2" \
		"cert = $pki/server.pem" "key = $pki/server.key" >"$1/stunnel.conf"
	stunnel4 "$1/stunnel.conf" >"$1/stunnel.log" 2>&1 &
	stunnel_pid=$!
	tap_bg_register "$stunnel_pid"
	wait_for_port "$stunnel_port" || die "stunnel4 did not start: $(tail -n 5 "$1/stunnel.log")"
}

# proxy_start TARGET_PORT [MS] - delay-proxy in front of 127.0.0.1:TARGET_PORT,
# adding MS (default DELAY_MS) of round trip; sets proxy_port, proxy_pid
proxy_start() {
	proxy_port=$(free_port) || die "no free port"
	"$proxy" -l "127.0.0.1:$proxy_port" -t "127.0.0.1:$1" -d "${2:-$DELAY_MS}" 2>>"$top/proxy.log" &
	proxy_pid=$!
	tap_bg_register "$proxy_pid"
	wait_for_port "$proxy_port" || die "delay-proxy did not start: $(cat "$top/proxy.log")"
}

# proxy_stop - stop the delay proxy (it prints its totals to proxy.log)
proxy_stop() {
	kill -TERM "$proxy_pid" 2>/dev/null
	wait "$proxy_pid" 2>/dev/null
}

# proxy_selfcheck - echo round trips through the proxy: prints the median
# RTT in ms; fails unless it is DELAY_MS .. DELAY_MS + 10 ms and 4 MB
# come back intact (ordering, back-pressure)
proxy_selfcheck() {
	local eport out
	eport=$(free_port) || return 1
	python3 - "$eport" <<-'EOF' &
		import socket, sys, threading
		ls = socket.socket()
		ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
		ls.bind(("127.0.0.1", int(sys.argv[1])))
		ls.listen(8)
		def echo(c):
		    while True:
		        d = c.recv(65536)
		        if not d:
		            c.close()
		            return
		        c.sendall(d)
		while True:
		    c, _ = ls.accept()
		    threading.Thread(target=echo, args=(c,), daemon=True).start()
	EOF
	local epid=$!
	tap_bg_register "$epid"
	wait_for_port "$eport" || return 1
	proxy_start "$eport"
	out=$(python3 - "$proxy_port" "$DELAY_MS" <<-'EOF'
		import os, socket, sys, threading, time
		port, delay = int(sys.argv[1]), float(sys.argv[2])
		s = socket.create_connection(("127.0.0.1", port), timeout=30)
		s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
		rtt = []
		for i in range(21):
		    t = time.perf_counter()
		    s.sendall(b"ping %d\r\n" % i)
		    got = b""
		    while not got.endswith(b"\r\n"):
		        got += s.recv(100)
		    rtt.append((time.perf_counter() - t) * 1e3)
		    assert got == b"ping %d\r\n" % i
		rtt.sort()
		blob = os.urandom(1 << 20) * 4
		back = bytearray()
		def reader():
		    while len(back) < len(blob):
		        d = s.recv(65536)
		        if not d:
		            break
		        back.extend(d)
		t = threading.Thread(target=reader)
		t.start()
		s.sendall(blob)
		t.join()
		ok = bytes(back) == blob and delay <= rtt[10] <= delay + 10
		print("%.2f %.2f %.2f %s" % (rtt[0], rtt[10], rtt[-1], "ok" if ok else "BAD"))
	EOF
	)
	proxy_stop
	kill -TERM "$epid" 2>/dev/null
	wait "$epid" 2>/dev/null
	echo "$out"
	[[ $out == *" ok" ]]
}


# peer_pki - the test CA and the smarthost.test certificate below $pki
peer_pki() {
	pki_make "$pki" && openssl verify -CAfile "$pki/ca.pem" -verify_hostname smarthost.test "$pki/server.pem" >/dev/null ||
		die "cannot make the test certificates: $(cat "$pki/pki.log")"
}

# proxy_report - run proxy_selfcheck and print its "proxy:" fact line
proxy_report() {
	local sc rmin rmed rmax
	sc=$(proxy_selfcheck) || die "delay-proxy self-check failed: $sc"
	read -r rmin rmed rmax _ <<<"$sc"
	echo "proxy:    delay-proxy -d $DELAY_MS: echo RTT min $rmin ms, median $rmed ms, max $rmax ms; 4 MB echoed intact"
}

# ternd_peer_conf PORT WRAPPER - the [peer relay] and [routes] sections
# (max_pipeline_depth = PIPELINE_DEPTH when that is set)
ternd_peer_conf() {
	printf '%s\n' "[peer relay]" "host = [127.0.0.1]" "port = $1" "tls = verify" \
		"tls_ca_file = $pki/ca.pem" "tls_servername = smarthost.test" "tls_wrapper = $2" \
		"max_connections = $CONNECTIONS" "min_idle = $((CONNECTIONS < 2 ? CONNECTIONS : 2))" \
		${PIPELINE_DEPTH:+"max_pipeline_depth = $PIPELINE_DEPTH"} \
		"[routes]" "* = relay"
}

# pf_sender_conf DIR PORT WRAPPER ACTIVE - the sender's main.cf for relaying to
# [127.0.0.1]:PORT: Postfix's best configuration for one smarthost
pf_sender_conf() {
	local dir=$1 port=$2 wrapper=$3 active=$4
	postconf -c "$dir/conf" -e \
		"relayhost = [127.0.0.1]:$port" "default_transport = smtp" "relay_transport = smtp" \
		"smtp_tls_security_level = verify" "smtp_tls_CAfile = $pki/ca.pem" \
		"smtp_tls_policy_maps = inline:{ { [127.0.0.1]:$port = verify match=smarthost.test } }" \
		"smtp_tls_wrappermode = $wrapper" \
		"smtp_tls_loglevel = 1" \
		"smtp_tls_connection_reuse = yes" \
		"smtp_tls_session_cache_database = btree:\$data_directory/smtp_scache" \
		"smtp_connection_cache_on_demand = yes" \
		"smtp_connection_cache_destinations = [127.0.0.1]:$port" \
		"initial_destination_concurrency = $CONNECTIONS" \
		"default_destination_concurrency_limit = $CONNECTIONS" \
		"smtp_destination_concurrency_limit = $CONNECTIONS" \
		"qmgr_message_active_limit = $active" \
		"default_process_limit = 100" \
		"smtpd_client_connection_count_limit = 0" \
		"smtpd_client_connection_rate_limit = 0" \
		"smtpd_client_message_rate_limit = 0" || return 1
	if [ -n "$PF_EXTRA" ]; then
		# shellcheck disable=SC2086 # name=value words
		postconf -c "$dir/conf" -e $PF_EXTRA || return 1
	fi
	# CONNECTIONS smtp processes at most; tlsproxy holds the TLS state
	sed -i -E "s/^(smtp +unix +- +- +n +- +)- +smtp$/\1$CONNECTIONS smtp/" "$dir/conf/master.cf" &&
		grep -qE "^smtp +unix +- +- +n +- +$CONNECTIONS smtp$" "$dir/conf/master.cf" || return 1
	printf '%s\n' "tlsproxy  unix  -       -       n       -       0       tlsproxy" >>"$dir/conf/master.cf"
}

