#!/bin/bash
# install.sh - "make install" into a DESTDIR lays out a real deployment:
# the programs, the man pages, bash completion, a tern.conf that a second
# install keeps, systemd units that name the installed programs, pass
# "systemd-analyze verify" and rate an exposure of 2.5 or less under
# "systemd-analyze security", sysusers/tmpfiles files that create the tern
# user and its directories, and daemons that run from where they were
# installed. tern.conf and its directory are readable by the tern group
# (0640, 0750 root:tern), so the installed daemons reload it after their
# privilege drop and the cron job's tern-report runs as tern. "make
# uninstall" takes everything away again.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"

[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges)"
for cmd in make swaks python3; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
: "${top_builddir:?top_builddir must be set (run through make check)}"
: "${top_srcdir:?top_srcdir must be set (run through make check)}"

ensure_tern_user || exit 1
top=$(tap_tmpdir)
chmod 0755 "$top"
dest=$top/root
# The build's own prefix is kept (a DESTDIR install must not need another
# configure); every installed path is found below $dest.
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
sysconfdir=$(sed -n 's/^sysconfdir = //p' "$top_builddir/Makefile" | sed "s|\${prefix}|$prefix|")
sbindir=$prefix/sbin

# inst - make install/uninstall into $dest, quietly unless it fails
inst() {
	make -s -C "$top_builddir" "$1" DESTDIR="$dest" tmpfilesdir=/usr/lib/tmpfiles.d \
		sysusersdir=/usr/lib/sysusers.d >"$top/make-$1.out" 2>&1
}

tap_check "make install DESTDIR= succeeds" inst install
for f in "$sbindir/tern-milter" "$sbindir/ternd" "$prefix/bin/ternq"; do
	tap_check "installed and executable: ${f#"$prefix"/}" test -x "$dest$f"
done
for m in man8/tern-milter.8 man8/ternd.8 man1/ternq.1 man5/tern.conf.5; do
	tap_check "man page installed: $m" test -s "$dest$prefix/share/man/$m"
done
comp=$dest$prefix/share/bash-completion/completions
tap_is "bash completion for the four programs" \
	"$(cd "$comp" && for p in ternq ternd tern-milter tern-report; do
		bash -c ". ./$p && complete -p $p" 2>&1; done)" \
	"complete -F _ternq ternq
complete -F _tern_daemon ternd
complete -F _tern_daemon tern-milter
complete -F _tern_report tern-report"
conf=$dest$sysconfdir/tern/tern.conf
tap_is "tern.conf is the commented example, 0640 root:tern" \
	"$(cmp -s "$conf" "$top_srcdir/contrib/tern.conf.example" && stat -c '%a %U:%G' "$conf")" "640 root:tern"
tap_is "its directory is 0750 root:tern" "$(stat -c '%a %U:%G' "${conf%/*}")" "750 root:tern"
tap_check "the tern user reads it" runuser -u tern -- head -c 1 "$conf"

echo "# a local change" >>"$conf"
chgrp root "$conf"
inst install
tap_is "a second install keeps a changed tern.conf" "$(tail -n 1 "$conf")" "# a local change"
tap_is "... and gives one an older install left root:root to the tern group" \
	"$(stat -c '%a %U:%G' "$conf")" "640 root:tern"
chgrp nogroup "$conf"
inst install
tap_is "... but leaves the group an admin chose" "$(stat -c %G "$conf")" nogroup
chgrp root "$conf"
inst install

# --- systemd units ------------------------------------------------------------
for u in ternd tern-milter; do
	unit=$top_builddir/contrib/systemd/$u.service
	tap_is "$u.service runs the installed program" \
		"$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")" "$sbindir/$u"
	if command -v systemd-analyze >/dev/null; then
		# verify wants the program at the path the unit names: point it
		# at the DESTDIR copy, keep everything else as installed
		sed "s|^ExecStart=$sbindir/|ExecStart=$dest$sbindir/|" "$unit" >"$top/$u.service"
		tap_check "systemd-analyze verify $u.service" \
			systemd-analyze verify --man=no "$top/$u.service"
		# the sandbox: an exposure of 2.5 or less (the unit's header
		# comment gives the figure), and a comment before every directive
		exposure=$(systemd-analyze security --offline=true "$top/$u.service" 2>&1 |
			sed -n 's/^→ Overall exposure level for .*: \([0-9][0-9.]*\) .*/\1/p')
		tap_like "systemd-analyze security: $u.service exposure ${exposure:-?} <= 2.5" \
			"$(awk -v e="${exposure:-99}" 'BEGIN { print (e + 0 <= 2.5) ? "ok" : "too exposed" }')" '^ok$'
		tap_like "... the figure in its header comment" "$(sed 's/^# *//' "$unit" | tr '\n' ' ')" \
			"exposure of this unit ${exposure:-?} \\(systemd"
		tap_is "... every [Service] directive under a comment" "$(awk '
			/^\[/ { service = ($0 == "[Service]"); next }
			service && /^[A-Z]/ && prev !~ /^#/ && prev !~ /^[A-Z]/ { print FILENAME ":" NR ": " $0 }
			{ prev = $0 }' "$unit")" ""
	else
		tap_skip "systemd-analyze verify $u.service" "systemd-analyze not installed"
	fi
done

# --- sysusers and tmpfiles, applied to a scratch root ------------------------------
sysroot=$top/sysroot
mkdir -p "$sysroot/etc"
if command -v systemd-sysusers >/dev/null && command -v systemd-tmpfiles >/dev/null; then
	tap_check "systemd-sysusers creates the tern user" \
		systemd-sysusers --root="$sysroot" "$top_srcdir/contrib/tern.sysusers"
	tap_like "tern: a system user with no login shell" \
		"$(grep '^tern:' "$sysroot/etc/passwd")" '^tern:x:[0-9]+:[0-9]+:[^:]*:/var/lib/tern:/usr/sbin/nologin$'
	tap_check "systemd-tmpfiles creates the directories" \
		systemd-tmpfiles --root="$sysroot" --create "$top_srcdir/contrib/tern.tmpfiles"
	tap_is "run 0755, state and spool directories 0700, tern's" \
		"$(cd "$sysroot" && stat -c '%n %a' run/tern var/lib/tern var/spool/tern | tr '\n' ' ')" \
		"run/tern 755 var/lib/tern 700 var/spool/tern 700 "
	tap_is "their owner is the tern user of that root" \
		"$(stat -c %u "$sysroot/var/spool/tern")" "$(grep '^tern:' "$sysroot/etc/passwd" | cut -d: -f3)"
else
	tap_skip "sysusers and tmpfiles" "systemd-sysusers or systemd-tmpfiles not installed"
fi
tap_check "tmpfiles and sysusers files installed where asked" \
	test -s "$dest/usr/lib/tmpfiles.d/tern.conf" -a -s "$dest/usr/lib/sysusers.d/tern.conf"

# --- the installed daemons run --------------------------------------------------
TERND_BIN=$dest$sbindir/ternd TERNQ_BIN=$dest$prefix/bin/ternq
. "$here/../lib/ternd.sh"
ternd_setup "$top/t" || exit 1
tap_like "installed ternd accepts mail" \
	"$(swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com \
		--body installed 2>&1 | grep '^<-  250 2.0.0 Ok: queued')" '^<-  250 2\.0\.0 Ok: queued as [0-9A-Z]{13}$'
ternd_sync
tap_like "installed ternq lists it" "$(ternq_ list)" '-- 1 Kbytes in 1 Request\.'
rc=0
ternd_stop || rc=$?
tap_is "installed ternd stops cleanly" "$rc" 0
tap_like "installed tern-milter -n checks the configuration" \
	"$("$dest$sbindir/tern-milter" -n -c "$TERND_CONF" 2>&1; echo "rc=$?")" 'rc=0$'

# --- after the privilege drop, with the installed tern.conf ----------------------
# The test configuration goes into the installed file (its mode and group
# kept); both daemons reload it as tern.
mport=$(free_port)
cp -p "$conf" "$top/tern.conf.changed"
"$dest$sbindir/tern-milter" -K "$top/trace.key" && chown tern "$top/trace.key"
{
	sed "s|^\[global\]\$|&\ntrace_key_file = $top/trace.key|" "$TERND_CONF"
	printf '%s\n' "[milter]" "listen = inet:$mport@127.0.0.1"
} >"$conf"
TERND_CONF=$conf
ternd_start || exit 1
# reloaded LOG N - LOG has more than N "configuration reloaded" lines
reloaded() {
	[ "$(grep -c ': configuration reloaded from ' "$1")" -gt "$2" ]
}
kill -HUP "$TERND_PID"
wait_until 10 reloaded "$TERND_LOG" 0
tap_is "installed ternd reloads the installed tern.conf as tern (SIGHUP)" \
	"$(grep -o 'reload.*' "$TERND_LOG")" "reloaded from $conf"
"$dest$sbindir/tern-milter" -f -c "$conf" >"$top/milter.log" 2>&1 &
milter_pid=$!
tap_bg_register "$milter_pid"
wait_for_port "$mport"
kill -USR1 "$milter_pid"
wait_until 10 reloaded "$top/milter.log" 0
tap_is "installed tern-milter reloads it as tern (SIGUSR1)" \
	"$(grep -o 'reload.*' "$top/milter.log")" "reloaded from $conf"
kill -TERM "$milter_pid"
wait "$milter_pid"
tap_is "installed tern-milter stops cleanly" "$?" 0
swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com \
	--body second >/dev/null 2>&1

# The cron jobs (commented out in contrib/cron/tern) as cron runs them: as
# tern, with cron's PATH (the installed programs first), the installed
# tern.conf, the textfile written where tern may write.
mkdir -p "$top/textfile" && chown tern "$top/textfile"
n=0
while read -r cmd; do
	cmd="${cmd/\/var\/lib\/prometheus\/node-exporter/$top/textfile} -c $conf"
	out=$(runuser -u tern -- env PATH="$dest$prefix/bin:/usr/sbin:/usr/bin:/sbin:/bin" sh -c "$cmd" 2>&1)
	rc=$?
	tap_is "cron job as tern: ${cmd%% -c *}" "$rc" 0
	[ "$rc" -eq 0 ] || printf '# %s\n' "$out"
	n=$((n + 1))
done < <(sed -n 's/^#\{0,1\}[0-9*/,]\{1,\}\( [0-9*/,]\{1,\}\)\{4\}\ttern\t//p' \
	"$top_srcdir/contrib/cron/tern")
tap_is "contrib/cron/tern has two jobs" "$n" 2
tap_like "the textfile job wrote tern.prom" "$(grep -c '^tern_' "$top/textfile/tern.prom")" '^[1-9][0-9]*$'
rc=0
ternd_stop || rc=$?
tap_is "installed ternd stops cleanly after the reload" "$rc" 0
cat "$top/tern.conf.changed" >"$conf"

# --- uninstall --------------------------------------------------------------------
tap_check "make uninstall succeeds" inst uninstall
tap_is "uninstall leaves only the changed tern.conf" \
	"$(cd "$dest" && find . ! -type d | sort)" "./${sysconfdir#/}/tern/tern.conf"
tap_done
