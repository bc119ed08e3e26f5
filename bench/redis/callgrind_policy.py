#!/usr/bin/env python3
"""Instructions redis-server spends per standard request, by contender.

  callgrind_policy.py BENCH [--module SO] [--n N] [--keys K] [--policy FILE]
                      [CONTENDER...]

BENCH is build/bench/redis/redis_bench_policy; contenders are spec (one
EVALSHA of the spec's section-6 script), lua (FCALL), script (EVALSHA of
sluice's Lua), module (SLUICE.RUN; needs --module); all of them by default.
For each, a redis-server of its own runs under valgrind's callgrind,
counting only inside the commands a decision sends (EVALSHA, FCALL, the
module's commands); BENCH --one makes N decisions over K keys (100 by
default; the records made), the counters are zeroed, N more decisions
over the same keys are counted.  Prints instructions per decision.
--policy FILE decides by a policy file of declared limits (etc/ledger.conf:
BENCH's SLUICE_BENCH_POLICY) instead of the built-in endpoint classes.
Under valgrind a call takes tens of ms: over 100 keys a key's bucket is
met every few seconds, by then full again, and its expiry moves with the
clock, so whether a write keeps its Redis TTL (docs/redis.md, Storage)
depends on how slow the run is; over 10 keys its TAT stays ahead and
moves a second a call, as in the timed benchmark, and the counts repeat.  (Debian's
redis-server is stripped: callgrind sees its exported functions only, so
where the time goes inside a decision is found by measuring cut-down
copies of the Lua, not by a profile.)

Instruction counts move by well under 1% between runs where wall and
server times on a shared machine move by 2x, so they guide the work;
the interleaved timings of the redis_policy benchmark are the figures
reported.  Needs valgrind (exit 77 without it or redis-server).
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

TOGGLES = ['evalShaCommand', 'fcallCommand', 'RedisModuleCommandDispatcher']


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p


def ctl(*args):
    return subprocess.run(['callgrind_control'] + list(args),
                          capture_output=True, text=True, timeout=120)


def measure(bench, who, n, module, keys, policy):
    tmp = tempfile.mkdtemp(prefix='sluice-cg-')
    port = free_port()
    out = os.path.join(tmp, 'cg.out')
    cmd = ['valgrind', '--tool=callgrind', '--callgrind-out-file=' + out]
    cmd += ['--toggle-collect=' + t for t in TOGGLES]
    cmd += ['redis-server', '--port', str(port), '--bind', '127.0.0.1',
            '--save', '', '--appendonly', 'no', '--dir', tmp,
            '--daemonize', 'no']
    if module:
        cmd += ['--loadmodule', module]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        end = time.time() + 120
        while True:
            r = subprocess.run(['redis-cli', '-p', str(port), 'PING'],
                               capture_output=True, text=True)
            if r.stdout.strip() == 'PONG':
                break
            if time.time() > end or srv.poll() is not None:
                raise RuntimeError('redis-server under valgrind did not start')
            time.sleep(0.5)
        env = dict(os.environ, SLUICE_REDIS_NODES='127.0.0.1:%d' % port)
        if module:
            env['SLUICE_REDIS_MODULE'] = module
        if policy:
            env['SLUICE_BENCH_POLICY'] = policy
        b = subprocess.Popen([bench, '--one', who, str(n), str(keys)],
                             env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        for line in b.stdout:
            if line.strip() == 'measure':
                break
        else:
            raise RuntimeError('%s: no warm-up' % who)
        ctl('-z', str(srv.pid))
        b.stdin.write('go\n')
        b.stdin.flush()
        b.stdout.read()
        if b.wait() != 0:
            raise RuntimeError('%s: the bench failed' % who)
        ctl('-d', str(srv.pid))
        dumps = sorted(f for f in os.listdir(tmp) if f.startswith('cg.out.'))
        if not dumps:
            raise RuntimeError('no callgrind dump')
        if os.environ.get('CG_KEEP'):
            shutil.copy(os.path.join(tmp, dumps[-1]), os.environ['CG_KEEP'])
        ann = subprocess.run(['callgrind_annotate', '--inclusive=no',
                              os.path.join(tmp, dumps[-1])],
                             capture_output=True, text=True).stdout
        m = re.search(r'^\s*([\d,]+).*PROGRAM TOTALS', ann, re.M)
        total = int(m.group(1).replace(',', ''))
        return total / n
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    bench, module, n, keys, policy = args[0], None, 300, 100, None
    who = []
    i = 1
    while i < len(args):
        if args[i] == '--module':
            module = os.path.abspath(args[i + 1])
            i += 2
        elif args[i] == '--keys':
            keys = int(args[i + 1])
            i += 2
        elif args[i] == '--policy':
            policy = os.path.abspath(args[i + 1])
            i += 2
        elif args[i] == '--n':
            n = int(args[i + 1])
            i += 2
        else:
            who.append(args[i])
            i += 1
    for tool in ('valgrind', 'callgrind_control', 'redis-server', 'redis-cli'):
        if not shutil.which(tool):
            print('SKIP: %s is not installed' % tool)
            return 77
    if not who:
        who = ['spec', 'lua', 'script'] + (['module'] if module else [])
    for w in who:
        print('%-7s %9.0f instructions per decision' %
              (w, measure(bench, w, n, module, keys, policy)), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
