"""Physical buffers: to_physical / from_physical under plain, padded, tiled and packed layouts."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.errors import InvalidArgumentError
from xlapy.shape import (
    Layout,
    PaddingValue,
    PrimitiveType as P,
    Shape,
    Tile,
    byte_size,
    dtypes,
    from_physical,
    parse_shape,
    to_physical,
)


def test_column_major_bytes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    data = to_physical(a, parse_shape("f32[2,3]{0,1}"))
    np.testing.assert_array_equal(np.frombuffer(data, "<f4"), [0, 3, 1, 4, 2, 5])


def test_figure1_padding_is_zero_by_default_and_configurable():
    a = np.arange(1, 16, dtype=np.float32).reshape(3, 5)
    shape = parse_shape("f32[3,5]{1,0:T(2,2)}")
    buf = np.frombuffer(to_physical(a, shape), "<f4")
    np.testing.assert_array_equal(
        buf, [1, 2, 6, 7, 3, 4, 8, 9, 5, 0, 10, 0, 11, 12, 0, 0, 13, 14, 0, 0, 15, 0, 0, 0])
    buf = np.frombuffer(to_physical(a, shape, padding_value=-1), "<f4")
    assert (buf == -1).sum() == 9
    np.testing.assert_array_equal(from_physical(to_physical(a, shape), shape), a)


def test_legacy_padding_value():
    shape = Shape.array(P.S32, (2, 3), layout=Layout((0, 1), padded_dimensions=(3, 5),
                                                       padding_value=PaddingValue.LOWEST_PAD))
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    buf = np.frombuffer(to_physical(a, shape), "<i4")
    lo = np.iinfo(np.int32).min
    np.testing.assert_array_equal(buf, [1, 4, lo, 2, 5, lo, 3, 6, lo] + [lo] * 6)
    f = Shape.array(P.F32, (1,), layout=Layout((0,), padded_dimensions=(2,),
                                                  padding_value=PaddingValue.HIGHEST_PAD))
    assert np.frombuffer(to_physical([1.0], f), "<f4")[1] == np.inf


def test_sub_byte_packing_low_bits_first():
    shape = parse_shape("s4[5]{0:E(4)}")
    data = to_physical(np.array([1, -1, 7, -8, 3], ml_dtypes.int4), shape)
    assert data == bytes([0xF1, 0x87, 0x03])
    np.testing.assert_array_equal(from_physical(data, shape), [1, -1, 7, -8, 3])
    u2 = parse_shape("u2[5]{0:E(2)}")
    assert to_physical(np.array([1, 2, 3, 0, 3], ml_dtypes.uint2), u2) == bytes([0b00111001, 0b11])
    # Without E(n), sub-byte types take a byte each.
    assert to_physical(np.array([-1, 2], ml_dtypes.int4), parse_shape("s4[2]")) == bytes([0x0F, 0x02])


def test_little_endian_and_complex():
    assert to_physical(np.array([1], np.int32), parse_shape("s32[1]")) == b"\x01\0\0\0"
    data = to_physical(np.array([1 + 2j], np.complex64), parse_shape("c64[1]"))
    np.testing.assert_array_equal(np.frombuffer(data, "<f4"), [1, 2])
    assert to_physical(np.array([True, False]), parse_shape("pred[2]")) == b"\x01\x00"


def test_errors():
    with pytest.raises(InvalidArgumentError, match=r"to_physical: array of dimensions \[2\] does not match shape f32\[3\]\{0\}"):
        to_physical(np.zeros(2), parse_shape("f32[3]"))
    with pytest.raises(InvalidArgumentError, match=r"from_physical: buffer has 4 bytes but f32\[3\]\{0\} occupies 12 bytes"):
        from_physical(b"\0" * 4, parse_shape("f32[3]"))
    with pytest.raises(InvalidArgumentError, match=r"element size E\(2\) is smaller than the 4 bits of s4"):
        to_physical(np.zeros(2), parse_shape("s4[2]{0:E(2)}"))
    with pytest.raises(InvalidArgumentError, match=r"E\(16\) is smaller than the 32 bits of f32"):
        to_physical(np.zeros(2), parse_shape("f32[2]{0:E(16)}"))
    with pytest.raises(InvalidArgumentError, match=r"E\(12\) of s8\[2\]\{0:E\(12\)\} is not supported"):
        to_physical(np.zeros(2), parse_shape("s8[2]{0:E(12)}"))
    with pytest.raises(InvalidArgumentError, match=r"expected an array shape, got \(f32\[\]\)"):
        to_physical(1.0, parse_shape("(f32[])"))
    with pytest.raises(InvalidArgumentError, match="expected a bytes-like buffer, got int"):
        from_physical(3, parse_shape("f32[]"))


@st.composite
def layouts_for(draw, et, dims):
    rank = len(dims)
    m2m = tuple(draw(st.permutations(list(range(rank)))))
    tiles = tuple(Tile(tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(1, rank + 1)))))
                  for _ in range(draw(st.integers(0, 2))))
    bits = dtypes.bit_width(et)
    e = draw(st.sampled_from([0, bits])) if bits < 8 else 0
    return Layout(m2m, tiles=tiles, element_size_in_bits=e,
                  tail_padding_alignment_in_elements=draw(st.sampled_from([1, 5])))


@st.composite
def arrays_and_shapes(draw):
    et = draw(st.sampled_from(list(dtypes.ARRAY_TYPES)))
    dims = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    shape = Shape.array(et, dims, layout=draw(layouts_for(et, dims)))
    dtype = dtypes.to_dtype(et)
    nbytes = int(np.prod(dims)) * dtype.itemsize
    raw = np.frombuffer(draw(st.binary(min_size=nbytes, max_size=nbytes)), np.uint8)
    bits = dtypes.bit_width(et)
    if bits < 8:
        raw = raw & ((1 << bits) - 1)
    if et == P.PRED:
        raw = raw & 1
    return raw.view(dtype).reshape(dims), shape


@settings(max_examples=400, deadline=None)
@given(arrays_and_shapes())
def test_to_from_physical_round_trip_every_type(args):
    array, shape = args
    data = to_physical(array, shape)
    assert len(data) == byte_size(shape)
    back = from_physical(data, shape)
    assert back.dtype == array.dtype and back.shape == array.shape
    # Compare bits: NaN payloads and -0 must survive.
    assert back.tobytes() == np.ascontiguousarray(array).tobytes()
