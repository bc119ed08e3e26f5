#!/usr/bin/env python3
"""resty.sluice in a real nginx with Debian's lua-nginx-module: two
workers sharing one shm store, deciding in access_by_lua, in front of a
small upstream.  Every answer is held against the C library's on the same
trace (tests/resty/oracle.c, fed the instants the Lua side decided at):
status, headers and problem+json body, byte for byte.  Counts and events
only, no timings.

    test_resty.py LIBSLUICE ORACLE [--redis] [TEST_NAME...]

With --redis (under tests/redis/harness.py: SLUICE_REDIS_NODES), the store
is that Redis, single server or cluster, reached through the two halves
over cosockets: the same trace against the same oracle, and, on a single
server, a stalled Redis (SIGSTOP) that leaves the worker answering.
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import restyh  # noqa: E402
from restyh import ngxh  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
POLICY = os.path.join(HERE, "policy.conf")
# The bindings' tests' one sign-in policy.
LOGIN_POLICY = os.path.join(HERE, "..", "common", "login.conf")
PROBLEM_BASE = "https://api.example.test/errors/"
FORM_BOTH = 2  # SLUICE_HTTP_FORM_BOTH: legacy and structured fields
LIB = ORACLE = UP = None
STORE = None  # None: shm; else a redis store string
# The headers the renderer may send: any of these in an answer must be the
# library's.
RENDERED = {"retry-after", "ratelimit-policy", "ratelimit-limit",
            "ratelimit-remaining", "ratelimit-reset", "ratelimit",
            "x-penalty-box-status"}

HTTP = """
  upstream up { server 127.0.0.1:%(up)d; keepalive 16; }
  init_worker_by_lua_block {
    local sluice = require "resty.sluice"
    local store = "%(store)s"
    local function open(policy, admission_headers)
      local l, err = sluice.new{
        policy = policy, store = store, admission_headers = admission_headers,
        redis_timeout_ms = 30000, redis_connect_timeout_ms = 5000,
        test_clock = true,
        secret = "%(secret)s", library = "%(lib)s", jitter = false,
        header_form = "both", problem_base = "%(problem_base)s" }
      if not l then ngx.log(ngx.ERR, "resty.sluice: ", err) end
      return l
    end
    lim = open("%(policy)s")
    -- Sign-ins on the bindings' tests' one sign-in policy, on the same
    -- store.
    login_lim = open("%(login_policy)s")
    -- The same store and policy, no RateLimit fields on an admission.
    quiet = open("%(policy)s", false)
    settles, settle_errs, reports = {}, {}, 0
    function check()
      return check_with{ attrs = { user = ngx.var.http_x_user,
                                   tokens = ngx.var.http_x_tokens } }
    end
    function check_with(req, on)
      local d, err = (on or lim):access(req)
      if not d then
        ngx.status = 400
        ngx.say(err)
        return ngx.exit(ngx.HTTP_OK)
      end
      ngx.ctx.sluice = d  -- a refusal's is there already
    end
    -- The same through one decision the worker fills for every request
    -- (access's d), under /reuse: what must outlive the call is copied.
    shared_d = require("ffi").new("sluice_decision")
    function check_reused()
      ngx.ctx.reused = true
      local d, err = lim:access({ route = ngx.var.uri:sub(#"/reuse" + 1),
                                  attrs = { user = ngx.var.http_x_user,
                                            tokens = ngx.var.http_x_tokens } },
                                shared_d)
      if not d then
        ngx.status = 400
        ngx.say(err)
        return ngx.exit(ngx.HTTP_OK)
      end
      ngx.ctx.sluice = { now_ns = d.now_ns }
    end
  }
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  server {
    listen 127.0.0.1:%(port)d reuseport;
    add_header X-Worker $pid always;
    header_filter_by_lua_block {
      -- as the next request's decision would: a refusal's is a copy
      if ngx.ctx.reused then require("ffi").fill(shared_d, require("ffi").sizeof(shared_d)) end
      local d = ngx.ctx.sluice
      if d then ngx.header["X-Now"] = (tostring(d.now_ns):gsub("LL$", "")) end
    }
    log_by_lua_block { lim.log() }
    location /v1/ {
      access_by_lua_block { check() }
      content_by_lua_block { ngx.say("ok") }
    }
    location /reuse/v1/ {
      access_by_lua_block { check_reused() }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /plain { content_by_lua_block { ngx.say("plain") } }
    location /quiet/v1/ {
      access_by_lua_block {
        local d, err = quiet:access{ route = ngx.var.uri:sub(#"/quiet" + 1),
                                     attrs = { user = ngx.var.http_x_user,
                                               tokens = ngx.var.http_x_tokens } }
        if not d then ngx.status = 400; ngx.say(err); return ngx.exit(ngx.HTTP_OK) end
      }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /apart/v1/complete {
      content_by_lua_block {
        -- decide() and answer() apart, as the Kong plugin uses them.
        local req = { method = "POST", route = "/v1/complete",
                      attrs = { user = ngx.var.http_x_user, tokens = ngx.var.http_x_tokens } }
        local d, err = lim:decide(req)
        if not d then ngx.status = 400; ngx.say(err); return end
        local status, hdrs, body = lim:answer(d, req, "rid-apart")
        ngx.status = status
        for i = 1, #hdrs, 2 do ngx.header[hdrs[i]] = hdrs[i + 1] end
        ngx.print(body or "admitted")
      }
    }
    location /v1/jobs {
      access_by_lua_block { check() }
      proxy_pass http://up;
    }
    # Settling in the log phase the tokens the answer says were used.
    location = /settle/v1/complete {
      access_by_lua_block {
        local req = { method = "POST", route = "/v1/complete",
                      attrs = { user = ngx.var.http_x_user, tokens = ngx.var.http_x_tokens } }
        local d = lim:access(req)
        ngx.ctx.sreq, ngx.ctx.sd = req, d
      }
      content_by_lua_block {
        ngx.header["X-Tokens-Used"] = ngx.var.http_x_used
        ngx.say("ok")
      }
      log_by_lua_block {
        local d = ngx.ctx.sd
        if not d then return end
        settles[#settles + 1] = d
        local ok, err = lim:settle(ngx.ctx.sreq, d,
                                   { tokens = ngx.var.sent_http_x_tokens_used })
        if not ok then settle_errs[#settle_errs + 1] = err end
      }
    }
    # A sign-in: the upstream's status reported in the log phase (on
    # Redis from a timer); the reports so far and their errors.
    location = /v1/login {
      access_by_lua_block {
        local req = { route = "/login", attrs = { user = ngx.var.http_x_user } }
        check_with(req, login_lim)
        ngx.ctx.lreq = req
      }
      content_by_lua_block {
        ngx.status = ngx.var.http_x_secret == "good" and 200 or 401
        ngx.say("login")
      }
      log_by_lua_block {
        local req = ngx.ctx.lreq
        local d = ngx.ctx.sluice
        if not req or not d or d.allowed ~= 1 then return end  -- admitted only
        reports = reports + 1
        local ok, err = login_lim:report(req, "result", ngx.status)
        if not ok then settle_errs[#settle_errs + 1] = err end
      }
    }
    location = /reported {
      content_by_lua_block { ngx.say(reports, " ", table.concat(settle_errs, "|")) }
    }
    # The worker's settled decisions (SLUICE_DECISION_SETTLED in flags),
    # the settles so far, and their errors.
    location = /settled {
      content_by_lua_block {
        local n = 0
        for _, d in ipairs(settles) do
          if bit.band(d.flags, 0x200) ~= 0 then n = n + 1 end
        end
        ngx.say(n, " ", #settles, " ", table.concat(settle_errs, "|"))
      }
    }
  }
"""


def start(workers=2):
    ng = restyh.LuaNginx(HTTP, workers=workers, up=UP.port, policy=POLICY,
                         login_policy=LOGIN_POLICY, lib=LIB,
                         problem_base=PROBLEM_BASE, store="")
    store = STORE or "shm:name=%s;create=1;capacity=10000" % ng.shm
    ng.edit_conf('store = ""', 'store = "%s"' % store)
    return ng.start()


def oracle(lines):
    """The C library's answers to trace lines, parsed: a list of (status,
    {header: value}, body) or ("E", name, field)."""
    out = subprocess.run([ORACLE, POLICY, PROBLEM_BASE, str(FORM_BOTH)],
                         input="".join(lines), capture_output=True,
                         text=True, check=True).stdout
    answers = []
    cur = None
    for line in out.splitlines():
        if line == ".":
            answers.append(cur)
            cur = None
        elif line.startswith("E "):
            cur = tuple(line.split(" "))
        elif line.startswith("H "):
            k, v = line[2:].split(": ", 1)
            cur[1][k.lower()] = v
        elif line.startswith("B "):
            cur[2] = line[2:]
        else:
            cur = [int(line), {}, ""]
    return answers


def send(ng, req, prefix=""):
    method, path, user, tokens = req
    h = {}
    if user:
        h["X-User"] = user
    if tokens is not None:
        h["X-Tokens"] = str(tokens)
    return ng.get(prefix + path, method=method, headers=h)


# ------------------------------------------------------------------ tests --

def test_trace_as_the_c_library(ng):
    """A seeded trace of GETs, PUTs, posts and token-costed completions by
    three users, some missing the user or over a cost's bound, sent one
    after another over fresh connections (so both workers decide): every
    answer is the C library's at the same instants."""
    rnd = random.Random(36)
    kinds = [("GET", "/v1/items"), ("GET", "/v1/items/7"),
             ("PUT", "/v1/items/7"), ("POST", "/v1/posts"),
             ("POST", "/v1/complete")]
    trace = []
    for i in range(180):
        method, path = rnd.choice(kinds)
        user = rnd.choice(["ann", "bob", "cy"]) if rnd.random() > 0.03 else None
        tokens = rnd.choice([40, 120, 290, 301]) if path == "/v1/complete" \
            else None
        trace.append((method, path, user, tokens))
    got = []
    reused = [rnd.random() < 1 / 3 for _ in trace]
    for i, req in enumerate(trace):
        got.append(send(ng, req, "/reuse" if reused[i] else ""))
        if i % 15 == 14:
            time.sleep(rnd.random() * 0.15)  # let buckets refill: variety
    lines, now = [], "0"
    for req, r in zip(trace, got):
        method, path, user, tokens = req
        if r.status != 400:  # decided: the instant is in its answer
            assert r.h("x-now"), (req, r.status, r.headers)
            now = r.h("x-now")
        rid = "-"
        if r.status == 429:
            rid = json.loads(r.body)["request_id"]
        attrs = ""
        if user:
            attrs += " user=" + user
        if tokens is not None:
            attrs += " tokens=%d" % tokens
        lines.append("%s %s %s %s%s\n" % (now, method, path, rid, attrs))
    want = oracle(lines)
    assert len(want) == len(trace), (len(want), len(trace))
    admitted, refused, limits = 0, 0, set()
    for i, (req, r, w) in enumerate(zip(trace, got, want)):
        where = "request %d %s: nginx %s %s %r, C %r" % (
            i, req, r.status, r.headers, r.body, w)
        if w[0] == "E":
            assert r.status == 400 and r.h("x-now") is None, where
            assert r.body.decode().startswith(w[1] + ":"), where
            assert r.body.decode().rstrip().endswith("(%s)" % w[2]), where
            continue
        status, headers, body = w
        assert r.status == status, where
        for k, v in headers.items():
            assert r.h(k) == v, where
        assert {k for k in r.headers if k in RENDERED} == \
            {k for k in headers if k in RENDERED}, where
        if status == 200:
            admitted += 1
            assert r.body == b"ok\n", where
        else:
            refused += 1
            assert r.body.decode() == body, where
            limits.update(json.loads(body)["violated-policies"])
    workers = {r.h("x-worker") for r in got}
    print("  %d admitted, %d refused (by %s), %d input errors, workers %s, "
          "%d through a reused decision (%d refused)"
          % (admitted, refused, sorted(limits),
             len(trace) - admitted - refused, sorted(workers), sum(reused),
             sum(1 for u, r in zip(reused, got) if u and r.status >= 402)))
    # The trace must have exercised both answers, and more than one limit
    # (how many of each depends on the machine's pace: refills run on).
    assert admitted >= 10 and refused >= 10, (admitted, refused)
    assert len(limits) >= 2, limits
    assert len(workers) == 2, workers
    if STORE and os.environ.get("SLUICE_REDIS_MODE") == "cluster":
        # The users' scopes hash to slots of more than one node.
        used = 0
        for node in os.environ["SLUICE_REDIS_NODES"].split(","):
            info = subprocess.run(["redis-cli", "-p", node.split(":")[1],
                                   "INFO", "commandstats"],
                                  capture_output=True, text=True).stdout
            used += bool(re.search(r"cmdstat_(fcall|evalsha|sluice\.run):"
                                   r"calls=\d+", info))
        print("  %d cluster nodes decided" % used)
        assert used >= 2, used


def test_lease_released_in_log_phase(ng):
    """A concurrency limit of 2 per user: two requests held at the upstream
    take both leases, a third is refused with the library's 429; once they
    are answered, log() gives the leases back (their TTL is 60 s)."""
    q = "hold=20000&t=lease"
    UP.release.clear()
    held = [None, None]

    def hold(i):
        held[i] = ng.get("/v1/jobs?" + q, headers={"X-User": "jo"})
    ts = [threading.Thread(target=hold, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    try:
        ngxh.wait_until(lambda: UP.holding(q) == 2, 10, "two held requests")
        r = ng.get("/v1/jobs", headers={"X-User": "jo"})
        assert r.status == 429, (r.status, r.body)
        p = json.loads(r.body)
        assert p["type"] == PROBLEM_BASE + "concurrency-limit-exceeded", p
        assert p["violated-policies"] == ["jobs"], p
        other = ng.get("/v1/jobs", headers={"X-User": "kim"})
        assert other.status == 200, "leases are per user"
    finally:
        UP.release.set()
        for t in ts:
            t.join()
        UP.release.clear()
    assert [h.status for h in held] == [200, 200], [h.status for h in held]
    ngxh.wait_until(lambda: ng.get("/v1/jobs", headers={
        "X-User": "jo"}).status == 200, 10, "the leases back after log()")


def test_decide_and_answer_apart(ng):
    """decide() then answer(), the calls the Kong plugin makes: 290 tokens
    of 300 are admitted, another 290 at once are refused with the
    library's 429 naming the limit (100 tokens a second come back)."""
    h = {"X-User": "apart", "X-Tokens": "290"}
    r = ng.get("/apart/v1/complete", headers=h)
    assert r.status == 200 and r.body == b"admitted", (r.status, r.body)
    assert r.h("ratelimit-limit") == "300", r.headers
    r = ng.get("/apart/v1/complete", headers=h)
    assert r.status == 429, (r.status, r.body)
    p = json.loads(r.body)
    assert p["violated-policies"] == ["tokens"] and \
        p["request_id"] == "rid-apart", p
    assert r.h("retry-after") and r.h("content-type") == \
        "application/problem+json", r.headers
    r = ng.get("/apart/v1/complete", headers={"X-User": "apart"})
    assert r.status == 400 and b"(tokens)" in r.body, (r.status, r.body)


def test_admission_headers_off(ng):
    """admission_headers = false: an admission goes on with none of the
    renderer's fields; the refusal after it is the library's whole 429
    (Retry-After, the RateLimit fields, problem+json)."""
    h = {"X-User": "quiet", "X-Tokens": "290"}
    r = ng.get("/quiet/v1/complete", method="POST", headers=h)
    assert r.status == 200 and r.body == b"ok\n", (r.status, r.body)
    sent = RENDERED & set(r.headers)
    assert not sent, r.headers
    r = ng.get("/quiet/v1/complete", method="POST", headers=h)
    assert r.status == 429, (r.status, r.body)
    assert r.h("retry-after") and r.h("ratelimit-limit") == "300" and \
        r.h("content-type") == "application/problem+json", r.headers
    assert json.loads(r.body)["violated-policies"] == ["tokens"], r.body


def test_settle_in_log_phase(_ng):
    """One worker; the log phase settles the tokens the answer reported
    (X-Tokens-Used): 300 of 300 charged and 0 used come back, so another
    300 fit at once (without the refund the bucket would need 3 s); 150
    of them back, then 1 charged and 300 used leave the bucket in debt, so
    1 more is refused;
    a report that is no number is refused by settle, and the worker goes
    on.  On Redis the settle goes out from a timer over a cosocket (the
    halves); the test waits for the decisions to carry the settled flag."""
    ng = start(workers=1)

    def settled():
        return ng.get("/settled").body.decode().rstrip("\n").split(" ", 2)

    def post(tokens, used, want, n):
        r = ng.get("/settle/v1/complete", method="POST", headers={
            "X-User": "settler", "X-Tokens": str(tokens), "X-Used": used})
        assert r.status == want, (tokens, used, r.status, r.body, ng.log())
        if want == 200:
            ngxh.wait_until(lambda: int(settled()[1]) == n, 10, "settle %d" % n)
        return r
    try:
        post(300, "0", 200, 1)
        ngxh.wait_until(lambda: settled()[0] == "1", 10, "settled 1")
        post(300, "0", 200, 2)  # the 300 came back
        ngxh.wait_until(lambda: settled()[0] == "2", 10, "settled 2")
        post(300, "150", 200, 3)  # 150 back
        post(1, "300", 200, 4)  # 299 more: 149 in debt
        ngxh.wait_until(lambda: settled()[0] == "4", 10, "settled 4")
        r = post(1, "0", 429, 4)
        assert json.loads(r.body)["violated-policies"] == ["tokens"], r.body
        assert settled()[2] == "", settled()
        ng.get("/settle/v1/complete", method="POST", headers={
            "X-User": "settler2", "X-Tokens": "5", "X-Used": "x"})
        if STORE:  # from the timer: its error goes to the error log
            ngxh.wait_until(lambda: "settling a cost: SLUICE_EINVAL" in
                            ng.log(), 10, "the refused settle")
        else:
            ngxh.wait_until(lambda: settled()[2] != "", 10, "the refused settle")
            assert settled()[2].startswith("SLUICE_EINVAL"), settled()
        assert settled()[0] == "4", settled()
        r = ng.get("/settle/v1/complete", method="POST", headers={
            "X-User": "settler2", "X-Tokens": "5", "X-Used": "5"})
        assert r.status == 200, r.status
    finally:
        ng.stop()


def test_report_in_log_phase(_ng):
    """lim:report() in the log phase: each answer's status is reported as
    the attribute result (on Redis from a timer, over a cosocket); 200s
    strike nothing, the third 401 boxes the user, whose next sign-in is a
    429 Active-Lockout answered before the content; another user signs
    in.  The test waits for the reports, not for time."""
    ng = start(workers=1)

    def login(user, secret):
        return ng.get("/v1/login", method="POST",
                      headers={"X-User": user, "X-Secret": secret})

    def reported(n):
        ngxh.wait_until(lambda: ng.get("/reported").body.decode().split(
            " ", 1)[0] == str(n), 10, "report %d" % n)
    try:
        for i in range(1, 4):
            assert login("ann", "good").status == 200
            reported(i)
        for i in range(4, 7):
            r = login("ann", "bad")
            assert r.status == 401, (i, r.status, r.body, ng.log())
            reported(i)
        r = login("ann", "good")
        assert r.status == 429, (r.status, r.body, ng.log())
        assert r.h("x-penalty-box-status") == "Active-Lockout", r.headers
        assert login("bob", "good").status == 200
        assert ng.get("/reported").body.decode().split(" ", 1)[1] == "\n"
    finally:
        ng.stop()


def redis_waiting(port):
    """The Redis server at `port` has bytes it has not read: a call is out
    and unanswered (the server is stopped)."""
    out = subprocess.run(["ss", "-Htn", "state", "established",
                          "( sport = :%d )" % port],
                         capture_output=True, text=True).stdout
    return any(int(line.split()[0]) > 0 for line in out.splitlines())


def test_stalled_redis_leaves_the_worker_answering(_ng):
    """One worker; Redis stopped (SIGSTOP) while a decision's call is out
    on it: another location of the same worker answers meanwhile, and so
    does a second decided request's call go out; once Redis runs again
    both decisions come back.  A worker blocked in the call (a blocking
    client) would answer nothing until Redis did."""
    if not STORE or os.environ.get("SLUICE_REDIS_MODE") != "single":
        print("  (a single Redis only)")
        return
    pid = int(os.environ["SLUICE_REDIS_PIDS"].split(",")[0].split(":")[1])
    port = int(os.environ["SLUICE_REDIS_NODES"].split(",")[0].split(":")[1])
    ng = start(workers=1)
    out = {}

    def decided(name, user):
        out[name] = ng.get("/v1/items", headers={"X-User": user}, timeout=60)
    try:
        assert ng.get("/v1/items", headers={"X-User": "st"}).status == 200
        os.kill(pid, signal.SIGSTOP)
        try:
            a = threading.Thread(target=decided, args=("a", "st-a"))
            a.start()
            ngxh.wait_until(lambda: redis_waiting(port), 10,
                            "the call out on the stopped Redis")
            r = ng.get("/plain", timeout=10)
            assert r.status == 200 and r.body == b"plain\n", r.status
            assert a.is_alive() and "a" not in out, "a was answered: %s" % out
            b = threading.Thread(target=decided, args=("b", "st-b"))
            b.start()
            r = ng.get("/plain", timeout=10)
            assert r.status == 200, r.status
            assert "a" not in out and "b" not in out, out
        finally:
            os.kill(pid, signal.SIGCONT)
        a.join(60)
        b.join(60)
        assert out["a"].status == 200 and out["b"].status == 200, \
            (out["a"].status, out["b"].status)
        assert out["a"].h("ratelimit-remaining") == "5", out["a"].headers
    finally:
        ng.stop()


def main():
    global LIB, ORACLE, UP
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    global STORE
    LIB, ORACLE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    names = sys.argv[3:]
    if names[:1] == ["--redis"]:
        names = names[1:]
        nodes = os.environ.get("SLUICE_REDIS_NODES")
        if not nodes:
            print("SKIP: --redis runs under tests/redis/harness.py")
            return ngxh.SKIP
        STORE = "redis:nodes=%s;timeout_ms=5000" % nodes
    why = restyh.skip_reason()
    if why:
        print("SKIP: " + why)
        return ngxh.SKIP
    tests = [(n, f) for n, f in sorted(globals().items())
             if n.startswith("test_") and (not names or n in names)]
    UP = ngxh.Upstream()
    ng = start()
    failed = 0
    try:
        for name, fn in tests:
            try:
                fn(ng)
                print("ok   " + name)
            except Exception:
                failed += 1
                print("FAIL " + name)
                traceback.print_exc()
                print(ng.log())
    finally:
        ng.stop()
        UP.stop()
    print("%d passed, %d failed" % (len(tests) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
