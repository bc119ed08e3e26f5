#!/usr/bin/env bash
# Every `sluice` command that fails to write its output says so and exits
# 3 (system failure): stdout on /dev/full, which takes no byte.
set -u
SLUICE=$1; HERE=$(cd "$(dirname "$0")" && pwd); CONF=$HERE/../e2e/e2e.conf
[ -w /dev/full ] || { echo "no /dev/full: skipped"; exit 77; }
. "$HERE/check.sh"

full() { # name, who the message names, then the command
  local name=$1 who=$2 rc
  shift 2
  "$SLUICE" "$@" > /dev/full 2> "$tmp/err"; rc=$?
  check "$name: exit" 3 "$rc"
  check "$name: said" "$who: write error: No space left on device" \
    "$(grep 'write error' "$tmp/err")"
}

printf '0,a,1\n0,a,1\n' > "$tmp/small.csv"
# a few lines (one buffered write at the end) and many (written on the way)
awk 'BEGIN { for (i = 0; i < 100000; i++) printf "%d,k%d,1\n", i, i % 7 }' > "$tmp/big.csv"
G="--algo gcra --rate 10 --period-ms 1000 --burst 50"
full "replay, short" "sluice replay" replay $G "$tmp/small.csv"
full "replay, long" "sluice replay" replay $G "$tmp/big.csv"
full "replay --policy, report" "sluice replay" replay --policy "$CONF" "$HERE/../../examples/traces/shadow-requests.csv"
full "replay --policy --decisions" "sluice replay" replay --policy "$CONF" --decisions "$HERE/../../examples/traces/shadow-requests.csv"
full "settings" "sluice settings" settings
full "simulate --list" "sluice simulate" simulate --list
full "simulate, a scenario" "sluice simulate" simulate retry-ignorer
full "help" sluice --help

finish
