"""A verdict on a benchmark's target from interleaved rounds (bench_nginx.py,
bench_resty.py; bindings/node/bench/bench.js does the same in JavaScript).

Each round gives one ratio (the contender's over the anchor's, measured
back to back, so the machine's load falls on both alike).  The verdict is
on the median of those ratios: "met" when its 95% confidence interval lies
wholly at or above the target, "not met" when wholly below, else
"undecided" (more rounds would tell).  The interval is distribution-free:
the order statistics k and n + 1 - k, with k the largest count such that
fewer than k of n draws fall below the true median with probability
<= 2.5% (so at least 6 rounds are needed for any verdict).
"""
from math import comb


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def median_interval(xs):
    """(low, high): a 95% confidence interval of the median of xs."""
    s = sorted(xs)
    n = len(s)
    k, p = 0, 0.0  # p: P(Binomial(n, 1/2) <= k - 1)
    while k < n / 2:
        nxt = p + comb(n, k) / 2 ** n
        if nxt > 0.025:
            break
        p = nxt
        k += 1
    if k == 0:
        return float("-inf"), float("inf")
    return s[k - 1], s[n - k]


def verdict(xs, target):
    lo, hi = median_interval(xs)
    if lo >= target:
        return "met"
    if hi < target:
        return "not met"
    return "undecided"


def line(xs, target):
    """The median, its interval and the verdict, for a report line."""
    lo, hi = median_interval(xs)
    return "%.2f (95%% interval %.2f-%.2f, %d rounds): %s" % (
        median(xs), lo, hi, len(xs), verdict(xs, target))
