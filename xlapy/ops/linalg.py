"""Builder functions for normalisation and linear algebra: BatchNormTraining,
BatchNormInference, BatchNormGrad, Fft, Cholesky, TriangularSolve, with XLA's names and
argument order (xla_builder.h), plus the FftType and Transpose (TriangularSolveOptions)
enums users pass. Imports the builder and the attribute enums.
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.hlo.attrs.enums import FftType, Transpose
from xlapy.ops.builder import XlaOp
from xlapy.ops.core import bool_arg, check_same_builder, int_list

__all__ = [
    "BatchNormGrad", "BatchNormInference", "BatchNormTraining", "Cholesky", "Fft", "FftType",
    "TriangularSolve", "TriangularSolveOptions",
]


class TriangularSolveOptions:
    """XLA's TriangularSolveOptions namespace for the ``transpose_a`` values:
    ``ops.TriangularSolveOptions.Transpose.ADJOINT`` (``ops.Transpose`` is the transpose op).
    """

    Transpose = Transpose
    NO_TRANSPOSE = Transpose.NO_TRANSPOSE
    TRANSPOSE = Transpose.TRANSPOSE
    ADJOINT = Transpose.ADJOINT


_bool = bool_arg


def BatchNormTraining(operand: XlaOp, scale: XlaOp, offset: XlaOp, epsilon: float,
                      feature_index: int) -> XlaOp:
    """Normalise over every dimension but ``feature_index``; returns the tuple
    (output, batch_mean, batch_var): ``ops.BatchNormTraining(x, gamma, beta, 1e-3, 3)``."""
    b = check_same_builder("BatchNormTraining", [operand, scale, offset])
    return b.emit("batch-norm-training", [operand, scale, offset],
                  {"epsilon": epsilon, "feature_index": feature_index}, op_name="BatchNormTraining")


def BatchNormInference(operand: XlaOp, scale: XlaOp, offset: XlaOp, mean: XlaOp, variance: XlaOp,
                       epsilon: float, feature_index: int) -> XlaOp:
    """Normalise with given statistics; the result has the operand's shape:
    ``ops.BatchNormInference(x, gamma, beta, mean, var, 1e-3, 3)``."""
    b = check_same_builder("BatchNormInference", [operand, scale, offset, mean, variance])
    return b.emit("batch-norm-inference", [operand, scale, offset, mean, variance],
                  {"epsilon": epsilon, "feature_index": feature_index},
                  op_name="BatchNormInference")


def BatchNormGrad(operand: XlaOp, scale: XlaOp, batch_mean: XlaOp, batch_var: XlaOp,
                  grad_output: XlaOp, epsilon: float, feature_index: int) -> XlaOp:
    """Gradients of batch normalisation: the tuple (grad_operand, grad_scale, grad_offset):
    ``ops.BatchNormGrad(x, gamma, mean, var, dy, 1e-3, 3)``."""
    b = check_same_builder("BatchNormGrad", [operand, scale, batch_mean, batch_var, grad_output])
    return b.emit("batch-norm-grad", [operand, scale, batch_mean, batch_var, grad_output],
                  {"epsilon": epsilon, "feature_index": feature_index}, op_name="BatchNormGrad")


def Fft(operand: XlaOp, fft_type: FftType | str, fft_length: Sequence[int]) -> XlaOp:
    """Fourier transform of the innermost ``len(fft_length)`` (1-3) axes:
    ``ops.Fft(x, ops.FftType.RFFT, [64, 32])`` on f32[5,64,32] gives c64[5,64,17]."""
    b = check_same_builder("Fft", [operand])
    return b.emit("fft", [operand], {"fft_type": fft_type,
                                     "fft_length": int_list(fft_length, "fft_length", "Fft")},
                  op_name="Fft")


def Cholesky(a: XlaOp, lower: bool) -> XlaOp:
    """Cholesky factor of a batch of [..., M, M] matrices, in the lower (or upper)
    triangle: ``ops.Cholesky(a, lower=True)``."""
    b = check_same_builder("Cholesky", [a])
    return b.emit("cholesky", [a], {"lower": _bool(lower, "lower", "Cholesky")}, op_name="Cholesky")


def TriangularSolve(a: XlaOp, b: XlaOp, left_side: bool, lower: bool, unit_diagonal: bool,
                    transpose_a: Transpose | str) -> XlaOp:
    """Solve op(a) x = b (``left_side``) or x op(a) = b for triangular ``a``:
    ``ops.TriangularSolve(a, b, True, True, False, ops.TriangularSolveOptions.NO_TRANSPOSE)``
    (``transpose_a`` may also be the text "NO_TRANSPOSE", "TRANSPOSE" or "ADJOINT")."""
    builder = check_same_builder("TriangularSolve", [a, b])
    op = "TriangularSolve"
    return builder.emit("triangular-solve", [a, b], {
        "left_side": _bool(left_side, "left_side", op), "lower": _bool(lower, "lower", op),
        "unit_diagonal": _bool(unit_diagonal, "unit_diagonal", op), "transpose_a": transpose_a,
    }, op_name=op)
