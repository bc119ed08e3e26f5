#!/usr/bin/env bash
# The one-table benchmark runner (issue 9; docs/hardening.md).
#
#   scripts/bench-all.sh [BUILD_DIR]     (default build-hard-bench, release)
#
# Runs every benchmark `meson test --benchmark` knows (core, replay, each
# backend's), each on its own so that its output is kept apart, then merges
# their tables into one: suite, case, ns per decision, decisions per second,
# bytes per key (where the benchmark reports it), and the ratio against the
# baseline that benchmark measured in the same run.  The table, headed by
# the machine (CPU model, nproc, kernel, date) and the command, goes to
# stdout and to bench-results.txt; each benchmark's raw output is kept
# under BUILD_DIR/bench-raw/.  Timing never fails the run; a benchmark that
# crashes or cannot start does (exit 1), after the table is written.
set -u
cd "$(dirname "$0")/.."
B=${1:-build-hard-bench}
OUT=${BENCH_OUT:-bench-results.txt}
if [ ! -f "$B/build.ninja" ]; then
  meson setup "$B" -Dbuildtype=release >"$B.setup.log" 2>&1 ||
    { cat "$B.setup.log"; exit 1; }
fi
ninja -C "$B" >/dev/null || exit 1
mkdir -p "$B/bench-raw"
names=$(meson test -C "$B" --benchmark --list 2>/dev/null | sed 's/^.* \/ //')
status=0
for n in $names; do
  echo "bench-all: running $n" >&2
  if ! meson test -C "$B" --benchmark --verbose "$n" \
      >"$B/bench-raw/$n.txt" 2>&1; then
    echo "bench-all: $n FAILED (see $B/bench-raw/$n.txt)" >&2
    status=1
  fi
done

export BA_CPU BA_WHEN BA_NPROC BA_KERNEL BA_CMD BA_BUILDTYPE
BA_CPU=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
BA_WHEN=$(date -u '+%Y-%m-%d %H:%M UTC')
BA_NPROC=$(nproc)
BA_KERNEL=$(uname -sr)
BA_CMD="scripts/bench-all.sh $B"
BA_BUILDTYPE=$(meson introspect "$B" --buildoptions 2>/dev/null |
  python3 -c 'import json, sys
print([o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"][0])' \
  2>/dev/null || echo '?')
python3 - "$B/bench-raw" $names >"$OUT.tmp" <<'EOF'
import os, re, sys
raw, names = sys.argv[1], sys.argv[2:]
e = os.environ
print(f"sluice benchmarks -- {e['BA_WHEN']}")
print(f"machine: {e['BA_CPU']}, {e['BA_NPROC']} CPUs online, {e['BA_KERNEL']}")
print(f"command: {e['BA_CMD']}   (meson test --benchmark, buildtype "
      f"{e['BA_BUILDTYPE']})")
print()
rows = []   # suite, case, ns, dps, bytes_per_key, ratio, baseline
num = r"([0-9]+(?:\.[0-9]+)?)"
for n in names:
    try:
        text = open(f"{raw}/{n}.txt", errors="replace").read()
    except OSError:
        continue
    base = None
    bpk = "-"
    m = re.search(r"(\d+) B/key", text)
    if m:
        bpk = m.group(1)
    got = 0
    for line in text.splitlines():
        # core, replay: case  ns/dec  decisions/s  ratio  [(baseline...)]
        m = re.match(r"^(\S.*?)\s+" + num + r"\s+" + num + r"\s+" + num +
                     r"(\s+\(baseline.*\))?\s*$", line)
        if m and not line.startswith(("workload", "case", "store")):
            name = m.group(1).strip()
            if m.group(5) or "baseline" in name:
                base = name
            # shm rows: ns, Mdecisions/s, CPU ns -- no ratio column
            if n.startswith("shm"):
                rows.append((n, name, float(m.group(2)),
                             1e9 / float(m.group(2)), bpk, "-", "-"))
            else:
                rows.append((n, name, float(m.group(2)), float(m.group(3)),
                             bpk, m.group(4), base or "-"))
            got += 1
            continue
        # lmdb: store  batch  ns  decisions/s  ratio'x'
        m = re.match(r"^(\S.*?)\s+(\d+)\s+" + num + r"\s+" + num + r"\s+" +
                     num + r"x\s*$", line)
        if m:
            name = f"{m.group(1).strip()}, batch {m.group(2)}"
            if "baseline" in name:
                base = name
            rows.append((n, name, float(m.group(3)), float(m.group(4)), bpk,
                         m.group(5), base or "-"))
            got += 1
            continue
        # redis: '  name  N ns/decision  M /s'
        m = re.match(r"^\s+(\S.*?)\s+" + num + r" ns/decision\s+" + num +
                     r" /s\s*$", line)
        if m:
            rows.append((n, m.group(1).strip(), float(m.group(2)),
                         float(m.group(3)), bpk, "-", "-"))
            got += 1
            continue
        # shm ratios: '  label   1.23x ...'
        m = re.match(r"^\s+(\S.*?)\s+" + num + r"x(.*)$", line)
        if m and n.startswith("shm"):
            rows.append((n, "ratio: " + m.group(1).strip() +
                         (" " + m.group(3).strip() if m.group(3).strip() else ""),
                         None, None, "-", m.group(2), "same run"))
            got += 1
    if got == 0:
        rows.append((n, "(no table: see bench-raw/%s.txt)" % n, None, None,
                     "-", "-", "-"))
w = max([len(r[1]) for r in rows] + [20])
print(f"{'suite':<16} {'case':<{w}} {'ns/dec':>10} {'decisions/s':>14} "
      f"{'B/key':>6} {'ratio':>7}  baseline")
for s, c, ns, dps, bpk, ratio, base in rows:
    nss = f"{ns:10.1f}" if ns is not None else f"{'':>10}"
    dss = f"{dps:14.0f}" if dps is not None else f"{'':>14}"
    print(f"{s:<16} {c:<{w}} {nss} {dss} {bpk:>6} {ratio:>7}  {base}")
EOF
mv "$OUT.tmp" "$OUT"
cat "$OUT"
exit $status
