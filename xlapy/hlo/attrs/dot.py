"""Dot attributes: dimension numbers, precision config and ragged-dot dimension numbers.

Owns: DotDimensionNumbers (text keys ``lhs_batch_dims={..}, lhs_contracting_dims={..},
rhs_batch_dims={..}, rhs_contracting_dims={..}`` as DotDimensionNumbersToString prints them:
batch keys omitted when empty, contracting keys always), RaggedDotDimensionNumbers (the
same plus ``lhs_ragged_dims``/``rhs_group_dims``), PrecisionConfig (``operand_precision=
{default,highest}`` printed when some entry is not DEFAULT, then ``algorithm=dot_bf16_bf16_f32``
when set, as PrintPrecisionConfig does) with the Algorithm enum, and their multi-key
AttrKinds. Imports only the shape layer and xlapy.hlo.attrs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, ClassVar

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import AttrKind, check_int_list, check_sequence, read_int_list
from xlapy.hlo.attrs.enums import Precision
from xlapy.shape.text import Scanner


def _braced(dims) -> str:
    return "{" + ",".join(str(d) for d in dims) + "}"


# -- DotDimensionNumbers ------------------------------------------------------------------------


@dataclass(frozen=True)
class DotDimensionNumbers:
    """Contracting and batch dimensions of a dot (xla_data.proto DotDimensionNumbers).

    >>> DotDimensionNumbers([1], [0]).to_text()
    'lhs_contracting_dims={1}, rhs_contracting_dims={0}'
    """

    lhs_contracting_dimensions: tuple[int, ...] = ()
    rhs_contracting_dimensions: tuple[int, ...] = ()
    lhs_batch_dimensions: tuple[int, ...] = ()
    rhs_batch_dimensions: tuple[int, ...] = ()

    def __post_init__(self):
        for name in ("lhs_contracting_dimensions", "rhs_contracting_dimensions",
                     "lhs_batch_dimensions", "rhs_batch_dimensions"):
            value = check_int_list(getattr(self, name), f"DotDimensionNumbers.{name}")
            object.__setattr__(self, name, value)

    def items(self) -> list[tuple[str, str]]:
        """DotDimensionNumbersToString as (key, value) pairs."""
        out = []
        if self.lhs_batch_dimensions:
            out.append(("lhs_batch_dims", _braced(self.lhs_batch_dimensions)))
        out.append(("lhs_contracting_dims", _braced(self.lhs_contracting_dimensions)))
        if self.rhs_batch_dimensions:
            out.append(("rhs_batch_dims", _braced(self.rhs_batch_dimensions)))
        out.append(("rhs_contracting_dims", _braced(self.rhs_contracting_dimensions)))
        return out

    def to_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.items())

    def __str__(self) -> str:
        return self.to_text()

    def debug_string(self) -> str:
        """One-line proto text (fields in proto order), as shape-inference messages show it."""
        parts = []
        for name in ("lhs_contracting_dimensions", "rhs_contracting_dimensions",
                     "lhs_batch_dimensions", "rhs_batch_dimensions"):
            parts += [f"{name}: {d}" for d in getattr(self, name)]
        return " ".join(parts)


_DOT_KEYS = {
    "lhs_batch_dims": "lhs_batch_dimensions",
    "lhs_contracting_dims": "lhs_contracting_dimensions",
    "rhs_batch_dims": "rhs_batch_dimensions",
    "rhs_contracting_dims": "rhs_contracting_dimensions",
}


class DotDimensionNumbersKind(AttrKind):
    """The four ``*_dims={...}`` keys of dot and scaled-dot. Every key is optional in the
    text (absent: empty); the contracting keys are always printed."""

    name = "dot dimension numbers"
    keys = tuple(_DOT_KEYS)
    always_printed = True  # the contracting keys appear even when empty

    def check(self, value, where):
        if not isinstance(value, DotDimensionNumbers):
            raise InvalidArgumentError(f"{where} must be DotDimensionNumbers, got {value!r}")
        return value

    def items(self, spec_name, value):
        return (value if value is not None else DotDimensionNumbers()).items()

    def to_text(self, value) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.items("", value))

    def read_key(self, key, sc, ctx):
        return read_int_list(sc)

    def assemble(self, spec_name, parts, where):
        return DotDimensionNumbers(**{_DOT_KEYS[k]: v for k, v in parts.items()})


DOT_DIMENSION_NUMBERS = DotDimensionNumbersKind()


# -- RaggedDotDimensionNumbers ------------------------------------------------------------------


@dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """xla_data.proto RaggedDotDimensionNumbers: dot dimension numbers plus the lhs ragged
    dimension and the rhs group dimensions."""

    dot_dimension_numbers: DotDimensionNumbers = DotDimensionNumbers()
    lhs_ragged_dimensions: tuple[int, ...] = ()
    rhs_group_dimensions: tuple[int, ...] = ()

    def __post_init__(self):
        if not isinstance(self.dot_dimension_numbers, DotDimensionNumbers):
            raise InvalidArgumentError(
                "RaggedDotDimensionNumbers.dot_dimension_numbers must be DotDimensionNumbers, "
                f"got {self.dot_dimension_numbers!r}")
        for name in ("lhs_ragged_dimensions", "rhs_group_dimensions"):
            value = check_int_list(getattr(self, name), f"RaggedDotDimensionNumbers.{name}")
            object.__setattr__(self, name, value)

    def items(self) -> list[tuple[str, str]]:
        """RaggedDotDimensionNumbersToString as (key, value) pairs."""
        out = self.dot_dimension_numbers.items()
        if self.lhs_ragged_dimensions:
            out.append(("lhs_ragged_dims", _braced(self.lhs_ragged_dimensions)))
        if self.rhs_group_dimensions:
            out.append(("rhs_group_dims", _braced(self.rhs_group_dimensions)))
        return out

    def to_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.items())

    def __str__(self) -> str:
        return self.to_text()


class RaggedDotDimensionNumbersKind(AttrKind):
    """The dot keys plus ``lhs_ragged_dims={..}`` and ``rhs_group_dims={..}``."""

    name = "ragged dot dimension numbers"
    keys = (*_DOT_KEYS, "lhs_ragged_dims", "rhs_group_dims")
    always_printed = True

    def check(self, value, where):
        if not isinstance(value, RaggedDotDimensionNumbers):
            raise InvalidArgumentError(f"{where} must be RaggedDotDimensionNumbers, got {value!r}")
        return value

    def items(self, spec_name, value):
        return (value if value is not None else RaggedDotDimensionNumbers()).items()

    def to_text(self, value) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.items("", value))

    def read_key(self, key, sc, ctx):
        return read_int_list(sc)

    def assemble(self, spec_name, parts, where):
        dot = DotDimensionNumbers(**{_DOT_KEYS[k]: v for k, v in parts.items() if k in _DOT_KEYS})
        return RaggedDotDimensionNumbers(dot, parts.get("lhs_ragged_dims", ()),
                                         parts.get("rhs_group_dims", ()))


RAGGED_DOT_DIMENSION_NUMBERS = RaggedDotDimensionNumbersKind()


# -- PrecisionConfig ------------------------------------------------------------------------------


class Algorithm(enum.Enum):
    """PrecisionConfig.Algorithm; the text is the name without ``ALG_``, lower case."""

    ALG_UNSET = "unset"
    ALG_DOT_ANY_F8_ANY_F8_F32 = "dot_any_f8_any_f8_f32"
    ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM = "dot_any_f8_any_f8_f32_fast_accum"
    ALG_DOT_F16_F16_F16 = "dot_f16_f16_f16"
    ALG_DOT_F16_F16_F32 = "dot_f16_f16_f32"
    ALG_DOT_BF16_BF16_BF16 = "dot_bf16_bf16_bf16"
    ALG_DOT_BF16_BF16_F32 = "dot_bf16_bf16_f32"
    ALG_DOT_BF16_BF16_F32_X3 = "dot_bf16_bf16_f32_x3"
    ALG_DOT_BF16_BF16_F32_X6 = "dot_bf16_bf16_f32_x6"
    ALG_DOT_TF32_TF32_F32 = "dot_tf32_tf32_f32"
    ALG_DOT_TF32_TF32_F32_X3 = "dot_tf32_tf32_f32_x3"
    ALG_DOT_F32_F32_F32 = "dot_f32_f32_f32"
    ALG_DOT_F64_F64_F64 = "dot_f64_f64_f64"
    ALG_DOT_BF16_BF16_F32_X9 = "dot_bf16_bf16_f32_x9"

    @property
    def text(self) -> str:
        return self.value


_PRECISION_BY_TEXT = {p.value: p for p in Precision}
_ALGORITHM_BY_TEXT = {a.value: a for a in Algorithm}


def _precision(value, where: str) -> Precision:
    if isinstance(value, Precision):
        return value
    if isinstance(value, str) and value.lower() in _PRECISION_BY_TEXT:
        return _PRECISION_BY_TEXT[value.lower()]
    allowed = ", ".join(_PRECISION_BY_TEXT)
    raise InvalidArgumentError(
        f"{where}: operand precision must be one of {allowed}; got {value!r}")


def _algorithm(value, where: str) -> Algorithm:
    if isinstance(value, Algorithm):
        return value
    if isinstance(value, str):
        text = value.lower()
        text = text.removeprefix("alg_")
        if text in _ALGORITHM_BY_TEXT:
            return _ALGORITHM_BY_TEXT[text]
    raise InvalidArgumentError(f"{where}: unknown dot algorithm {value!r}")


@dataclass(frozen=True)
class PrecisionConfig:
    """Operand precisions (one per operand; DEFAULT, HIGH, HIGHEST) and the dot algorithm
    (xla_data.proto PrecisionConfig).

    >>> PrecisionConfig([Precision.DEFAULT, Precision.HIGHEST]).to_text()
    'operand_precision={default,highest}'
    """

    Precision: ClassVar = Precision
    Algorithm: ClassVar = Algorithm

    operand_precision: tuple = ()
    algorithm: Any = Algorithm.ALG_UNSET

    def __post_init__(self):
        items = check_sequence(self.operand_precision, "PrecisionConfig.operand_precision",
                               "a list of Precisions")
        precisions = tuple(_precision(p, "PrecisionConfig") for p in items)
        object.__setattr__(self, "operand_precision", precisions)
        object.__setattr__(self, "algorithm", _algorithm(self.algorithm, "PrecisionConfig"))

    @property
    def is_default(self) -> bool:
        return (all(p is Precision.DEFAULT for p in self.operand_precision)
                and self.algorithm is Algorithm.ALG_UNSET)

    def canonical(self) -> PrecisionConfig:
        """All-DEFAULT precisions dropped (they print, and mean, the same as none)."""
        if all(p is Precision.DEFAULT for p in self.operand_precision):
            return PrecisionConfig((), self.algorithm)
        return self

    def items(self) -> list[tuple[str, str]]:
        """PrintPrecisionConfig as (key, value) pairs."""
        out = []
        if any(p is not Precision.DEFAULT for p in self.operand_precision):
            out.append(("operand_precision",
                        "{" + ",".join(p.value for p in self.operand_precision) + "}"))
        if self.algorithm is not Algorithm.ALG_UNSET:
            out.append(("algorithm", self.algorithm.value))
        return out

    def to_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.items())


def _read_precision_list(sc: Scanner) -> tuple[Precision, ...]:
    sc.expect("{", "to start a list of operand precisions")
    out = []
    if sc.eat("}"):
        return ()
    while True:
        pos = sc.pos
        sc.skip()
        pos = sc.pos
        word = sc.read_ident()
        if word is None or word.lower() not in _PRECISION_BY_TEXT:
            sc.error(f"expects precision ({', '.join(_PRECISION_BY_TEXT)}) but sees "
                     f"{repr(word) if word else sc.describe_next()}", pos)
        out.append(_PRECISION_BY_TEXT[word.lower()])
        if sc.eat("}"):
            return tuple(out)
        sc.expect(",", "or '}' in a list of operand precisions")


def _read_algorithm(sc: Scanner) -> Algorithm:
    sc.skip()
    pos = sc.pos
    word = sc.read_ident()
    if word is None or word.lower() not in _ALGORITHM_BY_TEXT:
        sc.error(f"expects algorithm (e.g. dot_bf16_bf16_f32) but sees "
                 f"{repr(word) if word else sc.describe_next()}", pos)
    return _ALGORITHM_BY_TEXT[word.lower()]


class PrecisionConfigKind(AttrKind):
    """``operand_precision={default,highest}`` and ``algorithm=dot_tf32_tf32_f32``, each
    omitted when default. Accepts a PrecisionConfig or a list of precisions."""

    name = "precision config"

    def __init__(self, with_algorithm: bool = True):
        # ragged-dot and custom-call read only operand_precision= (XLA's parser has no
        # algorithm= for them).
        self.keys = ("operand_precision", "algorithm") if with_algorithm else ("operand_precision",)

    def check(self, value, where):
        if isinstance(value, PrecisionConfig):
            return value.canonical()
        if isinstance(value, (list, tuple)):
            return PrecisionConfig(tuple(_precision(p, where) for p in value)).canonical()
        raise InvalidArgumentError(f"{where} must be a PrecisionConfig, got {value!r}")

    def items(self, spec_name, value):
        return value.items()

    def to_text(self, value) -> str:
        return value.to_text()

    def read_key(self, key, sc, ctx):
        return _read_precision_list(sc) if key == "operand_precision" else _read_algorithm(sc)

    def assemble(self, spec_name, parts, where):
        return PrecisionConfig(parts.get("operand_precision", ()),
                               parts.get("algorithm", Algorithm.ALG_UNSET)).canonical()


PRECISION_CONFIG = PrecisionConfigKind()
#: operand_precision= only: ragged-dot, custom-call.
OPERAND_PRECISION = PrecisionConfigKind(with_algorithm=False)

__all__ = [
    "DOT_DIMENSION_NUMBERS", "OPERAND_PRECISION", "PRECISION_CONFIG", "RAGGED_DOT_DIMENSION_NUMBERS", "Algorithm",
    "DotDimensionNumbers", "DotDimensionNumbersKind", "Precision", "PrecisionConfig",
    "PrecisionConfigKind", "RaggedDotDimensionNumbers", "RaggedDotDimensionNumbersKind",
]
