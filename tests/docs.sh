#!/bin/bash
# docs.sh - the manual pages are clean under mandoc -Tlint (warnings and up)
# and, where groff is installed, give groff -ww (every warning, "can't
# break line" too) nothing to say at the terminal's 80 columns
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
command -v mandoc >/dev/null || tap_skip_all "mandoc not installed"
for page in "$here"/../man/*.[0-9]; do
	tap_check "mandoc -Tlint $(basename "$page")" sh -c "out=\$(mandoc -Tlint -W warning '$page' 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
done
if command -v groff >/dev/null; then
	for page in "$here"/../man/*.[0-9]; do
		tap_check "groff -ww, 80 columns: $(basename "$page")" sh -c \
			"out=\$(groff -ww -mandoc -Tutf8 -rLL=80n -z '$page' 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
	done
fi
tap_done
