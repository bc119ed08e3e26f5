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
for want in sluice_limiter_open sluice_strerror sluice_backend_find sluice_scope_id \
    sluice_program_validate sluice_program_run sluice_program_expiry sluice_limiter_decide \
    sluice_limiter_take sluice_uri_param; do
  printf '%s\n' "$syms" | grep -qx "$want" || { echo "missing export: $want"; fails=$((fails+1)); }
done
# Internal since the one path (issue 39): an op is a one-step program, the
# algorithms' steps and a backend's job are the library's own, and so are
# its hashing, randomness and store-string parsing.
for gone in sluice_op_step sluice_op_validate sluice_op_expiry sluice_op_step_single \
    sluice_job_run sluice_job_op sluice_program_step_op sluice_gcra_step \
    sluice_gcra_params_check sluice_siphash64 sluice_random_bytes sluice_key_hashtag \
    sluice_uri_check sluice_uri_int sluice_store_malloc sluice_store_free; do
  printf '%s\n' "$syms" | grep -qx "$gone" && { echo "exported but internal: $gone"; fails=$((fails+1)); }
done
echo "$((3 - (fails > 0 ? 1 : 0))) passed, $((fails > 0 ? 1 : 0)) failed"
[ "$fails" -eq 0 ]
