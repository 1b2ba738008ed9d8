"""MLIR text, as far as StableHLO programs use it: the syntax tree and its parser.

Owns: the tree (``Value``, ``Block``, ``Op``; a module is an ``Op`` named ``builtin.module``
whose one block holds ``func.func`` ops), MLIR types (``TensorType``, ``TupleType``,
``TokenType``, ``FunctionType``, ...) and attributes (integers, floats, strings, arrays,
dictionaries, ``dense<...>`` elements, ``array<i64: ...>``, symbol references, dialect
attributes such as ``#stablehlo.gather<...>`` kept with their text), the generic op syntax
(``"stablehlo.add"(%0, %1) <{props}> ({regions}) {attrs} : (...) -> ...``), locations
(``loc(...)``, ``#loc`` aliases: parsed, their names kept for instruction names), attribute
and type aliases, and the ``{-# dialect_resources #-}`` section of ``dense_resource``
blobs. Ops with a custom ("pretty") syntax are read by ``xlapy.stablehlo.pretty``. SSA
names resolve while parsing (MLIR's scoping: a region sees the values of the regions around
it; a function does not). Every failure is a ParseError with line, column and a caret.
Imports only the shape layer and errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.shape.text import Scanner


class LocatedError(InvalidArgumentError):
    """An error found after parsing, with the text position it belongs to (the translation
    turns it into a ParseError with line and column)."""

    def __init__(self, message: str, pos: int):
        super().__init__(message)
        self.pos = pos

# -- types ---------------------------------------------------------------------------------


class MType:
    """Base of MLIR types."""


@dataclass(frozen=True)
class TensorType(MType):
    """``tensor<4x?xf32, #stablehlo.bounds<?, 8>>``: dims (None for ``?``), the element
    type's MLIR spelling (``f32``, ``i1``, ``ui8``, ``complex<f32>``, ``f8E4M3FN``), bounds."""

    dims: tuple
    elem: str
    bounds: tuple | None = None

    def __str__(self) -> str:
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.dims)
        enc = ""
        if self.bounds is not None:
            enc = ", #stablehlo.bounds<" + ", ".join(
                "?" if b is None else str(b) for b in self.bounds) + ">"
        return f"tensor<{dims}{self.elem}{enc}>"


@dataclass(frozen=True)
class TupleType(MType):
    types: tuple

    def __str__(self) -> str:
        return "tuple<" + ", ".join(map(str, self.types)) + ">"


@dataclass(frozen=True)
class TokenType(MType):
    def __str__(self) -> str:
        return "!stablehlo.token"


@dataclass(frozen=True)
class ScalarType(MType):
    """A bare element type (``i32``, ``f32``, ``index``, ``complex<f32>``)."""

    elem: str

    def __str__(self) -> str:
        return self.elem


@dataclass(frozen=True)
class FunctionType(MType):
    inputs: tuple
    results: tuple

    def __str__(self) -> str:
        res = ", ".join(map(str, self.results))
        if len(self.results) != 1 or isinstance(self.results[0], FunctionType):
            res = f"({res})"
        return "(" + ", ".join(map(str, self.inputs)) + ") -> " + res


@dataclass(frozen=True)
class OtherType(MType):
    """A type xlapy does not interpret (``!quant.uniform<...>``, ``memref<...>``)."""

    text: str

    def __str__(self) -> str:
        return self.text


# -- attributes ----------------------------------------------------------------------------


class Attr:
    """Base of attributes: ``pos`` is where its text starts, ``text`` its source text."""

    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class IntAttr(Attr):
    value: int
    type: MType | None = None
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class FloatAttr(Attr):
    value: float
    type: MType | None = None
    raw: str = ""  # the literal as written (hex floats are bit patterns)
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class BoolAttr(Attr):
    value: bool
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class UnitAttr(Attr):
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class StrAttr(Attr):
    value: str
    type: MType | None = None
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class ArrayAttr(Attr):
    items: list
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class DenseArrayAttr(Attr):
    """``array<i64: 1, 2>``: values are ints (bools for ``i1``, floats for float types)."""

    elem: str
    values: tuple
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class DictAttr(Attr):
    items: dict
    pos: int = 0
    text: str = ""

    def get(self, key, default=None):
        return self.items.get(key, default)


@dataclass(eq=False)
class SymbolAttr(Attr):
    name: str
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class TypeAttr(Attr):
    type: MType
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class DenseAttr(Attr):
    """``dense<...> : type``. ``payload`` is the nested element structure: lists of
    ``Element`` (a splat is a single Element, ``dense<>`` an empty list), or a ``str`` for a
    hex blob ``"0x..."``; ``resource`` names a ``dense_resource`` blob instead."""

    type: MType
    payload: Any = None
    resource: str | None = None
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class Element:
    """One element of a dense literal, as written: ``raw`` is the token (``1.5``,
    ``0x7FC00000``, ``true``, ``-3``) or a pair of tokens for a complex ``(re, im)``."""

    raw: Any
    pos: int


@dataclass(eq=False)
class DialectAttr(Attr):
    """``#dialect.mnemonic<body>`` or ``#dialect<body>`` (enum attributes such as
    ``#stablehlo<comparison_direction EQ>``): kept as its body text, read on demand with
    ``sub_scanner``."""

    dialect: str
    mnemonic: str
    body: str
    body_pos: int
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class EnumAttr(Attr):
    """An enum value written bare in a custom syntax (``EQ``, ``FLOAT``, ``DEFAULT``)."""

    value: str
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class StructAttr(Attr):
    """A structured value read from a custom syntax or a dialect attribute's body (dot or
    convolution dimension numbers, windows): ``fields`` by their generic names."""

    fields: dict
    pos: int = 0
    text: str = ""


@dataclass(eq=False)
class OpaqueAttr(Attr):
    """Text xlapy does not interpret (``affine_map<...>``, ``loc(...)``)."""

    pos: int = 0
    text: str = ""


# -- IR ------------------------------------------------------------------------------------


class Value:
    """An SSA value: a block argument or one result of an op."""

    __slots__ = ("name", "type", "pos", "owner", "index", "loc")

    def __init__(self, name: str, type: MType, pos: int, owner=None, index: int = 0):
        self.name = name
        self.type = type
        self.pos = pos
        self.owner = owner  # the defining Op, or the Block of an argument
        self.index = index
        self.loc: str | None = None

    def __repr__(self) -> str:
        return f"<Value {self.name}: {self.type}>"


@dataclass(eq=False)
class Block:
    args: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    parent: "Op | None" = None


@dataclass(eq=False)
class Op:
    name: str
    operands: list = field(default_factory=list)
    results: list = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    regions: list = field(default_factory=list)  # each region: a list of Blocks
    pos: int = 0  # where the op starts (its results, or its name)
    name_pos: int = 0
    loc: str | None = None  # the name of its location, if it has one
    parent: Block | None = None

    @property
    def result_types(self) -> list:
        return [v.type for v in self.results]

    def __repr__(self) -> str:
        return f"<Op {self.name} at {self.pos}>"


# -- lexical patterns ----------------------------------------------------------------------

_SUFFIX_ID = r"(?:\d+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)"
_VALUE_USE = re.compile(r"%(" + _SUFFIX_ID + r")(?:#(\d+))?")
_VALUE_DEF = re.compile(r"%(" + _SUFFIX_ID + r")(?::(\d+))?")
_BLOCK_ID = re.compile(r"\^(" + _SUFFIX_ID + r")")
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")
_SYMBOL = re.compile(r'@(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_$.\-][A-Za-z0-9_$.\-]*))')
_ALIAS = re.compile(r"([#!])([A-Za-z_][A-Za-z0-9_$.]*)")
_NUMBER = re.compile(r"[-+]?(?:0x[0-9A-Fa-f]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)\b")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_DIM = re.compile(r"(\d+|\?)x")
_INT_TYPE = re.compile(r"(?:[su]?i)(\d+)\b")
_FLOAT_TYPES = frozenset({
    "f16", "f32", "f64", "f80", "f128", "bf16", "tf32", "f8E5M2", "f8E4M3", "f8E4M3FN",
    "f8E4M3B11FNUZ", "f8E3M4", "f8E5M2FNUZ", "f8E4M3FNUZ", "f4E2M1FN", "f8E8M0FNU",
    "f6E3M2FN", "f6E2M3FN",
})


def unescape(body: str) -> str:
    """An MLIR string literal's contents: ``\\"``, ``\\\\``, ``\\n``, ``\\t`` and two-digit
    hex escapes ``\\0A`` (MLIR prints bytes it cannot show that way)."""
    if "\\" not in body:
        return body
    out = bytearray()
    i = 0
    raw = body.encode("utf-8")
    while i < len(raw):
        c = raw[i]
        if c == 0x5C and i + 1 < len(raw):  # backslash
            n = chr(raw[i + 1])
            if n in "\"\\":
                out.append(raw[i + 1])
                i += 2
                continue
            if n == "n":
                out.append(10)
                i += 2
                continue
            if n == "t":
                out.append(9)
                i += 2
                continue
            hexpair = raw[i + 1:i + 3].decode("ascii", "replace")
            if re.fullmatch(r"[0-9A-Fa-f]{2}", hexpair):
                out.append(int(hexpair, 16))
                i += 3
                continue
        out.append(c)
        i += 1
    return out.decode("utf-8", "replace")


class MlirParser:
    """Parses one MLIR text. ``parse()`` returns the module op (an implicit module wraps
    top-level ops written without ``module { }``, as in StableHLO's tests)."""

    def __init__(self, text: str, what: str = "stablehlo"):
        self.sc = Scanner(text, what)
        self.text = text
        self.scopes: list[dict[str, list[Value]]] = []
        self._alias_pos: dict[str, int] = {}  # '#name' / '!name' -> where its value starts
        self._alias_cache: dict[str, Any] = {}
        self._alias_busy: set[str] = set()
        self.resources: dict[str, tuple[str, int]] = {}  # blob name -> (hex text, pos)
        self._find_aliases_and_resources()

    # -- errors and small readers ----------------------------------------------------------

    def error(self, message: str, pos: int | None = None):
        self.sc.error(message, pos)

    def expect(self, s: str, context: str = "") -> None:
        self.sc.expect(s, context)

    def eat(self, s: str) -> bool:
        return self.sc.eat(s)

    def peek(self, n: int = 1) -> str:
        return self.sc.peek(n)

    def peek_re(self, pattern: re.Pattern):
        return self.sc.peek_re(pattern)

    def here(self) -> int:
        self.sc.skip()
        return self.sc.pos

    def eat_keyword(self, word: str) -> bool:
        m = self.peek_re(_BARE_ID)
        if m and m.group(0) == word:
            self.sc.pos = m.end()
            return True
        return False

    def expect_keyword(self, word: str, context: str = "") -> None:
        if not self.eat_keyword(word):
            self.error(f"expected '{word}'{' ' + context if context else ''}, found "
                       f"{self.sc.describe_next()}")

    def read_bare_id(self, what: str) -> str:
        m = self.peek_re(_BARE_ID)
        if not m:
            self.error(f"expected {what}, found {self.sc.describe_next()}")
        self.sc.pos = m.end()
        return m.group(0)

    def read_key(self, what: str = "an attribute name") -> str:
        if self.peek() == '"':
            return self.read_string(what)
        m = self.peek_re(_KEY)
        if not m:
            self.error(f"expected {what}, found {self.sc.describe_next()}")
        self.sc.pos = m.end()
        return m.group(0)

    def read_string(self, what: str = "a string") -> str:
        m = self.peek_re(_STRING)
        if not m:
            self.error(f"expected {what}, found {self.sc.describe_next()}")
        self.sc.pos = m.end()
        return unescape(m.group(1))

    def read_int(self, what: str = "an integer") -> int:
        m = self.peek_re(_NUMBER)
        if not m or not re.fullmatch(r"[-+]?(?:0x[0-9A-Fa-f]+|\d+)", m.group(0)):
            self.error(f"expected {what}, found {self.sc.describe_next()}")
        self.sc.pos = m.end()
        return int(m.group(0), 0)

    def read_symbol(self, what: str = "a symbol name (@name)") -> str:
        m = self.peek_re(_SYMBOL)
        if not m:
            self.error(f"expected {what}, found {self.sc.describe_next()}")
        self.sc.pos = m.end()
        return unescape(m.group(1)) if m.group(1) is not None else m.group(2)

    def skip_balanced(self, open_: str, close: str) -> str:
        """From an ``open_`` to its matching ``close`` (strings skipped); returns the text
        between them."""
        sc = self.sc
        start = self.here()
        self.expect(open_)
        depth = 1
        i = sc.pos
        text = sc.text
        pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
        stack = [close]
        while i < len(text):
            ch = text[i]
            if ch == '"':
                m = _STRING.match(text, i)
                i = m.end() if m else i + 1
                continue
            if ch == "-" and text.startswith("->", i):
                i += 2
                continue
            if ch in pairs:
                stack.append(pairs[ch])
                depth += 1
            elif ch in ")]}>":
                if ch != stack[-1]:
                    if ch == ">" and stack[-1] != ">":  # a '>' that is a comparison
                        i += 1
                        continue
                    self.error(f"unbalanced '{ch}' (expected '{stack[-1]}')", i)
                stack.pop()
                depth -= 1
                if depth == 0:
                    sc.pos = i + 1
                    return text[start + 1:i]
            i += 1
        self.error(f"expected '{close}' to close the '{open_}' here, found end of input", start)

    # -- aliases and resources -------------------------------------------------------------

    def _find_aliases_and_resources(self) -> None:
        for m in re.finditer(r"(?m)^[ \t]*([#!][A-Za-z_][A-Za-z0-9_$.]*)[ \t]*=", self.text):
            self._alias_pos.setdefault(m.group(1), m.end())
        m = re.search(r"\{-#", self.text)
        if m:
            end = self.text.find("#-}", m.end())
            if end < 0:
                self.error("expected '#-}' to end the file's metadata section", m.start())
            body = self.text[m.end():end]
            for b in re.finditer(r'([A-Za-z_][A-Za-z0-9_$.\-]*)\s*:\s*"(0x[0-9A-Fa-f]*)"', body):
                self.resources[b.group(1)] = (b.group(2), m.end() + b.start(2))

    def _resolve_alias(self, name: str, pos: int, kind: str):
        if name in self._alias_cache:
            return self._alias_cache[name]
        start = self._alias_pos.get(name)
        if start is None:
            self.error(f"undefined {kind} alias {name}", pos)
        if name in self._alias_busy:
            self.error(f"{kind} alias {name} refers to itself", pos)
        self._alias_busy.add(name)
        saved = self.sc.pos
        self.sc.pos = start
        value = self.parse_attr() if kind == "attribute" else self.parse_type()
        self.sc.pos = saved
        self._alias_busy.discard(name)
        self._alias_cache[name] = value
        return value

    # -- types -----------------------------------------------------------------------------

    def parse_type(self) -> MType:
        sc = self.sc
        start = self.here()
        if self.peek() == "(":
            inputs = self._type_list_in_parens()
            self.expect("->", "after the inputs of a function type")
            if self.peek() == "(":
                results = self._type_list_in_parens()
            else:
                results = (self.parse_type(),)
            return FunctionType(tuple(inputs), tuple(results))
        m = self.peek_re(_ALIAS)
        if m and m.group(1) == "!":
            name = m.group(2)
            if name == "stablehlo.token" or name == "mhlo.token":
                sc.pos = m.end()
                return TokenType()
            if "." not in name:  # a type alias
                sc.pos = m.end()
                return self._resolve_alias("!" + name, start, "type")
            sc.pos = m.end()
            if self.peek() == "<":
                self.skip_balanced("<", ">")
            return OtherType(sc.text[start:sc.pos])
        word = self.read_bare_id("a type")
        if word == "tensor":
            return self._tensor_type(start)
        if word == "tuple":
            self.expect("<", "after 'tuple'")
            types = []
            if not self.eat(">"):
                while True:
                    types.append(self.parse_type())
                    if self.eat(">"):
                        break
                    self.expect(",", "or '>' in a tuple type")
            return TupleType(tuple(types))
        if word == "complex":
            self.expect("<", "after 'complex'")
            inner = self.read_bare_id("a complex element type")
            if inner not in ("f32", "f64"):
                self.error(f"complex<{inner}> has no XLA element type (complex<f32> and "
                           "complex<f64> do)", start)
            self.expect(">", "to end complex<...>")
            return ScalarType(f"complex<{inner}>")
        if word == "token":
            return TokenType()
        if word in ("memref", "vector", "none"):
            if self.peek() == "<":
                self.skip_balanced("<", ">")
            return OtherType(sc.text[start:sc.pos])
        if word == "index" or word in _FLOAT_TYPES or _INT_TYPE.fullmatch(word):
            return ScalarType(word)
        self.error(f"expected a type, found '{word}'", start)

    def _type_list_in_parens(self) -> list:
        self.expect("(")
        out = []
        if self.eat(")"):
            return out
        while True:
            out.append(self.parse_type())
            if self.eat(")"):
                return out
            self.expect(",", "or ')' in a list of types")

    def _tensor_type(self, start: int) -> TensorType:
        sc = self.sc
        self.expect("<", "after 'tensor'")
        dims = []
        while True:
            self.sc.skip()
            m = _DIM.match(sc.text, sc.pos)
            if not m:
                break
            sc.pos = m.end()
            dims.append(None if m.group(1) == "?" else int(m.group(1)))
        if sc.text.startswith("*", sc.pos):
            self.error("unranked tensors (tensor<*x...>) have no HLO shape", start)
        elem_pos = self.here()
        elem_type = self.parse_type()
        if isinstance(elem_type, ScalarType):
            elem = elem_type.elem
        elif isinstance(elem_type, OtherType):
            elem = elem_type.text
        else:
            self.error(f"expected an element type in a tensor type, found {elem_type}", elem_pos)
        bounds = None
        if self.eat(","):
            enc_pos = self.here()
            enc = self.parse_attr()
            if isinstance(enc, DialectAttr) and enc.mnemonic in ("bounds", "type_extensions"):
                bounds = self._read_bounds(enc, len(dims))
            else:
                self.error("expected #stablehlo.bounds<...> as the tensor encoding", enc_pos)
        self.expect(">", "to end the tensor type")
        return TensorType(tuple(dims), elem, bounds)

    def _read_bounds(self, enc: DialectAttr, rank: int) -> tuple:
        sub = self.sub_parser(enc)
        if enc.mnemonic == "type_extensions":  # mhlo spelling: <bounds = [...]>
            sub.expect_keyword("bounds")
            sub.expect("=")
            sub.expect("[")
            close = "]"
        else:
            close = None
        out = []
        while not sub.sc.at_end() and sub.peek() != close:
            if sub.eat("?"):
                out.append(None)
            else:
                out.append(sub.read_int("a bound or '?'"))
            if not sub.eat(","):
                break
        if close:
            sub.expect(close)
        if len(out) != rank:
            self.error(f"bounds have {len(out)} entries for a tensor of rank {rank}", enc.pos)
        return tuple(out)

    def sub_parser(self, attr: DialectAttr) -> "MlirParser":
        """A parser over a dialect attribute's body, reporting positions in this text."""
        sub = MlirParser.__new__(MlirParser)
        sub.sc = _SubScanner(self.text, attr.body_pos, attr.body_pos + len(attr.body),
                             self.sc.what)
        sub.text = self.text
        sub.scopes = []
        sub._alias_pos = self._alias_pos
        sub._alias_cache = self._alias_cache
        sub._alias_busy = self._alias_busy
        sub.resources = self.resources
        return sub

    # -- attributes ------------------------------------------------------------------------

    def parse_attr(self, typed: bool = True) -> Attr:
        """An attribute. ``typed=False``: a number, string or boolean does not take a
        ``: type`` suffix (custom syntaxes where the op's type follows)."""
        saved = self._typed
        self._typed = typed
        try:
            return self._parse_attr_value()
        finally:
            self._typed = saved

    def _finish(self, attr: Attr, start: int) -> Attr:
        attr.pos = start
        attr.text = self.sc.text[start:self.sc.pos]
        return attr

    _typed = True

    def _opt_colon_type(self) -> MType | None:
        if not self._typed:
            return None
        sc = self.sc
        save = sc.pos
        if self.eat(":") and not self.peek() == ":":
            return self.parse_type()
        sc.pos = save
        return None

    def _parse_attr_value(self) -> Attr:
        sc = self.sc
        start = self.here()
        ch = self.peek()
        if ch == "[":
            sc.pos += 1
            items = []
            if not self.eat("]"):
                while True:
                    items.append(self.parse_attr(True))
                    if self.eat("]"):
                        break
                    self.expect(",", "or ']' in an array attribute")
            return self._finish(ArrayAttr(items), start)
        if ch == "{":
            return self._finish(DictAttr(self.parse_attr_dict_body()), start)
        if ch == "(":  # a function type: function_type = (...) -> ...
            return self._finish(TypeAttr(self.parse_type()), start)
        if ch == '"':
            value = self.read_string()
            return self._finish(StrAttr(value, self._opt_colon_type()), start)
        if ch == "@":
            name = self.read_symbol()
            while sc.text.startswith("::", sc.pos):
                sc.pos += 2
                name += "::" + self.read_symbol()
            return self._finish(SymbolAttr(name), start)
        if ch in "#!":
            m = self.peek_re(_ALIAS)
            if not m:
                self.error(f"expected an attribute, found {sc.describe_next()}")
            if ch == "!":
                return self._finish(TypeAttr(self.parse_type()), start)
            name = m.group(2)
            sc.pos = m.end()
            if sc.text.startswith("<", sc.pos) or "." in name:
                dialect, _, mnemonic = name.partition(".")
                body, body_pos = "", sc.pos
                if sc.text.startswith("<", sc.pos):
                    body_pos = sc.pos + 1
                    body = self.skip_balanced("<", ">")
                return self._finish(DialectAttr(dialect, mnemonic, body, body_pos), start)
            return self._resolve_alias("#" + name, start, "attribute")
        m = self.peek_re(_NUMBER)
        if m and (ch in "-+0123456789" or m.group(0) in ("inf", "nan")):
            raw = m.group(0)
            sc.pos = m.end()
            typ = self._opt_colon_type()
            float_type = isinstance(typ, ScalarType) and _is_float_name(typ.elem)
            body = raw.lstrip("+-").lower()
            if body.startswith("0x"):
                if float_type:  # a float written as its bit pattern
                    return self._finish(FloatAttr(float("nan"), typ, raw), start)
                return self._finish(IntAttr(int(raw, 0), typ), start)
            if "." in body or "e" in body or body in ("inf", "nan") or float_type:
                return self._finish(FloatAttr(float(raw), typ, raw), start)
            return self._finish(IntAttr(int(raw, 10), typ), start)
        word_m = self.peek_re(_BARE_ID)
        if not word_m:
            self.error(f"expected an attribute, found {sc.describe_next()}")
        word = word_m.group(0)
        if word in ("true", "false"):
            sc.pos = word_m.end()
            self._opt_colon_type()
            return self._finish(BoolAttr(word == "true"), start)
        if word == "unit":
            sc.pos = word_m.end()
            return self._finish(UnitAttr(), start)
        if word in ("dense", "dense_resource"):
            sc.pos = word_m.end()
            return self._dense(start, word == "dense_resource")
        if word == "array":
            sc.pos = word_m.end()
            return self._dense_array(start)
        if word == "loc":
            sc.pos = word_m.end()
            self.skip_balanced("(", ")")
            return self._finish(OpaqueAttr(), start)
        if word in ("affine_map", "affine_set", "sparse", "strided", "distinct", "opaque"):
            sc.pos = word_m.end()
            if self.peek() == "[":
                self.skip_balanced("[", "]")
            if self.peek() == "<":
                self.skip_balanced("<", ">")
            self._opt_colon_type()
            return self._finish(OpaqueAttr(), start)
        # A type used as an attribute (function_type = (...) -> ..., type = f32).
        typ = self.parse_type()
        return self._finish(TypeAttr(typ), start)

    def parse_attr_dict_body(self) -> dict:
        """``{key = value, flag, ...}`` (the braces included); a key without a value is a
        unit attribute."""
        self.expect("{")
        out: dict[str, Attr] = {}
        if self.eat("}"):
            return out
        while True:
            key_pos = self.here()
            key = self.read_key()
            if key in out:
                self.error(f"duplicate attribute '{key}'", key_pos)
            if self.eat("="):
                out[key] = self.parse_attr()
            else:
                out[key] = UnitAttr(pos=key_pos, text=key)
            if self.eat("}"):
                return out
            self.expect(",", "or '}' in an attribute dictionary")

    def _dense(self, start: int, resource: bool) -> DenseAttr:
        sc = self.sc
        self.expect("<", "after 'dense'")
        payload: Any = None
        res_name = None
        if resource:
            res_name = self.read_key("a resource name")
            self.expect(">", "to end dense_resource<...>")
        elif self.eat(">"):
            payload = []
        else:
            if self.peek() == '"':
                hpos = self.here()
                payload = self.read_string("a hex string")
                if not re.fullmatch(r"0x[0-9A-Fa-f]*", payload):
                    self.error("expected a hex string \"0x...\" in dense<...>", hpos)
            else:
                payload = self._dense_elements()
            self.expect(">", "to end dense<...>")
        self.expect(":", "and the type after a dense<...> literal")
        type_pos = self.here()
        typ = self.parse_type()
        if not isinstance(typ, (TensorType, OtherType)):
            self.error(f"a dense literal needs a tensor type, found {typ}", type_pos)
        return self._finish(DenseAttr(typ, payload, res_name), start)

    def _dense_elements(self):
        sc = self.sc
        if self.eat("["):
            items = []
            if not self.eat("]"):
                while True:
                    items.append(self._dense_elements())
                    if self.eat("]"):
                        break
                    self.expect(",", "or ']' in a dense literal")
            return items
        pos = self.here()
        if self.eat("("):
            re_ = self._element_token()
            self.expect(",", "between the parts of a complex element")
            im = self._element_token()
            self.expect(")", "to end a complex element")
            return Element((re_, im), pos)
        return Element(self._element_token(), pos)

    def _element_token(self) -> str:
        m = self.peek_re(_NUMBER)
        if m:
            self.sc.pos = m.end()
            return m.group(0)
        m = self.peek_re(_BARE_ID)
        if m and m.group(0) in ("true", "false"):
            self.sc.pos = m.end()
            return m.group(0)
        self.error(f"expected a number in a dense literal, found {self.sc.describe_next()}")

    def _dense_array(self, start: int) -> DenseArrayAttr:
        self.expect("<", "after 'array'")
        elem = self.read_bare_id("an element type")
        values = []
        if self.eat(":"):
            while True:
                m = self.peek_re(_NUMBER)
                word = self.peek_re(_BARE_ID)
                if m:
                    self.sc.pos = m.end()
                    raw = m.group(0)
                    values.append(float(raw) if _is_float_name(elem) else int(raw, 0))
                elif word and word.group(0) in ("true", "false"):
                    self.sc.pos = word.end()
                    values.append(word.group(0) == "true")
                else:
                    self.error(f"expected a number in array<...>, found {self.sc.describe_next()}")
                if not self.eat(","):
                    break
        self.expect(">", "to end array<...>")
        if elem == "i1":
            values = [bool(v) for v in values]
        return self._finish(DenseArrayAttr(elem, tuple(values)), start)

    # -- locations -------------------------------------------------------------------------

    def opt_loc(self) -> str | None:
        """An optional trailing ``loc(...)``; returns its name (a NameLoc's string, found
        through ``#loc`` aliases and call sites), or None."""
        if not self.eat_keyword("loc"):
            return None
        start = self.here()
        body = self.skip_balanced("(", ")")
        return self._loc_name(body, start, 0)

    def _loc_name(self, body: str, pos: int, depth: int) -> str | None:
        body = body.strip()
        if depth > 20:
            return None
        m = re.match(r'"((?:[^"\\]|\\.)*)"', body)
        if m:
            rest = body[m.end():].lstrip()
            if rest.startswith(":"):  # a file location "file":line:col
                return None
            return unescape(m.group(1))
        m = re.match(r"#([A-Za-z_][A-Za-z0-9_$.]*)$", body)
        if m:
            start = self._alias_pos.get("#" + m.group(1))
            if start is None:
                return None
            lm = re.compile(r"\s*loc\(").match(self.text, start)
            if not lm:
                return None
            saved = self.sc.pos
            self.sc.pos = lm.end() - 1
            try:
                inner = self.skip_balanced("(", ")")
            finally:
                self.sc.pos = saved
            return self._loc_name(inner, start, depth + 1)
        m = re.match(r"callsite\((.*)\s+at\s+", body, re.S)
        if m:
            return self._loc_name(m.group(1), pos, depth + 1)
        return None

    # -- values ----------------------------------------------------------------------------

    def define(self, name: str, values: list, pos: int) -> None:
        scope = self.scopes[-1]
        for s in self.scopes:
            if name in s:
                self.error(f"redefinition of SSA value '%{name}'", pos)
        scope[name] = values

    def use(self) -> Value:
        pos = self.here()
        m = self.peek_re(_VALUE_USE)
        if not m:
            self.error(f"expected an SSA value (%name), found {self.sc.describe_next()}")
        self.sc.pos = m.end()
        name = m.group(1)
        for scope in reversed(self.scopes):
            if name in scope:
                values = scope[name]
                break
        else:
            self.error(f"use of undefined value '%{name}'", pos)
        index = int(m.group(2)) if m.group(2) is not None else 0
        if index >= len(values):
            self.error(f"'%{name}' has {len(values)} result{'s' if len(values) != 1 else ''}; "
                       f"#{index} does not exist", pos)
        if m.group(2) is None and len(values) != 1:
            self.error(f"'%{name}' has {len(values)} results: use '%{name}#i'", pos)
        return values[index]

    def peek_value(self) -> bool:
        return self.peek() == "%"

    def use_list(self) -> list:
        """``%a, %b, ...`` (possibly empty, stopping at anything that is not a value)."""
        out = []
        if not self.peek_value():
            return out
        while True:
            out.append(self.use())
            save = self.sc.pos
            if self.eat(",") and self.peek_value():
                continue
            self.sc.pos = save
            return out

    # -- file, ops, regions ----------------------------------------------------------------

    def parse(self) -> Op:
        sc = self.sc
        try:
            self._skip_alias_definitions()
            start = self.here()
            m = self.peek_re(_BARE_ID)
            if m and m.group(0) in ("module", "builtin.module"):
                module = self._module()
                self._skip_alias_definitions()
                self._skip_resources()
                if not sc.at_end():
                    self.error(f"expected end of input after the module, found "
                               f"{sc.describe_next()}")
                return module
            # An implicit module: top-level ops (StableHLO's tests write bare funcs).
            module = Op("builtin.module", pos=start, name_pos=start)
            block = Block(parent=module)
            self.scopes.append({})
            while True:
                self._skip_alias_definitions()
                self._skip_resources()
                if sc.at_end():
                    break
                op = self.operation(block)
                block.ops.append(op)
            self.scopes.pop()
            module.regions = [[block]]
            if not block.ops:
                self.error("expected a module or a func.func, found end of input", start)
            return module
        except RecursionError:
            raise ParseError("maximum recursion depth exceeded (nesting too deep)", sc.text,
                             sc.pos, sc.what) from None

    def _skip_alias_definitions(self) -> None:
        sc = self.sc
        while True:
            m = re.compile(r"\s*([#!][A-Za-z_][A-Za-z0-9_$.]*)\s*=").match(sc.text, sc.pos)
            if not m:
                return
            sc.pos = m.end()
            if m.group(1).startswith("#"):
                self.parse_attr()
            else:
                self.parse_type()

    def _skip_resources(self) -> None:
        sc = self.sc
        if self.peek(3) == "{-#":
            end = sc.text.find("#-}", sc.pos)
            sc.pos = end + 3

    def _module(self) -> Op:
        start = self.here()
        name_pos = start
        self.read_bare_id("'module'")
        module = Op("builtin.module", pos=start, name_pos=name_pos)
        if self.peek() == "@":
            module.attrs["sym_name"] = StrAttr(self.read_symbol(), pos=self.sc.pos)
        if self.eat_keyword("attributes"):
            module.attrs.update(self.parse_attr_dict_body())
        self.scopes.append({})
        block = Block(parent=module)
        self.expect("{", "to start the module body")
        while not self.eat("}"):
            if self.sc.at_end():
                self.error("expected '}' to end the module, found end of input")
            block.ops.append(self.operation(block))
        self.scopes.pop()
        module.regions = [[block]]
        module.loc = self.opt_loc()
        return module

    def operation(self, block: Block) -> Op:
        """``%a, %b:2 = op-name ...`` in the generic or the op's custom syntax."""
        sc = self.sc
        start = self.here()
        defs: list[tuple[str, int, int]] = []  # (name, count, pos)
        if self.peek() == "%":
            while True:
                dpos = self.here()
                m = self.peek_re(_VALUE_DEF)
                if not m:
                    self.error(f"expected a result name, found {sc.describe_next()}")
                sc.pos = m.end()
                defs.append((m.group(1), int(m.group(2)) if m.group(2) else 1, dpos))
                if self.eat("="):
                    break
                self.expect(",", "or '=' after the result names")
        name_pos = self.here()
        n_names = sum(count for _, count, _ in defs)
        if self.peek() == '"':
            name = self.read_string("an op name")
            op = Op(name, pos=start, name_pos=name_pos, parent=block)
            result_types = self._generic_body(op)
        else:
            m = self.peek_re(_KEY)
            if not m:
                self.error(f"expected an operation, found {sc.describe_next()}")
            name = m.group(0)
            sc.pos = m.end()
            from xlapy.stablehlo.pretty import parse_custom

            op, result_types = parse_custom(self, name, start, name_pos, block, n_names)
        if result_types is None:
            result_types = []
        if n_names != len(result_types):
            what = f"{len(result_types)} result{'s' if len(result_types) != 1 else ''}"
            self.error(f"'{op.name}' has {what} but {n_names} result name"
                       f"{'s are' if n_names != 1 else ' is'} given", start if defs else name_pos)
        i = 0
        results = []
        for dname, count, dpos in defs:
            values = []
            for _ in range(count):
                v = Value(dname if count == 1 else f"{dname}#{len(values)}", result_types[i],
                          dpos, op, i)
                values.append(v)
                results.append(v)
                i += 1
            self.define(dname, values, dpos)
        if not defs:
            results = [Value(f"{op.name}#{k}", t, name_pos, op, k)
                       for k, t in enumerate(result_types)]
        op.results = results
        loc = self.opt_loc()
        if loc is not None:
            op.loc = loc
        return op

    def _generic_body(self, op: Op) -> list:
        """``(operands) [successors]? <{props}>? (regions)? {attrs}? : functional-type``."""
        self.expect("(", f"after the op name \"{op.name}\"")
        if not self.eat(")"):
            while True:
                op.operands.append(self.use())
                if self.eat(")"):
                    break
                self.expect(",", "or ')' in the operand list")
        if self.peek() == "[":
            self.error(f"\"{op.name}\": block successors are not supported (HLO programs "
                       "have one block per region)")
        if self.peek(2) == "<{":
            self.expect("<")
            op.attrs.update(self.parse_attr_dict_body())
            self.expect(">", "to end the properties <{...}>")
        if self.peek() == "(":
            self.expect("(")
            while True:
                op.regions.append(self.region(op))
                if self.eat(")"):
                    break
                self.expect(",", "or ')' in the region list")
        if self.peek() == "{":
            for k, v in self.parse_attr_dict_body().items():
                op.attrs[k] = v
        self.expect(":", f"and the type of \"{op.name}\"")
        tpos = self.here()
        ftype = self.parse_type()
        if not isinstance(ftype, FunctionType):
            self.error(f"expected a function type (inputs) -> results for \"{op.name}\", "
                       f"found {ftype}", tpos)
        if len(ftype.inputs) != len(op.operands):
            self.error(f"\"{op.name}\" has {len(op.operands)} operands but its type lists "
                       f"{len(ftype.inputs)}", tpos)
        for v, t in zip(op.operands, ftype.inputs):
            if not types_match(v.type, t):
                self.error(f"operand %{v.name} has type {v.type}, but the op's type says {t}",
                           tpos)
        return list(ftype.results)

    def region(self, owner: Op, args: list | None = None) -> list:
        """``{ ^bb0(%a: t, ...): ops... }`` (or without a block header). ``args``: block
        arguments given by a custom syntax (name, type, pos). Returns a list of Blocks."""
        self.expect("{", "to start a region")
        block = Block(parent=owner)
        self.scopes.append({})
        if args is not None:
            for name, typ, pos in args:
                v = Value(name, typ, pos, block, len(block.args))
                block.args.append(v)
                self.define(name, [v], pos)
        if self.peek() == "^":
            if args is not None:
                self.error("this region's arguments are given before it; it has no block "
                           "header")
            self.sc.pos = self.peek_re(_BLOCK_ID).end()
            if self.eat("("):
                if not self.eat(")"):
                    while True:
                        apos = self.here()
                        m = self.peek_re(_VALUE_DEF)
                        if not m or m.group(2):
                            self.error(f"expected a block argument (%name: type), found "
                                       f"{self.sc.describe_next()}")
                        self.sc.pos = m.end()
                        self.expect(":", "after a block argument name")
                        typ = self.parse_type()
                        v = Value(m.group(1), typ, apos, block, len(block.args))
                        v.loc = self.opt_loc()
                        block.args.append(v)
                        self.define(m.group(1), [v], apos)
                        if self.eat(")"):
                            break
                        self.expect(",", "or ')' in the block arguments")
            self.expect(":", "after the block header")
        while not self.eat("}"):
            if self.sc.at_end():
                self.error("expected '}' to end the region, found end of input")
            if self.peek() == "^":
                self.error("regions with more than one block are not supported (HLO "
                           "computations are one block)")
            block.ops.append(self.operation(block))
        self.scopes.pop()
        return [block]


def _is_float_name(elem: str) -> bool:
    return elem in _FLOAT_TYPES


def types_match(a: MType, b: MType) -> bool:
    """Equal types, where a dynamic dimension matches any size (as MLIR's compatibility)."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return (a.elem == b.elem and len(a.dims) == len(b.dims)
                and all(x is None or y is None or x == y for x, y in zip(a.dims, b.dims)))
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        return len(a.types) == len(b.types) and all(map(types_match, a.types, b.types))
    return a == b


class _SubScanner(Scanner):
    """A Scanner confined to ``[start, end)`` of a text (a dialect attribute's body), so
    errors still carry the line and column in the whole file."""

    def __init__(self, text: str, start: int, end: int, what: str):
        super().__init__(text[:end], what)
        self.full = text
        self.pos = start

    def error(self, message: str, pos: int | None = None):
        raise ParseError(message, self.full, self.pos if pos is None else pos, self.what)
