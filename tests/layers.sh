#!/bin/bash
# layers.sh - ternd's files call one way: each file of src/ternd is in a
# layer of the file map (src/ternd/README, the "layer NAME: FILES" lines,
# lowest first), and no file includes a header of a layer above its own.
# Where a lower layer must tell a higher one something, it calls a
# function the higher one registered (commit_on_ready, sched_start's
# hooks), so that nothing below knows what is above. The checker is run
# on a scratch tree first, so that it is seen to find what it must.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"

# layer_check DIR - one line per file of DIR (*.c, *.h) that is in no
# layer of DIR/README, and per include of DIR's own headers that runs up
layer_check() {
	local dir=$1
	awk '
		FNR == NR {	# the README: "layer NAME: stem stem ..."
			if ($1 == "layer" && $2 ~ /:$/) {
				n++
				for (i = 3; i <= NF; i++) { layer[$i] = n; lname[n] = substr($2, 1, length($2) - 1) }
			}
			next
		}
		FNR == 1 {
			file = FILENAME; sub(/.*\//, "", file)
			stem = file; sub(/\.[ch]$/, "", stem)
			if (!(stem in layer)) print file ": in no layer"
		}
		/^[ \t]*#[ \t]*include[ \t]*"[a-z_0-9]+\.h"/ {
			h = $0; sub(/^[^"]*"/, "", h); sub(/\.h".*/, "", h)
			if ((h in layer) && (stem in layer) && layer[h] > layer[stem])
				print file ": includes " h ".h of " lname[layer[h]] ", above " lname[layer[stem]]
		}
	' "$dir/README" "$dir"/*.[ch]
}

# the checker on a scratch tree: a file in no layer, an include that runs
# up, one that runs down and one of the same layer
scratch=$(tap_tmpdir)
printf '%s\n' "layer low: a b" "layer high: c" >"$scratch/README"
printf '%s\n' '#include "c.h"' '#include "b.h"' >"$scratch/a.c"
printf '%s\n' '#include "a.h"' >"$scratch/c.c"
: >"$scratch/a.h" >"$scratch/b.h" >"$scratch/c.h"
printf '%s\n' '#include "a.h"' >"$scratch/d.c"
tap_is "the check finds a file in no layer and an include that runs up, nothing else" \
	"$(layer_check "$scratch" | sort | tr '\n' '|')" "a.c: includes c.h of high, above low|d.c: in no layer|"

found=$(layer_check "$here/../src/ternd")
[ -z "$found" ] || printf '%s\n' "$found" | sed 's/^/# /' >&2
tap_is "the file map names the layers" "$(grep -c '^layer [a-z]*:' "$here/../src/ternd/README")" 6
tap_is "every file of src/ternd is in a layer" "$(printf '%s\n' "$found" | grep -c ': in no layer$')" 0
tap_is "no file includes a header of a layer above its own" "$(printf '%s\n' "$found" | grep -c ': includes ')" 0
tap_done
