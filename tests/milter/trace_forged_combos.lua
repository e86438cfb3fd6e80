-- trace_forged_combos.lua - forged trace context in combinations that
-- trace_forged.lua does not cover: two of each (valid pairs, and pairs with
-- wrong signatures), a Tracestate without a Traceparent, names in odd
-- case. Every incoming field is removed (the milter asks for the change to
-- "", highest index first), a new trace starts, never a continued one.
-- log: COMBO1: trace=[0-9a-f]{32} origin=replaced client=client.example\[192.0.2.20\]
-- log: COMBO5: trace=[0-9a-f]{32} origin=replaced client=client.example\[192.0.2.20\]
dofile(libdir .. "/lib.lua")
local other = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
local wrong = "tern=2.AAAAAAAAAAAAAAAAAAAAAA"
local cases = {
	-- two of each, each pair valid
	{tp = true, ts = true, h = {{"Message-ID", valid_mid}, {"Traceparent", valid_tp},
				   {"Tracestate", valid_ts}, {"Traceparent", valid_tp}, {"Tracestate", valid_ts}}},
	-- two of each, wrong signatures, two trace ids
	{tp = true, ts = true, h = {{"Traceparent", other}, {"Tracestate", wrong},
				   {"Traceparent", valid_tp}, {"Tracestate", wrong}}},
	-- a valid Tracestate alone
	{tp = false, ts = true, h = {{"Tracestate", valid_ts}}},
	-- two Tracestates alone
	{tp = false, ts = true, h = {{"Tracestate", valid_ts}, {"Tracestate", wrong}}},
	-- names in another case, valid format, wrong signature
	{tp = true, ts = true, h = {{"TRACEPARENT", other}, {"tracestate", wrong}}},
}
for i, c in ipairs(cases) do
	local conn = open("192.0.2.20")
	expect(send(conn, {qid = "COMBO" .. i, headers = good_headers(c.h)}) == SMFIR_CONTINUE,
	       "case " .. i .. ": not accepted")
	local tid = new_trace(conn)
	expect(tid ~= string.sub(other, 4, 35) and tid ~= string.sub(valid_tp, 4, 35),
	       "case " .. i .. ": forged trace continued")
	expect(mt.eom_check(conn, MT_HDRCHANGE, "Traceparent", "") == c.tp,
	       "case " .. i .. ": Traceparent removal " .. tostring(c.tp) .. " expected")
	expect(mt.eom_check(conn, MT_HDRCHANGE, "Tracestate", "") == c.ts,
	       "case " .. i .. ": Tracestate removal " .. tostring(c.ts) .. " expected")
	mt.disconnect(conn)
end
