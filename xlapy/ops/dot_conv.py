"""Builder functions for contractions: Dot, DotGeneral, RaggedDot, ScaledDot, Conv,
ConvWithGeneralPadding, ConvWithGeneralDimensions, ConvGeneral, ConvGeneralDilated, with
XLA's names and argument order (xla_builder.h), plus the value types users pass
(DotDimensionNumbers, RaggedDotDimensionNumbers, PrecisionConfig,
ConvolutionDimensionNumbers, Padding). ``preferred_element_type`` becomes the result's
element type, as in XLA. Imports the builder, the opdefs and the attribute types.
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.dot import (
    Algorithm,
    DotDimensionNumbers,
    Precision,
    PrecisionConfig,
    RaggedDotDimensionNumbers,
)
from xlapy.hlo.attrs.window import ConvolutionDimensionNumbers, Padding, Window, make_padding
from xlapy.opdefs import get_opdef
from xlapy.opdefs.registry import ShapeError
from xlapy.ops.builder import XlaBuilder, XlaOp
from xlapy.ops.core import (
    bool_list,
    check_same_builder,
    element_type_arg,
    int_arg,
    int_pairs,
)
from xlapy.ops.core import int_list as _ints
from xlapy.shape import Shape, dtypes

__all__ = [
    "Algorithm", "Conv", "ConvGeneral", "ConvGeneralDilated", "ConvWithGeneralDimensions",
    "ConvWithGeneralPadding", "ConvolutionDimensionNumbers", "CreateDefaultConvDimensionNumbers",
    "Dot", "DotDimensionNumbers", "DotGeneral", "Precision", "PrecisionConfig", "RaggedDot",
    "RaggedDotDimensionNumbers", "ScaledDot",
]


def _emit(b: XlaBuilder, opcode: str, operands: list[XlaOp], attrs: dict,
          preferred_element_type, op_name: str) -> XlaOp:
    """Emit, with the result element type forced to ``preferred_element_type`` if given:
    the shape rule reads it from a declared result, as the verifier passes it in XLA."""
    shape = None
    if preferred_element_type is not None:
        et = element_type_arg(preferred_element_type, "preferred_element_type", op_name)
        if not dtypes.is_array_type(et):
            raise InvalidArgumentError(f"{op_name}: preferred_element_type must be an array "
                                       f"element type, got {et.name}")
        opdef = get_opdef(opcode)
        shape = opdef.infer_shape([o.shape for o in operands], opdef.check_attrs(attrs),
                                  Shape.array(et, ()))
    return b.emit(opcode, operands, attrs, shape=shape, op_name=op_name)


def _precision(precision_config, op_name: str) -> PrecisionConfig:
    if precision_config is None:
        return PrecisionConfig()
    if isinstance(precision_config, PrecisionConfig):
        return precision_config
    raise InvalidArgumentError(f"{op_name}: precision_config must be a PrecisionConfig or None, "
                               f"got {precision_config!r}")




# -- dots ---------------------------------------------------------------------------------------


def Dot(lhs: XlaOp, rhs: XlaOp, precision_config: PrecisionConfig | None = None,
        preferred_element_type=None) -> XlaOp:
    """Vector/matrix product: contracts lhs dimension 1 (0 for a vector) with rhs
    dimension 0. ``ops.Dot(m, v)`` on f32[3,4] and f32[4] gives f32[3]."""
    check_same_builder("Dot", [lhs, rhs])
    rank = lhs.shape.rank if lhs.shape.is_array() else 0
    dnums = DotDimensionNumbers(lhs_contracting_dimensions=[0 if rank == 1 else 1],
                                rhs_contracting_dimensions=[0])
    return DotGeneral(lhs, rhs, dnums, precision_config, preferred_element_type)


def DotGeneral(lhs: XlaOp, rhs: XlaOp, dimension_numbers: DotDimensionNumbers,
               precision_config: PrecisionConfig | None = None,
               preferred_element_type=None) -> XlaOp:
    """Dot with explicit contracting and batch dimensions; result dims are batch, lhs
    free, rhs free.

        dn = ops.DotDimensionNumbers(lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                                     lhs_batch_dimensions=[0], rhs_batch_dimensions=[0])
        y = ops.DotGeneral(a, b, dn)          # f32[8,3,4] x f32[8,4,5] -> f32[8,3,5]
    """
    b = check_same_builder("DotGeneral", [lhs, rhs])
    if not isinstance(dimension_numbers, DotDimensionNumbers):
        raise InvalidArgumentError(f"DotGeneral: dimension_numbers must be DotDimensionNumbers, "
                                   f"got {dimension_numbers!r}")
    attrs = {"dot_dimension_numbers": dimension_numbers,
             "precision_config": _precision(precision_config, "DotGeneral")}
    return _emit(b, "dot", [lhs, rhs], attrs, preferred_element_type, "DotGeneral")


def RaggedDot(lhs: XlaOp, rhs: XlaOp, group_sizes: XlaOp,
              dimension_numbers: RaggedDotDimensionNumbers,
              precision_config: PrecisionConfig | None = None,
              preferred_element_type=None) -> XlaOp:
    """Dot where one lhs dimension is split into groups of ``group_sizes``:
    ``ops.RaggedDot(x, w, sizes, dn)`` with x f32[11,5], w f32[3,5,7], sizes u32[3],
    lhs_ragged_dimensions=[0], rhs_group_dimensions=[0] gives f32[11,7]."""
    b = check_same_builder("RaggedDot", [lhs, rhs, group_sizes])
    if not isinstance(dimension_numbers, RaggedDotDimensionNumbers):
        raise InvalidArgumentError(f"RaggedDot: dimension_numbers must be "
                                   f"RaggedDotDimensionNumbers, got {dimension_numbers!r}")
    attrs = {"ragged_dot_dimension_numbers": dimension_numbers,
             "precision_config": _precision(precision_config, "RaggedDot")}
    return _emit(b, "ragged-dot", [lhs, rhs, group_sizes], attrs, preferred_element_type,
                 "RaggedDot")


def ScaledDot(lhs: XlaOp, rhs: XlaOp, lhs_scale: XlaOp, rhs_scale: XlaOp,
              dimension_numbers: DotDimensionNumbers,
              precision_config: PrecisionConfig | None = None,
              preferred_element_type=None) -> XlaOp:
    """Dot of block-scaled operands; the shape is DotGeneral(lhs, rhs)'s.
    ``ops.ScaledDot(a, b, sa, sb, dn)`` with a f8e4m3fn[4,32], sa f8e8m0fnu[4,1]."""
    b = check_same_builder("ScaledDot", [lhs, rhs, lhs_scale, rhs_scale])
    if not isinstance(dimension_numbers, DotDimensionNumbers):
        raise InvalidArgumentError(f"ScaledDot: dimension_numbers must be DotDimensionNumbers, "
                                   f"got {dimension_numbers!r}")
    attrs = {"dot_dimension_numbers": dimension_numbers,
             "precision_config": _precision(precision_config, "ScaledDot")}
    return _emit(b, "scaled-dot", [lhs, rhs, lhs_scale, rhs_scale], attrs,
                 preferred_element_type, "ScaledDot")


# -- convolutions -------------------------------------------------------------------------------


def CreateDefaultConvDimensionNumbers(num_spatial_dims: int = 2) -> ConvolutionDimensionNumbers:
    """XlaBuilder::CreateDefaultConvDimensionNumbers: batch 0, feature 1, spatial 2.. for
    input and output; kernel output feature 0, input feature 1 (``bf01_oi01->bf01``)."""
    n = int_arg(num_spatial_dims, "num_spatial_dims", "CreateDefaultConvDimensionNumbers", 0)
    return ConvolutionDimensionNumbers.default(n)


def _verify_convolution(lhs: Shape, rhs: Shape, dnums: ConvolutionDimensionNumbers) -> None:
    """XlaBuilder::VerifyConvolution (before the shape rule)."""
    def fail(message):
        raise ShapeError(f"convolution: {message}")

    for name, s in (("lhs", lhs), ("rhs", rhs)):
        if not s.is_array():
            fail(f"Expected array argument for {name} of convolution, but got {s}.")
    if lhs.rank != rhs.rank:
        fail(f"Convolution arguments must have same number of dimensions. Got: {lhs} and {rhs}")
    n = lhs.rank
    if n < 2:
        fail(f"Convolution expects argument arrays with >= 3 dimensions. Got: {lhs} and {rhs}")
    for field in ("input_spatial_dimensions", "kernel_spatial_dimensions",
                  "output_spatial_dimensions"):
        numbers = getattr(dnums, field)
        if len(numbers) != n - 2:
            fail(f"Expected {n - 2} elements for {field}, but got {len(numbers)}.")
        for i, d in enumerate(numbers):
            if not 0 <= d < n:
                fail(f"Convolution {field}[{i}] is out of bounds: {d}")


def _dnums(value, op_name) -> ConvolutionDimensionNumbers:
    if isinstance(value, ConvolutionDimensionNumbers):
        return value
    if isinstance(value, str):
        return ConvolutionDimensionNumbers.parse(value)
    raise InvalidArgumentError(f"{op_name}: dimension_numbers must be ConvolutionDimensionNumbers, "
                               f"got {value!r}")


def Conv(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int], padding: Padding | str,
         feature_group_count: int = 1, batch_group_count: int = 1,
         precision_config: PrecisionConfig | None = None, preferred_element_type=None) -> XlaOp:
    """Convolution with the default layout (input and output ``bf01``, kernel ``oi01``)
    and SAME or VALID padding: ``ops.Conv(x, k, [1, 1], ops.Padding.SAME)``."""
    strides = _ints(window_strides, "window_strides", "Conv")
    return ConvWithGeneralDimensions(lhs, rhs, strides, padding,
                                     CreateDefaultConvDimensionNumbers(len(strides)),
                                     feature_group_count, batch_group_count, precision_config,
                                     preferred_element_type)


def ConvWithGeneralPadding(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                           padding: Sequence[tuple[int, int]], feature_group_count: int = 1,
                           batch_group_count: int = 1,
                           precision_config: PrecisionConfig | None = None,
                           preferred_element_type=None) -> XlaOp:
    """Default-layout convolution with explicit (low, high) padding:
    ``ops.ConvWithGeneralPadding(x, k, [2, 2], [(1, 1), (1, 1)])``."""
    strides = _ints(window_strides, "window_strides", "ConvWithGeneralPadding")
    return ConvGeneral(lhs, rhs, strides, padding, CreateDefaultConvDimensionNumbers(len(strides)),
                       feature_group_count, batch_group_count, precision_config,
                       preferred_element_type)


def ConvWithGeneralDimensions(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                              padding: Padding | str,
                              dimension_numbers: ConvolutionDimensionNumbers,
                              feature_group_count: int = 1, batch_group_count: int = 1,
                              precision_config: PrecisionConfig | None = None,
                              preferred_element_type=None) -> XlaOp:
    """Convolution with explicit dimension numbers and SAME/VALID padding:
    ``ops.ConvWithGeneralDimensions(x, k, [1, 1], ops.Padding.VALID, dn)``."""
    op = "ConvWithGeneralDimensions"
    check_same_builder(op, [lhs, rhs])
    dnums = _dnums(dimension_numbers, op)
    _verify_convolution(lhs.shape, rhs.shape, dnums)
    base = [lhs.shape.dimensions[d] for d in dnums.input_spatial_dimensions]
    window = [rhs.shape.dimensions[d] for d in dnums.kernel_spatial_dimensions]
    strides = _ints(window_strides, "window_strides", op)
    try:
        pads = make_padding(base, window, strides, padding)
    except InvalidArgumentError as e:
        raise ShapeError(f"convolution: {e}") from None
    return ConvGeneral(lhs, rhs, window_strides, pads, dnums, feature_group_count,
                       batch_group_count, precision_config, preferred_element_type)


def ConvGeneral(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                padding: Sequence[tuple[int, int]], dimension_numbers: ConvolutionDimensionNumbers,
                feature_group_count: int = 1, batch_group_count: int = 1,
                precision_config: PrecisionConfig | None = None,
                preferred_element_type=None) -> XlaOp:
    """Convolution with explicit padding and dimension numbers, no dilation:
    ``ops.ConvGeneral(x, k, [1, 1], [(0, 0), (0, 0)], dn)`` with
    ``dn = ops.ConvolutionDimensionNumbers.parse("b01f_01io->b01f")``."""
    return ConvGeneralDilated(lhs, rhs, window_strides, padding, (), (), dimension_numbers,
                              feature_group_count, batch_group_count, precision_config,
                              preferred_element_type)


def ConvGeneralDilated(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                       padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
                       rhs_dilation: Sequence[int], dimension_numbers: ConvolutionDimensionNumbers,
                       feature_group_count: int = 1, batch_group_count: int = 1,
                       precision_config: PrecisionConfig | None = None,
                       preferred_element_type=None,
                       window_reversal: Sequence[bool] | None = None) -> XlaOp:
    """The general convolution: strides, (low, high) padding, lhs (base) and rhs (window)
    dilation, dimension numbers, feature/batch groups. Empty lists mean "none".

        y = ops.ConvGeneralDilated(x, k, [1, 1], [(1, 1), (1, 1)], [], [2, 2], dn)
    """
    op = "ConvGeneralDilated"
    b = check_same_builder(op, [lhs, rhs])
    dnums = _dnums(dimension_numbers, op)
    _verify_convolution(lhs.shape, rhs.shape, dnums)
    window_dims = [rhs.shape.dimensions[d] for d in dnums.kernel_spatial_dimensions]
    pads = int_pairs(padding, "padding", op)
    strides = _ints(window_strides, "window_strides", op)
    lhs_dilation = _ints(lhs_dilation, "lhs_dilation", op)
    rhs_dilation = _ints(rhs_dilation, "rhs_dilation", op)
    if window_reversal is not None:
        window_reversal = bool_list(window_reversal, "window_reversal", op)
    try:
        window = Window.from_dimensions(window_dims, strides, pads, lhs_dilation, rhs_dilation,
                                        window_reversal)
    except InvalidArgumentError as e:
        raise ShapeError(f"convolution: {e}") from None
    attrs = {
        "window": window, "dim_labels": dnums,
        "feature_group_count": feature_group_count, "batch_group_count": batch_group_count,
        "precision_config": _precision(precision_config, op),
    }
    return _emit(b, "convolution", [lhs, rhs], attrs, preferred_element_type, op)
