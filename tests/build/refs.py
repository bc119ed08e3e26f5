#!/usr/bin/env python3
"""Every file the tree's sources and docs name is in the tree.

A path of the repository (its first folder one of the tree's top-level
folders: lib/policy/decide.c, tests/nginx/ngxh.py), named anywhere in a
tracked source, script, policy, meson file or Markdown page, must be a
file or folder of the tree, resolved from the top or from the naming
file's folder; so must a bare file name of C, Markdown, Lua or Python
(decide.c, README.md), found in any folder.  A comment that cites a file
deleted, renamed or never committed fails here.  Names made at build time
or outside the tree are listed below (NOT_IN_TREE), with why.

Usage: refs.py SOURCE_ROOT   (prints one line per dangling name, then
`N files, N passed, N failed`)
"""
import os
import re
import subprocess
import sys

# Named on purpose though not in the tree: made by the build, by a test at
# run time, or another project's file.
NOT_IN_TREE = {
    'ledger_conf.c',          # lib/policy/meson.build: etc/ledger.conf embedded
    'sluice_rcl_script.h',    # backends/redis/meson.build: the Lua, embedded
    'wire.lua',               # backends/redis/meson.build: wire_lua.c's output
    'abi_sizes.c',            # tests/build/abi_sizes.py gen
    'keys.lua',               # the gateway benchmarks write it at run time
    'lib/resty/limit/req.lua',  # lua-resty-limit-traffic's, not ours
    'spec/rate-limit-architecture.txt',  # the spec, outside this repository
    '../http/http_int.h',     # layers.py's example of a relative include
    'var.lua',                # lua-resty-core's, in a LuaJIT trace message
}
EXT = r'(?:c|h|md|py|lua|sh|conf|txt|js|json|csv|sym|build)'
REF = re.compile(r'(?<![\w/.$%{@-])((?:\.\./|\./)*(?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.'
                 + EXT + r')(?![\w/])')
# Bare names: .h is left out (system and other projects' headers).
PLACEHOLDER = r'(^|/)[A-Z_]*(NAME|FILE|DOC|SUITE|OUT|ALGO|FRAME|MODULE|TRACE|SCRIPT)\.'
BARE = ('.c', '.md', '.lua', '.py')
SOURCES = ('.c', '.h', '.py', '.lua', '.sh', '.js', '.md', '.sym', '.cpp', '.conf')


def tree_files(root):
    """The tracked files; out of a git checkout, every file but build
    folders' (a meson-private inside) and dependencies'."""
    try:
        return subprocess.run(['git', '-C', root, 'ls-files'], check=True,
                              capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pass
    out = []
    for d, subdirs, fs in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith('.') and
                      s != 'node_modules' and not os.path.isdir(
                          os.path.join(d, s, 'meson-private'))]
        out += [os.path.relpath(os.path.join(d, f), root) for f in fs]
    return out


def main(root):
    files = tree_files(root)
    tracked = set(files)
    dirs, names = set(), set()
    for f in files:
        names.add(os.path.basename(f))
        d = os.path.dirname(f)
        while d:
            dirs.add(d)
            d = os.path.dirname(d)
    tops = {d for d in dirs if '/' not in d}
    checked, bad = 0, set()
    for f in files:
        if not (f.endswith(SOURCES) or os.path.basename(f) == 'meson.build'):
            continue
        try:
            text = open(os.path.join(root, f), encoding='utf-8').read()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        checked += 1
        for n, line in enumerate(text.split('\n'), 1):
            if re.match(r'\s*#\s*include\s*<', line):
                continue
            for m in REF.finditer(line):
                r = m.group(1)
                if re.match(r'\w\.', r) or line[m.end():m.end() + 1] == '(':
                    continue  # a field (r.h, p.c[k]) or a call, not a file
                if r in NOT_IN_TREE or os.path.basename(r) in NOT_IN_TREE:
                    continue
                here = os.path.normpath(os.path.join(os.path.dirname(f), r))
                top = here if r.startswith('../') else os.path.normpath(r)
                if '/' in top:
                    if top.split('/')[0] not in tops or \
                            re.search(PLACEHOLDER, top):
                        continue  # not a path of this tree, or a placeholder
                    if here in tracked or top in tracked or \
                            here in dirs or top in dirs or \
                            any(t.endswith('/' + top) for t in tracked):
                        continue  # (a package's own path: lib/sluice.js)
                elif top in tracked or not top.endswith(BARE) or \
                        top in names or re.search(PLACEHOLDER, top) or \
                        not re.match(r'[A-Za-z_]\w*\.[a-z]+$', top):
                    continue
                print('%s:%d: %s is not in the tree' % (f, n, r))
                bad.add(f)
    print('%d files, %d passed, %d failed' % (checked, checked - len(bad), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
