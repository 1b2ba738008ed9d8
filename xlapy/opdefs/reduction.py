"""Reductions: reduce, reduce-window and select-and-scatter.

Shape rules follow ShapeInference::InferReduceShape, InferReduceWindowShape and
InferSelectAndScatterShape, with VerifyReducerShape (the reducer's signature, including
tuple-returning reducers of variadic reductions) and InferWindowOutputShape (shared with
convolution in dot_conv.py). Called computations arrive as Computation objects in the
attributes; only their program shapes are read.
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.hlo.attrs import AttrSpec, ComputationKind, IntListKind
from xlapy.hlo.attrs.window import WINDOW, Window, dilated_bound, strided_bound
from xlapy.opdefs.common import expect_array, tname
from xlapy.opdefs.registry import CALLS_COMPUTATIONS, OpCall, op
from xlapy.shape import PrimitiveType, Shape
from xlapy.shape.shape import INT64_MAX, UNBOUNDED_SIZE

P = PrimitiveType


def same_dimensions(a: Shape, b: Shape) -> bool:
    """ShapeUtil::SameDimensions: same rank, sizes equal where neither is unbounded."""
    return a.rank == b.rank and all(
        x == y or UNBOUNDED_SIZE in (x, y) for x, y in zip(a.dimensions, b.dimensions))


def _scalar(t) -> Shape:
    return Shape.array(t, ())


def verify_reducer_shape(call: OpCall, reducer, init_values: Sequence[Shape],
                         input_element_types: Sequence[PrimitiveType], inputs: int) -> None:
    """VerifyReducerShape: ``reducer`` (a computation or a ProgramShape) takes the N
    accumulators then the N inputs, and returns a scalar (N = 1) or an N-tuple of scalars."""
    program = reducer.program_shape() if hasattr(reducer, "program_shape") else reducer
    params, result = program.parameters, program.result
    if len(params) != inputs * 2:
        call.fail(f"Reduction function must take {inputs * 2} parameters, but takes "
                  f"{len(params)} parameter(s).")
    if result.is_array():
        if inputs != 1:
            call.fail(f"Reduction function must produce a tuple with {inputs} elements, but "
                      f"produces a scalar")
        accumulators = [result]
    elif result.is_tuple():
        if len(result.tuple_shapes) != inputs:
            call.fail(f"Reduction function must produce a tuple with {inputs} elements, but has "
                      f"{len(result.tuple_shapes)} elements")
        accumulators = list(result.tuple_shapes)
    else:
        call.fail(f"Reduction function must produce a scalar or tuple of scalars, but has "
                  f"shape: {result}")
    for acc in accumulators:
        if not acc.is_array() or acc.dimensions:
            call.fail(f"Reduction function must return a scalar or tuple of scalars but returns "
                      f"shape: {result}")
    for i in range(inputs):
        acc = accumulators[i]
        if not acc.compatible(params[i]):
            call.fail(f"Reduction function's {i}-th parameter shape differs from the result "
                      f"shape: {params[i]} vs {acc}")
        if not acc.compatible_ignoring_fp_precision(init_values[i]):
            call.fail(f"Reduction function's accumulator shape at index {i} differs from the "
                      f"init_value shape: {acc} vs {init_values[i]}")
        element = _scalar(input_element_types[i])
        if not element.compatible_ignoring_fp_precision(params[inputs + i]):
            call.fail(f"Reduction function's {inputs + i}-th parameter shape differs from the "
                      f"input type element type: {params[inputs + i]} vs {element}")
        if not acc.compatible_ignoring_fp_precision(params[inputs + i]):
            call.fail(f"Reduction function's {inputs + i}-th parameter shape must match the "
                      f"result shape, but got {params[inputs + i]} vs {acc}.")


def infer_window_output_shape(call: OpCall, base: Shape, window: Window,
                              element_type: PrimitiveType) -> Shape:
    """InferWindowOutputShape: the number of valid window positions per dimension, after
    base dilation and padding; unbounded base dimensions stay unbounded."""
    if len(window.dimensions) != base.rank:
        call.fail(f"Window has dimension {len(window.dimensions)} but base shape has dimension "
                  f"{base.rank}.")
    dims, dyn = [], []
    for i, d in enumerate(window.dimensions):
        if d.size <= 0:
            call.fail(f"Window {window.debug_string()} has a non-positive dimension.")
        if d.stride <= 0:
            call.fail(f"Window {window.debug_string()} has a non-positive stride.")
        if d.base_dilation < 1:
            call.fail(f"Window {window.debug_string()} has a non-positive base area dilation "
                      f"factor.")
        if d.window_dilation < 1:
            call.fail(f"Window {window.debug_string()} has a non-positive window dilation "
                      f"factor.")
        size = base.dimensions[i]
        _check_int64(call, window, i, base, size)
        if size == UNBOUNDED_SIZE:
            dims.append(UNBOUNDED_SIZE)
        else:
            padded = d.padding_low + dilated_bound(size, d.base_dilation) + d.padding_high
            if padded < 0:
                call.fail(f"Window {window.debug_string()} pads dimension {i} of {base} to a "
                          f"negative size {padded}.")
            dims.append(strided_bound(padded, dilated_bound(d.size, d.window_dilation), d.stride))
        dyn.append(base.dynamic_dimensions[i])
    return Shape.array(element_type, dims, dynamic_dimensions=dyn)


def _check_int64(call: OpCall, window: Window, i: int, base: Shape, size: int) -> None:
    """XLA computes a window's sizes in int64: its attributes, the dilated base and window,
    and the padded base (with each padding alone) must fit, or XLA's arithmetic wraps."""
    d = window.dimensions[i]
    values = [("size", d.size), ("stride", d.stride), ("padding low", d.padding_low),
              ("padding high", d.padding_high), ("base dilation", d.base_dilation),
              ("window dilation", d.window_dilation),
              ("dilated window", dilated_bound(d.size, d.window_dilation))]
    if size != UNBOUNDED_SIZE:
        dilated = dilated_bound(size, d.base_dilation)
        values += [("dilated base", dilated), ("padding low + dilated base",
                                               d.padding_low + dilated),
                   ("dilated base + padding high", dilated + d.padding_high),
                   ("padded base", d.padding_low + dilated + d.padding_high)]
    for what, value in values:
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            call.fail(f"Window {window.debug_string()} on dimension {i} of {base}: the "
                      f"{what} is {value}, outside int64 (XLA computes window sizes in int64)")


# -- reduce -------------------------------------------------------------------------------------


@op("reduce", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("dimensions", IntListKind(), doc="the dimensions to reduce, in any order"),
    AttrSpec("to_apply", ComputationKind(), doc="the reducer: N accumulators, N inputs -> "
                                                "a scalar or an N-tuple of scalars"),
])
def _reduce(call: OpCall) -> Shape:
    """Reduce N arrays (operands 0..N-1) with N init values (operands N..2N-1) along
    ``dimensions``; an N-tuple for a tuple-returning reducer."""
    shapes = call.operands
    if not shapes:
        call.fail("Reduce must have at least 2 arguments, has 0")
    if len(shapes) % 2:
        call.fail(f"Reduce must have an even number of arguments, has {len(shapes)}")
    n = len(shapes) // 2
    args, inits = shapes[:n], shapes[n:]
    for i, s in enumerate(args):
        expect_array(call, s, f"input {i} of reduce")
    for i in range(1, n):
        if not same_dimensions(args[0], args[i]):
            call.fail(f"All reduced tensors must have compatible dimension. Tensor at index 0 has "
                      f"shape {args[0]}, and tensor at index {i} has shape {args[i]}.")
    arg = args[0]
    dimensions = call.attrs["dimensions"]
    for d in dimensions:
        if not 0 <= d < arg.rank:
            call.fail(f"Reducing out-of-bounds dimension {d} in shape {arg}.")
    to_apply = call.attrs["to_apply"]
    verify_reducer_shape(call, to_apply, inits, [a.element_type for a in args], n)
    seen = set()
    for d in dimensions:
        if d in seen:
            call.fail(f"Duplicate reduction dimension: {d}")
        seen.add(d)
    keep = [i for i in range(arg.rank) if i not in seen]
    dims = [arg.dimensions[i] for i in keep]
    dyn = [arg.dynamic_dimensions[i] for i in keep]
    result = to_apply.program_shape().result
    if result.is_array():
        return Shape.array(result.element_type, dims, dynamic_dimensions=dyn)
    return Shape.tuple(Shape.array(s.element_type, dims, dynamic_dimensions=dyn)
                       for s in result.tuple_shapes)


# -- reduce-window ------------------------------------------------------------------------------


@op("reduce-window", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("window", WINDOW, default=Window(), doc="the window; omitted for rank-0 operands"),
    AttrSpec("to_apply", ComputationKind(), doc="the reducer, as for reduce"),
])
def _reduce_window(call: OpCall) -> Shape:
    """Reduce every window of N arrays (operands 0..N-1, init values N..2N-1); the result
    has one element per valid window position (an N-tuple for a tuple-returning reducer)."""
    shapes = call.operands
    if len(shapes) % 2:
        call.fail(f"expects an even number of operands, but has {len(shapes)} operands")
    if not shapes:
        call.fail("reduce-window expects at least one input and init operand")
    n = len(shapes) // 2
    args, inits = shapes[:n], shapes[n:]
    for arg in args:
        expect_array(call, arg, "operand of reduce-window")
    for i in range(1, n):
        if not same_dimensions(args[0], args[i]):
            call.fail(f"All reduced tensors must have the same dimension. Tensor 0 has shape "
                      f"{args[0]}, Tensor {i} has shape {args[i]}")
    to_apply = call.attrs["to_apply"]
    verify_reducer_shape(call, to_apply, inits, [a.element_type for a in args], n)
    window = call.attrs["window"]
    outputs = []
    for arg, init in zip(args, inits):
        outputs.append(infer_window_output_shape(call, arg, window, init.element_type))
    if to_apply.program_shape().result.is_array():
        return outputs[0]
    return Shape.tuple(outputs)


# -- select-and-scatter -------------------------------------------------------------------------


@op("select-and-scatter", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("window", WINDOW, default=Window(), doc="the window over the operand"),
    AttrSpec("select", ComputationKind(), doc="(T, T) -> PRED: true keeps the first"),
    AttrSpec("scatter", ComputationKind(), doc="(T, T) -> T: combines source values"),
])
def _select_and_scatter(call: OpCall) -> Shape:
    """select-and-scatter(operand, source, init_value): the result has the operand's shape;
    ``source`` must have the shape of the window-reduced operand."""
    operand, source, init_value = call.operands
    expect_array(call, operand, "operand of select-and-scatter")
    select = call.attrs["select"].program_shape()
    if len(select.parameters) != 2:
        call.fail(f"Select function must take 2 parameters, but takes "
                  f"{len(select.parameters)} parameter(s).")
    if not select.result.compatible(_scalar(P.PRED)):
        call.fail("Select function must have rank-0 PRED result.")
    element = _scalar(operand.element_type)
    if not element.compatible_ignoring_fp_precision(select.parameters[0]):
        call.fail(f"Select function's first parameter shape currently must match the operand "
                  f"element shape, but got {select.parameters[0]} vs {element}.")
    if not element.compatible_ignoring_fp_precision(select.parameters[1]):
        call.fail(f"Select function's second parameter shape currently must match the operand "
                  f"element shape, but got {select.parameters[1]} vs {element}.")
    expect_array(call, source, "source of select-and-scatter")
    verify_reducer_shape(call, call.attrs["scatter"], [init_value], [source.element_type], 1)
    window_result = infer_window_output_shape(call, operand, call.attrs["window"],
                                              operand.element_type)
    if not source.compatible_ignoring_fp_precision(window_result):
        call.fail(f"Source shape does not match the shape of window-reduced operand: "
                  f"source({source}), window-reduced operand({window_result}).")
    return operand


__all__ = ["infer_window_output_shape", "same_dimensions", "tname", "verify_reducer_shape"]
