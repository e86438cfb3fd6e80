#!/bin/bash
# docs.sh - the manual pages are clean under mandoc -Tlint (warnings and up)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
command -v mandoc >/dev/null || tap_skip_all "mandoc not installed"
for page in "$here"/../man/*.[0-9]; do
	tap_check "mandoc -Tlint $(basename "$page")" sh -c "out=\$(mandoc -Tlint -W warning '$page' 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
done
tap_done
