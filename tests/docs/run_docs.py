#!/usr/bin/env python3
"""Run the commands in README.md and docs/*.md as written (docs/README.md
says how blocks are marked).  Usage: run_docs.py [--without PART]... SRC BUILD [FILE.md...]

Each Markdown file is one bash session in a scratch directory that looks
like the source tree (its entries symlinked) with `build` pointing at BUILD.
Its ```sh blocks run in order, so a variable or a background server from
one block is there in the next.  A block with `$ ` lines is a transcript:
each command's output (stdout and stderr) must match the lines under it,
where `...` alone on a line matches any number of lines and `...` inside a
line any text; `[exit N]` as the last line expects exit status N (else 0).
A block without `$ ` lines is a script whose output is not checked but
whose status must be 0.  ```sh skip: REASON blocks are not run; a
```sh needs: PART block runs only when the build has PART (meson passes
--without PART for what it did not build, and says why there); other
languages (text, c, nginx) are shown only, and every block names one; a
block under another shell's name (bash, console...) fails, since its
commands would never run.  Relative
links must name files of the repository.  Prints one line per failure and
ends with `N passed, N failed`."""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r'^```(\S*)\s*(.*)$')
# Commands under another shell's name would be shown and never run.
SHELLS = {'bash', 'shell', 'console', 'shell-session', 'sh-session', 'zsh',
          'terminal'}
LINK = re.compile(r'\]\(([^)\s]+)\)')


def blocks(path):
    """(line, lang, info, [lines]) for every fenced block."""
    out, cur = [], None
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip('\n')
            m = FENCE.match(line)
            if cur is None and m:
                cur = (n, m.group(1), m.group(2).strip(), [])
            elif cur is not None and line.startswith('```'):
                out.append(cur)
                cur = None
            elif cur is not None:
                cur[3].append(line)
    return out


def steps(start, lines):
    """Split a block into (line, command, expected lines or None)."""
    if not any(l.startswith('$ ') for l in lines):
        return [(start + 1, '\n'.join(lines), None)]
    res, i = [], 0
    while i < len(lines):
        if not lines[i].startswith('$ '):
            i += 1
            continue
        at, cmd = start + 1 + i, lines[i][2:]
        while cmd.endswith('\\') and i + 1 < len(lines):
            i += 1
            cmd += '\n' + lines[i]
        i += 1
        exp = []
        while i < len(lines) and not lines[i].startswith('$ '):
            exp.append(lines[i])
            i += 1
        while exp and not exp[-1].strip():
            exp.pop()
        res.append((at, cmd, exp))
    return res


def matches(expected, actual):
    want = 0
    if expected and re.fullmatch(r'\[exit \d+\]', expected[-1]):
        want = int(expected[-1][6:-1])
        expected = expected[:-1]
    rx = ''
    for l in expected:
        if l.strip() == '...':
            rx += r'(?:[^\n]*\n)*?'
        else:
            rx += '[^\n]*'.join(re.escape(p) for p in l.rstrip().split('...')) + r'\n'
    lines = [l.rstrip() for l in actual.split('\n')]
    while lines and not lines[-1]:
        lines.pop()
    text = ''.join(l + '\n' for l in lines)
    return want, re.fullmatch(rx, text) is not None


def check_links(src, md):
    fails = []
    base = os.path.dirname(md)
    for n, line in enumerate(open(md, encoding='utf-8'), 1):
        for target in LINK.findall(line):
            if re.match(r'^[a-z]+:', target) or target.startswith('#'):
                continue
            p = os.path.normpath(os.path.join(base, target.split('#')[0]))
            if not p.startswith(src + os.sep) or not os.path.exists(p):
                fails.append('%s:%d: link %s: not a file of the repository'
                             % (os.path.relpath(md, src), n, target))
    return fails


def run_file(src, build, md, without=()):
    rel = os.path.relpath(md, src)
    fails = check_links(src, md)
    todo = []
    for start, lang, info, lines in blocks(md):
        if not lang:
            fails.append('%s:%d: a block without a language: tag it sh (runs), '
                         'text or c (shown only); see docs/README.md'
                         % (rel, start))
        if lang in SHELLS:
            fails.append('%s:%d: a `%s` block is not run: tag commands sh '
                         '(or sh skip: REASON), output text; see docs/README.md'
                         % (rel, start, lang))
        if lang != 'sh':
            continue
        if info.startswith('skip'):
            if not re.match(r'skip:\s*\S', info):
                fails.append('%s:%d: `skip` needs a reason (skip: REASON)'
                             % (rel, start))
            continue
        need = re.match(r'needs:\s*(\S+)', info)
        if info.startswith('needs') and not need:
            fails.append('%s:%d: `needs` names a part (needs: PART)'
                         % (rel, start))
        if need and need.group(1) in without:
            continue
        todo += steps(start, lines)
    if not todo:
        return len(fails) == 0 and 1 or 0, fails
    scratch = tempfile.mkdtemp(prefix='sluice-docs-')
    try:
        work, out = os.path.join(scratch, 'tree'), os.path.join(scratch, 'out')
        os.mkdir(work)
        os.mkdir(out)
        for e in os.listdir(src):
            if not e.startswith('build') and e != '.git':
                os.symlink(os.path.join(src, e), os.path.join(work, e))
        os.symlink(os.path.abspath(build), os.path.join(work, 'build'))
        script = ['cd %s || exit 99' % work,
                  "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT"]
        for i, (_, cmd, _) in enumerate(todo):
            script.append('{ %s\n} > %s/%d 2>&1 < /dev/null; echo $? > %s/%d.rc'
                          % (cmd, out, i, out, i))
        with open(os.path.join(scratch, 'session.sh'), 'w') as f:
            f.write('\n'.join(script) + '\n')
        subprocess.run(['bash', os.path.join(scratch, 'session.sh')],
                       stdin=subprocess.DEVNULL, timeout=1200)
        for i, (at, cmd, exp) in enumerate(todo):
            try:
                got = open('%s/%d' % (out, i), errors='replace').read()
                rc = int(open('%s/%d.rc' % (out, i)).read())
            except (OSError, ValueError):
                fails.append('%s:%d: `%s` did not run' % (rel, at, cmd))
                continue
            want, ok = matches(exp or [], got)
            if exp is None:
                ok = True
            if rc != want or not ok:
                fails.append('%s:%d: `%s`: exit %d (want %d)%s\n--- output:\n%s'
                             % (rel, at, cmd, rc, want,
                                '' if ok else ', output differs from the doc',
                                got[-3000:]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if fails else 1, fails


def main():
    args, without = sys.argv[1:], set()
    while len(args) > 1 and args[0] == '--without':
        without.add(args[1])
        args = args[2:]
    src, build = os.path.abspath(args[0]), args[1]
    files = args[2:] or ([os.path.join(src, 'README.md')] + sorted(
        os.path.join(src, 'docs', f) for f in os.listdir(os.path.join(src, 'docs'))
        if f.endswith('.md')))
    passed = failed = 0
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        for md, (ok, fails) in zip(files, ex.map(
                lambda m: run_file(src, build, os.path.abspath(m), without),
                files)):
            for msg in fails:
                print('FAIL ' + msg)
            print('%s: %s' % (os.path.relpath(md, src),
                              'ok' if ok else '%d failures' % len(fails)))
            passed += ok
            failed += not ok
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
