"""Literals: host values with their shape (arrays of every element type, tuples, tokens).

Owns: Literal, its text exactly as XLA prints it (``Literal::ToString``, the one-line and
shape-less forms, and the operand of an HLO ``constant(...)`` with ``{...}`` elision), and
the literal grammar of XLA's HLO parser (``parse_literal`` for a literal of a known shape,
``parse_literal_with_shape`` for the ``f32[2] {1, 2}`` form, and ``read_literal`` /
``read_literal_with_shape`` for the HLO parser to call at a Scanner position).

Floats print as XLA's RoundTripFpToString: f32 tries ``%.6g`` and f64 ``%.15g``, each kept
only if it reads back to the same value, else ``%.9g`` / ``%.17g``; every narrower float
prints ``%.{max_digits10}g`` of its value as a double (bf16 4, f16 5, f8/f6/f4 2 or 3).
NaNs print ``nan``/``-nan``, with ``(0x<payload>)`` when a type with NaN payloads (f64,
f32, f16, bf16, f8e5m2, f8e4m3, f8e3m4) holds a payload other than the quiet bit alone.
Imports only the shape layer and errors.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import ml_dtypes
import numpy as np

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.shape import dtypes
from xlapy.shape.dtypes import PrimitiveType as PT
from xlapy.shape.shape import UNBOUNDED_SIZE, Shape, out_of_memory
from xlapy.shape.text import MAX_RECURSION_DEPTH, Scanner, parse_shape, read_shape

__all__ = [
    "Literal", "parse_literal", "parse_literal_with_shape", "read_literal",
    "read_literal_with_shape",
]



# -- element formatting (XLA's RoundTripFpToString and GetAsString) ---------------------------


@dataclass(frozen=True)
class _FloatInfo:
    bits: int  # bit width of the encoding
    mant: int  # explicit mantissa bits
    first_digits: int  # %.{n}g tried first (f32: 6, f64: 15), 0 when there is no such try
    max_digits10: int  # ceil(1 + (mant + 1) * log10(2)), as ml_dtypes/Eigen/C++ define it
    payload_bits: int  # NaN payload bits printed as (0x..): the types with signaling NaNs
    signed: bool


# Types whose std::numeric_limits has_signaling_NaN (XLA's NanPayloadBits > 0).
_PAYLOAD_TYPES = {PT.F64, PT.F32, PT.F16, PT.BF16, PT.F8E5M2, PT.F8E4M3, PT.F8E3M4}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@cache
def _float_info(t: PT) -> _FloatInfo:
    mant = dtypes.significand_bits(t) - 1
    max_digits10 = math.ceil(1 + (mant + 1) * 0.3010299956639812)
    first = {PT.F32: 6, PT.F64: 15}.get(t, 0)
    return _FloatInfo(dtypes.bit_width(t), mant, first, max_digits10,
                      mant if t in _PAYLOAD_TYPES else 0, t != PT.F8E8M0FNU)


def _decimal_is_f32(text: str, value: float) -> bool:
    """Whether strtof(text) == value (correctly rounded decimal -> f32, as absl SimpleAtof)."""
    d = float(text)
    f = np.float32(d)
    lo, hi = np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))
    # The double may sit exactly on a midpoint between two floats: decide from the decimal.
    for a, b in ((lo, f), (f, hi)):
        if np.isfinite(a) and np.isfinite(b) and d == (float(a) + float(b)) / 2:
            exact = Fraction(text)
            if exact != Fraction(d):
                f = b if exact > Fraction(d) else a
            break
    return float(f) == value


def _nan_text(rep: int, info: _FloatInfo) -> str:
    text = "-nan" if info.signed and (rep >> (info.bits - 1)) & 1 else "nan"
    payload = rep & ((1 << info.payload_bits) - 1)
    if info.payload_bits and payload != 1 << (info.payload_bits - 1):
        text += f"(0x{payload:x})"
    return text


def _float_texts(arr: np.ndarray, t: PT) -> list[str]:
    """XLA's RoundTripFpToString of every element (``%g`` prints inf as XLA does)."""
    info = _float_info(t)
    reps = _float_reps(arr).ravel().tolist()
    with np.errstate(invalid="ignore"):
        values = arr.astype(np.float64).ravel()
    short, ok = [""] * len(values), np.zeros(len(values), bool)
    if info.first_digits and len(values):  # f32 and f64 first try %.6g / %.15g
        short = ["%.*g" % (info.first_digits, v) for v in values.tolist()]
        back = np.array([float(x) for x in short])
        if t == PT.F64:
            ok = back == values
        else:
            with np.errstate(over="ignore"):
                f = back.astype(np.float32)
            fd = f.astype(np.float64)
            up, down = np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))
            tie = (back * 2 == fd + up) | (back * 2 == fd + down)  # decide from the decimal
            ok = (fd == values) & ~tie
            for i in np.flatnonzero(tie).tolist():
                ok[i] = _decimal_is_f32(short[i], values[i])
    long = info.max_digits10
    return [_nan_text(r, info) if v != v else s if good else "%.*g" % (long, v)
            for s, good, v, r in zip(short, ok.tolist(), values.tolist(), reps)]


def _float_reps(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr).view(_UINT[arr.dtype.itemsize])


def _element_texts(arr: np.ndarray, t: PT) -> list[str]:
    """Every element of ``arr`` (row-major) as XLA's LiteralBase::GetAsString prints it."""
    if t == PT.PRED:
        return ["true" if b else "false" for b in arr.ravel().tolist()]
    if dtypes.is_integral(t):
        wide = np.uint64 if dtypes.is_unsigned_integral(t) else np.int64
        return [str(v) for v in arr.astype(wide).ravel().tolist()]
    if dtypes.is_complex(t):
        part = dtypes.complex_component_type(t)
        re_, im = _float_texts(arr.real, part), _float_texts(arr.imag, part)
        return [f"({a}, {b})" for a, b in zip(re_, im)]
    return _float_texts(arr, t)


def _dense_text(dims: tuple[int, ...], texts: list[str], oneline: bool) -> str:
    """XLA's DenseArrayPrintHelper for the values (without the shape prefix)."""
    rank = len(dims)
    if rank == 0:
        return texts[0]
    brk = " " if oneline else "\n"
    out: list[str] = []
    pos = 0

    def rec(level: int, index: list[int]) -> None:
        nonlocal pos
        n = dims[level]
        if level == rank - 1:  # innermost: all elements on one line
            row = ", ".join(texts[pos : pos + n])
            pos += n
            if rank == 1:
                out.append("{" + row + "}")
            else:
                pad = "" if n <= 1 else " "
                out.append(("" if oneline else "  ") + "{" + pad + row + pad + "}")
            return
        if rank > 3 and level > 0:
            out.append(f"{{ /*i{level - 1}={index[-1]}*/" + (brk if n > 0 else ""))
        else:
            out.append("{" + brk)
        for i in range(n):
            index.append(i)
            rec(level + 1, index)
            index.pop()
            if i < n - 1:
                out.append("," + brk)
        out.append(brk + "}")

    rec(0, [])
    return "".join(out)


def _kept_indices(n: int, edge: int) -> list[int | None]:
    """The indices of a summarised dimension: all of them, or the first and last ``edge``
    with None (printed ``...``) between, as NumPy's summarised arrays."""
    if n <= 2 * edge:
        return list(range(n))
    return list(range(edge)) + [None] + list(range(n - edge, n))


def _summary_text(arr: np.ndarray, t: PT, oneline: bool, edge: int) -> str:
    """``_dense_text`` of ``arr`` with only the first and last ``edge`` entries of each
    longer dimension, ``...`` for the rest (only the shown elements are formatted)."""
    kept = [_kept_indices(n, edge) for n in arr.shape]
    sub = arr[np.ix_(*[[i for i in k if i is not None] for k in kept])]
    texts = _element_texts(sub, t)
    if t == PT.PRED:
        texts = ["1" if s == "true" else "0" for s in texts]
    rank = arr.ndim
    brk = " " if oneline else "\n"
    out: list[str] = []
    pos = 0

    def rec(level: int, index: list[int]) -> None:
        nonlocal pos
        if level == rank - 1:
            row = []
            for i in kept[level]:
                if i is None:
                    row.append("...")
                else:
                    row.append(texts[pos])
                    pos += 1
            if rank == 1:
                out.append("{" + ", ".join(row) + "}")
            else:
                out.append(("" if oneline else "  ") + "{ " + ", ".join(row) + " }")
            return
        if rank > 3 and level > 0:
            out.append(f"{{ /*i{level - 1}={index[-1]}*/" + brk)
        else:
            out.append("{" + brk)
        for j, i in enumerate(kept[level]):
            if i is None:
                out.append("" if oneline else "  ")
                out.append("...")
            else:
                index.append(i)
                rec(level + 1, index)
                index.pop()
            if j < len(kept[level]) - 1:
                out.append("," + brk)
        out.append(brk + "}")

    rec(0, [])
    return "".join(out)


# -- conversion of Python / NumPy values to element types --------------------------------------


def _int_range(t: PT) -> tuple[int, int]:
    bits = 1 if t == PT.PRED else dtypes.bit_width(t)
    if t == PT.PRED or dtypes.is_unsigned_integral(t):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


@cache
def _narrow_table(t: PT):
    """Non-negative finite values of a <=8-bit float type in increasing order with their
    encodings, plus a sentinel one ulp above the largest (rounding to it overflows)."""
    info = _float_info(t)
    reps = np.arange(1 << info.bits, dtype=np.uint8)
    vals = reps.view(dtypes.to_dtype(t)).astype(np.float64)
    keep = np.isfinite(vals) & ~np.signbit(vals)
    order = np.argsort(vals[keep], kind="stable")
    vals, reps = vals[keep][order], reps[keep][order].astype(np.int64)
    mantissa, exp = math.frexp(vals[-1])
    top = vals[-1] + math.ldexp(1.0, exp - 1 - info.mant)
    if t == PT.F8E8M0FNU:
        vals[0] = 0.0  # ml_dtypes rounds below 2^-126 as if encoding 0 (2^-127) were zero
    return np.append(vals, top), np.append(reps, reps[-1] + 1)


def _round_narrow(x: np.ndarray, t: PT) -> np.ndarray:
    """double -> f8/f6/f4 with one round-to-nearest-even step, as C++ static_cast does
    (NumPy's ml_dtypes casts round through f32 first)."""
    dtype = dtypes.to_dtype(t)
    info = _float_info(t)
    with np.errstate(invalid="ignore", over="ignore"):
        out = x.astype(np.float32).astype(dtype)  # NaN, inf, and what has no encoding
    vals, reps = _narrow_table(t)
    finite = np.isfinite(x)
    if not info.signed:  # e8m0fnu: zero and negative values are NaN
        finite &= ~np.signbit(x) & (x != 0)
    xf = x[finite]
    ax = np.abs(xf)
    idx = np.clip(np.searchsorted(vals, ax, side="left"), 1, len(vals) - 1)
    lo, hi = vals[idx - 1], vals[idx]
    pick_hi = (2 * ax > lo + hi) | ((2 * ax == lo + hi) & (reps[idx] % 2 == 0))
    rep = np.where(pick_hi, reps[idx], reps[idx - 1])
    overflow = rep == reps[-1]
    neg = np.signbit(xf) & ~overflow
    if t in (PT.F8E4M3FNUZ, PT.F8E5M2FNUZ, PT.F8E4M3B11FNUZ):
        neg &= rep != 0  # no -0: its encoding is the NaN
    rep = np.where(neg, rep | (1 << (info.bits - 1)), rep)
    with np.errstate(invalid="ignore", over="ignore"):
        big = np.where(np.signbit(xf), -np.inf, np.inf).astype(np.float32).astype(dtype)
    res = np.where(overflow, big.view(np.uint8), rep.astype(np.uint8))
    out[finite] = res.astype(np.uint8).view(dtype)
    return out


def _to_float(x: np.ndarray, t: PT) -> np.ndarray:
    """float64 values -> element type ``t`` as XLA's static_cast from double does (bf16 and
    f16 go through f32, as Eigen's constructors do)."""
    with np.errstate(invalid="ignore", over="ignore"):
        if t == PT.F64:
            return x.astype(np.float64)
        if t in (PT.F32, PT.BF16, PT.F16):
            return x.astype(np.float32).astype(dtypes.to_dtype(t))
    return _round_narrow(x, t)


def _convert(values, t: PT, what: str) -> np.ndarray:
    """A NumPy array of element type ``t`` from array-like ``values``; integers are
    range-checked, floats convert as XLA's static_cast does."""
    dtype = dtypes.to_dtype(t)
    arr = np.asarray(values)
    if arr.dtype == dtype or arr.size == 0:
        return arr.astype(dtype)
    try:
        src = dtypes.from_dtype(arr.dtype)
    except InvalidArgumentError:  # object arrays of Python ints (beyond 64 bits) pass
        ints = arr.dtype.kind == "O" and all(isinstance(v, (int, np.integer)) for v in arr.flat)
        src = PT.S64 if ints else None
    integral = src is not None and (src == PT.PRED or dtypes.is_integral(src))
    if src is None or (not integral and (t == PT.PRED or dtypes.is_integral(t))) or (
            dtypes.is_complex(src) and not dtypes.is_complex(t)):
        raise InvalidArgumentError(
            f"{what}: cannot make {dtypes.type_name(t)} values from {arr.dtype} values")
    if t == PT.PRED or dtypes.is_integral(t):
        lo, hi = _int_range(t)
        unsigned = src != PT.PRED and dtypes.is_unsigned_integral(src)
        wide = object if arr.dtype.kind == "O" else np.uint64 if unsigned else np.int64
        ints = arr.astype(wide)
        vmin, vmax = int(ints.min()), int(ints.max())
        if vmin < lo or vmax > hi:
            raise InvalidArgumentError(
                f"{what}: value {vmin if vmin < lo else vmax} is out of range for "
                f"{dtypes.type_name(t)} (namely [{lo}, {hi}])")
        return ints.astype(np.uint64 if vmax >= 1 << 63 else np.int64).astype(dtype)
    return arr.astype(dtype) if dtypes.is_complex(t) else _to_float(arr.astype(np.float64), t)


def _bits(arr: np.ndarray, t: PT) -> np.ndarray:
    """Canonical integers standing for the elements' values bit-exactly."""
    if t == PT.PRED:
        return arr.astype(np.uint8)
    if dtypes.is_integral(t):
        return arr.astype(np.uint64 if dtypes.is_unsigned_integral(t) else np.int64)
    if dtypes.is_complex(t):
        return np.stack([_float_reps(arr.real), _float_reps(arr.imag)], axis=-1)
    reps = _float_reps(arr)
    bits = dtypes.bit_width(t)
    return reps & ((1 << bits) - 1) if bits < 8 else reps


# -- Literal ---------------------------------------------------------------------------------


class Literal:
    """An XLA literal: an array (``.array``, a read-only NumPy array of ``to_dtype`` of the
    element type), a tuple (``.elements``) or a token, with its ``.shape``.

    For a dynamic shape (``s32[<=3,2]``) the array holds the dynamic sizes' elements.
    ``elided`` marks an array constant read from ``{...}``: its values are unknown (zeros,
    as XLA fills them) and it prints as ``{...}`` again.

    ``==`` compares shapes ignoring layouts (element type, dimensions and dynamic-ness must
    match), the elided flag, and element values bit-exactly: NaNs equal NaNs of the same bits,
    ``-0`` differs from ``0``.
    """

    __slots__ = ("shape", "_array", "_elements", "elided")

    def __init__(self, shape: Shape, array=None, elements=None, elided: bool = False):
        """Internal; use from_array, scalar, tuple, token or zeros."""
        self.shape = shape
        self._array = array
        self._elements = elements
        self.elided = elided

    # -- construction ---------------------------------------------------------------------

    @staticmethod
    def from_array(array, shape: Shape | None = None) -> "Literal":
        """An array literal. Without ``shape`` the element type comes from the dtype
        (Python ints: s64, floats: f64, bools: pred). With ``shape``, values convert to its
        element type (integers range-checked, floats rounded as XLA's static_cast)."""
        if shape is None:
            arr = np.asarray(array)
            shape = Shape.array(dtypes.from_dtype(arr.dtype), arr.shape)
            arr = arr.copy()
        else:
            if not isinstance(shape, Shape) or not shape.is_array():
                raise InvalidArgumentError(f"Literal.from_array: needs an array shape, got {shape}")
            arr = _convert(array, shape.element_type, "Literal.from_array")
            _check_dims(arr.shape, shape)
            if shape.layout is None:
                shape = shape.with_default_layout()
        if dtypes.is_floating(shape.element_type) and dtypes.bit_width(shape.element_type) < 8:
            arr = (arr.view(np.uint8) & ((1 << dtypes.bit_width(shape.element_type)) - 1)).view(
                arr.dtype)
        arr.setflags(write=False)
        return Literal(shape, arr)

    @staticmethod
    def scalar(value, element_type) -> "Literal":
        """``Literal.scalar(1.5, PrimitiveType.BF16)``; ``element_type`` may be a name."""
        t = element_type if isinstance(element_type, PT) else dtypes.from_name(str(element_type))
        return Literal.from_array(value, Shape.scalar(t))

    @staticmethod
    def tuple(literals=()) -> "Literal":
        elements = tuple(literals)
        for e in elements:
            if not isinstance(e, Literal):
                raise InvalidArgumentError(f"Literal.tuple: elements must be Literals, got {e!r}")
        return Literal(Shape.tuple(e.shape for e in elements), elements=elements)

    @staticmethod
    def token() -> "Literal":
        return Literal(Shape.token())

    @staticmethod
    def zeros(shape: Shape, elided: bool = False) -> "Literal":
        """A literal of ``shape`` with every element zero (false for pred)."""
        if shape.is_tuple():
            return _tuple_tree(shape, Literal.zeros)
        if shape.is_token():
            return Literal.token()
        if not shape.is_array() or shape.is_unbounded_dynamic():
            raise InvalidArgumentError(f"Literal.zeros: cannot make a literal of shape {shape}")
        dtype = dtypes.to_dtype(shape.element_type)
        if elided:  # its value is unknown: a read-only zero view, no memory per element
            arr = np.broadcast_to(np.zeros((), dtype), shape.dimensions)
        else:
            try:
                arr = np.zeros(shape.dimensions, dtype=dtype)
            except MemoryError as e:
                raise out_of_memory("Literal.zeros", e, shape) from None
            arr.setflags(write=False)
        if shape.layout is None:
            shape = shape.with_default_layout()
        return Literal(shape, arr, elided=elided)

    # -- access ---------------------------------------------------------------------------

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            raise InvalidArgumentError(f"Literal.array: {self.shape} literal is not an array")
        return self._array

    @property
    def elements(self) -> tuple["Literal", ...]:
        if self._elements is None:
            raise InvalidArgumentError(f"Literal.elements: {self.shape} literal is not a tuple")
        return self._elements

    # -- comparison -----------------------------------------------------------------------

    def __eq__(self, other) -> bool:
        if not isinstance(other, Literal) or self.elided != other.elided:
            return False
        if not self.shape.equal(other.shape, ignore_layout=True):
            return False
        if self.shape.is_tuple():  # the shapes match: compare the leaves in order
            return all(a._leaf_equal(b) for a, b in zip(self.leaves(), other.leaves()))
        return self._leaf_equal(other)

    def _leaf_equal(self, other: "Literal") -> bool:
        if self.elided != other.elided:
            return False
        if not self.shape.is_array():
            return True
        if self._array.shape != other._array.shape:
            return False
        t = self.shape.element_type
        return bool(np.array_equal(_bits(self._array, t), _bits(other._array, t)))

    def __hash__(self) -> int:
        if self.shape.is_tuple():
            return hash(("tuple", tuple(e._leaf_hash() for e in self.leaves())))
        return self._leaf_hash()

    def _leaf_hash(self) -> int:
        if not self.shape.is_array():
            return hash("token")
        key = _bits(self._array, self.shape.element_type).tobytes()
        return hash((self.shape.to_string(print_layout=False), self._array.shape, key, self.elided))

    def leaves(self) -> list["Literal"]:
        """The non-tuple literals in this one, depth first (a walk with a stack)."""
        out, stack = [], [self]
        while stack:
            lit = stack.pop()
            if lit.shape.is_tuple():
                stack.extend(reversed(lit.elements))
            else:
                out.append(lit)
        return out

    # -- text -----------------------------------------------------------------------------

    def to_string(self, print_shape: bool = True, print_layout: bool = False,
                  oneline: bool = False, summarize_over: int | None = None,
                  edge_items: int = 3) -> str:
        """XLA's Literal::ToString (defaults), ToStringOneline (``oneline``),
        ToStringWithoutShape (``print_shape=False``), ToStringWithLayout (``print_layout``).

        ``summarize_over=N``: an array leaf of more than N elements shows only the first and
        last ``edge_items`` entries of each longer dimension with ``...`` between (NumPy's
        summary: threshold 1000, edgeitems 3); XLA prints every element, as the default."""
        out: list[str] = []
        self._print(out, print_shape, print_layout, oneline, summarize_over, edge_items)
        return "".join(out)

    def is_summarized(self, summarize_over: int | None) -> bool:
        """Whether ``to_string(summarize_over=...)`` leaves out elements of some leaf."""
        if summarize_over is None:
            return False
        return any(leaf.shape.is_array() and not leaf.elided
                   and leaf._array.size > summarize_over for leaf in self.leaves())

    def to_hlo_text(self, print_large_constants: bool = False) -> str:
        """The operand of an HLO ``constant(...)`` as XLA's HloConstantInstruction prints
        it: the one-line form without shape for arrays of at most 10 elements (or any
        literal with ``print_large_constants``), else ``{...}``."""
        if self.elided:
            return "{...}"
        small = self.shape.is_array() and _element_count(self) <= 10
        if not (small or print_large_constants):
            return "{...}"
        return self.to_string(print_shape=False, oneline=True)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"Literal({self.to_string(oneline=True)!r})"

    def _print(self, out: list[str], print_shape: bool, print_layout: bool, oneline: bool,
               summarize_over: int | None = None, edge_items: int = 3):
        if not self.shape.is_tuple():
            self._print_leaf(out, print_shape, print_layout, oneline, summarize_over,
                             edge_items)
            return
        stack = [(self, 0)]  # (tuple literal, next element): nesting needs no recursion
        out.append("( " if oneline else "(\n")
        while stack:
            lit, i = stack.pop()
            elements = lit.elements
            if i == len(elements):
                out.append(" )" if oneline else "\n)")
                continue
            if i:
                out.append(", " if oneline else ",\n")
            stack.append((lit, i + 1))
            e = elements[i]
            if e.shape.is_tuple():
                out.append("( " if oneline else "(\n")
                stack.append((e, 0))
            else:
                e._print_leaf(out, print_shape, print_layout, oneline, summarize_over,
                              edge_items)

    def _print_leaf(self, out: list[str], print_shape: bool, print_layout: bool, oneline: bool,
                    summarize_over: int | None = None, edge_items: int = 3):
        shape = self.shape
        if shape.is_token():
            out.append("token")
            return
        if print_shape:
            out.append(shape.to_string(print_layout=print_layout))
            if shape.is_dynamic():
                out.append("(" + ",".join(str(d) for d in self._array.shape) + ")")
            out.append(" ")
        if self.elided:
            out.append("{...}")
            return
        if summarize_over is not None and self._array.size > summarize_over \
                and self._array.ndim > 0:
            out.append(_summary_text(self._array, shape.element_type, oneline, edge_items))
            return
        texts = _element_texts(self._array, shape.element_type)
        if shape.element_type == PT.PRED and self._array.ndim > 0:
            texts = ["1" if s == "true" else "0" for s in texts]  # dense form for arrays
        out.append(_dense_text(self._array.shape, texts, oneline))


def _tuple_tree(shape: Shape, leaf) -> Literal:
    """A tuple literal of ``shape`` with ``leaf(s)`` for every non-tuple sub-shape ``s``
    (built bottom-up with a stack)."""
    stack: list[tuple[Shape, list]] = [(shape, [])]
    while True:
        node, done = stack[-1]
        if len(done) < len(node.tuple_shapes):
            child = node.tuple_shapes[len(done)]
            if child.is_tuple():
                stack.append((child, []))
            else:
                done.append(leaf(child))
            continue
        stack.pop()
        lit = Literal(node, elements=tuple(done))
        if not stack:
            return lit
        stack[-1][1].append(lit)


def _element_count(lit: Literal) -> int:
    dims = lit.shape.dimensions
    return lit.array.size if UNBOUNDED_SIZE in dims else math.prod(dims)


def _check_dims(actual: tuple[int, ...], shape: Shape) -> None:
    ok = len(actual) == len(shape.dimensions) and all(
        d == UNBOUNDED_SIZE or a == d or (dyn and a <= d)
        for a, d, dyn in zip(actual, shape.dimensions, shape.dynamic_dimensions))
    if not ok:
        raise InvalidArgumentError(
            f"Literal.from_array: array of shape {tuple(actual)} does not fit {shape}")


# -- parsing ---------------------------------------------------------------------------------

_NUMBER = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_WORD = re.compile(r"-?[A-Za-z_][A-Za-z0-9_]*")
_PAYLOAD = re.compile(r"\(0x([0-9a-fA-F]+)\)")
_TRAILING = re.compile(r"[A-Za-z0-9_.]")
_QUIET_F64 = 1 << 51
_TOO_BIG = "Constant is out of range for double (+/-1.79769e+308) and so is unparsable."


@dataclass
class _Value:
    """One scanned element: kind is 'int', 'float', 'bool' or 'complex'."""

    kind: str
    value: object  # int, float, bool or (float, float)
    pos: int
    nan: tuple | None = None  # (sign, payload or None) of a NaN token, per complex part
    neg: bool = False  # written with a minus sign (so `-0` is -0.0 in a float context)


def _as_float(sc: Scanner, v: _Value) -> float:
    """A number token's value as a double. Unlike XLA, whose lexer makes `-0` the integer
    0 (and so +0.0), `-0` keeps its sign, so printed -0 values read back bit-exactly."""
    if v.kind != "int":
        return v.value
    if abs(v.value) > 2**1024:
        sc.error(_TOO_BIG, v.pos)
    return math.copysign(float(v.value), -1.0 if v.neg else 1.0)


def _read_number(sc: Scanner, what: str) -> _Value:
    """An integer, decimal, inf, -inf, nan, -nan or nan(0x..) token."""
    sc.skip()
    pos = sc.pos
    m = _NUMBER.match(sc.text, pos)
    if m:
        text = m.group(0)
        if _TRAILING.match(sc.text, m.end()):
            bad = re.compile(r"[-A-Za-z0-9_.+]+").match(sc.text, pos).group(0)
            sc.error(f"malformed number {bad!r}", pos)
        sc.pos = m.end()
        if re.fullmatch(r"-?(?:0[xX][0-9a-fA-F]+|[0-9]+)", text):
            return _Value("int", int(text, 16 if "x" in text.lower() else 10), pos,
                          neg=text[0] == "-")
        if math.isinf(float(text)):
            sc.error(_TOO_BIG, pos)
        return _Value("float", float(text), pos)
    m = _WORD.match(sc.text, pos)
    word = m.group(0) if m else None
    if word in ("inf", "-inf", "nan", "-nan", "true", "false"):
        sc.pos = m.end()
    if word in ("inf", "-inf"):
        return _Value("float", -math.inf if word[0] == "-" else math.inf, pos)
    if word in ("nan", "-nan"):
        payload = None
        if sc.text.startswith("(", sc.pos):
            p = _PAYLOAD.match(sc.text, sc.pos)
            value = int(p.group(1), 16) if p else 0
            if not p or not 0 < value < 1 << 52:
                sc.error("malformed NaN payload: expected (0x<hex>) with a value in "
                         "[0x1, 0xfffffffffffff]", sc.pos)
            payload, sc.pos = value, p.end()
        sign = word[0] == "-"
        return _Value("float", -math.nan if sign else math.nan, pos, (sign, payload))
    if word in ("true", "false"):
        return _Value("bool", word == "true", pos)
    sc.error(f"expected {what}, found {sc.describe_next()}")


def _read_element(sc: Scanner, t: PT) -> _Value:
    name = dtypes.type_name(t)
    if dtypes.is_complex(t):
        sc.skip()
        pos = sc.pos
        if not sc.eat("("):
            sc.error(f"expects a complex number '(real, imag)' for {name}, found "
                     f"{sc.describe_next()}")
        parts = []
        for i, part in enumerate(("real", "imaginary")):
            v = _read_number(sc, f"a floating-point value for the {part} part of a complex number")
            if v.kind == "bool":
                sc.error(f"expect floating-point value for {part} part of complex number", v.pos)
            parts.append(v)
            if i == 0:
                sc.expect(",", "after real part of complex literal")
        sc.expect(")", "after complex number")
        return _Value("complex", tuple(_as_float(sc, p) for p in parts), pos,
                      tuple(p.nan for p in parts))
    if sc.peek() == "(":
        sc.error("unexpected '(' in literal. Parens are only valid for complex literals")
    v = _read_number(sc, f"a {name} value")
    want = ("true, false or an integer" if t == PT.PRED and v.kind == "float"
            else "integer" if dtypes.is_integral(t) and v.kind != "int"
            else "a floating-point value" if dtypes.is_floating(t) and v.kind == "bool" else "")
    if want:
        sc.error(f"expects {want} for primitive type {name}, found {sc.text[v.pos:sc.pos]!r}",
                 v.pos)
    if dtypes.is_floating(t) and v.kind == "int":
        v = _Value("float", _as_float(sc, v), v.pos)
    return v


def _read_dense(sc: Scanner, shape: Shape) -> Literal:
    """XLA's ParseDenseLiteral: nested braces matching the dimensions, or a bare scalar."""
    if shape.is_unbounded_dynamic():
        sc.error(f"cannot read a literal of unbounded dynamic shape {shape}")
    rank = len(shape.dimensions)
    values: list[_Value] = []
    nxt, pos = sc.peek(), sc.pos
    if rank == 0 and nxt == "{":
        sc.error("expects nested array in rank 0, but sees larger")
    if rank and nxt in ("", "}", ")", ","):
        sc.error(("unexpected '}' token" if nxt == "}" else "unexpected token type in a literal")
                 + f" (expected '{{' to start a {shape.to_string(False)} literal, found "
                 f"{sc.describe_next()})")
    if rank == 0 or nxt != "{":
        if rank and dtypes.is_complex(shape.element_type):
            sc.error(f"expects nested array in rank {rank}, but sees 0", pos)
        v = _read_element(sc, shape.element_type)
        values.append(v)
        if rank:
            # XLA's ParseDenseLiteral drops its rank check here: a lone scalar is the element
            # at linear index 0 of the array literal, every other element is zero
            # (f32[3] constant(15) is {15, 0, 0}).
            count = shape.element_count()
            if count == 0:
                sc.error(f"tries to set value {sc.text[v.pos:sc.pos]} to a literal in shape "
                         f"{shape.to_string(False)} at linear index 0, but the index is out of "
                         f"range (expects nested array in rank {rank}, but sees 0)", v.pos)
            zero = _Value(v.kind, {"bool": False, "int": 0}.get(v.kind, 0.0), v.pos)
            values.extend([zero] * (count - 1))
    elif m := re.compile(r"\{[ \t\n\r]*\.\.\.[ \t\n\r]*\}").match(sc.text, pos):
        sc.pos = m.end()
        return Literal.zeros(shape, elided=True)
    else:
        _read_nested(sc, shape, 0, [], values)
    return _build(sc, shape, values)


_SIMPLE = r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_SIMPLE_NUMBER = re.compile(_SIMPLE)
_SIMPLE_ROW = re.compile(rf"\{{[ \t\n\r]*((?:{_SIMPLE}[ \t\n\r]*,[ \t\n\r]*)*{_SIMPLE})?[ \t\n\r]*\}}")


def _read_simple_row(sc: Scanner, t: PT, n: int, values: list) -> bool:
    """Fast path for an innermost ``{1, 2.5, -3}`` of n plain numbers; False (nothing read)
    for anything else, which the general reader then reads or reports."""
    m = _SIMPLE_ROW.match(sc.text, sc.pos)
    if not m or dtypes.is_complex(t):
        return False
    tokens = list(_SIMPLE_NUMBER.finditer(sc.text, m.start(1), m.end(1))) if m.group(1) else []
    if len(tokens) != n:
        return False
    row = []
    for tok in tokens:
        text = tok.group()
        if dtypes.is_floating(t):
            value = float(text)  # keeps the sign of -0, as _as_float does
            if math.isinf(value):
                return False
            row.append(_Value("float", value, tok.start()))
        elif text.lstrip("-").isdigit():
            row.append(_Value("int", int(text), tok.start()))
        else:
            return False
    values.extend(row)
    sc.pos = m.end()
    return True


def _read_nested(sc: Scanner, shape: Shape, level: int, index: list[int], values: list) -> None:
    dims = shape.dimensions
    rank = len(dims)
    n = dims[level]
    sc.skip()
    if level == rank - 1 and _read_simple_row(sc, shape.element_type, n, values):
        return
    sc.expect("{")
    count = 0
    extra_pos = None
    while True:
        sc.skip()
        if sc.peek() == "}":
            break
        if count:
            sc.expect(",", "or '}' between literal elements")
            sc.skip()
        if count == n and extra_pos is None:
            extra_pos = sc.pos
        if sc.peek(3) == "...":
            sc.error(f"expects `...` at nest level 1, but sees it at nest level {level + 1}"
                     if level else "'...' must be alone: an elided constant is written {...}")
        if level < rank - 1:
            if sc.peek() != "{":
                pos = sc.pos
                _read_element(sc, shape.element_type)
                sc.error(f"expects nested array in rank {rank}, but sees {level + 1}", pos)
            _read_nested(sc, shape, level + 1, index + [count], values)
        else:
            if sc.peek() == "{":
                sc.error(f"expects nested array in rank {rank}, but sees larger")
            values.append(_read_element(sc, shape.element_type))
        count += 1
    if count != n:
        where = f" in the [{','.join(map(str, index))}]th element" if level else ""
        sc.error(f"expects {n} elements{where}, but sees {count} (literal shape "
                 f"{shape.to_string(False)})", extra_pos if extra_pos is not None else sc.pos)
    sc.expect("}")


def _range_error(sc: Scanner, v: _Value, value, lo, hi, t: PT, part: str = "") -> None:
    fmt = (lambda x: "%.6g" % x) if isinstance(value, float) else str
    head = f"{part} part" if part else "value"
    sc.error(f"{head} {fmt(value)} is out of range for literal's primitive type {t.name}"
             f"{',' if part else ''} namely [{fmt(lo)}, {fmt(hi)}].", v.pos)


def _build(sc: Scanner, shape: Shape, values: list[_Value]) -> Literal:
    """Range-check the scanned values and make the literal (as SetValueInLiteral)."""
    t = shape.element_type
    dtype = dtypes.to_dtype(t)
    if t == PT.PRED:
        arr = np.array([bool(v.value) for v in values], dtype=np.bool_)
    elif dtypes.is_integral(t):
        lo, hi = _int_range(t)
        ints = []
        for v in values:
            x = v.value
            if t == PT.U64 and -(1 << 63) <= x < 0:
                x += 1 << 64  # XLA reads integers as 64-bit patterns: u64 -1 is 2^64-1
            if not lo <= x <= hi:
                _range_error(sc, v, x if t != PT.U64 else v.value, lo, hi, t)
            ints.append(x)
        arr = np.array(ints, dtype=np.uint64 if t == PT.U64 else np.int64).astype(dtype)
    elif dtypes.is_complex(t):
        part_t = dtypes.complex_component_type(t)
        arr = np.empty(len(values), dtype)
        arr.real, arr.imag = (
            _floats(sc, shape, values, np.array([v.value[k] for v in values], np.float64),
                    part_t, k, label) for k, label in enumerate(("real", "imaginary")))
    else:
        x = np.array([v.value for v in values], dtype=np.float64)
        arr = _floats(sc, shape, values, x, t, None, "")
    return Literal.from_array(arr.reshape(shape.dimensions), shape)


def _floats(sc, shape: Shape, values, x, t: PT, part, label) -> np.ndarray:
    """Convert one float (or complex part) column; range and NaN-payload checks as XLA's
    CheckParsedValueIsInRange and SetValueInLiteralHelper."""
    out = _to_float(x, t)
    bad = np.flatnonzero(np.isfinite(x) & ~np.isfinite(out.astype(np.float64)))
    if bad.size:
        i = int(bad[0])
        finfo = ml_dtypes.finfo(dtypes.to_dtype(t))
        _range_error(sc, values[i], float(x[i]), float(finfo.min), float(finfo.max),
                     shape.element_type, label)
    info = _float_info(t)
    reps = _float_reps(out).copy()
    for i, v in enumerate(values):
        nan = v.nan if part is None else v.nan[part]
        if nan is None:
            continue
        sign, payload = nan
        where = f"literal in shape {shape.to_string(False)} at linear index {i}"
        if info.payload_bits:
            if payload is None or payload == _QUIET_F64:
                payload = 1 << (info.payload_bits - 1)
            mask = (1 << info.payload_bits) - 1
            if payload > mask:
                sc.error(f"tries to set NaN payload 0x{payload:x} to a {where}, but the NaN "
                         f"payload is out of range (0x{mask:x})", v.pos)
            exp_ones = ((1 << (info.bits - 1 - info.mant)) - 1) << info.mant
            reps[i] = (int(sign) << (info.bits - 1)) | exp_ones | payload
        elif payload is not None and payload != _QUIET_F64:
            sc.error(f"tries to set NaN payload 0x{payload:x} to a {where}, but "
                     f"{dtypes.type_name(t)} does not support payloads", v.pos)
    return reps.view(out.dtype)


def read_literal(sc: Scanner, shape: Shape) -> Literal:
    """Read the literal of a known ``shape`` at the scanner's position, as XLA's
    ParseLiteral(literal, shape) reads a ``constant(...)`` operand. Tuples are read with a
    stack of open tuples (their depth is the shape's, checked when the shape was read)."""
    if not shape.is_tuple():
        return _read_leaf(sc, shape)
    stack: list[tuple[Shape, list]] = []  # open tuples and their elements read so far
    node = shape
    while True:
        if node.is_tuple():
            sc.expect("(", "in front of tuple elements")
            stack.append((node, []))
        else:
            stack[-1][1].append(_read_leaf(sc, node))
        while True:  # the next element to read, closing the tuples that are complete
            tshape, elements = stack[-1]
            n = len(tshape.tuple_shapes)
            if len(elements) < n:
                if elements:
                    sc.expect(",", "to separate tuple elements")
                node = tshape.tuple_shapes[len(elements)]
                break
            sc.expect(")", f"at the end of the tuple with {n} element{'s' if n != 1 else ''}")
            stack.pop()
            lit = Literal(tshape, elements=tuple(elements))
            if not stack:
                return lit
            stack[-1][1].append(lit)


def _read_leaf(sc: Scanner, shape: Shape) -> Literal:
    if shape.is_token():
        if sc.peek_ident() != "token":
            sc.error(f"expected 'token' for a token literal, found {sc.describe_next()}")
        sc.read_ident()
        return Literal.token()
    if not shape.is_array():
        sc.error(f"cannot read a literal of shape {shape}")
    if shape.layout is None:
        shape = shape.with_default_layout()
    return _read_dense(sc, shape)


def read_literal_with_shape(sc: Scanner, max_depth: int = MAX_RECURSION_DEPTH) -> Literal:
    """Read ``shape literal`` (the Literal::ToString form), a tuple ``( lit, ... )`` of
    those, or ``token``, as XLA's ParseLiteral(literal) does. A dynamic shape may be followed
    by its sizes, as ToString prints them: ``s32[<=3,2](2,2) {...}``. Tuples nest at most
    ``max_depth`` deep (read with a stack of open tuples, not by recursion)."""
    open_tuples: list[list[Literal]] = []
    while True:
        if len(open_tuples) + 1 > max_depth:
            sc.skip()
            sc.error("maximum recursion depth exceeded")
        sc.skip()
        if sc.eat("("):
            if not sc.eat(")"):
                open_tuples.append([])
                continue
            lit = Literal.tuple([])
        else:
            lit = _read_shaped_leaf(sc)
        while open_tuples:  # the literal ends an element: close the tuples it ends
            open_tuples[-1].append(lit)
            if not sc.eat(")"):
                sc.expect(",", "to separate tuple elements")
                break
            lit = Literal.tuple(open_tuples.pop())
        else:
            return lit


def _read_shaped_leaf(sc: Scanner) -> Literal:
    """``token`` or ``shape {values}``."""
    if m := re.compile(r"token\b(?![ \t\n\r]*\[)").match(sc.text, sc.pos):
        sc.pos = m.end()
        return Literal.token()
    # `f32[2] {1, 0}`: XLA's shape reader would take `{1, 0}` for a layout. Read the shape
    # with a layout first, then without; report the error of the attempt that got further
    # (on a tie, the one without a layout).
    start, errors = sc.pos, []
    for with_layout in (True, False):
        sc.pos = start
        try:
            if with_layout:
                shape = read_shape(sc)
            else:
                m = re.compile(r"[A-Za-z0-9_]+[ \t\n\r]*\[[^\]]*\]").match(sc.text, start)
                try:
                    shape = read_shape(sub := Scanner(sc.text[start:m.end()] if m else ""))
                except ParseError:
                    break  # a bad shape: the first attempt's error says so
                sc.pos = start + sub.pos
            return _read_sized(sc, shape)
        except ParseError as e:
            errors.append(e)
    raise max(errors[::-1], key=lambda e: e.pos)


def _read_sized(sc: Scanner, shape: Shape) -> Literal:
    """The literal after its shape, which ToString follows with the sizes of a dynamic
    shape: ``s32[<=3,2](2,2) {...}`` (XLA's parser cannot read those back; xlapy can)."""
    if not (shape.is_array() and shape.is_dynamic() and sc.peek() == "("):
        return read_literal(sc, shape)
    sc.expect("(")
    sizes = [sc.read_int("a dynamic dimension size")]
    while sc.eat(","):
        sizes.append(sc.read_int("a dynamic dimension size"))
    sc.expect(")", "after the dynamic dimension sizes")
    if len(sizes) != len(shape.dimensions):
        sc.error(f"{len(sizes)} dynamic sizes for the {len(shape.dimensions)} dimensions "
                 f"of {shape.to_string(False)}")
    try:
        static = Shape.array(shape.element_type, sizes, layout=shape.layout)
        return Literal.from_array(read_literal(sc, static).array, shape)
    except InvalidArgumentError as e:
        sc.error(str(e))


def parse_literal(text: str, shape: Shape | str) -> Literal:
    """Parse the literal of an HLO ``constant(...)`` given its shape:
    ``parse_literal("{ {1, 2}, {3, 4} }", parse_shape("s32[2,2]"))``. Accepts nested braces,
    ``true``/``false`` or integers for pred, ``inf``, ``-inf``, ``nan``, ``-nan``,
    ``nan(0x..)``, negative and (an xlapy extension) hex integers, complex ``(re, im)``,
    tuples ``( ... )``, ``token`` and the elided ``{...}`` (an ``elided`` literal of zeros)."""
    if isinstance(shape, str):
        shape = parse_shape(shape)
    if not isinstance(shape, Shape):
        raise InvalidArgumentError(f"parse_literal: expected a Shape, got {type(shape).__name__}")
    sc = Scanner(text, "literal")
    try:
        lit = read_literal(sc, shape)
    except RecursionError:  # dense arrays are read per dimension: a rank in the hundreds
        sc.error("maximum recursion depth exceeded (rank too large)")
    if not sc.at_end():
        sc.error(f"extra content after literal: {sc.describe_next()}")
    return lit


def parse_literal_with_shape(text: str, *,
                             max_recursion_depth: int = MAX_RECURSION_DEPTH) -> Literal:
    """Parse the Literal::ToString form: ``parse_literal_with_shape("f32[2] {1, 2}")``.
    Tuples nest at most ``max_recursion_depth`` deep (XLA's parser default, 500)."""
    sc = Scanner(text, "literal")
    try:
        lit = read_literal_with_shape(sc, max_recursion_depth)
    except RecursionError:  # dense arrays are read per dimension: a rank in the hundreds
        sc.error("maximum recursion depth exceeded (rank too large)")
    if not sc.at_end():
        sc.error(f"extra content after literal: {sc.describe_next()}")
    return lit
