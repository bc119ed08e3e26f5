#!/usr/bin/env bash
# The README's API example is examples/readme/quickstart.c, verbatim, and
# it runs: the first 300 reconciles fit the 3000-point burst, the 301st is
# told to wait 200 ms.
set -u
readme=$1 src=$2 exe=$3
block=$(awk '/^```c$/{f=1;next} /^```$/{if(f){exit}} f' "$readme")
fails=0
if [ "$block" != "$(cat "$src")" ]; then
  echo "README's C example differs from $src"; fails=$((fails+1))
fi
out=$("$exe"); rc=$?
[ "$rc" -eq 0 ] || { echo "example exited $rc"; fails=$((fails+1)); }
[ "$out" = "request 300: 429, retry after 200 ms, 0 points left" ] ||
  { echo "unexpected example output: $out"; fails=$((fails+1)); }
echo "$((fails == 0 ? 1 : 0)) passed, $((fails > 0 ? 1 : 0)) failed"
[ "$fails" -eq 0 ]
