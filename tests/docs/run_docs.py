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
commands would never run.  A policy file shown (```text policy) is loaded
with `sluice check`, and must load without an error or a warning; one
shown in part is marked ```text excerpt (`from=PATH`: its lines, but
for those eliding with `...`, are PATH's, in order), one a sh block shows refused
```text refused, and a text block that sets a policy file's top-level
groups (limits, routes, ...) must say which it is.
`file=NAME` in a block's info string writes it into the session's
directory as NAME before its sh blocks run (a policy, a trace).  Relative
links must name files of the repository, and an anchor (#section) in a
link to a Markdown file a heading of it.  Prints one line per failure and
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
# A policy file's top-level groups: a text block setting one is a policy.
POLICY_TOP = re.compile(r'^\s*(attributes|limits|routes|penalties|tiers)\s*=')


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


def anchors(md):
    """The anchors GitHub makes of a Markdown file's headings: lower case,
    punctuation but '-' and '_' dropped, spaces made '-', a repeat -N."""
    seen, out, fence = {}, set(), False
    for line in open(md, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence
            continue
        m = None if fence else re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        a = re.sub(r'[^\w\- ]', '', m.group(1).lower()).replace(' ', '-')
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else '%s-%d' % (a, n))
    return out


def check_links(src, md):
    fails = []
    base = os.path.dirname(md)
    for n, line in enumerate(open(md, encoding='utf-8'), 1):
        for target in LINK.findall(line):
            if re.match(r'^[a-z]+:', target):
                continue
            path, _, frag = target.partition('#')
            p = os.path.normpath(os.path.join(base, path)) if path else md
            if not p.startswith(src + os.sep) or not os.path.exists(p):
                fails.append('%s:%d: link %s: not a file of the repository'
                             % (os.path.relpath(md, src), n, target))
            elif frag and p.endswith('.md') and frag not in anchors(p):
                fails.append('%s:%d: link %s: %s has no heading #%s'
                             % (os.path.relpath(md, src), n, target,
                                os.path.relpath(p, src), frag))
    return fails


def check_excerpt(src, rel, start, lines, path):
    """An excerpt's lines (but those with `...`, which elide) are lines
    of the file it names, in the same order."""
    try:
        have = [l.rstrip() for l in open(os.path.join(src, path),
                                         encoding='utf-8')]
    except OSError as e:
        return ['%s:%d: excerpt from=%s: %s' % (rel, start, path, e)]
    at = 0
    for n, line in enumerate(lines, start + 1):
        if '...' in line:
            continue
        try:
            at = have.index(line.rstrip(), at) + 1
        except ValueError:
            return ['%s:%d: excerpt: this line is not in %s (after the '
                    'lines before it): %s' % (rel, n, path, line.strip())]
    return []


def check_policy(build, rel, start, path):
    """A policy block, written at path, loaded by `sluice check`: any
    error or warning fails, said at the Markdown line it is on."""
    cli = os.path.join(os.path.abspath(build), 'tools', 'sluice', 'sluice')
    r = subprocess.run([cli, 'check', path], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    if r.returncode == 0 and not r.stderr:
        return []
    # FILE:LINE: in the message is the block's line: say the doc's.
    msg = re.sub(re.escape(path) + r':(\d+):',
                 lambda m: '%s:%d:' % (rel, start + int(m.group(1))),
                 r.stderr.strip() or r.stdout.strip())
    return ['%s:%d: policy block (exit %d): %s' % (rel, start, r.returncode,
                                                 msg)]


def run_file(src, build, md, without=()):
    rel = os.path.relpath(md, src)
    fails = check_links(src, md)
    todo, files = [], {}
    for start, lang, info, lines in blocks(md):
        if not lang:
            fails.append('%s:%d: a block without a language: tag it sh (runs), '
                         'text or c (shown only); see docs/README.md'
                         % (rel, start))
        words = info.split()
        name = [w[5:] for w in words if w.startswith('file=')]
        if name:
            files[name[0]] = '\n'.join(lines) + '\n'
        of = [w[5:] for w in words if w.startswith('from=')]
        if of:
            fails += check_excerpt(src, rel, start, lines, of[0])
        if lang != 'sh' and 'policy' in words:
            with tempfile.TemporaryDirectory(prefix='sluice-docs-') as d:
                path = os.path.join(d, name[0] if name else 'policy.conf')
                with open(path, 'w') as f:
                    f.write('\n'.join(lines) + '\n')
                fails += check_policy(build, rel, start, path)
        elif (lang != 'sh' and not {'excerpt', 'refused'} & set(words) and
              any(POLICY_TOP.match(l) for l in lines)):
            fails.append('%s:%d: a policy file\'s text: mark it `%s policy` '
                         '(loaded by this test), `%s excerpt` (a part of '
                         'one) or `%s refused` (a sh block shows its error); '
                         'see docs/README.md' % (rel, start, lang, lang, lang))
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
        for name, text in files.items():
            with open(os.path.join(work, name), 'w') as f:
                f.write(text)
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
