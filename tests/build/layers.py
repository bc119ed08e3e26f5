#!/usr/bin/env python3
"""Every #include of lib/ and backends/ against the layer table.

The meson build gives each layer's static library only the include folders
it may see, so most violations do not compile.  Three kinds would: a path
relative to the including file ("../http/http_int.h" is found beside the
file, whatever the -I list), a private folder shared by several users
where each may take only some of its headers (the algorithm layer's, see
lib/algo/meson.build), and a header one layer shows another but a third
may not use.  This check resolves each include as the compiler would and
fails on any header outside what the including file's layer may see.

The table is the layering of docs/layers.md; a folder under lib/ or
backends/ that no row names fails too, so a new layer gets a row.  The
programs above the library (tools/, examples/) are checked the same way:
they see the public headers only, and the pieces in tools/common.

Usage: layers.py SOURCE_ROOT [FILE...]   (no FILE: every file of the tree)
"""
import os
import re
import sys

PUBLIC = "include"
# Folder -> what its files may include besides the public headers and
# their own folder: whole folders, or single files of a private folder.
# The most specific folder wins (backends/redis/module before
# backends/redis).
LAYERS = {
    "lib/util": [],
    "lib/algo": ["lib/util"],
    "lib/core": [],
    "lib/http": ["lib/util"],
    "lib/client": ["lib/util"],
    "lib/events": ["lib/util"],
    "lib/edge": [],
    "lib/policy": ["lib/util", "lib/core/split.h", "lib/core/scope_id.h"],
    "backends/mem": ["lib/core"],
    "backends/shm": ["lib/core"],
    "backends/lmdb": ["lib/core"],
    "backends/redis": ["lib/core", "lib/algo/distinct_estimate.h"],
    "backends/redis/module": ["backends/redis/wire.h"],
    # The programs: the public headers, and what tools/common shares.
    "tools/common": [],
    "tools/sluice": ["tools/common"],
    "examples/batch-client": ["tools/common"],
    "examples/ledger-api": ["tools/common"],
    "examples/readme": [],
    "examples/small-api": [],
}
# Headers made at build time, by name, and the folder that makes them.
GENERATED = {"sluice_rcl_script.h": "backends/redis"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(rel):
    d = os.path.dirname(rel)
    while d:
        if d in LAYERS:
            return d
        d = os.path.dirname(d)
    return None


def search_dirs(layer):
    """Folders on this layer's include path, as the build gives them."""
    dirs = [PUBLIC, layer]
    for a in LAYERS[layer]:
        dirs.append(a if not a.endswith(".h") else os.path.dirname(a))
    return dirs


def allowed(layer, target):
    if target.startswith(PUBLIC + "/"):
        return True
    if os.path.dirname(target) == layer:
        return True
    for a in LAYERS[layer]:
        if target == a or (not a.endswith(".h") and os.path.dirname(target) == a):
            return True
    return False


def resolve(root, rel, quote, name, dirs):
    """Where the compiler finds it: beside the file (quotes), then -I."""
    cands = ([os.path.dirname(rel)] if quote == '"' else []) + dirs
    for d in cands:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def anywhere(root, name):
    """Is it a header of the tree at all (found from some layer)?"""
    for d in [PUBLIC, "lib"] + list(LAYERS):
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def check_file(root, rel):
    errs = []
    layer = layer_of(rel)
    if layer is None:
        return ["%s: in no layer of the table in %s" % (rel, __file__)]
    dirs = search_dirs(layer)
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            quote, name = m.groups()
            where = "%s:%d: %s" % (rel, n, line.strip())
            base = os.path.basename(name)
            if name == base and GENERATED.get(base) == layer:
                continue
            found = resolve(root, rel, quote, name, dirs)
            if found is None:
                other = anywhere(root, name)
                if other:
                    errs.append("%s: %s is not on layer %s's include path"
                                % (where, other, layer))
                elif quote == '"':
                    errs.append("%s: not found" % where)
                continue  # <system header>
            if not allowed(layer, found):
                errs.append("%s: layer %s may not see %s" % (where, layer, found))
    return errs


def tree_files(root):
    for top in ("lib", "backends", "tools", "examples"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), root)


def main(argv):
    root = argv[1]
    files = argv[2:] or sorted(tree_files(root))
    errs = []
    for rel in files:
        errs += check_file(root, rel)
    for e in errs:
        print(e)
    bad = len({e.split(":")[0] for e in errs})
    print("%d files, %d passed, %d failed" % (len(files), len(files) - bad, bad))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
