#!/usr/bin/env bash
# The man pages say what the programs and the module say: every line of
# `sluice --help`, of each `sluice COMMAND --help` and of `ledger-api
# --help` is in the built page; every directive of the module's
# ngx_command_t table has an entry in ngx_http_sluice_module.5, and a
# directive the docs table lacks fails the generator, naming it; groff
# reads every page without a warning.
#   man_pages.sh SRCDIR BUILDDIR
set -uo pipefail
src=$1 build=$2
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A page's text lines as the program printed them (roff escapes undone).
page_text() { sed -e 's/^\\&//' -e 's/\\-/-/g' -e 's/\\e/\\/g' "$1"; }
# Every non-blank line of a help text must be a line of the page.
has_help() { # PAGE PROGRAM [ARGS...]
  local page=$1; shift
  "$@" --help >"$tmp/help" 2>&1 || { bad "$* --help failed"; return; }
  page_text "$page" >"$tmp/page"
  local missing
  missing=$(grep -v '^[[:space:]]*$' "$tmp/help" | grep -vxFf "$tmp/page" | head -3)
  if [ -z "$missing" ]; then ok "$(basename "$page") has \`$* --help\`"
  else bad "$(basename "$page") lacks lines of \`$* --help\`: $missing"; fi
}

sluice=$build/tools/sluice/sluice
has_help "$build/man/sluice.1" "$sluice"
cmds=$("$sluice" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}')
[ -n "$cmds" ] || bad "no commands in sluice --help"
for c in $cmds; do
  has_help "$build/man/sluice.1" "$sluice" "$c"
done
has_help "$build/man/sluice.1" "$sluice" replay --policy
if [ -x "$build/examples/ledger-api/ledger-api" ]; then
  has_help "$build/man/ledger-api.1" "$build/examples/ledger-api/ledger-api"
fi

page=$build/man/ngx_http_sluice_module.5
mod=$src/nginx/ngx_http_sluice_module.c
directives=$(sed -n '/ngx_command_t ngx_http_sluice_commands\[\]/,/ngx_null_command/p' "$mod" |
  grep -o '"sluice[a-z_]*"' | tr -d '"' | sort -u)
[ "$(echo "$directives" | wc -l)" -ge 10 ] || bad "found only '$directives' in $mod"
missing=""
for d in $directives; do
  grep -A1 -x "\\.TP" "$page" | grep -q "^\\\\fB$d[ ;]" ||
    missing="$missing $d"
done
if [ -z "$missing" ]; then ok "ngx_http_sluice_module.5 has all $(echo "$directives" | wc -w) directives"
else bad "ngx_http_sluice_module.5 lacks:$missing"; fi
# A directive added to the module but not to docs/nginx.md stops the build.
sed 's/^\(    MAIN_STR("sluice_policy", policy),\)$/\1\n    MAIN_STR("sluice_undocumented", policy),/' "$mod" >"$tmp/mod.c"
grep -q sluice_undocumented "$tmp/mod.c" || bad "could not add a directive to a copy of $mod"
if out=$(python3 "$src/man/mkman.py" nginx 0 "$src/docs/nginx.md" "$tmp/mod.c" "$tmp/x.5" 2>&1); then
  bad "mkman.py accepted a directive docs/nginx.md lacks"
elif echo "$out" | grep -q 'sluice_undocumented: in the module'; then
  ok "an undocumented directive fails the generator, named"
else bad "mkman.py failed without naming the directive: $out"; fi

for p in "$build"/man/*.[15]; do
  warn=$(groff -man -Tutf8 -ww -z "$p" 2>&1)
  if [ -z "$warn" ]; then ok "groff reads $(basename "$p") without a warning"
  else bad "groff on $(basename "$p"): $warn"; fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
