"""Kernels of the contractions: dot, ragged-dot, scaled-dot and convolution.

Arithmetic (XLA's reference evaluator and XLA:CPU):
- The result element type is the instruction's (XLA's preferred element type): s8 x s8 ->
  s32 multiplies and accumulates in s32, bf16 x bf16 -> f32 in f32.
- Integer results: the operands are converted to the result type (XLA's conversions), then
  products and sums wrap in two's complement. xlapy computes in 64 bits and truncates, which
  gives the same bits. (XLA's evaluator saturates integer convolution sums; XLA:CPU wraps -
  an s8 convolution summing 2 x 100 x 100 gives 32 through jax - and xlapy follows XLA:CPU.)
- pred results: OR of ANDs (bool arithmetic).
- Floating results: products summed in f64 (c128 for complex) from the exact operand
  values, rounded once to the result type; narrow types (bf16, f16, f8...) are reached
  through f32 as XLA:CPU, which upcasts them to f32 (f32 x f32 -> bf16 is computed in f32
  and rounded, through jax). The precision config does not change values.
- Convolution: lhs dilation inserts zeros, padding adds zeros (negative padding crops),
  window reversal flips the kernel; feature groups split the input features and the output
  features group-major; batch groups split the input batch group-major, output feature f
  taking batch group f // (output features / batch_group_count) (the evaluator's indexing).
- ragged-dot: XLA's three modes (ragged non-contracting: each lhs row uses the rhs group
  it falls in, rows past the groups give 0; ragged contracting: one output per group over
  its slice of the contracting dimension; ragged batch: batches past the groups give 0).
- scaled-dot: each operand multiplied by its scale repeated over blocks (index // (operand
  size / scale size) per dimension); a rank-0 scale stands for 1, as in the evaluator.
"""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.evaluator import EvaluationError, UnimplementedError
from xlapy.interpreter.kernels.reduction import dilate_and_pad
from xlapy.interpreter.registry import kernel
from xlapy.shape import dtypes

# -- numeric helpers ----------------------------------------------------------------------------


def _kind(dtype: np.dtype) -> str:
    """'b' pred, 'i' integer (incl. int4...), 'f' real floating, 'c' complex."""
    if dtype == np.bool_:
        return "b"
    if dtype.kind in "iu":
        return "i"
    if dtype.kind == "c":
        return "c"
    if dtype.kind == "f":
        return "f"
    t = dtypes.from_dtype(dtype)
    if dtypes.is_integral(t):
        return "i"
    return "f"


def _int_info(dtype: np.dtype):
    t = dtypes.from_dtype(dtype)
    bits = dtypes.bit_width(t)
    if dtypes.is_signed_integral(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """XLA's convert: float -> int truncates toward zero and saturates (NaN -> 0), int ->
    int wraps, anything -> pred is != 0, floats round to nearest even (f64 reaches the
    narrow float types through f32)."""
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    src, dst = _kind(x.dtype), _kind(dtype)
    with np.errstate(all="ignore"):
        if dst == "b":
            return x != 0
        if src == "c" and dst != "c":
            x = np.real(x)
            src = "f"
        if dst == "i" and src == "f":
            v = x.astype(np.float64)
            lo, hi = _int_info(dtype)
            wide = np.dtype(np.uint64) if lo == 0 and hi > 2 ** 63 else np.dtype(np.int64)
            out = np.zeros(v.shape, wide)
            high, low = v >= float(hi), v <= float(lo)
            mid = ~(high | low | np.isnan(v))
            out[high] = hi
            out[low] = lo
            out[mid] = np.trunc(v[mid]).astype(wide)
            return out.astype(dtype)
        if dst == "i":
            if x.dtype.kind not in "iub":  # ml_dtypes integers
                x = x.astype(np.int64)
            return x.astype(dtype)
        if dst == "f" and x.dtype == np.float64 and dtype not in (np.float32, np.float64):
            return x.astype(np.float32).astype(dtype)
        return x.astype(dtype)


def _compute_dtype(result: np.dtype) -> np.dtype:
    kind = _kind(result)
    if kind in "bi":
        return np.dtype(np.uint64) if result == np.uint64 else np.dtype(np.int64)
    return np.dtype(np.complex128) if kind == "c" else np.dtype(np.float64)


def to_compute(x: np.ndarray, result: np.dtype) -> np.ndarray:
    """An operand in the accumulation type of a contraction with result type ``result``:
    integers go through the result type (wrapping/saturating as XLA's convert) to 64 bits;
    floating operands are widened exactly."""
    comp = _compute_dtype(result)
    kind = _kind(result)
    with np.errstate(all="ignore"):
        if kind in "bi":
            return convert(x, result).astype(comp)
        if _kind(x.dtype) == "c" and kind == "f":
            x = np.real(x)
        return np.asarray(x).astype(comp)


def from_compute(x: np.ndarray, result: np.dtype) -> np.ndarray:
    """Round or wrap an accumulated result to the result type."""
    with np.errstate(all="ignore"):
        if result == np.bool_:
            return x != 0
        if _kind(result) == "i":
            return x.astype(result)
        return convert(x, result)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.matmul(a, b)


# -- dot ----------------------------------------------------------------------------------------


def general_dot(lhs, rhs, lhs_contracting, rhs_contracting, lhs_batch, rhs_batch):
    """Sum of products over the contracting dimensions (arrays already in the compute
    type); result dimensions: batch, lhs free, rhs free."""
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_contracting and d not in lhs_batch]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_contracting and d not in rhs_batch]
    batch_dims = [lhs.shape[d] for d in lhs_batch]
    for a, b in zip(lhs_batch, rhs_batch):
        if lhs.shape[a] != rhs.shape[b]:
            raise EvaluationError(f"batch dimension sizes differ: lhs {list(lhs.shape)}, rhs "
                                  f"{list(rhs.shape)}")
    for a, b in zip(lhs_contracting, rhs_contracting):
        if lhs.shape[a] != rhs.shape[b]:
            raise EvaluationError(f"contracting dimension sizes differ: lhs {list(lhs.shape)}, "
                                  f"rhs {list(rhs.shape)}")
    m_dims = [lhs.shape[d] for d in lhs_free]
    n_dims = [rhs.shape[d] for d in rhs_free]
    bsz = int(np.prod(batch_dims, dtype=np.int64))
    m = int(np.prod(m_dims, dtype=np.int64))
    n = int(np.prod(n_dims, dtype=np.int64))
    k = int(np.prod([lhs.shape[d] for d in lhs_contracting], dtype=np.int64))
    a = np.transpose(lhs, list(lhs_batch) + lhs_free + list(lhs_contracting)).reshape(bsz, m, k)
    b = np.transpose(rhs, list(rhs_batch) + list(rhs_contracting) + rhs_free).reshape(bsz, k, n)
    return _matmul(a, b).reshape(batch_dims + m_dims + n_dims)


@kernel("dot")
def dot_kernel(ctx, instr, args):
    lhs, rhs = args
    result = dtypes.to_dtype(instr.shape.element_type)
    d = instr.attrs["dot_dimension_numbers"]
    out = general_dot(to_compute(lhs, result), to_compute(rhs, result),
                      d.lhs_contracting_dimensions, d.rhs_contracting_dimensions,
                      d.lhs_batch_dimensions, d.rhs_batch_dimensions)
    return from_compute(out, result)


# -- ragged-dot ---------------------------------------------------------------------------------


def _place(values: np.ndarray, axes, rank: int) -> np.ndarray:
    """``values`` whose dimensions are the given axes of a rank-``rank`` array, reshaped to
    broadcast against such an array."""
    order = np.argsort(axes)
    moved = np.transpose(values, order) if values.ndim else values
    shape = [1] * rank
    for i, ax in enumerate(sorted(axes)):
        shape[ax] = moved.shape[i]
    return moved.reshape(shape)


@kernel("ragged-dot")
def ragged_dot_kernel(ctx, instr, args):
    lhs, rhs, group_sizes = args
    result = dtypes.to_dtype(instr.shape.element_type)
    ragged = instr.attrs["ragged_dot_dimension_numbers"]
    d = ragged.dot_dimension_numbers
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    lb, rb = list(d.lhs_batch_dimensions), list(d.rhs_batch_dimensions)
    (ragged_dim,) = ragged.lhs_ragged_dimensions
    gs = group_sizes.astype(np.int64)
    num_groups = gs.shape[-1]
    prefix_rank = gs.ndim - 1
    a, b = to_compute(lhs, result), to_compute(rhs, result)
    what = f"ragged-dot %{instr.name}"
    if ragged_dim in lc:  # one result per group, over its part of the contracting dimension
        if prefix_rank > len(lb):
            raise UnimplementedError(f"{what}: group_sizes with contracting dimensions in its "
                                     f"prefix is not supported")
        size = lhs.shape[ragged_dim]
        ends = np.cumsum(gs, axis=-1)
        starts = ends - gs
        starts, ends = np.clip(starts, 0, size), np.clip(ends, 0, size)
        pos = np.arange(size)
        outs = []
        for j in range(num_groups):
            mask = (starts[..., j, None] <= pos) & (pos < ends[..., j, None])
            mask = _place(mask, lb[:prefix_rank] + [ragged_dim], lhs.ndim)
            outs.append(general_dot(np.where(mask, a, 0), b, lc, rc, lb, rb))
        out = np.stack(outs) if outs else np.zeros((0,) + tuple(instr.shape.dimensions[1:]),
                                                    a.dtype)
        return from_compute(out, result)
    if ragged_dim in lb:  # batches past the groups give zeros
        out = general_dot(a, b, lc, rc, lb, rb)
        handled = gs.sum(axis=-1)  # prefix dims = the batch dims before the ragged one
        pos = lb.index(ragged_dim)
        idx = np.arange(out.shape[pos])
        keep = idx < handled[..., None]  # a rank-1 group_sizes applies to every batch
        keep = _place(keep, (list(range(pos)) if prefix_rank else []) + [pos], out.ndim)
        return from_compute(np.where(keep, out, 0), result)
    # ragged non-contracting: each lhs row multiplies the rhs of its group
    (group_dim,) = ragged.rhs_group_dimensions
    rhs_batch = [x if x < group_dim else x - 1 for x in rb]
    rhs_contracting = [x if x < group_dim else x - 1 for x in rc]
    per_group = [general_dot(a, np.take(b, j, axis=group_dim), lc, rhs_contracting, lb,
                             rhs_batch) for j in range(num_groups)]
    lhs_free = [x for x in range(lhs.ndim) if x not in lc and x not in lb]
    row_axis = len(lb) + lhs_free.index(ragged_dim)
    out_shape = tuple(instr.shape.dimensions) if not per_group else per_group[0].shape
    if not per_group:
        return from_compute(np.zeros(out_shape, a.dtype), result)
    rows = np.arange(lhs.shape[ragged_dim])
    ends = np.cumsum(gs, axis=-1)  # shape prefix + (groups,)
    inside = rows[:, None] < ends[..., None, :]  # prefix + (rows, groups)
    group = np.argmax(inside, axis=-1)
    valid = inside.any(axis=-1)
    # group_sizes' leading dimensions are the result's leading ones (batch, then the lhs
    # free dimensions before the ragged one); a rank-1 group_sizes applies everywhere
    axes = (list(range(row_axis)) if prefix_rank else []) + [row_axis]
    group = _place(group, axes, len(out_shape))
    valid = _place(valid, axes, len(out_shape))
    stacked = np.stack(per_group, axis=-1)
    picked = np.take_along_axis(stacked, np.broadcast_to(group, out_shape)[..., None], -1)[..., 0]
    return from_compute(np.where(valid, picked, 0), result)


# -- scaled-dot ---------------------------------------------------------------------------------


def _expand_scale(scale: np.ndarray, operand_shape) -> np.ndarray:
    if scale.ndim == 0:
        return np.ones((), scale.dtype)
    for axis, (n, s) in enumerate(zip(operand_shape, scale.shape)):
        if s == 0 or n % s:
            raise EvaluationError(f"scaled-dot: scale dimensions {list(scale.shape)} do not "
                                  f"divide the operand's {list(operand_shape)}")
        scale = np.repeat(scale, n // s, axis=axis)
    return scale


@kernel("scaled-dot")
def scaled_dot_kernel(ctx, instr, args):
    lhs, rhs, lhs_scale, rhs_scale = args
    result = dtypes.to_dtype(instr.shape.element_type)
    d = instr.attrs["dot_dimension_numbers"]
    with np.errstate(all="ignore"):
        # the evaluator converts every operand and scale to the result type first
        a = to_compute(convert(lhs, result), result) * to_compute(
            convert(_expand_scale(lhs_scale, lhs.shape), result), result)
        b = to_compute(convert(rhs, result), result) * to_compute(
            convert(_expand_scale(rhs_scale, rhs.shape), result), result)
    out = general_dot(a, b, d.lhs_contracting_dimensions, d.rhs_contracting_dimensions,
                      d.lhs_batch_dimensions, d.rhs_batch_dimensions)
    return from_compute(out, result)


# -- convolution --------------------------------------------------------------------------------


@kernel("convolution")
def convolution_kernel(ctx, instr, args):
    what = f"convolution %{instr.name}"
    sparsity = instr.attrs["sparsity_config"]
    if getattr(sparsity, "lhs", None) is not None or getattr(sparsity, "rhs", None) is not None:
        raise UnimplementedError(f"{what}: sparse convolutions (sparsity_config) are not "
                                 f"supported by the interpreter")
    lhs, rhs = args[:2]
    result = dtypes.to_dtype(instr.shape.element_type)
    dn = instr.attrs["dim_labels"]
    window = instr.attrs["window"]
    fgc, bgc = instr.attrs["feature_group_count"], instr.attrs["batch_group_count"]
    nsp = len(dn.input_spatial_dimensions)
    if len(window.dimensions) != nsp:
        raise EvaluationError(f"{what}: the window has {len(window.dimensions)} dimensions, "
                              f"the convolution {nsp} spatial dimensions")
    x = np.transpose(to_compute(lhs, result),
                     [dn.input_batch_dimension, dn.input_feature_dimension,
                      *dn.input_spatial_dimensions])
    w = np.transpose(to_compute(rhs, result),
                     [dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension,
                      *dn.kernel_spatial_dimensions])
    flip = tuple(2 + i for i, wd in enumerate(window.dimensions) if wd.window_reversal)
    if flip:
        w = np.flip(w, axis=flip)
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    groups = fgc if bgc == 1 else bgc
    if c % fgc or o % groups or n % bgc or c // fgc != cg:
        raise EvaluationError(
            f"{what}: input features {c}, kernel input features {cg}, output features {o}, "
            f"batch {n} do not fit feature_group_count {fgc} and batch_group_count {bgc}")
    spatial_axes = list(range(2, 2 + nsp))
    padded, _ = dilate_and_pad(x, spatial_axes, window, np.zeros((), x.dtype), with_mask=False)
    # XLA:CPU computes no product at the holes and the padding of a convolution with base
    # (lhs) dilation (XLA's evaluator skips them too): a non-finite kernel value meets only
    # the input's elements there (0 * inf would be NaN); an ordinary convolution multiplies
    # its padding (docs/numerics.md). ``hollow``: the positions holding no input element.
    hollow = None
    if any(wd.base_dilation > 1 for wd in window.dimensions) and \
            np.issubdtype(w.dtype, np.inexact) and not np.isfinite(w).all():
        real, _ = dilate_and_pad(np.ones((1, 1) + x.shape[2:], bool), spatial_axes, window,
                                 np.zeros((), bool), with_mask=False)
        hollow = ~real[0, 0]
    kernel_sizes = list(w.shape[2:])
    outs = []
    for size, wd in zip(kernel_sizes, window.dimensions):
        if size != wd.size:
            raise EvaluationError(f"{what}: kernel spatial sizes {kernel_sizes} differ from "
                                  f"the window {window.to_text()}")
    for a, wd in zip(spatial_axes, window.dimensions):
        span = 0 if wd.size == 0 else (wd.size - 1) * wd.window_dilation + 1
        p = padded.shape[a]
        outs.append(0 if p < span or span == 0 else (p - span) // wd.stride + 1)
    # (batch, groups, features per group, spatial...): feature groups split the features,
    # batch groups split the batch (group-major)
    if bgc > 1:
        xg = padded.reshape((bgc, n // bgc, c) + padded.shape[2:]).swapaxes(0, 1)
        nb = n // bgc
    else:
        xg = padded.reshape((n, fgc, c // fgc) + padded.shape[2:])
        nb = n
    og = o // groups
    wg = w.reshape((groups, og, cg) + w.shape[2:])
    npos = int(np.prod(outs, dtype=np.int64))
    acc = np.zeros((groups, nb * npos, og), dtype=x.dtype)
    if npos and nb:
        for kpos in np.ndindex(*kernel_sizes):
            sl = [slice(None)] * 3
            for k, size_out, wd in zip(kpos, outs, window.dimensions):
                start = k * wd.window_dilation
                sl.append(slice(start, start + (size_out - 1) * wd.stride + 1, wd.stride))
            patch = xg[tuple(sl)]  # (nb, groups, cg, outs...)
            patch = np.moveaxis(patch.reshape(nb, groups, cg, npos), 1, 0)  # (g, nb, cg, npos)
            patch = patch.transpose(0, 1, 3, 2).reshape(groups, nb * npos, cg)
            kern = wg[(slice(None), slice(None), slice(None)) + kpos]  # (g, og, cg)
            part = _matmul(patch, kern.transpose(0, 2, 1))  # (g, nb * npos, og)
            if hollow is not None:  # rows read at a hole or in the padding: no product
                part[:, np.tile(hollow[tuple(sl[3:])].reshape(npos), nb), :] = 0
            acc += part
    out = acc.reshape(groups, nb, *outs, og)  # (g, nb, spatial..., og)
    out = np.moveaxis(out, -1, 1).reshape((groups * og, nb) + tuple(outs))  # (g*og, nb, ...)
    out = out.swapaxes(0, 1)  # (batch, feature, spatial...)
    perm = [dn.output_batch_dimension, dn.output_feature_dimension, *dn.output_spatial_dimensions]
    out = np.transpose(out, np.argsort(perm))
    return from_compute(out, result)


__all__ = ["convert", "from_compute", "general_dot", "to_compute"]
