"""Shape ops: the opcodes that move, copy, cut, join or relabel array elements without
computing with them, and the tuple plumbing.

broadcast, reshape, dynamic-reshape, transpose, reverse, slice, dynamic-slice,
dynamic-update-slice, pad, concatenate, iota, tuple, get-tuple-element, bitcast,
get-dimension-size, set-dimension-size.

Each rule follows XLA's ShapeInference::Infer*Shape for the opcode (or the HLO verifier's
check where XLA has no inference: broadcast, reshape, bitcast, iota). Opcodes whose text
keeps their result only in the declared shape (broadcast, reshape, dynamic-reshape, iota,
bitcast) check that shape against the operands and return it. The builder-level inference
XLA runs before emitting (Broadcast's prepended sizes, BroadcastInDim's degenerate
dimensions, Reshape's dynamic-dimension propagation) is here too, as functions the builder
calls: ``infer_broadcast_shape``, ``infer_broadcast_in_dim_shape``, ``infer_reshape_shape``,
``infer_dynamic_reshape_shape``.

Imports shape, hlo.attrs and the registry; never the builder.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from math import prod

from xlapy.hlo.attrs import AttrSpec, IntKind, IntListKind
from xlapy.hlo.attrs.padding import PADDING_CONFIG, PaddingConfig
from xlapy.hlo.attrs.slicing import SLICE_RANGES, SliceRanges
from xlapy.opdefs.common import (
    dims_text,
    expect_array,
    higher_precision_type,
    require_result,
    same_type_ignoring_fp_precision,
    tname,
)
from xlapy.opdefs.registry import OpCall, op
from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.shape import UNBOUNDED_SIZE

P = PrimitiveType
INT32_MAX = 2**31 - 1


def _unbounded(size: int) -> bool:
    return size == UNBOUNDED_SIZE


def _bounded_dynamic(shape: Shape, i: int) -> bool:
    return shape.dynamic_dimensions[i] and not _unbounded(shape.dimensions[i])


def _static_extent(shape: Shape) -> int:
    """XLA's StaticExtentProduct: the element count with bounds standing for sizes."""
    return prod(shape.dimensions)


# -- broadcast ------------------------------------------------------------------------------


@op("broadcast", attrs=[
    AttrSpec("dimensions", IntListKind(),
             doc="operand dimension i becomes result dimension dimensions[i]"),
])
def _broadcast(call: OpCall) -> Shape:
    """Copies the operand into a result of the declared shape; operand dimension i maps to
    result dimension ``dimensions[i]`` and must have the same size (HLO's broadcast has no
    degenerate size-1 stretching: the builder reshapes those away first)."""
    (x,) = call.operands
    result = require_result(call, "broadcast takes its result dimensions from the result shape")
    expect_array(call, x, "operand of broadcast")
    expect_array(call, result, "result of broadcast")
    if x.element_type != result.element_type:
        call.fail(f"operand and result element types differ: {x} vs {result}.")
    dims = call.dimensions
    if len(dims) != x.rank:
        call.fail(f"dimensions={dims_text(dims)} has {len(dims)} entries but the operand {x} has "
                  f"rank {x.rank}.")
    for i, d in enumerate(dims):
        if not 0 <= d < result.rank:
            call.fail(f"dimensions={dims_text(dims)}: result dimension {d} is out of bounds for "
                      f"the result {result}.")
        if result.dimensions[d] != x.dimensions[i]:
            call.fail(f"operand dimension {i} (size {x.dimensions[i]}) must have the size of "
                      f"result dimension {d} (size {result.dimensions[d]}); operand {x}, result "
                      f"{result}, dimensions={dims_text(dims)}.")
    return result


def infer_broadcast_shape(call: OpCall, operand: Shape, broadcast_sizes: Sequence[int]) -> Shape:
    """ShapeInference::InferBroadcastShape(operand, broadcast_sizes): XlaBuilder::Broadcast's
    result, the new sizes prepended (major) to the operand's dimensions."""
    expect_array(call, operand, "operand of broadcast")
    if operand.is_unbounded_dynamic():
        call.fail(f"broadcast of an operand with unbounded dimensions is not supported "
                  f"(!operand.is_unbounded_dynamic()): {operand}.")
    for size in broadcast_sizes:
        if size is None or _unbounded(size):
            call.fail("Non-broadcast dimensions must not be dynamic.")
        if size < 0:
            call.fail(f"Broadcast with negative dimension size {size}.")
    sizes = tuple(int(s) for s in broadcast_sizes)
    dyn = (False,) * len(sizes) + operand.dynamic_dimensions
    return Shape.array(operand.element_type, sizes + operand.dimensions, dynamic_dimensions=dyn)


def infer_broadcast_in_dim_shape(call: OpCall, operand: Shape, output: Shape,
                                 broadcast_dimensions: Sequence[int]) -> Shape:
    """ShapeInference::InferBroadcastShape(operand, output, broadcast_dimensions), which
    XlaBuilder::BroadcastInDim runs: operand dimension i goes to output dimension
    ``broadcast_dimensions[i]``, of equal size or of size 1; the dimensions strictly
    increase."""
    expect_array(call, operand, "operand of broadcast")
    expect_array(call, output, "operand of broadcast")
    if output.is_unbounded_dynamic():
        call.fail(f"broadcast to an unbounded shape is not supported "
                  f"(!output_shape.is_unbounded_dynamic()): {output}.")
    bdims = tuple(broadcast_dimensions)
    if operand.rank > output.rank:
        call.fail(f"InDim style broadcast must be to an equal or higher ranked shape; operand "
                  f"rank: {operand.rank}; output rank: {output.rank}")
    if operand.rank != len(bdims):
        call.fail(f"Size of broadcast_dimensions has to match operand's rank; operand rank: "
                  f"{operand.rank}, size of broadcast_dimensions {len(bdims)}.")
    for i, target in enumerate(bdims):
        if not 0 <= target < output.rank:
            call.fail(f"Broadcast dimension {target} is out of bound")
        size = operand.dimensions[i]
        if not _unbounded(size) and size != output.dimensions[target] and size != 1:
            call.fail(f"Input dimension should be either 1 or equal to the output dimension it "
                      f"is broadcasting into; the {i}th operand dimension is {size}, the "
                      f"{target}th output dimension is {output.dimensions[target]}.")
        if not _unbounded(size) and _bounded_dynamic(operand, i) != _bounded_dynamic(output, target):
            call.fail(f"Broadcast input and output dynamism mismatch: {operand} and {output}")
        if i > 0 and bdims[i - 1] >= target:
            call.fail(f"Broadcast dimensions order is wrong: {target} comes after "
                      f"{bdims[i - 1]}.")
    return output


# -- reshape --------------------------------------------------------------------------------


@op("reshape", attrs=[
    AttrSpec("inferred_dimension", IntKind(), default=-1,
             doc="the result dimension a framework inferred (tie-break for dynamic sizes)"),
])
def _reshape(call: OpCall) -> Shape:
    """Same elements in row-major order, relabelled with the declared result dimensions;
    the element counts must match."""
    (x,) = call.operands
    result = require_result(call, "reshape takes its new dimensions from the result shape")
    expect_array(call, x, "reshape")
    expect_array(call, result, "result of reshape")
    if x.element_type != result.element_type:
        call.fail(f"operand and result element types differ: {x} vs {result}.")
    if result.is_unbounded_dynamic():
        call.fail("Reshaping with unbounded result shape is not supported.")
    if not x.is_unbounded_dynamic() and _static_extent(x) != _static_extent(result):
        # a check of XLA's parser too (with the words after the shapes)
        call.fail(f"Reshape operation has mismatched element counts: from={_static_extent(x)} "
                  f"({x}) to={_static_extent(result)} ({result}). (expects the same number of "
                  f"elements in result shape {result.to_string(False)} and operand shape "
                  f"{x.to_string(False)})", parser_check=True)
    inferred = call.inferred_dimension
    if inferred != -1 and not 0 <= inferred < result.rank:
        call.fail(f"inferred_dimension={inferred} is out of bounds for the result {result}.")
    return result


def common_factors(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """XLA's CommonFactors: the boundaries (i, j) where prod(a[:i]) == prod(b[:j]), the
    groups of dimensions a reshape maps onto each other."""
    a, b = list(a), list(b)
    if a == b:
        return [(i, i) for i in range(len(a) + 1)]
    bounds: list[tuple[int, int]] = []
    i = j = 0
    prior_i = prior_j = -1
    while i < len(a) and j < len(b) and a[i] == b[j]:
        prior_i, prior_j = i, j
        bounds.append((i, j))
        i += 1
        j += 1
    if prod(a[i:]) != prod(b[j:]):
        return [(0, 0), (len(a), len(b))]
    if prod(a[i:]) == 0:
        return bounds + [(i, j), (len(a), len(b))]
    part_a = part_b = 1
    while True:
        if part_a == part_b and (i > prior_i or j > prior_j):
            prior_i, prior_j = i, j
            bounds.append((i, j))
            continue
        in_a, in_b = i < len(a), j < len(b)
        if not (in_a or in_b):
            break
        next_a = part_a < part_b or (in_a and (not in_b or (part_a == part_b and a[i] <= b[j])))
        next_b = part_b < part_a or (in_b and (not in_a or (part_b == part_a and b[j] <= a[i])))
        if next_a:
            part_a *= a[i]
            i += 1
        if next_b:
            part_b *= b[j]
            j += 1
    return bounds


def infer_reshape_shape(call: OpCall, operand: Shape, dimensions: Sequence[int],
                        inferred_dimension: int = -1) -> Shape:
    """ShapeInference::InferReshapeShape, run by XlaBuilder::Reshape: the new sizes, with
    each dynamic operand dimension carried to the result dimension it becomes."""
    expect_array(call, operand, "reshape")
    dims = tuple(UNBOUNDED_SIZE if d is None else int(d) for d in dimensions)
    if any(_unbounded(d) for d in dims):
        call.fail("Reshaping with unbounded result shape is not supported.")
    for d in dims:
        if d < 0:
            call.fail(f"Reshape to negative dimension size {d}: {dims_text(dims)}.")
    result_dyn = [False] * len(dims)
    result = Shape.array(operand.element_type, dims)
    if operand.is_unbounded_dynamic():
        if any(_bounded_dynamic(operand, i) for i in range(operand.rank)):
            call.fail("Reshape operand with bounded and unbounded dynamism not supported.")
        return result
    if _static_extent(operand) != _static_extent(result):
        call.fail(f"Reshape operation has mismatched element counts: from="
                  f"{_static_extent(operand)} ({operand}) to={_static_extent(result)} "
                  f"({result}).")
    factors = common_factors(operand.dimensions, dims)
    for input_dim in range(operand.rank):
        if not operand.dynamic_dimensions[input_dim]:
            continue
        debug = f"output: {result}, input: {operand}, input_dim: {input_dim}"
        in_start = in_end = out_start = out_end = -1
        for (s_in, s_out), (e_in, e_out) in itertools.pairwise(factors):
            if s_in <= input_dim < e_in:
                in_start, in_end, out_start, out_end = s_in, e_in, s_out, e_out
                break
        if in_end - in_start > 1 and out_end - out_start > 1:
            call.fail(f"Dynamic input dimension to reshape that is both splitted and combined "
                      f"is not supported: {debug}")
        for f_in, f_out in factors:
            # Widen the group over degenerate output dimensions ([<=5] -> [1, 5]).
            if f_in == in_start:
                out_start = min(out_start, f_out)
            if f_in == in_end:
                out_end = max(out_end, f_out)
        out_dyn = -1
        if operand.dimensions[input_dim] == 1 and dims:
            # A dynamic size-1 dimension can only be most-major or most-minor.
            if input_dim == 0:
                out_dyn = 0
            if input_dim == operand.rank - 1:
                out_dyn = len(dims) - 1
            if out_dyn == -1:
                call.fail(f"Dynamic degenerated dimension that's not most-minor nor most-major "
                          f"is not supported: {debug}")
        if out_dyn == -1 and out_end - out_start == 1:
            out_dyn = out_start
        if out_dyn == -1 and out_end - out_start > 1:
            out_dyn = inferred_dimension
        if out_dyn != -1:
            if not 0 <= out_dyn < len(dims):
                call.fail(f"inferred_dimension {out_dyn} is out of bounds for the result "
                          f"{result} ({debug})")
            result_dyn[out_dyn] = True
        else:
            non_degenerate = [k for k in range(out_start, out_end) if dims[k] != 1]
            if non_degenerate:
                # The most-major non-degenerate dimension carries the dynamic size, as
                # XLA's DynamicDimensionInference splits it.
                result_dyn[non_degenerate[0]] = True
    return Shape.array(operand.element_type, dims, dynamic_dimensions=result_dyn)


@op("dynamic-reshape")
def _dynamic_reshape(call: OpCall) -> Shape:
    """Reshape to the declared result, whose dimension sizes (bounds, for dynamic ones) come
    with one S32 scalar operand per result dimension giving the runtime size."""
    if not call.operands:
        call.fail("DynamicReshape requires at least one operand.", parser_check=True)
    x, *sizes = call.operands
    result = require_result(call, "dynamic-reshape takes its dimensions from the result shape")
    expect_array(call, x, "operand of dynamic-reshape")
    expect_array(call, result, "result of dynamic-reshape")
    if x.element_type != result.element_type:
        call.fail(f"operand and result element types differ: {x} vs {result}.")
    if x.is_array() and result.is_array() and _static_extent(x) != _static_extent(result):
        call.fail(f"Reshape operation has mismatched element counts: from={_static_extent(x)} "
                  f"({x}) to={_static_extent(result)} ({result}). (expects the same number of "
                  f"elements in result shape {result.to_string(False)} and operand shape "
                  f"{x.to_string(False)})", parser_check=True)
    if len(sizes) != result.rank:
        call.fail(f"expects one dim size operand per result dimension; got {len(sizes)} for "
                  f"{result.rank} result dimensions", parser_check=True)
    return infer_dynamic_reshape_shape(call, x, sizes, result.dimensions,
                                       result.dynamic_dimensions)


def infer_dynamic_reshape_shape(call: OpCall, operand: Shape, dim_size_shapes: Sequence[Shape],
                                new_size_bounds: Sequence[int],
                                dims_are_dynamic: Sequence[bool]) -> Shape:
    """ShapeInference::InferDynamicReshapeShape (XlaBuilder::DynamicReshape)."""
    if len(new_size_bounds) != len(dims_are_dynamic):
        call.fail(f"DynamicReshape has to have the same number of elements in new_sizes "
                  f"({len(new_size_bounds)}) and dims_are_dynamic ({len(dims_are_dynamic)})")
    for s in dim_size_shapes:
        if not s.is_array() or s.element_type != P.S32 or s.dimensions:
            call.fail(f"DynamicReshape's dim size has to be scalar S32, got ({s})")
    inferred = Shape.array(operand.element_type, new_size_bounds,
                           dynamic_dimensions=dims_are_dynamic)
    if _static_extent(operand) != _static_extent(inferred):
        call.fail(f"Reshape operation has mismatched element counts: from="
                  f"{_static_extent(operand)} ({operand}) to={_static_extent(inferred)} "
                  f"({inferred}).")
    return inferred


# -- transpose, reverse ---------------------------------------------------------------------


def _is_permutation(dims: Sequence[int], rank: int) -> bool:
    return sorted(dims) == list(range(rank))


@op("transpose", attrs=[
    AttrSpec("dimensions", IntListKind(), doc="result dimension i is operand dimension dimensions[i]"),
])
def _transpose(call: OpCall) -> Shape:
    """Permutes dimensions: result dimension i is operand dimension ``dimensions[i]``; a
    layout is permuted with them so that the transpose is a bitcast."""
    (x,) = call.operands
    expect_array(call, x, "transpose")
    perm = call.dimensions
    if len(perm) != x.rank or not _is_permutation(perm, x.rank):
        call.fail(f"Transpose dimensions [{','.join(map(str, perm))}] are not a permutation of "
                  f"the operand dimensions (operand shape is {x}).")
    return permute_dimensions(perm, x)


def permute_dimensions(perm: Sequence[int], shape: Shape) -> Shape:
    """ShapeUtil::PermuteDimensions: dimension i of the result is ``shape``'s ``perm[i]``;
    a layout becomes the one that makes this permutation a bitcast."""
    dims = tuple(shape.dimensions[p] for p in perm)
    dyn = tuple(shape.dynamic_dimensions[p] for p in perm)
    if shape.layout is None:
        return Shape.array(shape.element_type, dims, layout=None, dynamic_dimensions=dyn)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    m2m = tuple(inverse[d] for d in shape.layout.minor_to_major)
    return Shape.array(shape.element_type, dims, layout=shape.layout.replace(minor_to_major=m2m),
                       dynamic_dimensions=dyn)


@op("reverse", attrs=[AttrSpec("dimensions", IntListKind(), doc="the dimensions to reverse")])
def _reverse(call: OpCall) -> Shape:
    """Reverses the order of elements along ``dimensions``; the shape is unchanged."""
    (x,) = call.operands
    expect_array(call, x, "operand of reverse")
    dims = call.dimensions
    if len(set(dims)) != len(dims):
        call.fail("a dimension number is duplicated in reverse")
    for d in dims:
        if not 0 <= d < x.rank:
            call.fail(f"One of the reverse dimensions ({d}) is out-of-bounds in shape {x}.")
    return x


# -- slice, dynamic-slice, dynamic-update-slice ---------------------------------------------


@op("slice", attrs=[
    AttrSpec("slice", SLICE_RANGES, doc="[start:limit:stride] per dimension"),
])
def _slice(call: OpCall) -> Shape:
    """A strided box of the operand: ``ceil((limit - start) / stride)`` elements per
    dimension."""
    (x,) = call.operands
    r: SliceRanges = call.attrs["slice"]
    return infer_slice_shape(call, x, r.starts, r.limits, r.strides)


def infer_slice_shape(call: OpCall, arg: Shape, starts: Sequence[int], limits: Sequence[int],
                      strides: Sequence[int]) -> Shape:
    """ShapeInference::InferSliceShape."""

    def error(message: str):
        call.fail(f"{message} in slice operation; argument shape: {arg}; starts: "
                  f"{{{','.join(map(str, starts))}}}; limits: {{{','.join(map(str, limits))}}}; "
                  f"strides: {{{','.join(map(str, strides))}}}.")

    expect_array(call, arg, "operand of slice")
    if len(starts) != len(limits):
        error(f"slice start and limit sizes differ: {len(starts)} vs {len(limits)}")
    if len(starts) != len(strides):
        error(f"slice start and strides sizes differ: {len(starts)} vs {len(strides)}")
    if len(starts) != arg.rank:
        call.fail(f"Slice index count does not match argument rank: {len(starts)} vs {arg.rank}.")
    sizes, dyn = [], []
    for d, (start, limit, stride) in enumerate(zip(starts, limits, strides)):
        if start < 0:
            call.fail(f"Negative start index to slice: {start}.")
        size = arg.dimensions[d]
        if not _unbounded(size) and limit > size:
            error(f"limit index ({limit}) must be less than or equal to dimension size ({size})")
        if start > limit:
            error(f"limit index ({limit}) must be greater or equal to start index ({start}) in "
                  f"slice with positive stride")
        if stride <= 0:
            call.fail(f"Stride ({stride}) must be positive.")
        n = (limit - start + stride - 1) // stride
        sizes.append(n)
        # Slicing one element out of a dynamic dimension makes it static.
        dyn.append(n != 1 and _bounded_dynamic(arg, d))
    return Shape.array(arg.element_type, sizes, dynamic_dimensions=dyn)


def _check_start_indices(call: OpCall, what: str, operand: Shape,
                         index_shapes: Sequence[Shape]) -> None:
    """The start-index operands of dynamic-slice / dynamic-update-slice: one integral
    scalar per operand dimension (all of one shape), or XLA's legacy single rank-1 array."""
    n = len(index_shapes)
    if n >= 1 and index_shapes[0].is_array() and index_shapes[0].rank == 1:
        if n != 1:
            call.fail(f"{what} should have exactly 1 index operand, has {n}.")
        s = index_shapes[0]
        if not dtypes.is_integral(s.element_type):
            call.fail(f"{what} start indices must be of integral type.")
        if s.dimensions[0] != operand.rank:
            call.fail(f"{what} start number of dimensions {s.dimensions[0]} ({s}) must match "
                      f"rank {operand.rank} of slice input ({operand}).")
        return
    if operand.rank != n:
        call.fail(f"{what} start number of dimensions {n} must match rank {operand.rank} of "
                  f"slice input ({operand}).")
    if n:
        first = index_shapes[0]
        if not first.is_scalar():
            call.fail(f"{what} indices must be scalar, not {first}.")
        if not dtypes.is_integral(first.element_type):
            call.fail(f"{what} start indices must be of integral type.")
        for s in index_shapes:
            if not s.is_array() or not first.compatible(s):
                call.fail(f"{what} start indices must all have the same shape, got mismatching "
                          f"indices with shapes {first} and {s}.")


@op("dynamic-slice", min_operands=1, attrs=[
    AttrSpec("dynamic_slice_sizes", IntListKind(), doc="the size of the slice per dimension"),
])
def _dynamic_slice(call: OpCall) -> Shape:
    """A box of ``dynamic_slice_sizes`` at runtime start indices (one integral scalar
    operand per dimension, clamped into bounds at run time)."""
    x, *indices = call.operands
    sizes = call.dynamic_slice_sizes
    expect_array(call, x, "operand of dynamic slice")
    _check_start_indices(call, "Dynamic slice", x, indices)
    if len(sizes) != x.rank:
        call.fail(f"Dynamic slice index count does not match argument rank: {len(sizes)} vs "
                  f"{x.rank}.")
    for d, size in enumerate(sizes):
        if size < 0:
            call.fail(f"Negative size index to dynamic slice: {size}.")
        if not _unbounded(x.dimensions[d]) and size > x.dimensions[d]:
            call.fail(f"Slice dim size {size} greater than dynamic slice dimension: "
                      f"{x.dimensions[d]}.")
    dyn = [x.dynamic_dimensions[d] and size > 1 and size == x.dimensions[d]
           for d, size in enumerate(sizes)]
    return Shape.array(x.element_type, sizes, dynamic_dimensions=dyn)


@op("dynamic-update-slice", min_operands=2)
def _dynamic_update_slice(call: OpCall) -> Shape:
    """The operand with ``update`` written at runtime start indices (clamped so the update
    fits); the result has the operand's shape (a buffer for a buffer operand)."""
    x, update, *indices = call.operands
    if not x.is_array():
        call.fail(f"Expected array or buffer argument for operand of dynamic update slice, but "
                  f"got {x}.")
    expect_array(call, update, "update of dynamic update slice")
    _check_start_indices(call, "Dynamic update slice", x, indices)
    if update.rank != x.rank:
        call.fail(f"Dynamic update slice update rank does not match argument rank: "
                  f"{update.rank} vs {x.rank}.")
    if not same_type_ignoring_fp_precision(x, update):
        call.fail(f"Dynamic update slice update element type does not match argument. "
                  f"operand.element_type: {tname(x.element_type)} vs update.element_type: "
                  f"{tname(update.element_type)}.")
    for d in range(x.rank):
        size, usize = x.dimensions[d], update.dimensions[d]
        if not _unbounded(usize) and usize < 0:
            call.fail(f"Size index {usize} to dynamic update slice must be >= 0.")
        if not _unbounded(size) and usize > size:
            call.fail(f"Update dim size {usize} greater than dynamic slice dimension: {size}.")
    dyn = [x.dynamic_dimensions[d]
           or (update.dynamic_dimensions[d] and update.dimensions[d] == x.dimensions[d])
           for d in range(x.rank)]
    return Shape(x.element_type, x.dimensions, tuple(dyn), x.layout, buffer=x.buffer)


# -- pad, concatenate -----------------------------------------------------------------------


@op("pad", attrs=[
    AttrSpec("padding", PADDING_CONFIG, doc="low_high[_interior] per dimension, joined by x"),
])
def _pad(call: OpCall) -> Shape:
    """Adds ``padding_value`` around (edge, possibly negative) and between (interior)
    elements: size = size + low + high + max(size - 1, 0) * interior."""
    x, value = call.operands
    return infer_pad_shape(call, x, value, call.padding)


def infer_pad_shape(call: OpCall, x: Shape, value: Shape, config: PaddingConfig) -> Shape:
    """ShapeInference::InferPadShape."""
    if not x.is_array():
        call.fail("Pad operation does not support tuple-shape operands.")
    if not value.is_scalar():
        call.fail(f"Pad operation does not support non-scalar padding values; got {value}.")
    if x.rank != config.rank:
        call.fail(f"The rank of the operand and the padding configuration do not match: {x} vs "
                  f"{config.to_text() or '(empty)'}.")
    if not same_type_ignoring_fp_precision(x, value):
        call.fail(f"The element types of the operands to Pad do not match: {x} and {value}.")
    if any(d.interior_padding < 0 for d in config.dimensions):
        call.fail(f"Interior padding cannot be negative: {config.to_text()} for operand {x}")
    if value.is_dynamic():
        call.fail("Dynamic padding value is not supported")
    dims = []
    for i, p in enumerate(config.dimensions):
        size = x.dimensions[i]
        if _unbounded(size):
            dims.append(UNBOUNDED_SIZE)
            continue
        n = size + p.edge_padding_low + p.edge_padding_high + max(size - 1, 0) * p.interior_padding
        if n < 0:
            call.fail(f"Padding result in negative size for dimension {i}; operand {x}, "
                      f"padding={config.to_text()}")
        dims.append(n)
    et = higher_precision_type(x.element_type, value.element_type)
    return Shape.array(et, dims, dynamic_dimensions=x.dynamic_dimensions)


@op("concatenate", min_operands=1, attrs=[
    AttrSpec("dimensions", IntListKind(), doc="{d}: the one dimension to concatenate along"),
])
def _concatenate(call: OpCall) -> Shape:
    """Joins the operands along one dimension; every other dimension must agree."""
    dims = call.dimensions
    if len(dims) != 1:
        call.fail(f"dimensions must name exactly one dimension, got {dims_text(dims)}.")
    return infer_concat_shape(call, call.operands, dims[0])


def _concat_dim(ls, rs, lb, rb):
    """InferConcatenatedDimAndBound: size and bound (UNBOUNDED_SIZE: none) of a joined dim."""
    size = ls + rs if not _unbounded(ls) and not _unbounded(rs) else UNBOUNDED_SIZE
    bound = UNBOUNDED_SIZE
    if not _unbounded(lb) or not _unbounded(rb):
        lv = lb if not _unbounded(lb) else ls
        rv = rb if not _unbounded(rb) else rs
        if not _unbounded(lv) and not _unbounded(rv):
            bound = lv + rv
    return size, bound


def _merge_dim(call, dim, ls, rs, lb, rb):
    """InferMostSpecificDimAndBound: the common size and bound of a non-joined dim."""
    size = bound = UNBOUNDED_SIZE
    if not _unbounded(lb) or not _unbounded(rb):
        if not _unbounded(lb) and not _unbounded(rb) and lb != rb:
            call.fail(f"Mismatched bound sizes {lb} and {rb} in dimension {dim}")
        bound = lb if not _unbounded(lb) else rb
    if not _unbounded(ls) or not _unbounded(rs):
        if not _unbounded(ls) and not _unbounded(rs) and ls != rs:
            call.fail(f"Mismatched dimension sizes {ls} and {rs} in dimension {dim}")
        size = ls if not _unbounded(ls) else rs
        if not _unbounded(bound) and size != bound:
            call.fail(f"Mismatched dimension size {size} and bound {bound} in dimension {dim}")
    return size, bound


def infer_concat_shape(call: OpCall, shapes: Sequence[Shape], dimension: int) -> Shape:
    """ShapeInference::InferConcatOpShape."""
    if not shapes:
        call.fail("Concatenate expects at least one argument.")
    first = shapes[0]
    if not 0 <= dimension < (first.rank if first.is_array() else 0):
        call.fail(f"Concatenate dimension out of bounds: {dimension}.")
    et = first.element_type
    for i, s in enumerate(shapes):
        expect_array(call, s, "operand of concatenation")
        if i == 0:
            continue
        if s.rank != first.rank:
            call.fail(f"Cannot concatenate arrays with different ranks: {first.rank} ({first}) vs "
                      f"{s.rank} ({s}).")
        if not same_type_ignoring_fp_precision(first, s):
            call.fail(f"Cannot concatenate arrays with different element types: "
                      f"{tname(first.element_type)} vs {tname(s.element_type)}.")
        for d in range(first.rank):
            a, b = first.dimensions[d], s.dimensions[d]
            if d != dimension and a != b and not _unbounded(a) and not _unbounded(b):
                call.fail(f"Cannot concatenate arrays that differ in dimensions other than the "
                          f"one being concatenated. Dimension {d} in both shapes must be equal "
                          f"(or compatible): {first} vs {s}.")
        et = higher_precision_type(s.element_type, et)
    rank = first.rank
    sizes = [UNBOUNDED_SIZE] * rank
    bounds = [UNBOUNDED_SIZE] * rank
    sizes[dimension] = 0  # the identity of concatenation
    for s in shapes:
        for d in range(rank):
            rs = s.dimensions[d]
            rb = rs if s.dynamic_dimensions[d] else UNBOUNDED_SIZE
            if d == dimension:
                sizes[d], bounds[d] = _concat_dim(sizes[d], rs, bounds[d], rb)
            else:
                sizes[d], bounds[d] = _merge_dim(call, d, sizes[d], rs, bounds[d], rb)
    dyn = [not _unbounded(b) or _unbounded(sz) for sz, b in zip(sizes, bounds)]
    return Shape.array(et, sizes, dynamic_dimensions=dyn)


# -- iota, tuple, get-tuple-element, bitcast ------------------------------------------------


@op("iota", attrs=[
    AttrSpec("iota_dimension", IntKind(), doc="the dimension along which values count up"),
])
def _iota(call: OpCall) -> Shape:
    """0, 1, 2, ... along ``iota_dimension`` of the declared (non-scalar) result."""
    result = require_result(call, "iota takes its shape from the result shape")
    if not result.is_array():
        call.fail(f"Iota does not support non-array result; got {result}.")
    if result.rank == 0:
        call.fail("Iota does not support scalars.")
    d = call.iota_dimension
    if not 0 <= d < result.rank:
        call.fail(f"The iota dimension cannot go beyond the operation rank or be negative; "
                  f"iota_dimension={d} for {result}.")
    t = result.element_type
    if not (dtypes.is_integral(t) or dtypes.is_floating(t) or dtypes.is_complex(t)):
        call.fail(f"Only support iota of integral, floating point or complex primitive types, "
                  f"got {tname(t)}")
    return result


@op("tuple")
def _tuple(call: OpCall) -> Shape:
    """A tuple of the operands (any number, any shapes)."""
    return Shape.tuple(call.operands)


@op("get-tuple-element", attrs=[AttrSpec("index", IntKind(), doc="which element")])
def _get_tuple_element(call: OpCall) -> Shape:
    """Element ``index`` of a tuple operand."""
    (t,) = call.operands
    index = call.index
    if not t.is_tuple():
        call.fail(f"Cannot infer shape: attempting to index into non-tuple: {t}.")
    if not 0 <= index < len(t.tuple_shapes):
        call.fail(f"Cannot infer shape: attempt to index out of tuple bounds: {index} >= "
                  f"{len(t.tuple_shapes)} in shape {t}.")
    return t.tuple_shapes[index]


@op("bitcast")
def _bitcast(call: OpCall) -> Shape:
    """Reinterprets the operand's buffer as the declared result shape (same byte size for
    static arrays); layouts decide what that means, so passes introduce it, not users."""
    (x,) = call.operands
    result = require_result(call, "bitcast takes its shape from the result shape")
    if x.is_array() and result.is_array() and x.is_static() and result.is_static():
        in_bits = _static_extent(x) * dtypes.bit_width(x.element_type)
        out_bits = _static_extent(result) * dtypes.bit_width(result.element_type)
        if in_bits != out_bits:
            call.fail(f"Bitcast cannot have different shape sizes of output ({out_bits} bits) "
                      f"and operand ({in_bits} bits) ({result}) ({x})")
    return result


# -- get-dimension-size, set-dimension-size -------------------------------------------------


def _one_dimension(call: OpCall) -> int:
    dims = call.dimensions
    if len(dims) != 1:
        call.fail(f"dimensions must name exactly one dimension, got {dims_text(dims)}.")
    return dims[0]


@op("get-dimension-size", attrs=[
    AttrSpec("dimensions", IntListKind(), doc="{d}: the dimension whose runtime size to read"),
])
def _get_dimension_size(call: OpCall) -> Shape:
    """The runtime size of dimension d of the operand, as an S32 scalar."""
    (x,) = call.operands
    d = _one_dimension(call)
    if not x.is_array() or not 0 <= d < x.rank:
        call.fail(f"GetDimensionSize dimension out of bounds: {d}.")
    if x.dimensions[d] > INT32_MAX:
        call.fail(f"GetDimensionSize's input shape is {x}, the {d}th dimension exceeds the "
                  f"INT_MAX limit.")
    return Shape.scalar(P.S32)


@op("set-dimension-size", attrs=[
    AttrSpec("dimensions", IntListKind(), doc="{d}: the dimension whose runtime size to set"),
])
def _set_dimension_size(call: OpCall) -> Shape:
    """The operand with dimension d made dynamic (bound: its size); the S32 scalar operand
    is the runtime size."""
    x, val = call.operands
    d = _one_dimension(call)
    if not x.is_array() or not 0 <= d < x.rank:
        call.fail(f"SetDimensionSize dimension out of bounds: {d}.")
    if not val.is_array() or val.dimensions or val.element_type != P.S32:
        call.fail(f"SetDimensionSize's value has to be S32 scalar, got {val}")
    if x.dimensions[d] > INT32_MAX:
        call.fail(f"SetDimensionSize's input shape is {x}, the {d}th dimension exceeds the "
                  f"INT_MAX limit.")
    dyn = list(x.dynamic_dimensions)
    dyn[d] = True
    return Shape(x.element_type, x.dimensions, tuple(dyn), x.layout)
