#!/usr/bin/env bash
# sluice works as a meson subproject: a consumer project with
# subprojects/sluice pointing at this tree configures, builds and runs with
# sluice's default options; sluice builds only its library there (no
# programs, tests or benchmarks) and `meson install` puts only the consumer
# and the library into the parent's prefix (no headers, .pc, config or
# programs of sluice's).
set -u
src=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp -r "$(dirname "$0")/consumer" "$tmp/consumer"
mkdir -p "$tmp/consumer/subprojects"
# A copy without build directories, as a vendored tree would be.
tar -C "$src" --exclude='./build*' --exclude=./.git -cf - . | (mkdir "$tmp/consumer/subprojects/sluice" && tar -C "$tmp/consumer/subprojects/sluice" -xf -)
fails=0 passes=0
check() { # what, command...
  local what=$1; shift
  if "$@"; then passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
if ! { meson setup "$tmp/b" "$tmp/consumer" --prefix=/usr > "$tmp/log" 2>&1 &&
       ninja -C "$tmp/b" >> "$tmp/log" 2>&1; }; then
  cat "$tmp/log"; echo "0 passed, 1 failed"; exit 1
fi
check "the consumer runs" "$tmp/b/consumer"
# Everything built for the subproject is a library or an object of one,
# or a tool its build runs to make one (wire_lua: never installed, built
# only because a library source needs its output).
meson introspect "$tmp/b" --targets > "$tmp/targets.json"
others=$(python3 -c '
import json, sys
for t in json.load(open(sys.argv[1])):
    tool = t["type"] == "executable" and not t["installed"] and not t["build_by_default"]
    if t["subproject"] == "sluice" and not tool and t["type"] not in ("shared library", "static library", "custom"):
        print(t["type"], t["name"])' "$tmp/targets.json")
check "sluice built more than its library: $others" test -z "$others"
DESTDIR=$tmp/root meson install -C "$tmp/b" --no-rebuild >> "$tmp/log" 2>&1
(cd "$tmp/root" && find . -type f -o -type l | sort) > "$tmp/installed"
extra=$(grep -v -e '^\./usr/bin/consumer$' -e '/libsluice\.\(so[.0-9]*\|a\)$' "$tmp/installed")
check "installed more than the consumer and libsluice: $extra" test -z "$extra"
check "libsluice.so installed" grep -q '/libsluice\.so' "$tmp/installed"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
