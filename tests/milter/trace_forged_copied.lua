-- trace_forged_copied.lua - a validly signed Traceparent/Tracestate pair
-- copied onto another message is not continued: the signature binds the
-- Message-ID. Nor is a pair signed the way tern did before 2 (the
-- Traceparent alone, "tern=<sig>"): that reads as unsigned. Each gets a
-- new trace, signed over its own Message-ID.
-- log: COPY1: trace=[0-9a-f]{32} origin=replaced client=client.example\[192.0.2.30\]
-- log: COPY6: trace=[0-9a-f]{32} origin=replaced client=client.example\[192.0.2.30\]
dofile(libdir .. "/lib.lua")
local other_mid = "<other.2@client.example>"
local cases = {
	-- the pair, copied onto a message with another Message-ID
	{{"Message-ID", other_mid}, {"Traceparent", valid_tp}, {"Tracestate", valid_ts}},
	-- onto a message without one
	{{"Traceparent", valid_tp}, {"Tracestate", valid_ts}},
	-- with a second Message-ID added after the one it was signed for
	{{"Message-ID", valid_mid}, {"Message-ID", other_mid},
	 {"Traceparent", valid_tp}, {"Tracestate", valid_ts}},
	-- the old, unversioned signature over the Traceparent alone, on
	-- another message, on the same one, and on one without a Message-ID
	{{"Message-ID", other_mid}, {"Traceparent", valid_tp}, {"Tracestate", old_ts}},
	{{"Message-ID", valid_mid}, {"Traceparent", valid_tp}, {"Tracestate", old_ts}},
	{{"Traceparent", valid_tp}, {"Tracestate", old_ts}},
}
for i, h in ipairs(cases) do
	local conn = open("192.0.2.30")
	expect(send(conn, {qid = "COPY" .. i, headers = good_headers(h)}) == SMFIR_CONTINUE,
	       "case " .. i .. ": not accepted")
	local tp = mt.getheader(conn, "Traceparent", 0)
	expect(tp ~= nil and string.sub(tp, 4, 35) ~= string.sub(valid_tp, 4, 35),
	       "case " .. i .. ": copied trace continued")
	new_trace(conn)
	expect(mt.eom_check(conn, MT_HDRCHANGE, "Traceparent", ""), "case " .. i .. ": Traceparent kept")
	expect(mt.eom_check(conn, MT_HDRCHANGE, "Tracestate", ""), "case " .. i .. ": Tracestate kept")
	mt.disconnect(conn)
end
