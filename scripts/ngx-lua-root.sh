#!/usr/bin/env bash
# Debian 12's lua-nginx-module, unpacked beside the system instead of
# installed: libnginx-mod-http-lua and lua-resty-core need libluajit2,
# which removes the luajit and wrk packages the other suites use.  The
# packages are fetched with `apt-get download` (Debian's mirror, as apt is
# set up) and extracted with dpkg-deb into one directory, kept between runs.
#
#   scripts/ngx-lua-root.sh        prints the directory (fetching once)
#
# The directory: $SLUICE_NGX_LUA_ROOT, default ~/.cache/sluice/ngx-lua.
# nginx loads usr/lib/nginx/modules/ngx_http_lua_module.so from it with
# LD_LIBRARY_PATH=DIR/usr/lib/x86_64-linux-gnu (libluajit2) and
# lua_package_path "DIR/usr/share/lua/5.1/?.lua;;" (resty.core).  The
# ndk module it needs is the installed libnginx-mod-http-ndk (nginx's
# own dependency set, scripts/deps.sh).  tests/resty and the gateway
# benchmark use it; scripts/deps.sh runs it for the test set.
set -euo pipefail
root=${SLUICE_NGX_LUA_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/ngx-lua}
pkgs=(libnginx-mod-http-lua libluajit2-5.1-2 libluajit2-5.1-common
      lua-resty-core lua-resty-lrucache)
so=$root/usr/lib/nginx/modules/ngx_http_lua_module.so
# The versions unpacked are recorded: a new Debian point release of any of
# them (a security fix of the module) is fetched again.
want=$(apt-cache policy "${pkgs[@]}" 2>/dev/null |
       awk '/^[^ ]/{p=$1} /Candidate:/{print p $2}' | tr -d '\n')
if [ -f "$so" ] && [ -n "$want" ] && [ "$(cat "$root/.versions" 2>/dev/null)" = "$want" ]; then
  echo "$root"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fetch() { (cd "$work" && apt-get download -q "${pkgs[@]}") >"$work/log" 2>&1; }
if ! fetch; then
  # No package lists yet (a fresh machine whose packages were all there):
  # read them once and try again.
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq >>"$work/log" 2>&1 || true
  if ! fetch; then
    echo "ngx-lua-root: apt-get download failed:" >&2
    tail -n 5 "$work/log" >&2
    exit 1
  fi
  want=$(apt-cache policy "${pkgs[@]}" |
         awk '/^[^ ]/{p=$1} /Candidate:/{print p $2}' | tr -d '\n')
fi
mkdir -p "$work/root"
for d in "$work"/*.deb; do dpkg-deb -x "$d" "$work/root"; done
[ -f "$work/root/usr/lib/nginx/modules/ngx_http_lua_module.so" ] || {
  echo "ngx-lua-root: the packages hold no ngx_http_lua_module.so" >&2
  exit 1
}
echo "$want" >"$work/root/.versions"
mkdir -p "$(dirname "$root")"
rm -rf "$root"
mv "$work/root" "$root"
echo "$root"
