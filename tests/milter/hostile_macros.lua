-- hostile_macros.lua - malformed macros from the MTA: a queue id that is
-- empty, 400 octets long or full of control and format characters; an
-- {auth_authen} of 600 octets with control and format characters. Each
-- message is still inspected and traced, a queue id that is not one is
-- logged as NOQUEUE (one line), and the milter keeps serving.
-- log: NOQUEUE: trace=[0-9a-f]{32} origin=new client=client.example\[192.0.2.12\] .* verdict=accept$
-- log: LATER: trace=[0-9a-f]{32} origin=new client=client.example\[192.0.2.13\] .* verdict=accept$
dofile(libdir .. "/lib.lua")
local conn = open("192.0.2.12")
local qids = {"", string.rep("Q", 400), "%s%n%x\1\2\r\nX", "\255\254 queue id"}
for i, qid in ipairs(qids) do
	local r = send(conn, {qid = qid, auth = string.rep("a\1%n", 150)})
	expect(r == SMFIR_CONTINUE, "message " .. i .. " with a malformed queue id not accepted")
	new_trace(conn)
end
mt.disconnect(conn)
local conn2 = open("192.0.2.13")
expect(send(conn2, {qid = "LATER"}) == SMFIR_CONTINUE, "a new connection is not served")
new_trace(conn2)
mt.disconnect(conn2)
