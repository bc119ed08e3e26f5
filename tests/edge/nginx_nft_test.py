#!/usr/bin/env python3
"""ngx_http_sluice_module with `sluice_nft on`, in a network namespace of
its own (netns.sh), through the nginx suite's helpers (tests/nginx/ngxh.py).

An address that trips credential stuffing on the auth location (three
upstream 401s for three users) is boxed at level 3; the worker's sink puts
it in the kernel's set: `nft list set` shows it, its TCP connects to nginx
are dropped (none reaches it), another address still gets answers, the
metrics location counts the update.  `nginx -t` refuses a bad table name
and sluice_nft_* without `sluice_nft on`.

usage: nginx_nft_test.py MODULE
"""
import http.client
import os
import sys

import nftcheck
from nftcheck import check, connects, in_set

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "nginx"))
import ngxh  # noqa: E402

BANNED = "127.0.0.60"


def post(port, path, src):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                   source_address=(src, 0))
    try:
        c.request("POST" if "auth" in path else "GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()




def main():
    why = ngxh.skip_reason(sys.argv[1] if len(sys.argv) > 1 else None)
    if why:
        print("SKIP: " + why)
        return ngxh.SKIP
    up = ngxh.Upstream()
    ng = ngxh.Nginx(sys.argv[1], up.port, workers=1, stuffing_reports=3,
                    stuffing_subjects=3)
    try:
        # Temporary files in the test's directory: nginx chowns its
        # default ones (/var/lib/nginx) to the worker's user, which a user
        # namespace cannot do for a folder some other uid owns.
        ng.edit_conf("  sluice_store", "".join(
            "  %s_temp_path %s/%s;\n" % (t, ng.dir, t)
            for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            + "  sluice_store")
        ng.edit_conf("  sluice_store", "  sluice_nft_table edge;\n"
                     "  sluice_store")
        r = ng.cmd("-t")
        check("nginx -t: sluice_nft_table needs sluice_nft on", True,
              r.returncode != 0 and "need \"sluice_nft on\"" in r.stderr)
        ng.edit_conf("  sluice_nft_table edge;",
                     "  sluice_nft on; sluice_nft_table \"bad name\";")
        r = ng.cmd("-t")
        check("nginx -t: a bad table name", True,
              r.returncode != 0 and "sluice_nft_table" in r.stderr)
        ng.edit_conf("sluice_nft_table \"bad name\";",
                     "sluice_nft_state %s/bans;" % ng.dir)
        ng.start()
        check("before: the address connects", True,
              connects(ng.port, BANNED))
        st = [post(ng.port, f"/v1/auth/token?user=u{i}&secret=bad",
                   BANNED)[0] for i in range(3)]
        check("three failures for three users", [401, 401, 401], st)
        ok = ngxh.wait_until(lambda: in_set(BANNED), 10, "the ban in the set")
        check("the address is in the kernel set", True, bool(ok))
        check("its TCP connect is dropped", False, connects(ng.port, BANNED))
        check("another address is answered", 200,
              post(ng.port, "/plain/x", "127.0.0.61")[0])
        m = post(ng.port, "/metrics", "127.0.0.61")[1]
        check("metrics: one added", True,
              'sluice_nft_updates_total{result="added"} 1' in m)
    finally:
        ng.stop()
        up.stop()
    return 1 if nftcheck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
