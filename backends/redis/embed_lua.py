#!/usr/bin/env python3
"""Assemble the Redis script from its files and embed it as C strings: the
script plus its SHA1 (what SCRIPT LOAD returns), and the same body as a
Redis Functions library plus its function's name, so the script stays
readable .lua files in the tree.

Usage: embed_lua.py OUT NAME FRAME.lua... --sections ALGO.lua...
                    [--mirror DIR]

The first frame is the generated prelude of constants (wire_lua.c), whose
values replace their names everywhere; the other frames are joined in
order.  A frame line `--@include S` (any indentation) becomes section S of
every ALGO file that has one, in the order given, indented as the line is.
An ALGO file is `--@section S` headers, each followed by its lines (the
comment lines before the first header are the file's own).  So each
algorithm's range check, step and expiry live in one file, like its C
counterpart in lib/algo, and the script that runs is still one function
with no extra closures per call.  A section no frame includes, or an
include no file provides, is an error; so is, with --mirror, a DIR/*.c
(lib/algo) without a .lua of the same name among the inputs."""
import hashlib
import os
import re
import sys

args = sys.argv[1:]
out, name = args[0], args[1]
mirror = None
if '--mirror' in args:
    i = args.index('--mirror')
    mirror = args[i + 1]
    args = args[:i] + args[i + 2:]
cut = args.index('--sections') if '--sections' in args else len(args)
frames, algos = args[2:cut], args[cut + 1:]
if mirror:
    have = {os.path.basename(p)[:-4] for p in frames + algos}
    for c in sorted(os.listdir(mirror)):
        if c.endswith('.c') and c[:-2] not in have:
            sys.exit('embed_lua.py: %s/%s has no Lua counterpart (%s.lua)' %
                     (mirror, c, c[:-2]))

# The prelude (wire_lua.c's output) is `local NAME = VALUE` lines.  Its
# names are replaced by their values in the code (not the comments) of
# every file, as a C compiler would fold constants: as Lua locals they
# would be upvalues of every function that uses them, and Redis pays for
# capturing each on every call (more server time a decision, which
# bench/redis/callgrind_policy.py counts).
consts = {}
for line in open(frames[0], encoding='utf-8').read().split('\n'):
    m = re.match(r'^local (\w+) = (.*)$', line)
    if m:
        consts[m.group(1)] = m.group(2)
    elif line.strip() and not line.startswith('--'):
        sys.exit('embed_lua.py: %s: not a constant: %s' % (frames[0], line))
frames = frames[1:]
NAME = re.compile(r'\b(' + '|'.join(map(re.escape, consts)) + r')\b')


def fold(line):
    """The line with the prelude's names replaced outside comments."""
    quote, i = None, 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == '\\':
                i += 1
            elif c == quote:
                quote = None
        elif c in '\'"':
            quote = c
        elif line.startswith('--', i):
            break
        i += 1
    return NAME.sub(lambda m: consts[m.group(1)], line[:i]) + line[i:]


sections = {}  # name -> [(file, lines)]
for path in algos:
    cur = None
    for line in open(path, encoding='utf-8').read().split('\n'):
        m = re.match(r'^--@section (\w+)\s*$', line)
        if m:
            cur = []
            sections.setdefault(m.group(1), []).append((path, cur))
        elif cur is not None:
            cur.append(fold(line))

used = set()
text = []
for path in frames:
    for line in open(path, encoding='utf-8').read().split('\n'):
        m = re.match(r'^(\s*)--@include (\w+)\s*$', line)
        if not m:
            text.append(fold(line))
            continue
        ind, sec = m.group(1), m.group(2)
        if sec not in sections:
            sys.exit('embed_lua.py: %s: no file has section %s' % (path, sec))
        used.add(sec)
        for src, lines in sections[sec]:
            while lines and not lines[-1].strip():
                lines.pop()
            text.append(ind + '-- (%s)' % os.path.basename(src))
            text.extend(ind + l if l.strip() else '' for l in lines)
    if text and text[-1] == '':
        text.pop()
    text.append('')
for sec in sections:
    if sec not in used:
        sys.exit('embed_lua.py: section %s is included nowhere' % sec)

# Two forms of one body: the script (EVALSHA; the chunk runs on every
# call) and the library (FUNCTION LOAD on Redis 7 / Valkey: the chunk runs
# once, at load, and each FCALL calls run() alone).  The library and its
# function are named after the body's hash, so two versions of sluice
# sharing a server each call their own.
body = '\n'.join(text)
fn = 'sluice_' + hashlib.sha1(body.encode('utf-8')).hexdigest()[:16]
script = (body + 'return run(KEYS, ARGV)\n').encode('utf-8')
library = ('#!lua name=%s\n' % fn + body +
           "redis.register_function('%s', run)\n" % fn).encode('utf-8')
sha = hashlib.sha1(script).hexdigest()


def c_string(data):
    lines = []
    for chunk in data.splitlines(keepends=True):
        esc = ''.join(
            '\\\\' if c == 0x5c else '\\"' if c == 0x22 else
            '\\n' if c == 0x0a else
            chr(c) if 0x20 <= c < 0x7f else '\\%03o' % c for c in chunk)
        lines.append('  "%s"' % esc)
    return '\n'.join(lines)


with open(out, 'w') as f:
    f.write('/* generated from %s by embed_lua.py: do not edit */\n' %
            ', '.join(os.path.basename(p) for p in frames + algos))
    f.write('static const char %s[] =\n%s;\n' % (name, c_string(script)))
    f.write('static const char %s_sha[] = "%s";\n' % (name, sha))
    f.write('static const char %s_library[] =\n%s;\n' %
            (name, c_string(library)))
    f.write('static const char %s_function[] = "%s";\n' % (name, fn))
