#!/usr/bin/env bash
# Behaviour of `sluice replay`: spec examples, penalty ladder, malformed
# input and usage errors.  Expected lines are derived by hand in comments.
set -u
SLUICE=$1
. "$(dirname "$0")/check.sh"

G="--algo gcra --rate 3000 --period-ms 60000 --burst 3000"
P="--strike-threshold 3 --strike-window-ms 60000 --box-ms 300000,3600000,forever --offense-ttl-ms 86400000"

# 3000 points/min = 50/s.  Drain 3000 at t=1000: full again in 60 s.  A
# 10-point reconcile with 0 left waits 200 ms; at t=1200 it fits; at t=2200
# one second later 50 points are back; 1 point leaves 49, and the bucket is
# full 58.98 s + 0.02 s = 59.02 s later, rounded up to 59020 ms.
cat > "$tmp/spec.csv" <<'CSV'
# comment lines are skipped
1000,tenant,3000
1000,tenant,10
1200,tenant,10
2200,tenant,1
CSV
out=$("$SLUICE" replay $G "$tmp/spec.csv"); rc=$?
check "spec exit code" 0 "$rc"
check "spec decisions" "t_ms,key,cost,status,remaining,retry_after_ms,reset_ms,level,strikes_remaining
1000,tenant,3000,allowed,0,0,60000,0,0
1000,tenant,10,throttled,0,200,60000,0,0
1200,tenant,10,allowed,0,0,60000,0,0
2200,tenant,1,allowed,49,0,59020,0,0" "$out"

# Keys are independent buckets.
printf '0,a,3000\n0,b,1\n' > "$tmp/keys.csv"
out=$("$SLUICE" replay $G "$tmp/keys.csv" | tail -1)
check "independent keys" "0,b,1,allowed,2999,0,20,0,0" "$out"

# Penalty ladder, threshold 3: strikes at t=0,1,2 after draining; the third
# trips level 1 (5 min box, reported boxed); later requests are boxed with
# the box's remaining time and no bucket work.
printf '0,k,3000\n0,k,1\n1,k,1\n2,k,1\n3,k,1\n300002,k,1\n' > "$tmp/pen.csv"
out=$("$SLUICE" replay $G $P "$tmp/pen.csv")
check "penalty ladder" "t_ms,key,cost,status,remaining,retry_after_ms,reset_ms,level,strikes_remaining
0,k,3000,allowed,0,0,60000,0,3
0,k,1,throttled,0,20,60000,0,2
1,k,1,throttled,0,19,59999,0,1
2,k,1,boxed,0,300000,300000,1,0
3,k,1,boxed,0,299999,299999,1,0
300002,k,1,allowed,2999,0,20,0,3" "$out"

# Malformed lines: named on stderr with their number, no output line, the
# rest still replayed, exit 1.
# (t=6: TAT 20 -> 40 ms, reset 34 ms, floor(59966/20) = 2998 left.)
printf '0,a,1\nbad line\n5,a\n6,a,1\n4,a,1\n7,,1\n7,a,0\n8,a,3001\n9,a,x\n10,a,1\n' > "$tmp/bad.csv"
out=$("$SLUICE" replay $G "$tmp/bad.csv" 2>"$tmp/err"); rc=$?
check "malformed exit code" 1 "$rc"
check "malformed output" "t_ms,key,cost,status,remaining,retry_after_ms,reset_ms,level,strikes_remaining
0,a,1,allowed,2999,0,20,0,0
6,a,1,allowed,2998,0,34,0,0
10,a,1,allowed,2997,0,50,0,0" "$out"
check "malformed lines named" "line 2
line 3
line 5
line 6
line 7
line 8
line 9" "$(grep -o 'line [0-9]*' "$tmp/err")"
check "backwards time named" "1" "$(grep -c 'line 5: t_ms goes backwards' "$tmp/err")"

# Usage errors name the argument and exit 2.
"$SLUICE" replay --algo gcra --rate 0 --period-ms 1 --burst 1 "$tmp/spec.csv" 2>"$tmp/err" >/dev/null
check "bad rate exit" 2 "$?"
check "bad rate named" 1 "$(grep -c -- '--rate' "$tmp/err")"
check "bad rate message" "sluice replay: --rate: expected an integer from 1 to 4294967296, got '0'" "$(cat "$tmp/err")"
"$SLUICE" replay --algo leaky --rate 1 --period-ms 1 --burst 1 "$tmp/spec.csv" 2>"$tmp/err" >/dev/null
check "bad algo exit" 2 "$?"
"$SLUICE" replay $G --strike-threshold 3 "$tmp/spec.csv" 2>"$tmp/err" >/dev/null
check "partial penalty exit" 2 "$?"
"$SLUICE" replay $G --backend nosuch "$tmp/spec.csv" 2>"$tmp/err" >/dev/null
check "unknown backend exit" 2 "$?"
check "unknown backend named" 1 "$(grep -c "nosuch" "$tmp/err")"
"$SLUICE" replay $G "$tmp/missing.csv" 2>/dev/null >/dev/null
check "missing file exit" 2 "$?"
"$SLUICE" replay --help | grep -q "t_ms,key,cost"
check "help" 0 "$?"
# An empty store string is refused, not read as the default mem (a script's
# --backend "$STORE" with STORE unset).
"$SLUICE" replay $G --backend "" "$tmp/spec.csv" 2>"$tmp/err" >/dev/null
check "empty backend exit" 2 "$?"
check "empty backend named" 1 "$(grep -c -- "--backend: expected a store" "$tmp/err")"
# A directory opens but cannot be read: a usage error that says so.
mkdir "$tmp/adir"
"$SLUICE" replay $G "$tmp/adir" 2>"$tmp/err" >/dev/null
check "directory exit" 2 "$?"
check "directory said" "sluice replay: cannot read '$tmp/adir': Is a directory" "$(cat "$tmp/err")"

# A line longer than the 1 MiB read buffer is a malformed line like any
# other: named with its number, skipped, the lines after it replayed, exit
# 1 (it was a system failure, exit 3).  Through stdin, the buffered reader.
{ echo "0,a,1"; head -c 1100000 /dev/zero | tr '\0' x; echo; echo "5,a,1"; } > "$tmp/long.csv"
out=$("$SLUICE" replay $G - < "$tmp/long.csv" 2>"$tmp/err"); rc=$?
check "long line exit" 1 "$rc"
check "long line named" "sluice replay: line 2: line longer than 1 MiB" "$(cat "$tmp/err")"
check "lines after a long line replayed" "0,a,1,allowed 5,a,1,allowed" \
  "$(tail -n +2 <<<"$out" | cut -d, -f1-4 | xargs)"

# t_ms past what int64 ns hold says the range and the value.
printf '9223372036855,a,1\n99999999999999999999,a,1\n' > "$tmp/big.csv"
"$SLUICE" replay $G "$tmp/big.csv" 2>"$tmp/err" >/dev/null
check "t_ms range exit" 1 "$?"
check "t_ms range said" "sluice replay: line 1: t_ms: must be 0..9223372036854 (got 9223372036855)
sluice replay: line 2: t_ms: must be 0..9223372036854 (got 99999999999999999999)" "$(cat "$tmp/err")"
# --help right after --policy is the help, not a CONFIG named --help.
out=$("$SLUICE" replay --policy --help 2>&1); rc=$?
check "--policy --help exit" 0 "$rc"
check "--policy --help prints the policy usage" 1 "$(grep -c '^usage: sluice replay --policy CONFIG' <<<"$out")"

# Batches (consecutive lines of one t_ms, up to 16, one apply_many) give
# the lines one by one would, in the same order: a trace with runs of up to
# 40 lines per ms over 30 keys (so a key recurs within a batch), with
# denials, replayed with --batch 1 and with the default batches.
awk 'BEGIN { srand(7); t = 0; for (i = 0; i < 6000; i++) {
  if (rand() < 0.05) t += 1 + int(rand() * 300)
  printf "%d,k%d,%d\n", t, int(rand() * 30), 1 + int(rand() * 40) } }' > "$tmp/runs.csv"
B="--algo gcra --rate 10 --period-ms 1000 --burst 50"
one=$("$SLUICE" replay $B --batch 1 "$tmp/runs.csv"); rc1=$?
many=$("$SLUICE" replay $B "$tmp/runs.csv"); rc2=$?
check "batch 1 exit" 0 "$rc1"
check "batches exit" 0 "$rc2"
check "batches decide as one by one" "$one" "$many"
check "the batch trace has denials" 1 "$([ "$(grep -c throttled <<<"$one")" -gt 500 ] && echo 1)"
"$SLUICE" replay $B --batch 17 "$tmp/runs.csv" 2>/dev/null >/dev/null
check "batch above 16 exit" 2 "$?"

finish
