-- trace_auth.lua - with trust_authenticated = yes (the default) an
-- authenticated client's Traceparent is continued
-- log: origin=continued client=client.example\[203.0.113.9\]
dofile(libdir .. "/lib.lua")
local conn = open("203.0.113.9")
local incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
expect(send(conn, {auth = "alice", headers = good_headers({{"Traceparent", incoming}})})
       == SMFIR_CONTINUE, "not accepted")
local tid = new_trace(conn)
expect(tid == "4bf92f3577b34da6a3ce929d0e0e4736", "authenticated trace not continued")
mt.disconnect(conn)
