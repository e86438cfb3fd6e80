# tests/lib/record.sh - helpers for the relay tests against record_peer.py
# (tests/lib/record_peer.py): start a recording peer, compare what it
# stored with the originals, count ternd's log lines for one peer's mail.
#
#     . tests/lib/tap.sh; . tests/lib/ternd.sh; . tests/lib/record.sh
#     top=$(tap_tmpdir); declare -A port=([NAME]=$(free_port))
#     recorder_queue NAME:COUNT[:N=LINES]...      # mail to NAME.test, into ternd
#     recorder_start NAME [record_peer options]   # into $top/NAME/
#     intact NAME                                 # "STORED DISTINCT"
#     nlog_peer NAME REGEX
#
# The originals are $top/orig/NAME.N, the content each message was sent
# with; mail for peer NAME goes to addresses @NAME.test.

_recorder=$(dirname "${BASH_SOURCE[0]}")/record_peer.py

# recorder_start NAME [options] - a record_peer on port[NAME], into $top/NAME/
recorder_start() {
	local name=$1
	shift
	mkdir -p "$top/$name/msgs"
	python3 "$_recorder" "${port[$name]}" "$top/$name/log" "$top/$name/msgs" "$@" \
		>"$top/$name/out" 2>&1 &
	tap_bg_register "$!"
	wait_for_port "${port[$name]}"
}

# intact PEER - "STORED DISTINCT": the peer's stored messages that are one
# of the originals for PEER byte for byte after ternd's Received: header,
# and how many distinct originals those are
intact() {
	python3 - "$top/orig" "$1" "$top/$1/msgs" <<-'EOF2'
		import os, re, sys
		orig, peer, msgs = sys.argv[1:]
		want = {open(os.path.join(orig, f), "rb").read(): f
		        for f in os.listdir(orig) if f.startswith(peer + ".")}
		ok, seen = 0, set()
		for name in os.listdir(msgs):
		    m = re.match(rb"Received: [^\r\n]*\r\n(?:[ \t][^\r\n]*\r\n)*(.*)\Z",
		                 open(os.path.join(msgs, name), "rb").read(), re.S)
		    if m and m.group(1) in want:
		        ok += 1
		        seen.add(want[m.group(1)])
		print(ok, len(seen))
	EOF2
}

# nlog_peer PEER REGEX - lines of ternd's log matching REGEX after
# "QID: " (or "warning: QID: ") for the queue ids of mail to PEER.test
nlog_peer() {
	local ids
	ids=$(grep -oE ": [0-9A-Z]{13}: to=<[^>]*@$1\\.test>" "$TERND_LOG" | cut -c3-15 | sort -u | paste -sd '|')
	grep -cE ": (warning: )?(${ids:-none}): $2" "$TERND_LOG"
}

# recorder_queue NAME:COUNT[:N=LINES]... - send COUNT messages for each
# peer NAME (to rcptI@NAME.test, from <>, so that no bounce makes a DSN)
# into ternd over one SMTP session, each 62 lines of about 75 octets
# (about 5000 octets) or, for message N, LINES of them; each original's
# content is kept as $top/orig/NAME.I
recorder_queue() {
	mkdir -p "$top/orig"
	python3 - "$TERND_PORT" "$top/orig" "$@" <<-'EOF2'
		import os, smtplib, sys
		port, orig = int(sys.argv[1]), sys.argv[2]
		s = smtplib.SMTP("127.0.0.1", port, "client.test", timeout=30)
		for arg in sys.argv[3:]:
		    peer, count, *big = arg.split(":")
		    big = dict(tuple(map(int, b.split("="))) for b in big)
		    for i in range(1, int(count) + 1):
		        lines = ["From: <sender@client.test>", "To: <rcpt%d@%s.test>" % (i, peer),
		                 "Subject: %s %d" % (peer, i), "Message-ID: <%s.%d@client.test>" % (peer, i), ""]
		        lines += ["%s %d line %d %s" % (peer, i, k, "x" * 60) for k in range(big.get(i, 62))]
		        body = "".join(l + "\r\n" for l in lines).encode()
		        open(os.path.join(orig, "%s.%d" % (peer, i)), "wb").write(body)
		        s.sendmail("", ["rcpt%d@%s.test" % (i, peer)], body)
		s.quit()
	EOF2
}
