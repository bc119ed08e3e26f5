#!/usr/bin/env python3
"""Fail if a meson test log records a skipped test (CI installs everything
a suite needs, so a skip there means a suite silently did not run)."""
import json
import sys

skipped = []
with open(sys.argv[1]) as f:
    for line in f:
        if not line.strip():
            continue
        t = json.loads(line)
        if t.get("result") == "SKIP":
            skipped.append(t.get("name", "?"))
if skipped:
    print("skipped in CI (each must run): " + ", ".join(skipped),
          file=sys.stderr)
    sys.exit(1)
print("no test skipped")
