#!/usr/bin/env bash
# Throughput of `sluice replay --policy` (POLICY: etc/ledger.conf, the
# default policy; mem backend) on a synthetic log of N requests (default
# 1 000 000).  Prints the tool's own report line (wall-clock requests/s)
# and the CPU time used.
set -eu
SLUICE=$1; GEN=$2; POLICY=$3; N=${4:-1000000}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$GEN" "$N" > "$tmp/log.csv"
for threads in 1 2; do
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "threads=$threads cpu=%Us user %Ss sys wall=%es" \
      "$SLUICE" replay --policy "$POLICY" --threads $threads --boxes 0 "$tmp/log.csv" | head -1
  else
    "$SLUICE" replay --policy "$POLICY" --threads $threads --boxes 0 "$tmp/log.csv" | head -1
  fi
done
