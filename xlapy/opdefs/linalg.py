"""Linear algebra and normalisation: batch-norm-training, batch-norm-inference,
batch-norm-grad, fft, cholesky and triangular-solve.

Shape rules follow ShapeInference::InferBatchNorm{Training,Inference,Grad}Shape,
InferFftShape, InferCholeskyShape and InferTriangularSolveShape.
"""

from __future__ import annotations

from xlapy.hlo.attrs import AttrSpec, BoolKind, FloatKind, IntKind, IntListKind
from xlapy.hlo.attrs.enums import FFT_TYPE, TRANSPOSE, FftType
from xlapy.opdefs.common import expect_array, same_type_ignoring_fp_precision, tname
from xlapy.opdefs.registry import OpCall, op
from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.shape import UNBOUNDED_SIZE

P = PrimitiveType


def _compatible_sizes(a: int, b: int) -> bool:
    return a == b or UNBOUNDED_SIZE in (a, b)


# -- batch norm ---------------------------------------------------------------------------------

_BATCH_NORM_ATTRS = [
    AttrSpec("epsilon", FloatKind(), doc="added to the variance to avoid dividing by zero"),
    AttrSpec("feature_index", IntKind(), doc="the feature dimension of the operand"),
]


def _check_feature_index(call: OpCall, operand: Shape, feature_index: int) -> None:
    if feature_index >= operand.rank:
        call.fail(f"Expected feature_index of {call.opcode} to be smaller than the rank of "
                  f"operand_shape; got feature_index {feature_index}, and rank {operand.rank}.")
    if feature_index < 0:
        call.fail(f"Expected feature_index of {call.opcode} to be a non-negative number, got "
                  f"{feature_index}.")


def _check_rank1(call: OpCall, shape: Shape, what: str) -> None:
    if shape.rank != 1:
        call.fail(f"{what} input of {call.opcode} must have rank 1, but has rank {shape.rank}.")


def _check_same_type(call: OpCall, shape: Shape, operand: Shape, what: str,
                     noun: str = "shape") -> None:
    if not same_type_ignoring_fp_precision(shape, operand):
        call.fail(f"The inputs should have the same element type for {call.opcode}, but the "
                  f"{noun} of {what} is {tname(shape.element_type)} and the {noun} of operand "
                  f"is {tname(operand.element_type)}.")


def _check_feature_size(call: OpCall, shape: Shape, feature_count: int, what: str) -> None:
    if not _compatible_sizes(shape.dimensions[0], feature_count):
        call.fail(f"The size of {what} should be compatible with feature count, but the size of "
                  f"{what} is {shape.dimensions[0]} and the feature count is {feature_count}.")


def _check_floating(call: OpCall, shape: Shape, what: str) -> None:
    if not dtypes.is_floating(shape.element_type):
        call.fail(f"The {what} to {call.opcode} must have a floating point element type, but "
                  f"the shape is {tname(shape.element_type)}.")


def _feature_shape(operand: Shape, feature_index: int) -> Shape:
    return Shape.array(operand.element_type, [operand.dimensions[feature_index]],
                       dynamic_dimensions=[operand.dynamic_dimensions[feature_index]])


@op("batch-norm-training", attrs=_BATCH_NORM_ATTRS)
def _batch_norm_training(call: OpCall) -> Shape:
    """batch-norm-training(operand, scale, offset) -> (output, batch_mean, batch_var)."""
    operand, scale, offset = call.operands
    expect_array(call, operand, "operand of batch norm training")
    expect_array(call, offset, "offset input of batch norm training")
    expect_array(call, scale, "scale input of batch norm training")
    feature_index = call.attrs["feature_index"]
    _check_feature_index(call, operand, feature_index)
    if operand.rank == 0:
        call.fail(f"Expected the rank of operand to {call.opcode} to be at least 1; got 0.")
    _check_rank1(call, offset, "Offset")
    _check_rank1(call, scale, "Scale")
    _check_floating(call, operand, "operand")
    _check_same_type(call, offset, operand, "offset factor")
    _check_same_type(call, scale, operand, "scale factor")
    feature_count = operand.dimensions[feature_index]
    _check_feature_size(call, offset, feature_count, "offset factor")
    _check_feature_size(call, scale, feature_count, "scale factor")
    stats = _feature_shape(operand, feature_index)
    return Shape.tuple([operand, stats, stats])


@op("batch-norm-inference", attrs=_BATCH_NORM_ATTRS)
def _batch_norm_inference(call: OpCall) -> Shape:
    """batch-norm-inference(operand, scale, offset, mean, variance) -> operand's shape."""
    operand, scale, offset, mean, variance = call.operands
    expect_array(call, operand, "operand of batch norm inference")
    expect_array(call, offset, "offset input of batch norm inference")
    expect_array(call, scale, "scale input of batch norm inference")
    expect_array(call, mean, "mean input of batch norm inference")
    expect_array(call, variance, "variance input of batch norm inference")
    feature_index = call.attrs["feature_index"]
    _check_feature_index(call, operand, feature_index)
    if operand.rank == 0:
        call.fail(f"Expected the rank of operand to {call.opcode} to be at least 1; got 0.")
    _check_rank1(call, offset, "Offset")
    _check_rank1(call, scale, "Scale")
    _check_rank1(call, mean, "Mean")
    _check_rank1(call, variance, "Variance")
    _check_floating(call, operand, "operand")
    _check_same_type(call, offset, operand, "offset factor")
    _check_same_type(call, scale, operand, "scale factor")
    _check_same_type(call, mean, operand, "mean")
    _check_same_type(call, variance, operand, "variance")
    feature_count = operand.dimensions[feature_index]
    _check_feature_size(call, offset, feature_count, "offset factor")
    _check_feature_size(call, scale, feature_count, "scale factor")
    _check_feature_size(call, mean, feature_count, "mean")
    _check_feature_size(call, variance, feature_count, "variance")
    return operand


@op("batch-norm-grad", attrs=_BATCH_NORM_ATTRS)
def _batch_norm_grad(call: OpCall) -> Shape:
    """batch-norm-grad(operand, scale, mean, variance, grad_output) -> (grad_operand,
    grad_scale, grad_offset)."""
    operand, scale, mean, variance, grad_output = call.operands
    expect_array(call, operand, "operand of batch norm grad")
    expect_array(call, scale, "scale input of batch norm grad")
    expect_array(call, mean, "mean input of batch norm grad")
    expect_array(call, variance, "var input of batch norm grad")
    expect_array(call, grad_output, "output_grad input of batch norm grad")
    feature_index = call.attrs["feature_index"]
    _check_feature_index(call, operand, feature_index)
    if operand.rank != grad_output.rank:
        call.fail(f"Expected operand_shape of batch-norm-grad to have the same rank as "
                  f"output_grad_shape; got rank(oprand_shape) {operand.rank}, and "
                  f"rank(output_grad_shape) {grad_output.rank}.")
    _check_rank1(call, mean, "Mean")
    _check_rank1(call, scale, "Scale")
    _check_rank1(call, variance, "Var")
    _check_floating(call, operand, "operand")
    _check_floating(call, grad_output, "output_grad")
    _check_same_type(call, grad_output, operand, "output_grad", "element type")
    _check_same_type(call, scale, operand, "scale factor", "element type")
    _check_same_type(call, mean, operand, "mean", "element type")
    _check_same_type(call, variance, operand, "variance", "element type")
    feature_count = operand.dimensions[feature_index]
    _check_feature_size(call, mean, feature_count, "mean")
    _check_feature_size(call, scale, feature_count, "scale factor")
    _check_feature_size(call, variance, feature_count, "variance")
    for i, (a, b) in enumerate(zip(operand.dimensions, grad_output.dimensions)):
        if not _compatible_sizes(a, b):
            call.fail(f"The bounds of operand shape should be compatible with output_grad's, but "
                      f"the bound of operand_shape at dimension {i} is {a} and the bound of "
                      f"output_grad_shape is {b}.")
    feature = _feature_shape(operand, feature_index)
    return Shape.tuple([operand, feature, feature])


# -- fft ----------------------------------------------------------------------------------------


@op("fft", attrs=[
    AttrSpec("fft_type", FFT_TYPE, doc="FFT, IFFT, RFFT or IRFFT"),
    AttrSpec("fft_length", IntListKind(), doc="time-domain lengths of the 1-3 innermost axes"),
])
def _fft(call: OpCall) -> Shape:
    """Fourier transform of the innermost len(fft_length) axes. FFT/IFFT keep the shape;
    RFFT gives complex with the last axis fft_length[-1]//2+1; IRFFT gives real with the
    last axis fft_length[-1]."""
    (x,) = call.operands
    expect_array(call, x, "operand of fft")
    fft_type, lengths = call.attrs["fft_type"], call.attrs["fft_length"]
    rank = len(lengths)
    if not 1 <= rank <= 3:
        call.fail(f"FFT only supports ranks 1-3; got {rank}.")
    t = x.element_type

    def check_rank():
        if x.rank < rank:
            call.fail(f"FFT of rank {rank} requires input of at least same rank; got input of "
                      f"rank {x.rank}")

    last = x.rank - 1
    if fft_type in (FftType.FFT, FftType.IFFT):
        if not dtypes.is_complex(t):
            call.fail(f"{fft_type.value} requires complex input type, found {tname(t)}.")
        check_rank()
        return x
    if fft_type is FftType.RFFT:
        if t not in (P.F32, P.F64):
            call.fail(f"RFFT requires F32 or F64 input type, found {tname(t)}.")
        check_rank()
        for i in range(rank):
            d = x.rank - rank + i
            if x.dimensions[d] != UNBOUNDED_SIZE and x.dimensions[d] != lengths[i]:
                call.fail(f"RFFT requires innermost dimensions match fft_length but dimension {d} "
                          f"is {x.dimensions[d]} and should be {lengths[i]}.")
        dims, dyn = list(x.dimensions), list(x.dynamic_dimensions)
        if lengths[-1] != 0:
            dyn[last] = dyn[last] and x.dimensions[last] != UNBOUNDED_SIZE
            dims[last] = lengths[-1] // 2 + 1
        return Shape.array(P.C64 if t == P.F32 else P.C128, dims, dynamic_dimensions=dyn)
    # IRFFT
    if not dtypes.is_complex(t):
        call.fail(f"IRFFT requires complex input type, found {tname(t)}.")
    check_rank()
    for i in range(rank - 1):
        d = x.rank - rank + i
        if x.dimensions[d] != lengths[i]:
            call.fail(f"IRFFT requires all but one innermost dimensions match fft_length, but "
                      f"dimension {d} is {x.dimensions[d]} and should be {lengths[i]}.")
    size = x.dimensions[last]
    if ((size != 0 or lengths[-1] != 0) and size != UNBOUNDED_SIZE
            and size != lengths[-1] // 2 + 1):
        call.fail(f"IRFFT requires innermost dimension matches fft_length/2+1, but dimension "
                  f"{last} is {size} and should be {lengths[-1] // 2 + 1}.")
    dims, dyn = list(x.dimensions), list(x.dynamic_dimensions)
    dyn[last] = dyn[last] and size != UNBOUNDED_SIZE
    dims[last] = lengths[-1]
    return Shape.array(dtypes.complex_component_type(t), dims, dynamic_dimensions=dyn)


# -- cholesky, triangular-solve -----------------------------------------------------------------


@op("cholesky", attrs=[
    AttrSpec("lower", BoolKind(), default=False, doc="use (and return) the lower triangle"),
])
def _cholesky(call: OpCall) -> Shape:
    """Cholesky factor of a batch of symmetric positive definite [..., M, M] matrices."""
    (a,) = call.operands
    expect_array(call, a, "operand of cholesky")
    if not dtypes.is_floating(a.element_type) and not dtypes.is_complex(a.element_type):
        call.fail(f"Expected element type in shape to be floating or complex for Cholesky; got "
                  f"{tname(a.element_type)}.")
    if a.rank < 2:
        call.fail(f"The 'a' argument to Cholesky must have rank >= 2, got shape {a}")
    if not _compatible_sizes(a.dimensions[-2], a.dimensions[-1]):
        call.fail(f"The two minor dimensions of 'a' must have compatible size, got {a}.")
    return a


@op("triangular-solve", attrs=[
    AttrSpec("left_side", BoolKind(), default=False, doc="solve op(a) x = b (else x op(a) = b)"),
    AttrSpec("lower", BoolKind(), default=False, doc="a is lower triangular"),
    AttrSpec("unit_diagonal", BoolKind(), default=False, doc="a's diagonal is taken as ones"),
    AttrSpec("transpose_a", TRANSPOSE, default=None,
             doc="NO_TRANSPOSE, TRANSPOSE or ADJOINT (absent: TRANSPOSE_INVALID, rejected)"),
])
def _triangular_solve(call: OpCall) -> Shape:
    """triangular-solve(a, b): solves a batch of triangular systems; the result has b's
    shape."""
    a, b = call.operands
    expect_array(call, a, "'a' of triangular solve")
    expect_array(call, b, "'b' of triangular solve")
    if ((not dtypes.is_floating(a.element_type) and not dtypes.is_complex(a.element_type))
            or a.element_type != b.element_type):
        call.fail(f"Expected element types in shape to be floating or complex and identical for "
                  f"TriangularSolve; got {tname(a.element_type)} and {tname(b.element_type)}.")
    if a.rank < 2:
        call.fail(f"The 'a' argument to TriangularSolve must have rank >= 2, got shape {a}")
    if b.rank != a.rank:
        call.fail(f"Arguments to triangular solve must have equal rank; got {b} and {a}.")
    if not _compatible_sizes(a.dimensions[-2], a.dimensions[-1]):
        call.fail(f"The two minor dimensions of 'a' must have equal size, got {a}.")
    shared = b.dimensions[-2] if call.attrs["left_side"] else b.dimensions[-1]
    if not _compatible_sizes(a.dimensions[-1], shared):
        call.fail(f"The shared dimension of 'a' and 'b' does not match, got shapes {a} and {b}")
    if a.dimensions[:-2] != b.dimensions[:-2]:
        call.fail(f"The leading batch dimensions of the arguments to triangular solve must be "
                  f"equal; got {b} and {a}.")
    if call.attrs["transpose_a"] is None:
        call.fail("Invalid transpose option value for triangular solve (TRANSPOSE_INVALID); "
                  "transpose_a must be NO_TRANSPOSE, TRANSPOSE or ADJOINT.")
    return b
