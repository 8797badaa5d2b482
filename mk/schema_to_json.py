#!/usr/bin/env python3
"""One-off (issue 31): rewrite the OBJECT options' schemas of the method
descriptors from YAML flow text to JSON text, in place.

    python3 mk/schema_to_json.py [FILE.c ...]   (default: every core/**/*.c)

A schema is the run of C string literals after `GP_OPTION_OBJECT, 0, NULL, 0,
0,` in an option table, or the initialiser of `gp_input_spec_schema[]`. The
YAML flow subset is read exactly as api/api.c's gp_yaml_flow_to_json read it
(plain scalars: true/false, null/~, integers, other numbers, else strings);
text that already parses as JSON is left alone, so a second run changes
nothing. Prints each rewritten schema's canonical JSON so that it can be
compared with what the old converter served (GET /v1/methods)."""
import glob
import json
import math
import re
import sys

LITERALS = r'((?:"(?:[^"\\\n]|\\.)*"\s*)+)'
PATTERNS = [
    re.compile(r'(GP_OPTION_OBJECT,\s*0,\s*NULL,\s*0,\s*0,\s*)' + LITERALS + r'(?=,)'),
    re.compile(r'(gp_input_spec_schema\[\]\s*=\s*)' + LITERALS + r'(?=;)'),
]


class Flow:
    """gp_yaml_flow_to_json, line for line."""

    def __init__(self, text):
        self.s, self.p, self.depth = text, 0, 0

    def ch(self, k=0):
        return self.s[self.p + k] if self.p + k < len(self.s) else ''

    def space(self):
        while self.ch() in (' ', '\t', '\n', '\r') and self.ch():
            self.p += 1

    def scalar(self, as_key):
        q = self.ch()
        if q in ('"', "'"):
            self.p += 1
            out = []
            while self.ch():
                if self.ch() == q and q == "'" and self.ch(1) == "'":
                    out.append("'")
                    self.p += 2
                elif self.ch() == q:
                    break
                elif q == '"' and self.ch() == '\\' and self.ch(1):
                    out.append(self.ch(1))
                    self.p += 2
                else:
                    out.append(self.ch())
                    self.p += 1
            if self.ch() != q:
                raise ValueError('unterminated string')
            self.p += 1
            return ''.join(out)
        start = self.p
        while self.ch() and self.ch() not in ',:[]{}':
            self.p += 1
        buf = self.s[start:self.p].rstrip(' \t')
        if not buf:
            raise ValueError('empty scalar at %d' % start)
        if not as_key:
            if buf in ('true', 'false'):
                return buf == 'true'
            if buf in ('null', '~'):
                return None
            try:
                x = float(buf)
            except ValueError:
                return buf
            if math.isfinite(x):
                digits = buf[1:] if buf.startswith('-') else buf
                if digits.isdigit() and abs(x) < 9007199254740992.0:
                    return int(x)
                return x
        return buf

    def container(self, mapping):
        self.depth += 1
        if self.depth > 32:
            raise ValueError('too deep')
        out = {} if mapping else []
        self.p += 1
        self.space()
        close = '}' if mapping else ']'
        first = True
        while self.ch() != close:
            if not first:
                if self.ch() != ',':
                    raise ValueError('expected , at %d' % self.p)
                self.p += 1
                self.space()
            first = False
            if mapping:
                key = self.scalar(True)
                self.space()
                if self.ch() != ':':
                    raise ValueError('expected : at %d' % self.p)
                self.p += 1
            val = self.value()
            self.space()
            if mapping:
                out[key] = val
            else:
                out.append(val)
        self.depth -= 1
        self.p += 1
        return out

    def value(self):
        self.space()
        if self.ch() in ('{', '['):
            return self.container(self.ch() == '{')
        return self.scalar(False)


def yaml_flow_to_json(text):
    f = Flow(text)
    v = f.value()
    f.space()
    if f.p != len(text):
        raise ValueError('trailing text')
    return v


def c_literals_text(lits):
    """The string the C compiler makes of a run of literals."""
    return ''.join(json.loads(m) for m in re.findall(r'"(?:[^"\\\n]|\\.)*"', lits))


def c_literals(text, indent, width=96):
    """text as C literals of at most `width` columns, continuation lines at indent."""
    esc = text.replace('\\', '\\\\').replace('"', '\\"')
    room = width - indent - 2
    lines, cur = [], ''
    for piece in re.split(r'(?<=, )', esc):
        if cur and len(cur) + len(piece) > room:
            lines.append(cur)
            cur = ''
        cur += piece
    lines.append(cur)
    return ('\n' + ' ' * indent).join('"%s"' % line for line in lines)


def convert(path):
    src = open(path).read()
    changed = False

    def repl(m):
        nonlocal changed
        text = c_literals_text(m.group(2))
        try:
            json.loads(text)
            return m.group(0)  # already JSON
        except ValueError:
            pass
        value = yaml_flow_to_json(text)
        out = json.dumps(value, separators=(', ', ': '), ensure_ascii=False)
        assert json.loads(out) == value
        print('%s: %s' % (path, json.dumps(value, sort_keys=True)))
        changed = True
        lead = m.group(1)
        line_start = m.string.rfind('\n', 0, m.start(2)) + 1
        col = m.start(2) - line_start
        trail = re.search(r'\s*$', m.group(2)).group(0)
        if '\n' in lead:  # the schema starts its own line
            indent = col
        else:
            indent = len(re.match(r'\s*', m.string[line_start:]).group(0)) + 4
            lead = lead.rstrip() + '\n' + ' ' * indent
        return lead + c_literals(out, indent) + trail

    for pat in PATTERNS:
        src = pat.sub(repl, src)
    if changed:
        open(path, 'w').write(src)


def main(argv):
    files = argv or sorted(glob.glob('core/**/*.c', recursive=True))
    for path in files:
        convert(path)


if __name__ == '__main__':
    main(sys.argv[1:])
