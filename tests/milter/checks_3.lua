-- checks_3.lua - every check under one rotation of the actions (see check_matrix)
-- conf: max_received = 3
-- conf: max_headers = 8
-- conf: max_recipients = 2
-- conf: check_loop = tag
-- conf: check_from = off
-- conf: check_date = reject
-- conf: check_header_limits = tempfail
-- conf: check_header_bytes = tag
-- conf: check_recipients = off
dofile(libdir .. "/lib.lua")
check_matrix(2)
