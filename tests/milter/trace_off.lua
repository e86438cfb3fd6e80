-- trace_off.lua - trace = no: no trace headers, inspection still runs
-- conf: trace = no
-- log: trace=- origin=off .* verdict=tag reason=date: message has no Date: header
dofile(libdir .. "/lib.lua")
local conn = open("192.0.2.1")
local incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
expect(send(conn, {headers = {{"From", "a@example.org"}, {"Traceparent", incoming}}}) == SMFIR_CONTINUE,
       "not accepted")
expect(mt.getheader(conn, "Traceparent", 0) == nil, "Traceparent inserted")
expect(not mt.eom_check(conn, MT_HDRCHANGE), "a header was changed")
expect(mt.eom_check(conn, MT_HDRADD, "Tern-Inspect", "date=fail"), "date not tagged")
mt.disconnect(conn)
