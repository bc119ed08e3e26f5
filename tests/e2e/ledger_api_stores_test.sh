#!/usr/bin/env bash
# ledger-api on the other shared stores: lmdb (each worker opens the
# environment after fork) and, when redis-server is installed, a Redis
# server on 127.0.0.1.  Two workers; what one worker granted, the other
# must see: a reconcile of one ledger holds it (409 from any worker), a
# drained key stays drained, and `sluice inspect` reads the same records.
# Then Redis is stopped under 4 workers: a boxed key stays out (run_outage).
set -u
API=$1; SLUICE=$2; HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pid=; rpid=
fails=0; n=0
cleanup() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$rpid" ] && kill "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
check() { n=$((n + 1)); if [ "$2" != "$3" ]; then fails=$((fails + 1)); echo "FAIL $1: expected '$2', got '$3'"; fi; }

# The port the service ($pid) reports in $tmp/out; a failure counted if none.
wait_port() { # name
  PORT=
  for _ in $(seq 1 600); do
    PORT=$(sed -n 's/^listening 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/out")
    [ -n "$PORT" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$PORT" ] && return
  echo "FAIL $1: no port"; cat "$tmp/err"; n=$((n + 1)); fails=$((fails + 1))
  return 1
}

run_store() { # name store
  local name=$1 store=$2 st i codes
  "$API" --port 0 --workers 2 --store "$store" --config "$HERE/e2e.conf" \
    --keys "$HERE/e2e-keys.csv" --secret-file "$HERE/e2e.secret" \
    --job-ms 600000 >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  wait_port "$name" || return
  for _ in $(seq 1 600); do
    st=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/metrics")
    [ "$st" = 200 ] && break; sleep 0.1
  done
  U=http://127.0.0.1:$PORT
  st=$(curl -s -m 30 -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer sk_recon' \
    -H 'Idempotency-Key: a' -d '{"ledger_id":"L"}' "$U/v1/ledgers/reconcile")
  check "$name: reconcile" 202 "$st"
  # Several tries, new connections each: they land on both workers.
  codes=$(for i in 1 2 3 4; do curl -s -m 30 -o /dev/null -w '%{http_code} ' -X POST \
    -H 'Authorization: Bearer sk_recon' -H "Idempotency-Key: b$i" \
    -d '{"ledger_id":"L"}' "$U/v1/ledgers/reconcile"; done)
  check "$name: the ledger is held for every worker" "409 409 409 409 " "$codes"
  # The sandbox key: 50 points, 1 per 10 min, shared by both workers.
  allowed=0
  for i in $(seq 1 60); do
    st=$(curl -s -m 30 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sk_abuser' "$U/v1/ledgers/x/entries")
    [ "$st" = 200 ] || break
    allowed=$((allowed + 1))
  done
  check "$name: one bucket across workers" "50 429" "$allowed $st"
  out=$("$SLUICE" inspect --store "$store" --config "$HERE/e2e.conf" --secret-file "$HERE/e2e.secret" \
    --tenant tenant-recon --key sk_recon --tier enterprise --ledger L 2>&1)
  check "$name: inspect sees the ledger lock" yes "$(echo "$out" | grep -q '^  ledger_lock (lock): *1 of 1 leases held, the last ends in' && echo yes || echo no)"
  kill -TERM "$pid"; wait "$pid"; check "$name: clean exit" 0 "$?"; pid=
}

# Redis stopped (SIGSTOP) under 4 workers whose policy file names the
# host's segments (host group): the key boxed before the stop stays out in
# every worker (the deny cache), without waiting on Redis.
run_outage() { # store
  local store=$1 st codes i
  { cat "$HERE/e2e.conf"
    echo "host = { degraded_store = \"shm:name=/sluice-e2e-deg-$$\";"
    echo "         deny_cache = \"shm:name=/sluice-e2e-deny-$$\"; };"
  } >"$tmp/host.conf"
  "$API" --port 0 --workers 4 --store "$store" --config "$tmp/host.conf" \
    --keys "$HERE/e2e-keys.csv" --secret-file "$HERE/e2e.secret" \
    >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  wait_port outage || return
  U=http://127.0.0.1:$PORT
  for i in $(seq 1 80); do
    st=$(curl -s -m 30 -D "$tmp/h" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sk_abuser' "$U/v1/ledgers/y/entries")
    grep -qi '^x-penalty-box-status: Active-Lockout' "$tmp/h" && break
  done
  check "outage: the key is boxed" 429 "$st"
  kill -STOP "$rpid"
  codes=$(for i in 1 2 3 4 5 6; do curl -s -m 30 -D - -o /dev/null -H 'Authorization: Bearer sk_abuser' \
    "$U/v1/ledgers/y/entries" | grep -ci '^x-penalty-box-status: Active-Lockout'; done | tr -d '\n')
  kill -CONT "$rpid"
  check "outage: boxed in every worker with Redis stopped" 111111 "$codes"
  kill -TERM "$pid"; wait "$pid"; check "outage: clean exit" 0 "$?"; pid=
  rm -f "/dev/shm/sluice-e2e-deg-$$" "/dev/shm/sluice-e2e-deny-$$"
}

run_store lmdb "lmdb:path=$tmp/lmdb"
# An lmdb directory that cannot be made will not appear by itself: a store
# failure at start (exit 3), not a service degraded for good.
timeout 20 "$API" --port 0 --store "lmdb:path=$tmp/no/such/dir" \
  >"$tmp/out" 2>"$tmp/err"; rc=$?
check "lmdb: a path that cannot be made: exit 3" "3 no" \
  "$rc $(grep -q '^listening' "$tmp/out" && echo yes || echo no)"
check "lmdb: a path that cannot be made: named" yes \
  "$(grep -q -- "--store lmdb:path=$tmp/no/such/dir" "$tmp/err" && echo yes || echo no)"
if command -v redis-server >/dev/null; then
  for try in 1 2 3 4 5; do
    rport=$((20000 + RANDOM % 20000))
    redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
      >"$tmp/redis.log" 2>&1 &
    rpid=$!
    for _ in $(seq 1 100); do
      grep -q 'Ready to accept' "$tmp/redis.log" && break
      kill -0 "$rpid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$rpid" 2>/dev/null && break
    rpid=
  done
  if [ -n "$rpid" ]; then
    run_store redis "redis:nodes=127.0.0.1:$rport;timeout_ms=1000"
    run_outage "redis:nodes=127.0.0.1:$rport;timeout_ms=100"
  else
    echo "redis-server did not start: skipping redis"
  fi
else
  echo "no redis-server: skipping redis"
fi
echo "$((n - fails))/$n checks passed"
[ "$fails" -eq 0 ]
