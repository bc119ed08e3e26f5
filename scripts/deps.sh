#!/usr/bin/env bash
# Install the Debian packages sluice builds, tests and demos with, skipping
# those already present.  Sourced by the other scripts; safe to run twice.
set -euo pipefail

SLUICE_PACKAGES=(
  build-essential meson ninja-build pkg-config clang
  libck-dev liblmdb-dev lmdb-utils libhiredis-dev libssl-dev openssl
  redis-server
  libcriterion-dev libconfig-dev libjansson-dev
  libmicrohttpd-dev libcurl4-openssl-dev curl binutils python3
  cppcheck libclang-rt-14-dev librsvg2-bin
  nginx nginx-dev dpkg-dev make wrk prometheus
  debootstrap iproute2 groff-base
  nftables libnftables-dev
)

sluice_install_deps() {
  local missing=()
  for p in "${SLUICE_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  sluice_install_deps
fi
