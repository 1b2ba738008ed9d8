"""Windows and convolution layouts: the structured attributes of reduce-window,
select-and-scatter and convolution.

Owns: WindowDimension/Window (``window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=2x2
rhs_dilate=2x2 rhs_reversal=1x1}``, printed as XLA's window_util::ToString prints it, read
as HloParser::ParseWindow reads it), ConvolutionDimensionNumbers (``dim_labels=b01f_01io->b01f``,
ConvolutionDimensionNumbersToString / ParseConvolutionDimensionNumbers), SparsityConfig
(``sparsity_config={rhs={sparsity=1x4 dimension=0 stride=1 idx=2}}``), ConvolutionKind, and
their AttrKinds. Also the window helpers the builder needs (InferWindowFromDimensions,
XLA's Padding enum with MakePadding). Imports only the shape layer and xlapy.hlo.attrs.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import (
    AttrKind,
    EnumKind,
    check_int,
    check_int_list,
    check_int_tuples,
    check_sequence,
)
from xlapy.shape.text import Scanner

# Token patterns of XLA's HLO lexer (hlo_lexer.cc).
_DXD = re.compile(r"[0-9]+(?:x[0-9]+)+")
_INT = re.compile(r"-?[0-9]+")
_PAD = re.compile(r"-?[0-9]+_-?[0-9]+(?:_[0-9]+)?(?:x-?[0-9]+_-?[0-9]+(?:_[0-9]+)?)*")
_DIM_LABELS = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")


# -- Window -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowDimension:
    """One dimension of a window (xla_data.proto WindowDimension); defaults are the values
    XLA's window_util::MakeWindow gives."""

    size: int
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 1
    base_dilation: int = 1
    window_reversal: bool = False

    def to_text(self) -> str:
        """window_util::ToString(WindowDimension): ``(size=3,stride=2,padding_low=1)``."""
        out = f"(size={self.size}"
        if self.stride != 1:
            out += f",stride={self.stride}"
        if self.padding_low != 0:
            out += f",padding_low={self.padding_low}"
        if self.padding_high != 0:
            out += f",padding_high={self.padding_high}"
        if self.base_dilation != 1:
            out += f",base_dilation={self.base_dilation}"
        if self.window_dilation != 1:
            out += f",window_dilation={self.window_dilation}"
        if self.window_reversal:
            out += ",window_reversal"
        return out + ")"

    @property
    def is_trivial(self) -> bool:
        """window_util::IsTrivialWindowDimension."""
        return (self.size == 1 and self.stride == 1 and self.padding_low == 0
                and self.padding_high == 0 and self.window_dilation == 1
                and self.base_dilation == 1)


@dataclass(frozen=True)
class Window:
    """A window over an array (xla_data.proto Window): one WindowDimension per dimension.

    >>> Window.parse("size=3x3 stride=2x2 pad=1_1x1_1").to_text()
    'size=3x3 stride=2x2 pad=1_1x1_1'
    """

    dimensions: tuple[WindowDimension, ...] = ()

    def __post_init__(self):
        dims = check_sequence(self.dimensions, "Window: dimensions", "a list of WindowDimensions")
        for d in dims:
            if not isinstance(d, WindowDimension):
                raise InvalidArgumentError(
                    f"Window: dimensions must be WindowDimensions, got {d!r}")
        object.__setattr__(self, "dimensions", dims)

    @staticmethod
    def make(sizes: Sequence[int], strides: Sequence[int] | None = None) -> Window:
        """window_util::MakeWindow: a window with the given sizes (and strides)."""
        sizes = check_int_list(sizes, "Window.make: sizes")
        strides = check_int_list(strides, "Window.make: strides") if strides is not None \
            else (1,) * len(sizes)
        if len(strides) != len(sizes):
            raise InvalidArgumentError(
                f"Window.make: {len(sizes)} sizes but {len(strides)} strides")
        return Window(tuple(WindowDimension(int(s), int(t)) for s, t in zip(sizes, strides)))

    @staticmethod
    def from_dimensions(window_dimensions: Sequence[int], window_strides: Sequence[int] = (),
                        padding: Sequence[tuple[int, int]] = (), lhs_dilation: Sequence[int] = (),
                        rhs_dilation: Sequence[int] = (),
                        window_reversal: Sequence[bool] | None = None) -> Window:
        """ShapeInference::InferWindowFromDimensions: every list is empty (its default) or
        has one entry per window dimension."""
        window_dimensions = check_int_list(window_dimensions, "Window: window_dimensions")
        n = len(window_dimensions)

        def verify(xs, name):
            if len(xs) not in (0, n):
                raise InvalidArgumentError(
                    f"Window has different number of window dimensions than of {name}\n"
                    f"Number of window dimensions: {n}\nNumber of {name}: {len(xs)}\n")

        window_strides = check_int_list(window_strides, "Window: window_strides")
        padding = check_int_tuples(padding, "Window: padding")
        lhs_dilation = check_int_list(lhs_dilation, "Window: lhs_dilation")
        rhs_dilation = check_int_list(rhs_dilation, "Window: rhs_dilation")
        verify(window_strides, "window strides")
        verify(padding, "padding entries")
        verify(lhs_dilation, "lhs dilation factors")
        verify(rhs_dilation, "rhs dilation factors")
        reversal = tuple(window_reversal) if window_reversal is not None else ()
        if window_reversal is not None:
            verify(reversal, "window reversal")
        dims = []
        for i, size in enumerate(window_dimensions):
            low, high = (padding[i] if padding else (0, 0))
            dims.append(WindowDimension(
                size=int(size),
                stride=int(window_strides[i]) if window_strides else 1,
                padding_low=int(low), padding_high=int(high),
                window_dilation=int(rhs_dilation[i]) if rhs_dilation else 1,
                base_dilation=int(lhs_dilation[i]) if lhs_dilation else 1,
                window_reversal=bool(reversal[i]) if reversal else False))
        return Window(tuple(dims))

    # window_util predicates
    def has_stride(self) -> bool:
        return any(d.stride != 1 for d in self.dimensions)

    def has_padding(self) -> bool:
        return any(d.padding_low != 0 or d.padding_high != 0 for d in self.dimensions)

    def has_base_dilation(self) -> bool:
        return any(d.base_dilation != 1 for d in self.dimensions)

    def has_window_dilation(self) -> bool:
        return any(d.window_dilation != 1 for d in self.dimensions)

    def has_window_reversal(self) -> bool:
        return any(d.window_reversal for d in self.dimensions)

    def to_text(self) -> str:
        """window_util::ToString: fields equal to their default everywhere are omitted."""
        parts = []

        def add(name, fmt):
            parts.append(name + "=" + "x".join(fmt(d) for d in self.dimensions))

        if self.dimensions:
            add("size", lambda d: str(d.size))
        if self.has_stride():
            add("stride", lambda d: str(d.stride))
        if self.has_padding():
            add("pad", lambda d: f"{d.padding_low}_{d.padding_high}")
        if self.has_base_dilation():
            add("lhs_dilate", lambda d: str(d.base_dilation))
        if self.has_window_dilation():
            add("rhs_dilate", lambda d: str(d.window_dilation))
        if self.has_window_reversal():
            add("rhs_reversal", lambda d: "1" if d.window_reversal else "0")
        return " ".join(parts)

    def __str__(self) -> str:
        return self.to_text()

    def debug_string(self) -> str:
        """The window as shape-inference messages show it."""
        return "{" + " ".join(d.to_text() for d in self.dimensions) + "}"

    @staticmethod
    def parse(text: str) -> Window:
        """Read the inside of ``window={...}``: ``Window.parse("size=2x2 stride=2x2")``."""
        sc = Scanner(text, "window")
        window = read_window_body(sc, end=None)
        if not sc.at_end():
            sc.error(f"extra content after window: {sc.describe_next()}")
        return window


def _read_dxd(sc: Scanner, name: str) -> list[int]:
    """HloParser::ParseDxD: ``3`` (1-D) or ``3x3x1``."""
    m = sc.peek_re(_DXD) or sc.peek_re(_INT)
    pad = sc.peek_re(_PAD)
    if pad and (m is None or pad.end() > m.end()):  # XLA's lexer reads a pad token here
        sc.error(f"expects sub-attribute '{name}=' to be an integer or NxM..., found the "
                 f"padding {pad.group(0)!r}")
    if m:
        sc.pos = m.end()
        return [int(v) for v in m.group(0).split("x")]
    sc.error(f"expects sub-attribute '{name}=' to be an integer or NxM..., "
             f"found {sc.describe_next()}")


def _read_window_pad(sc: Scanner) -> list[tuple[int, int]]:
    """HloParser::ParseWindowPad: ``1_1x0_2``."""
    m = sc.peek_re(_PAD)
    if not m:
        sc.error(f"expects window pad pattern, e.g., '0_0x3_3', found {sc.describe_next()}")
    pos = m.start()
    sc.pos = m.end()
    out = []
    for part in m.group(0).split("x"):
        low_high = part.split("_")
        if len(low_high) != 2:
            sc.error("expects padding_low and padding_high separated by '_'", pos)
        out.append((int(low_high[0]), int(low_high[1])))
    return out


def read_window_body(sc: Scanner, end: str | None = "}") -> Window:
    """The sub-attributes of a window up to ``end`` (not consumed); ``end=None``: to the
    end of the text."""
    start = sc.pos
    values: dict[str, list] = {}
    while True:
        sc.skip()
        if (end is not None and sc.peek(len(end)) == end) or (end is None and sc.at_end()):
            break
        if sc.at_end():
            sc.error(f"expected '{end}' to end window attribute, found end of input")
        attr_pos = sc.pos
        name = sc.read_ident()
        if name is None or not sc.eat("="):
            sc.error(f"expects sub-attributes in window, found {sc.describe_next()}", attr_pos)
        if name not in ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            sc.error(f"unexpected attribute name: {name}", attr_pos)
        if name in values:
            sc.error(f"sub-attribute '{name}=' already exists", attr_pos)
        values[name] = _read_window_pad(sc) if name == "pad" else _read_dxd(sc, name)
    size = values.get("size", [])
    for name in ("stride", "lhs_dilate", "rhs_dilate", "pad", "rhs_reversal"):
        if name in values and len(values[name]) != len(size):
            sc.error(f"expects '{name}=' has the same size as 'size='", start)
    dims = []
    for i, s in enumerate(size):
        low, high = values["pad"][i] if "pad" in values else (0, 0)
        dims.append(WindowDimension(
            size=s,
            stride=values["stride"][i] if "stride" in values else 1,
            padding_low=low, padding_high=high,
            window_dilation=values["rhs_dilate"][i] if "rhs_dilate" in values else 1,
            base_dilation=values["lhs_dilate"][i] if "lhs_dilate" in values else 1,
            window_reversal=("rhs_reversal" in values and values["rhs_reversal"][i] == 1)))
    return Window(tuple(dims))


class WindowKind(AttrKind):
    """``window={size=2x2 stride=2x2 pad=0_1x0_1}``. Accepts a Window or its text."""

    name = "window"

    def check(self, value, where):
        if isinstance(value, Window):
            return value
        if isinstance(value, str):
            return Window.parse(value)
        raise InvalidArgumentError(f"{where} must be a Window, got {value!r}")

    def to_text(self, value) -> str:
        return "{" + value.to_text() + "}"

    def read(self, sc, ctx):
        sc.expect("{", "to start window attribute")
        window = read_window_body(sc, "}")
        sc.expect("}", "to end window attribute")
        return window


WINDOW = WindowKind()


# -- Padding (the builder's SAME/VALID) -------------------------------------------------------


class Padding(enum.Enum):
    """XLA's Padding enum (padding.h): SAME pads so that the output has
    ceil(input / stride) elements; VALID does not pad."""

    SAME = "SAME"
    VALID = "VALID"

    # XLA's C++ spellings
    kSame = "SAME"  # noqa: PIE796 (aliases)
    kValid = "VALID"  # noqa: PIE796


def validate_padding_values(input_dimensions: Sequence[int], window_dimensions: Sequence[int],
                            window_strides: Sequence[int]) -> None:
    """ValidatePaddingValues (padding.cc)."""
    if not (len(input_dimensions) == len(window_dimensions) == len(window_strides)):
        raise InvalidArgumentError(
            f"Want input dimensions size {len(input_dimensions)} = window dimensions size "
            f"{len(window_dimensions)} = window strides size {len(window_strides)}")
    for i in range(len(input_dimensions)):
        if window_dimensions[i] <= 0:
            raise InvalidArgumentError(
                f"Window dimension {i} has non-positive size {window_dimensions[i]}")
        if window_strides[i] <= 0:
            raise InvalidArgumentError(
                f"Window dimension {i} has non-positive stride {window_strides[i]}")


def as_padding(value) -> Padding:
    """``Padding.SAME``/``Padding.VALID`` from the enum or its name ("SAME", "valid", "kSame")."""
    if isinstance(value, Padding):
        return value
    if isinstance(value, str):
        name = value[1:] if value in ("kSame", "kValid") else value
        try:
            return Padding(name.upper())
        except ValueError:
            pass
    raise InvalidArgumentError(f"padding must be Padding.SAME or Padding.VALID, got {value!r}")


def make_padding(input_dims: Sequence[int], window_dims: Sequence[int], strides: Sequence[int],
                 padding: Padding | str) -> list[tuple[int, int]]:
    """XLA's MakePadding: (low, high) per dimension for SAME or VALID.

    >>> make_padding([10], [5], [3], Padding.SAME)
    [(2, 2)]
    """
    padding = as_padding(padding)
    input_dims = check_int_list(input_dims, "make_padding: input_dims")
    window_dims = check_int_list(window_dims, "make_padding: window_dims")
    strides = check_int_list(strides, "make_padding: strides")
    validate_padding_values(input_dims, window_dims, strides)
    if padding is Padding.VALID:
        return [(0, 0)] * len(window_dims)
    out = []
    for size, window, stride in zip(input_dims, window_dims, strides):
        output = -(-size // stride)  # ceil; an unbounded size stays hugely negative
        pad = max((output - 1) * stride + window - size, 0)
        out.append((pad // 2, -(-pad // 2)))
    return out


# -- dilation arithmetic (window_util) --------------------------------------------------------


def dilated_bound(bound: int, dilation: int) -> int:
    """window_util::DilatedBound: size of ``bound`` elements with ``dilation - 1`` holes
    between neighbours."""
    return 0 if bound == 0 else (bound - 1) * dilation + 1


def strided_bound(bound: int, window_size: int, stride: int) -> int:
    """window_util::StridedBound: how many windows of ``window_size`` fit in ``bound``."""
    if bound == 0 or window_size > bound:
        return 0
    return (bound - window_size) // stride + 1


# -- ConvolutionDimensionNumbers ----------------------------------------------------------------


@dataclass(frozen=True)
class ConvolutionDimensionNumbers:
    """Which dimension of the input, kernel and output is batch, feature, spatial
    (xla_data.proto ConvolutionDimensionNumbers, with its field names).

    >>> str(ConvolutionDimensionNumbers.parse("b01f_01io->b01f"))
    'b01f_01io->b01f'
    """

    input_batch_dimension: int = 0
    input_feature_dimension: int = 0
    input_spatial_dimensions: tuple[int, ...] = ()
    kernel_input_feature_dimension: int = 0
    kernel_output_feature_dimension: int = 0
    kernel_spatial_dimensions: tuple[int, ...] = ()
    output_batch_dimension: int = 0
    output_feature_dimension: int = 0
    output_spatial_dimensions: tuple[int, ...] = ()

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            where = f"ConvolutionDimensionNumbers.{f.name}"
            if f.name.endswith("_dimensions"):
                object.__setattr__(self, f.name, check_int_list(value, where))
            else:
                object.__setattr__(self, f.name, check_int(value, where))

    @staticmethod
    def default(num_spatial_dims: int) -> ConvolutionDimensionNumbers:
        """XlaBuilder::CreateDefaultConvDimensionNumbers: ``bf01_oi01->bf01``."""
        spatial = tuple(range(2, 2 + num_spatial_dims))
        return ConvolutionDimensionNumbers(0, 1, spatial, 1, 0, spatial, 0, 1, spatial)

    def to_text(self) -> str:
        """ConvolutionDimensionNumbersToString: ``b01f_01io->b01f`` ('?' for gaps)."""

        def labels(a, b, spatial, a_name, b_name):
            n = max([a, b, *spatial]) + 1
            out = ["?"] * n
            out[a] = a_name
            out[b] = b_name
            for i, d in enumerate(spatial):
                out[d] = str(i)
            return "".join(out)

        try:
            return (labels(self.input_batch_dimension, self.input_feature_dimension,
                           self.input_spatial_dimensions, "b", "f") + "_"
                    + labels(self.kernel_input_feature_dimension,
                             self.kernel_output_feature_dimension,
                             self.kernel_spatial_dimensions, "i", "o") + "->"
                    + labels(self.output_batch_dimension, self.output_feature_dimension,
                             self.output_spatial_dimensions, "b", "f"))
        except IndexError:
            raise InvalidArgumentError(
                f"dimension numbers cannot be written as dim_labels: {self.debug_string()}"
            ) from None

    def __str__(self) -> str:
        return self.to_text()

    def debug_string(self) -> str:
        """One-line proto text, fields in proto field-number order (as messages show it)."""
        order = ("kernel_input_feature_dimension", "kernel_output_feature_dimension",
                 "kernel_spatial_dimensions", "input_batch_dimension", "input_feature_dimension",
                 "output_batch_dimension", "output_feature_dimension",
                 "input_spatial_dimensions", "output_spatial_dimensions")
        parts = []
        for name in order:
            value = getattr(self, name)
            for v in (value if isinstance(value, tuple) else (value,)):
                parts.append(f"{name}: {v}")
        return " ".join(parts)

    @staticmethod
    def parse(text: str) -> ConvolutionDimensionNumbers:
        """Read dim labels: ``ConvolutionDimensionNumbers.parse("b0f_0io->b0f")``."""
        sc = Scanner(text, "dim_labels")
        dnums = read_dim_labels(sc)
        if not sc.at_end():
            sc.error(f"extra content after dim labels: {sc.describe_next()}")
        return dnums


def read_dim_labels(sc: Scanner) -> ConvolutionDimensionNumbers:
    """HloParser::ParseConvolutionDimensionNumbers."""
    m = sc.peek_re(_DIM_LABELS)
    if not m:
        sc.error(f"expects dim labels pattern, e.g., 'bf0_0io->0bf', found {sc.describe_next()}")
    pos = m.start()
    text = m.group(0)
    lhs, rest = text.split("_", 1)
    rhs, out = rest.split("->", 1)

    def side(labels, a, b, what):
        chars = [c for c in labels if c != "?"]
        if len(chars) != len(set(chars)):
            sc.error(f"expects unique {what} dimension numbers, but sees {labels}", pos)
        n_spatial = sum(1 for c in labels if c not in (a, b, "?"))
        spatial = [-1] * n_spatial
        a_dim = b_dim = 0
        for i, c in enumerate(labels):
            if c == "?":
                continue
            if c == a:
                a_dim = i
            elif c == b:
                b_dim = i
            elif "0" <= c < chr(ord("0") + n_spatial):
                spatial[ord(c) - ord("0")] = i
            else:
                sc.error(f"expects [0-{n_spatial - 1}{a}{b}?] in {what} dimension numbers", pos)
        return a_dim, b_dim, tuple(spatial)

    ib, if_, isp = side(lhs, "b", "f", "lhs")
    ki, ko, ksp = side(rhs, "i", "o", "rhs")
    ob, of, osp = side(out, "b", "f", "output")
    if not (len(isp) == len(ksp) == len(osp)):
        sc.error(f"input, kernel, and output must have same number of spatial dimensions, but "
                 f"got {len(isp)}, {len(ksp)}, {len(osp)}, respectively.", pos)
    sc.pos = m.end()
    return ConvolutionDimensionNumbers(ib, if_, isp, ki, ko, ksp, ob, of, osp)


class DimLabelsKind(AttrKind):
    """``dim_labels=b01f_01io->b01f``. Accepts ConvolutionDimensionNumbers or its text."""

    name = "dim labels"

    def check(self, value, where):
        if isinstance(value, ConvolutionDimensionNumbers):
            return value
        if isinstance(value, str):
            return ConvolutionDimensionNumbers.parse(value)
        raise InvalidArgumentError(f"{where} must be ConvolutionDimensionNumbers, got {value!r}")

    def to_text(self, value) -> str:
        return value.to_text()

    def read(self, sc, ctx):
        return read_dim_labels(sc)


DIM_LABELS = DimLabelsKind()


# -- ConvolutionKind ----------------------------------------------------------------------------


class ConvolutionKind(enum.Enum):
    """xla_data.proto ConvolutionKind: which shape rule a convolution uses (forward
    propagation, or the data/weight gradient)."""

    UNSET = "unset"
    FPROP = "fprop"
    WGRAD = "wgrad"
    DGRAD = "dgrad"

    @property
    def text(self) -> str:
        return self.value


CONVOLUTION_KIND = EnumKind(ConvolutionKind, "convolution kind")


# -- SparsityConfig -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorSparsityConfig:
    """N:M structured sparsity of one convolution operand (num_non_zero:block_size along
    ``dimension``); ``idx`` is the operand holding its metadata."""

    num_non_zero: int = 0
    block_size: int = 0
    dimension: int = 0
    stride: int = 0
    idx: int = 0

    def to_text(self) -> str:
        return (f"{{sparsity={self.num_non_zero}x{self.block_size} dimension={self.dimension} "
                f"stride={self.stride} idx={self.idx}}}")


@dataclass(frozen=True)
class SparsityConfig:
    """xla_data.proto SparsityConfig: optional sparsity of the lhs and rhs."""

    lhs: TensorSparsityConfig | None = None
    rhs: TensorSparsityConfig | None = None

    def to_text(self) -> str:
        """SparsityConfigToString: ``lhs={...} rhs={...}``."""
        parts = []
        if self.lhs is not None:
            parts.append("lhs=" + self.lhs.to_text())
        if self.rhs is not None:
            parts.append("rhs=" + self.rhs.to_text())
        return " ".join(parts)


def _read_tensor_sparsity(sc: Scanner) -> TensorSparsityConfig:
    sc.expect("{", "to start TensorSparsityConfig")
    values: dict[str, int] = {}
    while not sc.eat("}"):
        pos = sc.pos
        name = sc.read_ident()
        if name is None or not sc.eat("="):
            sc.error(f"expects an attribute name, found {sc.describe_next()}", pos)
        if name == "sparsity":
            nm = _read_dxd(sc, "sparsity")
            if len(nm) != 2:
                sc.error("expects 'num_non_zero:block_size'", pos)
            values["num_non_zero"], values["block_size"] = nm
        elif name in ("dimension", "stride", "idx"):
            values[name] = sc.read_int("an integer")
        else:
            sc.error(f"unknown attribute {name!r} in TensorSparsityConfig", pos)
    return TensorSparsityConfig(**values)


class SparsityConfigKind(AttrKind):
    """``sparsity_config={lhs={sparsity=2x4 dimension=1 stride=1 idx=2}}``."""

    name = "sparsity config"

    def check(self, value, where):
        if not isinstance(value, SparsityConfig):
            raise InvalidArgumentError(f"{where} must be a SparsityConfig, got {value!r}")
        return value

    def to_text(self, value) -> str:
        return "{" + value.to_text() + "}"

    def read(self, sc, ctx):
        sc.expect("{", "to start SparsityConfig")
        parts: dict[str, TensorSparsityConfig] = {}
        while not sc.eat("}"):
            pos = sc.pos
            name = sc.read_ident()
            if name not in ("lhs", "rhs") or not sc.eat("="):
                sc.error(f"expects lhs= or rhs= in SparsityConfig, found {sc.describe_next()}", pos)
            parts[name] = _read_tensor_sparsity(sc)
        return SparsityConfig(**parts)


SPARSITY_CONFIG = SparsityConfigKind()

__all__ = [
    "CONVOLUTION_KIND", "DIM_LABELS", "SPARSITY_CONFIG", "WINDOW", "ConvolutionDimensionNumbers",
    "ConvolutionKind", "DimLabelsKind", "Padding", "SparsityConfig", "SparsityConfigKind",
    "TensorSparsityConfig", "Window", "WindowDimension", "WindowKind", "as_padding",
    "dilated_bound",
    "make_padding", "read_dim_labels", "read_window_body", "strided_bound",
    "validate_padding_values",
]
