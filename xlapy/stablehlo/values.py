"""MLIR types and literals as xlapy shapes and literals.

Owns: the element-type mapping (MLIR's ``i1``/``i32``/``ui8``/``f8E4M3FN``/``complex<f32>``
to XLA's ``pred``/``s32``/``u8``/``f8e4m3fn``/``c64``, as XLA's ConvertMlirTypeToPrimitiveType:
signless and signed integers are signed), ``shape_of`` (tensor, tuple and token types to
Shapes; ``?`` with a ``#stablehlo.bounds`` bound is a bounded dynamic dimension), and
``dense_array`` (a ``dense<...>`` attribute - nested elements, splats, hex blobs ``"0x..."``
with one element per byte for sub-byte types, ``dense_resource`` blobs, complex pairs,
floats written as bit patterns - as a NumPy array of the element type). Imports the shape
layer and xlapy.stablehlo.mlir.
"""

from __future__ import annotations

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.shape import UNBOUNDED_SIZE
from xlapy.stablehlo.mlir import (
    DenseAttr,
    Element,
    LocatedError,
    MType,
    ScalarType,
    TensorType,
    TokenType,
    TupleType,
)

P = PrimitiveType
_ELEMENT_TYPES = {
    "i1": P.PRED, "f16": P.F16, "f32": P.F32, "f64": P.F64, "bf16": P.BF16,
    "f8E5M2": P.F8E5M2, "f8E4M3": P.F8E4M3, "f8E4M3FN": P.F8E4M3FN,
    "f8E4M3B11FNUZ": P.F8E4M3B11FNUZ, "f8E3M4": P.F8E3M4, "f8E5M2FNUZ": P.F8E5M2FNUZ,
    "f8E4M3FNUZ": P.F8E4M3FNUZ, "f4E2M1FN": P.F4E2M1FN, "f8E8M0FNU": P.F8E8M0FNU,
    "f6E3M2FN": P.F6E3M2FN, "f6E2M3FN": P.F6E2M3FN,
    "complex<f32>": P.C64, "complex<f64>": P.C128,
}
for _bits, (_s, _u) in {1: (P.S1, P.U1), 2: (P.S2, P.U2), 4: (P.S4, P.U4), 8: (P.S8, P.U8),
                        16: (P.S16, P.U16), 32: (P.S32, P.U32), 64: (P.S64, P.U64)}.items():
    if _bits != 1:
        _ELEMENT_TYPES[f"i{_bits}"] = _s
    _ELEMENT_TYPES[f"si{_bits}"] = _s
    _ELEMENT_TYPES[f"ui{_bits}"] = _u
del _bits, _s, _u

#: XLA element type -> the MLIR spelling StableHLO prints for it.
MLIR_NAMES = {t: name for name, t in _ELEMENT_TYPES.items() if not name.startswith("si")}


def element_type(elem: str) -> PrimitiveType:
    """XLA's element type for an MLIR element type spelling; InvalidArgumentError if none."""
    t = _ELEMENT_TYPES.get(elem)
    if t is None:
        if elem.startswith("!quant"):
            raise InvalidArgumentError(f"quantized element type {elem} has no XLA element type "
                                       "(XLA's translation does not take quantized programs)")
        raise InvalidArgumentError(f"element type {elem} has no XLA element type")
    return t


def shape_of(t: MType) -> Shape:
    """The HLO shape of an MLIR type (default layout)."""
    if isinstance(t, TensorType):
        et = element_type(t.elem)
        dims, dyn = [], []
        for i, d in enumerate(t.dims):
            if d is None:
                bound = t.bounds[i] if t.bounds is not None else None
                dims.append(UNBOUNDED_SIZE if bound is None else bound)
                dyn.append(True)
            else:
                dims.append(d)
                dyn.append(False)
        return Shape.array(et, dims, dynamic_dimensions=dyn)
    if isinstance(t, ScalarType):
        return Shape.scalar(element_type(t.elem))
    if isinstance(t, TupleType):
        return Shape.tuple(shape_of(x) for x in t.types)
    if isinstance(t, TokenType):
        return Shape.token()
    raise InvalidArgumentError(f"type {t} has no HLO shape")


def _flatten(payload, out: list, depth: int, shape: list) -> None:
    if isinstance(payload, Element):
        out.append(payload)
        return
    if len(shape) <= depth:
        shape.append(len(payload))
    for item in payload:
        _flatten(item, out, depth + 1, shape)


def dense_array(attr: DenseAttr, resources: dict | None = None) -> np.ndarray:
    """The value of a ``dense<...> : tensor<...>`` attribute as a NumPy array of the XLA
    element type's dtype (ml_dtypes for the narrow types). InvalidArgumentError on a value
    that does not fit the type, an element count that does not match, or a malformed blob."""
    t = attr.type
    if not isinstance(t, TensorType):
        raise InvalidArgumentError(f"dense literal of type {t}: expected a tensor type")
    if any(d is None for d in t.dims):
        raise InvalidArgumentError(f"a dense literal needs a static shape, got {t}")
    # ``index`` elements (layouts, shapes in attributes) hold 64-bit integers.
    et = P.S64 if t.elem == "index" else element_type(t.elem)
    dtype = dtypes.to_dtype(et)
    dims = tuple(t.dims)
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if attr.resource is not None:
        blob = (resources or {}).get(attr.resource)
        if blob is None:
            raise InvalidArgumentError(f"dense_resource<{attr.resource}>: no such blob in the "
                                       "file's dialect_resources section")
        data = bytes.fromhex(blob[0][2:])
        # MLIR's blob format starts with a 4-byte alignment word.
        return _from_bytes(data[4:], et, dtype, dims, count, f"dense_resource<{attr.resource}>")
    payload = attr.payload
    if isinstance(payload, str):
        data = bytes.fromhex(payload[2:])
        return _from_bytes(data, et, dtype, dims, count, "hex dense literal")
    if isinstance(payload, Element):  # a splat
        value = _located_element(payload, et, dtype)
        return np.full(dims, value, dtype=dtype)
    flat: list[Element] = []
    nested: list[int] = []
    _flatten(payload, flat, 0, nested)
    if len(flat) != count or (flat and tuple(nested) != dims and count != 0):
        got = "x".join(map(str, nested)) if nested else "0"
        raise InvalidArgumentError(f"dense literal has {len(flat)} elements (shape {got}) but "
                                   f"its type is {t}")
    values = [_located_element(e, et, dtype) for e in flat]
    arr = np.empty(count, dtype=dtype)
    for i, v in enumerate(values):
        arr[i] = v
    return arr.reshape(dims)


def _from_bytes(data: bytes, et, dtype, dims, count: int, what: str) -> np.ndarray:
    if dtypes.is_sub_byte(et) or et == P.PRED:
        raw = np.frombuffer(data, dtype=np.uint8)
        width = 1
    else:
        width = np.dtype(dtype).itemsize
        raw = None
    n = len(data) // width
    if len(data) % width:
        raise InvalidArgumentError(f"{what}: {len(data)} bytes is not a whole number of "
                                   f"{dtypes.type_name(et)} elements")
    if n not in (count, 1):
        raise InvalidArgumentError(f"{what}: {n} elements for a tensor of {count}")
    if raw is not None:
        if et == P.PRED:
            arr = raw.astype(bool)
        else:
            bits = dtypes.bit_width(et)
            mask = (1 << bits) - 1
            vals = raw & mask
            if dtypes.is_signed_integral(et):
                vals = np.where(vals >= (1 << (bits - 1)), vals.astype(np.int64) - (1 << bits),
                                vals)
                arr = vals.astype(np.int64).astype(dtype)
            elif dtypes.is_unsigned_integral(et):
                arr = vals.astype(np.int64).astype(dtype)
            else:  # sub-byte floats: the byte holds the bit pattern
                arr = vals.astype(np.uint8).view(dtype)
    else:
        arr = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)
    if n == 1 and count != 1:
        return np.full(dims, arr[0], dtype=dtype)
    return arr.reshape(dims)


def _float_from_token(raw: str, et, dtype):
    body = raw.lstrip("+-").lower()
    if body.startswith("0x"):  # the element's bit pattern
        bits = int(raw, 16)
        width = dtypes.bit_width(et)
        if bits >> width:
            raise InvalidArgumentError(f"hex float {raw} has more than {width} bits for "
                                       f"{dtypes.type_name(et)}")
        if width < 8:
            return np.array([bits], dtype=np.uint8).view(dtype)[0]
        uint = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
        return np.array([bits], dtype=uint).view(dtype)[0]
    return np.asarray(float(raw)).astype(dtype)


def _located_element(e: Element, et, dtype):
    try:
        return _element(e, et, dtype)
    except LocatedError:
        raise
    except InvalidArgumentError as err:
        raise LocatedError(str(err), e.pos) from None


def _element(e: Element, et, dtype):
    raw = e.raw
    try:
        if dtypes.is_complex(et):
            part = dtypes.to_dtype(dtypes.complex_component_type(et))
            if not isinstance(raw, tuple):
                raise InvalidArgumentError(f"expected a complex element (re, im), found {raw}")
            re_ = _float_from_token(raw[0], dtypes.complex_component_type(et), part)
            im = _float_from_token(raw[1], dtypes.complex_component_type(et), part)
            return complex(float(re_), float(im))
        if isinstance(raw, tuple):
            raise InvalidArgumentError(f"a complex element for a {dtypes.type_name(et)} literal")
        if et == P.PRED:
            if raw in ("true", "false"):
                return raw == "true"
            v = int(raw, 0)
            if v not in (0, 1):
                raise InvalidArgumentError(f"{raw} is not a valid i1 value")
            return bool(v)
        if raw in ("true", "false"):
            raise InvalidArgumentError(f"{raw} is not a valid {dtypes.type_name(et)} value")
        if dtypes.is_floating(et):
            return _float_from_token(raw, et, dtype)
        v = int(raw, 0)
        lo, hi = _int_range(et)
        if not lo <= v <= hi:
            # MLIR accepts the unsigned spelling of a negative signless value.
            bits = dtypes.bit_width(et)
            if dtypes.is_signed_integral(et) and 0 <= v < (1 << bits):
                v -= 1 << bits
            else:
                raise InvalidArgumentError(f"integer {raw} does not fit {dtypes.type_name(et)}")
        return v
    except ValueError as err:
        raise InvalidArgumentError(f"bad element {raw!r} for {dtypes.type_name(et)}: {err}") \
            from None


def _int_range(et) -> tuple[int, int]:
    bits = dtypes.bit_width(et)
    if dtypes.is_signed_integral(et):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1
