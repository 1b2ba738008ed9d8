"""Reading the text forms of shapes and layouts, as XLA's HLO parser reads them.

Owns: Scanner (a cursor over text with XLA-lexer whitespace/comment rules and caret errors),
the shape and layout grammars, and ``parse_shape``/``parse_layout``. The HLO parser reuses
Scanner and ``read_shape``. Imports only the shape layer and errors.
"""

from __future__ import annotations

import re

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.shape import dtypes
from xlapy.shape.layout import COMBINE_DIMENSION, Layout, SplitConfig, Tile
from xlapy.shape.shape import INT64_MAX, UNBOUNDED_SIZE, Shape

_WS = re.compile(r"(?:[ \t\n\r]+|/\*.*?\*/|//[^\n\r]*)+", re.S)  # a // comment ends at \n or \r
_INT = re.compile(r"[-+]?[0-9]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Scanner:
    """A position in a text, skipping whitespace and ``/* */`` / ``//`` comments as XLA's
    lexer does. Errors carry line, column and a caret excerpt."""

    def __init__(self, text: str, what: str = "text"):
        self.text = text
        self.pos = 0
        self.what = what

    def skip(self) -> None:
        m = _WS.match(self.text, self.pos)
        if m:
            self.pos = m.end()

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self, n: int = 1) -> str:
        self.skip()
        return self.text[self.pos : self.pos + n]

    def peek_re(self, pattern: re.Pattern) -> re.Match | None:
        self.skip()
        return pattern.match(self.text, self.pos)

    def eat(self, s: str) -> bool:
        if self.peek(len(s)) == s:
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, context: str = "") -> None:
        if not self.eat(s):
            found = self.describe_next()
            self.error(f"expected '{s}'{' ' + context if context else ''}, found {found}")

    def describe_next(self) -> str:
        self.skip()
        if self.pos >= len(self.text):
            return "end of input"
        if self.text.startswith("/*", self.pos):  # skip() stops only at an unterminated one
            return "an unterminated /* comment"
        m = re.compile(r"[A-Za-z0-9_.\-]+|.").match(self.text, self.pos)
        return repr(m.group(0))

    def read_int(self, what: str = "an integer") -> int:
        m = self.peek_re(_INT)
        if not m:  # XLA's words ("expects integer"), then what the integer is for
            detail = what[len("an integer"):] if what.startswith("an integer") else f" ({what})"
            self.error(f"expects integer{detail}, found {self.describe_next()}")
        self.pos = m.end()
        return int(m.group(0))

    def read_ident(self) -> str | None:
        m = self.peek_re(_IDENT)
        if not m:
            return None
        self.pos = m.end()
        return m.group(0)

    def peek_ident(self) -> str | None:
        m = self.peek_re(_IDENT)
        return m.group(0) if m else None

    def error(self, message: str, pos: int | None = None, notes=()):
        raise ParseError(message, self.text, self.pos if pos is None else pos, self.what, notes)


def parse_shape(text: str, *, fill_missing_layouts: bool = True) -> Shape:
    """Parse XLA's shape text: ``parse_shape("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}")``.

    Arrays written without a layout get the default layout, as XLA's parser does
    (``fill_missing_layouts=False`` leaves them without one).
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(f"parse_shape: expected shape text (str), got {type(text).__name__}")
    sc = Scanner(text, "shape")
    shape = read_shape(sc, fill_missing_layouts=fill_missing_layouts)
    if not sc.at_end():
        sc.error(f"extra content after shape: {sc.describe_next()}")
    return shape


def parse_layout(text: str) -> Layout:
    """Parse a layout alone: ``parse_layout("{1,0:T(2,2)}")``. Not validated against a shape."""
    sc = Scanner(text, "layout")
    layout = read_layout(sc)
    if not sc.at_end():
        sc.error(f"extra content after layout: {sc.describe_next()}")
    return layout


#: XLA's HloParserOptions::kDefaultMaxRecursionDepth: how deep a shape (or any nesting the
#: HLO parser counts) may go; deeper text is an error, as in XLA.
MAX_RECURSION_DEPTH = 500


def read_shape(sc: Scanner, *, fill_missing_layouts: bool = True,
               max_depth: int = MAX_RECURSION_DEPTH, depth: int = 0,
               intern: dict | None = None) -> Shape:
    """Read one shape at the scanner's position (the HLO parser's ``shape`` rule). As XLA's
    ParseShape, every shape read (each tuple level and each array) counts one level of
    ``max_depth``; ``depth`` levels are taken already (by the nesting around it). Tuples
    are read with a stack of their open element lists, not by recursion.

    ``intern`` (a dict kept by the caller across calls) makes equal shapes one object: a
    module whose instructions nest a tuple one level deeper each then holds each level
    once, and comparing or hashing them stops at the first shared element."""
    open_tuples: list[list[Shape]] = []  # elements read so far, innermost tuple last
    text = sc.text
    while True:  # at a shape
        sc.skip()
        buffer = _BUFFER_OPEN.match(text, sc.pos)
        if buffer:
            shape = _read_buffer_shape(sc, buffer, fill_missing_layouts,
                                       depth + len(open_tuples), max_depth, intern)
            while open_tuples:  # as below: the shape ends an element
                open_tuples[-1].append(shape)
                if not _eat_char(sc, text, ")"):
                    sc.expect(",", "or ')' in tuple shape")
                    break
                shape = _tuple(intern, open_tuples.pop())
            else:
                return shape
            continue
        run = _OPEN_RUN.match(text, sc.pos)  # '(((' at once (deep tuples are long runs)
        opened = run.end() - sc.pos if run else int(sc.eat("("))
        if depth + len(open_tuples) + opened + 1 > max_depth:
            start = sc.pos if run else sc.pos - opened  # the first '(' of this run
            first_bad = max(max_depth - depth - len(open_tuples), 0)
            if first_bad < opened:  # a '(' of the run, else the shape after it
                sc.error("maximum recursion depth exceeded", start + first_bad)
            sc.pos = run.end() if run else sc.pos
            sc.skip()
            sc.error("maximum recursion depth exceeded")
        if opened:
            if run:
                sc.pos = run.end()
            open_tuples.extend([] for _ in range(opened))
            if not _eat_char(sc, text, ")"):
                continue
            shape = _tuple(intern, open_tuples.pop())
        else:
            shape = _interned_leaf(intern, _read_array_shape(sc, fill_missing_layouts))
        while open_tuples:  # the shape ends an element: close the tuples it ends
            open_tuples[-1].append(shape)
            if not _eat_char(sc, text, ")"):
                sc.expect(",", "or ')' in tuple shape")
                break
            shape = _tuple(intern, open_tuples.pop())
        else:
            return shape


_OPEN_RUN = re.compile(r"\(+")
_BUFFER_OPEN = re.compile(r"b(?:[ \t\n\r]+|/\*.*?\*/|//[^\n\r]*)*\(", re.DOTALL)


def _read_buffer_shape(sc: Scanner, opening: re.Match, fill_missing_layouts: bool,
                       depth: int, max_depth: int, intern: dict | None) -> Shape:
    """``b(<array shape>)`` (XLA's ParseShape: the buffer and its array each count a level
    of ``max_depth``)."""
    if depth + 2 > max_depth:
        sc.error("maximum recursion depth exceeded", opening.start() if depth + 1 > max_depth
                 else opening.end())
    sc.pos = opening.end()
    sc.skip()
    inner_pos = sc.pos
    if sc.peek() == "(" or _BUFFER_OPEN.match(sc.text, sc.pos):
        sc.error("element_shape must be an array shape to create a buffer shape (not a "
                 "tuple or a buffer)", inner_pos)
    inner = _read_array_shape(sc, fill_missing_layouts)
    if not inner.is_array():
        sc.error(f"element_shape must be an array shape to create a buffer shape, got "
                 f"{inner}", inner_pos)
    if not sc.eat(")"):
        sc.error(f"expects ')' at the end of buffer shape, found {sc.describe_next()}")
    return _interned_leaf(intern, Shape.buffer_of(inner))


def read_shape_in(sc: Scanner, ctx) -> Shape:
    """read_shape for an attribute reader given the HLO parser as ``ctx``: with its depth
    limit, the nesting around the position and its interning table (defaults without)."""
    return read_shape(sc, max_depth=getattr(ctx, "max_depth", MAX_RECURSION_DEPTH),
                      depth=getattr(ctx, "depth", 0), intern=getattr(ctx, "shapes", None))


def _eat_char(sc: Scanner, text: str, ch: str) -> bool:
    """``sc.eat(ch)``, faster when ``ch`` comes at once (deep tuples are runs of parens)."""
    pos = sc.pos
    if pos < len(text) and text[pos] == ch:
        sc.pos = pos + 1
        return True
    return sc.eat(ch)


def _tuple(table: dict | None, elements: list[Shape]) -> Shape:
    """``Shape.tuple(elements)``, the one of ``table`` if it has it (its elements are
    interned already, so their identities are the key)."""
    if table is None:
        return Shape.tuple(elements)
    key = tuple(map(id, elements))
    got = table.get(key)
    if got is None:
        got = table[key] = Shape.tuple(elements)
    return got


def _interned_leaf(table: dict | None, shape: Shape) -> Shape:
    if table is None:
        return shape
    return table.setdefault(shape._hash_key, shape)


def _read_array_shape(sc: Scanner, fill_missing_layouts: bool) -> Shape:
    """An array, token or opaque shape with its layout."""
    start = sc.pos
    sc.skip()
    start = sc.pos
    name = sc.read_ident()
    if name is None or not dtypes.is_type_name(name):
        sc.error(
            f"expected primitive type (f32, bf16, s32, pred, token, ...) or '(' for a tuple, "
            f"found {repr(name) if name else sc.describe_next()}",
            start,
        )
    element_type = dtypes.from_name(name)
    if element_type == dtypes.PrimitiveType.TUPLE:
        sc.error("'tuple' is not a shape; write a tuple shape as (shape, ...)", start)
    sc.expect("[", f"after element type '{name}'")
    dims: list[int] = []
    dyn: list[bool] = []
    if not sc.eat("]"):
        while True:
            if sc.eat("?"):
                dims.append(UNBOUNDED_SIZE)
                dyn.append(True)
            else:
                is_dyn = sc.eat("<=")
                dim_pos = sc.pos
                d = sc.read_int("a dimension size, '<=' bound or '?'")
                if d < 0:
                    sc.error(f"dimension size must be >= 0, got {d}", dim_pos)
                if d > INT64_MAX:
                    sc.error(f"dimension size {d} is out of range: dimension sizes are int64, "
                             f"at most {INT64_MAX}", dim_pos)
                dims.append(d)
                dyn.append(is_dyn)
            if sc.eat("]"):
                break
            sc.expect(",", "or ']' in dimension list")
    if not dtypes.is_array_type(element_type):
        if dims:
            sc.error(f"{name} shapes have no dimensions: write {name}[]", start)
        return Shape(element_type)
    layout = None
    layout_pos = None
    sc.skip()
    # As XLA: a '{' starts a layout only when followed by an integer or ':'.
    if sc.peek() == "{" and re.compile(r"\{[ \t\n\r]*(?:[-+]?[0-9]|:)").match(sc.text, sc.pos):
        layout_pos = sc.pos
        layout = read_layout(sc)
        if len(layout.minor_to_major) != len(dims):
            sc.error(
                f"Dimensions size is {len(dims)}, but minor to major size is "
                f"{len(layout.minor_to_major)}.",
                layout_pos,
            )
    elif fill_missing_layouts or not dims:
        layout = Layout.default(len(dims))
    try:
        return Shape.array(element_type, dims, layout=layout, dynamic_dimensions=dyn)
    except InvalidArgumentError as e:
        sc.error(str(e), layout_pos if layout_pos is not None else start)


def read_layout(sc: Scanner) -> Layout:
    """Read ``{minor_to_major[:D(..)T(..)..L(n)#(t)*(t)E(n)S(n)SC(..)P(..)M(n)]}``."""
    sc.expect("{", "to start a layout")
    m2m: list[int] = []
    fields: dict = {}
    if sc.peek_re(_INT):
        m2m.append(sc.read_int())
        while sc.eat(","):
            m2m.append(sc.read_int("a dimension number"))
    if sc.eat(":"):
        if sc.peek_ident() == "D":
            sc.read_ident()
            _skip_dim_level_types(sc)
        if sc.peek_ident() == "T":
            sc.read_ident()
            tiles = []
            while sc.peek() == "(":
                tiles.append(_read_tile(sc))
            if not tiles:
                sc.error(f"expected '(' to start a tile after 'T', found {sc.describe_next()}")
            fields["tiles"] = tuple(tiles)
        if sc.peek_ident() == "L":
            sc.read_ident()
            fields["tail_padding_alignment_in_elements"] = _read_paren_int(sc, "tail padding alignment")
        if sc.eat("#"):
            fields["index_primitive_type"] = _read_paren_unsigned_type(sc, "index primitive type")
        if sc.peek() == "*":
            sc.eat("*")
            fields["pointer_primitive_type"] = _read_paren_unsigned_type(sc, "pointer primitive type")
        if sc.peek_ident() == "E":
            sc.read_ident()
            fields["element_size_in_bits"] = _read_paren_int(sc, "element size in bits")
        if sc.peek_ident() == "S":
            sc.read_ident()
            fields["memory_space"] = _read_paren_int(sc, "memory space")
        if sc.peek_ident() == "SC":
            sc.read_ident()
            configs = []
            while sc.eat("("):
                dim = sc.read_int("a split config dimension")
                sc.expect(":", "in split config")
                idx = [sc.read_int("a split index")]
                while sc.eat(","):
                    idx.append(sc.read_int("a split index"))
                sc.expect(")", "to end a split config")
                configs.append(SplitConfig(dim, tuple(idx)))
            if not configs:
                sc.error("expected '(' to start a split config after 'SC'")
            fields["split_configs"] = tuple(configs)
        if sc.peek_ident() == "P":
            sc.error("Layout has physical shape, but is not for a sparse array")
        if sc.peek_ident() == "M":
            sc.read_ident()
            fields["dynamic_shape_metadata_prefix_bytes"] = _read_paren_int(
                sc, "dynamic shape metadata prefix bytes"
            )
    if sc.peek() != "}":
        sc.error(
            f"expected '}}' to end the layout, found {sc.describe_next()} (layout attributes go "
            "in the order T(...) L(n) E(n) S(n) SC(...) M(n))"
        )
    sc.expect("}")
    return Layout(tuple(m2m), **fields)


def _skip_dim_level_types(sc: Scanner) -> None:
    """``D(D,C+,S~)``: dimension level types (dense, compressed, singleton, loose compressed,
    each maybe followed by '+' and '~'). XLA at jaxlib 0.10.2's commit reads and drops them
    (its layouts no longer hold them; they are never printed), and so does xlapy."""
    if not sc.eat("("):
        sc.error(f"expected '(' after 'D' (dimension level types), found {sc.describe_next()}")
    if sc.eat(")"):
        return
    while True:
        m = sc.peek_re(re.compile(r"[A-Za-z_][A-Za-z0-9_]*"))
        if not m or m.group(0) not in ("D", "C", "S", "H"):
            sc.error(f"expected a DimLevelType abbreviation (D, C, or S), found "
                     f"{sc.describe_next()}")
        sc.pos = m.end()
        sc.eat("+")
        sc.eat("~")
        if sc.eat(")"):
            return
        if not sc.eat(","):
            sc.error(f"expected ',' or ')' in the dimension level types, found "
                     f"{sc.describe_next()}")


def _read_tile(sc: Scanner) -> Tile:
    sc.expect("(")
    dims = []
    if not sc.eat(")"):
        while True:
            if sc.eat("*"):
                dims.append(COMBINE_DIMENSION)
            else:
                pos = sc.pos
                d = sc.read_int("a tile dimension size or '*'")
                if d <= 0:
                    sc.error(f"tile dimension size must be positive (or '*'), got {d}", pos)
                dims.append(d)
            if sc.eat(")"):
                break
            sc.expect(",", "or ')' in tile")
    if not dims:
        sc.error("a tile must have at least one dimension")
    return Tile(tuple(dims))


def _read_paren_int(sc: Scanner, what: str) -> int:
    sc.expect("(", f"to start {what}")
    value = sc.read_int(what)
    sc.expect(")", f"to end {what}")
    return value


def _read_paren_unsigned_type(sc: Scanner, what: str) -> dtypes.PrimitiveType:
    sc.expect("(", f"to start {what}")
    pos = sc.pos
    name = sc.read_ident()
    if name is None or not dtypes.is_type_name(name):
        sc.error(f"expected primitive type for {what}", pos)
    t = dtypes.from_name(name)
    if not dtypes.is_unsigned_integral(t):
        sc.error("expecting an unsigned integer type", pos)
    sc.expect(")", f"to end {what}")
    return t
