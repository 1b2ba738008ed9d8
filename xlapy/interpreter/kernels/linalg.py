"""Kernels of linear algebra and normalisation: batch-norm-training, batch-norm-inference,
batch-norm-grad, fft, cholesky and triangular-solve.

Every kernel computes in f64 (c128 for complex types) and rounds once to the element type
(narrow floats through f32, as XLA:CPU computes them in f32).

- batch norm: the page's formulas with the population variance (divided by the element
  count per feature) and ``epsilon`` as XLA stores it, a 32-bit float (epsilon=0.001 on an f64
  operand adds float32(0.001)); mean and variance over every dimension but feature_index.
  Training returns (output, batch_mean, batch_var); grad returns (grad_operand, grad_scale,
  grad_offset). A feature with no elements gives NaN means, as 0/0.
- fft: numpy.fft on complex128. Each transformed input axis is cut or zero-padded to
  fft_length (IRFFT: the innermost to fft_length[-1] // 2 + 1) and each output axis cut or
  zero-padded to the result's size, as XLA's evaluator copies data in and out. IRFFT ignores
  the imaginary parts that a Hermitian input cannot have (DC and, for even lengths, Nyquist).
- cholesky: XLA's CholeskyExpander: column by column, reading only the ``lower`` triangle
  (``lower=false``: the upper one, by factoring the transpose), zeros in the other triangle,
  each column divided by the square root of the real part of its diagonal element (so a
  complex diagonal keeps an imaginary part divided by that root, as XLA's does); a matrix whose factorisation takes the square root
  of a negative number or NaN (not positive definite) is returned as all NaN, per matrix.
- triangular-solve: forward/back substitution reading only the ``lower`` (or upper)
  triangle of a, with a unit diagonal when unit_diagonal, on op(a) = a, a^T or a^H;
  left_side solves op(a) x = b, otherwise x op(a) = b; batched over the leading dimensions.
  A zero pivot divides by zero (inf/NaN), as IEEE arithmetic does.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.attrs.enums import FftType
from xlapy.interpreter.evaluator import EvaluationError
from xlapy.interpreter.kernels.dot_conv import convert
from xlapy.interpreter.registry import kernel
from xlapy.shape import dtypes


def _wide(x: np.ndarray) -> np.ndarray:
    """f64 (c128 for complex) values of x."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    return x.astype(np.float64)


def _round(x: np.ndarray, dtype) -> np.ndarray:
    return convert(np.asarray(x), np.dtype(dtype))


def _epsilon(instr) -> float:
    """XLA keeps epsilon as a 32-bit float."""
    return float(np.float32(instr.attrs["epsilon"]))


# -- batch norm ---------------------------------------------------------------------------------


def _feature_axes(x: np.ndarray, feature_index: int, what: str):
    if not 0 <= feature_index < x.ndim:
        raise EvaluationError(f"{what}: feature_index {feature_index} is out of range for an "
                              f"operand of rank {x.ndim}")
    others = tuple(d for d in range(x.ndim) if d != feature_index)
    shape = [1] * x.ndim
    shape[feature_index] = x.shape[feature_index]
    return others, tuple(shape)


def _check_feature_vector(v: np.ndarray, n: int, name: str, what: str) -> None:
    if v.shape != (n,):
        raise EvaluationError(f"{what}: {name} has dimensions {list(v.shape)}, expected [{n}] "
                              f"(the feature count)")


@kernel("batch-norm-training")
def batch_norm_training_kernel(ctx, instr, args):
    operand, scale, offset = args
    what = f"batch-norm-training %{instr.name}"
    fi = instr.attrs["feature_index"]
    axes, fshape = _feature_axes(operand, fi, what)
    nf = operand.shape[fi]
    _check_feature_vector(scale, nf, "scale", what)
    _check_feature_vector(offset, nf, "offset", what)
    x = _wide(operand)
    eps = _epsilon(instr)
    with np.errstate(all="ignore"):
        mean = np.mean(x, axis=axes) if x.size else np.full(nf, np.nan)
        centred = x - mean.reshape(fshape)
        var = np.mean(centred * centred, axis=axes) if x.size else np.full(nf, np.nan)
        y = (centred / np.sqrt(var + eps).reshape(fshape) * _wide(scale).reshape(fshape)
             + _wide(offset).reshape(fshape))
    dt = operand.dtype
    return (_round(y, dt), _round(mean, dt), _round(var, dt))


@kernel("batch-norm-inference")
def batch_norm_inference_kernel(ctx, instr, args):
    operand, scale, offset, mean, variance = args
    what = f"batch-norm-inference %{instr.name}"
    fi = instr.attrs["feature_index"]
    _, fshape = _feature_axes(operand, fi, what)
    nf = operand.shape[fi]
    for name, v in (("scale", scale), ("offset", offset), ("mean", mean),
                    ("variance", variance)):
        _check_feature_vector(v, nf, name, what)
    eps = _epsilon(instr)
    with np.errstate(all="ignore"):
        y = ((_wide(operand) - _wide(mean).reshape(fshape))
             / np.sqrt(_wide(variance) + eps).reshape(fshape)
             * _wide(scale).reshape(fshape) + _wide(offset).reshape(fshape))
    return _round(y, operand.dtype)


@kernel("batch-norm-grad")
def batch_norm_grad_kernel(ctx, instr, args):
    operand, scale, mean, variance, grad_output = args
    what = f"batch-norm-grad %{instr.name}"
    fi = instr.attrs["feature_index"]
    axes, fshape = _feature_axes(operand, fi, what)
    nf = operand.shape[fi]
    for name, v in (("scale", scale), ("mean", mean), ("variance", variance)):
        _check_feature_vector(v, nf, name, what)
    if grad_output.shape != operand.shape:
        raise EvaluationError(f"{what}: grad_output has dimensions {list(grad_output.shape)}, "
                              f"the operand {list(operand.shape)}")
    eps = _epsilon(instr)
    x, dy = _wide(operand), _wide(grad_output)
    count = x.size // nf if nf else 0
    with np.errstate(all="ignore"):
        var_eps = (_wide(variance) + eps).reshape(fshape)
        centred = x - _wide(mean).reshape(fshape)
        sum_dy = np.sum(dy, axis=axes)
        sum_dy_centred = np.sum(dy * centred, axis=axes)
        grad_scale = sum_dy_centred / np.sqrt(_wide(variance) + eps)
        grad_offset = sum_dy
        c = (sum_dy_centred / count).reshape(fshape) / var_eps
        d = (sum_dy / count).reshape(fshape)
        grad_x = _wide(scale).reshape(fshape) / np.sqrt(var_eps) * (dy - d - c * centred)
    dt = operand.dtype
    return (_round(grad_x, dt), _round(grad_scale, dt), _round(grad_offset, dt))


# -- fft ----------------------------------------------------------------------------------------


def _fit_axis(x: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Cut or zero-pad ``axis`` of x to ``size``."""
    n = x.shape[axis]
    if n == size:
        return x
    if n > size:
        return np.take(x, np.arange(size), axis=axis)
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, size - n)
    return np.pad(x, pad)


@kernel("fft")
def fft_kernel(ctx, instr, args):
    (x,) = args
    fft_type = instr.attrs["fft_type"]
    lengths = list(instr.attrs["fft_length"])
    rank = len(lengths)
    what = f"fft %{instr.name}"
    if not 1 <= rank <= min(3, x.ndim):
        raise EvaluationError(f"{what}: fft_length {lengths} does not fit an operand of rank "
                              f"{x.ndim}")
    axes = list(range(x.ndim - rank, x.ndim))
    out_dtype = dtypes.to_dtype(instr.shape.element_type)
    out_dims = list(x.shape[:x.ndim - rank]) + list(instr.shape.dimensions[x.ndim - rank:])
    if fft_type is FftType.IRFFT:
        in_sizes = lengths[:-1] + [lengths[-1] // 2 + 1]
    else:
        in_sizes = lengths
    data = _wide(x)
    for axis, size in zip(axes, in_sizes):
        data = _fit_axis(data, axis, size)
    with np.errstate(all="ignore"):
        if 0 in lengths or data.size == 0:
            out = np.zeros([d if i < x.ndim - rank else 0 for i, d in enumerate(out_dims)],
                           dtype=np.complex128)
        elif fft_type is FftType.FFT:
            out = np.fft.fftn(data, axes=axes)
        elif fft_type is FftType.IFFT:
            out = np.fft.ifftn(data, axes=axes)
        elif fft_type is FftType.RFFT:
            out = np.fft.rfftn(data.real, axes=axes)
        else:
            out = np.fft.irfftn(data, s=lengths, axes=axes)
    for axis in axes:
        out = _fit_axis(out, axis, out_dims[axis])
    if np.dtype(out_dtype).kind != "c":
        out = np.real(out)
    return _round(out, out_dtype)


# -- cholesky -----------------------------------------------------------------------------------


def _conj_t(a: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(a, -1, -2))


@kernel("cholesky")
def cholesky_kernel(ctx, instr, args):
    (a,) = args
    what = f"cholesky %{instr.name}"
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise EvaluationError(f"{what}: expected a batch of square matrices, got dimensions "
                              f"{list(a.shape)}")
    lower = instr.attrs["lower"]
    m = _wide(a)
    if not lower:  # factor the transpose (reads the upper triangle as a lower one)
        m = np.swapaxes(m, -1, -2)
    n = m.shape[-1]
    l = np.zeros_like(m)
    error = np.zeros(m.shape[:-2], dtype=bool)
    with np.errstate(all="ignore"):
        for j in range(n):
            # column j from row j down: a[j:, j] - l[j:, :j] @ conj(l[j, :j])
            col = m[..., j:, j] - np.einsum("...ik,...k->...i", l[..., j:, :j],
                                            np.conj(l[..., j, :j]))
            diag = np.sqrt(np.real(col[..., 0]))
            error |= np.isnan(diag)
            # the whole column, diagonal included, is divided by the root (a complex
            # diagonal keeps its imaginary part divided by it, as in XLA's expander)
            l[..., j:, j] = col / diag[..., None]
    l[error] = np.nan
    if not lower:
        l = np.swapaxes(l, -1, -2)
    return _round(l, a.dtype)


# -- triangular-solve ---------------------------------------------------------------------------


@kernel("triangular-solve")
def triangular_solve_kernel(ctx, instr, args):
    a, b = args
    what = f"triangular-solve %{instr.name}"
    left, lower = instr.attrs["left_side"], instr.attrs["lower"]
    unit, transpose = instr.attrs["unit_diagonal"], instr.attrs["transpose_a"]
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or a.shape[:-2] != b.shape[:-2]:
        raise EvaluationError(f"{what}: a {list(a.shape)} and b {list(b.shape)} are not "
                              f"batches of square matrices and right-hand sides")
    n = a.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise EvaluationError(f"{what}: the shared dimension of a {list(a.shape)} and b "
                              f"{list(b.shape)} does not match")
    m = _wide(a)
    m = np.tril(m) if lower else np.triu(m)
    if unit:
        idx = np.arange(n)
        m[..., idx, idx] = 1
    name = getattr(transpose, "name", str(transpose))
    if name == "TRANSPOSE":
        m, lower = np.swapaxes(m, -1, -2), not lower
    elif name == "ADJOINT":
        m, lower = _conj_t(m), not lower
    rhs = _wide(b)
    if not left:  # x op(a) = b  <=>  op(a)^T x^T = b^T
        m, lower = np.swapaxes(m, -1, -2), not lower
        rhs = np.swapaxes(rhs, -1, -2)
    x = np.zeros(rhs.shape, dtype=np.result_type(m, rhs))
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in order:
            known = slice(0, i) if lower else slice(i + 1, n)
            acc = rhs[..., i, :] - np.einsum("...k,...kj->...j", m[..., i, known],
                                             x[..., known, :])
            x[..., i, :] = acc if unit else acc / m[..., i, i][..., None]
    if not left:
        x = np.swapaxes(x, -1, -2)
    return _round(x, b.dtype)


__all__: list[str] = []
