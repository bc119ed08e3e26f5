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
#
# Every benchmark keeps its output in BUILD_DIR/bench-raw/NAME.txt itself
# (scripts/bench-tee.sh), and the last benchmark, `table`, runs this script
# with BENCH_REPARSE=1: so a plain `meson test -C BUILD --benchmark` also
# ends with the one table (on stdout, and in BUILD/bench-results.txt).
set -u
cd "$(dirname "$0")/.."
B=${1:-build-hard-bench}
OUT=${BENCH_OUT:-bench-results.txt}
BENCH_LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
status=0
if [ -n "${BENCH_REPARSE:-}" ]; then
  # Only build the table from the outputs already in bench-raw/ (what the
  # `table` benchmark does at the end of `meson test --benchmark`).
  names=$(cd "$B/bench-raw" && ls -- *.txt 2>/dev/null | sed 's/\.txt$//')
else
  if [ ! -f "$B/build.ninja" ]; then
    meson setup "$B" -Dbuildtype=release >"$B.setup.log" 2>&1 ||
      { cat "$B.setup.log"; exit 1; }
  fi
  ninja -C "$B" >/dev/null || exit 1
  mkdir -p "$B/bench-raw"
  names=$(meson test -C "$B" --benchmark --list 2>/dev/null | grep ' / ' |
    sed 's/^.* \/ //' | grep -vx table)
  for n in $names; do
    echo "bench-all: running $n" >&2
    # Each benchmark keeps its own output in bench-raw/NAME.txt
    # (scripts/bench-tee.sh); meson's log of the run goes next to it.
    if ! meson test -C "$B" --benchmark --verbose "$n" \
        >"$B/bench-raw/$n.log" 2>&1; then
      echo "bench-all: $n FAILED (see $B/bench-raw/$n.log)" >&2
      status=1
    fi
  done
fi

export BA_CPU BA_WHEN BA_NPROC BA_KERNEL BA_CMD BA_BUILDTYPE BA_LOAD
BA_CPU=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
BA_WHEN=$(date -u '+%Y-%m-%d %H:%M UTC')
BA_NPROC=$(nproc)
BA_KERNEL=$(uname -sr)
BA_LOAD=$BENCH_LOAD_BEFORE
if [ -n "${BENCH_REPARSE:-}" ]; then
  BA_CMD="meson test -C $B --benchmark (the table benchmark, from bench-raw/)"
else
  BA_CMD="scripts/bench-all.sh $B"
fi
BA_BUILDTYPE=$(meson introspect "$B" --buildoptions 2>/dev/null |
  python3 -c 'import json, sys
print([o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"][0])' \
  2>/dev/null || echo '?')
python3 - "$B/bench-raw" $names >"$OUT.tmp" <<'EOF'
import os, re, sys
raw, names = sys.argv[1], sys.argv[2:]
e = os.environ
print(f"sluice benchmarks -- {e['BA_WHEN']}")
print(f"machine: {e['BA_CPU']}, {e['BA_NPROC']} CPUs online, {e['BA_KERNEL']}, "
      f"load average {e['BA_LOAD']} when it started")
print(f"command: {e['BA_CMD']}   (buildtype {e['BA_BUILDTYPE']})")
import time
when = []
for n in names:
    try:
        when.append(f"{n} {time.strftime('%H:%M', time.gmtime(os.path.getmtime(f'{raw}/{n}.txt')))}")
    except OSError:
        pass
print("outputs (UTC time each benchmark finished): " + ", ".join(when))
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
    got, section, in_ratios, nsof = 0, "", False, {}
    for line in text.splitlines():
        if re.match(r"^(ratios|\(vs )", line):
            in_ratios = True
            continue
        if in_ratios and line.startswith("  ") and line.strip():
            rows.append((n, "ratio: " + " ".join(line.split()), None, None,
                         "-", "-", "same run"))
            got += 1
            continue
        in_ratios = False
        # policy replay: '# shadow-mode replay: N requests, ..., T threads,
        # S s, R requests/s' (the first one, on 1 thread, is the baseline)
        m = re.search(r"# shadow-mode replay: \d+ requests, .*?, (\d+) threads?, "
                     + num + r" s, (\d+) requests/s", line)
        if m:
            name = f"replay --policy, {m.group(1)} thread" + ("s" if m.group(1) != "1" else "")
            dps = float(m.group(3))
            if base is None:
                base, nsof["policy"] = name, 1e9 / dps
            rows.append((n, name, 1e9 / dps, dps, "-",
                         f"{(1e9 / dps) / nsof['policy']:.2f}", base))
            got += 1
            continue
        # redis: '  name  N ns/decision  M /s', sections '1 key:'
        m = re.match(r"^\s+(\S.*?)\s+" + num + r" ns/decision\s+" + num +
                     r" /s\s*$", line)
        if m:
            name = f"{section}, {m.group(1).strip()}" if section else m.group(1).strip()
            ns = float(m.group(2))
            if m.group(1).startswith("PING"):
                nsof[section] = ns
            b = nsof.get(section)
            rows.append((n, name, ns, float(m.group(3)), bpk,
                         f"{ns / b:.2f}" if b else "-",
                         f"{section}, PING" if b else "-"))
            got += 1
            continue
        if re.match(r"^\S.*:\s*$", line) and not line.startswith("shm table"):
            section = line.strip().rstrip(":")
            continue
        # lmdb: store  batch  ns  decisions/s  ratio'x' (vs mem, batch 1)
        m = re.match(r"^(\S.*?)\s+(\d+)\s+" + num + r"\s+" + num + r"\s+" +
                     num + r"x\s*$", line)
        if m:
            name = f"{m.group(1).strip()}, batch {m.group(2)}"
            if "baseline" in name and base is None:
                base = name
            rows.append((n, name, float(m.group(3)), float(m.group(4)), "-",
                         m.group(5), base or "-"))
            got += 1
            continue
        # core, replay: case  ns/dec  decisions/s  ratio  [(baseline...)]
        m = re.match(r"^(\S.*?)\s+" + num + r"\s+" + num + r"\s+" + num +
                     r"(\s+\(baseline.*\))?\s*$", line)
        if m and not n.startswith("shm"):
            name = m.group(1).strip()
            if (m.group(5) or "baseline" in name) and base is None:
                base = name
            rows.append((n, name, float(m.group(2)), float(m.group(3)), "-",
                         m.group(4), base or "-"))
            got += 1
            continue
        # shm: workload  ns/decision  Mdecisions/s  [CPU ns]; the baseline is
        # the mem row of the same workload ("hot key", "1M keys")
        m = re.match(r"^(\S.*?)\s+" + num + r"\s+" + num + r"(\s+" + num +
                     r")?\s*$", line)
        if m and n.startswith("shm") and "," in m.group(1):
            name = m.group(1).strip()
            ns = float(m.group(2))
            parts = [x.strip() for x in name.split(",")]
            if parts[0] == "mem":
                nsof[parts[1]] = (ns, name)
            b = nsof.get(parts[1])
            rows.append((n, name, ns, float(m.group(3)) * 1e6,
                         bpk if parts[0] == "shm" else "-",
                         f"{ns / b[0]:.2f}" if b else "-", b[1] if b else "-"))
            got += 1
    if got == 0:
        rows.append((n, "(no table: see bench-raw/%s.txt)" % n, None, None,
                     "-", "-", "-"))
notes = [r for r in rows if r[2] is None and r[1].startswith("ratio: ")]
rows = [r for r in rows if r not in notes]
w = max([len(r[1]) for r in rows] + [20])
print(f"{'suite':<16} {'case':<{w}} {'ns/dec':>10} {'decisions/s':>14} "
      f"{'B/key':>6} {'ratio':>7}  baseline (same run)")
for s, c, ns, dps, bpk, ratio, base in rows:
    nss = f"{ns:10.1f}" if ns is not None else f"{'':>10}"
    dss = f"{dps:14.0f}" if dps is not None else f"{'':>14}"
    print(f"{s:<16} {c:<{w}} {nss} {dss} {bpk:>6} {ratio:>7}  {base}")
if notes:
    print()
    print("ratios the benchmarks report themselves (same run):")
    for s, c, *_ in notes:
        print(f"  {s:<16} {c[7:]}")
EOF
mv "$OUT.tmp" "$OUT"
cat "$OUT"
exit $status
