#!/bin/sh
# build.sh - install the Debian packages tern needs and build it in a
# VPATH build directory. tests/run-suite and contrib/demo.sh start here.
#
#   sudo contrib/build.sh BUILDDIR [configure options...]
#
# configure runs only when BUILDDIR has no Makefile yet (its options are
# kept by config.status after that); make runs every time.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:?usage: build.sh BUILDDIR [configure options...]}
shift

"$top/contrib/debian-deps.sh"
cd "$top"
[ -x configure ] && [ -f build-aux/tap-driver.sh ] || autoreconf -fi
mkdir -p "$builddir"
cd "$builddir"
[ -f Makefile ] || "$top/configure" "$@"
make -j"$(nproc)"
