#!/usr/bin/env python3
"""resty.sluice on its shm store against lua-resty-limit-traffic's `req`
module (the OpenResty anchor, state in a lua_shared_dict), both deciding
in access_by_lua on the same keys in one nginx (Debian's nginx and
lua-nginx-module, unpacked: scripts/ngx-lua-root.sh).

  limit.req   resty.limit.req: incoming(key, true) per request
  sluice shm  resty.sluice: access() per request (decision, RateLimit
              headers from the C renderer), a declared GCRA limit per key

One nginx worker, wrk with 20 connections over 1000 keys, every request
admitted (each limit far above what a run sends), the cases interleaved
in rounds; each keeps its median and best round, and the ratio is taken
round by round (neighbouring rounds share the machine's load).

    bench_resty.py LIBSLUICE
    (SLUICE_LIMIT_TRAFFIC: a lua-resty-limit-traffic tree, the folder
    holding lib/resty/limit/req.lua; BENCH_SECONDS per run, default 2;
    BENCH_ROUNDS, default 6; BENCH_CONNS, default 20)

lua-resty-limit-traffic is not packaged for Debian: without
SLUICE_LIMIT_TRAFFIC, or without wrk or the unpacked lua-nginx-module,
the benchmark is skipped (77).
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import restyh  # noqa: E402
from restyh import ngxh  # noqa: E402

SECS = int(os.environ.get("BENCH_SECONDS", "2"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "6"))
CONNS = int(os.environ.get("BENCH_CONNS", "20"))

POLICY = """
limits = {
  per_key = { algorithm = "gcra"; scope = [ "key" ];
              rate = 1000000; period_ms = 1000; burst = 1000000; };
};
routes = ( { method = "*"; route = "/*"; limits = ( "per_key" ); } );
"""

HTTP = """
  lua_shared_dict req_store 64m;
  open_file_cache max=100;
  init_worker_by_lua_block {
    local err
    req_lim, err = require("resty.limit.req").new("req_store", 1000000, 1000000)
    if not req_lim then ngx.log(ngx.ERR, err) end
    sluice_lim, err = require("resty.sluice").new{
      policy = "%(dir)s/policy.conf",
      store = "shm:name=%(shm)s;create=1;capacity=100000",
      secret = "%(secret)s", library = "%(lib)s" }
    if not sluice_lim then ngx.log(ngx.ERR, err) end
  }
  server {
    listen 127.0.0.1:%(port)d reuseport backlog=4096;
    root %(dir)s/www;
    location /req/ {
      access_by_lua_block {
        local delay, err = req_lim:incoming(ngx.var.http_x_key, true)
        if not delay then return ngx.exit(err == "rejected" and 429 or 500) end
      }
    }
    location /sluice/ {
      access_by_lua_block {
        local d, err = sluice_lim:access{ key = ngx.var.http_x_key }
        if not d then ngx.log(ngx.ERR, err); return ngx.exit(500) end
      }
    }
  }
"""

WRK_LUA = """
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, {["X-Key"] = "key-" .. (n % 1000)})
end
"""


def cpu_ticks(ng):
    t = 0
    for w in ng.workers():
        with open("/proc/%d/stat" % w) as f:
            st = f.read().rsplit(")", 1)[1].split()
        t += int(st[11]) + int(st[12])
    return t


def wrk(ng, path, script):
    """(requests/s, p50 ms, the nginx worker's CPU us per request)"""
    t0 = cpu_ticks(ng)
    out = subprocess.run(
        ["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % SECS, "--latency", "-s",
         script, "http://127.0.0.1:%d%s" % (ng.port, path)],
        capture_output=True, text=True).stdout
    cpu_s = (cpu_ticks(ng) - t0) / os.sysconf("SC_CLK_TCK")
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise SystemExit("%s: %s refused: the bench measures admissions only"
                         "\n%s" % (path, non2xx.group(1), out))
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    m = re.search(r"^\s+50%\s+([0-9.]+)(us|ms|s)\s*$", out, re.M)
    p50 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    nreq = int(re.search(r"(\d+) requests in", out).group(1))
    return rps, p50, cpu_s * 1e6 / nreq


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    lib = os.path.abspath(sys.argv[1])
    traffic = os.environ.get("SLUICE_LIMIT_TRAFFIC", "")
    why = (restyh.skip_reason() or
           (None if shutil.which("wrk") else "wrk is not installed") or
           (None if os.path.exists(os.path.join(
               traffic, "lib/resty/limit/req.lua")) else
            "SLUICE_LIMIT_TRAFFIC does not name a lua-resty-limit-traffic "
            "tree (lib/resty/limit/req.lua): it is not in Debian"))
    if why:
        print("SKIP: " + why)
        return ngxh.SKIP
    ng = restyh.LuaNginx(HTTP, workers=1, log_level="warn",
                         lua_path=os.path.abspath(traffic) + "/lib/?.lua;",
                         lib=lib)
    ng.write("policy.conf", POLICY)
    for p in ("req", "sluice"):
        os.makedirs(ng.path("www/" + p))
        ng.write("www/%s/x" % p, "ok\n")
    script = ng.write("keys.lua", WRK_LUA)
    cases = [("limit.req (lua_shared_dict)", "/req/x"),
             ("resty.sluice (shm store)", "/sluice/x")]
    ng.start()
    try:
        for name, path in cases:
            r = ngxh.request(ng.port, path, headers={"X-Key": "warm"})
            if r.status != 200:
                raise SystemExit("%s answered %d: %s" % (path, r.status,
                                                         ng.log()))
            wrk(ng, path, script)  # warm-up: keys, records, JIT
        runs = {name: [] for name, _ in cases}
        for _ in range(ROUNDS):
            for name, path in cases:
                runs[name].append(wrk(ng, path, script))
    finally:
        ng.stop()
    print("resty: nginx 1 worker, wrk 1 thread %d connections, %d rounds of "
          "%d s interleaved, 1000 keys, every request admitted, %d CPUs"
          % (CONNS, ROUNDS, SECS, os.cpu_count()))
    print("%-30s %10s %10s %8s %10s" % ("case (median of rounds)", "req/s",
                                        "best req/s", "p50 ms", "nginx us"))
    for name, _ in cases:
        r = runs[name]
        print("%-30s %10.0f %10.0f %8.3f %10.1f" % (
            name, median([x[0] for x in r]), max(x[0] for x in r),
            median([x[1] for x in r]), median([x[2] for x in r])))
    base = runs[cases[0][0]]
    for name, _ in cases[1:]:
        q = sorted(b[0] / a[0] for a, b in zip(base, runs[name]))
        c = sorted(a[2] / b[2] for a, b in zip(base, runs[name]))
        print("%s / limit.req per round: requests/s %.2f (%.2f-%.2f), "
              "requests per worker CPU second %.2f (%.2f-%.2f)" % (
                  name, median(q), q[0], q[-1], median(c), c[0], c[-1]))
    print("target: requests/s >= 0.90x limit.req's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
