#!/usr/bin/env python3
"""ledger-api's --alert options end to end, on 127.0.0.1: a box trip
reaches a Slack receiver and a PagerDuty receiver from the workers, each
worker keeps its spool file, /metrics names the destinations, and what the
library refuses (a metadata address, loopback not allowed, an unknown
format) is a usage error before any worker starts.

    ledger_api_alerts_test.py LEDGER_API
"""
import http.client
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

API = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
SANDBOX = {"Authorization": "Bearer sk_abuser"}  # e2e.conf: boxed quickly
ROUTING_KEY = "R0UT1NGKEY0123456789abcdef012345"
fails = 0


def check(name, ok, detail=""):
    global fails
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": %s" % detail),
          flush=True)
    fails += not ok


def get(port, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, \
            r.read().decode("utf-8", "replace")
    finally:
        c.close()


def start(args, tmp):
    err = open(os.path.join(tmp, "err"), "w+")
    p = subprocess.Popen(
        [API, "--port", "0", "--workers", "2", "--config",
         os.path.join(HERE, "e2e.conf"), "--keys",
         os.path.join(HERE, "e2e-keys.csv"), "--secret-file",
         os.path.join(HERE, "e2e.secret")] + args,
        stdout=subprocess.PIPE, stderr=err, text=True)
    line = p.stdout.readline()
    return p, err, int(line.rsplit(":", 1)[1]) if "listening" in line else 0


def main():
    posts = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            posts.append((self.path, json.loads(self.rfile.read(n))))
            self.send_response(202 if self.path == "/pd" else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    rx = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=rx.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % rx.server_address[1]
    tmp = tempfile.mkdtemp(prefix="ledger-alerts-")
    try:
        p, err, port = start([
            "--alert", "slack=%s/slack,events=box_trip,name=ops" % base,
            "--alert", "pagerduty=%s/pd,routing_key=%s,events=box_trip" % (
                base, ROUTING_KEY),
            "--alert-allow", "loopback",
            "--alert-spool", os.path.join(tmp, "spool")], tmp)
        check("ledger-api starts with --alert", port != 0)
        if port:
            for _ in range(60):
                if get(port, "/v1/ledgers/main/entries", SANDBOX)[1].get(
                        "x-penalty-box-status") == "Active-Lockout":
                    break
            deadline = time.time() + 10
            while len({path for path, _ in posts}) < 2 and \
                    time.time() < deadline:
                time.sleep(0.05)
            slack = [b for path, b in posts if path == "/slack"]
            pd = [b for path, b in posts if path == "/pd"]
            check("a Slack message", len(slack) >= 1 and
                  "box_trip" in slack[0].get("text", "") and
                  slack[0].get("blocks"), posts)
            check("a PagerDuty trigger", len(pd) >= 1 and
                  pd[0].get("event_action") == "trigger" and
                  pd[0].get("routing_key") == ROUTING_KEY and
                  pd[0].get("dedup_key", "").startswith("key:") and
                  pd[0]["payload"]["severity"] == "info", posts)
            check("a spool per worker",
                  os.path.exists(os.path.join(tmp, "spool.0")) and
                  os.path.exists(os.path.join(tmp, "spool.1")),
                  os.listdir(tmp))
            text = get(port, "/metrics")[2]
            check("/metrics names the destinations",
                  'sluice_webhook_deliveries_total{dest="ops",format="slack"'
                  in text and 'format="pagerduty"' in text, text[-600:])
        p.send_signal(signal.SIGTERM)
        p.wait(30)
        err.seek(0)
        log = err.read()
        check("no sanitizer report", "Sanitizer" not in log and
              "runtime error" not in log, log[-2000:])
        for args, said in [
                (["--alert", "slack=http://169.254.169.254/latest/"],
                 "link-local"),
                (["--alert", "slack=" + base + "/slack"], "loopback"),
                (["--alert", "teams=https://hooks.example.com/x"], "teams"),
                (["--alert", "pagerduty=https://events.pagerduty.com/v2/"
                  "enqueue"], "routing_key")]:
            q, qerr, qport = start(args, tmp)
            q.wait(30)
            qerr.seek(0)
            msg = qerr.read()
            check("refused: " + " ".join(args),
                  q.returncode == 2 and not qport and said in msg, msg)
    finally:
        rx.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
