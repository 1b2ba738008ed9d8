"""Physical buffers: the exact bytes an array occupies in memory under its layout.

Owns: ``to_physical(array, shape) -> bytes`` and ``from_physical(data, shape) -> ndarray``:
elements placed at their linear index (tiling, legacy padding, tail alignment), padding
filled with the padding value, little-endian element bytes, and sub-byte packing for
``E(n)`` layouts (element k in bits [k*n, (k+1)*n) of the buffer, low bits first).
Imports only the shape layer.
"""

from __future__ import annotations

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.shape import dtypes
from xlapy.shape.index import byte_size, element_size_in_bits, linear_indices, physical_plan
from xlapy.shape.layout import PaddingValue
from xlapy.shape.shape import Shape


def _storage_bits(shape: Shape, fn: str) -> int:
    bits = element_size_in_bits(shape)
    natural = dtypes.byte_width(shape.element_type) * 8
    type_bits = dtypes.bit_width(shape.element_type)
    if bits < type_bits:
        raise InvalidArgumentError(
            f"{fn}: element size E({bits}) is smaller than the {type_bits} bits of "
            f"{dtypes.type_name(shape.element_type)} in {shape}"
        )
    if bits >= 8 and bits != natural:
        raise InvalidArgumentError(
            f"{fn}: element size E({bits}) of {shape} is not supported: sizes of 8 bits or "
            f"more must equal the type's {natural}-bit storage"
        )
    return bits


def _fill_value(shape: Shape, padding_value):
    if padding_value is not None:
        return padding_value
    layout = shape.layout
    kind = layout.padding_value if layout is not None and layout.padded_dimensions else None
    if kind in (None, PaddingValue.ZERO_PAD, PaddingValue.INVALID_PAD, PaddingValue.UNKNOWN_PAD):
        return 0
    if kind == PaddingValue.ONE_PAD:
        return 1
    dtype = dtypes.to_dtype(shape.element_type)
    et = shape.element_type
    if dtypes.is_floating(et) or dtypes.is_complex(et):
        import ml_dtypes

        info = ml_dtypes.finfo(dtype if not dtypes.is_complex(et) else np.float64)
        has_inf = bool(np.isinf(np.array(np.inf, dtype=dtype)))
        big = np.inf if has_inf else info.max
        return -big if kind == PaddingValue.LOWEST_PAD else big
    if et == dtypes.PrimitiveType.PRED:
        return kind == PaddingValue.HIGHEST_PAD
    import ml_dtypes

    info = ml_dtypes.iinfo(dtype)
    return info.min if kind == PaddingValue.LOWEST_PAD else info.max


def to_physical(array, shape: Shape, padding_value=None) -> bytes:
    """The bytes ``array`` occupies in a buffer laid out as ``shape``.

    Padding elements hold ``padding_value`` (default: the legacy layout's padding value,
    else zero). ``array`` must have the shape's dimensions; it is converted to the shape's
    element type.

    >>> to_physical(np.arange(6, dtype=np.float32).reshape(2, 3), parse_shape("f32[2,3]{0,1}"))
    ... # elements in the order 0 3 1 4 2 5
    """
    shape = _array_shape(shape, "to_physical")
    dtype = dtypes.to_dtype(shape.element_type)
    try:
        arr = np.asarray(array)
        if arr.dtype != dtype:
            arr = arr.astype(dtype)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(
            f"to_physical: cannot convert the array to {dtypes.type_name(shape.element_type)}: {e}"
        ) from e
    if arr.shape != tuple(shape.dimensions):
        raise InvalidArgumentError(
            f"to_physical: array of dimensions {list(arr.shape)} does not match shape {shape}"
        )
    bits = _storage_bits(shape, "to_physical")
    plan = physical_plan(shape)
    try:
        fill = np.asarray(_fill_value(shape, padding_value)).astype(dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(
            f"to_physical: padding value {padding_value!r} is not a "
            f"{dtypes.type_name(shape.element_type)} value: {e}"
        ) from e
    buf = np.full(plan.elements, fill, dtype=dtype)
    if arr.size:
        buf[linear_indices(shape).ravel()] = arr.ravel()
    if bits < 8:
        codes = buf.view(np.uint8) & np.uint8((1 << bits) - 1)
        bitplanes = (codes[:, None] >> np.arange(bits, dtype=np.uint8)) & 1
        data = np.packbits(bitplanes.ravel(), bitorder="little").tobytes()
    else:
        data = buf.astype(dtype.newbyteorder("<"), copy=False).tobytes()
    expected = byte_size(shape)
    assert len(data) == expected, (len(data), expected)
    return data


def from_physical(data, shape: Shape) -> np.ndarray:
    """The array stored in ``data`` (bytes-like, laid out as ``shape``); padding is ignored.

    Inverse of ``to_physical``: ``from_physical(to_physical(a, s), s)`` equals ``a``.
    """
    shape = _array_shape(shape, "from_physical")
    dtype = dtypes.to_dtype(shape.element_type)
    bits = _storage_bits(shape, "from_physical")
    plan = physical_plan(shape)
    try:
        raw = np.frombuffer(memoryview(data), dtype=np.uint8)
    except TypeError as e:
        raise InvalidArgumentError(
            f"from_physical: expected a bytes-like buffer, got {type(data).__name__}"
        ) from e
    expected = byte_size(shape)
    if raw.size != expected:
        raise InvalidArgumentError(
            f"from_physical: buffer has {raw.size} bytes but {shape} occupies {expected} bytes"
        )
    if bits < 8:
        bitstream = np.unpackbits(raw, bitorder="little")[: plan.elements * bits]
        planes = bitstream.reshape(plan.elements, bits).astype(np.uint8)
        codes = (planes << np.arange(bits, dtype=np.uint8)).sum(axis=1, dtype=np.uint8)
        storage = dtypes.bit_width(shape.element_type)
        if dtypes.is_signed_integral(shape.element_type) and storage < 8:
            # Keep only the type's own bits: ml_dtypes stores sub-byte values masked.
            codes = codes & np.uint8((1 << storage) - 1)
        buf = codes.view(dtype)
    else:
        buf = raw.view(dtype.newbyteorder("<")).astype(dtype, copy=False)
    if not shape.dimensions:
        return buf[:1].reshape(()).copy()
    if 0 in shape.dimensions:
        return np.zeros(shape.dimensions, dtype=dtype)
    return buf[linear_indices(shape)].copy()


def _array_shape(shape, fn: str) -> Shape:
    if isinstance(shape, str):
        from xlapy.shape.text import parse_shape

        shape = parse_shape(shape)
    if not isinstance(shape, Shape) or not shape.is_array():
        raise InvalidArgumentError(f"{fn}: expected an array shape, got {shape}")
    return shape
