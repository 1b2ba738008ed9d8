"""The HLO verifier: checks a module the way XLA's HloVerifier does.

Owns: ``verify_module(module)`` and VerifierError. Checks: every instruction's shape is
compatible with what its opcode's shape rule infers (which also checks operand counts,
element types and called computations' signatures: reducers, comparators, while
condition/body, branches); no implicit broadcast in elementwise ops; unique instruction
and computation names; parameters numbered 0..n-1; every computation has a root of its
own; the entry computation layout matches the entry computation; channel ids pair
send/recv with their -done halves; operands do not mix floating-point precisions unless
allowed (XLA's allow_mixed_precision, false by default); a sharding fits its instruction's
shape (HloSharding::Validate); every instruction carries its opcode's attribute schema (it was
made by ``make_instruction`` or cloned from one that was); buffer shapes (``b(...)``) appear
only where XLA's VerifyBuffers allows them (the Pin, Unpin and CreateBuffer custom calls,
custom calls aliasing each buffer operand to one result, dynamic-update-slice into a buffer,
tuples, get-tuple-element, while, parameters of non-entry computations; XLA's count of a
buffer's writers is not made). Messages show the failing
instruction with its operands and users.

Sits above the op definitions (XLA's xla/service/hlo_verifier): imports the IR, its printer
(for the messages) and opdefs.
"""

from __future__ import annotations

from xlapy.errors import InvalidArgumentError, XlaError
from xlapy.hlo.attrs.sharding import validate_sharding
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.hlo.printer import instruction_to_string
from xlapy.opdefs import get_opdef
from xlapy.shape import dtypes


class VerifierError(InvalidArgumentError):
    """The module is not valid HLO; the message shows the failing instruction in context."""


def _context(instr: Instruction) -> str:
    def line(i: Instruction, mark: str) -> str:
        try:
            text = instruction_to_string(i, print_metadata=False)
        except XlaError:
            text = f"%{i.name} = {i.shape} {i.opcode}(...)"
        return f"  {mark}{text}"

    rows = [line(o, "operand: ") for o in instr.operands]
    rows.append(line(instr, "    >>> "))
    rows += [line(u, "user:    ") for u in instr.users[:3]]
    where = f" in computation %{instr.parent.name}" if instr.parent is not None else ""
    return f"instruction %{instr.name}{where}:\n" + "\n".join(rows)


def _fail(instr: Instruction, message: str):
    raise VerifierError(f"{message}\n{_context(instr)}")


# Elementwise ops whose operands may differ in shape from the result: clamp and select
# take scalar bounds / predicates; bitcast-convert between widths adds or drops a dimension.
ELEMENTWISE_SAME_SHAPE_EXEMPT = frozenset({"clamp", "select", "bitcast-convert"})


# Opcodes whose operands may mix floating-point precisions even when mixed precision is not
# allowed: they pass data through or group it (XLA's CheckMixedPrecisionOperands allow-list),
# plus scaled-dot, whose scales have their own type by definition (f8e8m0fnu scales of f8
# operands), as dot and ragged-dot are exempt.
MIXED_PRECISION_EXEMPT = frozenset({
    "call", "conditional", "constant", "convolution", "dot", "ragged-dot", "scaled-dot",
    "all-reduce",
    "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start", "all-gather-done",
    "async-done", "async-update", "async-start", "copy-done", "copy-start", "custom-call",
    "domain", "fusion", "get-tuple-element", "opt-barrier", "infeed", "outfeed", "parameter",
    "recv", "recv-done", "reduce-precision", "reduce-window", "send", "send-done", "sort",
    "tuple", "while",
})


def _check_mixed_precision(instr: Instruction) -> None:
    """HloVerifier with allow_mixed_precision=false (its default): the floating-point leaves
    of an instruction's operands share one type, outside MIXED_PRECISION_EXEMPT."""
    if instr.opcode in MIXED_PRECISION_EXEMPT:
        return
    seen = None
    for o in instr.operands:
        for _, leaf in o.shape.leaves():
            if not leaf.is_array() or not dtypes.is_floating(leaf.element_type):
                continue
            if seen is None:
                seen = leaf
            elif leaf.element_type != seen.element_type:
                _fail(instr, f"Seen floating point types of different precisions in "
                             f"{instr.opcode} %{instr.name} ({seen} and {leaf}), but mixed "
                             f"precision is disallowed (verify_module(..., "
                             f"allow_mixed_precision=True) allows it).")


def verify_instruction(instr: Instruction, *, allow_mixed_precision: bool = False) -> None:
    opdef = get_opdef(instr.opcode)
    if not allow_mixed_precision:
        _check_mixed_precision(instr)
    try:
        inferred = opdef.infer_shape([o.shape for o in instr.operands], instr.attrs, instr.shape)
    except XlaError as e:
        _fail(instr, str(e))
    compatible = instr.shape.compatible_ignoring_fp_precision if allow_mixed_precision else \
        instr.shape.compatible
    if not compatible(inferred) or instr.shape.is_tuple() != inferred.is_tuple():
        _fail(instr, f"{instr.opcode}: shape {instr.shape} is not compatible with the shape "
                     f"its operands give, {inferred}")
    if instr.sharding is not None:
        try:
            validate_sharding(instr.sharding, instr.shape)
        except XlaError as e:
            _fail(instr, f"Invalid sharding for instruction %{instr.name}: {e}")
    if opdef.has("elementwise") and instr.opcode not in ELEMENTWISE_SAME_SHAPE_EXEMPT:
        for o in instr.operands:
            if o.shape.is_array() and o.shape.dimensions != instr.shape.dimensions:
                _fail(instr, f"Implicit broadcast is not allowed in HLO. Found different shapes "
                             f"for instruction {instr.opcode}: operand {o.shape} and result "
                             f"{instr.shape}.")
    if instr.attr_specs is not opdef.attrs:
        _fail(instr, f"{instr.opcode} %{instr.name} does not carry the {instr.opcode} attribute "
                     f"schema (an Instruction made without make_instruction)")


def verify_computation(comp: Computation, *, allow_mixed_precision: bool = False) -> None:
    if comp.root is None or comp.root.parent is not comp:
        raise VerifierError(f"computation %{comp.name} has no root of its own")
    numbers = sorted(p.parameter_number for p in comp.instructions if p.opcode == "parameter")
    if numbers != list(range(len(numbers))):
        raise VerifierError(
            f"computation %{comp.name}: parameter numbers must be 0..{len(numbers) - 1} with "
            f"no repeats, got {numbers}")
    for instr in comp.post_order():
        for o in instr.operands:
            if o.parent is not comp:
                _fail(instr, f"operand %{o.name} of %{instr.name} is not in computation %{comp.name}")
        verify_instruction(instr, allow_mixed_precision=allow_mixed_precision)


def verify_module(module: Module, *, allow_mixed_precision: bool = False) -> None:
    """Raise VerifierError if the module is not valid HLO. As XLA's HloVerifier, operands
    of different floating-point precisions (``add(f16, f32)``) are rejected unless
    ``allow_mixed_precision``."""
    if module.entry is None:
        raise VerifierError(f"module {module.name} has no entry computation")
    comp_names: set[str] = set()
    instr_names: dict[str, Computation] = {}
    for comp in module.computations:
        if comp.name in comp_names:
            raise VerifierError(f"computation name %{comp.name} is not unique in module {module.name}")
        comp_names.add(comp.name)
        for instr in comp.instructions:
            if instr.name in instr_names:
                _fail(instr, f"instruction name %{instr.name} is not unique: it is also used in "
                             f"computation %{instr_names[instr.name].name}")
            instr_names[instr.name] = comp
    for comp in module.computations:
        verify_computation(comp, allow_mixed_precision=allow_mixed_precision)
    _verify_buffers(module)
    _verify_entry_layout(module)
    _verify_channels(module)


# -- buffers (XLA's VerifyBuffers) -------------------------------------------------------------


def _has_buffer(shape) -> bool:
    return any(leaf.is_buffer() for _, leaf in shape.leaves())


def _no_buffers(instr: Instruction, shapes) -> None:
    for shape in shapes:
        if _has_buffer(shape):
            _fail(instr, f"Seen buffers while buffers aren't allowed in this context: "
                         f"{instr.opcode} %{instr.name}")


def _verify_buffers(module: Module) -> None:
    """Where buffer shapes may appear: as XLA's VerifyBuffers (layout-insensitive)."""
    from xlapy.hlo.opcodes import ASYNC_OPCODES

    asynchronous = {id(i.attrs["calls"]) for i in module.instructions()
                    if i.opcode == "async-start" and i.attrs.get("calls") is not None}
    for comp in module.computations:
        if id(comp) in asynchronous:  # only the wrapped custom call, if it is one
            if comp.root.opcode == "custom-call":
                _verify_buffer_custom_call(comp.root)
            continue
        for instr in comp.instructions:
            op = instr.opcode
            if op in ASYNC_OPCODES or (op == "call" and "_xla_stream_annotation"
                                       in instr.frontend_attributes):
                continue
            operands = [o.shape for o in instr.operands]
            if op == "custom-call":
                _verify_buffer_custom_call(instr)
            elif op == "parameter":
                if comp is module.entry:
                    _no_buffers(instr, [instr.shape])
            elif op == "dynamic-update-slice":
                if operands[0].is_buffer():
                    _no_buffers(instr, operands[1:])
                    if not instr.shape.is_buffer():
                        _fail(instr, "DynamicUpdateSlice result must be a buffer if operand 0 "
                                     "is a buffer")
                else:
                    _no_buffers(instr, [instr.shape, *operands])
            elif op not in ("get-tuple-element", "tuple", "while"):
                _no_buffers(instr, [instr.shape, *operands])


def _verify_buffer_custom_call(instr: Instruction) -> None:
    """XLA's VerifyPin / VerifyCreateBuffer / VerifyUnpin, and for other custom calls:
    every buffer operand and result is in exactly one output_to_operand_aliasing pair."""
    target = instr.attrs.get("custom_call_target")
    aliasing = instr.attrs.get("output_to_operand_aliasing") or ()
    operands = [o.shape for o in instr.operands]
    if target == "Pin":
        if len(operands) != 1 or not operands[0].is_array() or operands[0].is_buffer():
            _fail(instr, "custom-call to Pin must have one array non-buffer operand")
        if not instr.shape.is_buffer():
            _fail(instr, "custom-call to Pin must have one buffer result")
        if not operands[0].equal(instr.shape.buffer_shape(), ignore_layout=True):
            _fail(instr, "custom-call to Pin must have the same shape as the operand")
        if len(aliasing) != 1:
            _fail(instr, "custom-call to Pin must have one output-to-operand aliasing")
        return
    if target == "CreateBuffer":
        if operands:
            _fail(instr, "custom-call to CreateBuffer can't have an operand")
        if not instr.shape.is_buffer():
            _fail(instr, "custom-call to CreateBuffer must have one buffer result")
        return
    if target == "Unpin":
        if len(operands) != 1 or not operands[0].is_buffer():
            _fail(instr, "custom-call to Unpin must have one buffer operand")
        if not instr.shape.is_array() or instr.shape.is_buffer():
            _fail(instr, "custom-call to Unpin must have one array non-buffer result")
        if not operands[0].buffer_shape().equal(instr.shape, ignore_layout=True):
            _fail(instr, "custom-call to Unpin must have the same shape as the operand")
        if len(aliasing) != 1:
            _fail(instr, "custom-call to Unpin must have one output-to-operand aliasing")
        return
    by_operand: dict = {}
    by_output: dict = {}
    for output_index, operand_part in aliasing:
        by_operand[operand_part] = by_operand.get(operand_part, 0) + 1
        by_output[tuple(output_index)] = by_output.get(tuple(output_index), 0) + 1
    for n, shape in enumerate(operands):
        for index, leaf in shape.leaves():
            if not leaf.is_buffer():
                continue
            count = by_operand.get((n, index), 0)
            if count == 0:
                _fail(instr, f"buffer is used in operands but not in results: operand {n} "
                             f"ShapeIndex {{{','.join(map(str, index))}}}")
            if count > 1:
                _fail(instr, f"buffer is used in results multiple times: operand {n} "
                             f"ShapeIndex {{{','.join(map(str, index))}}}")
    for index, leaf in instr.shape.leaves():
        if not leaf.is_buffer():
            continue
        count = by_output.get(index, 0)
        if count == 0:
            _fail(instr, f"buffer is used in results but not in operands: "
                         f"{{{','.join(map(str, index))}}}")
        if count > 1:
            _fail(instr, f"buffer is used in operands multiple times: "
                         f"{{{','.join(map(str, index))}}}")


def _verify_entry_layout(module: Module) -> None:
    layout = module.config.get("entry_computation_layout")
    if layout is None:
        return
    entry = module.entry
    params = entry.parameters
    if len(layout.parameters) != len(params):
        raise VerifierError(
            f"entry_computation_layout has {len(layout.parameters)} parameters but the entry "
            f"computation %{entry.name} has {len(params)}")
    for i, (want, p) in enumerate(zip(layout.parameters, params)):
        if not want.compatible(p.shape):
            raise VerifierError(
                f"Shape of entry computation parameter {i}: {p.shape} is not compatible with "
                f"entry_computation_layout {want}")
    if not layout.result.compatible(entry.root.shape):
        raise VerifierError(
            f"Shape of entry computation root: {entry.root.shape} is not compatible with "
            f"entry_computation_layout {layout.result}")


def _verify_channels(module: Module) -> None:
    """Send/recv pair with their -done halves, sharing the channel id; a device channel
    has as many sends as recvs when both halves are in this module (as HloVerifier's
    VerifyChannels)."""
    sends: dict[int, int] = {}
    recvs: dict[int, int] = {}
    for instr in module.instructions():
        op = instr.opcode
        if op in ("send", "recv"):
            dones = [u for u in instr.users if u.opcode == op + "-done"]
            if len(dones) != 1:
                _fail(instr, f"{op} must be used by exactly one {op}-done, found {len(dones)}")
            cid = instr.attrs.get("channel_id")
            if cid is not None and not instr.attrs.get("is_host_transfer"):
                counts = sends if op == "send" else recvs
                counts[cid] = counts.get(cid, 0) + 1
        elif op in ("send-done", "recv-done"):
            start = instr.operands[0]
            want = op[: -len("-done")]
            if start.opcode != want:
                _fail(instr, f"{op} must take a {want} as operand, got {start.opcode}")
            if start.attrs.get("channel_id") != instr.attrs.get("channel_id"):
                _fail(instr, f"{op} has channel_id={instr.attrs.get('channel_id')} but its "
                             f"{want} has channel_id={start.attrs.get('channel_id')}")
    for cid in sends.keys() & recvs.keys():
        if sends[cid] != recvs[cid]:
            raise VerifierError(f"channel {cid} has {sends[cid]} send(s) but {recvs[cid]} recv(s)")
