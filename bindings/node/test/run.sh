#!/usr/bin/env bash
# Run Node test files (node's own runner) against the meson-built addon:
#   run.sh FILE...           (from meson: SLUICE_NODE_ADDON, SLUICE_SRC set)
#   run.sh --bench SCRIPT    a benchmark script, run with plain node
# Exits 77 (skipped) only when node or its headers are missing; Fastify and
# the other packages come from `npm ci` (scripts/deps.sh runs it), and
# their absence is a failure that says so.
set -euo pipefail
cd "$SLUICE_SRC/bindings/node"
if ! command -v node >/dev/null || [ -z "${SLUICE_NODE_ADDON:-}" ]; then
  echo "node or its headers (node_api.h) not found: skipped"
  exit 77
fi
if [ ! -d node_modules/fastify ]; then
  echo "bindings/node/node_modules is missing: run 'npm ci' in bindings/node (scripts/deps.sh does)" >&2
  exit 1
fi
# A sanitizer build's addon needs the sanitizer runtimes loaded first, in
# an uninstrumented node.  Node's own allocations live until exit, so leak
# checking is off here; the addon's lifetimes are checked by the suites.
if nm -D "$SLUICE_NODE_ADDON" 2>/dev/null | grep -q ' U __asan_init'; then
  pre=$(gcc -print-file-name=libasan.so)
  if nm -D "$SLUICE_NODE_ADDON" | grep -q ' U __ubsan_'; then
    pre="$pre:$(gcc -print-file-name=libubsan.so)"
  fi
  export LD_PRELOAD=$pre
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
if [ "${1:-}" = --bench ]; then # a benchmark script, not a test file
  shift
  exec node "$@"
fi
exec node --test --test-concurrency=1 "$@"
