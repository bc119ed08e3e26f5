#!/usr/bin/env python3
"""Write a synthetic request log for `sluice replay --policy` (deterministic).

usage: gen_policy_log.py N_REQUESTS [TENANTS]  > log.csv

Tenants of the three default tiers with 3 keys each send mostly standard
CRUD traffic (GET/POST entries) at a few requests per second, with a
reconcile, an export and a job poll now and then; five growth keys hammer
at ~200 requests/s (and would be boxed); 2% of lines are auth attempts, some failing.
"""
import random
import sys

n = int(sys.argv[1])
tenants = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
rnd = random.Random(20261014)
tiers = ["sandbox", "growth", "enterprise"]
out = sys.stdout
w = out.write
w("t_ms,tenant,key,tier,method,route,ip\n")
t = 0
# about 20 000 requests per second of log time
for i in range(n):
    if i % 20 == 0:
        t += 1
    r = rnd.random()
    ten = rnd.randrange(tenants)
    tier = tiers[ten % 3]
    if r < 0.02:
        sub = "user%d" % rnd.randrange(5000)
        oc = "bad_secret" if rnd.random() < 0.2 else "ok"
        w("%d,,,,POST,/v1/auth/token,10.%d.%d.%d,%s,%s\n" % (
            t, ten % 256, ten // 256 % 256, rnd.randrange(4), sub, oc))
        continue
    if rnd.random() < 0.05:
        # five hammering keys: ~200 requests/s each, far over their bucket
        ten = 1 + 3 * rnd.randrange(5)
        tier = tiers[ten % 3]
        key = "t%d-k0" % ten
    else:
        key = "t%d-k%d" % (ten, rnd.randrange(3))
    if r < 0.021:
        w("%d,t%d,%s,%s,POST,/v1/ledgers/reconcile,192.0.2.1,L%d\n" % (
            t, ten, key, tier, rnd.randrange(4)))
        continue
    if r < 0.022:
        route, m = "/v1/reports/audit-export", "GET"
    elif r < 0.05:
        route, m = "/v1/jobs/job_%d" % rnd.randrange(100), "GET"
    elif r < 0.5:
        route, m = "/v1/ledgers/L%d/entries" % rnd.randrange(4), "POST"
    else:
        route, m = "/v1/ledgers/L%d/entries" % rnd.randrange(4), "GET"
    w("%d,t%d,%s,%s,%s,%s,192.0.2.%d\n" % (t, ten, key, tier, m, route,
                                          rnd.randrange(250)))
