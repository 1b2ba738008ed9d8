"""Shape-op builder functions, with XlaBuilder's names and argument order: Broadcast,
BroadcastInDim, Reshape (three forms), ReshapeWithInferredDimension, DynamicReshape,
Collapse, Transpose, Rev, Slice, SliceInDim, DynamicSlice, DynamicUpdateSlice, Pad,
PadInDim, ConcatInDim, Iota, Tuple, GetTupleElement, GetDimensionSize, SetDimensionSize,
RemoveDynamicDimension.

Compositions emit what XLA's builder emits: Broadcast and BroadcastInDim become HLO
``broadcast`` (BroadcastInDim adds a ``reshape`` + ``broadcast`` for size-1 operand
dimensions stretched to a larger size), Collapse and the dimension-order Reshape are
``reshape`` (after a ``transpose``), SliceInDim/PadInDim are a full ``slice``/``pad``,
GetDimensionSize of a static dimension is an S32 ``constant``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import Attrs
from xlapy.hlo.attrs.padding import PaddingConfig, PaddingDimension
from xlapy.hlo.attrs.slicing import SliceRanges
from xlapy.opdefs.registry import OpCall, get_opdef
from xlapy.opdefs.shape_ops import (
    infer_broadcast_in_dim_shape,
    infer_broadcast_shape,
    infer_dynamic_reshape_shape,
    infer_reshape_shape,
    infer_slice_shape,
)
from xlapy.ops.builder import XlaBuilder, XlaOp
from xlapy.ops.core import (
    add_broadcast_sequence,
    bool_list,
    builder_arg,
    check_same_builder,
    element_type_arg,
    int_arg,
    int_list,
    int_pairs,
    op_list,
)
from xlapy.shape import Shape
from xlapy.shape.shape import UNBOUNDED_SIZE

__all__ = [
    "Broadcast",
    "BroadcastInDim",
    "Collapse",
    "ConcatInDim",
    "DynamicReshape",
    "DynamicSlice",
    "DynamicUpdateSlice",
    "GetDimensionSize",
    "GetTupleElement",
    "Iota",
    "MakeEdgePaddingConfig",
    "MakeNoPaddingConfig",
    "Pad",
    "PadInDim",
    "RemoveDynamicDimension",
    "Reshape",
    "ReshapeWithInferredDimension",
    "Rev",
    "SetDimensionSize",
    "Slice",
    "SliceInDim",
    "Transpose",
    "Tuple",
]


def _ints(values, what: str, op_name: str, sizes: bool = False) -> tuple[int, ...]:
    """A tuple of ints; with ``sizes``, None stands for an unbounded size (``?``)."""
    if sizes and isinstance(values, (list, tuple)):
        values = [UNBOUNDED_SIZE if v is None else v for v in values]
    return int_list(values, what, op_name)


_int = int_arg


def _call(opcode: str, *operands: Shape) -> OpCall:
    """An OpCall for running a builder-level inference (its messages name ``opcode``)."""
    return OpCall(opcode, tuple(operands), Attrs({}))


# -- broadcast ------------------------------------------------------------------------------


def Broadcast(operand: XlaOp, broadcast_sizes: Sequence[int]) -> XlaOp:
    """``ops.Broadcast(x, [2, 3])``: new major dimensions of the given sizes in front;
    f32[4] -> f32[2,3,4] (HLO ``broadcast`` with ``dimensions={2}``)."""
    b = check_same_builder("Broadcast", [operand])
    sizes = _ints(broadcast_sizes, "broadcast_sizes", "Broadcast", sizes=True)
    shape = infer_broadcast_shape(_call("broadcast", operand.shape), operand.shape, sizes)
    rank = operand.shape.rank
    dims = tuple(range(len(sizes), len(sizes) + rank))
    return b.emit("broadcast", [operand], {"dimensions": dims}, shape=shape, op_name="Broadcast")


def BroadcastInDim(operand: XlaOp, out_dim_size: Sequence[int],
                   broadcast_dimensions: Sequence[int]) -> XlaOp:
    """``ops.BroadcastInDim(x, [2, 3], [1])``: operand dimension i goes to output dimension
    ``broadcast_dimensions[i]``, which it must equal in size or be 1; f32[3] -> f32[2,3].

    As XLA's builder: one ``broadcast`` to the output with the operand's own sizes, then,
    if some operand dimension of size 1 stretches, a ``reshape`` dropping the size-1
    dimensions and a second ``broadcast``."""
    b = check_same_builder("BroadcastInDim", [operand])
    sizes = _ints(out_dim_size, "out_dim_size", "BroadcastInDim", sizes=True)
    bdims = _ints(broadcast_dimensions, "broadcast_dimensions", "BroadcastInDim")
    x = operand.shape
    call = _call("broadcast", x)
    if not x.is_array():
        call.fail(f"Expected array argument for operand of broadcast, but got {x}.")
    for s in sizes:
        if s < 0 and s != UNBOUNDED_SIZE:
            call.fail(f"Broadcast with negative dimension size {s}.")
        if s == UNBOUNDED_SIZE:
            call.fail(f"BroadcastInDim output must be static or bounded dynamic; got "
                      f"out_dim_size {list(sizes)}.")
    if x.rank != len(bdims):
        call.fail(f"Size of broadcast_dimensions has to match operand's rank; operand rank: "
                  f"{x.rank}, size of broadcast_dimensions {len(bdims)}.")
    out_dyn = [False] * len(sizes)
    for i, d in enumerate(bdims):
        if not 0 <= d < len(sizes):
            call.fail(f"Broadcast dimension {d} is out of bound")
        out_dyn[d] = x.dynamic_dimensions[i] and x.dimensions[i] != UNBOUNDED_SIZE
    output = Shape.array(x.element_type, sizes, dynamic_dimensions=out_dyn)
    infer_broadcast_in_dim_shape(call, x, output, bdims)
    in_dim_size = list(sizes)
    in_dim_dyn = [False] * len(sizes)
    for i, d in enumerate(bdims):
        unbounded = x.dimensions[i] == UNBOUNDED_SIZE
        in_dim_size[d] = sizes[d] if unbounded else x.dimensions[i]
        in_dim_dyn[d] = x.dynamic_dimensions[i] and not unbounded
    in_dim_shape = Shape.array(x.element_type, in_dim_size, dynamic_dimensions=in_dim_dyn)
    result = b.emit("broadcast", [operand], {"dimensions": bdims}, shape=in_dim_shape,
                    op_name="BroadcastInDim")
    if in_dim_shape == output:
        return result
    return add_broadcast_sequence(output, result)


# -- reshape --------------------------------------------------------------------------------


def _reshape(operand: XlaOp, new_sizes, inferred_dimension: int, op_name: str) -> XlaOp:
    b = check_same_builder(op_name, [operand])
    sizes = _ints(new_sizes, "new_sizes", op_name, sizes=True)
    shape = infer_reshape_shape(_call("reshape", operand.shape), operand.shape, sizes,
                                inferred_dimension)
    return b.emit("reshape", [operand], {"inferred_dimension": inferred_dimension}, shape=shape,
                  op_name=op_name)


def Reshape(operand, dimensions=None, new_sizes=None) -> XlaOp:
    """Row-major reshape, in XLA's three forms:

    ``ops.Reshape(x, [8, 3])``: f32[4,2,3] -> f32[8,3];
    ``ops.Reshape(x, [1, 2, 0], [8, 3])``: read the operand in dimension order {1,2,0}
    (a ``transpose``, then a ``reshape``), as the operation-semantics page describes;
    ``ops.Reshape(shape, x)``: to an explicit result shape."""
    if isinstance(operand, Shape):
        shape, op = operand, dimensions
        b = check_same_builder("Reshape", [op])
        if shape.is_unbounded_dynamic():
            raise InvalidArgumentError(
                "reshape: Reshaping with unbounded result shape is not supported.")
        return b.emit("reshape", [op], shape=shape, op_name="Reshape")
    if dimensions is None:
        raise InvalidArgumentError("Reshape: needs the new sizes: Reshape(operand, new_sizes)")
    if new_sizes is None:
        return _reshape(operand, dimensions, -1, "Reshape")
    check_same_builder("Reshape", [operand])
    perm = _ints(dimensions, "dimensions", "Reshape")
    if sorted(perm) != list(range(operand.shape.rank)):
        raise InvalidArgumentError(
            f"reshape: Reshape dimensions [{','.join(map(str, perm))}] are not a permutation of "
            f"the operand dimensions (operand shape is {operand.shape}).")
    if perm != tuple(range(len(perm))):
        operand = Transpose(operand, perm)
    return _reshape(operand, new_sizes, -1, "Reshape")


def ReshapeWithInferredDimension(operand: XlaOp, new_sizes: Sequence[int],
                                 inferred_dimension: int) -> XlaOp:
    """``ops.ReshapeWithInferredDimension(x, [2, 6], 1)``: a reshape whose dimension
    ``inferred_dimension`` the framework computed from the element count (it becomes the
    dynamic one when a dynamic operand dimension could go to several)."""
    d = _int(inferred_dimension, "inferred_dimension", "ReshapeWithInferredDimension")
    return _reshape(operand, new_sizes, d, "ReshapeWithInferredDimension")


def DynamicReshape(operand: XlaOp, dim_sizes: Sequence[XlaOp], new_size_bounds: Sequence[int],
                   dims_are_dynamic: Sequence[bool]) -> XlaOp:
    """``ops.DynamicReshape(x, [n, four], [8, 4], [True, False])``: reshape to
    ``new_size_bounds`` where dimension i's runtime size is the S32 scalar ``dim_sizes[i]``
    and it is dynamic if ``dims_are_dynamic[i]``."""
    dim_sizes = op_list(dim_sizes, "dim_sizes", "DynamicReshape")
    b = check_same_builder("DynamicReshape", [operand, *dim_sizes])
    bounds = _ints(new_size_bounds, "new_size_bounds", "DynamicReshape")
    dyn = bool_list(dims_are_dynamic, "dims_are_dynamic", "DynamicReshape")
    shape = infer_dynamic_reshape_shape(_call("dynamic-reshape", operand.shape), operand.shape,
                                        [s.shape for s in dim_sizes], bounds, dyn)
    return b.emit("dynamic-reshape", [operand, *dim_sizes], shape=shape, op_name="DynamicReshape")


def Collapse(operand: XlaOp, dimensions: Sequence[int]) -> XlaOp:
    """``ops.Collapse(x, [0, 1])``: merge consecutive, in-order dimensions into one;
    f32[4,2,3] -> f32[8,3]. One dimension or none: the operand itself."""
    check_same_builder("Collapse", [operand])
    dims = _ints(dimensions, "dimensions", "Collapse")
    if len(dims) <= 1:
        return operand
    for prev, cur in itertools.pairwise(dims):
        if cur - 1 != prev:
            raise InvalidArgumentError(
                f"Collapse: Collapsed dimensions are not in consecutive order "
                f"(got {{{','.join(map(str, dims))}}}).")
    shape = operand.shape
    if not shape.is_array() or not 0 <= dims[0] or dims[-1] >= shape.rank:
        raise InvalidArgumentError(
            f"Collapse: dimensions {{{','.join(map(str, dims))}}} are out of bounds for {shape}.")
    sizes: list[int] = []
    for i, size in enumerate(shape.dimensions):
        if i <= dims[0] or i > dims[-1]:
            sizes.append(size)
        else:
            sizes[-1] *= size
    return _reshape(operand, sizes, -1, "Collapse")


# -- transpose, reverse ---------------------------------------------------------------------


def Transpose(operand: XlaOp, permutation: Sequence[int]) -> XlaOp:
    """``ops.Transpose(x, [1, 0])``: result dimension i is operand dimension
    ``permutation[i]``; f32[2,3] -> f32[3,2]."""
    b = check_same_builder("Transpose", [operand])
    perm = _ints(permutation, "permutation", "Transpose")
    return b.emit("transpose", [operand], {"dimensions": perm}, op_name="Transpose")


def Rev(operand: XlaOp, dimensions: Sequence[int]) -> XlaOp:
    """``ops.Rev(x, [0])``: reverse the element order along ``dimensions``."""
    b = check_same_builder("Rev", [operand])
    dims = _ints(dimensions, "dimensions", "Rev")
    return b.emit("reverse", [operand], {"dimensions": dims}, op_name="Rev")


# -- slicing --------------------------------------------------------------------------------


def Slice(operand: XlaOp, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int]) -> XlaOp:
    """``ops.Slice(x, [2], [4], [1])``: elements start..limit-1 (every stride-th) per
    dimension; f32[5] -> f32[2]."""
    b = check_same_builder("Slice", [operand])
    starts = _ints(start_indices, "start_indices", "Slice")
    limits = _ints(limit_indices, "limit_indices", "Slice")
    steps = _ints(strides, "strides", "Slice")
    if not len(starts) == len(limits) == len(steps):
        # SliceRanges needs equal lengths; report it as XLA's shape inference does.
        infer_slice_shape(_call("slice", operand.shape), operand.shape, starts, limits, steps)
    return b.emit("slice", [operand], {"slice": SliceRanges(starts, limits, steps)},
                  op_name="Slice")


def SliceInDim(operand: XlaOp, start_index: int, limit_index: int, stride: int,
               dimno: int) -> XlaOp:
    """``ops.SliceInDim(x, 2, 4, 1, 1)``: slice one dimension, keep the others whole;
    f32[7,8,9] -> f32[7,2,9]."""
    check_same_builder("SliceInDim", [operand])
    shape = operand.shape
    dimno = _int(dimno, "dimno", "SliceInDim")
    if not shape.is_array() or not 0 <= dimno < shape.rank:
        raise InvalidArgumentError(f"SliceInDim: dimno {dimno} is out of bounds for {shape}.")
    starts = [0] * shape.rank
    limits = list(shape.dimensions)
    strides = [1] * shape.rank
    starts[dimno] = _int(start_index, "start_index", "SliceInDim")
    limits[dimno] = _int(limit_index, "limit_index", "SliceInDim")
    strides[dimno] = _int(stride, "stride", "SliceInDim")
    return Slice(operand, starts, limits, strides)


def _index_ops(start_indices, op_name: str) -> list[XlaOp]:
    # One XlaOp is XLA's legacy form: one rank-1 index array.
    return op_list(start_indices, "start_indices", op_name, one_allowed=True)


def DynamicSlice(operand: XlaOp, start_indices: Sequence[XlaOp],
                 slice_sizes: Sequence[int]) -> XlaOp:
    """``ops.DynamicSlice(x, [i, j], [2, 2])``: a box of ``slice_sizes`` at runtime start
    indices (integral scalars, one per dimension; clamped into bounds at run time)."""
    indices = _index_ops(start_indices, "DynamicSlice")
    b = check_same_builder("DynamicSlice", [operand, *indices])
    sizes = _ints(slice_sizes, "slice_sizes", "DynamicSlice")
    return b.emit("dynamic-slice", [operand, *indices], {"dynamic_slice_sizes": sizes},
                  op_name="DynamicSlice")


def DynamicUpdateSlice(operand: XlaOp, update: XlaOp, start_indices: Sequence[XlaOp]) -> XlaOp:
    """``ops.DynamicUpdateSlice(x, u, [i, j])``: ``x`` with ``u`` written at runtime start
    indices (clamped so that ``u`` fits); the result has ``x``'s shape."""
    indices = _index_ops(start_indices, "DynamicUpdateSlice")
    b = check_same_builder("DynamicUpdateSlice", [operand, update, *indices])
    return b.emit("dynamic-update-slice", [operand, update, *indices],
                  op_name="DynamicUpdateSlice")


# -- pad, concatenate -----------------------------------------------------------------------


def MakeNoPaddingConfig(rank: int) -> PaddingConfig:
    """XLA's MakeNoPaddingConfig: ``0_0`` for each of ``rank`` dimensions."""
    return PaddingConfig.no_padding(int_arg(rank, "rank", "MakeNoPaddingConfig", minimum=0))


def MakeEdgePaddingConfig(padding: Sequence[tuple[int, int]]) -> PaddingConfig:
    """XLA's MakeEdgePaddingConfig: ``[(low, high), ...]`` with no interior padding."""
    return PaddingConfig.of(int_pairs(padding, "padding", "MakeEdgePaddingConfig"))


def Pad(operand: XlaOp, padding_value: XlaOp, padding_config) -> XlaOp:
    """``ops.Pad(x, zero, [(1, 2, 1)])``: ``padding_value`` added at the low/high edges
    (negative: elements removed) and between elements; f32[3] -> f32[8]. The config is a
    PaddingConfig or ``(low, high[, interior])`` per dimension."""
    b = check_same_builder("Pad", [operand, padding_value])
    return b.emit("pad", [operand, padding_value], {"padding": padding_config}, op_name="Pad")


def PadInDim(operand: XlaOp, padding_value: XlaOp, dimno: int, pad_lo: int, pad_hi: int) -> XlaOp:
    """``ops.PadInDim(x, zero, 0, 1, 2)``: edge padding of one dimension only."""
    check_same_builder("PadInDim", [operand, padding_value])
    shape = operand.shape
    dimno = _int(dimno, "dimno", "PadInDim")
    rank = shape.rank if shape.is_array() else 0
    if not 0 <= dimno < rank:
        raise InvalidArgumentError(f"PadInDim: dimno {dimno} is out of bounds for {shape}.")
    config = PaddingConfig.no_padding(rank).with_dimension(
        dimno, PaddingDimension(_int(pad_lo, "pad_lo", "PadInDim"),
                                _int(pad_hi, "pad_hi", "PadInDim")))
    return Pad(operand, padding_value, config)


def ConcatInDim(builder: XlaBuilder, operands: Sequence[XlaOp], dimension: int) -> XlaOp:
    """``ops.ConcatInDim(b, [x, y], 0)``: join the operands along ``dimension``;
    f32[2,3] and f32[1,3] -> f32[3,3]."""
    builder_arg(builder, "ConcatInDim")
    operands = op_list(operands, "operands", "ConcatInDim")
    if operands:
        check_same_builder("ConcatInDim", operands)
    d = _int(dimension, "dimension", "ConcatInDim")
    return builder.emit("concatenate", operands, {"dimensions": (d,)}, op_name="ConcatInDim")


# -- iota, tuples ---------------------------------------------------------------------------


def Iota(builder: XlaBuilder, shape_or_type, size_or_iota_dimension: int) -> XlaOp:
    """Counting values, in XLA's two forms: ``ops.Iota(b, parse_shape("s32[4,8]"), 1)``
    counts along dimension 1 of s32[4,8]; ``ops.Iota(b, PrimitiveType.F32, 5)`` is
    f32[5] {0, 1, 2, 3, 4}."""
    builder_arg(builder, "Iota")
    n = _int(size_or_iota_dimension, "size_or_iota_dimension", "Iota")
    if isinstance(shape_or_type, Shape):
        shape, iota_dimension = shape_or_type, n
    else:
        et = element_type_arg(shape_or_type, "shape_or_type (a Shape or an element type)", "Iota")
        shape = Shape.array(et, (n,)) if n >= 0 else None
        if shape is None:
            raise InvalidArgumentError(f"Iota: size must be >= 0, got {n}")
        iota_dimension = 0
    if shape.is_dynamic():
        raise InvalidArgumentError(
            f"iota: The output of iota must not have dynamic dimensions: {shape}")
    return builder.emit("iota", [], {"iota_dimension": iota_dimension}, shape=shape,
                        op_name="Iota")


def Tuple(builder: XlaBuilder, elements: Sequence[XlaOp]) -> XlaOp:
    """``ops.Tuple(b, [v, s])``: the tuple (f32[10], s32[]) of its elements."""
    builder_arg(builder, "Tuple")
    return builder.emit("tuple", op_list(elements, "elements", "Tuple"), op_name="Tuple")


def GetTupleElement(tuple_data: XlaOp, index: int) -> XlaOp:
    """``ops.GetTupleElement(t, 1)``: element 1 of a tuple."""
    b = check_same_builder("GetTupleElement", [tuple_data])
    return b.emit("get-tuple-element", [tuple_data],
                  {"index": _int(index, "index", "GetTupleElement")}, op_name="GetTupleElement")


# -- dynamic dimension sizes ----------------------------------------------------------------


def _s32_constant(builder: XlaBuilder, value: int) -> XlaOp:
    from xlapy import ops

    return ops.Constant(builder, np.asarray(value, dtype=np.int32))


def GetDimensionSize(operand: XlaOp, dimension: int) -> XlaOp:
    """``ops.GetDimensionSize(x, 0)``: dimension 0's runtime size as an S32 scalar; for a
    static dimension XLA's builder emits the constant size instead."""
    b = check_same_builder("GetDimensionSize", [operand])
    d = _int(dimension, "dimension", "GetDimensionSize")
    get_opdef("get-dimension-size").infer_shape(
        [operand.shape], get_opdef("get-dimension-size").check_attrs({"dimensions": (d,)}))
    if not operand.shape.dynamic_dimensions[d]:
        return _s32_constant(b, operand.shape.dimensions[d])
    return b.emit("get-dimension-size", [operand], {"dimensions": (d,)},
                  op_name="GetDimensionSize")


def SetDimensionSize(operand: XlaOp, val: XlaOp, dimension: int) -> XlaOp:
    """``ops.SetDimensionSize(x, n, 0)``: f32[10] -> f32[<=10], whose runtime size is the
    S32 scalar ``n``."""
    b = check_same_builder("SetDimensionSize", [operand, val])
    d = _int(dimension, "dimension", "SetDimensionSize")
    return b.emit("set-dimension-size", [operand, val], {"dimensions": (d,)},
                  op_name="SetDimensionSize")


def RemoveDynamicDimension(operand: XlaOp, dimension: int) -> XlaOp:
    """``ops.RemoveDynamicDimension(x, 0)``: f32[<=10] -> f32[10] (a set-dimension-size to
    the bound, as XLA's builder emits it)."""
    b = check_same_builder("RemoveDynamicDimension", [operand])
    d = _int(dimension, "dimension", "RemoveDynamicDimension")
    shape = operand.shape
    if not shape.is_array() or not 0 <= d < shape.rank:
        raise InvalidArgumentError(
            f"RemoveDynamicDimension: dimension {d} is out of bounds for {shape}.")
    if shape.dimensions[d] == UNBOUNDED_SIZE:
        raise InvalidArgumentError(
            f"RemoveDynamicDimension: dimension {d} of {shape} is unbounded; it has no static "
            f"size to set.")
    dyn = list(shape.dynamic_dimensions)
    dyn[d] = False
    static = Shape(shape.element_type, shape.dimensions, tuple(dyn), shape.layout)
    size = _s32_constant(b, shape.dimensions[d])
    return b.emit("set-dimension-size", [operand, size], {"dimensions": (d,)}, shape=static,
                  op_name="RemoveDynamicDimension")
