#!/bin/bash
# access.sh - the three grants of ternd(8) SECURITY (issue 14, item 2):
# submit (the LMTP socket, lmtp_socket_group), read the queue and
# administer (admin_group, root, the tern user), nothing shared beyond.
#   1. as postfix (lmtp_socket_group = postfix): LMTP delivery works;
#      ternq cat, ternq delete, a raw "hold" on the control socket,
#      reading data.mdb and opening a spool file all fail;
#   2. the same for a user in the tern group (the setup README advised
#      before: "usermod -a -G tern postfix"): nothing but submit;
#   3. as a member of admin_group they all work;
#   4. as nobody everything fails, LMTP too;
#   5. an installation made with the old modes (0750 directories) is
#      tightened at start, with a warning that says so.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/ternd.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (users and groups)"
command -v swaks >/dev/null || tap_skip_all "swaks not installed"
id postfix >/dev/null 2>&1 || tap_skip_all "no postfix user"
ensure_tern_user || tap_skip_all "no tern user"

top=$(tap_tmpdir)
chmod 0755 "$top"
grp=tadm$$
adm=${grp}a
old=${grp}o
groupadd "$grp" || tap_skip_all "cannot create a group"
tap_on_exit "groupdel $grp"
useradd --no-create-home -g "$grp" -s /usr/sbin/nologin "$adm" || tap_skip_all "cannot create a user"
tap_on_exit "userdel $adm"
useradd --no-create-home -G tern -s /usr/sbin/nologin "$old" || tap_skip_all "cannot create a user"
tap_on_exit "userdel $old; groupdel $old 2>/dev/null"

ternd_setup "$top/t" "lmtp_socket_group = postfix" "[global]" "admin_group = $grp" || exit 1
t=$TERND_DIR
ctl=$t/run/control.sock

# as USER CMD... - run CMD as USER (its groups too)
as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@"
}
# lmtp_as USER - one message over the LMTP socket; prints the last reply code
lmtp_as() {
	as "$1" swaks --socket "$TERND_LMTP" --protocol LMTP --from a@example.org \
		--to "b@example.com" --body "from $1" 2>&1 | grep -v '^<-* *221 ' | sed -n 's/^<[-~]* *\([0-9][0-9][0-9]\) .*/\1/p' | tail -1
}
# hold_as USER QID - a raw "hold" on the control socket; prints the answer
hold_as() {
	as "$1" /usr/bin/python3 - "$ctl" "$2" <<-'PY' 2>&1
		import socket, sys
		s = socket.socket(socket.AF_UNIX)
		try:
		    s.connect(sys.argv[1])
		    s.sendall(("hold %s\n" % sys.argv[2]).encode())
		    print(s.recv(300).decode().strip() or "closed")
		except OSError as e:
		    print("refused:", e.strerror)
	PY
}
qids() { ternq_ list --json | python3 -c 'import json,sys; [print(json.loads(l)["queue_id"]) for l in sys.stdin]'; }

# --- 1. postfix: submit and nothing else ---------------------------------------------------
tap_is "postfix: LMTP delivery works" "$(lmtp_as postfix)" 250
ternd_sync
qid=$(qids | head -1)
tap_like "... the message is queued" "$qid" '^[0-9A-Za-z]+$'
seg=$(find "$t/spool/seg" -type f | head -1)
# denied USER - every read and administer path fails for USER
denied() {
	local u=$1
	tap_check "$u: ternq cat fails" bash -c "! as_out=\$(setpriv --reuid=$u --regid=\$(id -g $u) --init-groups $_ternq_bin -c $TERND_CONF cat $qid 2>&1)"
	tap_check "$u: ternq delete fails" bash -c "! setpriv --reuid=$u --regid=\$(id -g $u) --init-groups $_ternq_bin -c $TERND_CONF delete $qid >/dev/null 2>&1"
	tap_is "$u: ... and the message is still queued" "$(qids | grep -c "^$qid\$")" 1
	tap_like "$u: a raw hold on the control socket is refused" "$(hold_as "$u" "$qid")" '^refused: Permission denied$'
	tap_check "$u: data.mdb cannot be read" bash -c "! setpriv --reuid=$u --regid=\$(id -g $u) --init-groups cat $t/state/queue/data.mdb >/dev/null 2>&1"
	tap_check "$u: a spool file cannot be opened" bash -c "! setpriv --reuid=$u --regid=\$(id -g $u) --init-groups cat $seg >/dev/null 2>&1"
	tap_check "$u: ternq list fails" bash -c "! setpriv --reuid=$u --regid=\$(id -g $u) --init-groups $_ternq_bin -c $TERND_CONF list >/dev/null 2>&1"
}
denied postfix
tap_is "... the message was never held" "$(ternq_ show "$qid" | sed -n 's/^state: //p')" queued

# --- 2. the tern group (the old advice) gives nothing but what the LMTP socket's group has --
denied "$old"

# --- 3. admin_group: read and administer ---------------------------------------------------
tap_is "$adm: ternq list shows the message" \
	"$(as "$adm" "$_ternq_bin" -c "$TERND_CONF" list --json | grep -c "\"$qid\"")" 1
tap_like "$adm: ternq cat prints the body" "$(as "$adm" "$_ternq_bin" -c "$TERND_CONF" cat "$qid")" 'from postfix'
tap_is "$adm: a raw hold on the control socket answers ok" "$(hold_as "$adm" "$qid")" ok
tap_is "... and the message is held" "$(ternq_ show "$qid" | sed -n 's/^state: //p')" hold
# (before the delete: a drained queue has its segment rotated away)
tap_is "modes with admin_group: state and spool 2750 to the group, files 0640, lock.mdb 0660, control socket 0660" \
	"$(stat -c '%n %a %G' "$t/state" "$t/spool" "$t/state/queue/data.mdb" "$t/state/queue/lock.mdb" "$ctl" "$seg" | sed "s|$t/||")" \
	"$(printf '%s\n' "state 2750 $grp" "spool 2750 $grp" "state/queue/data.mdb 640 $grp" "state/queue/lock.mdb 660 $grp" \
		"run/control.sock 660 $grp" "${seg#"$t/"} 640 $grp")"
tap_check "$adm: ternq release works" as "$adm" "$_ternq_bin" -c "$TERND_CONF" release "$qid"
tap_check "$adm: ternq delete works" as "$adm" "$_ternq_bin" -c "$TERND_CONF" delete "$qid"
tap_is "... and the message is gone" "$(qids | grep -c "^$qid\$")" 0
tap_is "the LMTP socket: 0660 tern:postfix" "$(stat -c '%a %U:%G' "$TERND_LMTP")" "660 tern:postfix"

# --- 4. nobody: nothing ------------------------------------------------------------------
tap_is "nobody: LMTP delivery fails" "$(lmtp_as nobody)" ""
lmtp_as postfix >/dev/null
ternd_sync
qid=$(qids | head -1)
seg=$(find "$t/spool/seg" -type f | head -1)
denied nobody

# --- 5. old modes are tightened at start, with a warning --------------------------------------
ternd_stop
sed -i '/^admin_group/d' "$TERND_CONF"
chmod 0750 "$t/state" "$t/spool"
chmod g-s "$t/state" "$t/spool"
: >"$TERND_LOG"
ternd_start || exit 1
tap_is "without admin_group: state and spool become 0700" "$(stat -c '%a' "$t/state" "$t/spool" | sort -u)" 700
tap_like "... with a warning saying what changed and why" "$(grep -c 'was mode 0750 group [0-9]*, now 0700 group [0-9]* (only root and the tern user reach the queue now; set admin_group' "$TERND_LOG")" '^2$'
tap_is "... the control socket is 0600 again" "$(stat -c '%a' "$ctl")" 600
tap_check "$adm: ternq list now fails" bash -c "! setpriv --reuid=$adm --regid=\$(id -g $adm) --init-groups $_ternq_bin -c $TERND_CONF list >/dev/null 2>&1"
tap_check "root: ternq list works (as the tern user)" ternq_ list
ternd_stop
tap_done
