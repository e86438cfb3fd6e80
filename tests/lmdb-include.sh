#!/bin/bash
# lmdb-include.sh - only the store's own files (src/lib/store*) include
# lmdb.h: everything else reaches the queue, the history and the milter
# journal through store.h and store_journal.h, so that LMDB's caveats
# (short transactions, one writer, map growth) stay the store's contract.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
pattern='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]lmdb\.h[>"]'
# the pattern itself: it finds what it must and passes over the rest
tap_is "the pattern finds an include of lmdb.h" \
	"$(printf '%s\n' '#include <lmdb.h>' '#  include "lmdb.h"' ' #include<lmdb.h>' | grep -cE "$pattern")" 3
tap_is "the pattern passes over mentions and other headers" \
	"$(printf '%s\n' ' * lmdb.h (CONVENTIONS.md)' '#include <lmdb_x.h>' '#include "store_lmdb.h"' \
	| grep -cE "$pattern")" 0
found=$(cd "$here/.." && grep -rlE "$pattern" src --include='*.[ch]' --include='*.def' | sort)
# and it finds the store's own include: the grep reads the tree
tap_is "store_priv.h includes lmdb.h" "$(printf '%s\n' "$found" | grep -cx 'src/lib/store_priv.h')" 1
outside=$(printf '%s\n' "$found" | grep -v '^src/lib/store[^/]*$' | grep .)
[ -z "$outside" ] || printf '%s\n' "$outside" | sed 's/^/# includes lmdb.h: /' >&2
tap_is "no file outside src/lib/store* includes lmdb.h" "$(printf '%s' "$outside" | grep -c .)" 0
tap_done
