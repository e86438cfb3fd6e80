-- trace_auth_untrusted.lua - trust_authenticated = no: authentication alone
-- does not make a Traceparent trusted; trusted_networks is honoured
-- conf: trust_authenticated = no
-- conf: trusted_networks = 10.0.0.0/8
-- log: origin=replaced client=client.example\[203.0.113.9\]
-- log: origin=replaced client=client.example\[127.0.0.1\]
-- log: origin=continued client=client.example\[10.1.2.3\]
dofile(libdir .. "/lib.lua")
local incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
for _, c in ipairs({{"203.0.113.9", false}, {"127.0.0.1", false}, {"10.1.2.3", true}}) do
	local conn = open(c[1])
	expect(send(conn, {auth = "alice", headers = good_headers({{"Traceparent", incoming}})})
	       == SMFIR_CONTINUE, "not accepted")
	local tid = new_trace(conn)
	expect((tid == "4bf92f3577b34da6a3ce929d0e0e4736") == c[2], c[1] .. ": wrong trust decision")
	mt.disconnect(conn)
end
