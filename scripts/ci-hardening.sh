#!/usr/bin/env bash
# The CI hardening pass (issue 9; docs/hardening.md):
#
#   1. asan   ASan + UBSan build, the whole `meson test` suite
#   2. tsan   TSan build, the suites that use threads
#   3. lint   a release (-O3, -Werror) build, a clang (-Werror) build of
#             everything, then cppcheck over lib/ backends/ tools/ examples/
#             (all must be clean)
#   4. fuzz   clang + libFuzzer build, every target for FUZZ_SECONDS
#             (default 20) from its seed corpus; any crash fails
#
# Usage: scripts/ci-hardening.sh [STEP...]   (default: all four)
# Environment: FUZZ_SECONDS (per target), FUZZ_SEED (default 1), HARDEN_BUILD_PREFIX (build
# directories are PREFIX-asan, -tsan, -release, -fuzz; default build-hard),
# HARDEN_JOBS (ninja -j and meson test --num-processes; default nproc).
# Backends whose libraries are missing are compiled out by meson and their
# tests and fuzz targets simply do not exist; nothing here needs them.
# Exits non-zero if any step failed; every step runs regardless.
set -u
cd "$(dirname "$0")/.."
SRC=$PWD
PREFIX=${HARDEN_BUILD_PREFIX:-build-hard}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
# A fixed seed makes a CI run explore the inputs a developer's run of the
# same script explored (FUZZ_SEED=0: a new random seed each run).
FUZZ_SEED=${FUZZ_SEED:-1}
JOBS=${HARDEN_JOBS:-$(nproc)}
STEPS=${*:-asan tsan lint fuzz}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# libconfig 1.5 leaks its string buffer on some syntax errors (reproduced
# with libconfig alone); nothing else is suppressed.
export LSAN_OPTIONS=suppressions=$SRC/fuzz/lsan.supp:print_suppressions=0
# die_after_fork=0: Criterion forks every test from a process that has
# threads; the child only runs the test, which TSan then watches.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:die_after_fork=0
failed=()
summary=()

step_time() { # name, seconds, status
  summary+=("$(printf '%-6s %4ss  %s' "$1" "$2" "$3")")
  [ "$3" = ok ] || failed+=("$1")
}

setup() { # dir, meson options... (always -Werror: not a default_option)
  local d=$1; shift
  set -- -Dwerror=true "$@"
  if [ -f "$d/build.ninja" ]; then
    meson setup --reconfigure "$d" "$@" >"$d.setup.log" 2>&1
  else
    meson setup "$d" "$@" >"$d.setup.log" 2>&1
  fi || { cat "$d.setup.log"; return 1; }
}

run_asan() {
  local d=$PREFIX-asan
  setup "$d" -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false || return 1
  ninja -C "$d" -j "$JOBS" || return 1
  meson test -C "$d" --print-errorlogs --num-processes "$JOBS" \
    --timeout-multiplier 3
}

run_tsan() {
  local d=$PREFIX-tsan
  # TSan needs clang or gcc with libtsan; clang's is always there.
  CC=${TSAN_CC:-clang} setup "$d" -Dbuildtype=debugoptimized \
    -Db_sanitize=thread -Db_lundef=false || return 1
  # The programs that start threads and run under TSan: the soak with
  # SLUICE_SOAK_THREADS=1 (the policy from 3 threads on mem, shm and lmdb),
  # and redis_pool_threads (16 threads over the redis store's lanes, plain
  # and TLS).
  # The Criterion suites that use threads (unit_mem, policy_threads,
  # lmdb_capacity, shm-stress, redis_store_*) cannot start under TSan:
  # Criterion's boxfort arena fails ("Could not initialize inheritable
  # arena") or crashes inside libcriterion, so they are left out; add a
  # name here once that works.  Names not configured are skipped.
  # e2e-ledger-api-hardening: ledger-api's workers run libmicrohttpd's
  # thread, the connection guard's and the webhook sink's (a sanitizer
  # report in a worker's log fails the test).  webhook-plain: the webhook
  # suite built without Criterion (tests/events/cr_plain.h says why),
  # real receivers on 127.0.0.1 up, down and slow, producers on threads.
  # nft: the nftables sink (a plain program) in a network namespace, its
  # thread against the deciding thread and sluice_nft_sync() waiters.
  # mem_batch_threads: threads deciding in batches (apply_many) on one mem
  # store while its tables grow (a plain program, for the same reason), and
  # one by one through the hot-key memo; mem_memo_threads: threads reading
  # and rewriting the memo's lines with no lock.
  local want="soak e2e-ledger-api-hardening redis_pool_threads webhook-plain mem_batch_threads mem_memo_threads nft"
  local plan
  plan=$( (meson introspect "$d" --targets; echo; meson introspect "$d" --tests) |
    WANT="$want" B="$PWD/$d" python3 -c '
import json, os, sys
want = os.environ["WANT"].split()
b = os.environ["B"]
targets_json, tests_json = sys.stdin.read().split("\n", 1)
outputs = {os.path.normpath(f) for t in json.loads(targets_json)
           for f in t["filename"]}
names, exes = [], set()
for t in json.loads(tests_json):
    if t["name"] in want:
        names.append(t["name"])
        for a in t["cmd"]:
            a = os.path.normpath(os.path.join(b, a))
            if a in outputs:
                exes.add(os.path.relpath(a, b))
print(" ".join(names))
print(" ".join(sorted(exes)))') || return 1
  local names exes
  names=$(sed -n 1p <<<"$plan")
  exes=$(sed -n 2p <<<"$plan")
  [ -n "$names" ] || { echo "tsan: no thread suites configured"; return 1; }
  # shellcheck disable=SC2086
  ninja -C "$d" -j "$JOBS" $exes || return 1
  echo "tsan: running $names"
  # shellcheck disable=SC2086
  SLUICE_SOAK_THREADS=1 meson test -C "$d" --no-rebuild --print-errorlogs \
    --num-processes "$JOBS" --timeout-multiplier 4 $names
}

run_lint() {
  command -v cppcheck >/dev/null || { echo "cppcheck not installed"; return 1; }
  # -O3 inlines more and so warns about more (-Werror): a release build of
  # the library and programs must compile as cleanly as the -O2 one.
  setup "$PREFIX-release" -Dbuildtype=release -Dtests=disabled || return 1
  ninja -C "$PREFIX-release" -j "$JOBS" >"$PREFIX-release.log" 2>&1 || {
    grep -E -A8 'error|FAILED' "$PREFIX-release.log" | head -40; return 1; }
  # clang, -Werror, everything (tests and programs too): the other clang
  # builds (TSan, fuzz) compile only what they run.
  CC=clang setup "$PREFIX-clang" -Dbuildtype=debugoptimized || return 1
  ninja -C "$PREFIX-clang" -j "$JOBS" >"$PREFIX-clang.log" 2>&1 || {
    grep -E -A8 'error|FAILED' "$PREFIX-clang.log" | head -40; return 1; }
  # Every layer's include folders (docs/layers.md), all at once.
  local inc=(-I include -I lib -I lib/core -I lib/util -I lib/algo
             -I backends/mem -I backends/shm -I backends/lmdb
             -I backends/redis)
  # Real findings fail the step; a justified one is suppressed inline,
  # next to the code, with cppcheck-suppress and a reason.  The defines
  # stand in for the compiler: cppcheck does not read system headers, so
  # ck's feature macro and __int128 are declared, and __extension__ (which
  # breaks cppcheck 2.10's AST) is dropped.  Tool limitations only:
  #  - wrongPrintfScanfArgNum in lib/policy/config.c: fail() hands every
  #    message format the same (v, lo, hi) and each uses 0 to 3 of them;
  #    C11 7.21.6.1p2 says excess arguments are evaluated and ignored.
  cppcheck -q --std=c11 --enable=warning,portability,performance \
    --inline-suppr --error-exitcode=1 -j "$JOBS" \
    -D__GNUC__ -D__x86_64__ -D__SIZEOF_INT128__=16 -D_GNU_SOURCE \
    -DCK_F_PR_CAS_64_2 -DCK_F_PR_LOAD_64_2 -D__extension__= \
    --suppress=missingIncludeSystem \
    --suppress=wrongPrintfScanfArgNum:lib/policy/config.c \
    "${inc[@]}" lib backends tools examples
}

run_fuzz() {
  local d=$PREFIX-fuzz fails=0 t exe
  CC=clang setup "$d" -Dfuzz=true -Dtests=disabled -Dexamples=disabled \
    -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false || return 1
  ninja -C "$d" -j "$JOBS" || return 1
  for exe in "$d"/fuzz/fuzz-*; do
    [ -x "$exe" ] && [ -f "$exe" ] || continue
    t=${exe##*/fuzz-}
    mkdir -p "$d/corpus-$t" "$d/artifacts-$t"
    # Seeds and regression inputs first, then FUZZ_SECONDS of new inputs
    # (kept in the build dir's corpus, so repeated runs go deeper).
    if ! "$exe" -max_total_time="$FUZZ_SECONDS" -seed="$FUZZ_SEED" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$d/artifacts-$t/" \
        "$d/corpus-$t" "$SRC/fuzz/corpus/$t" "$SRC/fuzz/regress/$t" \
        >"$d/fuzz-$t.log" 2>&1; then
      echo "fuzz-$t: FAILED (log $d/fuzz-$t.log, inputs in $d/artifacts-$t)"
      grep -E "invariant failed|runtime error|ERROR:|SUMMARY" \
        "$d/fuzz-$t.log" | head -5
      fails=$((fails + 1))
    else
      echo "fuzz-$t: ok ($(grep -m1 -oE 'stat::number_of_executed_units: [0-9]+' \
        "$d/fuzz-$t.log" | grep -oE '[0-9]+$') runs)"
    fi
  done
  [ "$fails" -eq 0 ]
}

for s in $STEPS; do
  start=$(date +%s)
  echo "=== hardening: $s"
  if "run_$s"; then st=ok; else st=FAILED; fi
  step_time "$s" $(( $(date +%s) - start )) "$st"
done
echo "=== hardening summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
