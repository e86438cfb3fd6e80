# tests/lib/foreign_mta.sh - Exim and OpenSMTPD from Debian's packages, for
# the interoperability tests, unpacked and never installed (they conflict
# with the installed Postfix).
#
#     . tests/lib/tap.sh; . tests/lib/foreign_mta.sh
#     foreign_mta_need exim [CMD...]     # skip unless root, CMDs, unpacked
#     exim_smarthost DIR PORT PKI [OPTION...]   # or exim_main + exim_daemon
#     smtpd_sink DIR PORT [LINE...]      # (after foreign_mta_need opensmtpd)
#
# (foreign_mta_unpack, foreign_mta_skip and foreign_ns are the parts.)
#
# foreign_mta_unpack downloads the set's packages with apt-get download,
# unpacks them with dpkg -x and keeps the tree, once per machine and
# version, under $TERN_FOREIGN_MTA_CACHE (default /var/cache/tern-tests),
# keyed by the candidate version of every package, so that the plain and
# ASan suites and reruns do not download again. It sets FOREIGN_ROOT (the
# tree), FOREIGN_VERSION (the daemon package's Debian version),
# FOREIGN_LIBS (LD_LIBRARY_PATH for the unpacked libraries) and
# FOREIGN_BIN. It returns 1 (skip: FOREIGN_WHY says why) when the
# packages cannot be downloaded, and 2 (fail) when the unpacked daemon
# misses a library: then the package list below is wrong.
#
# The daemons look up users that do not exist here (Debian-exim,
# opensmtpd, opensmtpq) and paths compiled in (/var/spool/smtpd,
# /usr/libexec/opensmtpd): foreign_ns runs them in a private mount
# namespace where /etc/passwd and /etc/group also name those users (as
# uid and gid 65534, nobody) and where BINDS ("SRC:DST ...") are bind
# mounts. Nothing on the host changes.

if [ -n "${_FOREIGN_MTA_SH_LOADED:-}" ]; then return 0; fi
_FOREIGN_MTA_SH_LOADED=1

# The sets: packages (the daemon's first), the daemon, its users.
declare -A _foreign_pkgs=(
	[exim]="exim4-daemon-light libidn12"
	[opensmtpd]="opensmtpd"
)
declare -A _foreign_bin=([exim]=usr/sbin/exim4 [opensmtpd]=usr/sbin/smtpd)
declare -A _foreign_users=([exim]="Debian-exim" [opensmtpd]="opensmtpd opensmtpq")
_foreign_set=

# _foreign_versions PKGS... - "pkg=version" of each candidate; fails if one has none
_foreign_versions() {
	local pkg ver
	for pkg in "$@"; do
		ver=$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^  Candidate: //p')
		[ -n "$ver" ] && [ "$ver" != "(none)" ] || return 1
		printf '%s=%s\n' "$pkg" "$ver"
	done
}

# _foreign_fetch SET DEST - download and unpack SET's packages into DEST/root
_foreign_fetch() {
	local pkgs=${_foreign_pkgs[$1]} deb
	mkdir -p "$2/debs" && chmod 0755 "$2" "$2/debs" || return 1
	chown _apt "$2/debs" 2>/dev/null # apt's download sandbox, where it exists
	# shellcheck disable=SC2086
	(cd "$2/debs" && apt-get download -q $pkgs) >"$2/download.log" 2>&1 || return 1
	for deb in "$2"/debs/*.deb; do
		dpkg -x "$deb" "$2/root" || return 1
	done
	# No set-user-ID binaries in a cache; the tests start the daemons as
	# root or as the user they run as.
	chmod -R u-s,g-s,go+rX "$2/root"
}

# foreign_mta_unpack SET - the unpacked tree of SET (exim, opensmtpd), made once
foreign_mta_unpack() {
	local set=$1 cache=${TERN_FOREIGN_MTA_CACHE:-/var/cache/tern-tests} versions key dir tmp missing
	_foreign_set=$set
	FOREIGN_WHY=
	# shellcheck disable=SC2086
	versions=$(_foreign_versions ${_foreign_pkgs[$set]}) ||
		versions=$(apt-get update -q >/dev/null 2>&1 && _foreign_versions ${_foreign_pkgs[$set]}) || {
		FOREIGN_WHY="apt-cache knows no candidate of ${_foreign_pkgs[$set]}"
		return 1
	}
	FOREIGN_VERSION=$(sed -n '1s/^[^=]*=//p' <<<"$versions")
	key=$(printf '%s' "$set $versions" | tr -c 'A-Za-z0-9.+-' '_')
	dir=$cache/$key
	mkdir -p "$cache" && chmod 0755 "$cache" || {
		FOREIGN_WHY="cannot create $cache"
		return 1
	}
	(
		flock -w 300 9 || exit 1
		[ -e "$dir/done" ] && exit 0
		tmp=$(mktemp -d "$cache/.fetch.XXXXXX") || exit 1
		if ! _foreign_fetch "$set" "$tmp" && ! { apt-get update -q >/dev/null 2>&1 &&
			rm -rf "$tmp/debs" "$tmp/root" && _foreign_fetch "$set" "$tmp"; }; then
			cp "$tmp/download.log" "$cache/.last-failure.log" 2>/dev/null
			rm -rf "$tmp"
			exit 1
		fi
		printf '%s\n' "$versions" >"$tmp/versions"
		rm -rf "$dir" && mv "$tmp" "$dir" && touch "$dir/done"
	) 9>"$cache/.lock" || {
		FOREIGN_WHY="apt-get download ${_foreign_pkgs[$set]} failed (see $cache/.last-failure.log)"
		return 1
	}
	FOREIGN_ROOT=$dir/root
	FOREIGN_BIN=$FOREIGN_ROOT/${_foreign_bin[$set]}
	FOREIGN_LIBS=$(find "$FOREIGN_ROOT" -name 'lib*.so*' -printf '%h\n' | sort -u | paste -sd:)
	missing=$(LD_LIBRARY_PATH=$FOREIGN_LIBS ldd "$FOREIGN_BIN" 2>&1 | awk '/not found/ { print $1 }' | paste -sd' ')
	if [ -n "$missing" ]; then
		FOREIGN_WHY="$FOREIGN_BIN needs $missing, in no package of the set"
		return 2
	fi
}

# foreign_mta_skip - after foreign_mta_unpack failed: skip the script, or
# bail out if the set itself is wrong (status 2)
foreign_mta_skip() {
	local rc=$?
	if [ "$rc" -eq 2 ]; then
		echo "Bail out! $FOREIGN_WHY"
		exit 1
	fi
	tap_skip_all "$FOREIGN_WHY"
}

# foreign_ns DIR BINDS CMD... - run CMD (exec'd: its PID is this call's,
# when run with &) in a private mount namespace with the set's users in
# /etc/passwd and /etc/group (files written to DIR), the unpacked tree
# mounted at DIR/root first (so that a bind over /var does not hide the
# cache: CMD and BINDS name DIR/root/...), then each SRC:DST of BINDS
# bind-mounted; LD_LIBRARY_PATH names the unpacked libraries
foreign_ns() {
	local dir=$1 binds=$2 user
	shift 2
	cp /etc/passwd "$dir/passwd" && cp /etc/group "$dir/group" && mkdir -p "$dir/root" || return 1
	for user in ${_foreign_users[$_foreign_set]}; do
		echo "$user:x:65534:65534::/nonexistent:/usr/sbin/nologin" >>"$dir/passwd"
		echo "$user:x:65534:" >>"$dir/group"
	done
	chmod 0644 "$dir/passwd" "$dir/group"
	exec unshare -m --propagation private sh -c '
		dir=$1 binds=$2 libs=$3 root=$4
		shift 4
		mount --bind "$dir/passwd" /etc/passwd && mount --bind "$dir/group" /etc/group &&
			mount --bind "$root" "$dir/root" || exit 1
		for b in $binds; do
			mount --bind "${b%%:*}" "${b#*:}" || exit 1
		done
		LD_LIBRARY_PATH=$libs exec "$@"' sh "$dir" "$binds" "${FOREIGN_LIBS//$FOREIGN_ROOT/$dir/root}" \
		"$FOREIGN_ROOT" "$@"
}

# Exim, as nobody (Exim's user here), with a configuration of the test's:
#
#     exim_main DIR PORT >DIR/exim.conf; printf ... >>DIR/exim.conf
#     exim_daemon DIR PORT     # in the test's shell; sets EXIM_PID
#     exim_run DIR -qf         # a queue run, in the foreground
#
# DIR/spool is Exim's spool (DIR/spool/input holds what it queued),
# DIR/log/mainlog its log.

# exim_main DIR PORT [OPTION...] - print the main section of a configuration
# for an Exim on 127.0.0.1:PORT that keeps its files below DIR
exim_main() {
	local dir=$1 port=$2
	shift 2
	mkdir -p "$dir/spool" "$dir/log" && chown 65534:65534 "$dir/spool" "$dir/log" || return 1
	printf '%s\n' "primary_hostname = exim.test" "exim_user = Debian-exim" "exim_group = Debian-exim" \
		"spool_directory = $dir/spool" "log_file_path = $dir/log/%slog" "pid_file_path = $dir/exim.pid" \
		"keep_environment = LD_LIBRARY_PATH" "daemon_smtp_ports = $port" "local_interfaces = 127.0.0.1" \
		"log_selector = +smtp_confirmation +tls_resumption +received_recipients" \
		"deliver_drop_privilege = true" "$@"
}

# exim_run DIR ARG... - Exim (exec'd) with DIR/exim.conf, as nobody
exim_run() {
	local dir=$1
	shift
	# Exim execs itself by its compiled-in path (to pass a connection on
	# to the next message, to send a bounce): /usr/sbin is the package's.
	foreign_ns "$dir" "$dir/root/usr/sbin:/usr/sbin" setpriv --reuid 65534 --regid 65534 --clear-groups \
		"/${_foreign_bin[exim]}" -C "$dir/exim.conf" "$@"
}

# exim_daemon DIR PORT - start Exim's daemon with DIR/exim.conf, wait until
# it listens; sets EXIM_PID
exim_daemon() {
	(exim_run "$1" -bdf) >>"$1/exim.out" 2>&1 &
	EXIM_PID=$!
	tap_bg_register "$EXIM_PID"
	if ! { wait_until 20 grep -q "daemon started" "$1/log/mainlog" 2>/dev/null && wait_for_port "$2"; }; then
		tap_diag "Exim did not start:" "$(cat "$1/exim.out" "$1/log/paniclog" 2>/dev/null)"
		return 1
	fi
}

# exim_smarthost DIR PORT PKI [OPTION...] - write DIR/exim.conf for a
# smarthost that accepts every recipient over STARTTLS (PKI's
# smarthost.test certificate, session tickets issued), offers CHUNKING and
# PIPELINING, and keeps each message in its queue (DIR/spool/input, no
# delivery); then start it (sets EXIM_PID)
exim_smarthost() {
	local dir=$1 port=$2 pki=$3
	shift 3
	mkdir -p "$dir" && chmod 0755 "$dir" || return 1
	{
		exim_main "$dir" "$port" "tls_certificate = $pki/server.pem" "tls_privatekey = $pki/server.key" \
			"tls_advertise_hosts = *" "tls_resumption_hosts = *" "chunking_advertise_hosts = *" \
			"queue_only = true" "acl_smtp_rcpt = accept_all" "$@" || return 1
		printf '%s\n' "begin acl" "accept_all:" "  accept"
	} >"$dir/exim.conf" || return 1
	exim_daemon "$dir" "$port"
}

# exim_queued DIR - the number of messages in Exim's queue below DIR
exim_queued() {
	find "$1/spool/input" -name '*-H' 2>/dev/null | wc -l
}

# smtpd_sink DIR PORT [LINE...] - start OpenSMTPD (as root: it needs it for
# its privilege separation; its processes run as opensmtpd, here nobody)
# on 127.0.0.1:PORT with its defaults and LINEs, accepting every recipient
# and delivering each message to a file of its own in DIR/mail; its
# /var is DIR/var (the spool, DIR/var/spool/smtpd/queue, holds what is
# not delivered yet), its log DIR/smtpd.log. Sets SMTPD_PID.
smtpd_sink() {
	local dir=$1 port=$2
	shift 2
	mkdir -p "$dir/var/spool/smtpd" "$dir/var/lib/opensmtpd/empty" "$dir/var/run" "$dir/mail" || return 1
	chmod 0755 "$dir" "$dir/var" "$dir/var/lib" "$dir/var/lib/opensmtpd" "$dir/var/run" &&
		chmod 0711 "$dir/var/spool/smtpd" && chown 65534:65534 "$dir/mail" || return 1
	{
		printf '%s\n' 'table vusers { "@" = "nobody" }' "listen on 127.0.0.1 port $port" "$@"
		printf 'action "sink" mda "cat > $(mktemp -p %s m.XXXXXXXX)" virtual <vusers>\n' "$dir/mail"
		printf '%s\n' 'match from any for any action "sink"'
	} >"$dir/smtpd.conf" || return 1
	(foreign_ns "$dir" "$dir/root/usr/libexec:/usr/libexec $dir/var:/var" \
		"$dir/root/${_foreign_bin[opensmtpd]}" -d -f "$dir/smtpd.conf") >>"$dir/smtpd.log" 2>&1 &
	SMTPD_PID=$!
	tap_bg_register "$SMTPD_PID"
	if ! wait_for_port "$port" 20; then
		tap_diag "OpenSMTPD did not start:" "$(cat "$dir/smtpd.log")"
		return 1
	fi
}

# smtpd_idle DIR - OpenSMTPD below DIR has delivered everything it accepted
smtpd_idle() {
	[ -z "$(find "$1/var/spool/smtpd/queue" "$1/var/spool/smtpd/incoming" -type f 2>/dev/null | head -1)" ]
}

# foreign_mta_need SET [CMD...] - the start of an interoperability test:
# skip unless root and every CMD (and what unpacking and foreign_ns use)
# is there; unpack SET (skip or bail out as foreign_mta_skip says); say
# which version runs
foreign_mta_need() {
	local set=$1 cmd
	shift
	[ "$(id -u)" -eq 0 ] || tap_skip_all "must run as root (ternd drops privileges, mount namespaces)"
	for cmd in apt-get apt-cache dpkg unshare setpriv ss "$@"; do
		command -v "$cmd" >/dev/null || tap_skip_all "$cmd not installed"
	done
	foreign_mta_unpack "$set" || foreign_mta_skip
	tap_diag "${_foreign_pkgs[$set]%% *} $FOREIGN_VERSION"
}
