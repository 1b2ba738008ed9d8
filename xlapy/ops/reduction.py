"""Builder functions for reductions: Reduce (single and variadic), ReduceAll, ReduceWindow,
ReduceWindowWithGeneralPadding, SelectAndScatter, SelectAndScatterWithGeneralPadding,
with XLA's names and argument order (xla_builder.h). SAME/VALID padding goes through
XLA's MakePadding; the window through InferWindowFromDimensions. Imports the builder, the
opdefs and the window attribute types.
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.window import (
    Padding,
    Window,
    as_padding,
    make_padding,
    validate_padding_values,
)
from xlapy.hlo.attrs.window import make_padding as _make_padding  # ops.make_padding is wrapped
from xlapy.opdefs import get_opdef
from xlapy.opdefs.registry import ShapeError
from xlapy.ops.builder import XlaBuilder, XlaOp, computation_of
from xlapy.ops.core import (
    builder_arg,
    call_overload,
    check_same_builder,
    int_list,
    int_pairs,
    op_list,
)

__all__ = [
    "Padding", "Reduce", "ReduceAll", "ReduceWindow", "ReduceWindowWithGeneralPadding",
    "SelectAndScatter", "SelectAndScatterWithGeneralPadding", "Window", "make_padding",
]


_ints = int_list
_ops = op_list


def _pairs(values, op_name: str) -> tuple[tuple[int, int], ...]:
    return int_pairs(values, "padding", op_name)


def _window(opcode: str, *args, **kwargs) -> Window:
    try:
        return Window.from_dimensions(*args, **kwargs)
    except InvalidArgumentError as e:
        raise ShapeError(f"{opcode}: {e}") from None


def _padding(opcode: str, input_dims, window_dims, strides, padding) -> list[tuple[int, int]]:
    try:
        return _make_padding(input_dims, window_dims, strides, padding)
    except InvalidArgumentError as e:
        raise ShapeError(f"{opcode}: {e}") from None


# -- Reduce -------------------------------------------------------------------------------------


def _reduce_variadic(builder: XlaBuilder, operands: Sequence[XlaOp], init_values: Sequence[XlaOp],
                     computation, dimensions_to_reduce: Sequence[int]) -> XlaOp:
    builder_arg(builder, "Reduce")
    all_ops = _ops(operands, "operands", "Reduce") + _ops(init_values, "init_values", "Reduce")
    return builder.emit("reduce", all_ops, {
        "dimensions": _ints(dimensions_to_reduce, "dimensions_to_reduce", "Reduce"),
        "to_apply": computation_of(computation, "Reduce"),
    }, op_name="Reduce")


def _reduce_single(operand: XlaOp, init_value: XlaOp, computation,
                   dimensions_to_reduce: Sequence[int]) -> XlaOp:
    b = check_same_builder("Reduce", [operand, init_value])
    return _reduce_variadic(b, [operand], [init_value], computation, dimensions_to_reduce)


def Reduce(*args, **kwargs) -> XlaOp:
    """Reduce along ``dimensions_to_reduce`` with a reducer computation. Two forms, as in
    XLA: ``Reduce(operand, init_value, computation, dimensions_to_reduce)`` and the variadic
    ``Reduce(builder, operands, init_values, computation, dimensions_to_reduce)`` (the
    reducer then takes N accumulators and N values and returns an N-tuple).

        total = ops.Reduce(x, ops.ConstantR0(b, 0.0), add_f32, [0, 1])
    """
    variadic = (args and isinstance(args[0], XlaBuilder)) or "builder" in kwargs
    return call_overload("Reduce", _reduce_variadic if variadic else _reduce_single,
                         *args, **kwargs)


def ReduceAll(operand: XlaOp, init_value: XlaOp, computation) -> XlaOp:
    """Reduce over every dimension: ``ops.ReduceAll(x, zero, add_f32)`` gives a scalar."""
    b = check_same_builder("ReduceAll", [operand, init_value])
    rank = operand.shape.rank if operand.shape.is_array() else 0
    return _reduce_variadic(b, [operand], [init_value], computation, range(rank))


# -- ReduceWindow -------------------------------------------------------------------------------


def _as_op_lists(operands, init_values, op_name):
    if isinstance(operands, XlaOp):
        if not isinstance(init_values, XlaOp):
            raise InvalidArgumentError(f"{op_name}: with one operand, init_value must be one XlaOp")
        return [operands], [init_values]
    operands = _ops(operands, "operands", op_name)
    init_values = _ops(init_values, "init_values", op_name)
    if not operands or len(operands) != len(init_values):
        raise InvalidArgumentError(
            f"{op_name}: expects one or more operands and as many init_values, got "
            f"{len(operands)} operands and {len(init_values)} init_values")
    return operands, init_values


def ReduceWindow(operands, init_values, computation, window_dimensions: Sequence[int],
                 window_strides: Sequence[int], padding: Padding | str) -> XlaOp:
    """Reduce every window of ``window_dimensions`` moved by ``window_strides``, padding
    ``Padding.SAME`` or ``Padding.VALID``. One operand and init value, or lists of N each.

        pooled = ops.ReduceWindow(x, neg_inf, max_f32, [2, 3], [2, 3], ops.Padding.VALID)
    """
    operands, init_values = _as_op_lists(operands, init_values, "ReduceWindow")
    check_same_builder("ReduceWindow", operands + init_values)
    window_dimensions = _ints(window_dimensions, "window_dimensions", "ReduceWindow")
    window_strides = _ints(window_strides, "window_strides", "ReduceWindow")
    for o in operands:
        if not o.shape.is_array():
            raise ShapeError(f"reduce-window: Expected array argument for operand of "
                             f"reduce-window, but got {o.shape}.")
        try:
            validate_padding_values(o.shape.dimensions, window_dimensions, window_strides)
        except InvalidArgumentError as e:
            raise ShapeError(f"reduce-window: {e}") from None
    shape = operands[-1].shape
    pads = _padding("reduce-window", shape.dimensions, window_dimensions, window_strides, padding)
    window = _window("reduce-window", window_dimensions, window_strides, pads)
    if _needs_dynamic_same_padding(shape, window, padding):
        to_apply = computation_of(computation, "ReduceWindow")
        return _dynamic_same_padding_call(
            "reduce-window", "DynamicReduceWindowSamePadding", operands + init_values,
            {"window": window, "to_apply": to_apply}, [to_apply], "ReduceWindow")
    return ReduceWindowWithGeneralPadding(operands, init_values, computation, window_dimensions,
                                          window_strides, (), (), pads)


def _needs_dynamic_same_padding(shape, window: Window, padding) -> bool:
    """XLA's builder: SAME padding over a dynamic dimension with a non-trivial window makes
    the padding depend on the runtime size; it then emits a custom-call that the dynamic
    padder rewrites, instead of the plain op."""
    return as_padding(padding) is Padding.SAME and any(
        shape.dynamic_dimensions[i] and not d.is_trivial for i, d in enumerate(window.dimensions))


def _dynamic_same_padding_call(opcode: str, target: str, operands: list[XlaOp], attrs: dict,
                               computations: list, op_name: str) -> XlaOp:
    """The custom-call XLA emits for SAME padding over dynamic dimensions: the shape the
    plain op would have, its window (as text) and its computations."""
    opdef = get_opdef(opcode)
    shape = opdef.infer_shape([o.shape for o in operands], opdef.check_attrs(attrs))
    return operands[0].builder.emit("custom-call", operands, {
        "custom_call_target": target,
        "window": "{" + attrs["window"].to_text() + "}",
        "called_computations": tuple(computations),
    }, shape=shape, op_name=op_name)


def ReduceWindowWithGeneralPadding(operands, init_values, computation,
                                   window_dimensions: Sequence[int],
                                   window_strides: Sequence[int],
                                   base_dilations: Sequence[int],
                                   window_dilations: Sequence[int],
                                   padding: Sequence[tuple[int, int]]) -> XlaOp:
    """ReduceWindow with explicit (low, high) padding and base/window dilations (empty
    lists: none).

        y = ops.ReduceWindowWithGeneralPadding(x, zero, add_f32, [3], [2], [], [], [(1, 1)])
    """
    operands, init_values = _as_op_lists(operands, init_values, "ReduceWindowWithGeneralPadding")
    b = check_same_builder("ReduceWindowWithGeneralPadding", operands + init_values)
    op = "ReduceWindowWithGeneralPadding"
    window = _window("reduce-window", _ints(window_dimensions, "window_dimensions", op),
                     _ints(window_strides, "window_strides", op), _pairs(padding, op),
                     _ints(base_dilations, "base_dilations", op),
                     _ints(window_dilations, "window_dilations", op))
    return b.emit("reduce-window", operands + init_values, {
        "window": window, "to_apply": computation_of(computation, op)}, op_name=op)


# -- SelectAndScatter ---------------------------------------------------------------------------


def SelectAndScatter(operand: XlaOp, select, window_dimensions: Sequence[int],
                     window_strides: Sequence[int], padding: Padding | str, source: XlaOp,
                     init_value: XlaOp, scatter) -> XlaOp:
    """Select one element per window of ``operand`` (``select``: (T, T) -> PRED) and
    scatter ``source`` onto the selected positions with ``scatter``.

        grad = ops.SelectAndScatter(x, ge_f32, [2, 2], [2, 2], ops.Padding.VALID, g, zero, add_f32)
    """
    check_same_builder("SelectAndScatter", [operand, source, init_value])
    window_dimensions = _ints(window_dimensions, "window_dimensions", "SelectAndScatter")
    window_strides = _ints(window_strides, "window_strides", "SelectAndScatter")
    shape = operand.shape
    if not shape.is_array():
        raise ShapeError(f"select-and-scatter: Expected array argument for operand of "
                         f"select-and-scatter, but got {shape}.")
    pads = _padding("select-and-scatter", shape.dimensions, window_dimensions, window_strides,
                    padding)
    window = _window("select-and-scatter", window_dimensions, window_strides, pads)
    if _needs_dynamic_same_padding(shape, window, padding):
        comps = [computation_of(select, "SelectAndScatter"),
                 computation_of(scatter, "SelectAndScatter")]
        return _dynamic_same_padding_call(
            "select-and-scatter", "DynamicSelectAndScatterSamePadding",
            [operand, source, init_value],
            {"window": window, "select": comps[0], "scatter": comps[1]}, comps,
            "SelectAndScatter")
    return SelectAndScatterWithGeneralPadding(operand, select, window_dimensions, window_strides,
                                              pads, source, init_value, scatter)


def SelectAndScatterWithGeneralPadding(operand: XlaOp, select, window_dimensions: Sequence[int],
                                       window_strides: Sequence[int],
                                       padding: Sequence[tuple[int, int]], source: XlaOp,
                                       init_value: XlaOp, scatter) -> XlaOp:
    """SelectAndScatter with explicit (low, high) padding per dimension.

        grad = ops.SelectAndScatterWithGeneralPadding(x, ge, [3], [2], [(1, 1)], g, zero, add)
    """
    op = "SelectAndScatterWithGeneralPadding"
    b = check_same_builder(op, [operand, source, init_value])
    window = _window("select-and-scatter", _ints(window_dimensions, "window_dimensions", op),
                     _ints(window_strides, "window_strides", op), _pairs(padding, op))
    return b.emit("select-and-scatter", [operand, source, init_value], {
        "window": window,
        "select": computation_of(select, op),
        "scatter": computation_of(scatter, op),
    }, op_name=op)
