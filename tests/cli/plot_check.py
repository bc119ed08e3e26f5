#!/usr/bin/env python3
"""Reads a `sluice simulate --plot` SVG back (sim_plot.c tags its parts with
classes) and checks that it can be read at a glance: every axis has 1-2-5
ticks from 0 and a title with its unit, every series is in the legend with
its total, and the scenario's own answer is drawn (spans, marks, bars).
Usage: plot_check.py SCENARIO FILE.svg; prints one line per problem."""
import re
import sys
import xml.etree.ElementTree as ET

NS = '{http://www.w3.org/2000/svg}'
scenario, path = sys.argv[1], sys.argv[2]
root = ET.parse(path).getroot()
problems = []


def texts(cls):
    return [e.text or '' for e in root.iter(NS + 'text') if e.get('class') == cls]


def nice_ticks(name, labels):
    try:
        vals = [float(v) for v in labels]
    except ValueError:
        problems.append('%s ticks are not numbers: %s' % (name, labels))
        return
    if len(vals) < 3 or vals[0] != 0:
        problems.append('%s ticks %s: want at least 3, from 0' % (name, labels))
        return
    step = vals[1] - vals[0]
    if any(abs((b - a) - step) > 1e-9 for a, b in zip(vals, vals[1:])):
        problems.append('%s ticks %s are not evenly spaced' % (name, labels))
    mant = step / 10 ** int(f'{step:e}'.split('e')[1])
    if round(mant, 6) not in (1.0, 2.0, 5.0):
        problems.append('%s tick step %g is not 1, 2 or 5 times a power of ten'
                        % (name, step))


nice_ticks('time', texts('tick-x'))
nice_ticks('bars', texts('tick-y2') or texts('tick-y'))
if texts('tick-y2'):
    nice_ticks('line', texts('tick-y'))
ax = ' '.join(texts('axis-x'))
if not re.search(r'\((seconds|minutes)\)', ax):
    problems.append('time axis title has no unit: %r' % ax)
ay = texts('axis-y') + texts('axis-y2')
if not any(re.search(r'per \d+ s bar', t) for t in ay):
    problems.append('bar axis title has no unit: %r' % ay)
title = ' '.join(texts('title'))
if not title.startswith(scenario + ':') or '?' not in title:
    problems.append('title is not the scenario\'s question: %r' % title)
legend = texts('legend')
totals = {}
for t in legend:
    m = re.match(r'(.*) \((\d+)\)$', t)
    if m:
        totals[m.group(1)] = int(m.group(2))
bars = [e for e in root.iter(NS + 'rect') if e.get('class') == 'bar']
if not bars:
    problems.append('no bars drawn')
spans = texts('span-label')
marks = texts('mark-label')
lines = [e for e in root.iter(NS + 'polyline') if e.get('class') == 'line']


def want(cond, what):
    if not cond:
        problems.append(what)


if scenario == 'growth-batch':
    want(any('batch' in s for s in spans), 'the batch window is not shaded')
    want(totals.get('429 throttled', 0) > 0, 'no 429s in the legend: %s' % totals)
    want(lines, 'no points-remaining line')
elif scenario == 'retry-ignorer':
    for s in ('level 1 box', 'level 2 box', 'level 3: suspended'):
        want(any(x.startswith(s) for x in spans), 'no span "%s": %s' % (s, spans))
    want(totals.get('403 suspended', 0) > 0, 'no 403s in the legend: %s' % totals)
    want(totals.get('allowed, both keys', 0) > 0,
         'no allowed series in the legend: %s' % totals)
elif scenario == 'batch-backoff':
    want(totals.get('429 throttled') == 0, 'legend does not say 0 429s: %s' % totals)
    want(any('posted' in m for m in marks), 'the end of the batch is not marked')
    want(lines, 'no points-remaining line')
    # The time axis ends at the data: the last bar reaches the right edge
    # (within one bar's width), not hundreds of seconds before it.
    def edge(e):
        return float(e.get('x')) + float(e.get('width'))
    axis = max((e for e in root.iter(NS + 'line') if e.get('y1') == e.get('y2')),
               key=lambda e: float(e.get('x2')) - float(e.get('x1')))
    right = float(axis.get('x2'))
    widest = max(float(e.get('width')) for e in bars) if bars else 0
    want(bars and right - max(edge(e) for e in bars) <= widest + 1,
         'the time axis runs past the data (last bar ends at %.0f, axis '
         'at %.0f)' % (max(map(edge, bars)) if bars else 0, right))
elif scenario == 'credential-stuffing':
    want(sum('IP ban' in m for m in marks) == 3, 'want 3 IP ban marks: %s' % marks)
    want(totals.get('office logins refused') == 0,
         'legend does not say no office login was refused: %s' % totals)
    want(totals.get('attacker attempts refused (ban)', 0) > 0,
         'no refused attacker attempts: %s' % totals)
elif scenario == 'backend-outage':
    want(any('store times out' in s for s in spans), 'the outage is not shaded')
    want(totals.get('503 failed closed', 0) > 0, 'no 503s: %s' % totals)
    want(totals.get('allowed by the local degraded limiter', 0) > 0,
         'no degraded decisions: %s' % totals)
    want(any('degraded on' in m for m in marks), 'degraded on not marked')
for p in problems:
    print('%s: %s' % (scenario, p))
sys.exit(1 if problems else 0)
