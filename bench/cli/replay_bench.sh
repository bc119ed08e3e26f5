#!/usr/bin/env bash
# Replay throughput of `sluice replay` on the mem backend: 5 M decisions
# over 10 000 keys, against the in-run baseline of reading the same file
# with `wc -l` (the cost of just getting the bytes in).
set -eu
SLUICE=$1
n=${2:-5000000}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
awk -v n="$n" 'BEGIN { srand(1); t = 0; for (i = 0; i < n; i++) {
  t += int(rand() * 2); printf "%d,key%d,%d\n", t, int(rand() * 10000), 1 + int(rand() * 5) } }' > "$tmp/trace.csv"
ns() { date +%s%N; }
t0=$(ns); wc -l < "$tmp/trace.csv" > /dev/null; t1=$(ns)
"$SLUICE" replay --algo gcra --rate 100 --period-ms 1000 --burst 200 "$tmp/trace.csv" > /dev/null
t2=$(ns)
"$SLUICE" replay --algo gcra --rate 100 --period-ms 1000 --burst 200 --strike-threshold 20 \
  --strike-window-ms 60000 --box-ms 300000,3600000,forever --offense-ttl-ms 86400000 "$tmp/trace.csv" > /dev/null
t3=$(ns)
awk -v n="$n" -v a=$((t1 - t0)) -v b=$((t2 - t1)) -v c=$((t3 - t2)) 'BEGIN {
  printf "%-40s %10s %14s %8s\n", "case", "ns/dec", "decisions/s", "ratio"
  printf "%-40s %10.1f %14.0f %8.2f\n", "wc -l of the trace (baseline)", a / n, n / a * 1e9, 1
  printf "%-40s %10.1f %14.0f %8.2f\n", "replay gcra, mem, 10k keys", b / n, n / b * 1e9, b / a
  printf "%-40s %10.1f %14.0f %8.2f\n", "replay gcra+penalty, mem, 10k keys", c / n, n / c * 1e9, c / a }'
