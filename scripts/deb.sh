#!/usr/bin/env bash
# Build every Debian package (debian/: libsluice0, libsluice-dev, sluice,
# libnginx-mod-http-sluice, redis-sluice) with dpkg-buildpackage from a
# copy of the tree's tracked files as they are now (committed or not), so
# nothing is written next to the source tree:
#   scripts/deb.sh [OUTDIR]   (default build-deb)
# The build log is OUTDIR/build.log (on failure its end is printed), the
# debug symbol packages go to OUTDIR/dbgsym/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-deb}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# `git stash create` makes a commit of the tracked files' current state
# without touching the tree or the stash (nothing when the tree is clean).
rev=$(git stash create)
git archive --format=tar --prefix=sluice/ "${rev:-HEAD}" | tar -x -C "$tmp"
mkdir -p "$out/dbgsym"
rm -f "$out"/*.deb "$out"/dbgsym/*.deb
if ! (cd "$tmp/sluice" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log" >&2
  echo "scripts/deb.sh: dpkg-buildpackage failed (log: $out/build.log)" >&2
  exit 1
fi
# Debug symbols aside, so that `apt install ./OUTDIR/*.deb` takes the
# packages a user wants.
mv "$tmp"/*-dbgsym_*.deb "$out"/dbgsym/
cp "$tmp"/*.deb "$out"/
ls "$out"/*.deb
