-- checks_2.lua - every check under one rotation of the actions (see check_matrix)
-- conf: max_received = 3
-- conf: max_headers = 8
-- conf: max_recipients = 2
-- conf: check_loop = tempfail
-- conf: check_from = tag
-- conf: check_date = off
-- conf: check_header_limits = reject
-- conf: check_header_bytes = tempfail
-- conf: check_recipients = tag
dofile(libdir .. "/lib.lua")
check_matrix(1)
