-- trace_trusted.lua - a trusted client's Traceparent is continued:
-- same trace id, new span id, the old fields removed
-- log: origin=continued client=client.example\[127.0.0.1\]
dofile(libdir .. "/lib.lua")
local conn = open("127.0.0.1")
local incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
expect(send(conn, {headers = good_headers({{"Traceparent", incoming}})}) == SMFIR_CONTINUE,
       "not accepted")
local tid, sid = new_trace(conn)
expect(tid == "4bf92f3577b34da6a3ce929d0e0e4736", "trace id not continued: " .. tid)
expect(sid ~= "00f067aa0ba902b7", "span id reused")
expect(mt.eom_check(conn, MT_HDRCHANGE, "Traceparent", ""), "old Traceparent not deleted")
mt.disconnect(conn)
