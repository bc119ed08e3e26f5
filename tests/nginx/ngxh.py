"""Helpers for the nginx suites: a real nginx (master + workers) on
127.0.0.1 with ngx_http_sluice_module loaded, a small threaded upstream,
a Redis server, all on random free ports, all removed afterwards."""
import http.client
import http.server
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

NGINX = "/usr/sbin/nginx"
# The source tree (etc/ledger.conf).
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
SKIP = 77


def skip_reason(module):
    if not os.access(NGINX, os.X_OK):
        return "nginx is not installed (apt-get install nginx nginx-dev)"
    if not module or not os.path.isfile(module):
        return "ngx_http_sluice_module.so was not built (-Dnginx, nginx-dev)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, secs=10, what="condition"):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class Reply:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def h(self, name):
        return self.headers.get(name.lower())


def request(port, path, method="GET", headers=None, timeout=30, body=None):
    """One request on a fresh connection (reuseport spreads connections
    over the workers)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()},
                     body)
    finally:
        c.close()


class Upstream:
    """Answers 200 "ok"; ?hold=MS waits that long (or until released);
    ?gate=NAME waits until the test opens that gate (open_gate), so a
    test that needs requests held upstream holds them on its own events,
    not on a time it guesses is long enough (60 s at most, then it
    answers: a broken test fails, it does not hang);
    ?used=N answers with X-Tokens-Used: N (what an LLM upstream reports);
    /v1/auth/token and /login answer 401 unless secret=good (in the query
    or a form body).  Counts what it saw."""

    def __init__(self):
        self.port = free_port()
        self.hits = {}
        self.bodies = {}  # query string -> the last request body with it
        self.held = {}  # query string -> requests holding with it now
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.gates = {}  # gate name -> threading.Event
        up = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_one(self):
                u = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(u.query)
                body = self.rfile.read(int(self.headers.get(
                    "Content-Length") or 0))
                # a form body counts as the query does
                for k, v in urllib.parse.parse_qs(
                        body.decode("latin-1")).items():
                    q.setdefault(k, v)
                with up.lock:
                    up.bodies[u.query] = body
                    up.hits[u.path] = up.hits.get(u.path, 0) + 1
                    up.held[u.query] = up.held.get(u.query, 0) + 1
                try:
                    if "hold" in q:
                        up.release.wait(int(q["hold"][0]) / 1000)
                    if "gate" in q:
                        up.gate(q["gate"][0]).wait(60)
                    status, extra = 200, {}
                    if u.path in ("/v1/auth/token", "/login") and \
                            q.get("secret", [""])[0] != "good":
                        status = 401
                    if u.path == "/authn":  # an API-key authenticator
                        key = self.headers.get("X-Key")
                        if key:
                            extra = {"X-Tenant-Id": "tenant-of-" + key,
                                     "X-Tier": TIER}
                        else:
                            status = 401
                    if "used" in q:
                        extra["X-Tokens-Used"] = q["used"][0]
                    body = b"ok\n"
                    self.send_response(status)
                    for k, v in extra.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                finally:
                    with up.lock:
                        up.held[u.query] -= 1

            do_GET = do_POST = handle_one

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.srv.daemon_threads = True
        # Clients killed with their nginx worker: nothing to report.
        self.srv.handle_error = lambda *a: None
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def holding(self, query):
        with self.lock:
            return self.held.get(query, 0)

    def gate(self, name):
        with self.lock:
            return self.gates.setdefault(name, threading.Event())

    def open_gate(self, name):
        self.gate(name).set()

    def stop(self):
        self.release.set()
        with self.lock:
            for g in self.gates.values():
                g.set()
        self.srv.shutdown()
        self.srv.server_close()


class Redis:
    def __init__(self, tmp, port=None):
        self.port = port or free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up():
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                    s.sendall(b"PING\r\n")
                    return s.recv(16).startswith(b"+PONG")
            except OSError:
                return False
        wait_until(up, 10, "redis-server")

    def holding(self, query):
        with self.lock:
            return self.held.get(query, 0)

    def stop(self):
        try:
            self.proc.send_signal(signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.proc.terminate()
        self.proc.wait(10)


# The tests' policy: etc/ledger.conf's shape (its attributes, limits,
# penalties and routes, the gateway's method + route picking the route) with
# small numbers, so a test reaches every limit in a few requests.  Its
# tier is a built-in one: the file's limits carry one set of numbers.
TIER = "growth"
POLICY = """
attributes = [ "ledger", "export_range_s", "subject", "result" ];
untrusted = [ "subject" ];
limits = {
  tenant = { algorithm = "gcra"; scope = [ "tenant" ]; unit = "points";
             rate = 1; period_ms = %(period_ms)d; burst = %(tenant_burst)d; };
  key = { algorithm = "gcra"; scope = [ "tenant", "key" ]; unit = "points";
          rate = 1; period_ms = %(period_ms)d; burst = %(burst)d; };
  ledger_lock = { algorithm = "lock"; scope = [ "tenant", "ledger" ];
                  ttl_ms = %(lease_ttl)d000; retry_after_max_ms = 1000; };
  reconciles = { algorithm = "concurrency"; scope = [ "tenant" ];
                 max = 2; ttl_ms = %(lease_ttl)d000;
                 retry_after_max_ms = 1000; };
  exports_per_hour = { algorithm = "cap"; scope = [ "tenant" ];
                       limit = 5; window_ms = 3600000; };
  exports = { algorithm = "concurrency"; scope = [ "tenant" ];
              max = 1; ttl_ms = 1800000; retry_after_max_ms = 1000; };
};
penalties = {
  keys = {
    scope = [ "tenant", "key" ];
    strike = "early";
    strikes = %(strikes)d; strike_window_ms = 60000; offense_ttl_s = 86400;
    levels = ( { box_s = %(box1)d; },
               { box_s = 600; actions = [ "edge_deny", "alert" ]; },
               { actions = [ "edge_deny", "suspend" ]; } );
  };
  subject = {
    scope = [ "subject" ];
    strike = "reported";
    reported = { by = "result"; values = [ "bad_secret", "unknown_client" ];
                 window = "sliding"; kept = [ "bad_secret" ]; };
    strikes = %(auth_failures)d; strike_window_ms = 900000;
    offense_ttl_s = 86400;
    levels = ( { box_s = 300; },
               { box_s = 3600; actions = [ "edge_deny", "alert" ]; },
               { box_s = 86400; actions = [ "edge_deny" ]; } );
  };
  address = {
    scope = [ "ip" ];
    strike = "reported";
    reported = { by = "result"; values = [ "bad_secret", "unknown_client" ];
                 window = "sliding"; };
    strikes = %(ip_failures)d; strike_window_ms = 900000;
    offense_ttl_s = 86400;
    levels = ( { box_s = 300; },
               { box_s = 3600; actions = [ "edge_deny", "alert" ]; },
               { box_s = 86400; actions = [ "edge_deny", "ban" ]; } );
    stuffing = { of = "subject"; reports = %(stuffing_reports)d;
                 distinct = %(stuffing_subjects)d; window_ms = 600000; };
  };
};
routes = (
  { method = "POST"; route = "/v1/auth/token"; limits = ( );
    penalty = [ "subject", "address" ]; },
  { method = "POST"; route = "/v1/ledgers/reconcile";
    limits = ( { group = [ "tenant", "key" ]; cost = 1; },
               "ledger_lock", "reconciles" );
    penalty = "keys"; failure = "closed"; },
  { method = "GET"; route = "/v1/reports/audit-export";
    limits = ( { group = [ "tenant", "key" ]; cost = 1; },
               "exports_per_hour", "exports" );
    penalty = "keys"; failure = "closed"; },
  { method = "*"; route = "/*";
    limits = ( { group = [ "tenant", "key" ]; } );
    penalty = "keys"; failure = "degraded"; }
);
failure = { retry_after_s = 15; degraded_percent = 25;
            probe_interval_ms = 1000; };
"""

def bucket_policy(rate, burst):
    """The benchmarks' policy: etc/ledger.conf's tenant and key buckets
    (one group) and the key's box on every /v1/ route, at a rate no run
    drains."""
    return """
limits = {
  tenant = { algorithm = "gcra"; scope = [ "tenant" ]; unit = "points";
             rate = %(rate)d; period_ms = 1000; burst = %(burst)d; };
  key = { algorithm = "gcra"; scope = [ "tenant", "key" ]; unit = "points";
          rate = %(rate)d; period_ms = 1000; burst = %(burst)d; };
};
penalties = {
  keys = {
    scope = [ "tenant", "key" ];
    strikes = 20; strike_window_ms = 60000; offense_ttl_s = 86400;
    levels = ( { box_s = 300; },
               { box_s = 3600; actions = [ "edge_deny", "alert" ]; },
               { actions = [ "edge_deny", "suspend" ]; } );
  };
};
routes = (
  { method = "*"; route = "/v1/*";
    limits = ( { group = [ "tenant", "key" ]; } );
    penalty = "keys"; failure = "degraded"; }
);
""" % dict(rate=rate, burst=burst)


CONF = """
load_module %(module)s;
worker_processes %(workers)d;
error_log %(dir)s/error.log notice;
pid %(dir)s/nginx.pid;
%(user)s
%(thread_pool)s
events { worker_connections 1024; }
http {
  log_format sl '$status $sluice_status $sluice_outcome $sluice_cost';
  access_log %(access_log)s;
  sluice_policy %(dir)s/policy.conf;
  sluice_store "%(store)s";
  sluice_counters "shm:name=%(shm)s-ctr";
  sluice_degraded_store "shm:name=%(shm)s-deg";
  sluice_deny_cache "shm:name=%(shm)s-deny";
  sluice_secret 00112233445566778899aabbccddeeff;
  sluice_problem_base https://api.example.test/errors/;
  %(sluice_pool)s
  proxy_http_version 1.1;
  proxy_read_timeout 120s;
  sluice_tenant $http_x_tenant;
  sluice_key $http_x_key;
  sluice_tier $http_x_tier;
  upstream up { server 127.0.0.1:%(up)d; keepalive 32; }
  map $request_body $body_user {
    volatile; "~(^|&)user=(?<u>[^&]+)" $u; default "";
  }
  map $http_x_client_ip $auth_ip { "" $remote_addr; default $http_x_client_ip; }
  map $arg_range_s $export_range_s { "" 0; default $arg_range_s; }
  server {
    listen 127.0.0.1:%(port)d reuseport backlog=1024;
    add_header X-Worker $pid always;
    add_header X-Sluice-Status $sluice_status always;
    add_header X-Sluice-Wait $sluice_retry_after always;
    proxy_set_header Connection "";
    location /v1/ { sluice on; proxy_pass http://up; }
    location = /v1/ledgers/reconcile {
      sluice on; sluice_attr ledger $arg_ledger; sluice_decide_after_body on;
      proxy_pass http://up;
    }
    location = /v1/auth/token {
      # The subject from the query, or (the spec's clients: a form body)
      # from the body, read before deciding; the client address from
      # X-Client-IP where a test sets one.  A 401 reports
      # result=bad_secret, a 2xx result=ok.
      sluice on; sluice_attr subject $arg_user$body_user;
      sluice_decide_after_body on; sluice_auth_failure_status 401;
      sluice_client_ip $auth_ip; proxy_pass http://up;
    }
    location = /v1/reports/audit-export {
      # The range in seconds (?range_s=); not given: "0" (25 points).
      sluice on; sluice_attr export_range_s $export_range_s;
      sluice_decide_after_body on; proxy_pass http://up;
    }
    location = /mirrored/reconcile {
      # Decided as the reconcile route (the policy's route is configured,
      # not the URI).
      sluice on; sluice_route /v1/ledgers/reconcile;
      sluice_attr ledger $arg_ledger; sluice_decide_after_body on;
      mirror /_mirror; proxy_pass http://up;
    }
    location = /_mirror {
      internal; proxy_pass http://up/mirror?ledger=$arg_ledger&hold=3000;
    }
    location /shadow/ {
      sluice shadow; proxy_pass http://up;
    }
    location /limit_req/ { limit_req zone=lr burst=1000000 nodelay;
                           proxy_pass http://up; }
    location /plain/ { proxy_pass http://up; }
    location /authed/ {
      auth_request /_authn;
      auth_request_set $tenant $upstream_http_x_tenant_id;
      auth_request_set $tier $upstream_http_x_tier;
      sluice on; sluice_phase %(authed_phase)s;
      sluice_tenant $tenant; sluice_tier $tier;
      proxy_pass http://up;
    }
    location = /_authn {
      internal;
      proxy_pass http://up/authn;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
    }
    location = /metrics { sluice_metrics; }
    location = /metrics-under-sluice { sluice on; sluice_metrics; }
  }
  limit_req_zone $http_x_key zone=lr:10m rate=1000000r/s;
}
"""


class Nginx:
    def __init__(self, module, up_port, workers=4, store=None, pool=False,
                 access_log=False, authed_phase="postaccess",
                 policy_text=None, **policy):
        """policy_text: the whole policy file (default: POLICY, its
        numbers from **policy)."""
        self.dir = tempfile.mkdtemp(prefix="sluice-ngx-")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.shm = "/sluice-ngx-%d-%d" % (os.getpid(), self.port)
        pol = dict(period_ms=1000000, tenant_burst=100000, burst=20,
                   strikes=5, box1=2, auth_failures=3, ip_failures=1000,
                   stuffing_reports=100000, stuffing_subjects=50,
                   lease_ttl=8)
        pol.update(policy)
        with open(os.path.join(self.dir, "policy.conf"), "w") as f:
            f.write(policy_text if policy_text is not None
                    else POLICY % pol)
        user = ""
        if os.geteuid() == 0:
            user = "user %s;" % pwd.getpwuid(0).pw_name
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(CONF % dict(
                module=os.path.abspath(module), workers=workers, dir=self.dir,
                user=user, up=up_port, port=self.port, shm=self.shm,
                store=store or "shm:name=%s;create=1;capacity=100000" % self.shm,
                thread_pool="thread_pool sluice threads=4;" if pool else "",
                authed_phase=authed_phase,
                sluice_pool="sluice_thread_pool sluice;" if pool else "",
                access_log=("%s/access.log sl" % self.dir) if access_log
                else "off"))
        self.pidfile = os.path.join(self.dir, "nginx.pid")

    def edit_conf(self, old, new):
        """Replace the first `old` of the nginx.conf with `new`."""
        with open(self.conf) as f:
            text = f.read()
        assert old in text, old
        with open(self.conf, "w") as f:
            f.write(text.replace(old, new, 1))

    def cmd(self, *args):
        return subprocess.run([NGINX, "-p", self.dir, "-c", self.conf] +
                              list(args), capture_output=True, text=True)

    def start(self):
        r = self.cmd()
        if r.returncode != 0:
            raise AssertionError("nginx did not start: " + r.stderr +
                                 self.log())
        wait_until(lambda: len(self.workers()) == self.nworkers(), 10,
                   "nginx workers")
        return self

    def nworkers(self):
        with open(self.conf) as f:
            for line in f:
                if line.startswith("worker_processes"):
                    return int(line.split()[1].rstrip(";"))
        return 1

    def master(self, pidfile=None):
        try:
            with open(pidfile or self.pidfile) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def workers(self, master=None):
        m = master or self.master()
        if not m:
            return []
        out = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % p) as f:
                    st = f.read()
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            ppid = int(st.rsplit(")", 1)[1].split()[1])
            if ppid == m and b"worker process" in cmd and \
                    b"shutting down" not in cmd:
                out.append(int(p))
        return sorted(out)

    def log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def get(self, path, **kw):
        return request(self.port, path, **kw)

    def holding(self, query):
        with self.lock:
            return self.held.get(query, 0)

    def stop(self):
        m = self.master()
        for pf in (self.pidfile + ".oldbin", self.pidfile):
            p = self.master(pf)
            if p:
                try:
                    os.kill(p, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        if m:
            wait_until(lambda: not os.path.exists("/proc/%d" % m), 10,
                       "nginx to stop")
        for n in (self.shm, self.shm + "-ctr", self.shm + "-deg",
                  self.shm + "-deny"):
            try:
                os.unlink("/dev/shm" + n)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
