#!/usr/bin/env bash
# Only the public API leaves the shared library: every exported symbol is
# sluice_<something>, none is an internal sluice__ one, and the API the
# headers promise is there.
set -u
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRB]$/ {print $3}' | sed 's/@.*//' | sort -u)
bad=$(printf '%s\n' "$syms" | grep -v '^sluice_' | grep -v '^$')
internal=$(printf '%s\n' "$syms" | grep '^sluice__')
fails=0
if [ -n "$bad" ]; then echo "non-sluice symbols exported:"; echo "$bad"; fails=$((fails+1)); fi
if [ -n "$internal" ]; then echo "internal symbols exported:"; echo "$internal"; fails=$((fails+1)); fi
for want in sluice_limiter_open sluice_strerror sluice_op_step sluice_backend_find sluice_scope_id \
    sluice_program_run sluice_limiter_decide sluice_limiter_take; do
  printf '%s\n' "$syms" | grep -qx "$want" || { echo "missing export: $want"; fails=$((fails+1)); }
done
echo "$((3 - (fails > 0 ? 1 : 0))) passed, $((fails > 0 ? 1 : 0)) failed"
[ "$fails" -eq 0 ]
