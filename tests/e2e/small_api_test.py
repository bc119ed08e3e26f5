#!/usr/bin/env python3
"""examples/small-api over real HTTP on 127.0.0.1: a known key is served
200 with RateLimit headers, counting down, until its bucket is empty; then
the library's 429 with Retry-After, RateLimit headers and a problem+json
body; an unknown key is 401 and a route the policy has no rule for is 400,
neither echoing the key.  usage: small_api_test.py SMALL_API"""
import http.client
import json
import os
import subprocess
import sys
import tempfile

from ledgerh import check, summary  # counted checks, as the other suites


def get(conn, path, key):
    conn.request("GET", path, headers={"Authorization": "Bearer " + key})
    r = conn.getresponse()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()


srv = subprocess.Popen([sys.argv[1], "--port", "0"], stdout=subprocess.PIPE,
                       text=True)
try:
    line = srv.stdout.readline()
    check("prints where it listens", True,
          line.startswith("listening on 127.0.0.1:"))
    port = int(line.rsplit(":", 1)[1])
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    # The sandbox tier's key bucket: burst 300, 5 points a second.
    statuses, remaining = [], []
    for _ in range(1000):
        st, h, body = get(c, "/v1/ledgers/main/entries", "sk_demo_sandbox")
        statuses.append(st)
        if st != 200:
            break
        remaining.append(int(h.get("ratelimit-remaining", -1)))
        check_first = len(remaining) == 1
        if check_first:
            check("200: RateLimit-Limit", "300", h.get("ratelimit-limit"))
            check("200: the API's own body", b'{"ok":true}\n', body)
    check("at least the burst is served", True, len(remaining) >= 300)
    check("RateLimit-Remaining counts down", True,
          remaining[0] == 299 and all(b <= a + 5 for a, b in
                                      zip(remaining, remaining[1:])))
    check("then 429", 429, st)
    check("429: Content-Type", "application/problem+json",
          h.get("content-type"))
    check("429: Retry-After at least 1 s", True,
          int(h.get("retry-after", "0")) >= 1)
    check("429: RateLimit headers", ("300", "0"),
          (h.get("ratelimit-limit"), h.get("ratelimit-remaining")))
    p = json.loads(body)
    check("429: problem type and status",
          ("https://api.example.com/errors/rate-limit-exceeded", 429),
          (p.get("type"), p.get("status")))
    check("429: the route in the detail", True,
          "/v1/ledgers/main/entries" in p.get("detail", ""))

    # Another tenant's key is not touched by the first one's bucket.
    st, h, _ = get(c, "/v1/ledgers/main/entries", "sk_demo_growth")
    check("another key: 200 with its own limit", (200, "1500"),
          (st, h.get("ratelimit-limit")))

    st, h, body = get(c, "/v1/x", "sk_not_a_key")
    check("unknown key: 401 problem+json", (401, "application/problem+json"),
          (st, h.get("content-type")))
    check("unknown key: not echoed", False, b"sk_not_a_key" in body)
    st, h, body = get(c, "/health", "sk_demo_growth")
    check("no route: 400 naming the field", (400, True),
          (st, b"'route'" in body))
    check("no route: key not echoed", False, b"sk_demo_growth" in body)
finally:
    srv.terminate()
    check("stops on SIGTERM", 0, srv.wait(10))

# A policy file of declared limits (docs/policy.md): the same rendering
# names the limit that refused, in its own unit, in the legacy headers and
# the body.
conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
conf.write("""
limits = {
  per_tenant = { algorithm = "fixed_window"; scope = [ "tenant" ];
                 limit = 100; window_ms = 3600000; unit = "requests"; };
  reports = { algorithm = "fixed_window"; scope = [ "tenant" ];
              limit = 2; window_ms = 60000; unit = "reports"; };
};
routes = ( { method = "GET"; route = "/v1/reports/*";
             limits = ( "per_tenant", "reports" ); } );
""")
conf.close()
srv = subprocess.Popen([sys.argv[1], "--port", "0", "--config", conf.name],
                       stdout=subprocess.PIPE, text=True)
try:
    port = int(srv.stdout.readline().rsplit(":", 1)[1])
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    got = [get(c, "/v1/reports/r1", "sk_demo_growth") for _ in range(3)]
    check("declared: two admitted, then 429", [200, 200, 429],
          [g[0] for g in got])
    st, h, body = got[2]
    check("declared: the legacy headers are the refusing limit's",
          ("2;w=60", "2", "0"),
          (h.get("ratelimit-policy"), h.get("ratelimit-limit"),
           h.get("ratelimit-remaining")))
    p = json.loads(body)
    check("declared: violated-policies", ["reports"],
          p.get("violated-policies"))
    check("declared: the detail speaks of the limit", True,
          p.get("detail", "").startswith(
              "Limit 'reports' exhausted (2 reports per minute). "
              "GET /v1/reports/r1 costs 1 report."))
finally:
    srv.terminate()
    srv.wait(10)
    os.unlink(conf.name)
sys.exit(summary())
