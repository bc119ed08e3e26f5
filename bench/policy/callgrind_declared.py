#!/usr/bin/env python3
"""Instructions per decision of the policy-declared benchmark's cases.

  callgrind_declared.py BENCH [--n N] [--top K] [CASE...]

BENCH is build/bench/policy/bench-declared; CASE is one (a route of one
declared limit), four (a route of four over three scopes), same (four
limits of the tenant's scope alone: four's without its two more
attributes to hash), file (the ledger's standard request as
etc/ledger.conf writes it), split (two limits in two hash-tag groups) or
standard (the built-in ledger flow's, where the library still has it);
all six by default.  Each case runs under valgrind's callgrind as `BENCH
--count CASE N`: N decisions make the records, then N more are counted
(only inside the benchmark's counted(), --toggle-collect).  Prints
instructions per decision, the four/one, same/one and file/standard
ratios, and with --top K each case's K dearest functions (self cost, per
decision).

Instruction counts are deterministic where timed runs on a shared machine
move by 30% and more, so they are the measure to compare two builds by;
the timed benchmark (`meson test --benchmark policy-declared`) gives the
nanoseconds.  Needs valgrind (exit 77 without it).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

CASES = ['one', 'four', 'same', 'file', 'split', 'standard']


def run(bench, case, n, top):
    tmp = tempfile.mkdtemp(prefix='sluice-cg-declared-')
    out = os.path.join(tmp, 'cg.out')
    try:
        rc = subprocess.run(['valgrind', '--tool=callgrind',
                             '--callgrind-out-file=' + out,
                             '--toggle-collect=counted', bench, '--count',
                             case, str(n)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, timeout=900).returncode
        if rc == 77:
            return None, []  # standard: the built-in flow is gone
        if rc != 0:
            raise RuntimeError('%s --count %s: exit %d' % (bench, case, rc))
        total = None
        with open(out) as f:
            for line in f:
                m = re.match(r'(?:summary|totals):\s+(\d+)', line)
                if m:
                    total = int(m.group(1))
        if total is None:
            raise RuntimeError('no totals in the callgrind dump')
        funcs = []
        if top:
            ann = subprocess.run(['callgrind_annotate', '--inclusive=no',
                                  '--threshold=100', out],
                                 capture_output=True, text=True, check=True)
            for line in ann.stdout.splitlines():
                m = re.match(r'\s*([\d,]+)\s+\([^)]*\)\s+(\S.*)$', line)
                if m and 'PROGRAM TOTALS' not in line:
                    funcs.append((int(m.group(1).replace(',', '')),
                                  m.group(2)))
            funcs = funcs[:top]
        return total / n, [(c / n, name) for c, name in funcs]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    args = argv[1:]
    n, top, cases = 10000, 0, []
    bench = None
    while args:
        a = args.pop(0)
        if a == '--n':
            n = int(args.pop(0))
        elif a == '--top':
            top = int(args.pop(0))
        elif a in CASES:
            cases.append(a)
        elif bench is None:
            bench = a
        else:
            print(__doc__, file=sys.stderr)
            return 2
    if bench is None:
        print(__doc__, file=sys.stderr)
        return 2
    if not shutil.which('valgrind') or (top and
                                        not shutil.which('callgrind_annotate')):
        print('callgrind_declared: valgrind not found', file=sys.stderr)
        return 77
    cases = cases or CASES
    got = {}
    for case in cases:
        per, funcs = run(bench, case, n, top)
        if per is None:
            print('%-9s (not in this build)' % case)
            continue
        got[case] = per
        print('%-9s %9.0f instructions a decision' % (case, per))
        for c, name in funcs:
            print('    %8.0f  %s' % (c, name))
    if 'one' in got and 'four' in got:
        print('ratio: 4 limits / 1 limit: %.2f (target 2)' %
              (got['four'] / got['one']))
    if 'one' in got and 'same' in got:
        print('ratio: 4 limits of one scope / 1 limit: %.2f' %
              (got['same'] / got['one']))
    if 'file' in got and 'standard' in got:
        print('ratio: the ledger file / the built-in flow: %.2f' %
              (got['file'] / got['standard']))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
