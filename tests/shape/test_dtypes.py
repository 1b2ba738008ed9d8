import ml_dtypes
import numpy as np
import pytest

from xlapy.errors import InvalidArgumentError
from xlapy.shape import dtypes
from xlapy.shape.dtypes import PrimitiveType as P

# (type, text name, bit width, kind, numpy dtype) - XLA's primitive_util facts.
TABLE = [
    (P.PRED, "pred", 8, "pred", np.bool_),
    (P.S1, "s1", 1, "signed", ml_dtypes.int1),
    (P.S2, "s2", 2, "signed", ml_dtypes.int2),
    (P.S4, "s4", 4, "signed", ml_dtypes.int4),
    (P.S8, "s8", 8, "signed", np.int8),
    (P.S16, "s16", 16, "signed", np.int16),
    (P.S32, "s32", 32, "signed", np.int32),
    (P.S64, "s64", 64, "signed", np.int64),
    (P.U1, "u1", 1, "unsigned", ml_dtypes.uint1),
    (P.U2, "u2", 2, "unsigned", ml_dtypes.uint2),
    (P.U4, "u4", 4, "unsigned", ml_dtypes.uint4),
    (P.U8, "u8", 8, "unsigned", np.uint8),
    (P.U16, "u16", 16, "unsigned", np.uint16),
    (P.U32, "u32", 32, "unsigned", np.uint32),
    (P.U64, "u64", 64, "unsigned", np.uint64),
    (P.F16, "f16", 16, "float", np.float16),
    (P.BF16, "bf16", 16, "float", ml_dtypes.bfloat16),
    (P.F32, "f32", 32, "float", np.float32),
    (P.F64, "f64", 64, "float", np.float64),
    (P.C64, "c64", 64, "complex", np.complex64),
    (P.C128, "c128", 128, "complex", np.complex128),
    (P.F8E5M2, "f8e5m2", 8, "float", ml_dtypes.float8_e5m2),
    (P.F8E4M3, "f8e4m3", 8, "float", ml_dtypes.float8_e4m3),
    (P.F8E4M3FN, "f8e4m3fn", 8, "float", ml_dtypes.float8_e4m3fn),
    (P.F8E4M3B11FNUZ, "f8e4m3b11fnuz", 8, "float", ml_dtypes.float8_e4m3b11fnuz),
    (P.F8E5M2FNUZ, "f8e5m2fnuz", 8, "float", ml_dtypes.float8_e5m2fnuz),
    (P.F8E4M3FNUZ, "f8e4m3fnuz", 8, "float", ml_dtypes.float8_e4m3fnuz),
    (P.F8E3M4, "f8e3m4", 8, "float", ml_dtypes.float8_e3m4),
    (P.F8E8M0FNU, "f8e8m0fnu", 8, "float", ml_dtypes.float8_e8m0fnu),
    (P.F4E2M1FN, "f4e2m1fn", 4, "float", ml_dtypes.float4_e2m1fn),
    (P.F6E2M3FN, "f6e2m3fn", 6, "float", ml_dtypes.float6_e2m3fn),
    (P.F6E3M2FN, "f6e3m2fn", 6, "float", ml_dtypes.float6_e3m2fn),
]


@pytest.mark.parametrize("t,name,bits,kind,dtype", TABLE, ids=[r[1] for r in TABLE])
def test_type_table(t, name, bits, kind, dtype):
    assert dtypes.type_name(t) == name == str(t)
    assert dtypes.from_name(name) is t
    assert dtypes.bit_width(t) == bits
    assert dtypes.byte_width(t) == (bits + 7) // 8
    assert dtypes.to_dtype(t) == np.dtype(dtype)
    assert dtypes.from_dtype(dtype) is t
    assert dtypes.is_integral(t) == (kind in ("signed", "unsigned"))
    assert dtypes.is_signed_integral(t) == (kind == "signed")
    assert dtypes.is_unsigned_integral(t) == (kind == "unsigned")
    assert dtypes.is_floating(t) == (kind == "float")
    assert dtypes.is_complex(t) == (kind == "complex")
    assert dtypes.is_array_type(t)
    assert dtypes.is_sub_byte(t) == (bits < 8)


def test_xla_enum_numbers():
    # Values of xla_data.proto's PrimitiveType: they appear in serialized protos.
    assert (P.PRED, P.S8, P.F32, P.BF16, P.C128, P.TOKEN, P.F8E8M0FNU, P.F6E2M3FN) == (
        1, 2, 11, 16, 18, 17, 33, 36)


@pytest.mark.parametrize("t,name", [(P.TOKEN, "token"), (P.TUPLE, "tuple"), (P.OPAQUE_TYPE, "opaque")])
def test_non_array_types(t, name):
    assert dtypes.type_name(t) == name
    assert not dtypes.is_array_type(t)
    assert dtypes.bit_width(t) == 0
    with pytest.raises(InvalidArgumentError, match=f"element type {name} has no NumPy dtype"):
        dtypes.to_dtype(t)


def test_every_type_of_the_issue_is_present():
    wanted = ("PRED S2 S4 S8 S16 S32 S64 U2 U4 U8 U16 U32 U64 F16 BF16 F32 F64 C64 C128 F8E5M2 "
              "F8E4M3 F8E4M3FN F8E4M3B11FNUZ F8E5M2FNUZ F8E4M3FNUZ F8E3M4 F8E8M0FNU F4E2M1FN "
              "F6E2M3FN F6E3M2FN TOKEN TUPLE").split()
    for name in wanted:
        assert name in P.__members__
    assert dtypes.OPAQUE is P.OPAQUE_TYPE


def test_float_widths():
    assert dtypes.exponent_bits(P.BF16) == 8 and dtypes.significand_bits(P.BF16) == 8
    assert dtypes.exponent_bits(P.F16) == 5 and dtypes.significand_bits(P.F16) == 11
    assert dtypes.exponent_bits(P.F8E4M3FN) == 4 and dtypes.significand_bits(P.F8E4M3FN) == 4
    assert dtypes.complex_component_type(P.C64) is P.F32
    assert dtypes.complex_component_type(P.C128) is P.F64


def test_errors():
    with pytest.raises(InvalidArgumentError, match="unknown primitive type 'f33'"):
        dtypes.from_name("f33")
    with pytest.raises(InvalidArgumentError, match="NumPy dtype <U1 has no XLA element type"):
        dtypes.from_dtype(np.dtype("U1"))
    with pytest.raises(InvalidArgumentError, match="s32 is not a complex type"):
        dtypes.complex_component_type(P.S32)
