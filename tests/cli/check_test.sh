#!/usr/bin/env bash
# `sluice check POLICY...` (docs/cli.md): a file that loads is said to, with
# its attributes and limits; one that does not gets the loader's
# FILE:LINE: SETTING: problem and exit 1; a warning goes to stderr with
# exit 0; an unreadable file is a usage error; several files, the worst
# exit.
set -u
SLUICE=$1
. "$(dirname "$0")/check.sh"

cat > "$tmp/ok.conf" <<'CONF'
attributes = [ "user", "plan" ];
limits = {
  api = { algorithm = "gcra"; scope = [ "user" ]; rate = 10;
          period_ms = 1000; burst = 20; unit = "requests";
          by = "plan"; params = { pro = { rate = 50; burst = 100; }; }; };
  jobs = { algorithm = "concurrency"; scope = [ "user", "route" ]; max = 2;
           ttl_ms = 60000; };
};
routes = ( { method = "*"; route = "/jobs/*"; limits = ( "api", "jobs" ); },
           { method = "*"; route = "/*"; limits = ( "api" ); } );
CONF
out=$("$SLUICE" check "$tmp/ok.conf" 2>"$tmp/err"); rc=$?
check "loads: exit 0" 0 "$rc"
check "loads: what it declares" \
"$tmp/ok.conf: loads
attributes: user plan
limit api: gcra, scope user, unit requests, denial 429, numbers by plan
limit jobs: concurrency, scope user route, unit concurrent, denial 429" "$out"
check "loads: nothing on stderr" "" "$(cat "$tmp/err")"

# A cost above the bucket: the loader's message, its line, exit 1.
sed 's|limits = ( "api" ); } );|limits = ( { limit = "api"; cost = 21; } ); } );|' \
  "$tmp/ok.conf" > "$tmp/bad.conf"
out=$("$SLUICE" check "$tmp/bad.conf" 2>"$tmp/err"); rc=$?
check "refused: exit 1" 1 "$rc"
check "refused: FILE:LINE: setting" \
  "sluice check: $tmp/bad.conf:10: routes.[1].limits.[0].cost: must be 1..20, the smallest burst of limit \"api\" (got 21)" \
  "$(cat "$tmp/err")"
check "refused: nothing on stdout" "" "$out"

# A limit no route applies: loads, with a warning.
sed 's|limits = ( "api", "jobs" ); },|limits = ( "api" ); },|' \
  "$tmp/ok.conf" > "$tmp/warn.conf"
out=$("$SLUICE" check "$tmp/warn.conf" 2>"$tmp/err"); rc=$?
check "warning: exit 0" 0 "$rc"
check "warning: said" \
  "sluice check: warning: $tmp/warn.conf:6: limits.jobs: no route applies it" \
  "$(cat "$tmp/err")"

# A file of general settings alone (no route): refused, nothing could be
# decided on it.
printf 'shadow = false;\n' > "$tmp/classes.conf"
"$SLUICE" check "$tmp/classes.conf" >/dev/null 2>"$tmp/err"; rc=$?
check "no routes: refused" 1 "$rc"
check "no routes: said" \
  "sluice check: $tmp/classes.conf: routes: no route (a policy lists its routes and the limits they apply; etc/ledger.conf is the ledger API's)" \
  "$(cat "$tmp/err")"
# A route of an endpoint class (the library has none): refused on its line.
printf 'routes = (\n  { method = "GET"; route = "/x"; class = "standard"; }\n);\n' > "$tmp/classes.conf"
"$SLUICE" check "$tmp/classes.conf" >/dev/null 2>"$tmp/err"; rc=$?
check "a class route: refused" 1 "$rc"
check "a class route: said" 1 "$(grep -c "classes.conf:2: routes.\[0\].class: unknown setting" "$tmp/err")"

"$SLUICE" check "$tmp/none.conf" >/dev/null 2>"$tmp/err"; rc=$?
check "unreadable: exit 2" 2 "$rc"
check "unreadable: named" 1 "$(grep -c "none.conf" "$tmp/err")"
"$SLUICE" check "$tmp/ok.conf" "$tmp/bad.conf" "$tmp/ok.conf" >"$tmp/o" 2>/dev/null
rc=$?
check "several files: the worst exit" 1 "$rc"
check "several files: each checked" 2 "$(grep -c ': loads$' "$tmp/o")"
"$SLUICE" check >/dev/null 2>&1
check "no file: usage" 2 "$?"
"$SLUICE" check --help | grep -q '^usage: sluice check POLICY'
check "--help" 0 "$?"

finish
