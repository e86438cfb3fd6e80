-- hostile_headers.lua - 10,000 header fields: check_header_limits (reject,
-- the default) refuses the message with the count, the milter stays up and
-- the next message on the connection is fine (a 100 KB field is in
-- tests/integration/milter-hostile.sh: miltertest cannot send one)
-- log: BIGHDRS: trace=[0-9a-f]{32} origin=new client=client.example\[192.0.2.9\] .* verdict=reject reason=header_limits: message has 10003 header fields, limit 1000$
-- log: AFTER: trace=[0-9a-f]{32} origin=new client=client.example\[192.0.2.9\] .* verdict=accept$
dofile(libdir .. "/lib.lua")
local conn = open("192.0.2.9")
local many = good_headers()
for i = 1, 10000 do
	table.insert(many, {"X-M", "v"})	-- 8 octets each: under max_header_size
end
expect(send(conn, {qid = "BIGHDRS", headers = many}) == SMFIR_REPLYCODE, "10,000 fields: not refused")
rejected(conn, "552", "5.3.4", "message has 10003 header fields, limit 1000")
expect(mt.getheader(conn, "Traceparent", 0) == nil, "10,000 fields: traced anyway")
expect(send(conn, {qid = "AFTER"}) == SMFIR_CONTINUE, "next message not accepted")
new_trace(conn)
mt.disconnect(conn)
