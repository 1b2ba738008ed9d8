"""Builder functions for constants, custom calls, tokens and the optimization barrier, with
XLA's names and argument order: ConstantLiteral (and the Constant / ConstantR0 /
ConstantR1 conveniences over numpy values), CustomCall, CustomCallWithComputation,
CustomCallWithLayout, OptimizationBarrier, AfterAll, CreateToken."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import check_sequence
from xlapy.hlo.attrs.enums import CustomCallApiVersion, CustomCallSchedule
from xlapy.hlo.attrs.literal import as_literal
from xlapy.ops.builder import XlaBuilder, XlaComputation, XlaOp, computation_of
from xlapy.ops.core import (
    builder_arg,
    check_same_builder,
    element_type_arg,
    in_dim_broadcast,
    int_arg,
    op_list,
    shape_arg,
    string_arg,
)
from xlapy.shape import Shape
from xlapy.shape.literal import Literal

__all__ = ["ConstantLiteral", "Constant", "ConstantR0", "ConstantR1", "CustomCall",
           "CustomCallWithComputation", "CustomCallWithLayout", "OptimizationBarrier",
           "AfterAll", "CreateToken"]


_check_builder = builder_arg


def _array(value, what: str, op_name: str) -> np.ndarray:
    """``np.asarray(value)``, or an error naming the argument (ragged lists...)."""
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(f"{op_name}: {what} is not an array: {e}") from None


def _all_first(lit: Literal) -> bool:
    """XLA's IsAllFirst (bit-exact): more than one element, all equal to the first."""
    if not lit.shape.is_array() or lit.shape.is_dynamic():
        return False
    arr = lit.array
    if arr.size <= 1:
        return False
    flat = np.ascontiguousarray(arr).reshape(-1)
    bits = flat.view(np.uint8).reshape(flat.size, -1)
    return bool((bits == bits[0]).all())


def ConstantLiteral(builder: XlaBuilder, literal) -> XlaOp:
    """A constant holding ``literal`` (a Literal, numpy array or Python scalar). As XLA's
    builder does, an array whose elements are all equal becomes a scalar constant and a
    broadcast: ``ops.ConstantLiteral(b, Literal.from_array(np.ones(4, np.float32)))``."""
    _check_builder(builder, "ConstantLiteral")
    lit = as_literal(literal, "ConstantLiteral: literal")
    if _all_first(lit):
        t = lit.shape.element_type
        first = Literal.from_array(lit.array.reshape(-1)[:1].reshape(()), Shape.scalar(t))
        scalar = builder.emit("constant", [], {"literal": first}, op_name="ConstantLiteral")
        return in_dim_broadcast(scalar, lit.shape.dimensions, ())
    return builder.emit("constant", [], {"literal": lit}, op_name="ConstantLiteral")


def Constant(builder: XlaBuilder, value) -> XlaOp:
    """A constant from a Literal, numpy array or Python scalar; the element type comes from
    the dtype (Python int: s64, float: f64, bool: pred): ``ops.Constant(b, np.float32(2))``."""
    return ConstantLiteral(builder, value)


def ConstantR0(builder: XlaBuilder, value, element_type=None) -> XlaOp:
    """A scalar constant: ``ops.ConstantR0(b, np.float32(1.5))`` or
    ``ops.ConstantR0(b, 3, PrimitiveType.S32)``."""
    _check_builder(builder, "ConstantR0")
    if element_type is not None:
        t = element_type_arg(element_type, "element_type", "ConstantR0")
        return ConstantLiteral(builder, Literal.scalar(value, t))
    arr = _array(value, "value", "ConstantR0")
    if arr.ndim != 0:
        raise InvalidArgumentError(f"ConstantR0: expected a scalar, got shape {arr.shape}")
    return ConstantLiteral(builder, Literal.from_array(arr))


def ConstantR1(builder: XlaBuilder, values, value=None, element_type=None) -> XlaOp:
    """A rank-1 constant: ``ops.ConstantR1(b, np.arange(3, dtype=np.int32))``, or XLA's
    ``ConstantR1(b, length, value)``: ``ops.ConstantR1(b, 4, np.float32(0))``."""
    _check_builder(builder, "ConstantR1")
    if value is not None:
        length = int_arg(values, "length", "ConstantR1", minimum=0)
        fill = _array(value, "value", "ConstantR1")
        if fill.ndim != 0:
            raise InvalidArgumentError(f"ConstantR1: value must be a scalar, got shape "
                                       f"{fill.shape}")
        try:
            arr = np.full(length, fill, dtype=fill.dtype)
        except (ValueError, MemoryError):
            raise InvalidArgumentError(
                f"ConstantR1: cannot allocate {length} elements of {fill.dtype} "
                f"({length * fill.dtype.itemsize} bytes)") from None
    else:
        arr = _array(values, "values", "ConstantR1")
    if arr.ndim != 1:
        raise InvalidArgumentError(f"ConstantR1: expected a rank-1 array, got shape {arr.shape}")
    if element_type is not None:
        t = element_type_arg(element_type, "element_type", "ConstantR1")
        return ConstantLiteral(builder, Literal.from_array(arr, Shape.array(t, arr.shape)))
    return ConstantLiteral(builder, Literal.from_array(arr))


def _custom_call(op_name: str, builder: XlaBuilder, call_target_name: str,
                 operands: Sequence[XlaOp], shape: Shape, *, computation=None,
                 operand_shapes_with_layout=None, opaque: str = "",
                 has_side_effect: bool = False, output_operand_aliasing=(), literal=None,
                 schedule=CustomCallSchedule.SCHEDULE_NONE,
                 api_version=CustomCallApiVersion.API_VERSION_ORIGINAL) -> XlaOp:
    """XLA's XlaBuilder::CustomCall and CustomCallInternal."""
    _check_builder(builder, op_name)
    operands = op_list(operands, "operands", op_name)
    if operands:
        b = check_same_builder(op_name, operands)
        if b is not builder:
            raise InvalidArgumentError(f"{op_name}: the operands were built by builder "
                                       f"'{b.name}', not by '{builder.name}'")
    string_arg(call_target_name, "call_target_name", op_name)
    string_arg(opaque, "opaque", op_name)
    if call_target_name.startswith("$"):
        raise InvalidArgumentError(
            f'{op_name}: Invalid custom_call_target "{call_target_name}": Call targets that '
            f"start with '$' are reserved for internal use.")
    shape_arg(shape, "shape", op_name)
    if operand_shapes_with_layout is not None:
        operand_shapes_with_layout = check_sequence(
            operand_shapes_with_layout, f"{op_name}: operand_shapes_with_layout",
            "a list of Shapes")
        if not shape.has_layout():
            raise InvalidArgumentError(f"{op_name}: Result shape must have layout for custom "
                                       f"call with constrained layout.")
        if len(operands) != len(operand_shapes_with_layout):
            raise InvalidArgumentError(
                f"{op_name}: Must specify a shape with layout for each operand for custom "
                f"call with constrained layout; given {len(operand_shapes_with_layout)} "
                f"shapes, expected {len(operands)}")
        for i, s in enumerate(operand_shapes_with_layout):
            if not isinstance(s, Shape) or not s.has_layout():
                raise InvalidArgumentError(f"{op_name}: No layout specified for operand {i} "
                                           f"for custom call with constrained layout.")
    name = {"__cudnn$convForward": "cudnn-conv",
            "__cudnn$convBackwardInput": "cudnn-conv-bw-input",
            "__cudnn$convBackwardFilter": "cudnn-conv-bw-filter",
            "__cudnn$convBiasActivationForward": "cudnn-conv-bias-activation",
            }.get(call_target_name)
    attrs = {
        "custom_call_target": call_target_name,
        "operand_layout_constraints": operand_shapes_with_layout,
        "custom_call_has_side_effect": has_side_effect,
        "literal": literal,
        "output_to_operand_aliasing": check_sequence(
            output_operand_aliasing, f"{op_name}: output_operand_aliasing",
            "a list of (output_index, (operand_number, operand_index))"),
        "schedule": schedule,
        "api_version": api_version,
    }
    if computation is not None:
        attrs["called_computations"] = (computation_of(computation, op_name),)
    return builder.emit("custom-call", operands, attrs, shape=shape, name=name,
                        op_name=op_name, backend_config=opaque or None)


def CustomCall(builder: XlaBuilder, call_target_name: str, operands: Sequence[XlaOp],
               shape: Shape, opaque: str = "", has_side_effect: bool = False,
               output_operand_aliasing=(), literal=None,
               schedule=CustomCallSchedule.SCHEDULE_NONE,
               api_version=CustomCallApiVersion.API_VERSION_ORIGINAL) -> XlaOp:
    """Calls the external function ``call_target_name``; the result has the given
    ``shape``; ``opaque`` becomes the backend_config. ``output_operand_aliasing`` entries
    are ``(output_index, (operand_number, operand_index))``:
    ``ops.CustomCall(b, "myfunc", [x, y], parse_shape("f32[3,3]"))``."""
    return _custom_call("CustomCall", builder, call_target_name, operands, shape,
                        opaque=opaque, has_side_effect=has_side_effect,
                        output_operand_aliasing=output_operand_aliasing, literal=literal,
                        schedule=schedule, api_version=api_version)


def CustomCallWithComputation(builder: XlaBuilder, call_target_name: str,
                              operands: Sequence[XlaOp], computation: XlaComputation,
                              shape: Shape, opaque: str = "", has_side_effect: bool = False,
                              output_operand_aliasing=(), literal=None,
                              schedule=CustomCallSchedule.SCHEDULE_NONE,
                              api_version=CustomCallApiVersion.API_VERSION_ORIGINAL) -> XlaOp:
    """A CustomCall that also names a computation (printed ``called_computations={%f}``):
    ``ops.CustomCallWithComputation(b, "foo", [x], f, x.shape)``."""
    return _custom_call("CustomCallWithComputation", builder, call_target_name, operands,
                        shape, computation=computation, opaque=opaque,
                        has_side_effect=has_side_effect,
                        output_operand_aliasing=output_operand_aliasing, literal=literal,
                        schedule=schedule, api_version=api_version)


def CustomCallWithLayout(builder: XlaBuilder, call_target_name: str, operands: Sequence[XlaOp],
                         shape_with_layout: Shape, operand_shapes_with_layout: Sequence[Shape],
                         opaque: str = "", has_side_effect: bool = False,
                         output_operand_aliasing=(), literal=None,
                         schedule=CustomCallSchedule.SCHEDULE_NONE,
                         api_version=CustomCallApiVersion.API_VERSION_ORIGINAL) -> XlaOp:
    """A CustomCall whose operands must have the given layouts (printed
    ``operand_layout_constraints={...}``): ``ops.CustomCallWithLayout(b, "baz", [x],
    parse_shape("f32[2,3]{0,1}"), [parse_shape("f32[3]{0}")])``."""
    return _custom_call("CustomCallWithLayout", builder, call_target_name, operands,
                        shape_with_layout, operand_shapes_with_layout=operand_shapes_with_layout,
                        opaque=opaque, has_side_effect=has_side_effect,
                        output_operand_aliasing=output_operand_aliasing, literal=literal,
                        schedule=schedule, api_version=api_version)


def OptimizationBarrier(operand: XlaOp) -> XlaOp:
    """The operand (typically a tuple) unchanged; no optimisation moves work across it:
    ``ops.OptimizationBarrier(ops.Tuple(b, [x, y]))``."""
    b = check_same_builder("OptimizationBarrier", [operand])
    return b.emit("opt-barrier", [operand], op_name="OptimizationBarrier")


def AfterAll(builder: XlaBuilder, tokens: Sequence[XlaOp]) -> XlaOp:
    """A token ordered after all ``tokens``: ``ops.AfterAll(b, [t0, t1])``."""
    _check_builder(builder, "AfterAll")
    tokens = op_list(tokens, "tokens", "AfterAll")
    for i, t in enumerate(tokens):
        if not t.shape.is_token():
            raise InvalidArgumentError(f"AfterAll: All operands to AfterAll must be tokens; "
                                       f"operand {i} has shape {t.shape}")
    return builder.emit("after-all", tokens, op_name="AfterAll")


def CreateToken(builder: XlaBuilder) -> XlaOp:
    """A fresh token (HLO ``after-all()`` without operands): ``ops.CreateToken(b)``."""
    _check_builder(builder, "CreateToken")
    return builder.emit("after-all", [], op_name="CreateToken")
