"""Builder functions for constants, custom calls, tokens and the optimization barrier, with
XLA's names and argument order: ConstantLiteral (and the Constant / ConstantR0 /
ConstantR1 conveniences over numpy values), CustomCall, CustomCallWithComputation,
CustomCallWithLayout, OptimizationBarrier, AfterAll, CreateToken."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from xlapy.builder import XlaBuilder, XlaComputation, XlaOp, computation_of
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.enums import CustomCallApiVersion, CustomCallSchedule
from xlapy.hlo.attrs.literal import as_literal
from xlapy.ops.core import check_same_builder, in_dim_broadcast
from xlapy.shape import Shape, dtypes
from xlapy.shape.literal import Literal

__all__ = ["ConstantLiteral", "Constant", "ConstantR0", "ConstantR1", "CustomCall",
           "CustomCallWithComputation", "CustomCallWithLayout", "OptimizationBarrier",
           "AfterAll", "CreateToken"]


def _check_builder(builder, op_name: str) -> None:
    if not isinstance(builder, XlaBuilder):
        raise InvalidArgumentError(f"{op_name}: expected an XlaBuilder, got "
                                   f"{type(builder).__name__}")


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
    if element_type is not None:
        return ConstantLiteral(builder, Literal.scalar(value, element_type))
    arr = np.asarray(value)
    if arr.ndim != 0:
        raise InvalidArgumentError(f"ConstantR0: expected a scalar, got shape {arr.shape}")
    return ConstantLiteral(builder, Literal.from_array(arr))


def ConstantR1(builder: XlaBuilder, values, value=None, element_type=None) -> XlaOp:
    """A rank-1 constant: ``ops.ConstantR1(b, np.arange(3, dtype=np.int32))``, or XLA's
    ``ConstantR1(b, length, value)``: ``ops.ConstantR1(b, 4, np.float32(0))``."""
    if value is not None:
        if isinstance(values, bool) or not hasattr(values, "__index__") or int(values) < 0:
            raise InvalidArgumentError(f"ConstantR1: length must be an integer >= 0, got "
                                       f"{values!r}")
        arr = np.full(int(values), value, dtype=np.asarray(value).dtype)
    else:
        arr = np.asarray(values)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"ConstantR1: expected a rank-1 array, got shape {arr.shape}")
    if element_type is not None:
        t = element_type if isinstance(element_type, dtypes.PrimitiveType) else \
            dtypes.from_name(str(element_type))
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
    operands = list(operands)
    if operands:
        b = check_same_builder(op_name, operands)
        if b is not builder:
            raise InvalidArgumentError(f"{op_name}: the operands were built by builder "
                                       f"'{b.name}', not by '{builder.name}'")
    if not isinstance(call_target_name, str):
        raise InvalidArgumentError(f"{op_name}: call_target_name must be a string")
    if call_target_name.startswith("$"):
        raise InvalidArgumentError(
            f'{op_name}: Invalid custom_call_target "{call_target_name}": Call targets that '
            f"start with '$' are reserved for internal use.")
    if not isinstance(shape, Shape):
        raise InvalidArgumentError(f"{op_name}: shape must be a Shape, got {shape!r}")
    if operand_shapes_with_layout is not None:
        operand_shapes_with_layout = tuple(operand_shapes_with_layout)
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
        "output_to_operand_aliasing": tuple(output_operand_aliasing),
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
    tokens = list(tokens)
    for i, t in enumerate(tokens):
        if not isinstance(t, XlaOp):
            raise InvalidArgumentError(f"AfterAll: operand {i} must be an XlaOp, got "
                                       f"{type(t).__name__}")
        if not t.shape.is_token():
            raise InvalidArgumentError(f"AfterAll: All operands to AfterAll must be tokens; "
                                       f"operand {i} has shape {t.shape}")
    return builder.emit("after-all", tokens, op_name="AfterAll")


def CreateToken(builder: XlaBuilder) -> XlaOp:
    """A fresh token (HLO ``after-all()`` without operands): ``ops.CreateToken(b)``."""
    _check_builder(builder, "CreateToken")
    return builder.emit("after-all", [], op_name="CreateToken")
