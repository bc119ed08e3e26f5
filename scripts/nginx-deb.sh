#!/usr/bin/env bash
# Build libnginx-mod-http-sluice_*.deb (debian/, dh-sequence-nginx) from a
# clean copy of the committed tree, so nothing is written next to the
# source tree:   scripts/nginx-deb.sh [OUTDIR]   (default build-deb)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-deb}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive --format=tar --prefix=sluice/ HEAD | tar -x -C "$tmp"
(cd "$tmp/sluice" && dpkg-buildpackage -us -uc -b >"$tmp/build.log" 2>&1) ||
  { tail -40 "$tmp/build.log" >&2; exit 1; }
mkdir -p "$out"
cp "$tmp"/*.deb "$out"/
ls "$out"/*.deb
