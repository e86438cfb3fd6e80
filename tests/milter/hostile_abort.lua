-- hostile_abort.lua - the MTA gives up mid-message: an abort after the
-- headers (a forged Traceparent among them), then an abrupt disconnect
-- mid-header. Nothing of the aborted message leaks into the next one
-- (no Traceparent to remove, a new trace), and the milter keeps serving.
-- log: CLEAN: trace=[0-9a-f]{32} origin=new client=client.example\[192.0.2.10\] from=<next@example.org> nrcpt=1 verdict=accept$
-- log: LATER: trace=[0-9a-f]{32} origin=new client=client.example\[192.0.2.11\] .* verdict=accept$
dofile(libdir .. "/lib.lua")
local forged = {"Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
local conn = open("192.0.2.10")
mt.macro(conn, SMFIC_MAIL, "i", "ABORTED")
expect(mt.mailfrom(conn, "<aborted@example.org>") == nil, "MAIL failed")
expect(mt.getreply(conn) == SMFIR_CONTINUE, "MAIL not continued")
expect(mt.rcptto(conn, "<r@example.net>") == nil, "RCPT failed")
for _, h in ipairs(good_headers({forged, {"Received", "a"}, {"Received", "b"}, {"Received", "c"}, {"Received", "d"}})) do
	expect(mt.header(conn, h[1], h[2]) == nil, "header failed")
end
expect(mt.abort(conn) == nil, "abort failed")
-- the next message on the same connection: clean, counted afresh
expect(send(conn, {qid = "CLEAN", from = "<next@example.org>"}) == SMFIR_CONTINUE,
       "message after the abort not accepted (state leaked?)")
new_trace(conn)
expect(not mt.eom_check(conn, MT_HDRCHANGE), "a header of the aborted message was removed")
mt.disconnect(conn)

-- abrupt disconnects: mid-header, after RCPT, right after connect
for i = 1, 3 do
	local c = open("192.0.2.10")
	if i < 3 then
		mt.macro(c, SMFIC_MAIL, "i", "CUT" .. i)
		expect(mt.mailfrom(c, "<cut@example.org>") == nil, "MAIL failed")
		expect(mt.getreply(c) == SMFIR_CONTINUE, "MAIL not continued")
		expect(mt.rcptto(c, "<r@example.net>") == nil, "RCPT failed")
		if i == 1 then
			expect(mt.header(c, forged[1], forged[2]) == nil, "header failed")
		end
	end
	mt.disconnect(c, false)
end
local conn2 = open("192.0.2.11")
expect(send(conn2, {qid = "LATER"}) == SMFIR_CONTINUE, "a new connection is not served")
new_trace(conn2)
mt.disconnect(conn2)
