-- negotiate.lua - the milter asks only for what it uses
dofile(libdir .. "/lib.lua")
local conn = open("127.0.0.1")
expect(mt.test_action(conn, SMFIF_ADDHDRS), "SMFIF_ADDHDRS not requested")
expect(mt.test_action(conn, SMFIF_CHGHDRS), "SMFIF_CHGHDRS not requested")
expect(not mt.test_action(conn, SMFIF_CHGBODY), "SMFIF_CHGBODY requested")
expect(not mt.test_action(conn, SMFIF_ADDRCPT), "SMFIF_ADDRCPT requested")
expect(not mt.test_action(conn, SMFIF_DELRCPT), "SMFIF_DELRCPT requested")
expect(not mt.test_action(conn, SMFIF_QUARANTINE), "SMFIF_QUARANTINE requested")
for _, step in ipairs({SMFIP_NOBODY, SMFIP_NOHELO, SMFIP_NOUNKNOWN, SMFIP_NOEOH}) do
	expect(mt.test_option(conn, step), "step " .. step .. " not skipped")
end
expect(not mt.test_option(conn, SMFIP_NOHDRS), "headers skipped")
expect(not mt.test_option(conn, SMFIP_NORCPT), "RCPT skipped")
-- DATA is answered on purpose (see tm_negotiate): not skipped
expect(not mt.test_option(conn, SMFIP_NODATA), "DATA skipped")
mt.disconnect(conn)
