"""Shapes, layouts, program shapes and literals to and from XLA's protos.

Owns: ``shape_from_proto`` / ``shape_to_proto`` (ShapeProto with LayoutProto),
``literal_from_proto`` / ``literal_to_proto`` (LiteralProto), and ProtoError, the error every
xlapy.proto reader raises for a message that does not describe valid HLO.

LiteralProto stores an array's elements in the order of its layout (``minor_to_major``:
``f32[2,3]{0,1}`` holds column-major data), as XLA's Literal::ToProto writes them. Element
encodings follow XLA's LiteralBase::Piece::WriteToProto: pred, 32- and 64-bit types and
complex (interleaved real, imaginary) as repeated fields; 8-bit types as bytes; 16-bit
types as little-endian bytes; sub-byte types (s1, s2, s4, u1, u2, u4, f4e2m1fn) one element
per byte, in its low bits (s4 -1 is 0x0f). XLA has no field for f6e2m3fn and f6e3m2fn
literals (its own writer aborts on them): xlapy rejects them with an error.
Imports the shape layer and xlapy.errors.
"""

from __future__ import annotations

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.shape import Layout, PrimitiveType, Shape, SplitConfig, Tile, dtypes
from xlapy.shape.literal import Literal
from xlapy.shape.shape import UNBOUNDED_SIZE


class ProtoError(InvalidArgumentError):
    """A protobuf message (HloModuleProto, HloSnapshot, LiteralProto...) that is not valid
    HLO, or a file that holds none. The message names the message path and the field."""


P = PrimitiveType
_SPECIAL = {P.TUPLE, P.TOKEN, P.OPAQUE_TYPE}


def _primitive_type(value: int, where: str) -> PrimitiveType:
    try:
        t = PrimitiveType(value)
    except ValueError:
        raise ProtoError(f"{where}: unknown element type {value} (not an XLA PrimitiveType "
                         f"xlapy knows)") from None
    if t == P.PRIMITIVE_TYPE_INVALID:
        raise ProtoError(f"{where}: element_type is PRIMITIVE_TYPE_INVALID (no element type set)")
    return t


# -- shapes ------------------------------------------------------------------------------------


def layout_from_proto(lp, rank: int, where: str) -> Layout:
    if any(t != 0 for t in lp.dim_level_types):
        raise ProtoError(f"{where}: sparse layouts (dim_level_types) are not supported")

    def optional_type(value: int):
        return None if value == 0 else _primitive_type(value, where)

    layout = Layout(
        tuple(lp.minor_to_major),
        tiles=tuple(Tile(tuple(t.dimensions)) for t in lp.tiles),
        tail_padding_alignment_in_elements=lp.tail_padding_alignment_in_elements or 1,
        index_primitive_type=optional_type(lp.index_primitive_type),
        pointer_primitive_type=optional_type(lp.pointer_primitive_type),
        element_size_in_bits=lp.element_size_in_bits,
        memory_space=lp.memory_space,
        split_configs=tuple(SplitConfig(s.dimension, tuple(s.split_indices))
                            for s in lp.split_configs),
        dynamic_shape_metadata_prefix_bytes=lp.dynamic_shape_metadata_prefix_bytes,
    )
    if len(layout.minor_to_major) != rank:
        raise ProtoError(f"{where}: layout minor_to_major {list(lp.minor_to_major)} has "
                         f"{len(layout.minor_to_major)} entries for a rank-{rank} shape")
    return layout


#: PrimitiveType BUFFER (xla_data.proto): a buffer shape, its array as the one tuple_shapes.
BUFFER = 34


def shape_from_proto(sp, where: str = "shape") -> Shape:
    """A ShapeProto as a Shape (no layout in the proto: none in the shape)."""
    if sp.element_type == BUFFER:  # as XLA's Shape::FromProto
        if len(sp.tuple_shapes) != 1:
            raise ProtoError(f"{where}: Buffer shape must have exactly one tuple shape.")
        array = shape_from_proto(sp.tuple_shapes[0], f"{where}.tuple_shapes[0]")
        if not array.is_array() or array.is_buffer():
            raise ProtoError(f"{where}: Buffer shape must have array shape.")
        return Shape.buffer_of(array)
    t = _primitive_type(sp.element_type, where)
    if t == P.TUPLE:
        return Shape.tuple(shape_from_proto(s, f"{where}.tuple_shapes[{i}]")
                           for i, s in enumerate(sp.tuple_shapes))
    if t == P.TOKEN:
        return Shape.token()
    if t == P.OPAQUE_TYPE:
        return Shape.opaque()
    if not dtypes.is_array_type(t):
        raise ProtoError(f"{where}: element type {t.name} is not supported")
    dims = tuple(sp.dimensions)
    dynamic = tuple(sp.is_dynamic_dimension) or None
    if dynamic is not None and len(dynamic) != len(dims):
        raise ProtoError(f"{where}: is_dynamic_dimension has {len(dynamic)} entries for "
                         f"{len(dims)} dimensions")
    layout = layout_from_proto(sp.layout, len(dims), where + ".layout") \
        if sp.HasField("layout") else None
    try:
        return Shape.array(t, dims, layout=layout, dynamic_dimensions=dynamic)
    except InvalidArgumentError as e:
        raise ProtoError(f"{where}: {e}") from None


def layout_to_proto(layout: Layout, lp) -> None:
    lp.minor_to_major.extend(layout.minor_to_major)
    for tile in layout.tiles:
        lp.tiles.add().dimensions.extend(tile.dimensions)
    lp.tail_padding_alignment_in_elements = layout.tail_padding_alignment_in_elements
    lp.element_size_in_bits = layout.element_size_in_bits
    lp.memory_space = layout.memory_space
    if layout.index_primitive_type is not None:
        lp.index_primitive_type = int(layout.index_primitive_type)
    if layout.pointer_primitive_type is not None:
        lp.pointer_primitive_type = int(layout.pointer_primitive_type)
    for split in layout.split_configs:
        sc = lp.split_configs.add(dimension=split.dimension)
        sc.split_indices.extend(split.split_indices)
    lp.dynamic_shape_metadata_prefix_bytes = layout.dynamic_shape_metadata_prefix_bytes


def shape_to_proto(shape: Shape, sp) -> None:
    """Fill ShapeProto ``sp`` (as XLA's Shape::ToProto: is_dynamic_dimension always)."""
    if shape.is_buffer():
        sp.element_type = BUFFER
        shape_to_proto(shape.buffer_shape(), sp.tuple_shapes.add())
        return
    sp.element_type = int(shape.element_type)
    if shape.is_tuple():
        for s in shape.tuple_shapes:
            shape_to_proto(s, sp.tuple_shapes.add())
        return
    if not shape.is_array():
        return
    sp.dimensions.extend(shape.dimensions)
    sp.is_dynamic_dimension.extend(shape.dynamic_dimensions)
    if shape.layout is not None:
        layout_to_proto(shape.layout, sp.layout)


# -- literals ----------------------------------------------------------------------------------

# element type -> (LiteralProto field, how its elements are stored)
_REPEATED = {P.PRED: "preds", P.S32: "s32s", P.S64: "s64s", P.U32: "u32s", P.U64: "u64s",
             P.F32: "f32s", P.F64: "f64s", P.C64: "c64s", P.C128: "c128s"}
_BYTES = {P.S8: "s8s", P.U8: "u8s", P.S16: "s16s", P.U16: "u16s", P.F16: "f16s",
          P.BF16: "bf16s", P.S1: "s1s", P.S2: "s2s", P.S4: "s4s", P.U1: "u1s", P.U2: "u2s",
          P.U4: "u4s", P.F4E2M1FN: "f4e2m1fns", P.F8E3M4: "f8e3m4s",
          P.F8E4M3B11FNUZ: "f8e4m3b11fnuzs", P.F8E4M3FN: "f8e4m3fns", P.F8E4M3FNUZ: "f8e4m3fnuzs",
          P.F8E4M3: "f8e4m3s", P.F8E5M2FNUZ: "f8e5m2fnuzs", P.F8E5M2: "f8e5m2s",
          P.F8E8M0FNU: "f8e8m0fnus"}
_STORAGE = {1: np.uint8, 2: np.dtype("<u2")}


def _physical_order(shape: Shape) -> tuple[int, ...]:
    """Logical dimensions from major to minor in the literal's data."""
    if shape.layout is None:
        return tuple(range(len(shape.dimensions)))
    return tuple(reversed(shape.layout.minor_to_major))


def _bits_to_array(raw: np.ndarray, t: PrimitiveType) -> np.ndarray:
    """Stored element bits (unsigned, one storage unit per element) as the type's dtype."""
    dtype = dtypes.to_dtype(t)
    bits = dtypes.bit_width(t)
    if bits >= 8:
        return raw.astype(_STORAGE[dtype.itemsize], copy=False).view(dtype)
    raw = raw & ((1 << bits) - 1)
    if dtypes.is_signed_integral(t):
        values = raw.astype(np.int16)
        values = np.where(values >= 1 << (bits - 1), values - (1 << bits), values)
        return values.astype(dtype)
    if dtypes.is_unsigned_integral(t):
        return raw.astype(dtype)
    return raw.astype(np.uint8).view(dtype)  # sub-byte floats: the bits in the low end


def _array_to_bits(array: np.ndarray, t: PrimitiveType) -> np.ndarray:
    bits = dtypes.bit_width(t)
    if bits >= 8:
        return np.ascontiguousarray(array).view(_STORAGE[array.dtype.itemsize])
    if dtypes.is_integral(t):
        return (array.astype(np.int16) & ((1 << bits) - 1)).astype(np.uint8)
    return np.ascontiguousarray(array).view(np.uint8) & ((1 << bits) - 1)


def literal_from_proto(lp, where: str = "literal", shape: Shape | None = None) -> Literal:
    """A LiteralProto as a Literal. ``shape`` (an instruction's declared shape) is the
    literal's shape when given: XLA writes a constant's literal shape without parts of its
    layout (element_size_in_bits), while its data follows the literal's own layout."""
    if not lp.HasField("shape"):
        raise ProtoError(f"{where}: the literal has no shape")
    own = shape_from_proto(lp.shape, where + ".shape")
    shape = shape if shape is not None else own
    if not shape.compatible(own) or shape.is_tuple() != own.is_tuple():
        raise ProtoError(f"{where}: the literal's shape {own} does not match the declared "
                         f"shape {shape}")
    if own.is_tuple():
        if len(lp.tuple_literals) != len(own.tuple_shapes):
            raise ProtoError(f"{where}: a {own} literal needs {len(own.tuple_shapes)} "
                             f"tuple_literals, got {len(lp.tuple_literals)}")
        return Literal.tuple(literal_from_proto(e, f"{where}.tuple_literals[{i}]", s)
                             for i, (e, s) in enumerate(zip(lp.tuple_literals,
                                                            shape.tuple_shapes)))
    if own.is_token():
        return Literal.token()
    if not own.is_array():
        raise ProtoError(f"{where}: cannot read a literal of shape {own}")
    if own.is_dynamic():
        raise ProtoError(f"{where}: dynamic-shaped literals ({own}) are not supported")
    t = own.element_type
    count = int(np.prod(own.dimensions, dtype=np.int64))
    if t in _REPEATED:
        field = _REPEATED[t]
        values = getattr(lp, field)
        if t in (P.C64, P.C128):
            flat = np.asarray(values, dtype=np.float32 if t == P.C64 else np.float64)
            if flat.size != 2 * count:
                raise ProtoError(f"{where}: a {own} literal needs {2 * count} {field} "
                                 f"(real, imaginary pairs), got {flat.size}")
            data = np.empty(count, dtype=dtypes.to_dtype(t))
            data.real, data.imag = flat[0::2], flat[1::2]  # (-inf, nan) stays itself
        else:
            data = np.asarray(values, dtype=dtypes.to_dtype(t))
            if data.size != count:
                raise ProtoError(f"{where}: a {own} literal needs {count} {field}, got "
                                 f"{data.size}")
    elif t in _BYTES:
        field = _BYTES[t]
        raw = getattr(lp, field)
        width = 2 if dtypes.bit_width(t) == 16 else 1
        if len(raw) != count * width:
            raise ProtoError(f"{where}: a {own} literal needs {count * width} bytes of "
                             f"{field}, got {len(raw)}")
        data = _bits_to_array(np.frombuffer(raw, dtype=_STORAGE[width]), t)
    else:
        raise ProtoError(f"{where}: LiteralProto has no field for {dtypes.type_name(t)} "
                         f"elements")
    return _literal_of(data, own, shape)


def _literal_of(data: np.ndarray, own: Shape, shape: Shape) -> Literal:
    """The Literal of ``shape`` whose elements ``data`` holds in ``own``'s layout order."""
    order = _physical_order(own)
    physical = data.reshape([own.dimensions[d] for d in order])
    logical = physical.transpose(np.argsort(order))
    return Literal.from_array(logical.copy(order="C"), shape)


def raw_literal(sp, data: bytes, where: str) -> Literal:
    """A literal stored as ShapeProto ``sp`` and the raw bytes of its buffer (XLA's
    in-memory form: little-endian elements in layout order, one byte per sub-byte element),
    as XLA writes the arguments after an unoptimized snapshot."""
    shape = shape_from_proto(sp, where + ".shape")
    if not shape.is_array() or shape.is_dynamic():
        raise ProtoError(f"{where}: cannot read raw data of shape {shape}")
    t = shape.element_type
    count = int(np.prod(shape.dimensions, dtype=np.int64))
    dtype = np.dtype(dtypes.to_dtype(t))
    width = dtype.itemsize
    if len(data) != count * width:
        raise ProtoError(f"{where}: a {shape} array needs {count * width} bytes, got "
                         f"{len(data)}")
    if t in _BYTES:
        values = _bits_to_array(np.frombuffer(data, dtype=_STORAGE[width]), t)
    else:
        values = np.frombuffer(data, dtype=dtype.newbyteorder("<")).astype(dtype)
    return _literal_of(values, shape, shape)


def literal_to_proto(literal: Literal, lp) -> None:
    """Fill LiteralProto ``lp`` from ``literal`` (an elided ``{...}`` constant writes the
    zeros it holds, as XLA does)."""
    shape = literal.shape
    shape_to_proto(shape, lp.shape)
    if shape.is_tuple():
        for e in literal.elements:
            literal_to_proto(e, lp.tuple_literals.add())
        return
    if not shape.is_array():
        return
    t = shape.element_type
    if shape.is_dynamic():
        raise ProtoError(f"literal_to_proto: dynamic-shaped literals ({shape}) are not "
                         f"supported")
    array = literal.array.transpose(_physical_order(shape)).reshape(-1)
    if t in _REPEATED:
        field = getattr(lp, _REPEATED[t])
        if t in (P.C64, P.C128):
            pairs = np.empty(2 * array.size, dtype=np.float32 if t == P.C64 else np.float64)
            pairs[0::2], pairs[1::2] = array.real, array.imag
            field.extend(pairs.tolist())
        else:
            field.extend(array.tolist())
    elif t in _BYTES:
        setattr(lp, _BYTES[t], _array_to_bits(array, t).tobytes())
    else:
        raise ProtoError(f"literal_to_proto: LiteralProto has no field for "
                         f"{dtypes.type_name(t)} elements (XLA cannot serialize them either)")


# -- program shapes ----------------------------------------------------------------------------


def program_shape_to_proto(parameters, result: Shape, names, pp) -> None:
    for p in parameters:
        shape_to_proto(p, pp.parameters.add())
    shape_to_proto(result, pp.result)
    pp.parameter_names.extend(names)


__all__ = [
    "UNBOUNDED_SIZE",
    "ProtoError",
    "layout_from_proto",
    "layout_to_proto",
    "literal_from_proto",
    "literal_to_proto",
    "program_shape_to_proto",
    "shape_from_proto",
    "shape_to_proto",
]
