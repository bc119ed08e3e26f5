#!/usr/bin/env bash
# The Debian packages on a clean Debian 12 root, the way a user installs
# them: build them (scripts/deb.sh), debootstrap bookworm (minbase) into a
# directory, `apt-get install ./*.deb` in a chroot, then use what they
# installed: the README's quickstart compiled with `pkg-config --cflags
# --libs sluice`, `sluice simulate`, the man pages, `nginx -t` with the
# module enabled through modules-enabled, `redis-server --loadmodule` from
# /usr/lib/redis/modules on 127.0.0.1.
#
#   tests/deb/clean_root.sh [DEBDIR]     (DEBDIR: packages already built)
#
# Needs root, debootstrap and the Debian mirror; CI runs it after
# scripts/test (.ci/run).  The debootstrapped root is kept in
# $SLUICE_DEB_CACHE (default /var/cache/sluice-deb-test, outside the tree)
# and copied for each run, so only the first run pays for debootstrap;
# downloaded packages are kept there too.  Without root or debootstrap it
# exits 77 (skipped), and with CI=true 1.
#
# Third-party packages (nginx, redis-server, the compiler and what ours
# depend on) are installed first with services held back (policy-rc.d),
# as in any chroot.  Ours are then installed in a network namespace of
# their own, without policy-rc.d, and nothing may be listening there
# afterwards but on loopback, nor any process be left running in the root:
# installing them starts no service.  The smoke tests run in that namespace
# too, so nothing they start can reach past loopback.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
cache=${SLUICE_DEB_CACHE:-/var/cache/sluice-deb-test}
mirror=${SLUICE_DEB_MIRROR:-http://deb.debian.org/debian}
start=$SECONDS

skip() {
  echo "clean_root: skipped: $*"
  [ "${CI:-}" = true ] && { echo "clean_root: CI=true: a skip is a failure"; exit 1; }
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot, mounts)"
for t in debootstrap unshare chroot ss dpkg-deb; do
  command -v "$t" >/dev/null || skip "$t is not installed"
done
step() { printf 'clean_root: [%4ds] %s\n' $((SECONDS - start)) "$*"; }

work=$(mktemp -d /var/tmp/sluice-clean-root.XXXXXX)
root=$work/root
cleanup() {
  # Anything still running in the root (a failed check's server).
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

if [ $# -ge 1 ]; then
  debs=$(realpath "$1")
else
  step "building the packages (scripts/deb.sh)"
  "$src/scripts/deb.sh" "$work/debs" >/dev/null
  debs=$work/debs
fi
ls "$debs"/*.deb >/dev/null

mkdir -p "$cache/archives/partial"
if [ ! -f "$cache/bookworm/.complete" ]; then
  step "debootstrap bookworm minbase into $cache/bookworm (once; kept)"
  rm -rf "$cache/bookworm.tmp"
  debootstrap --variant=minbase bookworm "$cache/bookworm.tmp" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log"; exit 1; }
  touch "$cache/bookworm.tmp/.complete"
  rm -rf "$cache/bookworm"
  mv "$cache/bookworm.tmp" "$cache/bookworm"
fi
step "copying the clean root"
cp -a "$cache/bookworm" "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/tmp/debs"
cp "$debs"/*.deb "$root/tmp/debs/"
cp "$src/examples/readme/quickstart.c" "$root/tmp/"

# Our packages' names, and what they need from the archive.
ours=() needs=()
for d in "$debs"/*.deb; do ours+=("$(dpkg-deb -f "$d" Package)"); done
for d in "$debs"/*.deb; do
  IFS=',' read -ra deps <<<"$(dpkg-deb -f "$d" Depends)"
  for dep in "${deps[@]}"; do
    name=$(echo "$dep" | awk '{print $1}')
    printf '%s\n' "${ours[@]}" | grep -qx "$name" || needs+=("$(echo "$dep" | xargs)")
  done
done
mapfile -t needs < <(printf '%s\n' "${needs[@]}" | sort -u)

# Mounts live in a mount namespace of this script's own, and go with it.
inner=$(cat <<'EOS'
set -euo pipefail
root=$1 cache=$2; shift 2
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/dev/shm"
mount --bind "$cache/archives" "$root/var/cache/apt/archives"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
in_root apt-get update -qq
IFS=$'\n'
in_root apt-get satisfy -y -qq --no-install-recommends "$(printf '%s, ' "$@") gcc, libc6-dev, pkg-config, nginx, redis-server" >/dev/null
rm "$root/usr/sbin/policy-rc.d"
EOS
)
step "installing third-party packages in the root (apt-get satisfy: $(printf '%s, ' "${needs[@]}")nginx, redis-server, gcc, libc6-dev, pkg-config)"
unshare --mount --propagation private bash -c "$inner" inner "$root" "$cache" "${needs[@]}" \
  >"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log"; exit 1; }

step "installing ours (apt-get install ./*.deb) and the smoke tests, no network but loopback"
unshare --mount --propagation private --net bash "$src/tests/deb/smoke.sh" "$root" "$cache"
step "done"
