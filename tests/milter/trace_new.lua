-- trace_new.lua - a message without trace context gets a new, signed one
-- log: 4XyZ1QID: trace=[0-9a-f]{32} origin=new client=client.example\[192.0.2.1\] from=<sender@example.org> nrcpt=2 verdict=accept$
dofile(libdir .. "/lib.lua")
local conn = open("192.0.2.1")
expect(send(conn, {rcpts = {"<a@example.net>", "<b@example.net>"}}) == SMFIR_CONTINUE, "not accepted")
new_trace(conn)
expect(not mt.eom_check(conn, MT_HDRCHANGE), "a header was changed")
expect(not mt.eom_check(conn, MT_HDRDELETE), "a header was deleted")
expect(not mt.eom_check(conn, MT_HDRADD, "Tern-Inspect"), "Tern-Inspect added")
-- a second message on the same connection gets another trace
expect(send(conn, {qid = "SECOND"}) == SMFIR_CONTINUE, "second not accepted")
new_trace(conn)
mt.disconnect(conn)
