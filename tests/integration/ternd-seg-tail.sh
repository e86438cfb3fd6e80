#!/bin/bash
# ternd-seg-tail.sh - a hostile tail on a spool segment (octets past its
# committed length: here 1,000 random ones appended while ternd was
# down) is cut at recovery, and the cut is logged with the segment, the
# offset it was cut at and the number of octets dropped; the queued
# message before it keeps its body.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"
. "$here/../lib/relay.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
command -v swaks >/dev/null || tap_skip_all "swaks not installed"

top=$(tap_tmpdir)
ternd_setup "$top/t" || exit 1	# peer "relay" without a host: mail stays queued
qa=$(send a a@example.org to-a@example.org)
tap_like "A queued" "$qa" '^[0-9A-Z]{13}$'
ternd_stop
seg=$(cd "$TERND_DIR/spool/seg" && ls)
tap_like "one segment ($seg)" "$seg" '^[0-9a-f]{16}$'
size=$(stat -c %s "$TERND_DIR/spool/seg/$seg")
head -c 1000 /dev/urandom >>"$TERND_DIR/spool/seg/$seg"
ternd_start
line=": warning: recovery: spool segment $seg: cut at offset $size, 1000 octets past its committed length dropped \\(a torn tail, or mail that never got 250\\)$"
tap_check "the cut is logged with the segment, the offset and the octets dropped" \
	wait_until 10 _atleast 1 "$line"
tap_is "logged once" "$(nlog "$line")" 1
tap_is "the segment is back to its committed length" "$(stat -c %s "$TERND_DIR/spool/seg/$seg")" "$size"
tap_is "A is still queued" "$(ternq_ show "$qa" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["queue_id"])')" "$qa"
ternd_stop
tap_is "ternd stops cleanly" "$?" 0
tap_done
