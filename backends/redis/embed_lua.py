#!/usr/bin/env python3
"""Embed a Lua script as a C string plus its SHA1 (what SCRIPT LOAD returns),
so the script stays readable .lua files in the tree.  Usage:
embed_lua.py OUT NAME PART.lua...  The parts are joined in order (the
generated prelude of wire constants first)."""
import hashlib
import os
import sys

out, name, parts = sys.argv[1], sys.argv[2], sys.argv[3:]
data = b''.join(open(p, 'rb').read() for p in parts)
sha = hashlib.sha1(data).hexdigest()
lines = []
for chunk in data.splitlines(keepends=True):
    esc = ''.join(
        '\\\\' if c == 0x5c else '\\"' if c == 0x22 else
        '\\n' if c == 0x0a else
        chr(c) if 0x20 <= c < 0x7f else '\\%03o' % c for c in chunk)
    lines.append('  "%s"' % esc)
with open(out, 'w') as f:
    f.write('/* generated from %s by embed_lua.py: do not edit */\n' %
            ', '.join(os.path.basename(p) for p in parts))
    f.write('static const char %s[] =\n%s;\n' % (name, '\n'.join(lines)))
    f.write('static const char %s_sha[] = "%s";\n' % (name, sha))
