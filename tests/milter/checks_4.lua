-- checks_4.lua - every check under one rotation of the actions (see check_matrix)
-- conf: max_received = 3
-- conf: max_headers = 8
-- conf: max_recipients = 2
-- conf: check_loop = off
-- conf: check_from = reject
-- conf: check_date = tempfail
-- conf: check_header_limits = tag
-- conf: check_header_bytes = off
-- conf: check_recipients = reject
dofile(libdir .. "/lib.lua")
check_matrix(3)
