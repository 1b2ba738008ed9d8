"""Builder functions that call computations: Map, Call, CompositeCall, While and both
forms of Conditional, with XLA's names and argument order. As XLA's builder does, Map
broadcasts scalar operands to the common shape, and Conditional picks the HLO form by the
branch index type (pred: true/false_computation, s32: branch_computations)."""

from __future__ import annotations

from typing import Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import check_sequence
from xlapy.opdefs.control_flow import infer_conditional_shape, infer_map_shape
from xlapy.opdefs.registry import OpCall, get_opdef
from xlapy.ops.builder import XlaBuilder, XlaComputation, XlaOp, computation_of
from xlapy.ops.core import (
    add_broadcast_sequence,
    builder_arg,
    check_same_builder,
    in_dim_broadcast,
    int_arg,
    int_list,
    op_list,
    string_arg,
)
from xlapy.shape import PrimitiveType

__all__ = ["Map", "Call", "CompositeCall", "While", "Conditional"]


_check_builder = builder_arg


def _own(builder: XlaBuilder, op_name: str, operands) -> list[XlaOp]:
    """``operands`` (a list of XlaOps), all built by ``builder``."""
    operands = op_list(operands, "operands", op_name)
    if operands:
        b = check_same_builder(op_name, operands)
        if b is not builder:
            raise InvalidArgumentError(f"{op_name}: the operands were built by builder "
                                       f"'{b.name}', not by '{builder.name}'")
    return operands


def Map(builder: XlaBuilder, operands: Sequence[XlaOp], computation: XlaComputation,
        dimensions: Sequence[int], static_operands: Sequence[XlaOp] = ()) -> XlaOp:
    """``computation`` (N scalars -> scalar) applied elementwise; scalar operands are
    broadcast. ``ops.Map(b, [x, y], add_f32, [0])`` on two f32[4] is their sum."""
    _check_builder(builder, "Map")
    operands = _own(builder, "Map", operands)
    if static_operands:
        raise InvalidArgumentError("Map: static_operands is not supported in Map")
    comp = computation_of(computation, "Map")
    dimensions = int_list(dimensions, "dimensions", "Map")
    call = OpCall("map", tuple(o.shape for o in operands),
                  get_opdef("map").check_attrs({"dimensions": dimensions, "to_apply": comp}))
    out = infer_map_shape(call, call.operands, comp.program_shape(), dimensions)
    widened = []
    for o in operands:
        if o.shape.rank != out.rank:
            o = in_dim_broadcast(o, out.dimensions, (), out.dynamic_dimensions)
        if o.shape.dimensions != out.dimensions:
            o = add_broadcast_sequence(out, o)
        widened.append(o)
    return builder.emit("map", widened, {"dimensions": dimensions, "to_apply": comp},
                        op_name="Map")


def Call(builder: XlaBuilder, computation: XlaComputation, operands: Sequence[XlaOp]) -> XlaOp:
    """``computation`` applied to ``operands``: ``ops.Call(b, f, [x, y])``."""
    _check_builder(builder, "Call")
    operands = _own(builder, "Call", operands)
    return builder.emit("call", operands, {"to_apply": computation_of(computation, "Call")},
                        op_name="Call")


def CompositeCall(builder: XlaBuilder, computation: XlaComputation, operands: Sequence[XlaOp],
                  name: str, attributes: str | None = None, version: int | None = None) -> XlaOp:
    """A call marked as the composite ``name`` (frontend attributes composite.name,
    composite.attributes (default "{}") and composite.version (default "0")):
    ``ops.CompositeCall(b, f, [x], "foo.bar")``."""
    _check_builder(builder, "CompositeCall")
    operands = _own(builder, "CompositeCall", operands)
    if not string_arg(name, "name", "CompositeCall"):
        raise InvalidArgumentError("CompositeCall: name must be a non-empty string")
    if version is not None:
        version = int_arg(version, "version", "CompositeCall", minimum=0)
    if attributes is not None:
        attributes = string_arg(attributes, "attributes", "CompositeCall")
    frontend = {
        "composite.name": name,
        "composite.attributes": "{}" if attributes is None else attributes,
        "composite.version": "0" if version is None else str(version),
    }
    return builder.emit("call", operands, {"to_apply": computation_of(computation, "CompositeCall"),
                                           "is_composite": True},
                        op_name="CompositeCall", frontend_attributes=frontend)


def While(condition: XlaComputation, body: XlaComputation, init: XlaOp) -> XlaOp:
    """Runs ``body`` (T -> T) while ``condition`` (T -> pred[]) holds, from ``init``:
    ``ops.While(cond, body, ops.Tuple(b, [i0, acc0]))``."""
    b = check_same_builder("While", [init])
    return b.emit("while", [init], {"condition": computation_of(condition, "While"),
                                    "body": computation_of(body, "While")}, op_name="While")


def Conditional(*args, **kwargs) -> XlaOp:
    """Either ``Conditional(predicate, true_operand, true_computation, false_operand,
    false_computation)`` (a pred[] predicate) or ``Conditional(branch_index,
    branch_computations, branch_operands)`` (an s32[] index; out of range runs the last
    branch). Each computation takes its operand; all return one shape:
    ``ops.Conditional(p, x, negate, x, identity)`` or
    ``ops.Conditional(i, [negate, identity, floor], [x, x, x])``."""
    names5 = ("predicate", "true_operand", "true_computation", "false_operand",
              "false_computation")
    names3 = ("branch_index", "branch_computations", "branch_operands")
    if len(args) + len(kwargs) == 5:
        bound = dict(zip(names5, args), **kwargs)
        if set(bound) != set(names5):
            raise InvalidArgumentError(f"Conditional: expected arguments {', '.join(names5)}")
        pred = bound["predicate"]
        check_same_builder("Conditional", [pred])
        s = pred.shape
        if not (s.is_array() and s.is_scalar() and s.element_type == PrimitiveType.PRED):
            raise InvalidArgumentError(f"Conditional: Argument to predicated-Conditional is not "
                                       f"a scalar of PRED type ({s}).")
        return _conditional(pred, [bound["true_computation"], bound["false_computation"]],
                            [bound["true_operand"], bound["false_operand"]])
    if len(args) + len(kwargs) == 3:
        bound = dict(zip(names3, args), **kwargs)
        if set(bound) != set(names3):
            raise InvalidArgumentError(f"Conditional: expected arguments {', '.join(names3)}")
        computations = check_sequence(bound["branch_computations"],
                                      "Conditional: branch_computations", "a list of computations")
        return _conditional(bound["branch_index"], list(computations),
                            op_list(bound["branch_operands"], "branch_operands", "Conditional"))
    raise InvalidArgumentError(
        "Conditional: expected (predicate, true_operand, true_computation, false_operand, "
        "false_computation) or (branch_index, branch_computations, branch_operands)")


def _conditional(index: XlaOp, computations: list, operands: list) -> XlaOp:
    """XLA's ConditionalImpl: infer the shape, then emit the form the index type calls for."""
    b = check_same_builder("Conditional", [index] + operands)
    comps = [computation_of(c, "Conditional") for c in computations]
    call = OpCall("conditional", (index.shape, *(o.shape for o in operands)),
                  get_opdef("conditional").check_attrs({}))
    infer_conditional_shape(call, index.shape, [c.program_shape() for c in comps],
                            [o.shape for o in operands])
    if index.shape.element_type == PrimitiveType.PRED:
        attrs = {"true_computation": comps[0], "false_computation": comps[1]}
    else:
        attrs = {"branch_computations": tuple(comps)}
    return b.emit("conditional", [index] + operands, attrs, op_name="Conditional")
