#!/usr/bin/env bash
# `sluice replay` on the redis store decides at the log's time, as on mem:
# the same trace through both gives the same lines.  (Before, redis decided
# at its wall clock: the whole trace ran within a second, so nothing
# refilled between lines and the outputs differed.)  Run by harness.py.
set -u
SLUICE=$1; CONF=$2
[ -n "${SLUICE_REDIS_NODES:-}" ] || { echo "SKIP: run through harness.py"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
check() { n=$((n + 1)); if [ "$2" != "$3" ]; then fails=$((fails + 1)); printf 'FAIL %s\n--- expected\n%s\n--- got\n%s\n' "$1" "$2" "$3"; fi; }
# A fresh prefix per run: replays share the server's keys otherwise.
store() { echo "redis:nodes=$SLUICE_REDIS_NODES;timeout_ms=3000;connect_timeout_ms=3000;prefix=replay-$$-$1:"; }

G="--algo gcra --rate 3000 --period-ms 60000 --burst 3000"
printf '1000,tenant,3000\n1000,tenant,10\n1200,tenant,10\n2200,tenant,1\n61200,tenant,3000\n' > "$tmp/spec.csv"
mem=$("$SLUICE" replay $G "$tmp/spec.csv"); rc=$?
check "mem exit" 0 "$rc"
red=$("$SLUICE" replay $G --backend "$(store g)" "$tmp/spec.csv"); rc=$?
check "redis exit" 0 "$rc"
check "gcra: redis as mem" "$mem" "$red"
check "1200 ms into the log, 10 points are back" "1200,tenant,10,allowed,0,0,60000,0,0" "$(sed -n 4p <<<"$red")"

# The policy: the sandbox key (50 points, one per 10 min) drained, then
# requests an hour of log time later, when it has refilled.
{
  echo "t_ms,tenant,key,tier,method,route,ip"
  for i in $(seq 0 52); do echo "$((1000 + i)),acme,k1,sandbox,GET,/v1/ledgers/L/entries,192.0.2.1"; done
  for i in $(seq 0 3); do echo "$((3601000 + i)),acme,k1,sandbox,GET,/v1/ledgers/L/entries,192.0.2.1"; done
} > "$tmp/log.csv"
mem=$("$SLUICE" replay --policy "$CONF" --decisions "$tmp/log.csv" 2>/dev/null); rc=$?
check "policy mem exit" 0 "$rc"
red=$("$SLUICE" replay --policy "$CONF" --decisions --backend "$(store p)" "$tmp/log.csv" 2>"$tmp/err"); rc=$?
check "policy redis exit" 0 "$rc"
check "policy: redis as mem" "$mem" "$red"
check "an hour of log time later, allowed" "allow" "$(tail -1 <<<"$red" | cut -d, -f7)"

echo "$((n - fails))/$n checks passed"
[ "$fails" -eq 0 ]
