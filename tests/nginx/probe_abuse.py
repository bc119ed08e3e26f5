#!/usr/bin/env python3
"""The reliability probe of issue 38 (findings 1 and 2), kept runnable:
a real nginx with the module on 127.0.0.1, a small upstream, nothing
leaves the loopback, every step bounded (a few hundred requests, 30 s
timeouts).

  python3 tests/nginx/probe_abuse.py build/nginx/ngx_http_sluice_module.so

1. 12 failed POST /v1/auth/token with an empty subject from one address
   (ip_failures = 3): how many reached the upstream (a counted failure
   stops the 4th; the policy's sign-in route, scoped by `subject`,
   refuses a sign-in without one before the upstream).
2. 530 failures from one address, each a new client id, on a 1,024-slot
   shm table (capacity 768; ip_failures = 1000 as in tests/nginx, so the
   address is not boxed and every failure reaches the upstream), then new
   tenants' reconciles and logins: how many were not admitted (503: the
   table full of the strangers' records).

Prints what it saw and exits 1 when a finding reproduces, 0 when neither
does, 77 when nginx or the module is missing."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ngxh  # noqa: E402


def empty_subject(ng):
    reached = 0
    for _ in range(12):
        r = ng.get("/v1/auth/token?user=&secret=bad", method="POST",
                   headers={"X-Client-IP": "192.0.2.77"})
        reached += r.status == 401
    return reached


def strangers_fill_the_table(ng):
    for i in range(530):
        ng.get("/v1/auth/token?user=client-%d&secret=bad" % i, method="POST",
               headers={"X-Client-IP": "192.0.2.66"})
    unavailable = 0
    for i in range(20):
        h = {"X-Tenant": "new-%d" % i, "X-Key": "k", "X-Tier": ngxh.TIER}
        r = ng.get("/v1/ledgers/reconcile?ledger=l%d" % i, method="POST",
                   headers=h)
        unavailable += r.status != 200  # 503 when the table is full
        r = ng.get("/v1/auth/token?user=new-%d&secret=good" % i,
                   method="POST", headers={"X-Client-IP": "198.51.100.%d"
                                           % (i + 1)})
        unavailable += r.status != 200
    return unavailable


def main():
    module = sys.argv[1] if len(sys.argv) > 1 else None
    why = ngxh.skip_reason(module)
    if why:
        print("SKIP: " + why)
        return ngxh.SKIP
    up = ngxh.Upstream()
    shm = "/sluice-probe-%d" % os.getpid()
    try:
        ng = ngxh.Nginx(module, up.port, workers=2, ip_failures=3).start()
        try:
            reached = empty_subject(ng)
        finally:
            ng.stop()
        ng = ngxh.Nginx(module, up.port, workers=2, auth_failures=1000,
                        store="shm:name=%s;create=1;capacity=768" % shm)
        ng.start()
        try:
            unavailable = strangers_fill_the_table(ng)
        finally:
            ng.stop()
    finally:
        up.stop()
        try:
            os.unlink("/dev/shm" + shm)
        except OSError:
            pass
    f1 = reached > 3
    f2 = unavailable > 0
    print("finding 1: %d of 12 subject-less failures reached the upstream "
          "(3 may): %s" % (reached, "REPRODUCES" if f1 else "fixed"))
    print("finding 2: %d of 40 new tenants' reconciles and logins were "
          "not admitted (503) "
          "after 530 strangers: %s" % (unavailable,
                                       "REPRODUCES" if f2 else "fixed"))
    return 1 if f1 or f2 else 0


if __name__ == "__main__":
    sys.exit(main())
