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
. test/sanitizers.sh
sluice_sanitizers "$SLUICE_NODE_ADDON"
if [ "${1:-}" = --bench ]; then # a benchmark script, not a test file
  shift
  exec node "$@"
fi
exec node --test --test-concurrency=1 "$@"
