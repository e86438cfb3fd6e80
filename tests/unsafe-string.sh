#!/bin/bash
# unsafe-string.sh - no sprintf, strcpy or strcat in src/: every formatted
# or copied string has a computed bound (snprintf with its return checked,
# memcpy of a length checked before). snprintf, vsnprintf and xasprintf
# do not match: the word must start at "sprintf", "strcpy" or "strcat".
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
pattern='\b(sprintf|strcpy|strcat)[[:space:]]*\('
# the pattern itself: it finds what it must and passes over the rest
tap_is "the pattern finds sprintf, strcpy, strcat" \
	"$(printf '%s\n' 'n = sprintf(b, "x");' 'strcpy (a, b);' 'strcat(a, b);' | grep -cE "$pattern")" 3
tap_is "the pattern passes over snprintf, vsnprintf, xasprintf" \
	"$(printf '%s\n' 'snprintf(b, 1, "x");' 'vsnprintf(b, 1, f, ap);' 'xasprintf("x");' \
	| grep -cE "$pattern")" 0
found=$(grep -rnE "$pattern" "$here/../src" --include='*.[ch]' --include='*.def')
[ -z "$found" ] || printf '%s\n' "$found" | sed 's/^/# /' >&2
tap_is "no sprintf, strcpy or strcat in src/" "$(printf '%s' "$found" | grep -c .)" 0
tap_done
