#!/usr/bin/env bash
# Criterion is optional: with it hidden from pkg-config, `meson setup`
# with the default -Dtests=auto configures the library and programs and
# leaves the test suites out (saying so); -Dtests=enabled refuses.
set -u
src=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/pc"
# Every .pc file the system has, except Criterion's.
for d in $(pkg-config --variable pc_path pkg-config | tr : ' '); do
  [ -d "$d" ] || continue
  for f in "$d"/*.pc; do
    [ -e "$f" ] || continue
    case ${f##*/} in criterion.pc) ;; *) [ -e "$tmp/pc/${f##*/}" ] || ln -s "$f" "$tmp/pc/";; esac
  done
done
fails=0 passes=0
check() { if "$@"; then passes=$((passes + 1)); else echo "FAIL: $*"; fails=$((fails + 1)); fi; }
export PKG_CONFIG_LIBDIR=$tmp/pc PKG_CONFIG_PATH=
if meson setup "$tmp/auto" "$src" > "$tmp/auto.log" 2>&1; then
  passes=$((passes + 1))
  check grep -q "Criterion (libcriterion-dev) not found, test suites not built" "$tmp/auto.log"
  check test "$(meson introspect "$tmp/auto" --tests)" = "[]"
else
  cat "$tmp/auto.log"; echo "FAIL: -Dtests=auto without Criterion does not configure"
  fails=$((fails + 1))
fi
if meson setup "$tmp/on" "$src" -Dtests=enabled > "$tmp/on.log" 2>&1; then
  echo "FAIL: -Dtests=enabled without Criterion configured"; fails=$((fails + 1))
else
  passes=$((passes + 1))
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
