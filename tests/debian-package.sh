#!/bin/bash
# debian-package.sh - "dpkg-buildpackage -us -uc -b" builds the tern
# package from a copy of the source; lintian reports no error and only
# the warnings debian/README.source explains; "dpkg -i" creates the tern
# user, its directories and the modes of /etc/tern, installs the
# conffiles, enables and starts nothing; one message goes through the
# installed ternd to an smtp-sink; "dpkg --purge" removes what the
# package made and nothing else, and says that it leaves
# /var/log/tern.log* (log_file's, made by the daemons and logrotate).
#
# The install runs in a private mount namespace with overlays on /etc,
# /usr, /var and /run, the tern user and /var/lib/tern taken away there
# first: a fresh machine as far as the package can tell, and nothing of
# it reaches the host (its dpkg database, its tern user, the files other
# tests make). Not part of "make check" (it takes a minute, installs a
# package): .ci/run runs it. Run as root: tests/debian-package.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
srctop=$(cd "$here/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "1..0 # SKIP must run as root"; exit 0; }
if [ -z "${_TERN_PKG_NS:-}" ]; then
	_TERN_PKG_NS=1 exec unshare -m --propagation private "$BASH" "$0" "$@"
fi
. "$here/lib/tap.sh"
. "$here/lib/relay.sh"
for cmd in dpkg-buildpackage dh lintian swaks smtp-sink systemd-sysusers; do
	command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
done
tmp=$(tap_tmpdir)
top=$tmp	# where tests/lib/relay.sh's sink writes its output

# bail WHY - stop: what follows cannot run
bail() {
	echo "Bail out! $*"
	exit 1
}

# --- build, in a copy of the source tree ------------------------------------------
mkdir -p "$tmp/src/tern"
if git -C "$srctop" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$srctop" && git ls-files -co --exclude-standard -z | grep -zv '^build' |
		tar -c --null -T - -f -) | tar -x -C "$tmp/src/tern" -f -
else
	tar -c -C "$srctop" --exclude='./build*' --exclude=./.git -f - . | tar -x -C "$tmp/src/tern" -f -
fi
(cd "$tmp/src/tern" && dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1
tap_is "dpkg-buildpackage -us -uc -b" "$?" 0 || tail -30 "$tmp/build.log" | sed 's/^/# /'
deb=$tmp/src/tern_$(dpkg-parsechangelog -l "$srctop/debian/changelog" -S Version)_$(dpkg --print-architecture).deb
[ -f "$deb" ] || bail "no $deb"

lintian --tag-display-limit 0 "$tmp"/src/tern_*.changes >"$tmp/lintian.out" 2>&1
sed 's/^/# /' "$tmp/lintian.out"
tap_is "lintian: no errors" "$(grep '^E: ' "$tmp/lintian.out")" ""
tap_is "lintian: only the warnings debian/README.source explains" \
	"$(sed -n 's/^W: [^:]*: \([^ ]*\).*/\1/p' "$tmp/lintian.out" | sort -u | tr '\n' ' ')" \
	"$(sed -n 's/^- \([a-z0-9-]*\): .*/\1/p' "$srctop/debian/README.source" | sort -u | tr '\n' ' ')"
tap_like "the package holds the programs, units, completion and the tmpfiles/sysusers files" \
	"$(dpkg-deb -c "$deb" | awk '{ print $6 }' | tr '\n' ' ')" \
	'\./usr/sbin/ternd .*\./usr/sbin/tern-milter |\./usr/sbin/tern-milter .*\./usr/sbin/ternd '
for f in ./usr/bin/ternq ./usr/bin/tern-report ./lib/systemd/system/ternd.service \
	./lib/systemd/system/tern-milter.service ./usr/lib/sysusers.d/tern.conf \
	./usr/lib/tmpfiles.d/tern.conf ./usr/share/man/man8/ternd.8.gz \
	./usr/share/bash-completion/completions/ternq ./usr/share/bash-completion/completions/ternd; do
	tap_check "in the package: $f" sh -c "dpkg-deb -c '$deb' | awk '{ print \$6 }' | grep -qx '$f'"
done
tap_is "the conffiles" "$(dpkg-deb -f "$deb" Package >/dev/null && dpkg-deb -I "$deb" conffiles | sort | tr '\n' ' ')" \
	"/etc/cron.d/tern /etc/logrotate.d/tern /etc/tern/tern.conf "

# --- a scratch system: overlays, no tern user, no tern directories ---------------
for d in etc usr var run; do
	mkdir -p "$tmp/ov/$d/upper" "$tmp/ov/$d/work"
	mount -t overlay overlay -o "lowerdir=/$d,upperdir=$tmp/ov/$d/upper,workdir=$tmp/ov/$d/work" "/$d" ||
		bail "cannot mount an overlay on /$d"
done
sed -i '/^tern:/d' /etc/passwd /etc/group /etc/shadow /etc/gshadow
rm -rf /var/lib/tern /var/spool/tern /run/tern /etc/tern
dpkg -s tern >/dev/null 2>&1 && bail "tern is installed already"

DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >"$tmp/dpkg-i.log" 2>&1
tap_is "dpkg -i" "$?" 0 || sed 's/^/# /' "$tmp/dpkg-i.log"
tap_like "the tern user, a system user without a login shell" "$(getent passwd tern)" \
	'^tern:x:[0-9]{1,3}:[0-9]{1,3}:[^:]*:/var/lib/tern:/usr/sbin/nologin$'
tap_is "the directories, their modes and owners" \
	"$(stat -c '%n %a %U:%G' /run/tern /var/lib/tern /var/spool/tern /etc/tern /etc/tern/tern.conf | tr '\n' ' ')" \
	"/run/tern 755 tern:tern /var/lib/tern 700 tern:tern /var/spool/tern 700 tern:tern /etc/tern 750 root:tern /etc/tern/tern.conf 640 root:tern "
tap_is "tern.conf is the commented example" "$(cmp "$srctop/contrib/tern.conf.example" /etc/tern/tern.conf && echo same)" same
tap_is "the cron jobs are installed commented out" "$(grep -c '^[^#]*tern-report' /etc/cron.d/tern)" 0
tap_is "nothing enabled: no unit linked under /etc/systemd/system" \
	"$(find /etc/systemd/system -name 'tern*' 2>/dev/null)" ""
if command -v systemctl >/dev/null; then
	tap_is "systemctl --root=/ is-enabled: disabled, both" \
		"$(systemctl --root=/ is-enabled ternd.service tern-milter.service 2>&1 | tr '\n' ' ')" "disabled disabled "
else
	tap_skip "systemctl is-enabled" "systemctl not installed"
fi
# running - a process runs the installed program $1
running() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$1" ] && return 0
	done
	return 1
}
tap_is "nothing started" "$(running /usr/sbin/ternd || running /usr/sbin/tern-milter || echo none)" none
for p in /usr/sbin/ternd /usr/sbin/tern-milter /usr/bin/tern-report; do
	tap_check "as tern, ${p##*/} -n reads /etc/tern/tern.conf" runuser -u tern -- "$p" -n
done
tap_is "bash completion for ternd" \
	"$(bash -c '. /usr/share/bash-completion/completions/ternd && complete -p ternd' 2>&1)" \
	"complete -F _tern_daemon ternd"

# --- one message through the installed ternd ------------------------------------
sink s "$(free_port)" "$tmp/sink"
TERND_BIN=/usr/sbin/ternd TERNQ_BIN=/usr/bin/ternq
TERND_PEERS=$(printf '%s\n' "[peer s]" "host = [127.0.0.1]" "port = ${sink_port[s]}" "tls = none" \
	"[routes]" "* = s")
. "$here/lib/ternd.sh"
ternd_setup "$tmp/t" || bail "the installed ternd did not start"
tap_like "the installed ternd accepts a message" \
	"$(swaks --server 127.0.0.1 --port "$TERND_PORT" --from a@example.org --to b@example.com \
		--body "through the package" 2>&1 | grep '^<-  250 2\.0\.0 ')" '^<-  250 2\.0\.0 Ok: queued as [0-9A-Z]{13}$'
wait_until 10 sh -c "[ \$(find '$tmp/sink' -type f | wc -l) -ge 1 ]"
tap_is "... and relays it to the sink" "$(grep -l 'through the package' "$tmp"/sink/* 2>/dev/null | wc -l)" 1
tap_like "the installed ternq shows the empty queue" "$(ternq_ list 2>&1)" 'Mail queue is empty'
ternd_stop_checked

# --- purge ---------------------------------------------------------------------
/usr/sbin/tern-milter -K /etc/tern/trace.key && chown tern /etc/tern/trace.key
install -m 0640 -o tern -g adm /dev/null /var/log/tern.log
install -m 0640 -o tern -g adm /dev/null /var/log/tern.log.2.gz
DEBIAN_FRONTEND=noninteractive dpkg --purge tern >"$tmp/dpkg-purge.log" 2>&1
tap_is "dpkg --purge" "$?" 0 || sed 's/^/# /' "$tmp/dpkg-purge.log"
tap_is "purge removes the queue, spool and run directories, the conffiles" \
	"$(ls -d /var/lib/tern /var/spool/tern /run/tern /etc/tern/tern.conf /etc/cron.d/tern \
		/etc/logrotate.d/tern /usr/sbin/ternd 2>/dev/null)" ""
tap_is "... keeps /etc/tern with the trace key the admin made" "$(ls -A /etc/tern 2>&1)" trace.key
tap_is "... keeps /var/log/tern.log*" "$(ls /var/log/tern.log* | tr '\n' ' ')" \
	"/var/log/tern.log /var/log/tern.log.2.gz "
tap_is "... and says so" "$(grep -c '^tern: purge leaves /var/log/tern\.log\* (log_file): remove it when you no longer need it$' \
	"$tmp/dpkg-purge.log")" 1
tap_is "... removes the statoverrides" "$(dpkg-statoverride --list '/etc/tern*')" ""
tap_like "... keeps the tern user (Debian keeps system users)" "$(getent passwd tern)" '^tern:'
tap_is "dpkg no longer knows tern" "$(dpkg-query -W -f='${db:Status-Abbrev}' tern 2>&1 | tr -d ' ')" \
	"dpkg-query:nopackagesfoundmatchingtern"
tap_done
