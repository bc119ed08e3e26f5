#!/usr/bin/env bash
# libconfig and jansson (and libcurl) belong to the layers that use them:
# - a mem-only service (consumer/consumer.c) links libsluice.a with the
#   static link line minus -lconfig -ljansson -lcurl, and runs; none of
#   them is NEEDED;
# - the control: a program that loads a policy file does not link so
#   (else the first check would prove nothing);
# - a client that only plans retries links libsluice-client (shared and
#   static) alone, and runs; neither it nor the library NEEDs anything of
#   the policy, HTTP renderer, events or stores; it exports only public
#   names that libsluice exports too.
# --no-as-needed: every library named on the line is recorded, so what is
# absent was never on it.
set -u
build=$1 src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

san=$(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
v = [o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"]
print("" if not v or v[0] == "none" else "-fsanitize=" + v[0])')
cc="cc $san -std=c11 -I$src/include -Wl,--no-as-needed"
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
# has_none FILE LIB...: FILE NEEDs none of the LIBs (matched by soname stem).
has_none() {
  local f=$1 l hit=""; shift
  for l in "$@"; do
    needed "$f" | grep -q "^lib$l\.so" && hit="$hit lib$l"
  done
  [ -z "$hit" ] || { bad "$(basename "$f") NEEDs$hit"; return 1; }
}

# The static link line a consumer gets from pkg-config, without the three.
priv=$(PKG_CONFIG_PATH=$build/meson-uninstalled pkg-config --static --libs-only-l sluice) ||
  { echo "pkg-config sluice-uninstalled failed"; exit 1; }
lean=""
for l in $priv; do
  case $l in -lsluice | -lconfig | -ljansson | -lcurl) ;; *) lean="$lean $l" ;; esac
done

# shellcheck disable=SC2086
if $cc -o "$tmp/mem" "$src/tests/build/consumer/consumer.c" "$build/libsluice.a" $lean \
     2>"$tmp/mem.log" && "$tmp/mem"; then ok; else
  cat "$tmp/mem.log"; bad "mem-only program did not link without -lconfig -ljansson -lcurl, or failed"; fi
[ -x "$tmp/mem" ] && has_none "$tmp/mem" config jansson curl sluice && ok

# shellcheck disable=SC2086
if $cc -o "$tmp/policy" "$src/tests/build/layer_policy.c" "$build/libsluice.a" $lean \
     2>"$tmp/policy.log"; then
  bad "control: a program loading a policy file linked without -lconfig"
elif grep -q 'config_' "$tmp/policy.log"; then ok; else
  cat "$tmp/policy.log"; bad "control: the link failed, but not for libconfig"; fi

if $cc -o "$tmp/client" "$src/tests/build/layer_client.c" -L"$build" -lsluice-client \
     2>"$tmp/client.log" && LD_LIBRARY_PATH=$build "$tmp/client"; then ok; else
  cat "$tmp/client.log"; bad "client program did not link to libsluice-client alone, or failed"; fi
forbidden="sluice config jansson curl hiredis ssl crypto lmdb ck"
[ -x "$tmp/client" ] && has_none "$tmp/client" $forbidden && ok
has_none "$build/libsluice-client.so" $forbidden && ok
if $cc -o "$tmp/client-static" "$src/tests/build/layer_client.c" \
     "$build/libsluice-client.a" 2>"$tmp/cs.log" && "$tmp/client-static"; then ok; else
  cat "$tmp/cs.log"; bad "client program did not link libsluice-client.a alone, or failed"; fi

# Its exports: public names only, each one libsluice exports too.
exports() { nm -D --defined-only "$1" | awk '$2 ~ /^[TDRB]$/ {print $3}' | sed 's/@.*//' | sort -u; }
exports "$build/libsluice.so" > "$tmp/all"
exports "$build/libsluice-client.so" > "$tmp/client"
extra=$(comm -13 "$tmp/all" "$tmp/client"; grep -v '^sluice_[a-z]' "$tmp/client")
if [ -s "$tmp/client" ] && [ -z "$extra" ]; then ok; else
  bad "libsluice-client exports what libsluice does not, or an internal name: ${extra:-nothing at all}"; fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
