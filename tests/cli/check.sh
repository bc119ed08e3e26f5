# Sourced by the CLI's shell tests: a scratch directory $tmp (removed on
# exit), `check NAME EXPECTED ACTUAL` to count a check and show a failure,
# and `finish` to print the count and exit with the result.
fails=0; n=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check() {
  n=$((n + 1))
  if [ "$2" != "$3" ]; then
    fails=$((fails + 1))
    printf 'FAIL %s\n--- expected\n%s\n--- got\n%s\n' "$1" "$2" "$3"
  fi
}

finish() {
  echo "$((n - fails)) passed, $fails failed"
  [ "$fails" -eq 0 ]
}
