#!/usr/bin/env bash
# sluice works as a meson subproject: a consumer project with
# subprojects/sluice pointing at this tree configures, builds and runs.
set -u
src=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp -r "$(dirname "$0")/consumer" "$tmp/consumer"
mkdir -p "$tmp/consumer/subprojects"
# A copy without build directories, as a vendored tree would be.
tar -C "$src" --exclude='./build*' -cf - . | (mkdir "$tmp/consumer/subprojects/sluice" && tar -C "$tmp/consumer/subprojects/sluice" -xf -)
if meson setup "$tmp/b" "$tmp/consumer" > "$tmp/log" 2>&1 &&
   ninja -C "$tmp/b" >> "$tmp/log" 2>&1 && "$tmp/b/consumer"; then
  echo "1 passed, 0 failed"
  exit 0
fi
cat "$tmp/log"
echo "0 passed, 1 failed"
exit 1
