#!/usr/bin/env python3
"""CPU time per decision of two builds of a benchmark, in interleaved rounds.

  ab_rounds.py [--rounds R] BEFORE AFTER ARG...

BEFORE and AFTER are two builds of one benchmark that prints a line
"X CPU ns/decision" when given ARG... (bench-policy --count CASE N,
bench-declared --count CASE N).  Each round runs both, the first of the
pair alternating, so a loaded machine slows whichever it happens to hit
about as often; prints each round, the median of each build and the
median of the rounds' AFTER/BEFORE ratios (the figure to quote: a round's
two runs saw about the same machine).  A build is a binary on its own, so
two commits compare in one run: build the older one's library with the
newer benchmark source (it uses only the public API).
"""
import re
import statistics
import subprocess
import sys


def cpu_ns(binary, args):
    out = subprocess.run([binary] + args, capture_output=True, text=True,
                         check=True, timeout=900).stdout
    m = re.search(r'([\d.]+) CPU ns/decision', out)
    if not m:
        raise SystemExit('%s: no "CPU ns/decision" line' % binary)
    return float(m.group(1))


def main(argv):
    args = argv[1:]
    rounds = 10
    if args[:1] == ['--rounds']:
        rounds = int(args[1])
        args = args[2:]
    if len(args) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    before, after, rest = args[0], args[1], args[2:]
    b, a, ratio = [], [], []
    for r in range(rounds):
        pair = [(before, b), (after, a)]
        if r % 2:
            pair.reverse()
        for binary, into in pair:
            into.append(cpu_ns(binary, rest))
        ratio.append(a[-1] / b[-1])
        print('round %2d: before %8.1f  after %8.1f  after/before %.3f' %
              (r + 1, b[-1], a[-1], ratio[-1]))
    print('median: before %.1f CPU ns, after %.1f CPU ns; after/before %.3f '
          '(rounds %.3f-%.3f)' % (statistics.median(b), statistics.median(a),
                                  statistics.median(ratio), min(ratio),
                                  max(ratio)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
