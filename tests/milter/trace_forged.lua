-- trace_forged.lua - an untrusted client's Traceparent with a wrong (or
-- missing) signature is removed with its Tracestate and a new trace starts
-- log: origin=replaced client=client.example\[192.0.2.7\]
dofile(libdir .. "/lib.lua")
local incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
local cases = {
	{{"Traceparent", incoming}, {"Tracestate", "tern=2.AAAAAAAAAAAAAAAAAAAAAA"}},
	{{"Traceparent", incoming}},
	{{"Traceparent", valid_tp}, {"Tracestate", "tern=2.AAAAAAAAAAAAAAAAAAAAAA"}},
	-- a valid signature, but for another traceparent
	{{"Traceparent", incoming}, {"Tracestate", valid_ts}},
	-- valid pair, twice: two Traceparent fields are never continued
	{{"Message-ID", valid_mid}, {"Traceparent", valid_tp}, {"Tracestate", valid_ts}, {"Traceparent", valid_tp}},
	-- valid pair plus a second tern= member
	{{"Message-ID", valid_mid}, {"Traceparent", valid_tp}, {"Tracestate", valid_ts},
	 {"Tracestate", "tern=2.BBBBBBBBBBBBBBBBBBBBBB"}},
}
for i, extra in ipairs(cases) do
	local conn = open("192.0.2.7")
	expect(send(conn, {headers = good_headers(extra)}) == SMFIR_CONTINUE, "case " .. i .. ": not accepted")
	local tid = new_trace(conn)
	expect(tid ~= "4bf92f3577b34da6a3ce929d0e0e4736" and tid ~= string.sub(valid_tp, 4, 35),
	       "case " .. i .. ": forged trace continued")
	expect(mt.eom_check(conn, MT_HDRCHANGE, "Traceparent", ""), "case " .. i .. ": Traceparent kept")
	mt.disconnect(conn)
end
