-- lib.lua - shared steps for the tern-milter miltertest scripts.
-- Globals sock, valid_tp, valid_mid, valid_ts (tern=2., the signature of
-- valid_tp with Message-ID valid_mid), old_ts (the unversioned signature of
-- tern before 2, of valid_tp alone) and libdir come from run-miltertest.sh.

TP_PATTERN = "^00%-(" .. string.rep("%x", 32) .. ")%-(" .. string.rep("%x", 16) .. ")%-01$"

-- expect - fail the script with msg unless cond holds (miltertest does not
-- print Lua errors, so say it first)
function expect(cond, msg)
	if not cond then
		mt.echo("FAIL: " .. msg)
		error(msg, 2)
	end
end

-- open - connect to the milter as an SMTP client at ip
function open(ip, host)
	local conn = mt.connect(sock, 50, 0.1)
	expect(conn ~= nil, "cannot connect to tern-milter at " .. sock)
	expect(mt.conninfo(conn, host or "client.example", ip) == nil, "conninfo failed")
	expect(mt.getreply(conn) == SMFIR_CONTINUE, "connect not continued")
	return conn
end

-- send - one message; returns the milter's reply to the last step reached.
-- m.headers is a list of {name, value}; m.auth sets {auth_authen}. Sets
-- sent_msgid to the first Message-ID sent, or "".
function send(conn, m)
	local macros = {"i", m.qid or "4XyZ1QID"}
	if m.auth then
		table.insert(macros, "{auth_authen}")
		table.insert(macros, m.auth)
	end
	mt.macro(conn, SMFIC_MAIL, table.unpack(macros))
	expect(mt.mailfrom(conn, m.from or "<sender@example.org>") == nil, "MAIL failed")
	expect(mt.getreply(conn) == SMFIR_CONTINUE, "MAIL not continued")
	for _, r in ipairs(m.rcpts or {"<rcpt@example.net>"}) do
		expect(mt.rcptto(conn, r) == nil, "RCPT failed")
		if mt.getreply(conn) ~= SMFIR_CONTINUE then
			return mt.getreply(conn)
		end
	end
	local headers = m.headers or {
		{"From", "Sender <sender@example.org>"},
		{"Date", "Mon, 30 Nov 2026 10:00:00 +0000"},
		{"Subject", "test"},
	}
	sent_msgid = ""
	for _, h in ipairs(headers) do
		expect(mt.header(conn, h[1], h[2]) == nil, "header " .. h[1] .. " failed")
		if string.lower(h[1]) == "message-id" and sent_msgid == "" then
			sent_msgid = h[2]	-- the first one: what ternd reads
		end
	end
	-- EOH and body are skipped (SMFIP_NOEOH, SMFIP_NOBODY): not sent
	local err = mt.eom(conn)
	expect(err == nil, "EOM failed: " .. tostring(err))
	return mt.getreply(conn)
end

-- good_headers - a valid header block plus extra fields
function good_headers(extra)
	local h = {
		{"From", "Sender <sender@example.org>"},
		{"Date", "Mon, 30 Nov 2026 10:00:00 +0000"},
		{"Subject", "test"},
	}
	for _, e in ipairs(extra or {}) do
		table.insert(h, e)
	end
	return h
end

-- new_trace - the Traceparent/Tracestate the milter inserted; checks their
-- form and position, and asks run-miltertest.sh to verify the signature
-- over them and the first Message-ID that send() sent (none: "")
function new_trace(conn)
	local tp = mt.getheader(conn, "Traceparent", 0)
	local ts = mt.getheader(conn, "Tracestate", 0)
	expect(tp ~= nil, "no Traceparent inserted")
	expect(ts ~= nil, "no Tracestate inserted")
	local tid, sid = string.match(tp, TP_PATTERN)
	expect(tid ~= nil, "malformed Traceparent: " .. tp)
	expect(tid ~= string.rep("0", 32) and sid ~= string.rep("0", 16), "zero id: " .. tp)
	expect(string.match(ts, "^tern=2%.[%w_-]+$") and #ts == 29, "malformed Tracestate: " .. ts)
	expect(mt.eom_check(conn, MT_HDRINSERT, "Traceparent", tp, 0), "Traceparent not at index 0")
	expect(mt.eom_check(conn, MT_HDRINSERT, "Tracestate", ts, 0), "Tracestate not at index 0")
	mt.echo("SIGCHECK " .. tp .. " " .. ts .. " " .. sent_msgid)
	return tid, sid
end

-- rejected - the reply is exactly code xcode text
function rejected(conn, code, xcode, text)
	expect(mt.eom_check(conn, MT_SMTPREPLY, code, xcode, text),
	       "expected reply " .. code .. " " .. xcode .. " " .. text)
end

-- The inspection matrix: every check under every action. Script k sets
-- check number i (in CHECKS order) to ACTIONS[(i + k) % 4] with "-- conf:"
-- lines, and calls check_matrix(k).
ACTIONS = {"reject", "tempfail", "tag", "off"}
CHECKS = {
	{name = "loop", code = {"554", "5.4.6"}, tcode = {"451", "4.4.6"},
	 text = "message has 4 Received: headers, limit 3 (mail loop?)",
	 headers = good_headers({{"Received", "a"}, {"Received", "b"}, {"Received", "c"}, {"Received", "d"}})},
	{name = "from", code = {"550", "5.6.0"}, tcode = {"451", "4.6.0"},
	 text = "message has 2 From: headers, only one is allowed",
	 headers = good_headers({{"From", "other@example.org"}})},
	{name = "date", code = {"550", "5.6.0"}, tcode = {"451", "4.6.0"},
	 text = "message has no Date: header",
	 headers = {{"From", "a@example.org"}, {"Subject", "no date"}}},
	{name = "header_limits", code = {"552", "5.3.4"}, tcode = {"452", "4.3.4"},
	 text = "message has 9 header fields, limit 8",
	 headers = good_headers({{"X-1", "1"}, {"X-2", "2"}, {"X-3", "3"}, {"X-4", "4"}, {"X-5", "5"}, {"X-6", "6"}})},
	{name = "header_bytes", code = {"550", "5.6.0"}, tcode = {"451", "4.6.0"},
	 text = "header field Subject: contains a bare CR",
	 headers = {{"From", "a@example.org"}, {"Date", "Mon, 30 Nov 2026 10:00:00 +0000"}, {"Subject", "bare\rCR"}}},
	{name = "recipients"},
}

-- check_matrix - run every check under the actions of rotation k
function check_matrix(k)
	local ok, err = pcall(matrix, k)
	if not ok then
		mt.echo("FAIL: " .. tostring(err))
		error(err)
	end
end

-- matrix - check_matrix's work
function matrix(k)
	for i, c in ipairs(CHECKS) do
		local action = ACTIONS[(i - 1 + k) % 4 + 1]
		local what = c.name .. " under " .. action
		local conn = open("192.0.2.1")
		if c.name == "recipients" then
			local r = send(conn, {rcpts = {"<r1@example.net>", "<r2@example.net>", "<r3@example.net>"}})
			if action == "reject" or action == "tempfail" then
				expect(r == SMFIR_REPLYCODE, what .. ": third RCPT not refused")
			else
				expect(r == SMFIR_CONTINUE, what .. ": not accepted")
				expect(mt.eom_check(conn, MT_HDRADD, "Tern-Inspect", "recipients=fail") == (action == "tag"),
				       what .. ": wrong tagging")
			end
		else
			local r = send(conn, {headers = c.headers})
			if action == "reject" then
				expect(r == SMFIR_REPLYCODE, what .. ": not refused")
				rejected(conn, c.code[1], c.code[2], c.text)
				expect(mt.getheader(conn, "Traceparent", 0) == nil, what .. ": traced")
			elseif action == "tempfail" then
				expect(r == SMFIR_REPLYCODE, what .. ": not refused")
				rejected(conn, c.tcode[1], c.tcode[2], c.text)
			else
				expect(r == SMFIR_CONTINUE, what .. ": not accepted")
				expect(mt.eom_check(conn, MT_HDRADD, "Tern-Inspect", c.name .. "=fail") == (action == "tag"),
				       what .. ": wrong tagging")
				new_trace(conn)
			end
		end
		mt.disconnect(conn)
	end
end
