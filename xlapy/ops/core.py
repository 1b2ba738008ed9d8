"""Builder functions every computation needs: Parameter, and the broadcasting helpers the
elementwise functions share with the other families."""

from __future__ import annotations

from typing import Sequence

from xlapy.builder import XlaBuilder, XlaOp
from xlapy.errors import InvalidArgumentError
from xlapy.shape import Shape

__all__ = ["Parameter"]


def Parameter(builder: XlaBuilder, parameter_number: int, shape: Shape, name: str = "") -> XlaOp:
    """``ops.Parameter(b, 0, parse_shape("f32[3]"), "x")``: the computation's input number
    ``parameter_number``."""
    if not isinstance(builder, XlaBuilder):
        raise InvalidArgumentError(f"Parameter: expected an XlaBuilder, got {type(builder).__name__}")
    return builder.parameter(parameter_number, shape, name)


def check_same_builder(op_name: str, ops: Sequence[XlaOp]) -> XlaBuilder:
    """The builder all ``ops`` belong to; a clear error otherwise."""
    if not ops:
        raise InvalidArgumentError(f"{op_name}: needs at least one operand")
    for i, o in enumerate(ops):
        if not isinstance(o, XlaOp):
            raise InvalidArgumentError(f"{op_name}: operand {i} must be an XlaOp, got {type(o).__name__}")
    b = ops[0].builder
    for i, o in enumerate(ops[1:], 1):
        if o.builder is not b:
            raise InvalidArgumentError(
                f"{op_name}: operand {i} was built by builder '{o.builder.name}', not by '{b.name}'"
            )
    return b


def in_dim_broadcast(op: XlaOp, out_dims: Sequence[int], broadcast_dimensions: Sequence[int],
                     dynamic: Sequence[bool] | None = None) -> XlaOp:
    """HLO ``broadcast`` of ``op`` to ``out_dims``, operand dim i going to
    ``broadcast_dimensions[i]`` (XLA's InDimBroadcast)."""
    shape = Shape.array(op.shape.element_type, out_dims, dynamic_dimensions=dynamic)
    return op.builder.emit("broadcast", [op], {"dimensions": tuple(broadcast_dimensions)}, shape=shape)


def reshape_to(op: XlaOp, dims: Sequence[int], dynamic: Sequence[bool] | None = None) -> XlaOp:
    shape = Shape.array(op.shape.element_type, dims, dynamic_dimensions=dynamic)
    return op.builder.emit("reshape", [op], {}, shape=shape)


def add_broadcast_sequence(out: Shape, op: XlaOp) -> XlaOp:
    """Broadcast ``op`` (same rank as ``out``) along its size-1 dimensions to ``out``'s
    dimensions: a reshape dropping them, then a broadcast (XLA's AddBroadcastSequence)."""
    shape = op.shape
    keep, dims, dyn = [], [], []
    for i, (d, o) in enumerate(zip(shape.dimensions, out.dimensions)):
        if d == o:
            keep.append(i)
            dims.append(d)
            dyn.append(shape.dynamic_dimensions[i])
    reshaped = reshape_to(op, dims, dyn) if len(dims) != len(shape.dimensions) else op
    # As XLA's AddBroadcastSequence: the broadcast has the output's sizes, static.
    return in_dim_broadcast(reshaped, out.dimensions, keep)
