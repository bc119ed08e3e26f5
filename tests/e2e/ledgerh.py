"""What the ledger-api end-to-end suites in Python share: checks counted
and reported, free ports, a server on one, one request.  The suites are run
as `SUITE.py LEDGER_API [SECTION...]`: API is argv[1]."""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import socket
import tempfile
import time

API = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
CONF = os.path.join(HERE, "hardening.conf")
KEYS = os.path.join(HERE, "e2e-keys.csv")
SECRET = os.path.join(HERE, "e2e.secret")

n = fails = 0


def check(name, expected, actual):
    global n, fails
    n += 1
    if expected != actual:
        fails += 1
        print(f"FAIL {name}: expected {expected!r}, got {actual!r}",
              flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class NotStarted(Exception):
    pass


class Server:
    def __init__(self, *args, store=None, workers=2, conf=CONF):
        self.tmp = tempfile.mkdtemp(prefix="ledger-hard-")
        self.err = open(os.path.join(self.tmp, "err"), "w+")
        cmd = [API, "--port", "0", "--workers", str(workers), "--config",
               conf, "--keys", KEYS, "--secret-file", SECRET,
               "--job-ms", "600000"] + list(args)
        if store:
            cmd += ["--store", store]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True)
        line = self.p.stdout.readline()
        self.port = int(line.rsplit(":", 1)[1]) if "listening" in line else 0
        if not self.port:
            self.stop()
            raise NotStarted(" ".join(args))
        deadline = time.time() + 60
        while self.port and time.time() < deadline:
            try:
                if req(self.port, "GET", "/metrics")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)

    def alive(self):
        return self.p.poll() is None

    def workers(self):
        kids = []
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == self.p.pid:
                        kids.append(int(pid))
            except (OSError, ValueError, IndexError):
                pass
        return kids

    def stop(self):
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.err.seek(0)
        log = self.err.read()
        self.err.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        # under ASan / UBSan a worker's report would otherwise go unseen
        bad = [line for line in log.splitlines()
               if "Sanitizer" in line or "runtime error" in line]
        check("the server's log has no sanitizer report", [], bad[:3])
        return log


def req(port, method, path, headers=None, body=None, src=None, timeout=10):
    """(status, headers dict lower-cased, parsed JSON body or raw text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                   source_address=(src, 0) if src else None)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read().decode("utf-8", "replace")
        try:
            data = json.loads(data)
        except ValueError:
            pass
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def summary():
    """Prints the count; the exit status."""
    print(f"{n - fails}/{n} checks passed")
    return 1 if fails else 0
