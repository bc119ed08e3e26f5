#!/usr/bin/env python3
"""Turn a policy file into a C string, so that the file in etc/ is both
what is installed and what the library decides by when given no policy.

usage: embed_conf.py INPUT OUTPUT SYMBOL
"""
import sys


def main():
    src, out, sym = sys.argv[1:4]
    with open(src, 'rb') as f:
        text = f.read().decode('ascii')
    lines = ['/* Generated from %s by lib/policy/embed_conf.py: edit that file. */'
             % src.replace('\\', '/').split('/etc/')[-1],
             '', 'extern const char %s[];' % sym,
             'const char %s[] =' % sym]
    for line in text.splitlines(keepends=True):
        esc = (line.replace('\\', '\\\\').replace('"', '\\"')
               .replace('\n', '\\n').replace('\t', '\\t'))
        lines.append('    "%s"' % esc)
    lines.append('    ;')
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
