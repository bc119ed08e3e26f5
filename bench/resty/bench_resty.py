#!/usr/bin/env python3
"""resty.sluice against the OpenResty anchors, deciding in access_by_lua
on the same keys in one nginx (Debian's nginx and lua-nginx-module,
unpacked: scripts/ngx-lua-root.sh):

  shm    lua-resty-limit-traffic's `req` module (resty.limit.req, state in
         a lua_shared_dict: incoming(key, true) per request) against
         resty.sluice's access() on its shm store (a declared GCRA limit
         per key; decision and RateLimit headers from the C library: the
         default form's four fields, and the structured form's two),
         filling a decision the worker reuses (access's d), and also a
         new decision per request.  limit.req sends no field, so two more
         pairs are like for like: limit.req with the same four fields
         set by its user's Lua against resty.sluice, and limit.req
         against resty.sluice with admission_headers = false (no field),
         beside which the library's decision is called straight over the
         FFI with no binding around it (what resty.sluice adds is the
         difference)
  redis  the spec's own shape (its section-6 script, tests/redis/
         spec_reference.lua, by EVALSHA over a cosocket, as
         bench/nginx/bench_gateway.py's anchor runs it) against
         resty.sluice on the same Redis through the two halves over a
         cosocket (etc/ledger.conf's tenant and key buckets, one group, as
         there), filling the worker's decision (access's d); the spec
         script sends no field, so a second pair is like for like:
         resty.sluice with admission_headers = false

One nginx worker, wrk with 20 connections over 1000 keys, every request
admitted (each limit far above what a run sends), the cases of a pair
interleaved in rounds; each keeps its median and best round, the ratio is
taken round by round (neighbouring rounds share the machine's load), and
the worker's CPU time per request is reported beside requests/s.

The target (the second case's requests/s over the first's) is given a
verdict (bench/benchstat.py: the 95% interval of the median of the
rounds' ratios wholly above or below it) on the requests each serves per
second of CPU of the nginx worker and of Redis (Redis's own: the Redis
pair's work is shared between the two): on a quiet machine, where these
are the bound, that is requests/s, while on a shared one requests/s
moves with the other jobs by more than the difference measured.  Rounds go on past BENCH_ROUNDS until that
verdict is in, or BENCH_MAX_ROUNDS.

    bench_resty.py LIBSLUICE SPEC_SCRIPT.lua
    (SLUICE_LIMIT_TRAFFIC: a lua-resty-limit-traffic tree, the folder
    holding lib/resty/limit/req.lua; BENCH_SECONDS per run, default 2;
    BENCH_ROUNDS, default 6; BENCH_MAX_ROUNDS, default 20; BENCH_CONNS,
    default 20; BENCH_CALLGRIND_OUT: a folder that keeps each case's
    callgrind profile, for callgrind_annotate; BENCH_ONLY: a regular
    expression, the cases whose path it matches, under callgrind only)

With BENCH_CALLGRIND=1 each case instead runs in an nginx of its own
(one process, master_process off) under valgrind's callgrind, and what
is reported is the instructions the process executed per request
(warmed up, then counted over BENCH_SECONDS of wrk with 4 connections):
a measure of the work done that the machine's other load does not move,
though it leaves out the kernel's share (the sockets) and how long an
instruction takes.

lua-resty-limit-traffic is not packaged for Debian: without
SLUICE_LIMIT_TRAFFIC the shm pair is left out, without redis-server the
redis pair; without both, or without wrk or the unpacked lua-nginx-module,
the benchmark is skipped (77).
"""
import glob
import os
import re
import shutil
import subprocess
import sys

# restyh (and its ngxh) are the resty suite's, in tests/resty;
# bench_gateway is bench/nginx's, benchstat bench/'s.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "resty"))
sys.path.insert(0, os.path.join(HERE, "..", "nginx"))
sys.path.insert(0, os.path.join(HERE, ".."))
import restyh  # noqa: E402
from restyh import ngxh  # noqa: E402
import bench_gateway  # noqa: E402
import benchstat  # noqa: E402

SECS = int(os.environ.get("BENCH_SECONDS", "2"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "6"))
MAX_ROUNDS = max(ROUNDS, int(os.environ.get("BENCH_MAX_ROUNDS", "20")))
CONNS = int(os.environ.get("BENCH_CONNS", "20"))

POLICY = """
limits = {
  per_key = { algorithm = "gcra"; scope = [ "key" ];
              rate = 1000000; period_ms = 1000; burst = 1000000; };
};
routes = ( { method = "*"; route = "/sluice*"; limits = ( "per_key" ); } );
"""

# The anchor's Lua: bench_gateway.py's, the spec script by EVALSHA over a
# cosocket (spec_check(key)), taken from its configuration as it is.
SPEC_LUA = re.search(r"init_by_lua_block \{\n(.*?)\n  \}\n  server",
                     bench_gateway.ANCHOR_CONF, re.S).group(1)

HTTP = """
  lua_shared_dict req_store 64m;
  open_file_cache max=100;
  init_by_lua_block {
%(spec_lua)s
  }
  init_worker_by_lua_block {
    local err
    if %(traffic)s then
      req_lim, err = require("resty.limit.req").new("req_store", 1000000, 1000000)
      if not req_lim then ngx.log(ngx.ERR, err) end
    end
    add_header = require("ngx.resp").add_header
    local sluice = require("resty.sluice")
    -- access()'s decision, one the worker reuses (shm: access never yields)
    sluice_d = require("ffi").new("sluice_decision")
    sluice_lim, err = sluice.new{
      policy = "%(dir)s/policy.conf",
      store = "shm:name=%(shm)s;create=1;capacity=100000",
      secret = "%(secret)s", library = "%(lib)s" }
    if not sluice_lim then ngx.log(ngx.ERR, err) end
    sluice_quiet, err = sluice.new{
      policy = "%(dir)s/policy.conf", admission_headers = false,
      store = "shm:name=%(shm)s;create=1;capacity=100000",
      secret = "%(secret)s", library = "%(lib)s" }
    if not sluice_quiet then ngx.log(ngx.ERR, err) end
    -- the library's decision called straight over the FFI (/sluice-ffi/),
    -- its strings kept alive here
    sluice_ffi = { q = require("ffi").new("sluice_request"), "GET", "/sluice-ffi/x" }
    sluice_ffi.q.method, sluice_ffi.q.route = sluice_ffi[1], sluice_ffi[2]
    sluice_sf, err = sluice.new{
      policy = "%(dir)s/policy.conf", header_form = "sf",
      store = "shm:name=%(shm)s;create=1;capacity=100000",
      secret = "%(secret)s", library = "%(lib)s" }
    if not sluice_sf then ngx.log(ngx.ERR, err) end
    if %(redis_port)d > 0 then
      redis_lim, err = sluice.new{
        policy = "%(dir)s/ledger.conf",
        store = "redis:nodes=127.0.0.1:%(redis_port)d",
        redis_timeout_ms = 1000, redis_connect_timeout_ms = 1000,
        secret = "%(secret)s", library = "%(lib)s" }
      if not redis_lim then ngx.log(ngx.ERR, err) end
      redis_quiet, err = sluice.new{
        policy = "%(dir)s/ledger.conf", admission_headers = false,
        store = "redis:nodes=127.0.0.1:%(redis_port)d",
        redis_timeout_ms = 1000, redis_connect_timeout_ms = 1000,
        secret = "%(secret)s", library = "%(lib)s" }
      if not redis_quiet then ngx.log(ngx.ERR, err) end
    end
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
    location /req-fields/ {
      access_by_lua_block {
        -- limit.req and the four fields sluice's default form sends, as
        -- its user would set them from what incoming() says
        local delay, excess = req_lim:incoming(ngx.var.http_x_key, true)
        if not delay then return ngx.exit(excess == "rejected" and 429 or 500) end
        local add = add_header
        add("RateLimit-Policy", "1000000;w=1")
        add("RateLimit-Limit", "1000000")
        add("RateLimit-Remaining", tostring(math.floor(1000000 - excess)))
        add("RateLimit-Reset", tostring(math.ceil(excess / 1000000)))
      }
    }
    location /sluice-quiet/ {
      access_by_lua_block {
        local d, err = sluice_quiet:access({ key = ngx.var.http_x_key }, sluice_d)
        if not d then ngx.log(ngx.ERR, err); return ngx.exit(500) end
      }
    }
    location /sluice-ffi/ {
      access_by_lua_block {
        -- sluice_policy_decide() alone, no resty.sluice (no request read
        -- from nginx, no answer): what the binding adds to the library's
        -- decision is /sluice-quiet/'s work less this
        local q = sluice_ffi.q
        q.api_key_id = ngx.var.http_x_key
        if sluice_quiet.C.sluice_policy_decide(sluice_quiet.pol, 1, q, sluice_d, nil) ~= 0 then
          return ngx.exit(500)
        end
      }
    }
    location /sluice/ {
      access_by_lua_block {
        local d, err = sluice_lim:access({ key = ngx.var.http_x_key }, sluice_d)
        if not d then ngx.log(ngx.ERR, err); return ngx.exit(500) end
      }
    }
    location /sluice-new/ {
      access_by_lua_block {
        local d, err = sluice_lim:access{ key = ngx.var.http_x_key }
        if not d then ngx.log(ngx.ERR, err); return ngx.exit(500) end
      }
    }
    location /sluice-sf/ {
      access_by_lua_block {
        local d, err = sluice_sf:access({ key = ngx.var.http_x_key }, sluice_d)
        if not d then ngx.log(ngx.ERR, err); return ngx.exit(500) end
      }
    }
    location /v1/spec/ { access_by_lua_block { spec_check(ngx.var.http_x_key) } }
    location /v1/sluice/ {
      access_by_lua_block {
        local d, err = redis_lim:access({ tenant = "acme", key = ngx.var.http_x_key,
                                          tier = "growth" }, sluice_d)
        if not d then ngx.log(ngx.ERR, err); return ngx.exit(500) end
      }
    }
    location /v1/sluice-quiet/ {
      access_by_lua_block {
        local d, err = redis_quiet:access({ tenant = "acme", key = ngx.var.http_x_key,
                                            tier = "growth" }, sluice_d)
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


def cpu_ticks(pids):
    t = 0
    for w in pids:
        with open("/proc/%d/stat" % w) as f:
            st = f.read().rsplit(")", 1)[1].split()
        t += int(st[11]) + int(st[12])
    return t


def wrk(ng, path, script, redis_pid=None):
    """(requests/s, p50 ms, the CPU us per request of the nginx worker and
    Redis together, of Redis alone)"""
    rp = [redis_pid] if redis_pid else []
    t0, r0 = cpu_ticks(ng.workers() + rp), cpu_ticks(rp)
    out = subprocess.run(
        ["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % SECS, "--latency", "-s",
         script, "http://127.0.0.1:%d%s" % (ng.port, path)],
        capture_output=True, text=True).stdout
    hz = os.sysconf("SC_CLK_TCK")
    cpu_s = (cpu_ticks(ng.workers() + rp) - t0) / hz
    redis_s = (cpu_ticks(rp) - r0) / hz
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise SystemExit("%s: %s refused: the bench measures admissions only"
                         "\n%s" % (path, non2xx.group(1), out))
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    m = re.search(r"^\s+50%\s+([0-9.]+)(us|ms|s)\s*$", out, re.M)
    p50 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    nreq = int(re.search(r"(\d+) requests in", out).group(1))
    return rps, p50, cpu_s * 1e6 / nreq, redis_s * 1e6 / nreq


median = benchstat.median


def cpu_ratios(runs, base, other):
    """The rounds' ratios of requests per CPU second (the worker's and
    Redis's)."""
    return [a[2] / b[2] for a, b in zip(runs[base], runs[other])]


def pair(ng, script, cases, target, redis_pid):
    for name, path in cases:
        r = ngxh.request(ng.port, path, headers={"X-Key": "warm"})
        if r.status != 200:
            raise SystemExit("%s answered %d: %s" % (path, r.status,
                                                     ng.log()))
        wrk(ng, path, script, redis_pid)  # warm-up: keys, records, JIT
    runs = {name: [] for name, _ in cases}
    for r in range(MAX_ROUNDS):
        if r >= ROUNDS and benchstat.verdict(cpu_ratios(
                runs, cases[0][0], cases[1][0]), target) != "undecided":
            break
        for name, path in cases:
            runs[name].append(wrk(ng, path, script, redis_pid))
    return runs


def callgrind(ng, script, cases):
    """Instructions per request of each case's path, nginx under
    callgrind (its own process, counting only while wrk runs)."""
    out = {}
    for name, path in cases:
        cg = os.path.join(ng.dir, "callgrind.out")
        vg = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             "--callgrind-out-file=" + cg, ngxh.NGINX, "-p", ng.dir, "-c",
             ng.conf, "-g", "daemon off; master_process off;"],
            env=ng.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def up():
                try:
                    return ngxh.request(ng.port, path,
                                        headers={"X-Key": "warm"}).status
                except OSError:
                    return None
            ngxh.wait_until(lambda: up() == 200, 120, "nginx under valgrind")
            url = "http://127.0.0.1:%d%s" % (ng.port, path)
            wrk_cmd = ["wrk", "-t1", "-c4", "-s", script, url]
            subprocess.run(wrk_cmd[:3] + ["-d4s"] + wrk_cmd[3:],
                           capture_output=True)  # warm-up: JIT, keys
            subprocess.run(["callgrind_control", "-i", "on", str(vg.pid)],
                           capture_output=True, check=True)
            o = subprocess.run(wrk_cmd[:3] + ["-d%ds" % SECS] + wrk_cmd[3:],
                               capture_output=True, text=True).stdout
            for op in ("-i", "off"), ("-d",):  # counted so far, to a file
                subprocess.run(["callgrind_control"] + list(op) +
                               [str(vg.pid)], capture_output=True, check=True)
            if "Non-2xx" in o:
                raise SystemExit("%s: refused under callgrind\n%s" % (path, o))
            n = int(re.search(r"(\d+) requests in", o).group(1))
        finally:
            vg.terminate()
            try:
                vg.wait(60)
            except subprocess.TimeoutExpired:
                vg.kill()
                vg.wait()
        ir = 0  # the dump's (and the exit's, if it made one: nothing new)
        keep = os.environ.get("BENCH_CALLGRIND_OUT")
        for i, f in enumerate(sorted(glob.glob(cg + "*"))):
            with open(f) as fh:
                m = re.search(r"^totals: (\d+)", fh.read(), re.M)
            ir += int(m.group(1)) if m else 0
            if keep and m:  # for callgrind_annotate
                shutil.copy(f, os.path.join(keep, "%s.%d.out" % (
                    re.sub(r"\W+", "_", path).strip("_"), i)))
            os.unlink(f)
        if ir == 0:
            raise SystemExit("%s: nothing counted under callgrind" % path)
        out[name] = (n, ir / n)
    return out


def report_callgrind(cases, got):
    base = got[cases[0][0]][1]
    for name, _ in cases:
        n, ir = got[name]
        print("%-38s %8.0f instructions/request (%5d requests), %.2fx %s's"
              % (name, ir, n, ir / base, cases[0][0]))


def report(cases, runs, target):
    print("%-38s %10s %10s %8s %10s %9s" % (
        "case (median of rounds)", "req/s", "best req/s", "p50 ms",
        "nginx us", "redis us"))
    for name, _ in cases:
        r = runs[name]
        print("%-38s %10.0f %10.0f %8.3f %10.1f %9.1f" % (
            name, median([x[0] for x in r]), max(x[0] for x in r),
            median([x[1] for x in r]), median([x[2] - x[3] for x in r]),
            median([x[3] for x in r])))
    base = runs[cases[0][0]]
    for name, _ in cases[1:]:
        q = sorted(b[0] / a[0] for a, b in zip(base, runs[name]))
        c = sorted(a[2] / b[2] for a, b in zip(base, runs[name]))
        print("%s / %s per round: requests/s %.2f (%.2f-%.2f), requests "
              "per CPU second (worker and Redis) %.2f (%.2f-%.2f)" % (
                  name, cases[0][0], median(q), q[0], q[-1], median(c),
                  c[0], c[-1]))
    print("target: %s requests/s >= %.2fx %s's, by requests per CPU "
          "second (worker and Redis): %s" % (cases[1][0], target, cases[0][0],
                              benchstat.line(cpu_ratios(runs, cases[0][0],
                                                        cases[1][0]),
                                             target)))


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    lib, spec = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    traffic = os.environ.get("SLUICE_LIMIT_TRAFFIC", "")
    have_traffic = os.path.exists(os.path.join(traffic,
                                               "lib/resty/limit/req.lua"))
    have_redis = bool(shutil.which("redis-server")) and os.path.exists(spec)
    why = (restyh.skip_reason() or
           (None if shutil.which("wrk") else "wrk is not installed") or
           (None if have_traffic or have_redis else
            "neither SLUICE_LIMIT_TRAFFIC (a lua-resty-limit-traffic tree: "
            "not in Debian) nor redis-server"))
    if why:
        print("SKIP: " + why)
        return ngxh.SKIP
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-resty-bench-")
    red = ngxh.Redis(tmp) if have_redis else None
    ng = None
    try:
        sha = ""
        if red:
            sha = subprocess.run(["redis-cli", "-p", str(red.port), "SCRIPT",
                                  "LOAD", open(spec).read()],
                                 capture_output=True, text=True).stdout.strip()
            if not re.fullmatch(r"[0-9a-f]{40}", sha):
                raise SystemExit("SCRIPT LOAD of the spec script: " + sha)
        spec_lua = SPEC_LUA % dict(
            args=", ".join('"%s"' % a for a in bench_gateway.SPEC_ARGS),
            sha=sha, redis_port=red.port if red else 0)
        ng = restyh.LuaNginx(
            HTTP, workers=1, log_level="warn",
            lua_path=(os.path.abspath(traffic) + "/lib/?.lua;")
            if have_traffic else "", lib=lib,
            traffic="true" if have_traffic else "false",
            redis_port=red.port if red else 0,
            spec_lua=spec_lua.replace("%", "%%"))
        ng.write("policy.conf", POLICY)
        ng.write("ledger.conf", bench_gateway.POLICY)
        for p in ("req", "req-fields", "sluice", "sluice-new", "sluice-quiet",
                  "sluice-ffi",
                  "sluice-sf", "v1/spec", "v1/sluice", "v1/sluice-quiet"):
            os.makedirs(ng.path("www/" + p))
            ng.write("www/%s/x" % p, "ok\n")
        script = ng.write("keys.lua", WRK_LUA)
        under_cg = os.environ.get("BENCH_CALLGRIND") == "1"
        if not under_cg:  # else each case starts its own (callgrind())
            ng.start()
        pairs = []
        if have_traffic:
            pairs.append(([("limit.req (lua_shared_dict)", "/req/x"),
                           ("resty.sluice (shm store)", "/sluice/x"),
                           ("resty.sluice (shm, a new decision each)",
                            "/sluice-new/x"),
                           ("resty.sluice (shm, header_form sf)",
                            "/sluice-sf/x")], 0.9))
            # Like for like: both send the four fields, or neither.
            pairs.append(([("limit.req + the 4 fields (Lua)",
                            "/req-fields/x"),
                           ("resty.sluice (shm store)", "/sluice/x")], 0.9))
            pairs.append(([("limit.req (lua_shared_dict)", "/req/x"),
                           ("resty.sluice (shm, admission_headers off)",
                            "/sluice-quiet/x"),
                           ("sluice_policy_decide over the FFI alone",
                            "/sluice-ffi/x")], 0.9))
        if red:
            pairs.append(([("spec script, EVALSHA, cosocket", "/v1/spec/x"),
                           ("resty.sluice, Redis, two halves",
                            "/v1/sluice/x")], 1.0))
            # Like for like: the spec script sends no field.
            pairs.append(([("spec script, EVALSHA, cosocket", "/v1/spec/x"),
                           ("resty.sluice, Redis, admission_headers off",
                            "/v1/sluice-quiet/x")], 1.0))
        if under_cg:
            if not shutil.which("valgrind"):
                print("SKIP: valgrind is not installed")
                return ngxh.SKIP
            only = re.compile(os.environ.get("BENCH_ONLY", ""))
            cg = [(c, callgrind(ng, script, c)) for c in (
                [x for x in cases if only.search(x[1])] for cases, _ in pairs)
                if c]
            print("resty under callgrind: one nginx process per case, %d s "
                  "of wrk -c4 counted" % SECS)
            for cases, got in cg:
                report_callgrind(cases, got)
            return 0
        results = [(cases, pair(ng, script, cases, t,
                                red.proc.pid if red else None), t)
                   for cases, t in pairs]
    finally:
        if ng:
            ng.stop()
        if red:
            red.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("resty: nginx 1 worker, wrk 1 thread %d connections, %d to %d "
          "rounds of %d s interleaved per pair, 1000 keys, every request "
          "admitted, %d CPUs, load average %s" % (
              CONNS, ROUNDS, MAX_ROUNDS, SECS, os.cpu_count(),
              " ".join("%.1f" % x for x in os.getloadavg())))
    for cases, runs, target in results:
        report(cases, runs, target)
    if not have_traffic:
        print("shm pair left out: SLUICE_LIMIT_TRAFFIC is not set")
    if not red:
        print("redis pair left out: no redis-server")
    return 0


if __name__ == "__main__":
    sys.exit(main())
