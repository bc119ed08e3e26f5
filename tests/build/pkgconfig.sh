#!/usr/bin/env bash
# What `meson install` gives a consumer: `pkg-config --cflags sluice` is
# the include directory and nothing else (no dependency's -I or -D), the
# .pc file needs no other package's .pc, and a program built from the
# installed headers with those flags links and runs, shared and static
# (Libs.private alone suffices for the static link).
set -u
build=$1 consumer=$2 src=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

if ! meson install -C "$build" --no-rebuild --destdir "$tmp/root" >"$tmp/log" 2>&1; then
  cat "$tmp/log"; echo "0 passed, 1 failed"; exit 1
fi
pc=$(find "$tmp/root" -name sluice.pc | head -1)
[ -n "$pc" ] || { echo "no sluice.pc installed"; echo "0 passed, 1 failed"; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$pc")
root_prefix=$tmp/root$prefix
# Only this .pc is visible: a Requires on ck, hiredis, ... would fail here.
pkc() { PKG_CONFIG_LIBDIR=$(dirname "$pc") PKG_CONFIG_PATH= \
  pkg-config --define-variable=prefix="$root_prefix" "$@" sluice; }

cflags=$(pkc --cflags) || bad "pkg-config --cflags sluice failed"
cflags=$(echo $cflags)  # pkg-config ends it with a space
if [ "$cflags" = "-I$root_prefix/include" ]; then ok; else
  bad "pkg-config --cflags sluice is '$cflags', want only -I$root_prefix/include"; fi
libs=$(pkc --libs) && ok || bad "pkg-config --libs sluice failed"
static_libs=$(pkc --static --libs) && ok || bad "pkg-config --static --libs sluice failed"

# A sanitized build's library needs the sanitizer in the program too.
san=$(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
v = [o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"]
print("" if not v or v[0] == "none" else "-fsanitize=" + v[0])')
cc="cc $san"
# shellcheck disable=SC2086
if $cc -std=c11 -Wall -Wextra -Werror -o "$tmp/shared" "$consumer" $cflags $libs 2>"$tmp/cc.log" &&
   LD_LIBRARY_PATH=$(dirname "$(dirname "$pc")") "$tmp/shared"; then ok; else
  cat "$tmp/cc.log"; bad "shared consumer did not build or run"; fi
libdir=$(dirname "$(dirname "$pc")")
# shellcheck disable=SC2086
if $cc -std=c11 -o "$tmp/static" "$consumer" $cflags "$libdir/libsluice.a" \
     ${static_libs//-lsluice/} 2>"$tmp/cc.log" && "$tmp/static"; then ok; else
  cat "$tmp/cc.log"; bad "static consumer did not build or run"; fi
# The default policy, the file the library embeds, is installed where the
# programs' --help says, as sluice.conf.
conf=$(find "$tmp/root" -name sluice.conf | head -1)
if [ -n "$conf" ] && cmp -s "$conf" "$src/etc/ledger.conf"; then ok; else
  bad "etc/ledger.conf not installed as sluice.conf (found '$conf')"; fi
# Every shipped policy, to copy, in DATADIR/sluice/policies.
for f in "$src"/etc/*.conf; do
  got=$(find "$tmp/root" -path "*/share/sluice/policies/${f##*/}" | head -1)
  if [ -n "$got" ] && cmp -s "$got" "$f"; then ok; else
    bad "${f#"$src"/} not installed in share/sluice/policies (found '$got')"; fi
done
help=$(find "$tmp/root" -path '*/bin/sluice' | head -1)
if [ -n "$help" ] && "$help" simulate --help | grep -qF "${conf#"$tmp/root"}"; then ok; else
  bad "sluice simulate --help does not name ${conf#"$tmp/root"}"; fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
