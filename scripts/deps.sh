#!/usr/bin/env bash
# Install the Debian 12 packages sluice builds and tests with, skipping
# those already present.  Sourced by the other scripts; safe to run twice.
#
#   scripts/deps.sh           the test set (what scripts/test and CI use)
#   scripts/deps.sh build     the build set only (what scripts/demo uses)
#
# apt's own output goes to build-deps.log; one line says what is installed.
# No service is started while installing (policy-rc.d answers 101, as in a
# chroot), and a server package installed here is left disabled: the tests
# start their own servers on 127.0.0.1, and nothing installed for them may
# listen on the machine's addresses (nginx would take port 80, prometheus
# 0.0.0.0:9090).
set -euo pipefail

# The library with every backend, and the `sluice` CLI: a compiler, meson
# and the -dev libraries (a missing one only compiles its part out).
SLUICE_BUILD_PACKAGES=(
  gcc libc6-dev meson ninja-build pkg-config
  libck-dev liblmdb-dev libhiredis-dev libssl-dev
  libconfig-dev libjansson-dev libcurl4-openssl-dev libnftables-dev
)

# The tests (the build set too): the HTTP example services (libmicrohttpd,
# which brings GnuTLS's -dev tree), test framework, servers and tools.
SLUICE_PACKAGES=(
  "${SLUICE_BUILD_PACKAGES[@]}" libmicrohttpd-dev build-essential clang
  lmdb-utils openssl
  redis-server
  libcriterion-dev zlib1g-dev
  curl binutils python3 python3-aiosmtpd
  cppcheck libclang-rt-14-dev librsvg2-bin
  nginx nginx-dev dpkg-dev make wrk prometheus
  debootstrap iproute2 groff-base
  nftables
  luarocks
)

# Packages that start a server when installed on a booted machine.
SLUICE_SERVICES=(nginx redis-server prometheus)

# Debian's lua-nginx-module unpacked beside the system, for the test set
# (tests/resty): installed, its libluajit2 would remove luajit and wrk.
sluice_ngx_lua() {
  [ "$1" = SLUICE_PACKAGES ] || return 0
  "$(dirname "${BASH_SOURCE[0]}")/ngx-lua-root.sh" >/dev/null ||
    echo "warning: lua-nginx-module not unpacked; tests/resty will skip" >&2
}

sluice_install_deps() {
  local set=SLUICE_PACKAGES
  [ "${1:-}" = build ] && set=SLUICE_BUILD_PACKAGES
  local -n want=$set
  local missing=() p
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && { sluice_ngx_lua "$set"; return 0; }
  local sudo="" log="$PWD/build-deps.log" policy=/usr/sbin/policy-rc.d
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${missing[*]} with their dependencies (apt-get; log in build-deps.log)" >&2
  local own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# scripts/deps.sh: no service starts while it installs\nexit 101\n' |
      $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    own_policy=1
  fi
  local rc=0
  {
    $sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
        --no-install-recommends "${missing[@]}"
  } >"$log" 2>&1 || rc=$?
  [ "$own_policy" = 1 ] && $sudo rm -f "$policy"
  if [ "$rc" -ne 0 ]; then
    echo "apt-get failed ($rc); the last lines of build-deps.log:" >&2
    tail -n 20 "$log" >&2
    return "$rc"
  fi
  # Left disabled: nothing we installed starts at the next boot either.
  if [ -d /run/systemd/system ]; then
    for p in "${SLUICE_SERVICES[@]}"; do
      [[ " ${missing[*]} " == *" $p "* ]] &&
        $sudo systemctl disable --now "$p" >>"$log" 2>&1 || true
    done
  fi
  echo "installed $(grep -c '^Setting up ' "$log") packages" >&2
  sluice_ngx_lua "$set"
}

# The Node binding's packages (Fastify, fastify-plugin, @fastify/rate-limit
# for its tests and benchmark) from the npm registry, exactly as
# bindings/node/package-lock.json pins them; where node and npm are
# installed (the tests skip without node).  --ignore-scripts: the package's
# own install script builds the addon for an npm user; the tests use
# meson's build of it.
sluice_install_node_deps() {
  command -v npm >/dev/null || return 0
  local d=bindings/node
  [ "$d/node_modules/.package-lock.json" -nt "$d/package-lock.json" ] && return 0
  echo "installing bindings/node's npm packages (npm ci; log in build-deps.log)" >&2
  (cd "$d" && npm ci --no-audit --no-fund --ignore-scripts) >>build-deps.log 2>&1 || {
    echo "npm ci failed; the last lines of build-deps.log:" >&2
    tail -n 20 build-deps.log >&2
    return 1
  }
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  sluice_install_deps "$@"
  [ "${1:-}" = build ] || sluice_install_node_deps
fi
