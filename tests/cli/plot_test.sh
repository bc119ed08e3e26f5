#!/usr/bin/env bash
# Every `sluice simulate --plot` plot reads at a glance (plot_check.py reads
# the SVG back) and renders: rsvg-convert (librsvg, what image viewers and
# browsers on Debian use) turns it into a PNG of the plot's size.
# The scenarios run on etc/ledger.conf ($2), given explicitly.
set -u
SLUICE=$1; LEDGER=$2; HERE=$(cd "$(dirname "$0")" && pwd)
command -v rsvg-convert >/dev/null ||
  { echo "rsvg-convert not installed (librsvg2-bin): skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
for sc in $("$SLUICE" simulate --list); do
  ok=1
  "$SLUICE" simulate --config "$LEDGER" --plot "$tmp/$sc.svg" "$sc" > /dev/null || { echo "$sc: simulate failed"; ok=0; }
  python3 "$HERE/plot_check.py" "$sc" "$tmp/$sc.svg" || ok=0
  if rsvg-convert -o "$tmp/$sc.png" "$tmp/$sc.svg" 2> "$tmp/err"; then
    size=$(python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print(*struct.unpack(">II", d[16:24])) if d[:8]==b"\x89PNG\r\n\x1a\n" else print("not a PNG")' "$tmp/$sc.png")
    [ "$size" = "960 510" ] || { echo "$sc: PNG is '$size', want 960 510"; ok=0; }
  else
    echo "$sc: rsvg-convert failed: $(cat "$tmp/err")"; ok=0
  fi
  if [ "$ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -eq 5 ]
