"""Kernels of the shape ops: broadcast, reshape, dynamic-reshape, transpose, reverse, slice,
dynamic-slice, dynamic-update-slice, pad, concatenate, iota, tuple, get-tuple-element,
bitcast, get-dimension-size, set-dimension-size.

Semantics are XLA's (HloEvaluator and XLA:CPU where they agree): dynamic-slice and
dynamic-update-slice clamp each start index into [0, dim - size]; pad crops for negative edge
padding and inserts interior padding before the edges; iota is an integer count converted to
the element type (wrapping for narrow integers, rounding to nearest even for narrow floats);
bitcast reinterprets the operand's physical bytes under its layout as the result's layout.

Bounded dynamic dimensions: a value's array shape is its runtime shape, so every kernel takes
dimension sizes from its operand arrays, never from ``instr.shape`` bounds.

"Batched" evaluation: sort comparators and scatter combiners are called on whole arrays
(xlapy.interpreter.kernels.gather_scatter.apply_scalar_computation); the scalar-to-scalar
forms of broadcast, reshape and bitcast found in such computations accept those arrays.

Imports numpy, the shape layer and the interpreter registry; never the builder or parser.
"""

from __future__ import annotations

import itertools
from math import prod

import numpy as np

from xlapy.interpreter.evaluator import EvaluationError, UnimplementedError
from xlapy.interpreter.registry import kernel
from xlapy.opdefs.shape_ops import common_factors
from xlapy.shape import Shape, dtypes
from xlapy.shape.index import byte_size
from xlapy.shape.physical import from_physical, to_physical


def dense(x) -> np.ndarray:
    """A fresh C-ordered copy (0-d stays 0-d, unlike np.ascontiguousarray): kernels never
    return views of their arguments."""
    return np.array(x, order="C")


def result_dtype(instr) -> np.dtype:
    return dtypes.to_dtype(instr.shape.element_type)


def as_dtype(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` in ``dtype`` (XLA's mixed-precision operands: f32 into bf16 rounds to nearest
    even), without a copy when it already is."""
    if x.dtype == dtype:
        return x
    with np.errstate(all="ignore"):
        return x.astype(dtype)


def start_index(value) -> int:
    """A start index operand by value (a u64 of 2**64 - 1 is that large, so it clamps to
    the largest start, as XLA:CPU and the spec's clamp do; HloEvaluator's GetIntegralAsS64
    would wrap it to -1)."""
    return int(np.asarray(value))


def _fail(instr, message: str) -> EvaluationError:
    return EvaluationError(f"{instr.opcode}: {message} (instruction %{instr.name})")


def _batch_rank(instr, x: np.ndarray, operand: int = 0) -> int:
    """How many leading dimensions ``x`` has beyond its operand's rank: nonzero only when a
    scalar computation is evaluated on whole arrays."""
    extra = x.ndim - instr.operands[operand].shape.rank
    if extra < 0:
        raise _fail(instr, f"operand {operand} has rank {x.ndim}, expected "
                           f"{instr.operands[operand].shape}")
    return extra


# -- broadcast, reshape, transpose, reverse -------------------------------------------------


@kernel("broadcast")
def broadcast(ctx, instr, args):
    """Operand dimension i becomes result dimension dimensions[i]; the others repeat."""
    (x,) = args
    dims = list(instr.attrs["dimensions"])
    out = instr.shape
    extra = _batch_rank(instr, x)
    batch = x.shape[:extra]
    sizes = list(out.dimensions)
    for i, d in enumerate(dims):  # the runtime size of a dynamic operand dimension
        sizes[d] = x.shape[extra + i]
    # Order the operand's dimensions as they appear in the result, then insert size-1 axes.
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    xt = np.transpose(x, list(range(extra)) + [extra + i for i in order])
    expanded = [1] * out.rank
    for i in order:
        expanded[dims[i]] = x.shape[extra + i]
    xt = xt.reshape(batch + tuple(expanded))
    return dense(np.broadcast_to(xt, batch + tuple(sizes)))


def _reshape_sizes(instr, operand_shape: Shape, runtime: tuple[int, ...]) -> tuple[int, ...]:
    """Runtime sizes of a reshape's result: the static result dimensions, except that a
    dynamic result dimension takes the size that makes its group of dimensions (XLA's
    CommonFactors of operand and result bounds) hold the operand group's runtime elements."""
    out = instr.shape
    sizes = list(out.dimensions)
    if not any(out.dynamic_dimensions):
        return tuple(sizes)
    bounds_in = list(operand_shape.dimensions)
    bounds_out = list(out.dimensions)
    factors = common_factors(bounds_in, bounds_out)
    for (i0, j0), (i1, j1) in itertools.pairwise(factors):
        count = prod(runtime[i0:i1])
        dyn = [j for j in range(j0, j1) if out.dynamic_dimensions[j]]
        if not dyn:
            continue
        static = prod(sizes[j] for j in range(j0, j1) if j not in dyn[:1])
        # The first dynamic dimension of the group absorbs the change; others keep bounds.
        if static == 0:
            sizes[dyn[0]] = 0
        else:
            sizes[dyn[0]] = count // static
    return tuple(sizes)


@kernel("reshape")
def reshape(ctx, instr, args):
    """The same elements in row-major order, relabelled with the result dimensions."""
    (x,) = args
    extra = _batch_rank(instr, x)
    sizes = _reshape_sizes(instr, instr.operands[0].shape, x.shape[extra:])
    if prod(sizes) != prod(x.shape[extra:]):
        raise _fail(instr, f"cannot reshape the runtime operand of dimensions "
                           f"{list(x.shape[extra:])} into {instr.shape} (dimensions "
                           f"{list(sizes)})")
    return dense(x.reshape(x.shape[:extra] + sizes))


@kernel("dynamic-reshape")
def dynamic_reshape(ctx, instr, args):
    """Reshape to the sizes given by the S32 scalar operands (each within its bound)."""
    x, *size_values = args
    sizes = tuple(start_index(s) for s in size_values)
    for d, (size, bound) in enumerate(zip(sizes, instr.shape.dimensions)):
        if size < 0 or (size > bound >= 0):
            raise _fail(instr, f"size {size} of result dimension {d} is outside [0, {bound}] "
                               f"for {instr.shape}")
    if prod(sizes) != x.size:
        raise _fail(instr, f"the operand has {x.size} elements (dimensions "
                           f"{list(x.shape)}) but the sizes {list(sizes)} hold {prod(sizes)}")
    return dense(x.reshape(sizes))


@kernel("transpose")
def transpose(ctx, instr, args):
    """Result dimension i is operand dimension dimensions[i]."""
    (x,) = args
    return dense(np.transpose(x, list(instr.attrs["dimensions"])))


@kernel("reverse")
def reverse(ctx, instr, args):
    """Index i of each listed dimension of size N goes to N - 1 - i."""
    (x,) = args
    dims = tuple(instr.attrs["dimensions"])
    return dense(np.flip(x, axis=dims)) if dims else x.copy()


# -- slices ---------------------------------------------------------------------------------


@kernel("slice")
def slice_(ctx, instr, args):
    """Elements start, start + stride, ... below limit, per dimension. On a dynamic
    dimension the slice keeps only the elements within the runtime size."""
    (x,) = args
    ranges = instr.attrs["slice"]
    extra = _batch_rank(instr, x)
    index = (slice(None),) * extra + tuple(
        slice(s, l, st) for s, l, st in zip(ranges.starts, ranges.limits, ranges.strides))
    return dense(x[index])


def _start_indices(instr, index_args, rank: int) -> list[int]:
    """One start per dimension: scalar operands, or XLA's legacy single rank-1 operand."""
    if len(index_args) == 1 and np.ndim(index_args[0]) == 1:
        starts = [int(v) for v in np.asarray(index_args[0])]
    else:
        starts = [start_index(v) for v in index_args]
    if len(starts) != rank:
        raise _fail(instr, f"expected {rank} start indices, got {len(starts)}")
    return starts


def _clamp_starts(instr, starts, dims, sizes) -> list[int]:
    """XLA clamps each start into [0, dim - size] so the box is in bounds."""
    out = []
    for d, (s, dim, size) in enumerate(zip(starts, dims, sizes)):
        if size > dim:
            raise _fail(instr, f"the slice size {size} of dimension {d} exceeds the operand's "
                               f"runtime size {dim}")
        out.append(min(max(s, 0), dim - size))
    return out


@kernel("dynamic-slice")
def dynamic_slice(ctx, instr, args):
    """A box of dynamic_slice_sizes at the clamped runtime start indices."""
    x, *index_args = args
    sizes = list(instr.attrs["dynamic_slice_sizes"])
    starts = _clamp_starts(instr, _start_indices(instr, index_args, x.ndim), x.shape, sizes)
    box = tuple(slice(s, s + n) for s, n in zip(starts, sizes))
    return dense(x[box])


@kernel("dynamic-update-slice")
def dynamic_update_slice(ctx, instr, args):
    """The operand with ``update`` written at the clamped runtime start indices."""
    x, update, *index_args = args
    dtype = result_dtype(instr)
    starts = _clamp_starts(instr, _start_indices(instr, index_args, x.ndim), x.shape,
                           update.shape)
    out = as_dtype(x, dtype).copy()
    box = tuple(slice(s, s + n) for s, n in zip(starts, update.shape))
    out[box] = as_dtype(update, dtype)
    return out


# -- pad, concatenate -----------------------------------------------------------------------


@kernel("pad")
def pad(ctx, instr, args):
    """Interior padding first, then edge padding (negative edges crop)."""
    x, value = args
    dtype = result_dtype(instr)
    config = instr.attrs["padding"].dimensions
    out_sizes, dst, src = [], [], []
    for n, p in zip(x.shape, config):
        lo, hi, interior = p.edge_padding_low, p.edge_padding_high, p.interior_padding
        step = interior + 1
        size = lo + hi + n + max(n - 1, 0) * interior
        if size < 0:
            raise _fail(instr, f"padding {p} gives a negative size for an operand dimension "
                               f"of runtime size {n}")
        out_sizes.append(size)
        # Operand element k lands at lo + k * step; keep those inside [0, size).
        k0 = max(0, -(lo // step)) if lo < 0 else 0
        k1 = min(n, (size - 1 - lo) // step + 1) if size - 1 - lo >= 0 else 0
        if k1 <= k0:
            k0 = k1 = 0
        first = lo + k0 * step
        dst.append(slice(first, first + (k1 - k0 - 1) * step + 1, step) if k1 > k0 else slice(0, 0))
        src.append(slice(k0, k1))
    out = np.full(out_sizes, as_dtype(np.asarray(value), dtype), dtype=dtype)
    if all(s.stop > s.start for s in src):
        out[tuple(dst)] = as_dtype(x[tuple(src)], dtype)
    return out


@kernel("concatenate")
def concatenate(ctx, instr, args):
    """The operands joined along dimensions[0], in order."""
    dtype = result_dtype(instr)
    (d,) = instr.attrs["dimensions"]
    return np.concatenate([as_dtype(a, dtype) for a in args], axis=d)


# -- iota, tuples ---------------------------------------------------------------------------


def cast_integers(values: np.ndarray, dtype: np.dtype):
    """int64 ``values`` in an integral or floating ``dtype`` as XLA converts an integer:
    two's-complement wrap for integers (sub-byte ones too), round to nearest even for
    floats (through f64, exact for |v| < 2^53)."""
    et = dtypes.from_dtype(dtype)
    if dtypes.is_pred(et):
        return values != 0
    if dtypes.is_integral(et):
        bits = dtypes.bit_width(et)
        wrapped = values & ((1 << bits) - 1) if bits < 64 else values
        if dtypes.is_signed_integral(et) and bits < 64:
            wrapped = np.where(wrapped >= 1 << (bits - 1), wrapped - (1 << bits), wrapped)
        return np.asarray(wrapped).astype(dtype)
    with np.errstate(all="ignore"):
        return values.astype(np.float64).astype(dtype)


@kernel("iota")
def iota(ctx, instr, args):
    """0, 1, 2, ... along iota_dimension, converted to the element type."""
    shape = instr.shape
    d = instr.attrs["iota_dimension"]
    sizes = shape.dimensions
    count = np.arange(sizes[d], dtype=np.int64)
    view = count.reshape([sizes[d] if i == d else 1 for i in range(len(sizes))])
    return dense(np.broadcast_to(cast_integers(view, result_dtype(instr)), sizes))


@kernel("tuple")
def tuple_(ctx, instr, args):
    return tuple(args)


@kernel("get-tuple-element")
def get_tuple_element(ctx, instr, args):
    (t,) = args
    index = instr.attrs["index"]
    if not isinstance(t, tuple) or not 0 <= index < len(t):
        raise _fail(instr, f"index {index} into a value that is not a tuple of more than "
                           f"{index} elements")
    return t[index]


# -- bitcast ----------------------------------------------------------------------------------


def _with_layout(shape: Shape) -> Shape:
    return shape if shape.layout is not None else shape.with_default_layout()


@kernel("bitcast")
def bitcast(ctx, instr, args):
    """The operand's bytes, laid out by its shape's layout, read back under the result's
    layout (and element type). A result smaller than the operand takes the leading bytes,
    as XLA's evaluator does."""
    (x,) = args
    src_shape = instr.operands[0].shape
    dst_shape = instr.shape
    if not (src_shape.is_array() and dst_shape.is_array()):
        raise UnimplementedError(f"bitcast: only array shapes are supported, got "
                                 f"{src_shape} -> {dst_shape} (instruction %{instr.name})")
    if src_shape.is_dynamic() or dst_shape.is_dynamic():
        raise UnimplementedError(f"bitcast: dynamic shapes are not supported, got "
                                 f"{src_shape} -> {dst_shape} (instruction %{instr.name})")
    extra = _batch_rank(instr, x)
    if extra:
        # A scalar computation evaluated on whole arrays: every element is bitcast alone.
        if src_shape.rank or dst_shape.rank:
            raise _fail(instr, "a batched bitcast must be scalar to scalar")
        n = x.size
        src = Shape.array(src_shape.element_type, (n,))
        dst = Shape.array(dst_shape.element_type, (n,))
        if byte_size(src) != byte_size(dst):
            raise _fail(instr, f"cannot reinterpret {src_shape} as {dst_shape}")
        return from_physical(to_physical(x.reshape(n), src), dst).reshape(x.shape)
    src = _with_layout(src_shape)
    dst = _with_layout(dst_shape)
    data = to_physical(x, src)
    need = byte_size(dst)
    if need > len(data):
        raise _fail(instr, f"the result {dst} needs {need} bytes but the operand {src} "
                           f"has {len(data)}")
    return from_physical(data[:need], dst)


# -- dynamic dimension sizes ----------------------------------------------------------------


@kernel("get-dimension-size")
def get_dimension_size(ctx, instr, args):
    """The runtime size of the dimension, as an S32 scalar."""
    (x,) = args
    (d,) = instr.attrs["dimensions"]
    return np.array(x.shape[d], dtype=np.int32)


@kernel("set-dimension-size")
def set_dimension_size(ctx, instr, args):
    """The operand with the dimension's runtime size set: the array keeps its leading
    ``size`` elements along it (the rest is padding that later ops ignore)."""
    x, size_value = args
    (d,) = instr.attrs["dimensions"]
    size = start_index(size_value)
    bound = instr.shape.dimensions[d]
    if size < 0 or size > bound:
        raise _fail(instr, f"size {size} for dimension {d} is outside [0, {bound}] (the "
                           f"bound of {instr.shape})")
    if size > x.shape[d]:
        raise _fail(instr, f"size {size} for dimension {d} exceeds the operand's runtime "
                           f"size {x.shape[d]}: the elements past it are undefined padding")
    index = tuple(slice(0, size) if i == d else slice(None) for i in range(x.ndim))
    return dense(x[index])
