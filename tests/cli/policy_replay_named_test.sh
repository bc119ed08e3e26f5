#!/usr/bin/env bash
# `sluice replay --policy` on a log whose header line names its columns
# (docs/cli.md): any declared attribute, cost and status columns, per line
# the status, the binding limit and its remaining; the report per limit;
# headers refused with a clear message; the legacy layout unchanged.
# Expected lines are derived by hand in comments.
set -u
SLUICE=$1; LEDGER=$2  # etc/ledger.conf
. "$(dirname "$0")/check.sh"

# A chat route under two limits of one user: 3 requests a minute (a fixed
# window), and a bucket of 100 tokens refilled over a minute, the request
# charged its `tokens` attribute.
cat > "$tmp/p.conf" <<'CONF'
attributes = [ "user", "tokens" ];
limits = {
  per_user = { algorithm = "fixed_window"; scope = [ "user" ];
               limit = 3; window_ms = 60000; unit = "requests"; };
  tokens = { algorithm = "gcra"; scope = [ "user" ]; rate = 100;
             period_ms = 60000; burst = 100; unit = "tokens"; };
};
routes = ( { method = "POST"; route = "/chat";
             limits = ( "per_user",
                        { limit = "tokens";
                          cost = { attr = "tokens"; max = 100; }; } ); } );
CONF

# All at t=0, so nothing refills.  The binding limit is the one with the
# least left as a fraction of its own:
#  1 ann 60: per_user 2/3, tokens 40/100         -> tokens, 40
#  2 ann 30: per_user 1/3, tokens 10/100         -> tokens, 10
#  3 ann 20: tokens refuses (20 > 10); per_user's charge is undone; 10
#            more tokens come back in 10 * 600 ms -> tokens, 10, 6000 ms
#  4 bob 5:  per_user 2/3, tokens 95/100         -> per_user, 2
#  5 ann 5:  per_user 0/3, tokens 5/100          -> per_user, 0
#  6 ann 1:  per_user refuses, its window ends in a minute -> 60000 ms
#  7-10 malformed: no user, tokens not a number, a field short, status 99.
cat > "$tmp/l.csv" <<'CSV'
# comments come before the header too
t_ms,method,route,user,tokens,status
0,POST,/chat,ann,60,200
0,POST,/chat,ann,30,
0,POST,/chat,ann,20,
0,POST,/chat,bob,5,
0,POST,/chat,ann,5,
0,POST,/chat,ann,1,429
0,POST,/chat,,5,
0,POST,/chat,ann,abc,
0,POST,/chat,ann
0,POST,/chat,ann,1,99
CSV
out=$("$SLUICE" replay --policy "$tmp/p.conf" --decisions "$tmp/l.csv" \
      2>"$tmp/err"); rc=$?
check "named: exit 1 (malformed lines)" 1 "$rc"
check "named: per line status, binding limit, remaining" \
"t_ms,method,route,outcome,status,limit,remaining,retry_after_ms,reported_status
0,POST,/chat,allow,200,tokens,40,0,200
0,POST,/chat,allow,200,tokens,10,0,
0,POST,/chat,throttled,429,tokens,10,6000,
0,POST,/chat,allow,200,per_user,2,0,
0,POST,/chat,allow,200,per_user,0,0,
0,POST,/chat,throttled,429,per_user,0,60000,429" "$out"
check "named: malformed lines named" \
"sluice replay: line 9: user: not given (an empty field or no such column), and a limit of the route needs it
sluice replay: line 10: tokens: invalid argument (got \"abc\")
sluice replay: line 11: expected 6 fields, as the header names
sluice replay: line 12: status: expected an HTTP status, 100 to 599" \
"$(grep '^sluice replay: line' "$tmp/err")"
# Per limit: met (it ran), refused, bound.  per_user ran on all 6 and
# refused line 6, bound 4-6; tokens did not run on line 6, refused line 3,
# bound 1-3.
check "named: the report per limit" \
"# limit                unit             met    denied   binding
# per_user             requests           6         1         3
# tokens               tokens             5         1         3" \
"$(grep -A2 '^# limit ' "$tmp/err")"

# The report's rows and split are the log's tiers: this policy has none
# (no row or split of the built-in sandbox, growth, enterprise tiers).
check "named: the report's rows, the log's tiers" \
"# (no tier)          6           4           2           0           0           0           0           0         0         0         2
# not enforced: (no tier)=buckets,penalty,leases,fail_closed" \
"$(grep '^# (no tier)\|^# not enforced' "$tmp/err")"

# The same log from stdin, with threads asked for: one thread (a named
# log's scopes need not follow the tenant column), the same decisions.
out2=$("$SLUICE" replay --policy "$tmp/p.conf" --decisions - \
       <"$tmp/l.csv" 2>/dev/null)
check "named: stdin gives the same lines" "$out" "$out2"
"$SLUICE" replay --policy "$tmp/p.conf" --threads 4 "$tmp/l.csv" \
  >"$tmp/rep" 2>/dev/null
check "named: one thread" 1 "$(grep -c ', 1 thread,' "$tmp/rep")"

# Headers that cannot be read are refused before any line, exit 2.
hdr() {  # hdr NAME HEADER EXPECTED-MESSAGE
  printf '%s\n0,POST,/chat,ann,1\n' "$2" > "$tmp/h.csv"
  "$SLUICE" replay --policy "$tmp/p.conf" --decisions "$tmp/h.csv" \
    >"$tmp/o" 2>"$tmp/e"; local r=$?
  check "$1: exit 2" 2 "$r"
  check "$1: message" "$3" "$(cat "$tmp/e")"
  check "$1: no decision printed" "" "$(cat "$tmp/o")"
}
hdr "settle column" "t_ms,method,route,user,settle" \
  "sluice replay: line 1: header: column 'settle': a settle column names the attribute it reports, one the policy declares: settle:ATTR"
hdr "settle column, unknown attribute" "t_ms,method,route,user,settle:tokns" \
  "sluice replay: line 1: header: column 'settle:tokns': a settle column names the attribute it reports, one the policy declares: settle:ATTR"
hdr "unknown column" "t_ms,method,route,usr,tokens" \
  "sluice replay: line 1: header: column 'usr' is neither a request field (t_ms, method, route, tenant, key, tier, ip, cost, status) nor an attribute the policy declares (\`attributes\`)"
hdr "column twice" "t_ms,method,route,user,user" \
  "sluice replay: line 1: header: column 'user' named twice"
hdr "no route column" "t_ms,method,user,tokens,status" \
  "sluice replay: line 1: header: the columns method and route are required"
hdr "time first" "time,method,route,user,tokens" \
  "sluice replay: line 1: header: the first column must be t_ms"

# cost: the ledger file's routes take their costs from the file, so a
# cost given is refused, naming the column; one not a number is malformed.
cat > "$tmp/c.csv" <<'CSV'
t_ms,tenant,key,tier,method,route,cost
0,t1,k1,sandbox,GET,/v1/ledgers/L1,300
0,t1,k1,sandbox,GET,/v1/ledgers/L1,
0,t1,k1,sandbox,GET,/v1/ledgers/L1,x
CSV
# sandbox key bucket: burst 300, cost 1 -> 299 left.
out=$("$SLUICE" replay --policy "$LEDGER" --decisions "$tmp/c.csv" \
      2>"$tmp/err"); rc=$?
check "cost column: exit 1" 1 "$rc"
check "cost column: the line without a cost decided" \
"t_ms,method,route,outcome,status,limit,remaining,retry_after_ms
0,GET,/v1/ledgers/L1,allow,200,key,299,0" "$out"
check "cost column: refused, not a number" \
"sluice replay: line 2: cost: a route of declared limits takes its costs from the policy file (leave the column empty)
sluice replay: line 4: cost: out of range or not a decimal integer" \
  "$(grep '^sluice replay: line' "$tmp/err")"

# The ledger file's attributes as columns: a sign-in's subject and result,
# a reconcile's ledger (its lock: a second reconcile of L1 is a 409).
cat > "$tmp/a.csv" <<'CSV'
t_ms,tenant,key,tier,method,route,ip,subject,result,ledger
0,,,,POST,/v1/auth/token,192.0.2.9,ann,bad_secret,
0,t1,k1,growth,POST,/v1/ledgers/reconcile,192.0.2.9,,,L1
0,t1,k1,growth,POST,/v1/ledgers/reconcile,192.0.2.9,,,L1
0,t1,k1,growth,POST,/v1/ledgers/reconcile,192.0.2.9,,,L2
CSV
out=$("$SLUICE" replay --policy "$LEDGER" --enforce --job-ms 60000 \
      --decisions "$tmp/a.csv" 2>/dev/null)
check "ledger attributes: sign-in, lock, leases" \
"t_ms,method,route,outcome,status,limit,remaining,retry_after_ms
0,POST,/v1/auth/token,allow,200,-,0,0
0,POST,/v1/ledgers/reconcile,allow,200,key,1490,0
0,POST,/v1/ledgers/reconcile,conflict,409,ledger_lock,0,30000
0,POST,/v1/ledgers/reconcile,allow,200,key,1480,0" "$out"

# A request no route matches, and a cost on a declared route, are said so.
printf 't_ms,method,route,user,tokens,cost\n0,GET,/chat,ann,1,\n0,POST,/chat,ann,1,2\n' \
  > "$tmp/r.csv"
"$SLUICE" replay --policy "$tmp/p.conf" --decisions "$tmp/r.csv" \
  >/dev/null 2>"$tmp/err"
check "no route, cost on a declared route: named" \
"sluice replay: line 2: route: no route of the policy matches GET /chat
sluice replay: line 3: cost: a route of declared limits takes its costs from the policy file (leave the column empty)" \
"$(grep '^sluice replay: line' "$tmp/err")"

# Into a store read later at the wall clock (sluice inspect): a log of
# long ago is said to have written records that may have expired there;
# one at the wall clock's time is not.
mkdir "$tmp/db1" "$tmp/db2"
"$SLUICE" replay --policy "$tmp/p.conf" --backend "lmdb:path=$tmp/db1" \
  "$tmp/l.csv" >"$tmp/o" 2>/dev/null
check "into a store, a log of long ago: said" 1 \
  "$(grep -c '^# note: the log ends [0-9]* s before the wall clock' "$tmp/o")"
printf 't_ms,method,route,user,tokens\n%s,POST,/chat,ann,1\n' \
  "$(date +%s%3N)" > "$tmp/now.csv"
"$SLUICE" replay --policy "$tmp/p.conf" --backend "lmdb:path=$tmp/db2" \
  "$tmp/now.csv" >"$tmp/o" 2>/dev/null
check "into a store, a log of now: nothing said" 0 \
  "$(grep -c '^# note' "$tmp/o")"

# Tiers as the log names them, by name (the growth key's bucket is
# growth's: 1500 points), and only those: no sandbox row.
printf 't_ms,tenant,key,tier,method,route\n0,t1,k1,growth,GET,/v1/x\n0,t2,k1,enterprise,GET,/v1/x\n0,t2,k1,enterprise,GET,/v1/x\n' > "$tmp/t.csv"
"$SLUICE" replay --policy "$LEDGER" --decisions "$tmp/t.csv" > "$tmp/d" 2>"$tmp/o"
check "tiers: a row per tier the log names" "enterprise 2
growth 1
# not enforced: enterprise=buckets,penalty,leases,fail_closed growth=buckets,penalty,leases,fail_closed" \
  "$(grep '^# \(growth\|sandbox\|enterprise\) ' "$tmp/o" | awk '{print $2, $3}'; grep '^# not enforced' "$tmp/o")"
check "tiers: the growth key's bucket" "0,GET,/v1/x,allow,200,key,1499,0" "$(sed -n 2p "$tmp/d")"

# The legacy layout, headerless or with its own names, is read as before.
printf '0,t1,k1,sandbox,GET,/v1/ledgers/L1,10.0.0.1\n' > "$tmp/old.csv"
out=$("$SLUICE" replay --policy "$LEDGER" --decisions "$tmp/old.csv" \
      2>/dev/null)
check "legacy headerless" \
"t_ms,tenant,key,tier,method,route,outcome,status,remaining,retry_after_ms,level,strikes_remaining
0,t1,k1,sandbox,GET,/v1/ledgers/L1,allow,200,299,0,0,20" "$out"
{ echo "t_ms,tenant,key,tier,method,route,ip"; cat "$tmp/old.csv"; } \
  > "$tmp/old2.csv"
out2=$("$SLUICE" replay --policy "$LEDGER" --decisions "$tmp/old2.csv" \
       2>/dev/null)
check "legacy with its header" "$out" "$out2"

# settle:ATTR: an admitted request's real tokens, settled right after its
# decision (the printed line is the decision as made).  All at t=0:
#  1 ann 60, used 10: tokens 40 left, then 50 back -> 90
#  2 ann 80: 90 - 80 = 10 (refused without the settle) -> tokens, 10
#  3 bob 5, used 50: per_user 2/3, tokens 95/100 -> per_user, 2; then 45
#    more tokens charged -> 50
#  4 bob 60: 50 < 60, refused; 10 tokens in 10 * 600 ms -> 6000 ms
#  5 bob 1, used 2x: per_user 1/3, tokens 49/100 -> per_user, 1; its
#    settle value refused
cat > "$tmp/s.csv" <<'CSV'
t_ms,method,route,user,tokens,settle:tokens
0,POST,/chat,ann,60,10
0,POST,/chat,ann,80,
0,POST,/chat,bob,5,50
0,POST,/chat,bob,60,
0,POST,/chat,bob,1,2x
CSV
out=$("$SLUICE" replay --policy "$tmp/p.conf" --decisions "$tmp/s.csv" \
      2>"$tmp/err"); rc=$?
check "settle: exit 1 (a bad settle value)" 1 "$rc"
check "settle: later decisions see the settled tokens" \
"t_ms,method,route,outcome,status,limit,remaining,retry_after_ms
0,POST,/chat,allow,200,tokens,40,0
0,POST,/chat,allow,200,tokens,10,0
0,POST,/chat,allow,200,per_user,2,0
0,POST,/chat,throttled,429,tokens,50,6000
0,POST,/chat,allow,200,per_user,1,0" "$out"
check "settle: the bad value named" \
"sluice replay: line 6: tokens: invalid argument (got \"2x\")" \
"$(grep '^sluice replay: line' "$tmp/err")"
check "settle: the report counts the settled" \
"# settled: 2 admitted requests reported their real cost" \
"$(grep '^# settled' "$tmp/err")"

# Boxes of a declared penalty: two users blocked by one strike each are
# two scopes in the report (named by their hashed ids: the event carries
# no tenant), not one row "key ?" with both trips.
cat > "$tmp/box.conf" <<'CONF'
attributes = [ "user" ];
limits = { api = { algorithm = "fixed_window"; scope = [ "user" ];
                   limit = 1; window_ms = 60000; }; };
penalties = { blocked = { scope = [ "user" ]; strike = "every";
  strikes = 1; strike_window_ms = 60000; offense_ttl_s = 60;
  levels = ( { box_s = 60; }, { box_s = 60; }, { box_s = 60; } ); }; };
routes = ( { method = "*"; route = "/*"; limits = ( "api" );
             penalty = "blocked"; failure = "degraded"; } );
CONF
printf 't_ms,method,route,user\n0,GET,/a,ann\n0,GET,/a,ann\n0,GET,/a,bob\n0,GET,/a,bob\n' \
  > "$tmp/box.csv"
"$SLUICE" replay --policy "$tmp/box.conf" --enforce "$tmp/box.csv" \
  > "$tmp/box.out" 2>&1
check "declared boxes: one row per scope" \
"# would have been boxed: 2 scopes
2" "$(grep '^# would' "$tmp/box.out"; grep -c '^# hashed  [0-9a-f]\{32\} ' "$tmp/box.out")"

finish
