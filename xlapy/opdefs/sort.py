"""Sort and top-k: attribute schemas and shape rules.

sort follows ShapeInference::InferVariadicOpShape(kSort) plus the comparator checks of
ShapeVerifier::HandleSort (a PRED[] comparator taking 2N scalars of the operands' element
types; the sort dimension within the rank). topk follows InferTopKShape. Messages are
XLA's. Imports shape, hlo.attrs and the registry only.
"""

from __future__ import annotations

from xlapy.hlo.attrs import AttrSpec, BoolKind, ComputationKind, IntKind, IntListKind
from xlapy.opdefs.common import expect_array
from xlapy.opdefs.registry import CALLS_COMPUTATIONS, OpCall, op
from xlapy.shape import PrimitiveType, Shape

P = PrimitiveType


def infer_sort_shape(call: OpCall, operands) -> Shape:
    """InferVariadicOpShape(kSort): one operand gives its shape; several (same dimensions,
    any element types) give the tuple of their shapes."""
    if not operands:
        call.fail("Expected at least 1 operand for sort instruction")
    for i, s in enumerate(operands):
        expect_array(call, s, f"operand {i} of sort")
    if len(operands) == 1:
        return operands[0]
    keys = operands[0]
    for i, values in enumerate(operands[1:], 1):
        if keys.dimensions != values.dimensions:
            call.fail(f"Sort keys and values dimensions must match. Keys shape is: {keys}\n, "
                      f"Values shape (operand index {i}) is: {values}")
    return Shape.tuple(operands)


def check_comparator(call: OpCall, comparator, operands) -> None:
    """The comparator returns PRED[] and takes two scalars per operand (the element type
    of operand k at parameters 2k and 2k+1, floating point precision aside)."""
    ps = comparator.program_shape()
    if not ps.result.compatible(Shape.scalar(P.PRED)):
        call.fail(f"The Sort compare computation shape does not lead to a scalar predicate "
                  f"shape: {ps.result}")
    if len(ps.parameters) != 2 * len(operands):
        call.fail(f"Expected computation {comparator.name} called from sort to have "
                  f"{2 * len(operands)} parameters, has {len(ps.parameters)}")
    for i, param in enumerate(ps.parameters):
        expected = Shape.scalar(operands[i // 2].element_type)
        if not expected.compatible_ignoring_fp_precision(param):
            call.fail(f"Expected the {i}-th parameter of the compare computation of sort to "
                      f"have shape {expected}, but got {param}")


@op("sort", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("dimensions", IntListKind(), doc="exactly one: the sort dimension"),
    AttrSpec("is_stable", BoolKind(), default=False),
    AttrSpec("to_apply", ComputationKind(), doc="comparator: 2N scalars -> pred[]"),
])
def _sort(call: OpCall) -> Shape:
    """sort(operands...): the operands sorted together along one dimension by the
    comparator; one array, or a tuple for several operands."""
    result = infer_sort_shape(call, call.operands)
    dims = call.dimensions
    if len(dims) != 1:
        call.fail(f"sort takes exactly one dimension, got {{{','.join(map(str, dims))}}}")
    rank = call.operands[0].rank
    if dims[0] >= rank:
        call.fail(f"Expected the sort_dimension {dims[0]} of sort to be smaller than the rank "
                  f"{rank} of the operand(s).")
    if dims[0] < 0:
        call.fail(f"the sort dimension must be >= 0, got {dims[0]}")
    check_comparator(call, call.to_apply, call.operands)
    return result


def infer_topk_shape(call: OpCall, operand: Shape, k: int) -> Shape:
    """InferTopKShape: (values, s32 indices) with the last dimension replaced by k."""
    expect_array(call, operand, "operand of top-k operation")
    if operand.rank == 0:
        call.fail(f"the operand must have at least one dimension, got {operand}")
    last = operand.rank - 1
    if not operand.dimensions[last] >= k:
        call.fail(f"k={k} is larger than the last dimension of size="
                  f"{operand.dimensions[last]}")
    dims = operand.dimensions[:last] + (k,)
    dyn = operand.dynamic_dimensions[:last] + (False,)
    values = Shape.array(operand.element_type, dims, dynamic_dimensions=dyn)
    return Shape.tuple([values, values.with_element_type(P.S32)])


@op("topk", attrs=[
    AttrSpec("k", IntKind(minimum=0)),
    AttrSpec("largest", BoolKind(), default=None,
             doc="largest (true) or smallest values; XLA always prints it, absent means true"),
    AttrSpec("is_stable", BoolKind(), default=None,
             doc="keep equal elements in order; XLA always prints it, absent means true"),
])
def _topk(call: OpCall) -> Shape:
    """topk(operand): the k largest (or smallest) values along the last dimension and
    their s32 indices, as a tuple."""
    (operand,) = call.operands
    return infer_topk_shape(call, operand, call.k)
