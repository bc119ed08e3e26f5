# Sourced by run.sh and package.sh: an addon (or the libsluice it links)
# built with ASan/UBSan needs the sanitizer runtimes loaded first, in an
# uninstrumented node.  Node's own allocations live until exit, so leak
# checking is off; the addon's lifetimes are what the suites exercise.
#   sluice_sanitizers SHARED_OBJECT
sluice_sanitizers() {
  local syms
  syms=$(nm -D "$1" 2>/dev/null) || return 0
  grep -q ' U __asan_init' <<<"$syms" || return 0
  local pre
  pre=$(gcc -print-file-name=libasan.so)
  if grep -q ' U __ubsan_' <<<"$syms"; then
    pre="$pre:$(gcc -print-file-name=libubsan.so)"
  fi
  export LD_PRELOAD=$pre
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
}
