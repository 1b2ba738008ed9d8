"""Miscellaneous ops: parameter, constant, custom-call, tokens (after-all, add-dependency),
opt-barrier and the asynchronous copy pair copy-start / copy-done; plus the shape-index
helpers (sub-shapes, prefixes, output-to-operand aliasing checks) that custom-call, fusion
and the async ops share.

Rules follow the HLO verifier where XLA has no Infer* function (HandleCustomCall,
HandleAfterAll, HandleAddDependency, HandleOptimizationBarrier, HandleCopyStart/Done,
HandleConstant) and the custom-call checks of XLA's builder and parser. Messages are XLA's.
Imports shape, hlo.attrs and the registry only.
"""

from __future__ import annotations

from typing import Sequence

from xlapy.hlo.attrs import AttrSpec, BoolKind, BoolListKind, ComputationListKind, IntKind, StringKind
from xlapy.hlo.attrs.custom_call import CUSTOM_CALL_WINDOW, OUTPUT_TO_OPERAND_ALIASING
from xlapy.hlo.attrs.custom_call import PADDING_TYPE, SHAPE_LIST
from xlapy.hlo.attrs.custom_call import PaddingType, shape_index_text as _index_text
from xlapy.hlo.attrs.enums import (
    CUSTOM_CALL_API_VERSION,
    CUSTOM_CALL_SCHEDULE,
    CustomCallApiVersion,
    CustomCallSchedule,
)
from xlapy.hlo.attrs.dot import OPERAND_PRECISION, PrecisionConfig
from xlapy.hlo.attrs.literal import CONSTANT_LITERAL, SHAPED_LITERAL
from xlapy.hlo.attrs.window import DIM_LABELS
from xlapy.opdefs.common import require_result
from xlapy.opdefs.registry import OpCall, op
from xlapy.shape import PrimitiveType, Shape

P = PrimitiveType


@op("parameter", attrs=[
    AttrSpec("parameter_number", IntKind(minimum=0), in_parens=True),
    AttrSpec("parameter_replication", BoolListKind(), default=None,
             doc="per leaf buffer: whether it is replicated across replicas"),
])
def _parameter(call: OpCall) -> Shape:
    """Input number ``parameter_number`` of the computation; its shape is the declared one.
    ``parameter_replication`` has one flag per leaf buffer of that shape."""
    shape = require_result(call, "a parameter's shape is its declared shape")
    replication = call.parameter_replication
    if replication is not None and len(replication) != len(shape.leaves()):
        call.fail(f"parameter has {len(shape.leaves())} leaf buffers, but "
                  f"parameter_replication has {len(replication)} elements.", parser_check=True)
    return shape


@op("constant", attrs=[AttrSpec("literal", CONSTANT_LITERAL, in_parens=True,
                                doc="the value: constant({1, 2}), constant(42)")])
def _constant(call: OpCall) -> Shape:
    """A constant value; its shape is the literal's."""
    return call.literal.shape


# -- shape indices --------------------------------------------------------------------------


def subshape_or_none(shape: Shape, index: Sequence[int]) -> Shape | None:
    """The sub-shape at a ShapeIndex, or None when the index is not valid
    (ShapeUtil::IndexIsValid)."""
    for i in index:
        if not shape.is_tuple() or not 0 <= i < len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


def is_shape_prefix(prefix: Shape, shape: Shape) -> bool:
    """ShapeUtil::IsPrefix with Compatible as equality: ``prefix`` equals ``shape``, or is
    the empty tuple, or is a tuple whose elements are prefixes of ``shape``'s first ones.
    (Pairs still to check are kept on a stack: nesting depth needs no recursion.)"""
    pairs = [(prefix, shape)]
    while pairs:
        p, s = pairs.pop()
        if p.compatible(s) and p.is_tuple() == s.is_tuple():
            continue
        if p.is_tuple() and not p.tuple_shapes:
            continue
        if p.is_tuple() and s.is_tuple() and len(p.tuple_shapes) <= len(s.tuple_shapes):
            pairs.extend(zip(p.tuple_shapes, s.tuple_shapes))
            continue
        return False
    return True


def check_output_operand_aliasing(call: OpCall, aliasing, operands: Sequence[Shape],
                                  result: Shape, ignore_buffer: bool = False) -> None:
    """Each ``output_index: (operand, operand_index)`` names a valid operand, valid shape
    indices, and sub-shapes equal up to layout and dynamic sizes (as the verifier's
    HandleCustomCall / HandleFusion require; ``ignore_buffer``: a buffer aliases its array,
    as for the Pin and Unpin custom calls)."""
    for output_index, (operand, operand_index) in aliasing:
        if not operand < len(operands):
            call.fail(f"Invalid aliasing operand index: {operand} (the instruction has "
                      f"{len(operands)} operands).")
        operand_sub = subshape_or_none(operands[operand], operand_index)
        if operand_sub is None:
            call.fail(f"Invalid aliasing operand shape index: {_index_text(operand_index)} "
                      f"in {operands[operand]}.")
        output_sub = subshape_or_none(result, output_index)
        if output_sub is None:
            call.fail(f"Invalid aliasing output shape index: {_index_text(output_index)} "
                      f"in {result}.")
        if not output_sub.equal(operand_sub, ignore_layout=True, ignore_dynamic_dimension=True,
                                ignore_buffer=ignore_buffer):
            call.fail(f"Different aliasing shapes: {operand_sub} vs {output_sub}")


# -- custom-call ----------------------------------------------------------------------------


@op("custom-call", attrs=[
    AttrSpec("window", CUSTOM_CALL_WINDOW, default=None, doc="a window: window={size=2x2}"),
    AttrSpec("dim_labels", DIM_LABELS, default=None,
             doc="convolution dimension numbers: dim_labels=b01f_01io->b01f"),
    AttrSpec("feature_group_count", IntKind(minimum=1), default=1),
    AttrSpec("batch_group_count", IntKind(minimum=1), default=1),
    AttrSpec("precision_config", OPERAND_PRECISION, default=PrecisionConfig(),
             doc="operand_precision={high,default} (and algorithm=), as XLA prints them"),
    AttrSpec("padding_type", PADDING_TYPE, default=PaddingType.PADDING_INVALID),
    AttrSpec("custom_call_target", StringKind()),
    AttrSpec("operand_layout_constraints", SHAPE_LIST, default=None,
             doc="the layout each operand must have; the result must then have a layout"),
    AttrSpec("custom_call_has_side_effect", BoolKind(), default=False),
    AttrSpec("literal", SHAPED_LITERAL, default=None),
    AttrSpec("output_to_operand_aliasing", OUTPUT_TO_OPERAND_ALIASING, default=()),
    AttrSpec("schedule", CUSTOM_CALL_SCHEDULE, default=CustomCallSchedule.SCHEDULE_NONE),
    AttrSpec("api_version", CUSTOM_CALL_API_VERSION,
             default=CustomCallApiVersion.API_VERSION_ORIGINAL),
    AttrSpec("called_computations", ComputationListKind(), default=()),
])
def _custom_call(call: OpCall) -> Shape:
    """custom-call(operands...): calls ``custom_call_target``; the result shape is the
    declared one. backend_config (the opaque string) is a generic instruction field."""
    result = require_result(call, "a custom-call's shape is its declared shape")
    if call.api_version == CustomCallApiVersion.API_VERSION_UNSPECIFIED:
        call.fail("Invalid API version: API_VERSION_UNSPECIFIED", parser_check=True)
    constraints = call.operand_layout_constraints
    if constraints is not None:
        if not result.has_layout():
            call.fail("Layout must be set on layout-constrained custom call",
                      parser_check=True)
        if len(constraints) != len(call.operands):
            call.fail(f"Expected {len(call.operands)} operand layout constraints, "
                      f"{len(constraints)} given", parser_check=True)
        for i, (constraint, operand) in enumerate(zip(constraints, call.operands)):
            if not constraint.has_layout():
                call.fail(f"Operand layout constraint shape {constraint} for operand {i} does "
                          f"not have a layout", parser_check=True)
            if not constraint.compatible(operand) or constraint.is_tuple() != operand.is_tuple():
                call.fail(f"Operand layout constraint shape {constraint} for operand {i} is "
                          f"not compatible with operand shape {operand}", parser_check=True)
    check_output_operand_aliasing(call, call.output_to_operand_aliasing, call.operands, result,
                                  ignore_buffer=call.custom_call_target in ("Pin", "Unpin"))
    return result


# -- tokens, barriers, async copies ---------------------------------------------------------


@op("after-all")
def _after_all(call: OpCall) -> Shape:
    """after-all(operands...): a token ordered after every operand (no operands: a fresh
    token). XLA's builder takes only tokens; HLO accepts any operand (hlo_parser_test has
    ``after-all(f32[] p0, token0)``), so only the builder's AfterAll checks."""
    return Shape.token()


@op("add-dependency")
def _add_dependency(call: OpCall) -> Shape:
    """add-dependency(value, token): the value, ordered after the token."""
    value, token = call.operands
    if not token.is_token():
        call.fail(f"Expected operand 1 to be token-shaped, actual shape is {token}")
    return value


@op("opt-barrier")
def _opt_barrier(call: OpCall) -> Shape:
    """opt-barrier(operand): the operand (usually a tuple); no optimisation crosses it."""
    return call.operands[0]


@op("copy-start", attrs=[AttrSpec("cross_program_prefetch_index", IntKind(), default=None)])
def _copy_start(call: OpCall) -> Shape:
    """copy-start(operand): starts an asynchronous copy; (destination, source, u32[]
    context)."""
    (operand,) = call.operands
    return Shape.tuple([operand, operand, Shape.scalar(P.U32)])


@op("copy-done")
def _copy_done(call: OpCall) -> Shape:
    """copy-done(copy-start): the copied value (element 0 of copy-start's tuple)."""
    (started,) = call.operands
    if not started.is_tuple() or len(started.tuple_shapes) < 2:
        call.fail(f"the operand must be the (destination, source, context) tuple of a "
                  f"copy-start, got {started}")
    dest, src = started.tuple_shapes[0], started.tuple_shapes[1]
    if not dest.compatible(src) or dest.is_tuple() != src.is_tuple():
        call.fail(f"Source and destination buffers in CopyDone arguments need to be the same "
                  f"shape found {dest} and {src}")
    return dest
