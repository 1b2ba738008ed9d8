"""Read C++ test files as tools/xla_parser_tests.py needs them: a lexer (comments, raw and
escaped strings, numbers, names), the rows of XLA's parser-test tables and the bodies of its
TEST/TEST_F cases, and a parser of the statement and expression subset those bodies use.
Knows nothing of xlapy."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------------------------
# A C++ lexer: enough for test files (comments, raw and escaped strings, numbers, names).


@dataclass
class Tok:
    kind: str  # "str", "num", "id", "op"
    value: Any
    line: int

    def __repr__(self) -> str:
        return f"{self.kind}:{self.value!r}"


_OPS = ("::", "->", "<<", ">>", "==", "!=", "<=", ">=", "&&", "||", "++", "--", "+=", "-=")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0",
            "?": "?", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 2:])
            out.append(chr(int(m.group(0), 16)))
            i += 2 + len(m.group(0))
        elif nxt in "01234567" and re.match(r"[0-7]{2,3}", body[i + 1:]):
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(chr(int(m.group(0), 8)))
            i += 1 + len(m.group(0))
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def lex(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        line = src.count("\n", 0, i) + 1 if c not in " \t\r\n" else 0
        if c in " \t\r\n":
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            i = src.index("*/", i + 2) + 2
        elif c == "#" and (i == 0 or src[src.rfind("\n", 0, i) + 1:i].strip() == ""):
            while True:  # a preprocessor line, with continuations
                j = src.find("\n", i)
                if j < 0:
                    i = n
                    break
                if src[j - 1] != "\\":
                    i = j
                    break
                i = j + 1
        elif (m := re.compile(r'(?:u8|u|U|L)?R"([^(\s]*)\(').match(src, i)):
            end = src.index(")" + m.group(1) + '"', m.end())
            toks.append(Tok("str", src[m.end():end], line))
            i = end + len(m.group(1)) + 2
        elif c == '"':
            m = re.compile(r'"((?:[^"\\\n]|\\.)*)"').match(src, i)
            toks.append(Tok("str", _unescape(m.group(1)), line))
            i = m.end()
        elif c == "'":
            m = re.compile(r"'((?:[^'\\\n]|\\.)*)'").match(src, i)
            toks.append(Tok("num", ord(_unescape(m.group(1))), line))
            i = m.end()
        elif c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = re.compile(r"[0-9.][0-9a-zA-Z_.']*").match(src, i)
            text = m.group(0).replace("'", "")
            digits = re.sub(r"(?i)[ul]+$", "", text)
            try:
                value: Any = int(digits, 0)
            except ValueError:
                value = float(re.sub(r"(?i)f$", "", digits))
            toks.append(Tok("num", value, line))
            i = m.end()
        elif c.isalpha() or c == "_":
            m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(src, i)
            toks.append(Tok("id", m.group(0), line))
            i = m.end()
        else:
            op = next((o for o in _OPS if src.startswith(o, i)), c)
            toks.append(Tok("op", op, line))
            i += len(op)
    return _merge(toks)


def _merge(toks: list[Tok]) -> list[Tok]:
    """Adjacent string literals concatenate; ``a::b::c`` becomes one name."""
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "str" and out and out[-1].kind == "str":
            out[-1] = Tok("str", out[-1].value + t.value, out[-1].line)
        elif t.kind == "op" and t.value == "::" and i + 1 < len(toks) and toks[i + 1].kind == "id":
            prev = out[-1] if out else None
            if prev is not None and prev.kind == "id":
                out[-1] = Tok("id", prev.value + "::" + toks[i + 1].value, prev.line)
            else:
                out.append(Tok("id", "::" + toks[i + 1].value, t.line))
            i += 1
        else:
            out.append(t)
        i += 1
    # "::testing::HasSubstr" and "testing::HasSubstr" are the same name
    for t in out:
        if t.kind == "id" and t.value.startswith("::"):
            t.value = t.value[2:]
    return out


def _match(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing the one at ``i``."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    want = [pairs[toks[i].value]]
    j = i + 1
    while want:
        t = toks[j]
        if t.kind == "op":
            if t.value in pairs:
                want.append(pairs[t.value])
            elif t.value == want[-1]:
                want.pop()
        j += 1
    return j - 1


# --------------------------------------------------------------------------------------------
# Extraction: the table rows and the TEST bodies.


@dataclass
class Case:
    name: str
    kind: str  # long, short, nonroundtrip, test
    text: str = ""
    expected: str = ""
    replica_count: int = 1
    body: list[Tok] = field(default_factory=list)
    line: int = 0


def _table(toks: list[Tok], function: str) -> list[list[Tok]]:
    """The brace-initialised rows returned by ``function()``."""
    for i, t in enumerate(toks):
        if t.kind == "id" and t.value == function and toks[i + 1].value == "(" \
                and toks[i + 2].value == ")" and toks[i + 3].value == "{":
            end = _match(toks, i + 3)
            j = next(k for k in range(i + 4, end) if toks[k].value == "{")
            close = _match(toks, j)
            rows, k = [], j + 1
            while k < close:
                if toks[k].value == "{":
                    e = _match(toks, k)
                    rows.append([x for x in toks[k + 1:e] if x.value != ","])
                    k = e + 1
                else:
                    k += 1
            return rows
    return []


def extract(src: str) -> list[Case]:
    toks = lex(src)
    cases: list[Case] = []
    for function, kind in (("CreateTestCases", "long"), ("CreateShortTestCases", "short")):
        for row in _table(toks, function):
            cases.append(Case(row[0].value, kind, text=row[1].value, line=row[0].line,
                              replica_count=row[2].value if len(row) > 2 else 1))
    for row in _table(toks, "CreateNonRoundtripTestCases"):
        cases.append(Case(row[0].value, "nonroundtrip", text=row[1].value,
                          expected=row[2].value, line=row[0].line))
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "id" and t.value in ("TEST", "TEST_F") and toks[i + 1].value == "(":
            close = _match(toks, i + 1)
            name = toks[close - 1].value
            body_start = close + 1
            body_end = _match(toks, body_start)
            cases.append(Case(name, "test", body=toks[body_start + 1:body_end], line=t.line))
            i = body_end
        i += 1
    return cases


# --------------------------------------------------------------------------------------------
# Statements and expressions of a TEST body.


class Unsupported(Exception):
    """A C++ construct or accessor the evaluator cannot express in xlapy terms."""


class Failed(Exception):
    """An ASSERT_* failed: the test stops."""


def statements(toks: list[Tok]) -> list[tuple]:
    out, i = [], 0
    while i < len(toks):
        stmt, i = _statement(toks, i)
        if stmt is not None:
            out.append(stmt)
    return out


def _statement(toks: list[Tok], i: int):
    t = toks[i]
    if t.value == ";":
        return None, i + 1
    if t.value == "{" and t.kind == "op":
        end = _match(toks, i)
        return ("block", statements(toks[i + 1:end])), end + 1
    if t.kind == "id" and t.value in ("for", "if", "while"):
        close = _match(toks, i + 1)
        head = toks[i + 2:close]
        body, j = _statement(toks, close + 1)
        if t.value == "if" and j < len(toks) and toks[j].value == "else":
            other, j = _statement(toks, j + 1)
            return ("if", head, body, other), j
        return (t.value, head, body), j
    j = i
    depth = 0
    while j < len(toks) and not (depth == 0 and toks[j].value == ";" and toks[j].kind == "op"):
        if toks[j].kind == "op" and toks[j].value in "({[":
            depth += 1
        elif toks[j].kind == "op" and toks[j].value in ")}]":
            depth -= 1
        j += 1
    return ("expr", toks[i:j]), j + 1


@dataclass
class Node:
    op: str  # lit, name, call, member, index, unary, bin, list, cond
    a: Any = None
    b: Any = None
    c: Any = None


_BINARY = {"||": 1, "&&": 2, "==": 4, "!=": 4, "<": 5, ">": 5, "<=": 5, ">=": 5, "<<": 6,
           "+": 7, "-": 7, "*": 8, "/": 8, "%": 8}


class _ExprParser:
    def __init__(self, toks: list[Tok]):
        self.toks, self.i = toks, 0

    def peek(self, k: int = 0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else Tok("op", "<eof>", 0)

    def take(self, value=None) -> Tok:
        t = self.peek()
        if value is not None and t.value != value:
            raise Unsupported(f"expected {value!r}, found {t.value!r}")
        self.i += 1
        return t

    def expr(self, min_prec: int = 0) -> Node:
        left = self.unary()
        while True:
            t = self.peek()
            if t.kind == "op" and t.value == "?" and min_prec == 0:
                self.take()
                yes = self.expr()
                self.take(":")
                return Node("cond", left, yes, self.expr())
            prec = _BINARY.get(t.value) if t.kind == "op" else None
            if prec is None or prec < min_prec:
                return left
            self.take()
            left = Node("bin", t.value, left, self.expr(prec + 1))

    def unary(self) -> Node:
        t = self.peek()
        if t.kind == "op" and t.value in ("!", "-", "*", "&", "+"):
            self.take()
            return Node("unary", t.value, self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Node:
        t = self.take()
        if t.kind in ("str", "num"):
            return Node("lit", t.value)
        if t.kind == "id":
            if t.value in ("true", "false"):
                return Node("lit", t.value == "true")
            if t.value == "nullptr":
                return Node("lit", None)
            # templates: absl::StatusOr<...>, std::vector<int64_t>{...}
            if self.peek().value == "<" and self._template_ahead():
                depth = 0
                while True:
                    v = self.take().value
                    depth += {"<": 1, ">": -1, ">>": -2}.get(v, 0)
                    if depth <= 0:
                        break
            return Node("name", t.value)
        if t.value == "(":
            inner = self.expr()
            self.take(")")
            if self.peek().kind in ("str", "num", "id") or self.peek().value == "{":
                return self.unary()  # a C-style cast: (type)value
            return inner
        if t.value == "{":
            items = []
            while self.peek().value != "}":
                items.append(self.expr())
                if self.peek().value == ",":
                    self.take()
            self.take("}")
            return Node("list", items)
        raise Unsupported(f"unexpected {t.value!r}")

    def _template_ahead(self) -> bool:
        depth, k = 0, 0
        while True:
            t = self.peek(k)
            if t.value in ("<eof>", ";", "==", "&&", "||"):
                return False
            depth += {"<": 1, ">": -1, ">>": -2}.get(t.value, 0)
            if depth <= 0:
                after = self.peek(k + 1)
                return after.kind == "id" or after.value in ("(", "{", ")", ",")
            k += 1

    def postfix(self, node: Node) -> Node:
        while True:
            t = self.peek()
            if t.value == "(":
                self.take()
                args = []
                while self.peek().value != ")":
                    arg = self.expr()
                    while self.peek().kind == "id":  # "auto module": a declaration
                        arg = Node("name", self.take().value)
                    args.append(arg)
                    if self.peek().value == ",":
                        self.take()
                self.take(")")
                node = Node("call", node, args)
            elif t.value in (".", "->"):
                self.take()
                node = Node("member", node, self.take().value)
            elif t.value == "[":
                self.take()
                idx = self.expr()
                self.take("]")
                node = Node("index", node, idx)
            elif t.value == "{" and node.op == "name":
                node = Node("call", node, self.primary().a)  # T{a, b}: a construction
            else:
                return node


def parse_expr(toks: list[Tok]) -> Node:
    p = _ExprParser(toks)
    node = p.expr()
    if p.i != len(toks):
        raise Unsupported(f"cannot read {' '.join(str(t.value) for t in toks[p.i:p.i + 6])}")
    return node
