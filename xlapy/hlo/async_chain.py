"""Async chains: how an async-update / async-done finds its async-start and the wrapped
computation, and the ``<op>-start`` / ``<op>-update`` / ``<op>-done`` syntax sugar.

Owns: the sugar spelling (``split_async_sugar``, ``sugared_opcode``), the data-flow walk
from an async op's first operand to the async op that produced it (XLA's
FindAsyncChainProducer: through get-tuple-element, tuple, opt-barrier, copy, and across a
while loop's body parameter and result), ``async_chain_start``,
``async_wrapped_computation``, ``can_expand_into_single_instruction`` and
``is_async_computation``. The parser and the printer use these; imports only the IR.
"""

from __future__ import annotations

from xlapy.hlo.ir import Computation, Instruction
from xlapy.hlo.opcodes import ASYNC_OPCODES, OPCODE_NAMES

#: Ops that have their own asynchronous opcodes (all-gather-start, copy-start, send...):
#: XLA's parser gives them no ``-start``/``-update``/``-done`` sugar.
NO_ASYNC_SUGAR = frozenset({"all-gather", "all-reduce", "collective-permute", "copy", "recv",
                            "send"})

_SUFFIXES = (("-start", "async-start"), ("-update", "async-update"), ("-done", "async-done"))
_SUFFIX_OF = {opcode: suffix for suffix, opcode in _SUFFIXES}


def split_async_sugar(text: str) -> tuple[str, str] | None:
    """``custom-call-start`` -> ``("async-start", "custom-call")``; None when ``text``
    has no async suffix. Raises ValueError (with the reason) for a suffix on an opcode
    that has no sugared form or is not an opcode."""
    for suffix, async_opcode in _SUFFIXES:
        if text.endswith(suffix):
            wrapped = text[: -len(suffix)]
            if wrapped in NO_ASYNC_SUGAR:
                raise ValueError(f"expects opcode but sees: {text}, error: Unknown opcode: "
                                 f"{text} ({wrapped} has its own async opcodes and no "
                                 f"'{suffix}' async-wrapped form)")
            if wrapped in ASYNC_OPCODES:
                raise ValueError(f"expects opcode but sees: {text}, error: Unknown opcode: "
                                 f"{text} (an async op cannot be async-wrapped)")
            if wrapped not in OPCODE_NAMES:
                raise ValueError(f"expects async wrapped opcode but sees: {text}, error: "
                                 f"Unknown opcode: {wrapped}")
            return async_opcode, wrapped
    return None


def sugared_opcode(async_opcode: str, wrapped_opcode: str) -> str:
    """``("async-done", "custom-call")`` -> ``custom-call-done``."""
    return wrapped_opcode + _SUFFIX_OF[async_opcode]


def can_expand_into_single_instruction(comp: Computation) -> bool:
    """Every instruction of ``comp`` is a parameter or the root
    (HloComputation::CanExpandIntoSingleInstruction)."""
    return all(i is comp.root or i.opcode == "parameter" for i in comp.instructions)


def _while_callers(comp: Computation) -> list[Instruction]:
    module = comp.module
    if module is None:
        return []
    return [i for c in module.computations for i in c.instructions
            if i.opcode == "while" and i.attrs.get("body") is comp]


def _producer(instr: Instruction, index: list[int], visited: set[int],
              is_target) -> Instruction | None:
    """The async op whose value reaches ``instr`` at tuple path ``index`` (innermost
    index last), following XLA's FindAsyncChainDataflow. A depth-first search with
    backtracking; each step is a generator (``_step``) yielding the ``(instruction,
    index)`` it looks at next and getting what was found there, driven here with a stack
    (a long chain of get-tuple-elements or copies needs no recursion)."""
    stack = [_step(instr, index, visited, is_target)]
    found = None
    while stack:
        try:
            operand, sub_index = stack[-1].send(found)
        except StopIteration as done:
            stack.pop()
            found = done.value
            continue
        stack.append(_step(operand, sub_index, visited, is_target))
        found = None
    return found


def _step(instr: Instruction, index: list[int], visited: set[int], is_target):
    """One step of _producer's search at ``instr``: a generator (see there)."""
    if instr is None or id(instr) in visited:
        return None
    visited.add(id(instr))
    if is_target(instr):
        return instr
    found = None
    op = instr.opcode
    if op == "get-tuple-element":
        found = (yield instr.operands[0], index + [instr.attrs["index"]])
    elif op == "opt-barrier" and len(instr.operands) == 1:
        found = (yield instr.operands[0], index)
    elif op in ("tuple", "opt-barrier"):
        if not index:
            for operand in instr.operands:
                found = (yield operand, index)
                if found is not None:
                    break
        elif 0 <= index[-1] < len(instr.operands):
            found = (yield instr.operands[index[-1]], index[:-1])
    elif op == "copy" and instr.operands:
        found = (yield instr.operands[0], index)
    elif op == "parameter" and instr.parent is not None:
        callers = _while_callers(instr.parent)
        if len(callers) == 1:
            loop = callers[0]
            found = (yield loop.operands[0], index)
            if found is None and instr.parent.root is not None:
                found = (yield instr.parent.root, index)
    elif op == "while":
        body = instr.attrs.get("body")
        if body is not None and body.root is not None:
            found = (yield body.root, index)
        if found is None and instr.operands:
            found = (yield instr.operands[0], index)
    if found is None:
        visited.discard(id(instr))
    return found


def find_async_producer(instr: Instruction) -> Instruction | None:
    """The async-start or async-update whose result flows into ``instr``
    (FindAsyncChainProducer)."""
    return _producer(instr, [], set(), lambda i: i.opcode in ("async-start", "async-update"))


def async_chain_start(instr: Instruction) -> Instruction | None:
    """The async-start of the chain ``instr`` (an async op) belongs to, or None."""
    if instr.opcode == "async-start":
        return instr
    if not instr.operands:
        return None
    return chain_start_of_value(instr.operands[0])


def chain_start_of_value(value: Instruction) -> Instruction | None:
    """The async-start whose chain produced ``value`` (the first operand an async-update
    or async-done would take), or None (FindAsyncStart)."""
    producer = find_async_producer(value)
    seen = set()
    while producer is not None and producer.opcode == "async-update":
        if id(producer) in seen or not producer.operands:
            return None
        seen.add(id(producer))
        producer = find_async_producer(producer.operands[0])
    return producer


def async_wrapped_computation(instr: Instruction) -> Computation | None:
    """The computation an async op runs: its own ``calls=``, its chain start's, or the
    nearest upstream async op's (HloAsyncInstruction::async_wrapped_computation)."""
    if instr.opcode not in ASYNC_OPCODES:
        return None
    own = instr.attrs.get("calls")
    if own is not None:
        return own
    start = async_chain_start(instr)
    if start is not None and start.attrs.get("calls") is not None:
        return start.attrs["calls"]
    seen = set()
    current = instr
    while current.operands and id(current) not in seen:
        seen.add(id(current))
        producer = find_async_producer(current.operands[0])
        if producer is None:
            return None
        if producer.attrs.get("calls") is not None:
            return producer.attrs["calls"]
        current = producer
    return None


def is_async_computation(comp: Computation) -> bool:
    """Called by an async op (HloComputation::IsAsyncComputation)."""
    module = comp.module
    if module is None:
        return False
    return any(i.opcode in ASYNC_OPCODES and i.attrs.get("calls") is comp
               for c in module.computations for i in c.instructions)
