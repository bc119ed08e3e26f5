#!/usr/bin/env bash
# Build ngx_http_sluice_module.so against Debian's nginx-dev, the way
# dh-sequence-nginx does: nginx's configure with the exact flags of the
# packaged binary (conf_flags: --with-compat, --with-threads...), so the
# module's signature matches and nginx loads it, then `make modules`.
# Nothing is written under /usr/share/nginx/src (--builddir).
#
#   build.sh MODULE_DIR BUILD_DIR OUTPUT.so INCLUDE_DIR LIBSLUICE.a [LIBS...]
set -euo pipefail
moddir=$(realpath "$1"); builddir=$(realpath -m "$2"); out=$(realpath -m "$3")
inc=$(realpath "$4"); lib=$(realpath "$5"); shift 5
src=/usr/share/nginx/src
[ -f "$src/conf_flags" ] || { echo "nginx-dev is not installed ($src)" >&2; exit 1; }
# shellcheck disable=SC1091
. "$src/conf_flags"
cflags="$(dpkg-buildflags --get CFLAGS) -fPIC $(dpkg-buildflags --get CPPFLAGS)"
ldflags="$(dpkg-buildflags --get LDFLAGS) -fPIC"
export SLUICE_NGX_INCS="$inc"
export SLUICE_NGX_LIBS="$lib $*"
mkdir -p "$builddir"
# configure reads auto/ relative to the current directory.
cd "$src"
# configure takes most of the time: rerun it only when the module's config
# or the library list changed.
stamp="$builddir/sluice.stamp"
want="$SLUICE_NGX_INCS $SLUICE_NGX_LIBS $(cksum <"$moddir/config")"
if [ ! -f "$builddir/Makefile" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  rm -f "$stamp"
  ./configure --with-cc-opt="$cflags" --with-ld-opt="$ldflags" \
    "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$moddir" \
    --builddir="$builddir" >"$builddir/configure.log" 2>&1 ||
    { cat "$builddir/configure.log" >&2; exit 1; }
  echo "$want" >"$stamp"
fi
# nginx's Makefile knows the module's own header only, not sluice's public
# ones: after a change there (a struct that grew) its objects would be
# stale, and a decision written by the library past the module's idea of
# its size smashes the worker's stack.  Recompile them when those change.
hstamp="$builddir/sluice-headers.stamp"
hsum=$(cat "$inc"/sluice.h "$inc"/sluice/*.h | cksum)
if [ "$(cat "$hstamp" 2>/dev/null)" != "$hsum" ]; then
  find "$builddir" -name 'ngx_http_sluice*.o' -delete
  echo "$hsum" >"$hstamp"
fi
# The Makefile does not know about libsluice.a: always relink.
rm -f "$builddir/ngx_http_sluice_module.so"
make -s -f "$builddir/Makefile" -C "$src" modules >"$builddir/make.log" 2>&1 ||
  { cat "$builddir/make.log" >&2; exit 1; }
cp "$builddir/ngx_http_sluice_module.so" "$out"
