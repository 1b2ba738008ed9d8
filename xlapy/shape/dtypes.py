"""XLA's element types (PrimitiveType): names, bit widths, classes, NumPy dtypes.

Owns: the PrimitiveType enum (XLA's numeric values from xla_data.proto), the lowercase
text names used in HLO (``f32``, ``bf16``, ``f8e4m3fn``, ``pred``, ``token``), bit and
byte widths, the integral/signed/floating/complex classification and the mapping to NumPy
dtypes (ml_dtypes for bf16, f8, f6, f4, int1/2/4). Imports nothing from xlapy but errors.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from xlapy.errors import InvalidArgumentError


class PrimitiveType(enum.IntEnum):
    """XLA's PrimitiveType, with the proto's numbers. ``str(t)`` is the HLO text name."""

    PRIMITIVE_TYPE_INVALID = 0
    PRED = 1
    S1 = 30
    S2 = 26
    S4 = 21
    S8 = 2
    S16 = 3
    S32 = 4
    S64 = 5
    U1 = 31
    U2 = 27
    U4 = 22
    U8 = 6
    U16 = 7
    U32 = 8
    U64 = 9
    F16 = 10
    F32 = 11
    BF16 = 16
    F64 = 12
    F8E5M2 = 19
    F8E4M3 = 28
    F8E4M3FN = 20
    F8E4M3B11FNUZ = 23
    F8E3M4 = 29
    F8E5M2FNUZ = 24
    F8E4M3FNUZ = 25
    F4E2M1FN = 32
    F8E8M0FNU = 33
    F6E3M2FN = 35
    F6E2M3FN = 36
    C64 = 15
    C128 = 18
    TUPLE = 13
    OPAQUE_TYPE = 14
    TOKEN = 17

    def __str__(self) -> str:
        return type_name(self)

    @property
    def info(self) -> "TypeInfo":
        return _INFO[self]


OPAQUE = PrimitiveType.OPAQUE_TYPE


@dataclass(frozen=True)
class TypeInfo:
    name: str  # lowercase HLO text name
    bits: int  # XLA's BitWidth (0 for token, tuple, opaque)
    kind: str  # "pred", "signed", "unsigned", "float", "complex", "token", "tuple", "opaque"
    dtype: np.dtype | None  # NumPy/ml_dtypes storage dtype, None where there is none


def _info(name, bits, kind, dtype):
    return TypeInfo(name, bits, kind, None if dtype is None else np.dtype(dtype))


P = PrimitiveType
# One row per type: (text name, bit width, kind, NumPy dtype).
_INFO: dict[PrimitiveType, TypeInfo] = {
    P.PRED: _info("pred", 8, "pred", np.bool_),
    P.S1: _info("s1", 1, "signed", ml_dtypes.int1),
    P.S2: _info("s2", 2, "signed", ml_dtypes.int2),
    P.S4: _info("s4", 4, "signed", ml_dtypes.int4),
    P.S8: _info("s8", 8, "signed", np.int8),
    P.S16: _info("s16", 16, "signed", np.int16),
    P.S32: _info("s32", 32, "signed", np.int32),
    P.S64: _info("s64", 64, "signed", np.int64),
    P.U1: _info("u1", 1, "unsigned", ml_dtypes.uint1),
    P.U2: _info("u2", 2, "unsigned", ml_dtypes.uint2),
    P.U4: _info("u4", 4, "unsigned", ml_dtypes.uint4),
    P.U8: _info("u8", 8, "unsigned", np.uint8),
    P.U16: _info("u16", 16, "unsigned", np.uint16),
    P.U32: _info("u32", 32, "unsigned", np.uint32),
    P.U64: _info("u64", 64, "unsigned", np.uint64),
    P.F16: _info("f16", 16, "float", np.float16),
    P.F32: _info("f32", 32, "float", np.float32),
    P.BF16: _info("bf16", 16, "float", ml_dtypes.bfloat16),
    P.F64: _info("f64", 64, "float", np.float64),
    P.F8E5M2: _info("f8e5m2", 8, "float", ml_dtypes.float8_e5m2),
    P.F8E4M3: _info("f8e4m3", 8, "float", ml_dtypes.float8_e4m3),
    P.F8E4M3FN: _info("f8e4m3fn", 8, "float", ml_dtypes.float8_e4m3fn),
    P.F8E4M3B11FNUZ: _info("f8e4m3b11fnuz", 8, "float", ml_dtypes.float8_e4m3b11fnuz),
    P.F8E3M4: _info("f8e3m4", 8, "float", ml_dtypes.float8_e3m4),
    P.F8E5M2FNUZ: _info("f8e5m2fnuz", 8, "float", ml_dtypes.float8_e5m2fnuz),
    P.F8E4M3FNUZ: _info("f8e4m3fnuz", 8, "float", ml_dtypes.float8_e4m3fnuz),
    P.F4E2M1FN: _info("f4e2m1fn", 4, "float", ml_dtypes.float4_e2m1fn),
    P.F8E8M0FNU: _info("f8e8m0fnu", 8, "float", ml_dtypes.float8_e8m0fnu),
    P.F6E3M2FN: _info("f6e3m2fn", 6, "float", ml_dtypes.float6_e3m2fn),
    P.F6E2M3FN: _info("f6e2m3fn", 6, "float", ml_dtypes.float6_e2m3fn),
    P.C64: _info("c64", 64, "complex", np.complex64),
    P.C128: _info("c128", 128, "complex", np.complex128),
    P.TUPLE: _info("tuple", 0, "tuple", None),
    P.OPAQUE_TYPE: _info("opaque", 0, "opaque", None),
    P.TOKEN: _info("token", 0, "token", None),
}
del P

_BY_NAME: dict[str, PrimitiveType] = {info.name: t for t, info in _INFO.items()}
_BY_DTYPE: dict[np.dtype, PrimitiveType] = {
    info.dtype: t for t, info in _INFO.items() if info.dtype is not None
}

#: Every element type an array can have (everything but tuple, opaque and token).
ARRAY_TYPES: tuple[PrimitiveType, ...] = tuple(
    t for t, i in _INFO.items() if i.kind not in ("tuple", "opaque", "token")
)


def type_name(t: PrimitiveType) -> str:
    """The lowercase HLO text name: ``type_name(PrimitiveType.BF16) == "bf16"``."""
    return _INFO[PrimitiveType(t)].name


def is_type_name(name: str) -> bool:
    return name in _BY_NAME


def from_name(name: str) -> PrimitiveType:
    """``from_name("f32") is PrimitiveType.F32``; also accepts upper-case enum names."""
    t = _BY_NAME.get(name)
    if t is None and name.upper() in PrimitiveType.__members__:
        t = PrimitiveType[name.upper()]
    if t is None or t is PrimitiveType.PRIMITIVE_TYPE_INVALID:
        raise InvalidArgumentError(f"unknown primitive type {name!r}")
    return t


def bit_width(t: PrimitiveType) -> int:
    """XLA's BitWidth: 8 for pred, 4 for s4, 16 for bf16, 0 for token/tuple/opaque."""
    return _INFO[t].bits


def byte_width(t: PrimitiveType) -> int:
    """XLA's ByteWidth: ceil(bit width / 8); s4 and f4 take one byte unpacked."""
    return (_INFO[t].bits + 7) // 8


def is_array_type(t: PrimitiveType) -> bool:
    return _INFO[t].kind not in ("tuple", "opaque", "token")


def is_pred(t: PrimitiveType) -> bool:
    return t == PrimitiveType.PRED


def is_signed_integral(t: PrimitiveType) -> bool:
    return _INFO[t].kind == "signed"


def is_unsigned_integral(t: PrimitiveType) -> bool:
    return _INFO[t].kind == "unsigned"


def is_integral(t: PrimitiveType) -> bool:
    """Signed or unsigned integer types (not pred), as XLA's IsIntegralType."""
    return _INFO[t].kind in ("signed", "unsigned")


def is_floating(t: PrimitiveType) -> bool:
    return _INFO[t].kind == "float"


def is_complex(t: PrimitiveType) -> bool:
    return _INFO[t].kind == "complex"


def is_sub_byte(t: PrimitiveType) -> bool:
    """Types narrower than a byte (s1/s2/s4/u1/u2/u4, f4e2m1fn, f6*)."""
    return 0 < _INFO[t].bits < 8


def significand_bits(t: PrimitiveType) -> int:
    """Significand width including the implicit bit, as XLA's SignificandWidth."""
    return int(ml_dtypes.finfo(to_dtype(t)).nmant) + 1 if is_floating(t) else 0


def exponent_bits(t: PrimitiveType) -> int:
    """Exponent field width of a floating type, as XLA's ExponentWidth."""
    if not is_floating(t):
        return 0
    info = ml_dtypes.finfo(to_dtype(t))
    return int(info.nexp)


def complex_component_type(t: PrimitiveType) -> PrimitiveType:
    """f32 for c64, f64 for c128."""
    if t == PrimitiveType.C64:
        return PrimitiveType.F32
    if t == PrimitiveType.C128:
        return PrimitiveType.F64
    raise InvalidArgumentError(f"complex_component_type: {type_name(t)} is not a complex type")


def to_dtype(t: PrimitiveType) -> np.dtype:
    """The NumPy dtype holding one element: ``to_dtype(BF16) == ml_dtypes.bfloat16``."""
    dtype = _INFO[PrimitiveType(t)].dtype
    if dtype is None:
        raise InvalidArgumentError(f"element type {type_name(t)} has no NumPy dtype")
    return dtype


def from_dtype(dtype) -> PrimitiveType:
    """The PrimitiveType of a NumPy dtype (or anything ``np.dtype`` accepts)."""
    try:
        key = np.dtype(dtype)
    except TypeError as e:
        raise InvalidArgumentError(f"not a NumPy dtype: {dtype!r}") from e
    t = _BY_DTYPE.get(key)
    if t is None:
        raise InvalidArgumentError(f"NumPy dtype {key} has no XLA element type")
    return t
