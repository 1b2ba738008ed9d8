"""Helpers shared by the shape rules of every family: type predicates with XLA's names,
dimension checks, and XLA's element-type promotion (HigherPrecisionElementType).
Messages follow xla/service/shape_inference.cc, prefixed with the opcode by OpCall.fail."""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes

from xlapy.opdefs.registry import OpCall
from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.shape import UNBOUNDED_SIZE

P = PrimitiveType


def tname(t: PrimitiveType) -> str:
    """PrimitiveType_Name: the enum's upper-case name, as XLA's messages print types."""
    return "OPAQUE_TYPE" if t == P.OPAQUE_TYPE else PrimitiveType(t).name


def is_signed(t) -> bool:
    """XLA's ShapeUtil::ElementIsSigned: signed integers and floating point types."""
    return dtypes.is_signed_integral(t) or dtypes.is_floating(t)


def expect_array(call: OpCall, shape: Shape, what: str) -> None:
    if not shape.is_array():
        call.fail(f"Expected array argument for {what}, but got {shape}.")


def expect_arrays(call: OpCall) -> None:
    for i, s in enumerate(call.operands):
        expect_array(call, s, f"operand {i}")


def higher_precision_type(a: PrimitiveType, b: PrimitiveType) -> PrimitiveType:
    """primitive_util::HigherPrecisionType: compares (is complex, overflow exponent,
    significand width, bit width, is signed integer) of the (component) types, in that
    order: c64 over f64, bf16 over f16, s32 over u32, u32 over s16."""
    if a == b:
        return a

    def props(t):
        c = dtypes.complex_component_type(t) if dtypes.is_complex(t) else t
        floating = dtypes.is_floating(c)
        return (dtypes.is_complex(t),
                int(ml_dtypes.finfo(dtypes.to_dtype(c)).maxexp) if floating else -1,
                dtypes.significand_bits(c) if floating else -1,
                dtypes.bit_width(c), dtypes.is_signed_integral(c))

    return b if props(a) < props(b) else a


def same_type_ignoring_fp_precision(a: Shape, b: Shape) -> bool:
    if dtypes.is_floating(a.element_type) and dtypes.is_floating(b.element_type):
        return True
    return a.element_type == b.element_type


def check_dimension_numbers(call: OpCall, dims: Sequence[int], rank: int, what: str,
                            unique: bool = True) -> None:
    """Every entry of ``dims`` in [0, rank); no repeats unless ``unique`` is False."""
    seen = set()
    for d in dims:
        if not 0 <= d < rank:
            call.fail(f"{what} {d} is out of bounds for rank {rank} "
                      f"(got {{{','.join(map(str, dims))}}}).")
        if unique and d in seen:
            call.fail(f"{what} has a repeated dimension {d} (got {{{','.join(map(str, dims))}}}).")
        seen.add(d)


def require_result(call: OpCall, what: str) -> Shape:
    """The declared result shape, for ops whose text keeps information only there."""
    if call.result is None:
        call.fail(f"the result shape must be given ({what})")
    return call.result


def make_array(element_type, dims, dynamic=None) -> Shape:
    return Shape.array(element_type, dims, dynamic_dimensions=dynamic)


def dims_text(dims) -> str:
    return "{" + ",".join(str(d) for d in dims) + "}"


def is_unbounded(shape: Shape, i: int) -> bool:
    return shape.dimensions[i] == UNBOUNDED_SIZE
