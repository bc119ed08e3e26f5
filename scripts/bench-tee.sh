#!/usr/bin/env bash
# bench-tee.sh OUTFILE COMMAND [ARGS...]: run a benchmark, keeping its
# output (stdout and stderr) in OUTFILE as well as printing it, so that the
# last benchmark of `meson test --benchmark` (`table`) can merge every
# benchmark's figures into one table.  Exits with COMMAND's status.
set -u
out=$1
shift
mkdir -p "$(dirname "$out")"
"$@" 2>&1 | tee "$out.tmp"
rc=${PIPESTATUS[0]}
mv "$out.tmp" "$out"
exit "$rc"
