#!/usr/bin/env bash
# `sluice simulate`: each scenario tells the story the spec says it should,
# read from its report (deterministic: virtual clock, seeded draws).
# The scenarios' clients send etc/ledger.conf's routes and attributes: the
# file is given explicitly (the default policy is that file too).
set -u
SLUICE=$1; LEDGER=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
check() { # name expected actual
  n=$((n + 1))
  if [ "$2" != "$3" ]; then fails=$((fails + 1)); printf 'FAIL %s: expected "%s", got "%s"\n' "$1" "$2" "$3"; fi
}
val() { # report line prefix, label: the number after "label " on that line
  grep -m1 "^$1" "$tmp/out" | grep -oE "$2 [0-9]+" | head -1 | awk '{print $NF}'
}
run() { "$SLUICE" simulate --config "$LEDGER" --plot "$tmp/$1.svg" "$1" >"$tmp/out" 2>&1; }

run growth-batch; check "growth-batch exit" 0 $?
# The batch overruns the tenant bucket: some 429s, but the clients honour
# Retry-After, so no strike and no box.
thr=$(val "requests sent" "429s")
check "growth-batch throttled some" yes "$([ "${thr:-0}" -gt 0 ] && echo yes || echo no)"
check "growth-batch strikes" 0 "$(val "requests sent" strikes)"
check "growth-batch no box trips" "0 0 0" "$(grep -m1 '^  key ' "$tmp/out" | grep -oE '[0-9]+' | xargs)"
check "growth-batch plot is SVG" yes "$(head -c 4 "$tmp/growth-batch.svg" | grep -q '<svg' && echo yes || echo no)"
# the plot has the remaining-points line and 429 bars (there were 429s);
# tests/cli/plot_check.py reads every plot in detail
check "plot: a remaining-points line" yes "$(grep -q '<polyline class="line"[^>]*points="[0-9]' "$tmp/growth-batch.svg" && echo yes || echo no)"
check "plot: 429 bars" yes "$(grep -q '<rect class="bar"[^>]*fill="#d62728"' "$tmp/growth-batch.svg" && echo yes || echo no)"

run retry-ignorer; check "retry-ignorer exit" 0 $?
# One trip at each level, ending suspended (403); the polite key of the
# same tenant is never throttled.
check "retry-ignorer key trips L1 L2 L3" "1 1 1" "$(grep -m1 '^  key ' "$tmp/out" | grep -oE '[0-9]+' | xargs)"
check "retry-ignorer ends suspended" "suspended, HTTP 403, penalty level 3" \
  "$(grep -m1 '^key-hammer at the end' "$tmp/out" | sed 's/.*: //')"
check "retry-ignorer polite key 429s" 0 "$(val "key-polite" "429s")"
check "retry-ignorer events" yes "$(grep -q 'alert=1' "$tmp/out" && grep -q 'suspend=1' "$tmp/out" && echo yes || echo no)"

run batch-backoff; check "batch-backoff exit" 0 $?
check "batch-backoff posted all" 20000 "$(val "entries posted" posted)"
check "batch-backoff 429s" 0 "$(val "requests sent" "429s")"
check "batch-backoff strikes" 0 "$(val "requests sent" strikes)"

run credential-stuffing; check "credential-stuffing exit" 0 $?
check "stuffing signatures and IP bans" "3 3" "$(val "stuffing signatures" signatures) $(val "stuffing signatures" "\\(level 3\\)")"
check "office users never refused" 0 "$(val "office users" "attempts,")"

run backend-outage; check "backend-outage exit" 0 $?
r503=$(val "reconcile" fail-closed); a503=$(val "auth token" fail-closed); deg=$(val "standard GETs" degraded)
check "reconcile fails closed" yes "$([ "${r503:-0}" -gt 0 ] && echo yes || echo no)"
check "auth fails closed" yes "$([ "${a503:-0}" -gt 0 ] && echo yes || echo no)"
check "standard traffic degraded, never 503" "yes 0" \
  "$([ "${deg:-0}" -gt 0 ] && echo yes || echo no) $(val "standard GETs" "503s")"
check "degraded on and off" "1 1" "$(val "events: degraded_on " degraded_on) $(val "events: degraded_on " degraded_off)"

"$SLUICE" simulate no-such-scenario >/dev/null 2>"$tmp/err"; check "unknown scenario exit" 2 $?
check "unknown scenario named" yes "$(grep -q "no-such-scenario" "$tmp/err" && echo yes || echo no)"
"$SLUICE" simulate --plot >/dev/null 2>&1; check "missing option argument exit" 2 $?
"$SLUICE" simulate --help >/dev/null; check "--help exit" 0 $?
"$SLUICE" simulate --list extra >/dev/null 2>"$tmp/err"; check "--list with an argument exit" 2 $?
check "--list with an argument named" yes "$(grep -q "'extra'" "$tmp/err" && echo yes || echo no)"

# Routes that match none of the scenario's requests: bad input (exit 1),
# naming the request, nothing run.
printf 'routes = ( { method = "GET"; route = "/health"; limits = ( ); } );\n' > "$tmp/routes.conf"
"$SLUICE" simulate --config "$tmp/routes.conf" retry-ignorer >"$tmp/out" 2>"$tmp/err"; rc=$?
check "unmatched route exit" 1 "$rc"
check "unmatched route said" "sluice simulate: --config: scenario retry-ignorer sends GET /v1/ledgers/l1/entries, which no route of the policy matches" "$(cat "$tmp/err")"
# A policy without the address's box cannot raise its strikes: said.
"$SLUICE" simulate --config "$tmp/routes.conf" credential-stuffing >/dev/null 2>"$tmp/err"; rc=$?
check "no address box exit" 1 "$rc"
check "no address box said" "sluice simulate: scenario credential-stuffing does not fit the policy" "$(cat "$tmp/err")"

echo "$((n - fails))/$n checks passed"
[ "$fails" -eq 0 ]
