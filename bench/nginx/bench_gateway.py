#!/usr/bin/env python3
"""The gateway comparison of issue 34: the spec's own shape against the
sluice nginx module, on one Redis.

  anchor      nginx + lua-nginx-module (Debian's libnginx-mod-http-lua)
              running the spec's section-6 script (tests/redis/
              spec_reference.lua, verbatim) by EVALSHA over a cosocket with
              a keepalive pool, as the spec's Kong plugin does
  sluice lua  nginx + ngx_http_sluice_module, store redis engine=lua (the
              Lua library by FCALL: what managed Redis without modules runs),
              deciding in two halves on the worker's event loop (the
              module's default: no sluice_thread_pool), as the anchor's
              cosocket does, with the same 1 s wait for a reply
  sluice mod  the same with engine=module (the sluice Redis module)

One redis-server (the sluice module loaded, so engine=module can run; the
anchor and engine=lua do not use it), one nginx worker each, wrk with 20
connections over 1000 API keys, every request admitted, the cases
interleaved in rounds; each keeps its best round and its median, and the
ratios are taken round by round (neighbouring rounds share the machine's
load).  Besides requests/s and p50/p99 it reports the Redis server's CPU
time per request (INFO cpu), the nginx worker's (/proc: every thread of
it), and calls/req, the decisions Redis ran per request (1.000 for every
case: none decided without Redis).

    bench_gateway.py SLUICE_NGINX_MODULE.so REDIS_MODULE.so SPEC_SCRIPT.lua
    (BENCH_SECONDS per run, default 2; BENCH_ROUNDS, default 6; BENCH_CONNS,
    default 20)

lua-nginx-module: /usr/lib/nginx/modules/ngx_http_lua_module.so, or, since
Debian 12's libnginx-mod-http-lua (which needs libluajit2) cannot be
installed beside the luajit package (which needs libluajit-5.1-2), a
directory in SLUICE_NGX_LUA_ROOT holding the packages unpacked:
    apt-get download libnginx-mod-http-lua libluajit2-5.1-2 \\
        libluajit2-5.1-common lua-resty-core lua-resty-lrucache
    for d in *.deb; do dpkg-deb -x "$d" root; done
Without either, or without wrk, redis-server or the modules: skipped (77).
"""
import os
import re
import shutil
import socket
import subprocess
import sys

# ngxh (the nginx harness) is the nginx suite's, in tests/nginx.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "nginx"))
import ngxh  # noqa: E402

SECS = int(os.environ.get("BENCH_SECONDS", "2"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "6"))
CONNS = int(os.environ.get("BENCH_CONNS", "20"))

# The spec script's arguments (spec section 6): a bucket no request drains
# within a run, the spec's strike and box settings.
SPEC_ARGS = ["1000000", "1000000", "1", "60", "20", "300", "3600", "86400",
             "86400"]

POLICY = ngxh.bucket_policy(1000000, 1000000)

SLUICE_CONF = """
load_module %(module)s;
worker_processes 1;
error_log %(dir)s/error.log warn;
pid %(dir)s/nginx.pid;
%(user)s
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
  sluice_tenant acme;
  sluice_key $http_x_key;
  sluice_tier growth;
  server {
    listen 127.0.0.1:%(port)d reuseport backlog=4096;
    root %(dir)s/www;
    location /v1/ { sluice on; }
  }
}
"""

# The anchor: the section-6 script by EVALSHA on a cosocket (a minimal RESP
# client: lua-resty-redis is not in Debian 12), pooled with setkeepalive.
ANCHOR_CONF = """
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module %(lua_module)s;
worker_processes 1;
error_log %(dir)s/error.log warn;
pid %(dir)s/nginx.pid;
%(user)s
events { worker_connections 4096; }
http {
  access_log off;
  open_file_cache max=100;
  lua_package_path "%(lua_path)s";
  init_by_lua_block {
    local args = {%(args)s}
    local function bulk(s) return "$" .. #s .. "\\r\\n" .. s .. "\\r\\n" end
    local tail = {}
    for i = 1, #args do tail[i] = bulk(args[i]) end
    tail = table.concat(tail)
    local head = "*16\\r\\n" .. bulk("EVALSHA") .. bulk("%(sha)s") .. bulk("4")
    local function read(sock)
      local line, err = sock:receive("*l")
      if not line then return nil, err end
      local t = line:sub(1, 1)
      if t == ":" then return tonumber(line:sub(2)) end
      if t == "$" then
        local n = tonumber(line:sub(2))
        if n < 0 then return false end
        local d = sock:receive(n + 2)
        return d and d:sub(1, n)
      end
      if t == "*" then
        local out = {}
        for i = 1, tonumber(line:sub(2)) do out[i] = read(sock) end
        return out
      end
      return nil, line
    end
    function spec_check(key)
      local sock = ngx.socket.tcp()
      sock:settimeout(1000)
      local ok, err = sock:connect("127.0.0.1", %(redis_port)d)
      if not ok then return ngx.exit(503) end
      local k = "{t:acme}:" .. key
      sock:send({head, bulk("rl:" .. k .. ":tb"), bulk("pb:" .. k .. ":box"),
                 bulk("pb:" .. k .. ":strikes"), bulk("pb:" .. k .. ":off"),
                 tail})
      local r, e = read(sock)
      if type(r) ~= "table" then
        ngx.log(ngx.ERR, "spec script: ", e)
        return ngx.exit(503)
      end
      sock:setkeepalive(10000, 64)
      if r[1] ~= 1 then return ngx.exit(429) end
    end
  }
  server {
    listen 127.0.0.1:%(port)d reuseport backlog=4096;
    root %(dir)s/www;
    location /v1/ { access_by_lua_block { spec_check(ngx.var.http_x_key) } }
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


def lua_module():
    """(module .so, lua_package_path, extra environment) or a reason."""
    root = os.environ.get("SLUICE_NGX_LUA_ROOT")
    if root:
        so = os.path.join(root, "usr/lib/nginx/modules/ngx_http_lua_module.so")
        lib = os.path.join(root, "usr/lib/x86_64-linux-gnu")
        path = os.path.join(root, "usr/share/lua/5.1/?.lua")
        if not os.path.exists(so):
            return "SLUICE_NGX_LUA_ROOT has no %s" % so
        return so, path + ";;", {"LD_LIBRARY_PATH": lib}
    so = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
    if not os.path.exists(so):
        return ("lua-nginx-module is not installed (libnginx-mod-http-lua; "
                "or set SLUICE_NGX_LUA_ROOT, see the docstring)")
    return so, ";;", {}


class Redis:
    """redis-server with the sluice module, on a free loopback port."""

    def __init__(self, tmp, module):
        self.port = ngxh.free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", tmp,
             "--loadmodule", module],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ngxh.wait_until(lambda: self.cmd("PING") == "PONG", 10,
                        "redis-server")

    def cmd(self, *args):
        try:
            out = subprocess.run(["redis-cli", "-p", str(self.port)] +
                                 list(args), capture_output=True, text=True,
                                 timeout=10)
        except subprocess.TimeoutExpired:
            return ""
        return out.stdout.strip()

    def calls(self):
        """Decisions Redis has run: EVALSHA, FCALL and the module's."""
        return sum(int(m) for m in re.findall(
            r"^cmdstat_(?:evalsha|fcall|sluice\.run):calls=(\d+)",
            self.cmd("INFO", "commandstats"), re.M))

    def cpu_s(self):
        info = self.cmd("INFO", "cpu")
        return sum(float(m) for m in re.findall(
            r"^used_cpu_(?:sys|user):([0-9.]+)", info, re.M))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


class Gate:
    """One nginx (1 worker) serving /v1/x behind a check."""

    def __init__(self, conf, fields, env=None):
        self.dir = ngxh.tempfile.mkdtemp(prefix="sluice-gw-bench-")
        os.chmod(self.dir, 0o755)
        self.port = ngxh.free_port()
        self.shm = "/sluice-gw-%d-%d" % (os.getpid(), self.port)
        os.makedirs(os.path.join(self.dir, "www", "v1"))
        with open(os.path.join(self.dir, "www", "v1", "x"), "w") as f:
            f.write("ok\n")
        with open(os.path.join(self.dir, "policy.conf"), "w") as f:
            f.write(POLICY)
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.pidfile = os.path.join(self.dir, "nginx.pid")
        with open(self.conf, "w") as f:
            f.write(conf % dict(fields, dir=self.dir, port=self.port,
                                shm=self.shm,
                                user="user root;" if os.geteuid() == 0
                                else ""))
        self.env = dict(os.environ, **(env or {}))
        r = subprocess.run([ngxh.NGINX, "-p", self.dir, "-c", self.conf],
                           capture_output=True, text=True, env=self.env)
        if r.returncode:
            raise SystemExit("nginx did not start: " + r.stderr)
        ngxh.wait_until(lambda: ngxh.request(
            self.port, "/v1/x", headers={"X-Key": "warm"}).status == 200, 10,
            "nginx to admit a request (%s)" % self.log())

    def log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()[-400:]
        except OSError:
            return ""

    def cpu_ticks(self):
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
                        "stop"], capture_output=True, env=self.env)
        ngxh.wait_until(lambda: not os.path.exists(
            os.path.join(self.dir, "nginx.pid")), 10, "nginx to stop")
        for n in ("-ctr", "-deg", "-deny"):
            try:
                os.unlink("/dev/shm" + self.shm + n)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def ms(v, unit):
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def wrk(gate, redis, script):
    t0, r0, c0 = gate.cpu_ticks(), redis.cpu_s(), redis.calls()
    out = subprocess.run(
        ["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % SECS, "--latency", "-s",
         script, "http://127.0.0.1:%d/v1/x" % gate.port],
        capture_output=True, text=True).stdout
    ngx_s = (gate.cpu_ticks() - t0) / os.sysconf("SC_CLK_TCK")
    redis_s = redis.cpu_s() - r0
    calls = redis.calls() - c0
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    nreq = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise SystemExit("%s refused requests: the bench measures admissions"
                         " only\n%s\n%s" % (non2xx.group(1), out, gate.log()))
    lat = {}
    for p in ("50", "99"):
        m = re.search(r"^\s+%s%%\s+([0-9.]+)(us|ms|s)\s*$" % p, out, re.M)
        lat[p] = ms(m.group(1), m.group(2))
    return dict(rps=rps, p50=lat["50"], p99=lat["99"],
                ngx_us=ngx_s * 1e6 / nreq, redis_us=redis_s * 1e6 / nreq,
                calls=calls / nreq)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    module, rmodule, spec = sys.argv[1:4]
    lua = lua_module()
    why = (ngxh.skip_reason(module) or
           (None if shutil.which("wrk") else "wrk is not installed") or
           (None if shutil.which("redis-server") else "no redis-server") or
           (None if os.path.exists(rmodule) else "no " + rmodule) or
           (lua if isinstance(lua, str) else None))
    if why:
        print("SKIP: " + why)
        return ngxh.SKIP
    lua_so, lua_path, lua_env = lua
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-gw-bench-")
    script = os.path.join(tmp, "keys.lua")
    with open(script, "w") as f:
        f.write(WRK_LUA)
    red = Redis(tmp, os.path.abspath(rmodule))
    gates = []
    try:
        sha = red.cmd("SCRIPT", "LOAD", open(spec).read())
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            raise SystemExit("SCRIPT LOAD of the spec script: " + sha)
        # The anchor's cosocket waits up to 1 s for its reply: so does the
        # store (its default, 20 ms, would decide a reply that a loaded
        # machine delays on the degraded limiter, without Redis).
        store = "redis:nodes=127.0.0.1:%d;timeout_ms=1000;engine=" % red.port
        cases = []
        for name, conf, fields, env in (
                ("anchor: spec script, EVALSHA", ANCHOR_CONF, dict(
                    lua_module=lua_so, lua_path=lua_path, sha=sha,
                    redis_port=red.port,
                    args=", ".join('"%s"' % a for a in SPEC_ARGS)), lua_env),
                ("sluice, engine=lua", SLUICE_CONF, dict(
                    module=os.path.abspath(module), store=store + "lua"),
                 None),
                ("sluice, engine=module", SLUICE_CONF, dict(
                    module=os.path.abspath(module), store=store + "module"),
                 None)):
            gates.append(Gate(conf, fields, env))
            cases.append((name, gates[-1]))
        for _, g in cases:
            wrk(g, red, script)  # warm-up: connections, keys, records
        runs = {name: [] for name, _ in cases}
        for _ in range(ROUNDS):
            for name, g in cases:
                runs[name].append(wrk(g, red, script))
        fcall = re.search(r"cmdstat_fcall:calls=(\d+)",
                          red.cmd("INFO", "commandstats"))
    finally:
        for g in gates:
            try:
                g.stop()
            except Exception as e:  # stop the others and Redis regardless
                print("bench_gateway: stopping nginx: %s" % e,
                      file=sys.stderr)
        red.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    anchor = runs[cases[0][0]]
    print("gateway: nginx 1 worker, wrk 1 thread %d connections, %d rounds "
          "of %d s interleaved, 1000 keys, one redis-server %s, %d CPUs"
          % (CONNS, ROUNDS, SECS, subprocess.run(
              ["redis-server", "--version"], capture_output=True,
              text=True).stdout.split()[2], os.cpu_count()))
    print("%-30s %10s %10s %8s %8s %10s %10s %9s" % (
        "case (median of rounds)", "req/s", "best req/s", "p50 ms", "p99 ms",
        "redis us", "nginx us", "calls/req"))
    for name, _ in cases:
        r = runs[name]
        print("%-30s %10.0f %10.0f %8.3f %8.3f %10.1f %10.1f %9.3f" % (
            name, median([x["rps"] for x in r]), max(x["rps"] for x in r),
            median([x["p50"] for x in r]), median([x["p99"] for x in r]),
            median([x["redis_us"] for x in r]),
            median([x["ngx_us"] for x in r]),
            sum(x["calls"] for x in r) / len(r)))
    print("per round, against the anchor (median, range):")
    for name, _ in cases[1:]:
        for what, key in (("requests/s", "rps"), ("p50", "p50"),
                          ("Redis CPU per request", "redis_us")):
            q = sorted(a[key] / b[key] for a, b in zip(runs[name], anchor))
            print("  %-24s %-22s %5.2f  (%.2f-%.2f)" % (
                name, what, median(q), q[0], q[-1]))
    print("targets: engine=lua requests/s >= 1.00x the anchor's at the same "
          "or lower p50")
    print("engine=lua decided by FCALL: %s" % ("yes" if fcall else "NO"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
