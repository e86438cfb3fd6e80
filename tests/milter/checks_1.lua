-- checks_1.lua - every check under one rotation of the actions (see check_matrix)
-- conf: max_received = 3
-- conf: max_headers = 8
-- conf: max_recipients = 2
-- conf: check_loop = reject
-- conf: check_from = tempfail
-- conf: check_date = tag
-- conf: check_header_limits = off
-- conf: check_header_bytes = reject
-- conf: check_recipients = tempfail
dofile(libdir .. "/lib.lua")
check_matrix(0)
-- log: 4XyZ1QID: trace=[0-9a-f]{32} origin=new client=client.example\[192.0.2.1\] from=<sender@example.org> nrcpt=1 verdict=reject reason=loop: message has 4 Received: headers, limit 3 \(mail loop\?\)$
-- log: verdict=tag reason=date: message has no Date: header$
