"""Ops that call computations: map, call, while, conditional, fusion, scan, and the async
wrappers async-start / async-update / async-done.

Shape rules follow ShapeInference::InferMapShape, InferCallShape, InferWhileShape and
InferConditionalShape; fusion, scan and the async ops have no Infer* function in XLA, so
their rules are the checks of ShapeVerifier::HandleFusion / HandleScan / CheckAsyncOp* (and
the scan shape the HLO parser infers). Called computations arrive as Computation objects in
the attributes; only their program shapes are used. Messages are XLA's.
Imports shape, hlo and the registry; never the builder or the parser.
"""

from __future__ import annotations

from typing import Sequence

from xlapy.hlo.attrs import AttrSpec, BoolKind, ComputationKind, ComputationListKind, IntKind
from xlapy.hlo.attrs import IntListKind, StringKind
from xlapy.hlo.attrs.custom_call import OUTPUT_TO_OPERAND_ALIASING
from xlapy.hlo.attrs.enums import FUSION_KIND
from xlapy.opdefs.common import expect_array, tname
from xlapy.opdefs.misc import check_output_operand_aliasing, is_shape_prefix, subshape_or_none
from xlapy.opdefs.registry import ASYNC, CALLS_COMPUTATIONS, OpCall, op
from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.shape import UNBOUNDED_SIZE

P = PrimitiveType
MAIN_THREAD = "main"


def _same_type_ignoring_fp(a: Shape, b: Shape) -> bool:
    return a.element_type == b.element_type or (
        dtypes.is_floating(a.element_type) and dtypes.is_floating(b.element_type))


# -- map ------------------------------------------------------------------------------------


def infer_map_shape(call: OpCall, args: Sequence[Shape], to_apply, dimensions) -> Shape:
    """ShapeInference::InferMapShape: a scalar computation applied elementwise; operands of
    one shape (scalars of the same type may stand in), result element type from to_apply."""
    if not args:
        call.fail("Map expects at least one argument.")
    expect_array(call, args[0], "operand of map")
    arg_shape = args[0]
    for s in args[1:]:
        expect_array(call, s, "operand of map")
        if s.compatible_ignoring_element_type(arg_shape):
            continue
        if _same_type_ignoring_fp(s, arg_shape):
            if s.is_scalar():
                continue
            if arg_shape.is_scalar():
                arg_shape = s
                continue
        call.fail(f"Map operation requires all operands to have the same shape; got: "
                  f"{', '.join(str(a) for a in args)}.")
    if len(dimensions) != arg_shape.rank:
        call.fail(f"Map applied to a subset of dimensions currently not supported: "
                  f"arg_dimension_size: {arg_shape.rank}, requested_map_dimensions_size: "
                  f"{len(dimensions)}.")
    for i, d in enumerate(dimensions):
        if d != i:
            call.fail(f"Map requires monotonically increasing dimension numbers; got: "
                      f"{', '.join(map(str, dimensions))}.")
    params = to_apply.parameters
    if len(args) != len(params):
        call.fail(f"Map applied function arity must match number of arguments; got: arity: "
                  f"{len(params)}, arguments: {len(args)}.")
    output = to_apply.result
    if not (output.is_array() and output.is_scalar()):
        call.fail(f"Mapped computation's result has to be a scalar; got: {output}.")
    for i, param in enumerate(params):
        if not (param.is_array() and param.is_scalar()):
            call.fail(f"Mapped computation's parameter has to be a scalar; got parameter {i} "
                      f"shape: {param}.")
        if not _same_type_ignoring_fp(param, args[i]):
            call.fail(f"Mapped computation's parameter type has to match argument element "
                      f"type; got parameter {i} shape: {param}, argument shape: {arg_shape}.")
    return Shape.array(output.element_type, arg_shape.dimensions,
                       dynamic_dimensions=arg_shape.dynamic_dimensions)


@op("map", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("dimensions", IntListKind(), doc="every dimension, in order: {0,1,...}"),
    AttrSpec("to_apply", ComputationKind(), doc="scalar computation, N scalars -> scalar"),
])
def _map(call: OpCall) -> Shape:
    """map(operands...): to_apply applied elementwise over equally shaped operands."""
    return infer_map_shape(call, call.operands, call.to_apply.program_shape(), call.dimensions)


# -- call -----------------------------------------------------------------------------------


def infer_call_shape(call: OpCall, args: Sequence[Shape], to_apply) -> Shape:
    """ShapeInference::InferCallShape: arguments compatible with the parameters; the
    result is the computation's."""
    params = to_apply.parameters
    if len(args) != len(params):
        call.fail(f"Call applied function arity must match number of arguments; got: arity: "
                  f"{len(params)}, arguments: {len(args)}; computation signature: {to_apply}; "
                  f"argument shapes: [{', '.join(str(a) for a in args)}].")
    for i, (arg, param) in enumerate(zip(args, params)):
        if not arg.compatible(param):
            call.fail(f"Call parameter must match argument; got parameter {i} shape: {param}, "
                      f"argument shape: {arg}.")
    return to_apply.result


@op("call", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("to_apply", ComputationKind()),
    AttrSpec("is_composite", BoolKind(), default=False,
             doc="a composite: frontend attributes composite.name/attributes/version"),
])
def _call(call: OpCall) -> Shape:
    """call(args...): to_apply applied to the arguments; its result shape."""
    return infer_call_shape(call, call.operands, call.to_apply.program_shape())


# -- while ----------------------------------------------------------------------------------


def infer_while_shape(call: OpCall, condition, body, init: Shape) -> Shape:
    """ShapeInference::InferWhileShape: cond T -> pred[], body T -> T, init T; result T."""
    if len(condition.parameters) != 1:
        call.fail(f"Condition must take 1 arguments; got {len(condition.parameters)}.")
    if len(body.parameters) != 1:
        call.fail(f"Body must take 1 arguments; got {len(body.parameters)}.")
    shapes = f"Condition: {condition}; body: {body}; init: {init}."
    if not condition.result.compatible(Shape.scalar(P.PRED)):
        call.fail(f"Condition must return a boolean; got {shapes}")
    if not (body.result.compatible(condition.parameters[0])
            and body.result.compatible(body.parameters[0])
            and body.result.compatible(init)):
        call.fail(f"The parameter of condition and body, the result of the body, and init "
                  f"must all have the same shape; got {shapes}")
    return init


@op("while", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("condition", ComputationKind(), doc="T -> pred[]"),
    AttrSpec("body", ComputationKind(), doc="T -> T"),
])
def _while(call: OpCall) -> Shape:
    """while(init): body applied while condition holds; the shape of init."""
    (init,) = call.operands
    return infer_while_shape(call, call.condition.program_shape(), call.body.program_shape(),
                             init)


# -- conditional ----------------------------------------------------------------------------


def _or_dynamic(result: Shape, other: Shape) -> Shape:
    """``result`` with every dimension dynamic that is dynamic in ``other`` (same
    structure)."""
    if result.is_tuple():  # leaf by leaf, in the same depth-first order
        others = iter([leaf for _, leaf in other.leaves()])
        return result.map_leaves(lambda leaf: _or_dynamic(leaf, next(others)))
    if not result.is_array():
        return result
    dyn = tuple(a or b for a, b in zip(result.dynamic_dimensions, other.dynamic_dimensions))
    if dyn == result.dynamic_dimensions:
        return result
    return Shape.array(result.element_type, result.dimensions, layout=result.layout,
                       dynamic_dimensions=dyn)


def infer_conditional_shape(call: OpCall, branch_index: Shape, branches: Sequence,
                            operands: Sequence[Shape]) -> Shape:
    """ShapeInference::InferConditionalShape: a pred[] index picks one of two branches, an
    s32[] index one of N; branch j takes operand j; all branches return one shape (dynamic
    where any branch is)."""
    if not (branch_index.compatible(Shape.scalar(P.PRED))
            or branch_index.compatible(Shape.scalar(P.S32))):
        call.fail(f"branch_index must be bool or int32_t; got {branch_index}.")
    if branch_index.element_type == P.PRED:
        if len(branches) != 2:
            call.fail(f"Check failed: 2 == branch_computations.size() ({len(branches)} "
                      f"branches for a pred branch index)")
    elif not branches:
        call.fail("Check failed: !branch_computations.empty()")
    if len(branches) != len(operands):
        call.fail(f"Check failed: branch_computations.size() == branch_operands.size() "
                  f"({len(branches)} vs {len(operands)})")
    result = branches[0].result
    for j, (branch, operand) in enumerate(zip(branches, operands)):
        if len(branch.parameters) != 1:
            call.fail(f"branch computation {j} must take 1 argument; got "
                      f"{len(branch.parameters)}.")
        if not branch.parameters[0].compatible(operand):
            call.fail(f"branch operand {j} must match the shape of the only parameter of "
                      f"branch computation {j}: got operand: {operand}; computation: "
                      f"{branch}.")
        if not branches[0].result.compatible(branch.result):
            call.fail(f"the result of branch 0 computation and branch {j} computation must "
                      f"have the same shape: got branch 0 computation result: "
                      f"{branches[0].result}; branch {j} computation result: {branch.result}.")
    for branch in branches:
        result = _or_dynamic(result, branch.result)
    return result


@op("conditional", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("true_computation", ComputationKind(), default=None,
             doc="with a pred branch index: run when true"),
    AttrSpec("false_computation", ComputationKind(), default=None,
             doc="with a pred branch index: run when false"),
    AttrSpec("branch_computations", ComputationListKind(), default=None,
             doc="with an s32 branch index: run branch i (out of range: the last)"),
])
def _conditional(call: OpCall) -> Shape:
    """conditional(branch_index, operands...): the branch picked by the index applied to
    its operand. A pred index uses true/false_computation, an s32 index
    branch_computations (as XLA's printer and parser choose by the index's type)."""
    # The checks up to the branches are XLA's parser's too (with its words in the parser).
    if not call.operands:
        call.fail("conditional requires at least one operand", parser_check=True)
    index = call.operands[0]
    if not (index.is_array() and index.is_scalar()):
        call.fail(f"The first operand of conditional must be a scalar. Got {index}",
                  parser_check=True)
    true_c, false_c = call.true_computation, call.false_computation
    listed = call.branch_computations
    if index.element_type == P.PRED:
        if true_c is None or false_c is None or listed is not None:
            call.fail("a conditional with a pred branch index takes true_computation and "
                      "false_computation (not branch_computations)", parser_check=True)
        branches = [true_c, false_c]
    elif index.element_type == P.S32:
        if listed is None or true_c is not None or false_c is not None:
            call.fail("a conditional with an s32 branch index takes branch_computations "
                      "(not true_computation/false_computation)", parser_check=True)
        branches = list(listed)
    else:
        call.fail(f"The first operand of indexed conditional must be a scalar of S32. Got "
                  f"type {tname(index.element_type)}.", parser_check=True)
    return infer_conditional_shape(call, index, [b.program_shape() for b in branches],
                                   call.operands[1:])


# -- fusion ---------------------------------------------------------------------------------


@op("fusion", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("kind", FUSION_KIND, doc="kLoop, kInput, kOutput or kCustom"),
    AttrSpec("output_to_operand_aliasing", OUTPUT_TO_OPERAND_ALIASING, default=()),
    AttrSpec("calls", ComputationKind(), doc="the fused computation"),
])
def _fusion(call: OpCall) -> Shape:
    """fusion(operands...): the fused computation applied to the operands; its root's
    shape. Fused parameter i takes operand i."""
    fused = call.calls
    ps = fused.program_shape()
    if len(ps.parameters) > len(call.operands):
        call.fail(f"Fused parameter count ({len(ps.parameters)}) is greater than the number "
                  f"of operands ({len(call.operands)}) passed to the fusion instruction.")
    for i, (param, operand) in enumerate(zip(ps.parameters, call.operands)):
        if not param.compatible(operand):
            call.fail(f"Shape mismatch between parameter number {i} and its operand. "
                      f"({param} != {operand})")
    result = ps.result
    if call.result is not None and not call.result.compatible(result):
        call.fail(f"Fused computation shape ({result}) is not equal to the fusion shape "
                  f"({call.result})")
    check_output_operand_aliasing(call, call.output_to_operand_aliasing, call.operands,
                                  call.result if call.result is not None else result)
    return result


# -- scan -----------------------------------------------------------------------------------


def _insert_dimension(shape: Shape, index: int, size: int) -> Shape:
    dims = list(shape.dimensions)
    dyn = list(shape.dynamic_dimensions)
    dims.insert(index, size)
    dyn.insert(index, size == UNBOUNDED_SIZE)
    return Shape.array(shape.element_type, dims, dynamic_dimensions=dyn)


def _delete_dimension(shape: Shape, index: int) -> Shape:
    dims = shape.dimensions[:index] + shape.dimensions[index + 1:]
    dyn = shape.dynamic_dimensions[:index] + shape.dynamic_dimensions[index + 1:]
    return Shape.array(shape.element_type, dims, dynamic_dimensions=dyn)


def _parts(shape: Shape) -> tuple[Shape, ...]:
    return shape.tuple_shapes if shape.is_tuple() else (shape,)


@op("scan", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("dimensions", IntListKind(), doc="exactly one: the scan dimension"),
    AttrSpec("num_carries", IntKind()),
    AttrSpec("is_reverse", BoolKind(), default=False),
    AttrSpec("is_associative", BoolKind(), default=None,
             doc="true/false as the parser sets it; absent: unspecified"),
    AttrSpec("to_apply", ComputationKind(),
             doc="(input slices..., carries...) -> (output slices..., carries...)"),
])
def _scan(call: OpCall) -> Shape:
    """scan(inputs..., inits...): to_apply folded along the scan dimension, each step taking
    the inputs' slices and the carries and giving the outputs' slices and new carries. The
    result is (outputs stacked along the scan dimension..., final carries...), or the one
    array when there is one result."""
    operands = call.operands
    comp = call.to_apply
    ps = comp.program_shape()
    carries = call.num_carries
    if len(call.dimensions) != 1:
        call.fail("expects exactly one dimension")
    scan_dim = call.dimensions[0]
    if len(operands) != len(ps.parameters):
        call.fail(f"expects {len(operands)} operands to match the number of parameters of "
                  f"to_apply, but to_apply has {len(ps.parameters)} parameters")
    if carries < 0 or len(operands) < carries:
        call.fail(f"expects at least {carries} operands to match the number of carries, but "
                  f"has {len(operands)} operands")
    if scan_dim < 0:
        call.fail(f"Scan dimension {scan_dim} should be non-negative")
    num_inputs = len(operands) - carries
    roots = _parts(ps.result)
    if call.result is not None:
        result = call.result
    else:
        if num_inputs == 0:
            call.fail("Cannot infer shape for scan with no inputs")
        expect_array(call, operands[0], "input 0 of scan")
        if scan_dim >= operands[0].rank:
            call.fail(f"scan dimension {scan_dim} is out of range for operand of rank "
                      f"{operands[0].rank}")
        size = operands[0].dimensions[scan_dim]
        if not ps.result.is_tuple():
            result = ps.result if carries > 0 else _insert_dimension(ps.result, scan_dim, size)
        else:
            result = Shape.tuple(
                _insert_dimension(r, scan_dim, size) if i + carries < len(roots) else r
                for i, r in enumerate(roots))
    results = _parts(result)
    if len(results) < carries:
        call.fail(f"Scan instruction has {carries} carries, but only {len(results)} results.")
    if num_inputs == 0 and len(results) == carries:
        call.fail("Scan instruction has no inputs or outputs.")
    if len(roots) != len(results):
        call.fail(f"Scan instruction has {len(results)} results, but the to_apply "
                  f"computation has {len(roots)} results.")
    num_outputs = len(results) - carries
    if num_inputs:
        expect_array(call, operands[0], "input 0 of scan")
        if scan_dim >= operands[0].rank:
            call.fail(f"Scan dimension {scan_dim} out of bounds for operand 0")
        size = operands[0].dimensions[scan_dim]
    else:
        expect_array(call, results[0], "result 0 of scan")
        if scan_dim >= results[0].rank:
            call.fail(f"Scan dimension {scan_dim} out of bounds for result 0")
        size = results[0].dimensions[scan_dim]
    for i, (operand, param) in enumerate(zip(operands, ps.parameters)):
        expected = operand
        if i < num_inputs:
            expect_array(call, operand, f"input {i} of scan")
            if scan_dim >= operand.rank:
                call.fail(f"Scan dimension {scan_dim} out of bounds for operand {i}")
            if operand.dimensions[scan_dim] != size:
                call.fail(f"Scan dimension {scan_dim} has size {operand.dimensions[scan_dim]}, "
                          f"expected {size}")
            expected = _delete_dimension(operand, scan_dim)
        if not param.compatible(expected):
            call.fail(f"Shapes of operand {i} and to_apply computation parameter are "
                      f"inconsistent ({operand} vs {param})")
    for i in range(carries):
        if not ps.parameters[num_inputs + i].compatible(roots[num_outputs + i]):
            call.fail(f"Shapes of parameter {i} and root in to_apply computation are "
                      f"inconsistent")
    for i, (root, res) in enumerate(zip(roots, results)):
        expected = res
        if i < num_outputs:
            expect_array(call, res, f"result {i} of scan")
            if scan_dim >= res.rank:
                call.fail(f"Scan dimension {scan_dim} out of bounds for result {i}")
            if res.dimensions[scan_dim] != size:
                call.fail(f"Scan dimension {scan_dim} has size {res.dimensions[scan_dim]}, "
                          f"expected {size}")
            expected = _delete_dimension(res, scan_dim)
        if not root.compatible(expected):
            call.fail(f"Shapes of result {i} and to_apply computation root are inconsistent "
                      f"({res} vs {root})")
    return result


# -- async wrappers -------------------------------------------------------------------------


def _expect_async_shape(call: OpCall, shape: Shape, what: str) -> None:
    if not (shape.is_tuple() and len(shape.tuple_shapes) >= 2
            and shape.tuple_shapes[0].is_tuple()):
        call.fail(f"expects {what} to be in the form of ((op0_shape, op1_shape, ...), "
                  f"output_shape, ...), found {shape}.")


def _check_wrapped(call: OpCall, comp, async_shape: Shape) -> None:
    """The bound operands are a prefix of the computation's parameters, the result part a
    prefix of its result (CheckAsyncOpComputationShapes)."""
    ps = comp.program_shape()
    params = Shape.tuple(ps.parameters)
    if not is_shape_prefix(async_shape.tuple_shapes[0], params):
        call.fail(f"expects the async shape at index {{0}} to be a tuple with shapes that "
                  f"match the prefix of the async computation parameter shape: "
                  f"`{async_shape.tuple_shapes[0]}` vs `{params}`.")
    if not is_shape_prefix(async_shape.tuple_shapes[1], ps.result):
        call.fail(f"expects the async shape at index {{1}} to be a tuple with shapes that "
                  f"match the prefix of the async computation result shape "
                  f"({async_shape.tuple_shapes[1]} vs {ps.result}).")


def _check_thread(call: OpCall, comp, thread: str | None) -> None:
    thread = thread or MAIN_THREAD
    comp_thread = getattr(comp, "execution_thread", None) or MAIN_THREAD
    if thread != comp_thread:
        call.fail(f"expects same async thread name as wrapped computation's thread name "
                  f"({thread} vs {comp_thread}).")


def _check_async_start_aliasing(call: OpCall, comp, async_shape: Shape) -> None:
    ps = comp.program_shape()
    full = Shape.tuple([Shape.tuple(ps.parameters), ps.result,
                        *async_shape.tuple_shapes[2:]])
    for output_index, (operand, operand_index) in call.output_to_operand_aliasing:
        if not 0 <= operand < len(ps.parameters):
            call.fail(f"Operand number {operand} in aliasing config is out of bounds.")
        operand_sub = subshape_or_none(ps.parameters[operand], operand_index)
        if operand_sub is None:
            call.fail("Invalid aliasing operand shape index.")
        if not output_index:
            call.fail("Output index should not be empty.")
        output_sub = subshape_or_none(full, output_index)
        if output_sub is None:
            call.fail("Invalid aliasing output shape index.")
        if not output_sub.equal(operand_sub, ignore_layout=True, ignore_dynamic_dimension=True):
            call.fail(f"Different aliasing shapes: {operand_sub} vs {output_sub}")


@op("async-start", traits=[CALLS_COMPUTATIONS, ASYNC], attrs=[
    AttrSpec("async_execution_thread", StringKind(), default=MAIN_THREAD),
    AttrSpec("output_to_operand_aliasing", OUTPUT_TO_OPERAND_ALIASING, default=()),
    AttrSpec("calls", ComputationKind(), doc="the wrapped computation"),
])
def _async_start(call: OpCall) -> Shape:
    """async-start(operands...): starts the wrapped computation. Its shape is
    ((operands...), result, context...); without a declared shape,
    ((operands...), the computation's result)."""
    comp = call.calls
    if call.result is not None:
        shape = call.result
        _expect_async_shape(call, shape, "the async shape")
        bound = shape.tuple_shapes[0].tuple_shapes
        if len(call.operands) != len(bound):
            call.fail(f"expects {len(bound)} operands, found {len(call.operands)}.")
        for i, (operand, expected) in enumerate(zip(call.operands, bound)):
            if not operand.compatible(expected):
                call.fail(f"expects the shape of operand {i} to match the async shape at "
                          f"index {{0, {i}}} ({operand} vs {expected}).")
    else:
        shape = Shape.tuple([Shape.tuple(call.operands), comp.program_shape().result])
    _check_wrapped(call, comp, shape)
    _check_thread(call, comp, call.async_execution_thread)
    _check_async_start_aliasing(call, comp, shape)
    return shape


@op("async-update", traits=[CALLS_COMPUTATIONS, ASYNC], min_operands=1, attrs=[
    AttrSpec("async_execution_thread", StringKind(), default=None,
             doc="accepted as XLA's parser does; inherited from async-start"),
    AttrSpec("output_to_operand_aliasing", OUTPUT_TO_OPERAND_ALIASING, default=()),
    AttrSpec("calls", ComputationKind(), default=None,
             doc="accepted as XLA's parser does; the computation of async-start"),
])
def _async_update(call: OpCall) -> Shape:
    """async-update(previous, new_operands...): passes the async state on, binding further
    operands; the shape of the previous async op with the new operands appended at {0}."""
    prev, new = call.operands[0], call.operands[1:]
    _expect_async_shape(call, prev, "operand 0 (the previous async op)")
    if call.result is not None:
        shape = call.result
        _expect_async_shape(call, shape, "the async shape")
    else:
        shape = Shape.tuple([Shape.tuple(prev.tuple_shapes[0].tuple_shapes + tuple(new)),
                             *prev.tuple_shapes[1:]])
    if not is_shape_prefix(prev.tuple_shapes[0], shape.tuple_shapes[0]):
        call.fail(f"expects the parameter shape of operand to be a prefix of the output "
                  f"parameter shape ({prev.tuple_shapes[0]} vs {shape.tuple_shapes[0]}).")
    if not is_shape_prefix(prev.tuple_shapes[1], shape.tuple_shapes[1]):
        call.fail(f"expects the result shape of operand to be a prefix of the output result "
                  f"shape ({prev.tuple_shapes[1]} vs {shape.tuple_shapes[1]}).")
    before = len(prev.tuple_shapes[0].tuple_shapes)
    after = len(shape.tuple_shapes[0].tuple_shapes)
    if len(new) != after - before:
        call.fail(f"has {len(new)} new operands, but the shape indicates {after - before} new "
                  f"bound parameters.")
    for i, operand in enumerate(new):
        expected = shape.tuple_shapes[0].tuple_shapes[before + i]
        if not operand.compatible(expected):
            call.fail(f"expects the shape of operand {i + 1} to match the async shape at "
                      f"index {{0, {before + i}}} ({operand} vs {expected}).")
    for output_index, (operand, operand_index) in call.output_to_operand_aliasing:
        if operand != 0:
            call.fail("Invalid operand number in async-update aliasing config, can only "
                      "alias to operand 0 (previous async op).")
        operand_sub = subshape_or_none(prev, operand_index) if operand_index else None
        if operand_sub is None or operand_index[0] != 2:
            call.fail("Invalid operand shape index in async-update aliasing config, can only "
                      "alias context of previous async op.")
        output_sub = subshape_or_none(shape, output_index) if output_index else None
        if output_sub is None or output_index[0] != 2:
            call.fail("Invalid output shape index in async-update aliasing config, can only "
                      "alias to context.")
        if not output_sub.equal(operand_sub, ignore_layout=True, ignore_dynamic_dimension=True):
            call.fail(f"Different aliasing shapes: {operand_sub} vs {output_sub}")
    if call.calls is not None:
        _check_wrapped(call, call.calls, shape)
    return shape


@op("async-done", traits=[CALLS_COMPUTATIONS, ASYNC], attrs=[
    AttrSpec("async_execution_thread", StringKind(), default=None,
             doc="accepted as XLA's parser does; inherited from async-start"),
    AttrSpec("calls", ComputationKind(), default=None,
             doc="accepted as XLA's parser does; the computation of async-start"),
])
def _async_done(call: OpCall) -> Shape:
    """async-done(previous): waits for the wrapped computation; its result (element {1}
    of the previous async op's shape)."""
    (prev,) = call.operands
    _expect_async_shape(call, prev, "operand 0 (an async-start or async-update)")
    result = prev.tuple_shapes[1]
    if call.calls is not None:
        root = call.calls.program_shape().result
        if not root.compatible(call.result if call.result is not None else result):
            call.fail(f"expects its shape to match the async computation result shape "
                      f"({call.result if call.result is not None else result} vs {root}).")
        return root if call.result is None else call.result
    return result
