#!/bin/sh
# debian-deps.sh - install the Debian 12 packages tern's build, tests and
# benchmarks need. Idempotent; run as root. The one list of packages:
# tests/run-suite and .ci/run call this rather than keeping their own.
set -e
packages="
	build-essential autoconf automake pkg-config
	libmilter-dev liblmdb-dev libsodium-dev libssl-dev libinih-dev libjansson-dev lmdb-utils
	check clang libclang-rt-14-dev mandoc
	postfix miltertest swaks openssl stunnel4 python3 procps iproute2
	libmicrohttpd-dev libsystemd-dev curl prometheus
	pflogsumm
	libfuse3-dev fuse3
	sasl2-bin libsasl2-modules
	libxml2-utils strace chromium
	dpkg-dev debhelper lintian jq logrotate
"
missing=$(dpkg-query -W -f='${Package} ${Status}\n' $packages 2>/dev/null \
	| awk '$NF != "installed" { print $1 }'; \
	for p in $packages; do dpkg-query -W "$p" >/dev/null 2>&1 || echo "$p"; done)
missing=$(echo "$missing" | sort -u | tr '\n' ' ')
if [ -z "${missing% }" ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "debian-deps.sh: missing packages: $missing; run me as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Postfix must not configure (or start) the system instance: tests run
# their own isolated instances.
echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
