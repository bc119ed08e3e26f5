#!/usr/bin/env bash
# `sluice inspect` of declared limits (docs/cli.md): a replay into an lmdb
# store at the wall clock's time writes a user's limits; inspect reads them
# back per limit with the replay's secret, changing nothing.  Figures are
# derived by hand in comments; times left are not compared (the wall
# clock moves).
set -u
SLUICE=$1
. "$(dirname "$0")/check.sh"

cat > "$tmp/p.conf" <<'CONF'
attributes = [ "user", "tokens" ];
limits = {
  per_user = { algorithm = "fixed_window"; scope = [ "user" ];
               limit = 3; window_ms = 600000; unit = "requests"; };
  tokens = { algorithm = "gcra"; scope = [ "user" ]; rate = 100;
             period_ms = 600000; burst = 100; unit = "tokens"; };
  jobs = { algorithm = "concurrency"; scope = [ "user", "route" ]; max = 2;
           ttl_ms = 600000; };
};
routes = ( { method = "POST"; route = "/chat";
             limits = ( "per_user",
                        { limit = "tokens";
                          cost = { attr = "tokens"; max = 100; }; } ); },
           { method = "POST"; route = "/jobs/*"; limits = ( "jobs" ); } );
CONF
# The replay's scope-id secret: 16 bytes of 0x3c.
printf '3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c\n' > "$tmp/secret"
mkdir "$tmp/db"
t=$(date +%s%3N)
# ann: 60 then 30 tokens (10 of 100 left, 1 of 3 requests), and a job
# whose lease --job-ms holds, then the replay's end releases (the lease
# named by the line's route and user).
printf 't_ms,method,route,user,tokens\n%s,POST,/chat,ann,60\n%s,POST,/chat,ann,30\n%s,POST,/jobs/x,ann,\n' \
  "$t" "$t" "$t" > "$tmp/w.csv"
"$SLUICE" replay --policy "$tmp/p.conf" --backend "lmdb:path=$tmp/db" \
  --job-ms 600000 "$tmp/w.csv" >/dev/null 2>&1
check "replay into lmdb" 0 $?

I="inspect --store lmdb:path=$tmp/db --secret-file $tmp/secret --config $tmp/p.conf"
out=$("$SLUICE" $I --limits --attr user=ann --route /jobs/x 2>&1); rc=$?
check "inspect: exit 0" 0 "$rc"
check "inspect: every limit of the scope" \
"store: lmdb:path=$tmp/db (lmdb, shared between processes, durable)
scope: route=/jobs/x user=ann
  per_user (fixed_window):     1/3 requests left, full in S
  tokens (gcra):               10/100 tokens left, full in S
  jobs (concurrency):          0 of 2 leases held" \
"$(printf '%s\n' "$out" | sed 's/full in [0-9.]* s/full in S/')"
# Without the route, the lease set's scope is not given: said, not read.
out=$("$SLUICE" $I --limits --attr user=ann 2>&1)
check "inspect: a limit the scope does not give" \
  "  jobs (concurrency):          not this scope's (it needs route)" \
  "$(printf '%s\n' "$out" | tail -1)"
out=$("$SLUICE" $I --limit tokens --attr user=ann 2>&1)
check "inspect --limit: that limit only" 3 "$(printf '%s\n' "$out" | wc -l)"
# Nothing was changed by reading: the same figures again.
out=$("$SLUICE" $I --limit per_user --attr user=ann 2>&1)
check "inspect changes nothing" "  per_user (fixed_window):     1/3 requests left" \
  "$(printf '%s\n' "$out" | tail -1 | sed 's/, full in.*//')"
# Another user has no record: cannot tell, exit 1.
"$SLUICE" $I --limits --attr user=bob >"$tmp/o" 2>&1
check "inspect: no record, cannot tell" 1 $?
check "inspect: says so" 1 "$(grep -c '^cannot tell: no record' "$tmp/o")"
# Usage errors, exit 2.
"$SLUICE" $I --limit nope --attr user=ann >/dev/null 2>"$tmp/e"
check "unknown limit: exit 2" 2 $?
check "unknown limit: message" \
  "sluice inspect: --limit nope: not a limit of --config $tmp/p.conf" \
  "$(cat "$tmp/e")"
"$SLUICE" $I --limit jobs --attr user=ann >/dev/null 2>"$tmp/e"
check "--limit without its scope: exit 2" 2 $?
check "--limit without its scope: message" \
  "sluice inspect: --limit jobs: its scope needs route" "$(cat "$tmp/e")"
"$SLUICE" $I --limits >/dev/null 2>"$tmp/e"
check "no attributes: exit 2" 2 $?
"$SLUICE" $I --limits --attr user >/dev/null 2>"$tmp/e"
check "--attr without =: exit 2" 2 $?
"$SLUICE" inspect --store "lmdb:path=$tmp/db" --secret-file "$tmp/secret" \
  --config default --limits --attr user=ann >/dev/null 2>"$tmp/e"
check "a config without limits: exit 2" 2 $?

# A limit whose numbers a plan chooses (not in its scope): read with the
# plan given, and said when it is not (the limit's own numbers then).
cat > "$tmp/plan.conf" <<'CONF'
attributes = [ "store", "plan" ];
limits = {
  api = { algorithm = "gcra"; scope = [ "store" ]; rate = 4;
          period_ms = 600000; burst = 4; unit = "requests";
          by = "plan"; params = { plus = { rate = 40; burst = 40; }; }; };
};
routes = ( { method = "*"; route = "/*"; limits = ( "api" ); } );
CONF
mkdir "$tmp/db3"
printf 't_ms,method,route,store,plan\n%s,GET,/x,s1,plus\n' "$t" > "$tmp/p.csv"
"$SLUICE" replay --policy "$tmp/plan.conf" --backend "lmdb:path=$tmp/db3" \
  "$tmp/p.csv" >/dev/null 2>&1
P="inspect --store lmdb:path=$tmp/db3 --secret-file $tmp/secret --config $tmp/plan.conf"
check "by: the plan given" "  api (gcra):                  39/40 requests left" \
  "$("$SLUICE" $P --limits --attr store=s1 --attr plan=plus 2>&1 | tail -1 |
     sed 's/, full in.*//')"
check "by: the plan not given, said" 1 \
  "$("$SLUICE" $P --limits --attr store=s1 2>&1 |
     grep -c "\[plan not given: the limit's own numbers\]$")"
finish
