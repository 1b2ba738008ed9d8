"""Small text helpers shared by attribute kinds: C string escapes, quoted strings, floats,
and balanced raw text. Imports only the shape layer's Scanner."""

from __future__ import annotations

import math
import re

from xlapy.shape.text import Scanner

_C_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "'": "\\'", "\\": "\\\\"}


def c_escape(s: str) -> str:
    """absl::CEscape: escapes quotes, backslash, \\n \\r \\t, other control bytes as octal."""
    out = []
    for ch in s:
        if ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\%03o" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


_UNESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|(.))", re.S)
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "'": "'", "\\": "\\", "a": "\a",
           "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def c_unescape(s: str) -> str:
    def sub(m):
        if m.group(1):
            return chr(int(m.group(1), 8))
        if m.group(2):
            return chr(int(m.group(2), 16))
        return _SIMPLE.get(m.group(3), m.group(3))

    return _UNESCAPE.sub(sub, s)


_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)


def read_string(sc: Scanner) -> str:
    m = sc.peek_re(_STRING)
    if not m:
        sc.error(f"expected a double-quoted string, found {sc.describe_next()}")
    sc.pos = m.end()
    return c_unescape(m.group(1))


_FLOAT = re.compile(r"[-+]?(?:inf|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)")


def read_float(sc: Scanner) -> float:
    m = sc.peek_re(_FLOAT)
    if not m:
        sc.error(f"expected a number, found {sc.describe_next()}")
    sc.pos = m.end()
    return float(m.group(0))


def float_text(x: float) -> str:
    """Shortest text that reads back as the same double (XLA's RoundTripFpToString)."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    for precision in range(6, 18):
        text = "%.*g" % (precision, x)
        if float(text) == x:
            return text
    return repr(x)


_OPEN = {"{": "}", "[": "]", "(": ")"}


def read_balanced(sc: Scanner) -> str:
    """Text up to the next top-level ',' or closing bracket, keeping nested brackets and
    quoted strings whole (for values carried through uninterpreted)."""
    sc.skip()
    start = sc.pos
    text = sc.text
    depth = []
    i = start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            m = _STRING.match(text, i)
            if not m:
                sc.error("unterminated string", i)
            i = m.end()
            continue
        if ch in _OPEN:
            depth.append(_OPEN[ch])
        elif depth and ch == depth[-1]:
            depth.pop()
        elif not depth and (ch in ",)}]" or ch == "\n"):
            break
        i += 1
    if depth:
        sc.error(f"unbalanced brackets: expected '{depth[-1]}'", i)
    value = text[start:i].rstrip()
    if not value:
        sc.error("expected a value")
    sc.pos = start + len(value)
    return value
