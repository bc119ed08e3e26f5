#!/usr/bin/env python3
"""Throughput and latency of nginx with ngx_http_sluice_module, against the
same nginx without limiting and with limit_req (wrk, Debian's package).

One nginx (2 workers) serves a small static file from four locations:
no limiting, limit_req keyed by $http_x_key, sluice on the shm store, and
(a second nginx) sluice on a Redis store through a thread pool, and (a
third) on the same Redis in two halves on the event loop.  wrk sends
requests over 1000 API keys, with limits high enough that every request is
admitted: the figures are the cost of deciding, not of refusing.

    bench_nginx.py MODULE.so
    (BENCH_SECONDS per run, default 2; BENCH_ROUNDS, default 8; BENCH_WORKERS,
    BENCH_THREADS, BENCH_CONNS: nginx workers, wrk threads and connections)

Each case runs ROUNDS times, interleaved with the others, and keeps its
best round (other load on a shared machine only ever slows a round down);
the ratio of sluice on shm to limit_req is also given round by round
(median and range), since neighbouring rounds share the machine's load.
Besides wrk's requests/s and latency it reports the nginx workers' CPU
time per request (from /proc), which shared-machine noise moves less.
The targets (sluice on shm >= 0.90x limit_req; Redis on the event loop
>= 1.0x the thread pool) are given a verdict (benchstat.py) on the rounds'
ratios of requests per worker CPU second: with one worker on one core
that is the requests/s of a quiet machine, where the worker is the bound.
Rounds go on past BENCH_ROUNDS until both verdicts are in, or
BENCH_MAX_ROUNDS (default 20).
"""
import os
import re
import shutil
import subprocess
import sys

# ngxh (the nginx harness) is the nginx suite's, in tests/nginx;
# benchstat is bench/'s.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "nginx"))
sys.path.insert(0, os.path.join(HERE, ".."))
import ngxh  # noqa: E402
import benchstat  # noqa: E402

SECS = int(os.environ.get("BENCH_SECONDS", "2"))
# One worker on one core, wrk on the other: the worker is the bottleneck,
# so throughput and its CPU time per request both show the module's cost.
CONNS = int(os.environ.get("BENCH_CONNS", "20"))
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "1"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "8"))
MAX_ROUNDS = max(ROUNDS, int(os.environ.get("BENCH_MAX_ROUNDS", "20")))
# (contender, anchor, target): the ratios given a verdict
TARGETS = [("nginx, sluice on shm", "nginx, limit_req", 0.90),
           ("nginx, redis, event loop", "nginx, sluice on redis", 1.0)]


def cpu_ratios(cpus, a, b):
    """The rounds' ratios of a's requests per worker CPU second to b's."""
    return [y / x for x, y in zip(cpus[a], cpus[b])]

POLICY = ngxh.bucket_policy(100000, 1000000)

CONF = """
load_module %(module)s;
worker_processes %(workers)d;
error_log %(dir)s/error.log warn;
pid %(dir)s/nginx.pid;
%(user)s
thread_pool sluice threads=4;
events { worker_connections 4096; }
http {
  access_log off;
  open_file_cache max=100;
  sluice_policy %(dir)s/policy.conf;
  sluice_store "%(store)s";
  sluice_counters "shm:name=%(shm)s-ctr";
  sluice_degraded_store "shm:name=%(shm)s-deg";
  sluice_deny_cache "shm:name=%(shm)s-deny";
  sluice_secret 00112233445566778899aabbccddeeff;
  %(sluice_pool)s
  limit_req_zone $http_x_key zone=lr:10m rate=1000000r/s;
  sluice_tenant acme;
  sluice_key $http_x_key;
  sluice_tier growth;
  server {
    listen 127.0.0.1:%(port)d reuseport backlog=4096;
    root %(dir)s/www;
    location /plain/ { }
    location /limit_req/ { limit_req zone=lr burst=1000000 nodelay; }
    location /v1/ { sluice on; }
  }
}
"""

LUA = """
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, {["X-Key"] = "key-" .. (n %% 1000)})
end
"""


class BenchNginx:
    def __init__(self, module, store=None, pool=False):
        self.dir = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-bench-")
        os.chmod(self.dir, 0o755)
        self.port = ngxh.free_port()
        self.shm = "/sluice-ngxb-%d-%d" % (os.getpid(), self.port)
        for d in ("plain", "limit_req", "v1"):
            os.makedirs(os.path.join(self.dir, "www", d))
            with open(os.path.join(self.dir, "www", d, "x"), "w") as f:
                f.write("ok\n")
        with open(os.path.join(self.dir, "policy.conf"), "w") as f:
            f.write(POLICY)
        user = "user root;" if os.geteuid() == 0 else ""
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(CONF % dict(
                module=os.path.abspath(module), workers=WORKERS, dir=self.dir,
                user=user, port=self.port, shm=self.shm,
                store=store or "shm:name=%s;create=1;capacity=100000" % self.shm,
                sluice_pool="sluice_thread_pool sluice;" if pool else ""))
        r = subprocess.run([ngxh.NGINX, "-p", self.dir, "-c", self.conf],
                           capture_output=True, text=True)
        if r.returncode:
            raise SystemExit("nginx did not start: " + r.stderr)
        ngxh.wait_until(lambda: ngxh.request(self.port, "/plain/x").status
                        == 200, 10, "nginx")
        self.pidfile = os.path.join(self.dir, "nginx.pid")

    def cpu_ticks(self):
        """User + system clock ticks of the workers so far."""
        t = 0
        for w in ngxh.Nginx.workers(self):
            with open("/proc/%d/stat" % w) as f:
                st = f.read().rsplit(")", 1)[1].split()
            t += int(st[11]) + int(st[12])
        return t

    def master(self, pidfile=None):
        return ngxh.Nginx.master(self, pidfile)

    def stop(self):
        subprocess.run([ngxh.NGINX, "-p", self.dir, "-c", self.conf, "-s",
                        "stop"], capture_output=True)
        ngxh.wait_until(lambda: not os.path.exists(
            os.path.join(self.dir, "nginx.pid")), 10, "nginx to stop")
        for n in (self.shm, self.shm + "-ctr", self.shm + "-deg",
                  self.shm + "-deny"):
            try:
                os.unlink("/dev/shm" + n)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def ms(v, unit):
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def wrk(ng, path, script):
    port = ng.port
    t0 = ng.cpu_ticks()
    out = subprocess.run(
        ["wrk", "-t%d" % THREADS, "-c%d" % CONNS, "-d%ds" % SECS, "--latency",
         "-s", script, "http://127.0.0.1:%d%s" % (port, path)],
        capture_output=True, text=True).stdout
    cpu_s = (ng.cpu_ticks() - t0) / os.sysconf("SC_CLK_TCK")
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    nreq = int(re.search(r"(\d+) requests in", out).group(1))
    lat = {}
    for p in ("50", "99"):
        m = re.search(r"^\s+%s%%\s+([0-9.]+)(us|ms|s)\s*$" % p, out, re.M)
        lat[p] = ms(m.group(1), m.group(2))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise SystemExit("%s: %s refused requests: the bench measures "
                         "admissions only\n%s" % (path, non2xx.group(1), out))
    lat["cpu_us"] = cpu_s * 1e6 / nreq
    return rps, lat


def main():
    module = sys.argv[1] if len(sys.argv) > 1 else None
    why = ngxh.skip_reason(module) or (
        None if shutil.which("wrk") else "wrk is not installed")
    if why:
        print("SKIP: " + why)
        return ngxh.SKIP
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-bench-")
    script = os.path.join(tmp, "keys.lua")
    with open(script, "w") as f:
        f.write(LUA % ())
    red = None
    shm = BenchNginx(module)
    cases = [("nginx, no limiting", shm, "/plain/x"),
             ("nginx, limit_req", shm, "/limit_req/x"),
             ("nginx, sluice on shm", shm, "/v1/x")]
    rdn = evn = None
    if shutil.which("redis-server"):
        red = ngxh.Redis(tmp)
        rdn = BenchNginx(module, pool=True,
                         store="redis:nodes=127.0.0.1:%d" % red.port)
        cases.append(("nginx, sluice on redis", rdn, "/v1/x"))
        evn = BenchNginx(module, pool=False,
                         store="redis:nodes=127.0.0.1:%d" % red.port)
        cases.append(("nginx, redis, event loop", evn, "/v1/x"))
    res, cpu, rounds, cpus = {}, {}, {}, {}
    names = [c[0] for c in cases]
    targets = [t for t in TARGETS if t[0] in names and t[1] in names]
    try:
        for name, ng, path in cases:
            wrk(ng, path, script)  # warm-up: keys, file cache, redis script
        for r in range(MAX_ROUNDS):
            if r >= ROUNDS and all(benchstat.verdict(cpu_ratios(
                    cpus, a, b), t) != "undecided" for a, b, t in targets):
                break
            for name, ng, path in cases:
                rps, lat = wrk(ng, path, script)
                rounds.setdefault(name, []).append(rps)
                cpus.setdefault(name, []).append(lat["cpu_us"])
                if name not in res or rps > res[name][0]:
                    res[name] = (rps, lat)
                cpu[name] = min(cpu.get(name, 1e9), lat["cpu_us"])
    finally:
        shm.stop()
        if rdn:
            rdn.stop()
        if evn:
            evn.stop()
        if red:
            red.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    base = res["nginx, limit_req"][0]
    print("nginx %d worker(s), wrk %d thread(s) %d connections, best of %d "
          "rounds of %d s, 1000 keys, %d CPUs, load average %s" % (
              WORKERS, THREADS, CONNS, len(rounds[names[0]]), SECS,
              os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg())))
    print("%-26s %10s %12s %7s" % ("case", "ns/req", "requests/s", "ratio"))
    for name, (rps, lat) in res.items():
        tag = "  (baseline: limit_req)" if name.endswith("limit_req") else ""
        print("%-26s %10.1f %12.0f %7.2f%s" % (name, 1e9 / rps, rps,
                                               base / rps, tag))
    print("latency (wrk):")
    for name, (rps, lat) in res.items():
        print("  %-26s p50 %.3f ms, p99 %.3f ms, worker CPU %.1f us/request"
              % (name, lat["50"], lat["99"], cpu[name]))
    # Neighbouring rounds share the machine's load: their ratio is steadier
    # than a ratio of bests.
    per_round = sorted(a / b for a, b in zip(rounds["nginx, sluice on shm"],
                                             rounds["nginx, limit_req"]))
    print("sluice on shm / limit_req per round: median %.2f, range %.2f-%.2f"
          % (per_round[len(per_round) // 2], per_round[0], per_round[-1]))
    print("sluice on shm / limit_req throughput: %.2f (target >= 0.90); "
          "worker CPU per request: %.2f x limit_req's"
          % (res["nginx, sluice on shm"][0] / base,
             cpu["nginx, sluice on shm"] / cpu["nginx, limit_req"]))
    if evn:
        ev, tp = "nginx, redis, event loop", "nginx, sluice on redis"
        per_round = sorted(a / b for a, b in zip(rounds[ev], rounds[tp]))
        print("redis on the event loop / on a thread pool per round: median "
              "%.2f, range %.2f-%.2f (target >= 1.0); worker CPU per "
              "request: %.2f x the pool's"
              % (per_round[len(per_round) // 2], per_round[0], per_round[-1],
                 cpu[ev] / cpu[tp]))
    for a, b, t in targets:
        print("target: %s >= %.2fx %s, by requests per worker CPU second "
              "per round: %s" % (a, t, b, benchstat.line(
                  cpu_ratios(cpus, a, b), t)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
