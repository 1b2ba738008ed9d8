"""Contractions: dot, ragged-dot, scaled-dot and convolution.

Shape rules follow ShapeInference::InferDotOpShape (with ValidateDotDimensionNumbers and
CheckDotDimensionConstraints), InferRaggedDotOpShape, the verifier's HandleScaledDot and
InferConvolveShape (forward, data-gradient and weight-gradient kinds, feature and batch
groups, rhs sparsity). The result element type is the declared result's when there is one
(XLA's preferred_element_type: the verifier passes the instruction's element type), else
the higher-precision operand type.
"""

from __future__ import annotations

from xlapy.hlo.attrs import AttrSpec, IntKind
from xlapy.hlo.attrs.dot import (
    DOT_DIMENSION_NUMBERS,
    OPERAND_PRECISION,
    PRECISION_CONFIG,
    RAGGED_DOT_DIMENSION_NUMBERS,
    DotDimensionNumbers,
    PrecisionConfig,
    RaggedDotDimensionNumbers,
)
from xlapy.hlo.attrs.window import (
    CONVOLUTION_KIND,
    DIM_LABELS,
    SPARSITY_CONFIG,
    WINDOW,
    ConvolutionKind,
    SparsityConfig,
    Window,
)
from xlapy.opdefs.common import expect_array, higher_precision_type
from xlapy.opdefs.reduction import infer_window_output_shape
from xlapy.opdefs.registry import OpCall, op
from xlapy.shape import PrimitiveType, Shape
from xlapy.shape.shape import UNBOUNDED_SIZE

P = PrimitiveType


def _compatible_sizes(a: int, b: int) -> bool:
    """CompatibleDimensionSizes: equal, or one of them unbounded."""
    return a == b or UNBOUNDED_SIZE in (a, b)


def result_element_type(call: OpCall, lhs: Shape, rhs: Shape) -> PrimitiveType:
    """preferred_element_type.value_or(HigherPrecisionElementType(lhs, rhs))."""
    if call.result is not None and call.result.is_array():
        return call.result.element_type
    return higher_precision_type(lhs.element_type, rhs.element_type)


def _dims_text(dims) -> str:
    return "{" + ",".join(str(d) for d in dims) + "}"


# -- dot ----------------------------------------------------------------------------------------


def validate_dot_dimension_numbers(call: OpCall, lhs: Shape, rhs: Shape,
                                   dnums: DotDimensionNumbers) -> None:
    """ValidateDotDimensionNumbers: every number in range and unique per operand."""

    def in_range(rank, *lists):
        return all(0 <= d < rank for ds in lists for d in ds)

    if not (in_range(lhs.rank, dnums.lhs_contracting_dimensions, dnums.lhs_batch_dimensions)
            and in_range(rhs.rank, dnums.rhs_contracting_dimensions, dnums.rhs_batch_dimensions)):
        call.fail(f"A dimension number is out of range in Dot: {dnums.debug_string()}. "
                  f"{lhs} {rhs}")

    def unique(*lists):
        flat = [d for ds in lists for d in ds]
        return len(flat) == len(set(flat))

    if not (unique(dnums.lhs_contracting_dimensions, dnums.lhs_batch_dimensions)
            and unique(dnums.rhs_contracting_dimensions, dnums.rhs_batch_dimensions)):
        call.fail(f"A dimension number is not unique in Dot: {dnums.debug_string()}.")


def check_dot_dimension_constraints(call: OpCall, lhs: Shape, rhs: Shape,
                                    dnums: DotDimensionNumbers) -> None:
    """CheckDotDimensionConstraints: as many contracting (and batch) dimensions on each
    side, with compatible sizes."""

    def fail(addendum):
        call.fail(f"Cannot infer shape for dot operation: {lhs} <dot> {rhs}. {addendum}")

    lc, rc = dnums.lhs_contracting_dimensions, dnums.rhs_contracting_dimensions
    if len(lc) != len(rc):
        fail("Must specify the same number of contracting dimensions for lhs and rhs.")
    for a, b in zip(lc, rc):
        if not _compatible_sizes(lhs.dimensions[a], rhs.dimensions[b]):
            fail("Contracting dimension sizes are not compatible.")
    lb, rb = dnums.lhs_batch_dimensions, dnums.rhs_batch_dimensions
    if len(lb) != len(rb):
        fail("Must the same number of batch dimensions for lhs and rhs.")
    for a, b in zip(lb, rb):
        if not _compatible_sizes(lhs.dimensions[a], rhs.dimensions[b]):
            fail("Batch dimension sizes are not compatible.")


def dot_result_dimensions(lhs: Shape, rhs: Shape, dnums: DotDimensionNumbers,
                          rhs_group_dimensions=()) -> tuple[list[int], list[bool]]:
    """GenerateDotResultDimensions: batch, then lhs free, then rhs free dimensions."""
    dims, dyn = [], []
    for d in dnums.lhs_batch_dimensions:
        dims.append(lhs.dimensions[d])
        dyn.append(lhs.dynamic_dimensions[d])
    for i in range(lhs.rank):
        if i not in dnums.lhs_contracting_dimensions and i not in dnums.lhs_batch_dimensions:
            dims.append(lhs.dimensions[i])
            dyn.append(lhs.dynamic_dimensions[i])
    for i in range(rhs.rank):
        if (i not in dnums.rhs_contracting_dimensions and i not in dnums.rhs_batch_dimensions
                and i not in rhs_group_dimensions):
            dims.append(rhs.dimensions[i])
            dyn.append(rhs.dynamic_dimensions[i])
    return dims, dyn


def infer_dot_shape(call: OpCall, lhs: Shape, rhs: Shape, dnums: DotDimensionNumbers) -> Shape:
    """ShapeInference::InferDotOpShape."""
    expect_array(call, lhs, "lhs of dot")
    expect_array(call, rhs, "rhs of dot")
    validate_dot_dimension_numbers(call, lhs, rhs, dnums)
    check_dot_dimension_constraints(call, lhs, rhs, dnums)
    dims, dyn = dot_result_dimensions(lhs, rhs, dnums)
    return Shape.array(result_element_type(call, lhs, rhs), dims, dynamic_dimensions=dyn)


_DOT_ATTRS = [
    AttrSpec("dot_dimension_numbers", DOT_DIMENSION_NUMBERS, default=DotDimensionNumbers(),
             doc="contracting and batch dimensions (absent keys: none)"),
    AttrSpec("precision_config", PRECISION_CONFIG, default=PrecisionConfig(),
             doc="operand precisions and the dot algorithm"),
]


@op("dot", attrs=_DOT_ATTRS)
def _dot(call: OpCall) -> Shape:
    """Sum of products over the contracting dimensions; result dims are batch, lhs free,
    rhs free."""
    lhs, rhs = call.operands
    dnums = call.attrs["dot_dimension_numbers"] or DotDimensionNumbers()
    return infer_dot_shape(call, lhs, rhs, dnums)


# -- ragged-dot ---------------------------------------------------------------------------------


@op("ragged-dot", attrs=[
    AttrSpec("ragged_dot_dimension_numbers", RAGGED_DOT_DIMENSION_NUMBERS,
             default=RaggedDotDimensionNumbers(),
             doc="dot dimension numbers plus lhs_ragged_dims and rhs_group_dims"),
    AttrSpec("precision_config", OPERAND_PRECISION, default=PrecisionConfig(),
             doc="lhs and rhs precisions"),
])
def _ragged_dot(call: OpCall) -> Shape:
    """ragged-dot(lhs, rhs, group_sizes): one lhs dimension is split into groups of the
    sizes in group_sizes (non-contracting, contracting or batch mode)."""
    lhs, rhs, group_sizes = call.operands
    expect_array(call, lhs, "lhs of ragged dot")
    expect_array(call, rhs, "rhs of ragged dot")
    expect_array(call, group_sizes, "group_sizes of ragged dot")
    ragged = call.attrs["ragged_dot_dimension_numbers"] or RaggedDotDimensionNumbers()
    dnums = ragged.dot_dimension_numbers

    def fail(addendum):
        call.fail(f"Cannot infer shape for ragged dot operation: {lhs} <ragged_dot> {rhs}. "
                  f"{addendum}")

    validate_dot_dimension_numbers(call, lhs, rhs, dnums)
    check_dot_dimension_constraints(call, lhs, rhs, dnums)
    if len(ragged.lhs_ragged_dimensions) != 1:
        fail("There must be exactly one ragged dimension in the lhs.")
    ragged_dim = ragged.lhs_ragged_dimensions[0]
    if not 0 <= ragged_dim < lhs.rank:
        fail(f"lhs ragged dimension {ragged_dim} is out of range [0, {lhs.rank})")
    batch, contracting = dnums.lhs_batch_dimensions, dnums.lhs_contracting_dimensions
    if ragged_dim in batch:
        mode = "batch"
        prefix = list(batch[:batch.index(ragged_dim)])
    elif ragged_dim in contracting:
        mode = "contracting"
        prefix = list(batch) + list(contracting[:contracting.index(ragged_dim)])
    else:
        mode = "non-contracting"
        free = [i for i in range(lhs.rank) if i not in contracting and i not in batch]
        prefix = list(batch) + free[:free.index(ragged_dim)]
    expected = [lhs.dimensions[d] for d in prefix]
    if group_sizes.rank != 1:
        if group_sizes.rank != len(expected) + 1:
            fail(f"expected group_sizes to have rank {len(expected) + 1}, got {group_sizes.rank}")
        if list(group_sizes.dimensions[:-1]) != expected:
            fail(f"group_sizes is expected to have shape "
                 f"[{', '.join(map(str, expected))}, {group_sizes.dimensions[-1]}], "
                 f"got [{', '.join(map(str, group_sizes.dimensions))}]")
    if group_sizes.rank == 0:
        fail("group_sizes must have rank >= 1, got a scalar")
    num_groups = group_sizes.dimensions[-1]
    for g in ragged.rhs_group_dimensions:
        if not 0 <= g < rhs.rank:
            fail(f"rhs group dimension {g} is out of range [0, {rhs.rank})")
        if g in dnums.rhs_batch_dimensions or g in dnums.rhs_contracting_dimensions:
            fail("rhs group dimension cannot be a batch or contracting dimension")
    groups = ragged.rhs_group_dimensions
    if mode in ("batch", "contracting"):
        if groups:
            fail("There must be zero group dimensions in the rhs when the ragged dimension is "
                 "batch or contracting.")
    else:
        if len(groups) != 1:
            fail("There must be exactly one group dimension in the rhs when the lhs ragged "
                 "dimension is non-contracting.")
        if not _compatible_sizes(num_groups, rhs.dimensions[groups[0]]):
            fail(f"rhs group dimension is expected to have size={num_groups}, got "
                 f"{rhs.dimensions[groups[0]]}")
    dims, dyn = [], []
    if mode == "contracting":
        dims.append(num_groups)
        dyn.append(group_sizes.dynamic_dimensions[-1])
    more_dims, more_dyn = dot_result_dimensions(lhs, rhs, dnums, groups)
    return Shape.array(result_element_type(call, lhs, rhs), dims + more_dims,
                       dynamic_dimensions=dyn + more_dyn)


# -- scaled-dot ---------------------------------------------------------------------------------


def _check_scale(call: OpCall, dnums: DotDimensionNumbers, which: str, operand: Shape,
                 scale: Shape) -> None:
    """The verifier's ScalesShapeVerifier: a BF16 all-ones-shaped scale of a BF16 operand
    is a no-op; otherwise same rank, one contracting dimension, and every operand dimension
    a multiple of the scale's."""
    expect_array(call, scale, f"{which} scale of scaled dot")
    if (scale.element_type == operand.element_type == P.BF16
            and all(d == 1 for d in scale.dimensions)
            and any(d != 1 for d in operand.dimensions)):
        return
    if scale.rank != operand.rank:
        call.fail(f"Scale operand {scale} has a different number of dimensions than "
                  f"operand {operand} ({which})")
    contracting = (dnums.lhs_contracting_dimensions if which == "lhs"
                   else dnums.rhs_contracting_dimensions)
    if len(contracting) != 1:
        call.fail(f"Contracting dimensions must have exactly one dimension ({which} has "
                  f"{_dims_text(contracting)})")
    for i, (d, s) in enumerate(zip(operand.dimensions, scale.dimensions)):
        if s == 0 or d % s:
            call.fail(f"Dimension {i} of operand {operand} should be a multiple of dimension "
                      f"{i} of scale operand {scale} ({which})")


@op("scaled-dot", attrs=_DOT_ATTRS)
def _scaled_dot(call: OpCall) -> Shape:
    """scaled-dot(lhs, rhs, lhs_scale, rhs_scale): a dot of block-scaled operands; the
    shape is the dot's of lhs and rhs."""
    lhs, rhs, lhs_scale, rhs_scale = call.operands
    dnums = call.attrs["dot_dimension_numbers"] or DotDimensionNumbers()
    expect_array(call, lhs, "lhs of dot")
    expect_array(call, rhs, "rhs of dot")
    validate_dot_dimension_numbers(call, lhs, rhs, dnums)
    _check_scale(call, dnums, "lhs", lhs, lhs_scale)
    _check_scale(call, dnums, "rhs", rhs, rhs_scale)
    if lhs_scale.is_scalar() and rhs_scale.is_scalar():
        call.fail("At least one of the scales should be not a scalar")
    return infer_dot_shape(call, lhs, rhs, dnums)


# -- convolution --------------------------------------------------------------------------------


def _mark_dynamic(call, lhs, rhs, dnums, dyn, include_rhs=True):
    """Output dimensions that are dynamic because an lhs (or rhs) dimension is."""
    for i in range(lhs.rank):
        if lhs.dynamic_dimensions[i]:
            if i == dnums.input_batch_dimension:
                dyn[dnums.output_batch_dimension] = True
            elif i != dnums.input_feature_dimension:
                for j, s in enumerate(dnums.input_spatial_dimensions):
                    if i == s:
                        dyn[dnums.output_spatial_dimensions[j]] = True
    if not include_rhs:
        return
    for i in range(rhs.rank):
        if rhs.dynamic_dimensions[i]:
            if i == dnums.kernel_output_feature_dimension:
                call.fail(f"Dynamic output feature dim on convolution kernel is not supported: "
                          f"rhs shape is {rhs} ")
            if i != dnums.kernel_input_feature_dimension:
                for j, s in enumerate(dnums.kernel_spatial_dimensions):
                    if i == s:
                        dyn[dnums.output_spatial_dimensions[j]] = True


def _window_matches_kernel(call, rhs, window, dnums, kernel_spatial):
    if list(kernel_spatial) != [d.size for d in window.dimensions]:
        call.fail(f"Window dimensions do not match RHS shape:\n\tRHS shape: {rhs}\n\t"
                  f"Window: {{{window.to_text()}}}\n\tDimension numbers: {{{dnums.to_text()}}}.")


def _conv_header(lhs, rhs, dnums):
    return f"got <conv>({lhs}, {rhs})\nDimension numbers: {{{dnums.debug_string()}}}."


def infer_convolve_shape(call: OpCall, lhs: Shape, rhs: Shape, feature_group_count: int,
                         batch_group_count: int, window: Window, dnums,
                         sparsity: SparsityConfig | None = None,
                         kind: ConvolutionKind = ConvolutionKind.UNSET) -> Shape:
    """ShapeInference::InferConvolveShape."""
    sparsity = sparsity if sparsity is not None else SparsityConfig()
    expect_array(call, lhs, "lhs of convolution")
    expect_array(call, rhs, "rhs of convolution")
    if feature_group_count <= 0:
        call.fail(f"feature_group_count must be a positive number, got {feature_group_count}")
    if batch_group_count <= 0:
        call.fail(f"batch_group_count must be a positive number, got {batch_group_count}")
    if batch_group_count > 1 and feature_group_count > 1:
        call.fail(f"both batch_group_count {batch_group_count} and feature_group_count "
                  f"{feature_group_count} cannot be greater than 1")
    n_spatial = len(dnums.input_spatial_dimensions)
    if n_spatial != len(dnums.kernel_spatial_dimensions):
        call.fail(f"Both arguments to convolution must have same number of dimensions.\n"
                  f"Numbers: {dnums.debug_string()}")
    if n_spatial != len(dnums.output_spatial_dimensions):
        call.fail(f"Both input and output of convolution must have same number of dimensions."
                  f"\nNumbers: {dnums.debug_string()}")
    if len(window.dimensions) != n_spatial:
        call.fail(f"Window must have same number of dimensions as dimension numbers.\n"
                  f"Window: {window.debug_string()}\nDimension numbers: {dnums.debug_string()}.")
    n = n_spatial + 2
    if lhs.rank != n:
        call.fail(f"The LHS argument to a convolution should have rank {n}; lhs: {lhs}.")
    if rhs.rank != n:
        call.fail(f"The RHS argument to a convolution should have rank {n}; rhs: {rhs}.")
    inputs = sorted([dnums.input_batch_dimension, dnums.input_feature_dimension,
                     *dnums.input_spatial_dimensions])
    kernels = sorted([dnums.kernel_input_feature_dimension,
                      dnums.kernel_output_feature_dimension, *dnums.kernel_spatial_dimensions])
    outputs = sorted([dnums.output_batch_dimension, dnums.output_feature_dimension,
                      *dnums.output_spatial_dimensions])
    if not all(0 <= d < n for d in inputs + kernels + outputs):
        call.fail(f"A dimension number is out of range in convolution: {dnums.debug_string()}.")
    expected = list(range(n))
    if inputs != expected:
        call.fail(f"Input dimensions of convolution must contain each dimension exactly once: "
                  f"{dnums.debug_string()}.")
    if kernels != expected:
        call.fail(f"Window dimensions of convolution must contain each dimension exactly once: "
                  f"{dnums.debug_string()}.")
    if outputs != expected:
        call.fail(f"Output dimensions of convolution must contain each dimension exactly once: "
                  f"{dnums.debug_string()}.")
    input_spatial = [lhs.dimensions[d] for d in dnums.input_spatial_dimensions]
    input_features = lhs.dimensions[dnums.input_feature_dimension]
    input_batch = lhs.dimensions[dnums.input_batch_dimension]
    kernel_spatial = [rhs.dimensions[d] for d in dnums.kernel_spatial_dimensions]
    kernel_input_features = rhs.dimensions[dnums.kernel_input_feature_dimension]
    if sparsity.rhs is not None:
        if sparsity.rhs.num_non_zero != 1:
            call.fail("Only 1:N sparsity is currently supported.")
        kernel_input_features *= sparsity.rhs.block_size
    kernel_output_features = rhs.dimensions[dnums.kernel_output_feature_dimension]
    if kernel_output_features % batch_group_count != 0:
        call.fail(f"Expected output feature dimension size (value {kernel_output_features}) to "
                  f"be a multiple of batch group count {batch_group_count}; "
                  + _conv_header(lhs, rhs, dnums))
    if kernel_output_features % feature_group_count > 0:
        call.fail(f"Expected output feature dimension (value {kernel_output_features}) to be "
                  f"divisible by feature_group_count (value {feature_group_count}); "
                  + _conv_header(lhs, rhs, dnums))
    if input_batch % batch_group_count != 0:
        call.fail(f"Expected input batch dimension (value {input_batch}) to be divisible by "
                  f"batch_group_count (value {batch_group_count}); "
                  + _conv_header(lhs, rhs, dnums))
    et = result_element_type(call, lhs, rhs)
    dims = [0] * n
    dyn = [False] * n
    if kind is ConvolutionKind.WGRAD:
        rhs_batch = rhs.dimensions[dnums.output_batch_dimension]
        if input_batch != rhs_batch:
            call.fail(f"Expected LHS batch dimension (value {input_batch}) to match RHS batch "
                      f"dimension (value {rhs_batch}) for WGRAD; " + _conv_header(lhs, rhs, dnums))
        dims[dnums.kernel_output_feature_dimension] = rhs.dimensions[dnums.output_feature_dimension]
        dims[dnums.kernel_input_feature_dimension] = input_features // feature_group_count
        for i, d in enumerate(dnums.kernel_spatial_dimensions):
            dims[d] = window.dimensions[i].size
        _mark_dynamic(call, lhs, rhs, dnums, dyn, include_rhs=False)
        return Shape.array(et, dims, dynamic_dimensions=dyn)
    matching = kernel_output_features if kind is ConvolutionKind.DGRAD else kernel_input_features
    if (input_features % feature_group_count != 0
            or input_features // feature_group_count != matching):
        what = ("RHS output feature dimension" if kind is ConvolutionKind.DGRAD
                else "RHS feature dimension")
        call.fail(f"Expected LHS feature dimension (value {input_features}) to be a multiple of "
                  f"feature_group_count (value {feature_group_count}), and LHS feature "
                  f"dimension / feature_group_count = {what} (value {matching}); "
                  + _conv_header(lhs, rhs, dnums))
    _window_matches_kernel(call, rhs, window, dnums, kernel_spatial)
    dims[dnums.output_batch_dimension] = (input_batch if input_batch == UNBOUNDED_SIZE
                                          else input_batch // batch_group_count)
    if kind is ConvolutionKind.DGRAD:
        dims[dnums.output_feature_dimension] = kernel_input_features
        for i, size in enumerate(input_spatial):
            w = window.dimensions[i]
            if size == UNBOUNDED_SIZE:
                out = size
            else:
                dilated_lhs = 1 + (size - 1) * w.base_dilation
                dilated_kernel = 1 + (w.size - 1) * w.window_dilation
                out = (dilated_lhs - 1) * w.stride + dilated_kernel - w.padding_low - w.padding_high
            dims[dnums.output_spatial_dimensions[i]] = out
    else:
        dims[dnums.output_feature_dimension] = kernel_output_features
        base = Shape.array(lhs.element_type, input_spatial,
                           dynamic_dimensions=[s == UNBOUNDED_SIZE for s in input_spatial])
        spatial_out = infer_window_output_shape(call, base, window, lhs.element_type)
        for i, d in enumerate(dnums.output_spatial_dimensions):
            dims[d] = spatial_out.dimensions[i]
    _mark_dynamic(call, lhs, rhs, dnums, dyn)
    for i, d in enumerate(dims):
        if d == UNBOUNDED_SIZE:
            dyn[i] = True
        elif d < 0:
            call.fail(f"convolution output dimension {i} would have negative size {d}")
    return Shape.array(et, dims, dynamic_dimensions=dyn)


@op("convolution", min_operands=2, attrs=[
    AttrSpec("window", WINDOW, default=Window(), doc="window over the spatial dimensions"),
    AttrSpec("dim_labels", DIM_LABELS, doc="which dimension is batch/feature/spatial"),
    AttrSpec("feature_group_count", IntKind(), default=1),
    AttrSpec("batch_group_count", IntKind(), default=1),
    AttrSpec("convolution_kind", CONVOLUTION_KIND, default=ConvolutionKind.UNSET,
             doc="fprop, dgrad or wgrad: which shape rule applies"),
    AttrSpec("precision_config", PRECISION_CONFIG, default=PrecisionConfig()),
    AttrSpec("sparsity_config", SPARSITY_CONFIG, default=SparsityConfig(),
             doc="N:M sparsity of lhs/rhs; idx names the metadata operand"),
])
def _convolution(call: OpCall) -> Shape:
    """convolution(lhs, rhs[, sparsity metadata...]): a window slides over lhs's spatial
    dimensions; output batch = lhs batch / batch_group_count, feature = kernel output
    features, spatial = valid window positions."""
    lhs, rhs = call.operands[:2]
    sparsity = call.attrs["sparsity_config"]
    for side, cfg in (("lhs", sparsity.lhs), ("rhs", sparsity.rhs)):
        if cfg is None:
            continue
        if not 2 <= cfg.idx < len(call.operands):
            call.fail(f"Sparsity idx {cfg.idx} out of bounds for {side}")
        if not call.operands[cfg.idx].is_array():
            call.fail(f"Expected array argument for {side} sparsity at index {cfg.idx}, but got "
                      f"{call.operands[cfg.idx]}")
    if (sparsity.lhs is not None and sparsity.rhs is not None
            and sparsity.lhs.idx == sparsity.rhs.idx):
        call.fail(f"LHS and RHS sparsity idx cannot be the same ({sparsity.lhs.idx})")
    used = {c.idx for c in (sparsity.lhs, sparsity.rhs) if c is not None}
    extra = [i for i in range(2, len(call.operands)) if i not in used]
    if extra:
        call.fail(f"operand {extra[0]} is neither lhs, rhs nor a sparsity metadata operand "
                  f"(sparsity_config names {sorted(used) or 'none'})")
    return infer_convolve_shape(call, lhs, rhs, call.attrs["feature_group_count"],
                                call.attrs["batch_group_count"], call.attrs["window"],
                                call.attrs["dim_labels"], sparsity, call.attrs["convolution_kind"])


__all__ = ["check_dot_dimension_constraints", "dot_result_dimensions", "infer_convolve_shape",
           "infer_dot_shape", "result_element_type", "validate_dot_dimension_numbers"]
