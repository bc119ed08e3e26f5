#!/usr/bin/env bash
# `sluice replay --policy`: a hand-made log through the e2e policy
# (etc/ledger.conf's shape: sandbox key bucket 50 points, 1 point per 10
# min, 3 strikes trip the box), in the legacy layout (the ledger's
# columns: a sign-in's subject and outcome are its `subject` and `result`
# attributes).
set -u
SLUICE=$1; HERE=$(cd "$(dirname "$0")" && pwd); CONF=$HERE/e2e.conf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
check() { n=$((n + 1)); if [ "$2" != "$3" ]; then fails=$((fails + 1)); printf 'FAIL %s\n--- expected\n%s\n--- got\n%s\n' "$1" "$2" "$3"; fi; }
# What the library cannot do yet: read and release a declared penalty's
# box (sluice_policy_inspect() and sluice_policy_release() read the
# built-in box records).  Printed, not counted; once it passes, make it a
# check.
pending() { if [ "$2" = "$3" ]; then echo "PENDING PASSES NOW (make it a check): $1"; else echo "PENDING $1: expected '$2', got '$3'"; fi; }

# The log docs/cli.md replays: 54 requests of key k1 (50 drain the bucket,
# the 51st is throttled, the next three ignore its Retry-After: strikes,
# the third trips the box), one of k2, one more of k1, five bad secrets of
# subject alice (boxed), then alice and bob with good ones.
cp "$HERE/../../examples/traces/shadow-requests.csv" "$tmp/log.csv"

"$SLUICE" replay --policy "$CONF" "$tmp/log.csv" > "$tmp/out" 2>&1; rc=$?
check "exit code" 0 "$rc"
row() { grep -m1 "^# $1 " "$tmp/out" | awk '{$1=""; $2=""; print}' | xargs; }
# requests allowed throttled boxed suspended concurrency conflict unavailable strikes degraded passed
check "sandbox row" "56 51 3 2 0 0 0 0 3 0 5" "$(row sandbox)"
check "auth row (the 5th failure trips the box)" "7 5 0 2 0 0 0 0 0 0 2" "$(row '(auth)')"
check "shadow mode: nothing enforced" \
  "sandbox=buckets,penalty,leases,fail_closed" \
  "$(grep -o 'sandbox=[a-z_,-]*' "$tmp/out")"

check "boxed key listed" "key acme/k1 1 1 1053 1053" "$(grep -m1 '^# key ' "$tmp/out" | awk '{print $2, $3, $4, $5, $6, $7}')"
# The sign-in's subject box (a SUBJECT box: the file's subject penalty),
# named by the request's subject attribute: alice, the only other box.
check "boxed subject listed" "subject alice 1" "$(grep -m1 '^# subject ' "$tmp/out" | awk '{print $2, $3, $4}')"
check "two scopes" "2" "$(sed -n 's/^# would have been boxed: \([0-9]*\) scopes.*/\1/p' "$tmp/out")"
check "shadow mode said" yes "$(grep -q '^# shadow-mode replay' "$tmp/out" && echo yes || echo no)"

# Staged rollout: the penalty box in shadow, the rest enforced; --enforce
# decides as the file says.  The key's fourth ignored 429 trips the box,
# which is recorded but does not refuse: the bucket does.  The split lists
# the tiers of the log (not a configuration's list of tiers).
{ cat "$CONF"; echo 'shadow_features = [ "penalty" ];'; } > "$tmp/staged.conf"
"$SLUICE" replay --policy "$tmp/staged.conf" --enforce "$tmp/log.csv" \
  > "$tmp/sout" 2>&1; rc=$?
check "staged: exit code" 0 "$rc"
srow() { grep -m1 "^# $1 " "$tmp/sout" | awk '{$1=""; $2=""; print}' | xargs; }
check "staged: the split" \
  "# not enforced: sandbox=penalty (auth)=penalty" \
  "$(grep '^# not enforced:' "$tmp/sout")"
check "staged: sandbox row (throttles enforced, no box)" \
  "56 51 5 0 0 0 0 0 3 0 0" "$(srow sandbox)"
check "staged: auth row (the lockout passed)" "7 5 0 2 0 0 0 0 0 0 2" \
  "$(srow '(auth)')"
check "staged: the box is still recorded" "key acme/k1 1" \
  "$(grep -m1 '^# key ' "$tmp/sout" | awk '{print $2, $3, $4}')"
check "staged: said" yes \
  "$(grep -q '^# as-configured replay' "$tmp/sout" && echo yes || echo no)"

# --decisions: one line per request, the report on stderr
"$SLUICE" replay --policy "$CONF" --decisions "$tmp/log.csv" > "$tmp/dec" 2>"$tmp/err"; rc=$?
check "--decisions exit code" 0 "$rc"
check "--decisions line count" 64 "$(wc -l < "$tmp/dec")"
check "50th allowed, nothing left" "1049,acme,k1,sandbox,GET,/v1/ledgers/L/entries,allow,200,0" "$(sed -n 51p "$tmp/dec" | cut -d, -f1-9)"
check "51st throttled, 3 strikes left" "throttled,429,0,0,3" "$(sed -n 52p "$tmp/dec" | cut -d, -f7-9,11-12)"
check "52nd: a strike" "throttled,429,0,2" "$(sed -n 53p "$tmp/dec" | cut -d, -f7-9,12)"
check "54th trips level 1 (5 min)" "boxed,429,300000,1" "$(sed -n 55p "$tmp/dec" | cut -d, -f7,8,10,11)"
check "other key allowed" "allow" "$(sed -n 56p "$tmp/dec" | cut -d, -f7)"
check "report went to stderr" yes "$(grep -q 'would have been boxed: 2' "$tmp/err" && echo yes || echo no)"

# the same result on one thread and on four
"$SLUICE" replay --policy "$CONF" --threads 1 "$tmp/log.csv" | grep -v '^# shadow' > "$tmp/t1"
"$SLUICE" replay --policy "$CONF" --threads 4 "$tmp/log.csv" | grep -v '^# shadow' > "$tmp/t4"
check "thread count does not change the result" "" "$(diff "$tmp/t1" "$tmp/t4")"

# malformed lines: reported with line number and field, skipped, exit 1
printf '1,acme,k1,sandbox,GET,/v1/x,1.2.3.4\nzz,acme,k1,sandbox,GET,/v1/x,1.2.3.4\n2,acme,k1,gold,GET,/v1/x,1.2.3.4\n3,acme,k1\n0,acme,k1,sandbox,GET,/v1/x,1.2.3.4\n' > "$tmp/bad.csv"
"$SLUICE" replay --policy "$CONF" "$tmp/bad.csv" > /dev/null 2>"$tmp/err"; rc=$?
check "malformed exit code" 1 "$rc"
check "bad t_ms named" yes "$(grep -q 'line 2: t_ms' "$tmp/err" && echo yes || echo no)"
check "unknown tier named" yes "$(grep -q 'line 3: tier' "$tmp/err" && echo yes || echo no)"
check "short line" yes "$(grep -q 'line 4: expected' "$tmp/err" && echo yes || echo no)"
check "time going backwards" yes "$(grep -q 'line 5: t_ms: goes backwards' "$tmp/err" && echo yes || echo no)"

# A malformed line changes nothing: a bad outcome on a line far in the
# future must not make the next lines go backwards.
printf '1,acme,k1,sandbox,GET,/v1/x,1.2.3.4\n99999,,,,POST,/v1/auth/token,1.2.3.4,alice,bogus\n2,acme,k1,sandbox,GET,/v1/x,1.2.3.4\n' > "$tmp/poison.csv"
"$SLUICE" replay --policy "$CONF" --decisions "$tmp/poison.csv" > "$tmp/out" 2>"$tmp/err"; rc=$?
check "bad outcome exit code" 1 "$rc"
check "bad outcome named, nothing else" "sluice replay: line 2: outcome: expected ok, unknown_client, bad_secret or pending" \
  "$(grep '^sluice replay: line' "$tmp/err")"
check "the line after a malformed one is decided" "1 2" "$(tail -n +2 "$tmp/out" | cut -d, -f1 | xargs)"

# t_ms past what int64 ns hold says the range and the value.
printf '9223372036855,acme,k1,sandbox,GET,/v1/x,1.2.3.4\n' > "$tmp/big.csv"
"$SLUICE" replay --policy "$CONF" "$tmp/big.csv" > /dev/null 2>"$tmp/err"; rc=$?
check "t_ms range exit" 1 "$rc"
check "t_ms range said" "sluice replay: line 1: t_ms: must be 0..9223372036854 (got 9223372036855)" \
  "$(grep '^sluice replay: line' "$tmp/err")"

# A line longer than the 1 MiB read buffer (stdin is read, not mapped) is
# malformed like any other: named, skipped, the next lines decided.
{ echo "1,acme,k1,sandbox,GET,/v1/x,1.2.3.4"; head -c 1100000 /dev/zero | tr '\0' x; echo
  echo "2,acme,k1,sandbox,GET,/v1/x,1.2.3.4"; } > "$tmp/long.csv"
"$SLUICE" replay --policy "$CONF" --decisions - < "$tmp/long.csv" > "$tmp/out" 2>"$tmp/err"; rc=$?
check "long line exit code" 1 "$rc"
check "long line named" "sluice replay: line 2: line longer than 1 MiB" "$(grep '^sluice replay: line' "$tmp/err")"
check "lines after a long line decided" "1 2" "$(tail -n +2 "$tmp/out" | cut -d, -f1 | xargs)"

# a durable store: replay into LMDB with times of a minute ago, then the
# support tools read and release what the replay left there (the replay's
# scope-id secret is 16 bytes of 0x3c).  The level 1 box lasts 5 minutes
# from the trip: no machine is slow enough for it to end before the checks.
printf '3c%.0s' $(seq 16) > "$tmp/secret"
now_ms=$(( $(date +%s) * 1000 - 60000 ))
for i in $(seq 0 53); do echo "$((now_ms + i)),acme,k1,sandbox,GET,/v1/ledgers/L/entries,192.0.2.1"; done > "$tmp/now.csv"
"$SLUICE" replay --policy "$CONF" --enforce --backend "lmdb:path=$tmp/db" "$tmp/now.csv" > "$tmp/lm" 2>&1; rc=$?
if [ "$rc" -eq 3 ] && grep -q 'not supported' "$tmp/lm"; then
  echo "lmdb not built: skipping the lmdb checks"
else
  check "replay into lmdb" 0 "$rc"
  A=(--store "lmdb:path=$tmp/db" --config "$CONF" --secret-file "$tmp/secret")
  out=$("$SLUICE" inspect "${A[@]}" --tenant acme --key k1 --tier sandbox 2>&1); rc=$?
  check "inspect lmdb exit" 0 "$rc"
  pending "inspect lmdb: boxed" "level: 1" "$(echo "$out" | grep -o 'level: [0-9]*')"
  pending "inspect lmdb: the offense" "offenses: 1" "$(echo "$out" | grep -o 'offenses: [0-9]*')"
  check "inspect lmdb: key bucket drained" "key (gcra): 0/50" "$(echo "$out" | grep -o 'key (gcra): *0/50' | tr -s ' ')"
  check "inspect lmdb: the key's penalty named" "keys (tenant, key; strike: early)" \
    "$(echo "$out" | grep -o 'keys ([^)]*)')"
  "$SLUICE" inspect "${A[@]}" --tenant acme --key k1 --tier gold > /dev/null 2>"$tmp/e"
  check "inspect: unknown tier is a usage error" 2 "$?"
  # what inspect cannot know it says it cannot tell, instead of showing a
  # clean record (another secret: no record under its ids) or an
  # impossible bucket (another configuration)
  printf '3d%.0s' $(seq 16) > "$tmp/secret2"
  out=$("$SLUICE" inspect --store "lmdb:path=$tmp/db" --config "$CONF" --secret-file "$tmp/secret2" \
    --tenant acme --key k1 --tier sandbox 2>&1); rc=$?
  check "inspect, another secret: exit" 1 "$rc"
  check "inspect, another secret: cannot tell" yes "$(echo "$out" | grep -q 'cannot tell: no record exists under this scope' && echo yes || echo no)"
  check "inspect, another secret: no clean record shown" "" "$(echo "$out" | grep -o 'level: 0\|key (gcra)')"
  out=$("$SLUICE" inspect --store "lmdb:path=$tmp/db" --secret-file "$tmp/secret" \
    --tenant acme --key k1 --tier sandbox 2>&1); rc=$?
  check "inspect without --config: usage error" 2 "$rc"
  check "inspect without --config: says why" yes "$(echo "$out" | grep -q "cannot tell a limit's state" && echo yes || echo no)"
  out=$("$SLUICE" inspect --store "lmdb:path=$tmp/db" --config "$HERE/../../etc/ledger.conf" \
    --secret-file "$tmp/secret" --tenant acme --key k1 --tier sandbox 2>&1); rc=$?
  check "inspect, another config: exit" 1 "$rc"
  check "inspect, another config: the key bucket cannot be told" yes \
    "$(echo "$out" | grep -q 'key (gcra): *cannot tell: the record does not fit --config' && echo yes || echo no)"
  check "inspect, another config: no impossible bucket" "" "$(echo "$out" | grep -o 'key (gcra): *[0-9]*/300')"
  "$SLUICE" release "${A[@]}" --tenant acme --key k1 --tier sandbox --who t --reason r \
    --audit "$tmp/audit" > /dev/null 2>&1
  pending "release from lmdb" 0 "$?"
  pending "one audit record" 1 "$(wc -l < "$tmp/audit" 2>/dev/null || echo 0)"
  out=$("$SLUICE" inspect "${A[@]}" --tenant acme --key k1 --tier sandbox 2>&1)
  pending "released: level 0, offense kept" "level: 0 offenses: 1" \
    "$(echo "$out" | grep -o 'level: [0-9]*\|offenses: [0-9]*' | xargs)"
fi

# --batch: the same decisions, line for line, as one by one, on a
# synthetic log (many lines of one t_ms, auth failures, reconciles and
# exports), in shadow mode and enforced with leases held.
python3 "$HERE/gen_policy_log.py" 20000 > "$tmp/gen.csv"
# Two reconciles of one ledger at one time: one by one the first's lease
# is released before the second is decided, so a batch must end there.
for i in 1 2; do
  echo "999999999,acme,k9,sandbox,POST,/v1/ledgers/reconcile,192.0.2.1,L1"
done >> "$tmp/gen.csv"
for opt in "" "--enforce --job-ms 600000"; do
  "$SLUICE" replay --policy "$CONF" $opt --decisions "$tmp/gen.csv" > "$tmp/one" 2>"$tmp/err"
  check "generated log $opt: every line decided (exports too)" "0 0" \
    "$? $(grep -c '^sluice replay: line' "$tmp/err")"
  "$SLUICE" replay --policy "$CONF" $opt --decisions --batch 16 "$tmp/gen.csv" > "$tmp/many" 2>/dev/null
  check "--batch 16 $opt: same decisions" same "$(cmp -s "$tmp/one" "$tmp/many" && echo same || echo differ)"
done
"$SLUICE" replay --policy "$CONF" --batch 17 "$tmp/log.csv" >/dev/null 2>&1; rc=$?
check "bad --batch exit" 2 "$rc"

# usage errors
"$SLUICE" replay --policy "$tmp/nonexistent.conf" "$tmp/log.csv" >/dev/null 2>"$tmp/err"; rc=$?
check "missing config exit" 2 "$rc"
check "missing config named" yes "$(grep -q -- '--policy' "$tmp/err" && echo yes || echo no)"
"$SLUICE" replay --policy "$CONF" --threads 0 "$tmp/log.csv" >/dev/null 2>"$tmp/err"; rc=$?
check "bad --threads exit" 2 "$rc"
"$SLUICE" replay --policy "$CONF" --backend "" "$tmp/log.csv" >/dev/null 2>"$tmp/err"; rc=$?
check "empty --backend exit" 2 "$rc"
check "empty --backend named" yes "$(grep -q -- '--backend: expected a store' "$tmp/err" && echo yes || echo no)"
mkdir "$tmp/adir"
"$SLUICE" replay --policy "$CONF" "$tmp/adir" >/dev/null 2>"$tmp/err"; rc=$?
check "directory LOG exit" 2 "$rc"
check "directory LOG said" "sluice replay: cannot read '$tmp/adir': Is a directory" "$(cat "$tmp/err")"
"$SLUICE" replay --policy "$CONF" --help | grep -q 'usage: sluice replay --policy'; check "--help" 0 $?

echo "$((n - fails))/$n checks passed"
[ "$fails" -eq 0 ]
