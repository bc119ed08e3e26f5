#!/usr/bin/env python3
"""ngx_http_sluice_module in a real nginx on 127.0.0.1: a master with
several workers in front of a small upstream.  Counts and orderings only,
no timings (bench_nginx.py measures).

    test_nginx.py MODULE.so [TEST_NAME...]
    test_nginx.py --skip REASON      (meson, when the module is not built)
"""
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ngxh  # noqa: E402
from ngxh import wait_until  # noqa: E402

B = 20  # the test tier's key burst
MODULE = None
UP = None


def hdr(key, tier=ngxh.TIER, tenant="acme"):
    return {"X-Tenant": tenant, "X-Key": key, "X-Tier": tier}


def burst(ng, path, key, n, method="GET"):
    """n requests at once, each on its own connection."""
    out = [None] * n
    go = threading.Barrier(n)

    def one(i):
        go.wait()
        out[i] = ng.get(path, method=method, headers=hdr(key))
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def metrics(ng):
    r = ng.get("/metrics")
    assert r.status == 200, r.status
    assert r.h("content-type").startswith("text/plain; version=0.0.4")
    text = r.body.decode()
    vals = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, v = line.rsplit(" ", 1)
            vals[name] = int(v)
    return vals, text


ALLOW = 'sluice_policy_decisions_total{tier="%s",outcome="allow"}' % \
    ngxh.TIER
THROTTLED = 'sluice_policy_decisions_total{tier="%s",outcome="throttled"}' % \
    ngxh.TIER
BOXED = 'sluice_policy_decisions_total{tier="%s",outcome="boxed"}' % ngxh.TIER
SHADOW = 'sluice_policy_shadow_passed_total{tier="%s"}' % ngxh.TIER


# ------------------------------------------------------------------ tests --

def test_exact_burst_across_workers(ng):
    before, _ = metrics(ng)
    rs = burst(ng, "/v1/items", "burst-key", 3 * B)
    ok = [r for r in rs if r.status == 200]
    denied = [r for r in rs if r.status == 429]
    assert len(ok) == B, "admitted %d of %d, burst %d" % (len(ok), len(rs), B)
    assert len(ok) + len(denied) == len(rs), [r.status for r in rs]
    workers = {r.h("x-worker") for r in rs}
    assert len(workers) >= 2, "every request hit one worker: %s" % workers
    # The answers are the library's: headers and problem+json.
    types = [json.loads(r.body)["type"].rsplit("/", 1)[1] for r in denied]
    assert set(types) <= {"rate-limit-exceeded", "penalty-box-active"}, types
    d = denied[types.index("rate-limit-exceeded")]
    assert d.h("content-type") == "application/problem+json"
    assert json.loads(d.body)["status"] == 429
    assert int(d.h("retry-after")) >= 1
    assert d.h("ratelimit-limit") == str(B) and d.h("ratelimit-remaining") == "0"
    assert d.h("x-sluice-status") == "REJECTED"
    # Admitted requests carry RateLimit headers on the upstream's answer:
    # the k-th admission leaves B - k, or one less when its worker read the
    # clock a moment before a worker whose decision reached the table first
    # (each process reads its own clock; the bucket refills one point in
    # 1000 s, so that moment costs a point's fraction).  Sorted, the values
    # are then 0..B-1 with some one lower, and never more than B admitted.
    rem = sorted(int(r.h("ratelimit-remaining")) for r in ok)
    assert all(i - 1 <= x <= i for i, x in enumerate(rem)), rem
    assert all(r.h("x-sluice-status") == "PASSED" for r in ok)
    after, _ = metrics(ng)
    assert after[ALLOW] - before[ALLOW] == B
    assert (after[THROTTLED] + after[BOXED]) - \
        (before[THROTTLED] + before[BOXED]) == 2 * B


def test_each_worker_draws_its_own_jitter(ng):
    """Retry-After = the wait ($sluice_retry_after) + a random 0..10%.  A
    generator seeded before the fork would give every worker the same
    sequence of draws."""
    seqs = {}
    for k in range(12):
        key = "jitter-key-%d" % k
        for _ in range(B):
            assert ng.get("/v1/j", headers=hdr(key)).status == 200
        for _ in range(3):  # throttled, not yet boxed (5 strikes)
            r = ng.get("/v1/j", headers=hdr(key))
            assert r.status == 429 and r.h("x-penalty-box-status") == "Warning"
            jitter = int(r.h("retry-after")) - int(r.h("x-sluice-wait"))
            assert 0 <= jitter <= int(r.h("x-sluice-wait")) // 10, jitter
            seqs.setdefault(r.h("x-worker"), []).append(jitter)
    firsts = {tuple(v[:4]) for v in seqs.values() if len(v) >= 4}
    assert len(firsts) >= 2, "workers drew the same jitter: %s" % seqs


def test_metrics_are_the_hosts(ng):
    before, _ = metrics(ng)
    rs = [ng.get("/v1/m", headers=hdr("metrics-key")) for _ in range(B + 7)]
    seen = {r.h("x-worker") for r in rs}
    assert len(seen) >= 2, seen
    got = [metrics(ng) for _ in range(12)]
    allow = {g[0][ALLOW] for g in got}
    assert len(allow) == 1, "scrapes disagree: %s" % allow
    assert allow.pop() - before[ALLOW] == B
    # A metrics location where `sluice on` is inherited is not limited.
    assert ng.get("/metrics-under-sluice").status == 200
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=got[0][1],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr


def test_denial_of_a_route_the_body_cannot_carry(ng):
    """The route ($uri, decoded) goes into the problem body, which takes
    at most 1024 bytes of UTF-8: a throttled client sending /v1/%ff or a
    huge path still gets its 429 problem+json, the route percent-encoded
    and cut (it got a 500 text/html without Retry-After)."""
    key = "route-key"
    for _ in range(B):
        assert ng.get("/v1/x", headers=hdr(key)).status == 200
    for path, inst in (("/v1/%ff%c3%a9?q", "/v1/%FF%C3%A9"),
                       ("/v1/" + "a" * 1500, "/v1/" + "a" * 1020)):
        r = ng.get(path, headers=hdr(key))
        assert r.status == 429, (path[:20], r.status, r.body[:80])
        assert r.h("content-type") == "application/problem+json"
        assert int(r.h("retry-after")) >= 1
        assert json.loads(r.body)["instance"] == inst


def test_refused_fields_answer_problem_json(ng):
    """A request the policy refuses to decide (a scope's attribute
    missing, an unknown tier, an id too long) gets a 400 problem+json
    naming the attribute, never the values sent (it got nginx's HTML 400
    page)."""
    secret = "sk_live_0123456789abcdef"
    long_tenant = "t" * 300
    for headers, field in (
            ({"X-Key": secret, "X-Tier": ngxh.TIER}, "tenant"),
            (hdr(secret, tier="no-such-tier-" + secret), "tier"),
            (hdr(secret, tenant=long_tenant), "tenant")):
        r = ng.get("/v1/refused", headers=headers)
        assert r.status == 400, (field, r.status, r.body[:80])
        assert r.h("content-type") == "application/problem+json", \
            r.h("content-type")
        p = json.loads(r.body)
        assert p["status"] == 400 and p["title"] == "Bad Request", p
        assert p["type"] == "https://api.example.test/errors/bad-request", p
        assert "'%s'" % field in p["detail"], (field, p)
        assert p["instance"] == "/v1/refused", p
        assert secret.encode() not in r.body, r.body
        assert long_tenant.encode() not in r.body, r.body
        assert r.h("x-sluice-status") == "ERROR", r.h("x-sluice-status")


def test_penalty_escalates_across_workers(ng):
    key = "penalty-key"
    levels = []
    workers = set()

    def trip():
        for _ in range(40):
            r = ng.get("/v1/p", headers=hdr(key))
            workers.add(r.h("x-worker"))
            if r.status == 429 and r.h("x-penalty-box-status") == \
                    "Active-Lockout":
                return json.loads(r.body)
        raise AssertionError("never boxed")
    for _ in range(B):
        assert ng.get("/v1/p", headers=hdr(key)).status == 200
    b1 = trip()
    levels.append(b1["penalty_level"])
    # Wait out the level-1 box (2 s in the test policy), offend again.
    wait_until(lambda: ng.get("/v1/p", headers=hdr(key)).h(
        "x-penalty-box-status") != "Active-Lockout", 10, "box 1 to end")
    b2 = trip()
    levels.append(b2["penalty_level"])
    assert levels == [1, 2], levels
    assert len(workers) >= 2, workers


def test_leases_released_when_the_upstream_answers(ng):
    """Two reconciles held upstream take the tenant's two slots; a slot
    comes back when its answer is sent, not when its lease's TTL runs
    out.  The upstream holds each request until the test opens its gate:
    it held them 4 s by the clock once, and under load the second
    request, or the third one's decision, came after the first's 4 s were
    up (the test failed)."""
    t = {}
    res = {}
    # gates of this call (the event-loop test calls it on its own nginx)
    gate = {x: "lease-%d-%s" % (ng.port, x) for x in ("a", "b", "e")}
    query = {x: "ledger=%s&gate=%s" % (x, gate[x]) for x in gate}

    def slow(ledger):
        res[ledger] = ng.get("/v1/ledgers/reconcile?" + query[ledger],
                             method="POST", headers=hdr("lk", tenant="lt"))

    def hold(ledger):
        """Send a held reconcile; assert it is upstream (admitted)."""
        t[ledger] = threading.Thread(target=slow, args=(ledger,))
        t[ledger].start()
        wait_until(lambda: ledger in res or UP.holding(query[ledger]), 30,
                   "reconcile %s upstream" % ledger)
        assert ledger not in res, (ledger, res[ledger].status,
                                   res[ledger].body[:200])

    def other(ledger):
        return ng.get("/v1/ledgers/reconcile?ledger=" + ledger,
                      method="POST", headers=hdr("lk", tenant="lt"))
    try:
        hold("a")  # first: a's lease is the older
        hold("b")
        r = other("c")
        assert r.status == 429, r.status  # reconcile_concurrency = 2
        assert json.loads(r.body)["type"].endswith(
            "/concurrency-limit-exceeded")
        # b answers: a slot is free at once (e is admitted) ...
        UP.open_gate(gate["b"])
        t["b"].join()
        assert res["b"].status == 200, res["b"].status
        hold("e")
        # ... and it was b's: a, the older lease, still holds its slot
        # (no TTL ran out), so the set is full again.
        r = other("d")
        assert r.status == 429, (r.status, r.body)
    finally:
        for x in gate.values():
            UP.open_gate(x)
        for x in t.values():
            x.join()
    assert res["a"].status == 200 and res["e"].status == 200, res
    r = other("d")
    assert r.status == 200, (r.status, r.body)


def test_the_ledger_file_as_shipped(_ng):
    """etc/ledger.conf itself behind the locations docs/nginx.md shows
    (sluice_attr ledger, export_range_s, subject): a sandbox key's export
    costs 50 over 90 days and 25 otherwise ($sluice_cost in the access
    log), the third export in an hour is the cap's 429; a reconcile held
    upstream locks its ledger (409) and takes the tenant's one reconcile
    slot (429 for another ledger); five failed sign-ins box the subject."""
    with open(os.path.join(ngxh.SRC, "etc", "ledger.conf")) as f:
        ng = ngxh.Nginx(MODULE, UP.port, workers=2, access_log=True,
                        policy_text=f.read()).start()
    h = hdr("lf-key", tier="sandbox", tenant="lf")
    try:
        for q, want in (("?range_s=8000000", 200), ("", 200), ("", 429)):
            r = ng.get("/v1/reports/audit-export" + q, headers=h)
            assert r.status == want, (q, r.status, r.body)
        assert json.loads(r.body)["violated-policies"] == \
            ["exports_per_hour"], r.body
        with open(os.path.join(ng.dir, "access.log")) as f:
            costs = [line.split()[3] for line in f]
        assert costs[:2] == ["50", "25"], costs
        res = {}
        # Held upstream until its gate opens (no time to outlast).
        gate = "lf-%d" % ng.port
        query = "ledger=L1&gate=" + gate

        def held():
            res["r"] = ng.get("/v1/ledgers/reconcile?" + query,
                              method="POST", headers=h)
        t = threading.Thread(target=held)
        t.start()
        try:
            wait_until(lambda: res or UP.holding(query), 30,
                       "the reconcile upstream")
            assert not res, (res["r"].status, res["r"].body)
            r = ng.get("/v1/ledgers/reconcile?ledger=L1", method="POST",
                       headers=h)
            assert r.status == 409, (r.status, r.body)
            assert json.loads(r.body)["violated-policies"] == ["ledger_lock"]
            r = ng.get("/v1/ledgers/reconcile?ledger=L2", method="POST",
                       headers=h)
            assert r.status == 429, (r.status, r.body)
            assert json.loads(r.body)["violated-policies"] == ["reconciles"]
        finally:
            UP.open_gate(gate)
            t.join()
        assert res["r"].status == 200, res["r"].status
        for i in range(5):
            r = ng.get("/v1/auth/token?user=lf-user&secret=bad",
                       method="POST")
            assert r.status == 401, (i, r.status, r.body)
        r = ng.get("/v1/auth/token?user=lf-user&secret=good", method="POST")
        assert r.status == 429, (r.status, r.body)
    finally:
        ng.stop()


def test_lease_released_with_the_answer(ng):
    """The lease goes with the answer's last byte, not with the request's
    pool: a mirror subrequest still running (3 s) kept the pool, and the
    ledger locked, after the client had its 200 (so did, for a moment,
    the access log and lingering close: a next reconcile from the same
    client got a 409 now and then)."""
    h = hdr("mk", tenant="mt")
    r = ng.get("/mirrored/reconcile?ledger=m", method="POST", headers=h)
    assert r.status == 200, r.status
    wait_until(lambda: UP.holding("ledger=m&hold=3000"), 10, "the mirror")
    r = ng.get("/v1/ledgers/reconcile?ledger=m", method="POST", headers=h)
    assert r.status == 200, (r.status, r.body[:120])


def trickle_holds_nothing(ng, tenant, n=10):
    """A reconcile whose body (n + 40 bytes) comes one byte at a time:
    between two of its first n bytes another reconcile of the same ledger
    is sent and answered.  The trickled one is decided once its body is
    in, so it holds neither the ledger's lock nor a lease meanwhile.
    (Before, it took both with its headers: each of the others got 409.)
    Each other is sent once the previous one's answer is in, so this also
    holds the module to releasing a lease before the answer's end: on a
    thread pool the release once went to a pool thread beside it, and
    about 1 other in 100 got 409 (hence n = 100 there)."""
    body = b"x" * (n + 40)
    s = ngxh.socket.create_connection(("127.0.0.1", ng.port), timeout=30)
    try:
        s.sendall(b"POST /v1/ledgers/reconcile?ledger=tr HTTP/1.1\r\n"
                  b"Host: t\r\nX-Tenant: %s\r\nX-Key: tk\r\nX-Tier: growth\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n" %
                  (tenant.encode(), len(body)))
        others = []
        for i in range(n):
            s.sendall(body[i:i + 1])
            others.append(ng.get("/v1/ledgers/reconcile?ledger=tr",
                                 method="POST",  # a key a burst (20)
                                 headers=hdr("tk2-%d" % (i // 10),
                                             tenant=tenant)).status)
        assert others == [200] * n, {i: st for i, st in enumerate(others)
                                     if st != 200}
        s.sendall(body[n:])
        f = s.makefile("rb")
        line = f.readline()
        assert line.startswith(b"HTTP/1.1 200"), line
    finally:
        s.close()


def test_trickled_body_holds_no_lock(ng):
    trickle_holds_nothing(ng, "trt")
    # The whole body reached the upstream (read by the module, kept for
    # proxy_pass): the last request with this query was the trickled one.
    assert UP.bodies.get("ledger=tr") == b"x" * 50, UP.bodies.get("ledger=tr")


def test_trickled_body_holds_no_lock_on_a_thread_pool(_ng):
    ng = ngxh.Nginx(MODULE, UP.port, workers=2, pool=True)
    try:
        ng.start()
        trickle_holds_nothing(ng, "trp", 100)
    finally:
        ng.stop()


def test_leases_of_a_killed_worker_expire(ng):
    def slow(ledger):
        try:
            ng.get("/v1/ledgers/reconcile?ledger=%s&hold=60000" % ledger,
                   method="POST", headers=hdr("kk", tenant="kt"), timeout=60)
        except Exception:
            pass  # its worker is killed
    ts = [threading.Thread(target=slow, args=(x,), daemon=True)
          for x in ("a", "b")]
    for x in ts:
        x.start()
    wait_until(lambda: all(UP.holding("ledger=%s&hold=60000" % x)
                           for x in ("a", "b")), 10, "two reconciles upstream")
    old = ng.workers()
    for w in old:
        os.kill(w, signal.SIGKILL)
    wait_until(lambda: len(set(ng.workers()) - set(old)) == len(old), 10,
               "respawned workers")
    t0 = time.monotonic()
    r = ng.get("/v1/ledgers/reconcile?ledger=c", method="POST",
               headers=hdr("kk", tenant="kt"))
    assert r.status == 429, "leases were not held: %d" % r.status
    # Freed by their TTL (8 s), never by a cleanup that did not run.
    r = wait_until(lambda: (lambda r: r if r.status == 200 else None)(
        ng.get("/v1/ledgers/reconcile?ledger=c", method="POST",
               headers=hdr("kk", tenant="kt"))), 20, "lease TTL")
    assert time.monotonic() - t0 < 20


def test_state_survives_test_reload_and_upgrade(ng):
    key = "reload-key"
    for _ in range(B):
        assert ng.get("/v1/r", headers=hdr(key)).status == 200
    assert ng.get("/v1/r", headers=hdr(key)).status == 429
    m0, _ = metrics(ng)
    # nginx -t parses the configuration and loads the module: no state lost.
    chk = ng.cmd("-t")
    assert chk.returncode == 0, chk.stderr
    assert ng.get("/v1/r", headers=hdr(key)).status == 429
    # Reload (HUP): new workers, same state, counters keep counting.
    old = set(ng.workers())
    os.kill(ng.master(), signal.SIGHUP)
    wait_until(lambda: not (set(ng.workers()) & old) and
               len(ng.workers()) == ng.nworkers(), 20, "reloaded workers")
    assert ng.get("/v1/r", headers=hdr(key)).status == 429
    m1, _ = metrics(ng)
    assert m1[ALLOW] >= m0[ALLOW] and \
        m1[THROTTLED] + m1[BOXED] > m0[THROTTLED] + m0[BOXED]
    # Binary upgrade (USR2 execs a new master, then the old one quits).
    oldm = ng.master()
    os.kill(oldm, signal.SIGUSR2)
    newm = wait_until(lambda: os.path.exists(ng.pidfile + ".oldbin") and
                      ng.master() != oldm and ng.master(), 20, "new master")
    wait_until(lambda: len(ng.workers(newm)) == ng.nworkers(), 20,
               "new master's workers")
    os.kill(oldm, signal.SIGQUIT)
    wait_until(lambda: not os.path.exists("/proc/%d" % oldm), 20,
               "old master to quit")
    assert ng.get("/v1/r", headers=hdr(key)).status == 429
    m2, _ = metrics(ng)
    assert m2[ALLOW] >= m1[ALLOW] and \
        m2[THROTTLED] + m2[BOXED] > m1[THROTTLED] + m1[BOXED]


def test_tenant_from_an_auth_request_authenticator(ng):
    """sluice_phase postaccess decides after auth_request: the tenant and
    tier come from the authenticator's answer (auth_request_set)."""
    rs = [ng.get("/authed/x", headers={"X-Key": "authed-key"})
          for _ in range(B + 3)]
    st = [r.status for r in rs]
    assert st == [200] * B + [429] * 3, st
    assert rs[0].h("ratelimit-limit") == str(B)
    # Rejected by the authenticator: 401, and nothing decided or counted.
    before, _ = metrics(ng)
    r = ng.get("/authed/x")
    assert r.status == 401 and r.h("x-sluice-status") is None, r.status
    after, _ = metrics(ng)
    assert after == before


def test_auth_lockout_from_upstream_401s(ng):
    locked_out_after_three_401s(ng, "/v1/auth/token")  # subject_failures


def locked_out_after_three_401s(ng, path):
    """Three failed sign-ins of alice (401 from the upstream, reported as
    each is answered: inline on shm) box her: her next attempt, with the
    good secret, is a 429 that never reaches the upstream.  Another user
    is not affected."""
    for i in range(3):
        r = ng.get(path + "?user=alice&secret=bad", method="POST")
        assert r.status == 401, (i, r.status, r.body)
    n = UP.hits.get(path, 0)
    r = ng.get(path + "?user=alice&secret=good", method="POST")
    assert r.status == 429, r.status
    assert r.h("x-penalty-box-status") == "Active-Lockout"
    assert UP.hits.get(path, 0) == n, "a locked-out attempt reached it"
    assert ng.get(path + "?user=bob&secret=good", method="POST").status == 200


def _first_429(ng, ip, user):
    """12 failed logins from one address; the number of the first 429."""
    for i in range(1, 13):
        r = ng.get("/v1/auth/token?user=%s&secret=bad" % user(i),
                   method="POST", headers={"X-Client-IP": ip})
        if r.status == 429:
            return i
        assert r.status == 401, (i, r.status)
    return None


def test_sign_in_without_a_subject_never_reaches_the_upstream(ng):
    """Issue 38, finding 1: 12 failures with an empty subject all reached
    the upstream (none counted for the subject).  The policy's sign-in
    route is scoped by `subject`: a sign-in naming none is refused before
    the upstream (400 problem+json naming the attribute), so nothing can
    be guessed without one; the address's own failures still trip its
    box (_first_429 with ip_failures = 3 in its own nginx below)."""
    hits = UP.hits.get("/v1/auth/token", 0)
    for _ in range(12):
        r = ng.get("/v1/auth/token?secret=bad", method="POST",
                   headers={"X-Client-IP": "192.0.2.11"})
        assert r.status == 400, (r.status, r.body)
        assert r.h("content-type") == "application/problem+json"
        assert "'subject'" in json.loads(r.body)["detail"], r.body
    assert UP.hits.get("/v1/auth/token", 0) == hits


def test_address_failures_over_many_subjects_trip_its_box(_ng):
    """ip_failures = 3: failures from one address, each for another
    subject (so no subject trips), box the address at the 4th attempt."""
    ng = ngxh.Nginx(MODULE, UP.port, workers=2, ip_failures=3).start()
    try:
        assert _first_429(ng, "192.0.2.10", lambda i: "mallory-%d" % i) == 4
    finally:
        ng.stop()


def test_sign_in_subject_from_the_body(_ng):
    """The spec's clients send their client id in the body: the sign-in
    location decides once the body is in (sluice_decide_after_body), so
    the failures of a subject named only there count for it (each from
    another address, so no address trips), and lock it out from
    anywhere."""
    ng = ngxh.Nginx(MODULE, UP.port, workers=2, ip_failures=3).start()
    try:
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        for i in range(3):  # auth.subject_failures = 3
            r = ng.get("/v1/auth/token", method="POST",
                       body="user=carol&secret=bad",
                       headers=dict(form, **{"X-Client-IP": "198.51.100.%d"
                                             % (i + 1)}))
            assert r.status == 401, (i, r.status)
        r = ng.get("/v1/auth/token?user=carol&secret=good", method="POST",
                   headers={"X-Client-IP": "198.51.100.99"})
        assert r.status == 429, r.status
        assert r.h("x-penalty-box-status") == "Active-Lockout"
    finally:
        ng.stop()


# The bindings' tests' one sign-in policy (tests/common/login.conf).
with open(os.path.join(ngxh.SRC, "tests", "common", "login.conf")) as f:
    LOGIN_POLICY = f.read()
LOGIN_LOCATION = ("location = /login { sluice on;"
                  " sluice_attr user $arg_user;"
                  " sluice_report result $status; proxy_pass http://up; }\n"
                  "    location /plain/ {")


def test_sluice_report_feeds_the_upstreams_status_to_the_policy(_ng):
    """sluice_report result $status: once the upstream answers, the
    request is decided again with result = its status, so a policy whose
    reported strikes are the statuses themselves (docs/policy.md's login
    recipe) locks a user out at the gateway: 200s are reported and strike
    nothing, the third 401 boxes the user, whose next attempt (a good
    password) never reaches the upstream; another user is untouched.  Both
    sluice_report and sluice_auth_failure_status on a location, or a
    VALUE without a variable, fail nginx -t."""
    ng = ngxh.Nginx(MODULE, UP.port, workers=2, policy_text=LOGIN_POLICY)
    try:
        ng.edit_conf("location /plain/ {", LOGIN_LOCATION)
        ng.start()
        for _ in range(4):
            r = ng.get("/login?user=alice&secret=good", method="POST")
            assert r.status == 200, (r.status, r.body)
        locked_out_after_three_401s(ng, "/login")
    finally:
        ng.stop()
    nonsense_fails_nginx_t(LOGIN_POLICY, LOGIN_LOCATION, [
        ("sluice_report result $status;",
         "sluice_report result $status; sluice_auth_failure_status 401;",
         "give one"),
        ("sluice_report result $status;", "sluice_report result 401;",
         "has no variable")])


def nonsense_fails_nginx_t(policy, location, cases):
    """Each (old, new, said): the configuration with `location` passes
    nginx -t; with `old` replaced by `new` it fails, saying `said`."""
    for old, new, said in cases:
        ng = ngxh.Nginx(MODULE, UP.port, policy_text=policy)
        try:
            ng.edit_conf("location /plain/ {", location)
            assert ng.cmd("-t").returncode == 0, ng.cmd("-t").stderr
            ng.edit_conf(old, new)
            r = ng.cmd("-t")
            assert r.returncode != 0 and said in r.stderr, (new, r.stderr)
        finally:
            ng.stop()


def test_shadow_admits_everything_and_counts(ng):
    before, _ = metrics(ng)
    rs = [ng.get("/shadow/x", headers=hdr("shadow-key")) for _ in range(2 * B)]
    assert all(r.status == 200 for r in rs), [r.status for r in rs]
    st = [r.h("x-sluice-status") for r in rs]
    assert st.count("PASSED") == B and st.count("REJECTED_DRY_RUN") == B, st
    after, _ = metrics(ng)
    assert after[SHADOW] - before[SHADOW] == B
    assert after[ALLOW] - before[ALLOW] == B


def test_stalled_redis_does_not_stall_other_locations(_ng, pool=True):
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-redis-")
    red = ngxh.Redis(tmp)
    ng = ngxh.Nginx(MODULE, UP.port, workers=1, pool=pool, period_ms=60000,
                    tenant_burst=1000,
                    store="redis:nodes=127.0.0.1:%d;timeout_ms=4000;"
                    "connect_timeout_ms=4000" % red.port)
    try:
        ng.start()
        r = ng.get("/v1/x", headers=hdr("redis-key"))
        assert r.status == 200 and r.h("ratelimit-limit") == str(B), \
            (r.status, ng.log())
        red.proc.send_signal(signal.SIGSTOP)
        done = threading.Event()
        got = {}

        def limited():
            got["r"] = ng.get("/v1/x", headers=hdr("redis-key"))
            done.set()
        t = threading.Thread(target=limited)
        t.start()
        # The limited request is waiting on Redis (it cannot finish while
        # Redis is stopped); the same single worker answers others.
        for _ in range(5):
            assert ng.get("/plain/y").status == 200
            assert ng.get("/metrics").status == 200
        assert not done.is_set(), "the limited request did not wait on Redis"
        red.proc.send_signal(signal.SIGCONT)
        t.join(30)
        assert done.is_set() and got["r"].status in (200, 503), got
    finally:
        ng.stop()
        red.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_redis_stopped_boxed_key_stays_out_and_host_keeps_its_share(
        _ng, pool=True):
    """4 workers on a Redis that is then stopped (SIGSTOP): a key boxed
    before the stop gets no admission (sluice_deny_cache: no store call),
    and the workers together admit a fresh key's degraded burst (a quarter
    of B), not 4 times it (sluice_degraded_store)."""
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-redis-")
    red = ngxh.Redis(tmp)
    ng = ngxh.Nginx(MODULE, UP.port, workers=4, pool=pool, period_ms=60000,
                    tenant_burst=1000,
                    store="redis:nodes=127.0.0.1:%d;timeout_ms=200" % red.port)
    stopped = False
    try:
        ng.start()
        for _ in range(B):
            assert ng.get("/v1/o", headers=hdr("boxed-key")).status == 200
        for _ in range(40):
            r = ng.get("/v1/o", headers=hdr("boxed-key"))
            if r.h("x-penalty-box-status") == "Active-Lockout":
                break
        assert r.h("x-penalty-box-status") == "Active-Lockout", ng.log()
        red.proc.send_signal(signal.SIGSTOP)
        stopped = True
        rs = [ng.get("/v1/o", headers=hdr("boxed-key")) for _ in range(6)]
        assert all(r.status == 429 and r.h("x-penalty-box-status") ==
                   "Active-Lockout" for r in rs), \
            [(r.status, r.h("x-penalty-box-status")) for r in rs]
        rs = [ng.get("/v1/o", headers=hdr("outage-key")) for _ in range(40)]
        ok = [r for r in rs if r.status == 200]
        assert len({r.h("x-worker") for r in rs}) >= 2
        # 25% of B, plus at most one refilled in the minute-long period.
        assert B // 4 <= len(ok) <= B // 4 + 1, (len(ok), ng.log())
    finally:
        if stopped:
            red.proc.send_signal(signal.SIGCONT)
        ng.stop()
        red.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_store_down_at_start_is_retried(_ng, pool=True):
    """A Redis that is down when the workers start: the store opens anyway
    (the redis backend connects lazily), standard requests run on the
    degraded limiter (a quarter of the key burst), other locations are
    untouched, and decisions go back to Redis once it answers."""
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-redis-")
    port = ngxh.free_port()
    ng = ngxh.Nginx(MODULE, UP.port, workers=2, pool=pool, period_ms=60000,
                    tenant_burst=1000,
                    store="redis:nodes=127.0.0.1:%d;timeout_ms=200" % port)
    red = None
    try:
        ng.start()
        r = ng.get("/v1/x", headers=hdr("k"))
        assert r.status == 200 and r.h("ratelimit-limit") == str(B // 4)
        assert ng.get("/plain/x").status == 200
        red = ngxh.Redis(tmp, port)
        r = wait_until(lambda: (lambda r: r if r.h("ratelimit-limit") == str(B)
                                else None)(ng.get("/v1/x", headers=hdr("k"))),
                       20, "decisions on Redis again")
        assert r.h("ratelimit-limit") == str(B)
    finally:
        ng.stop()
        if red:
            red.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# Redis on the event loop (no sluice_thread_pool): the decision in two
# halves on the worker's own connections.

def test_stalled_redis_on_the_event_loop_stalls_no_other_request(_ng):
    test_stalled_redis_does_not_stall_other_locations(_ng, pool=False)


def test_redis_stopped_on_the_event_loop_boxed_key_stays_out(_ng):
    test_redis_stopped_boxed_key_stays_out_and_host_keeps_its_share(
        _ng, pool=False)


def test_store_down_at_start_on_the_event_loop_is_retried(_ng):
    test_store_down_at_start_is_retried(_ng, pool=False)


def test_redis_on_the_event_loop_exact_burst_and_answers(_ng):
    """4 workers deciding on one Redis through the halves: exactly the
    burst admitted across them, the library's headers and problem+json,
    a box after the strikes, and the same counts the metrics show; a
    request that the store does not answer in time (a stopped Redis, 200
    ms) runs on the degraded limiter, a fail-closed class answers 503."""
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-redis-")
    red = ngxh.Redis(tmp)
    ng = ngxh.Nginx(MODULE, UP.port, workers=4, pool=False, period_ms=60000,
                    tenant_burst=1000,
                    store="redis:nodes=127.0.0.1:%d;timeout_ms=200" % red.port)
    stopped = False
    try:
        ng.start()
        before, _ = metrics(ng)
        rs = burst(ng, "/v1/items", "ev-key", 2 * B)
        ok = [r for r in rs if r.status == 200]
        denied = [r for r in rs if r.status == 429]
        assert len(ok) == B, ("admitted", len(ok), ng.log())
        assert len(denied) == B, [r.status for r in rs]
        assert len({r.h("x-worker") for r in rs}) >= 2
        rem = sorted(int(r.h("ratelimit-remaining")) for r in ok)
        assert all(i - 1 <= x <= i for i, x in enumerate(rem)), rem
        d = [r for r in denied if json.loads(r.body)["type"].endswith(
            "/rate-limit-exceeded")][0]
        assert d.h("content-type") == "application/problem+json"
        assert d.h("ratelimit-limit") == str(B)
        assert d.h("x-sluice-status") == "REJECTED"
        boxed = [r for r in denied if r.h("x-penalty-box-status") ==
                 "Active-Lockout"]
        assert boxed, "strikes past the Retry-After trip the box"
        after, _ = metrics(ng)
        assert after[ALLOW] - before[ALLOW] == B
        red.proc.send_signal(signal.SIGSTOP)
        stopped = True
        r = ng.get("/v1/items", headers=hdr("ev-fresh"))
        assert r.status == 200 and r.h("ratelimit-limit") == str(B // 4), \
            (r.status, r.h("ratelimit-limit"), ng.log())
        r = ng.get("/v1/ledgers/reconcile?ledger=L1", method="POST",
                   headers=hdr("ev-fresh"), body=b"{}")
        assert r.status == 503, (r.status, ng.log())
        assert ng.get("/plain/x").status == 200
    finally:
        if stopped:
            red.proc.send_signal(signal.SIGCONT)
        ng.stop()
        red.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def redis_connections(port):
    """Connections a Redis server has accepted so far (INFO stats)."""
    with ngxh.socket.create_connection(("127.0.0.1", port), 5) as s:
        s.sendall(b"INFO stats\r\n")
        d = b""
        while b"total_connections_received:" not in d or \
                not d.split(b"total_connections_received:")[1].count(b"\r"):
            d += s.recv(65536)
    return int(d.split(b"total_connections_received:")[1].split(b"\r")[0])


def test_redis_on_the_event_loop_keeps_its_connection(_ng):
    """One worker, 60 decisions one after another: one connection to
    Redis carries them all (a link whose reply was whole waits for the next
    call; before, epoll's greedy reads left it looking readable and every
    decision connected anew)."""
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-redis-")
    red = ngxh.Redis(tmp)
    ng = ngxh.Nginx(MODULE, UP.port, workers=1, pool=False, period_ms=60000,
                    tenant_burst=1000,
                    store="redis:nodes=127.0.0.1:%d;timeout_ms=2000" % red.port)
    try:
        ng.start()
        before = redis_connections(red.port)
        for i in range(60):
            r = ng.get("/v1/items", headers=hdr("conn-%d" % i))
            assert r.status == 200, (r.status, ng.log())
        # this check's own connection, and the worker's one
        assert redis_connections(red.port) - before <= 2, \
            redis_connections(red.port) - before
    finally:
        ng.stop()
        red.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_leases_on_the_event_loop(_ng):
    """Leases on Redis without a thread pool: taken and released in
    halves on the event loop (the release with the answer's last byte,
    or when the upstream answers), so the next reconcile of the ledger
    finds it free; a trickled body holds nothing meanwhile."""
    tmp = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-redis-")
    red = ngxh.Redis(tmp)
    ng = ngxh.Nginx(MODULE, UP.port, workers=2, pool=False, period_ms=60000,
                    tenant_burst=1000,
                    store="redis:nodes=127.0.0.1:%d;timeout_ms=2000" % red.port)
    try:
        ng.start()
        test_leases_released_when_the_upstream_answers(ng)
        test_lease_released_with_the_answer(ng)
        trickle_holds_nothing(ng, "tre", 30)
    finally:
        ng.stop()
        red.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def rcli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=10).stdout


def moved_count(port):
    """MOVED replies a Redis node has given (INFO errorstats)."""
    for line in rcli(port, "INFO", "errorstats").splitlines():
        if line.startswith("errorstat_MOVED:count="):
            return int(line.split("=", 1)[1].split(",")[0])
    return 0


def move_slot(src, dst, slot):
    """Move a slot and its keys from master src to master dst, the way
    redis-cli --cluster reshard does, so a client with the old slot map
    gets MOVED for it."""
    sid = rcli(src, "CLUSTER", "MYID").strip()
    did = rcli(dst, "CLUSTER", "MYID").strip()
    rcli(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", sid)
    rcli(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", did)
    keys = rcli(src, "CLUSTER", "GETKEYSINSLOT", slot, 1000).split()
    if keys:
        out = rcli(src, "MIGRATE", "127.0.0.1", dst, "", 0, 5000,
                          "KEYS", *keys)
        assert "OK" in out, out
    for p in (src, dst):
        rcli(p, "CLUSTER", "SETSLOT", slot, "NODE", did)


def cluster_on_the_event_loop_and_the_pool(_ng):
    """A 3-master Redis Cluster (run by tests/redis/harness.py): the
    decisions in two halves on the event loop, and on the thread pool.
    Tenants whose records live on different masters each get exactly the
    key's burst across 4 workers (API keys are global: one per tenant); then the slot of one tenant's records
    moves to another master with its keys, and the workers, whose slot
    maps still name the old one, follow the MOVED: the next request is
    decided with the state the burst left (still exhausted, not reset:
    strikes are out of reach, so no box answers for the bucket), and a
    fresh key of that tenant is admitted by the store, not the degraded
    limiter."""
    ports = [int(n.rsplit(":", 1)[1])
             for n in os.environ["SLUICE_REDIS_NODES"].split(",")]
    masters = [p for p in ports
               if "role:master" in rcli(p, "INFO", "replication")]
    seeds = ",".join("127.0.0.1:%d" % p for p in masters[:2])
    for pool in (False, True):
        tag = "pool" if pool else "loop"
        # Only this round's records: the slot that moves below must hold
        # some of this round's tenants (a key name does not say whose).
        for p in masters:
            rcli(p, "FLUSHALL")
        # A token comes back every 10 min: none during the test.  No box
        # (strikes out of reach): a 429 after the move is the bucket's.
        ng = ngxh.Nginx(MODULE, UP.port, workers=4, pool=pool,
                        period_ms=600000, tenant_burst=1000, strikes=100000,
                        store="redis:nodes=%s;timeout_ms=2000" % seeds)
        try:
            ng.start()
            for i in range(12):
                tenant = "%s-t%d" % (tag, i)
                out = [None] * (2 * B)

                def one(j, tenant=tenant, out=out):
                    out[j] = ng.get("/v1/items", headers=hdr(
                        "k-" + tenant, tenant=tenant))
                ts = [threading.Thread(target=one, args=(j,))
                      for j in range(2 * B)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                ok = sum(1 for r in out if r.status == 200)
                assert ok == B, (tag, tenant, ok, [r.status for r in out],
                                 [r.body for r in out][:2], ng.log())
                assert all(r.status in (200, 429) for r in out)
            # records spread over the masters
            held = [int(rcli(p, "DBSIZE").strip() or 0)
                    for p in masters]
            assert sum(1 for n in held if n > 0) >= 2, held
            # the slot of some tenant's records moves, with its keys (every
            # record here is a tenant's: hash-tagged by it)
            src = slot = None
            for p in masters:
                keys = rcli(p, "--scan", "--pattern", "*{*").split()
                if keys:
                    src = p
                    slot = int(rcli(p, "CLUSTER", "KEYSLOT",
                                           keys[0]).strip())
                    break
            assert src is not None, "no bucket records on any master"
            dst = [p for p in masters if p != src][0]
            # every record of every tenant in that slot moves together
            move_slot(src, dst, slot)
            moved = rcli(dst, "CLUSTER", "COUNTKEYSINSLOT", slot)
            assert int(moved.strip()) > 0, moved
            # each tenant whose records were in the moved slot keeps its
            # state: no tenant gets a fresh burst after the move
            moved_before = moved_count(src)
            for i in range(12):
                t = "%s-t%d" % (tag, i)
                r = ng.get("/v1/items", headers=hdr("k-" + t, tenant=t))
                assert r.status == 429 and json.loads(r.body)["type"].endswith(
                    "/rate-limit-exceeded"), (tag, t, r.status, r.body)
                r = ng.get("/v1/items", headers=hdr("fresh-" + t, tenant=t))
                # the store's answer, not the degraded limiter's (B / 4)
                assert r.status == 200 and r.h("ratelimit-limit") == str(B), \
                    (tag, t, r.status, r.h("ratelimit-limit"), ng.log())
            # the workers were sent there by MOVED (their maps were old)
            assert moved_count(src) > moved_before, (moved_before, ng.log())
        finally:
            ng.stop()


def test_store_that_does_not_open_answers_problem_503(_ng):
    """A store the workers cannot open (here an LMDB directory under
    /dev/null): enforcing locations answer the library's fail-closed 503,
    problem+json with Retry-After (it was nginx's text/html page), shadow
    locations let requests through (a dry run refused them), and other
    locations are untouched."""
    ng = ngxh.Nginx(MODULE, UP.port, workers=1,
                    store="lmdb:path=/dev/null/sluice")
    try:
        ng.start()
        for _ in range(2):  # the first open and a retry by a request
            r = ng.get("/v1/x", headers=hdr("k"))
            assert r.status == 503, r.status
            assert r.h("content-type") == "application/problem+json"
            assert int(r.h("retry-after")) >= 1
            assert json.loads(r.body)["type"].endswith("/service-unavailable")
            assert r.h("x-sluice-status") == "REJECTED"
            assert ng.get("/v1/x", method="HEAD",
                          headers=hdr("k")).status == 503
            assert ng.get("/shadow/x", headers=hdr("k")).status == 200
            assert ng.get("/plain/x").status == 200
            time.sleep(1.1)
    finally:
        ng.stop()


def test_reload_with_other_tiers_keeps_enforcing(_ng):
    """The counters segment was made for the default tiers; a reload
    names other tiers (a tier names the counters' rows).  The new workers
    keep enforcing (with their own counters, and say so) instead of
    refusing service."""
    ng = ngxh.Nginx(MODULE, UP.port, workers=2).start()
    try:
        assert ng.get("/v1/x", headers=hdr("k")).status == 200
        pol = os.path.join(ng.dir, "policy.conf")
        with open(pol) as f:
            text = f.read()
        with open(pol, "w") as f:
            f.write(text + "tiers = [ \"t2\" ];\n")
        old = set(ng.workers())
        os.kill(ng.master(), signal.SIGHUP)
        wait_until(lambda: not (set(ng.workers()) & old) and
                   len(ng.workers()) == 2, 20, "reloaded workers")
        rs = [ng.get("/v1/x", headers=hdr("k2", tier="t2"))
              for _ in range(B + 1)]
        assert [r.status for r in rs] == [200] * B + [429], \
            [r.status for r in rs]
        assert "counts on its own" in ng.log(), ng.log()
    finally:
        ng.stop()


def test_declared_limits_take_sluice_attr(_ng):
    """A policy file's declared limit scoped by an attribute the location
    names with sluice_attr: each user has its own budget, the refusal names
    the limit in its problem body, and a lease of a declared concurrency
    limit goes with the answer (a second request after the first one's
    answer is admitted), inline and from a thread pool (whose release job
    copies the attributes)."""
    for pool in (False, True):
        declared_limits_take_sluice_attr(pool)


GH_POLICY = """
attributes = [ "user" ];
limits = {
  per_user = { algorithm = "fixed_window"; scope = [ "user" ];
               limit = 3; window_ms = 3600000; unit = "requests"; };
  one_at_a_time = { algorithm = "concurrency"; scope = [ "user" ];
                    max = 1; ttl_ms = 600000; };
  unused = { algorithm = "cap"; scope = [ "user" ]; limit = 1;
             window_ms = 1000; };
  tokens = { algorithm = "gcra"; scope = [ "user" ]; rate = 1000;
             period_ms = 60000; burst = 1000; unit = "tokens"; };
};
routes = (
  { method = "POST"; route = "/gh/ai"; limits = ( "per_user",
    { limit = "tokens"; cost = 600; } ); },
  { method = "*"; route = "/gh/*"; limits = ( "per_user" ); },
  { method = "*"; route = "/jobs/*"; limits = ( "one_at_a_time" ); }
);
"""


def declared_limits_take_sluice_attr(pool):
    ng = ngxh.Nginx(MODULE, UP.port, workers=2, pool=pool,
                    policy_text=GH_POLICY)
    try:
        ng.edit_conf("location /plain/ {",
                     "location /gh/ { sluice on; sluice_attr user $http_x_user;"
                     " proxy_pass http://up; }\n"
                     "    location /jobs/ { sluice on;"
                     " sluice_attr user $http_x_user; proxy_pass http://up; }"
                     "\n    location /plain/ {")
        # The structured form lists every limit of a route, in its order.
        ng.edit_conf("sluice_store ", "sluice_header_form both;\n  "
                     "sluice_store ")
        ng.start()
        r = ng.get("/gh/ai", method="POST", headers={"X-User": "ai"})
        assert r.status == 200, (r.status, r.body)
        assert r.headers.get("ratelimit-policy") == (
            '"per_user";q=3;qu="requests";w=3600, '
            '"tokens";q=1000;qu="tokens";w=60'), r.headers
        assert r.headers.get("ratelimit").startswith('"tokens";r=400;'), \
            r.headers
        r = ng.get("/gh/ai", method="POST", headers={"X-User": "ai"})
        assert r.status == 429, (r.status, r.body)
        body = json.loads(r.body)
        assert body["violated-policies"] == ["tokens"], body
        assert body["detail"].startswith(
            "Limit 'tokens' exhausted (1000 tokens per minute). POST /gh/ai"
            " costs 600 tokens."), body
        assert r.headers.get("ratelimit-limit") == "1000", r.headers
        rs = [ng.get("/gh/x", headers={"X-User": "octo"}) for _ in range(4)]
        assert [r.status for r in rs] == [200, 200, 200, 429], \
            [r.status for r in rs]
        body = json.loads(rs[3].body)
        assert body["violated-policies"] == ["per_user"], body
        assert "Limit 'per_user' exhausted" in body["detail"], body
        assert ng.get("/gh/x", headers={"X-User": "hubot"}).status == 200
        assert "limits.unused: no route applies it" in ng.log(), ng.log()
        for _ in range(3):  # each lease released with its answer
            r = ng.get("/jobs/x", headers={"X-User": "octo"})
            assert r.status == 200, (r.status, r.body)
    finally:
        ng.stop()


SETTLE_POLICY = """
attributes = [ "user", "tokens" ];
limits = {
  tokens = { algorithm = "gcra"; scope = [ "user" ];
             rate = 1; period_ms = 3600000; burst = 300; unit = "tokens"; };
};
routes = (
  { method = "*"; route = "/llm/*";
    limits = ( { limit = "tokens"; cost = { attr = "tokens"; max = 300; }; } ); }
);
"""
SETTLE_LOCATION = ("location /llm/ { sluice on; sluice_attr user $http_x_user;"
                   " sluice_attr tokens $http_x_tokens;"
                   " sluice_settle tokens $upstream_http_x_tokens_used;"
                   " proxy_pass http://up; }\n    location /plain/ {")


def test_sluice_settle_from_the_upstream_answer(_ng):
    """sluice_settle reads the tokens the upstream reports (X-Tokens-Used)
    in the log phase and settles the request's charge (the bucket refills 1
    token an hour): 300 charged and 0 used come back, so 1 more fits
    (refused until the refund is in); 1 charged and 300 used leave the
    bucket in debt, so requests are refused once the charge is in; an
    upstream without the header leaves the charge, and one whose header is
    no number changes nothing.  On shm (inline), and on Redis through the
    halves on the event loop and on the thread pool; the test waits for
    what each settle makes true, not for time."""
    for store in ("shm", "redis", "redis-pool"):
        sluice_settle_from_the_upstream_answer(store)


def sluice_settle_from_the_upstream_answer(store):
    tmp = red = None
    kw = {}
    if store.startswith("redis"):
        tmp = ngxh.tempfile.mkdtemp(prefix="sluice-ngx-settle-")
        red = ngxh.Redis(tmp)
        # Redis decides exactly what fits its scripts (docs/redis.md)
        kw = {"pool": store == "redis-pool",
              "store": "redis:nodes=127.0.0.1:%d;timeout_ms=2000" % red.port}
    ng = ngxh.Nginx(MODULE, UP.port, workers=2, policy_text=SETTLE_POLICY,
                    **kw)

    def llm(user, tokens, used=None):
        q = "" if used is None else "?used=" + used
        return ng.get("/llm/x" + q, headers={"X-User": user,
                                              "X-Tokens": str(tokens)})
    try:
        ng.edit_conf("location /plain/ {", SETTLE_LOCATION)
        ng.start()
        r = llm("ann", 300, "0")
        assert r.status == 200, (store, r.status, r.body, ng.log())
        # 1 token (reported as used: no change) fits once the 300 are back
        ngxh.wait_until(lambda: llm("ann", 1, "1").status == 200, 10,
                        "the refund (%s)" % store)
        assert llm("ann", 1, "300").status == 200  # 299 more: in debt
        ngxh.wait_until(lambda: llm("ann", 1).status == 429, 10,
                        "the charge (%s)" % store)
        r = llm("ann", 1)
        assert r.status == 429, (r.status, r.body)
        assert json.loads(r.body)["violated-policies"] == ["tokens"], r.body
        # No header: the charge stays.  A header that is no number: refused
        # by the library (in the log phase, before any store call).
        assert llm("bob", 100).status == 200
        assert llm("bob", 200, "lots").status == 200
        r = llm("bob", 1)
        assert r.status == 429, (store, r.status, ng.log())
    finally:
        ng.stop()
        if red:
            red.stop()
            shutil.rmtree(tmp, ignore_errors=True)


def test_sluice_settle_nonsense_fails_nginx_t(_ng):
    cases = [
        ("sluice_settle tokens $upstream_http_x_tokens_used;",
         "sluice_settle tokens $upstream_http_x_tokens_used;"
         " sluice_settle tokens $upstream_http_x_other;", "is duplicate"),
        ("sluice_settle tokens $", "sluice_settle to-kens $",
         "is no attribute name"),
        ("sluice_settle tokens $upstream_http_x_tokens_used;",
         "sluice_settle tokens 42;", "has no variable"),
        ("sluice_settle tokens $upstream_http_x_tokens_used;",
         "sluice_settle tokens;", "invalid number of arguments"),
    ]
    nonsense_fails_nginx_t(SETTLE_POLICY, SETTLE_LOCATION, cases)


def test_bad_policy_fails_nginx_t(_ng):
    ng = ngxh.Nginx(MODULE, UP.port, burst=0)  # burst 0 is invalid
    try:
        r = ng.cmd("-t")
        assert r.returncode != 0
        assert "sluice_policy" in r.stderr and "burst" in r.stderr, r.stderr
    finally:
        ng.stop()
    # Redis without a thread pool decides on the event loop, over plain
    # TCP to IP addresses; a password (TLS, a socket, a database) needs
    # the pool.
    ng = ngxh.Nginx(MODULE, UP.port, store="redis:nodes=127.0.0.1:1")
    try:
        r = ng.cmd("-t")
        assert r.returncode == 0, r.stderr
    finally:
        ng.stop()
    ng = ngxh.Nginx(MODULE, UP.port,
                    store="redis:nodes=127.0.0.1:1;password=pw")
    try:
        r = ng.cmd("-t")
        assert r.returncode != 0 and "sluice_thread_pool" in r.stderr \
            and "password" in r.stderr, r.stderr
    finally:
        ng.stop()
    # What a worker would refuse when it opens (and then answer 503 on
    # every sluice location) fails nginx -t, in the library's words.
    cases = [
        ("sluice_secret 00112233445566778899aabbccddeeff;",
         "sluice_secret 00000000000000000000000000000000;",
         "secret: must not be all zero"),
        ("sluice_store \"", "sluice_store \"bogus:x\"; #",
         "unknown backend 'bogus'"),
        ("sluice_store \"", "sluice_store \"shm:name=/x;capacty=9\"; #",
         "capacty"),
        ("sluice_problem_base https://api.example.test/errors/;",
         "sluice_problem_base \"not a uri\";", "sluice_problem_base"),
        ("sluice_counters \"", "sluice_counters \"bogus\"; #",
         "counters: expected shm:name=/NAME"),
        ("sluice_deny_cache \"", "sluice_deny_cache \"shm:name=/d;slots=0\"; #",
         "deny_cache: slots must be"),
        ("sluice_degraded_store \"",
         "sluice_degraded_store \"shm:name=/d;capcity=5\"; #", "capcity"),
    ]
    for old, new, said in cases:
        ng = ngxh.Nginx(MODULE, UP.port)
        try:
            ng.edit_conf(old, new)
            r = ng.cmd("-t")
            assert r.returncode != 0 and said in r.stderr, (new, r.stderr)
        finally:
            ng.stop()


ALERTS_AT = "sluice_secret 00112233445566778899aabbccddeeff;"


def test_alerts_posted_by_the_workers(_ng):
    """sluice_alert: a box trip reaches a Slack receiver from whichever
    worker tripped it, each worker with its own spool; the metrics location
    shows the sink's per-destination counters."""
    posts = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            posts.append((self.path, self.rfile.read(n)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    rx = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=rx.serve_forever, daemon=True).start()
    ng = ngxh.Nginx(MODULE, UP.port, workers=2)
    try:
        ng.edit_conf(ALERTS_AT, ALERTS_AT + (
            "\n  sluice_alert slack http://127.0.0.1:%d/slack events=box_trip"
            " name=ops;\n  sluice_alert_allow loopback;"
            "\n  sluice_alert_spool %s/alerts;" % (rx.server_address[1],
                                                   ng.dir)))
        ng.start()
        key = "alert-key"
        for _ in range(B + 40):
            r = ng.get("/v1/p", headers=hdr(key))
            if r.h("x-penalty-box-status") == "Active-Lockout":
                break
        assert r.h("x-penalty-box-status") == "Active-Lockout"
        wait_until(lambda: posts, 10, "the Slack post")
        path, body = posts[0]
        m = json.loads(body)
        assert path == "/slack", path
        assert "box_trip" in m["text"] and m["blocks"], m
        assert os.path.exists(os.path.join(ng.dir, "alerts.0")) and \
            os.path.exists(os.path.join(ng.dir, "alerts.1")), \
            os.listdir(ng.dir)
        _, text = metrics(ng)
        assert 'sluice_webhook_deliveries_total{dest="ops",format="slack",' \
            'result="sent"}' in text, text
    finally:
        ng.stop()
        rx.shutdown()
    # What the library refuses fails nginx -t, in its words.
    cases = [
        ("sluice_alert slack http://169.254.169.254/latest/;", "link-local"),
        ("sluice_alert slack http://127.0.0.1:1/x;", "loopback"),
        ("sluice_alert teams https://hooks.example.com/x;", "unknown format"),
        ("sluice_alert pagerduty https://events.pagerduty.com/v2/enqueue;",
         "routing_key"),
        ("sluice_alert slack https://hooks.example.com/x colour=red;",
         "colour=red"),
    ]
    for line, said in cases:
        ng = ngxh.Nginx(MODULE, UP.port)
        try:
            ng.edit_conf(ALERTS_AT, ALERTS_AT + "\n  " + line)
            r = ng.cmd("-t")
            assert r.returncode != 0 and said in r.stderr, (line, r.stderr)
        finally:
            ng.stop()


def main():
    global MODULE, UP
    MODULE = sys.argv[1] if len(sys.argv) > 1 else None
    if MODULE == "--skip":
        print("SKIP: " + " ".join(sys.argv[2:]))
        return ngxh.SKIP
    why = ngxh.skip_reason(MODULE)
    if why:
        print("SKIP: " + why)
        return ngxh.SKIP
    names = sys.argv[2:]
    # Under tests/redis/harness.py --mode cluster (the nginx-cluster
    # test), the cluster tests run, and only they.
    prefix = ("cluster_" if os.environ.get("SLUICE_REDIS_MODE") == "cluster"
              else "test_")
    tests = [(n, f) for n, f in sorted(globals().items())
             if n.startswith(prefix) and (not names or n in names)]
    if not shutil.which("redis-server"):
        print("SKIP test_stalled_redis...: redis-server is not installed")
        tests = [t for t in tests if "redis" not in t[0]]
    UP = ngxh.Upstream()
    ng = ngxh.Nginx(MODULE, UP.port).start()
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
    print("%d of %d failed" % (failed, len(tests)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
