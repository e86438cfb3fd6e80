-- trace_signed.lua - an untrusted client's Traceparent with a valid tern=2.
-- signature (made by another node with the same key, over the Traceparent
-- and this message's Message-ID) is continued, even among other vendors'
-- tracestate members, and the new signature covers the same Message-ID
-- log: origin=continued client=client.example\[198.51.100.5\]
dofile(libdir .. "/lib.lua")
local conn = open("198.51.100.5")
local extra = {{"Message-ID", valid_mid}, {"Traceparent", valid_tp}, {"Tracestate", "vendor=abc, " .. valid_ts}}
expect(send(conn, {headers = good_headers(extra)}) == SMFIR_CONTINUE, "not accepted")
local tid, sid = new_trace(conn)
expect(tid == string.sub(valid_tp, 4, 35), "signed trace not continued: " .. tid)
expect(sid ~= string.sub(valid_tp, 37, 52), "span id reused")
expect(mt.eom_check(conn, MT_HDRCHANGE, "Traceparent", ""), "old Traceparent not deleted")
expect(mt.eom_check(conn, MT_HDRCHANGE, "Tracestate", ""), "old Tracestate not deleted")
mt.disconnect(conn)
