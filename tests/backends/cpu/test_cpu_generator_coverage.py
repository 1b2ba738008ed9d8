"""Every elementwise op has a CPU element generator for every element type its definition
allows: an instruction the CPU backend cannot generate runs on the interpreter's kernel
(an InterpretStep), correct but slow, and nothing else would notice.

The op definitions (xlapy.opdefs: the ELEMENTWISE trait with UNARY, BINARY or TERNARY, and
convert / bitcast-convert between every pair of types) say which element types an op takes;
``elemental.supports`` says which the CPU backend generates. What the definitions allow and
no generator implements must be a row of NOT_GENERATED with its reason: a row of REFUSED
must be refused by the interpreter too (checked here), a row of INTERPRETED is a known gap
that runs on the interpreter's kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends.cpu import elemental as el
from xlapy.errors import XlaError
from xlapy.interpreter.evaluator import evaluate
from xlapy.opdefs import make_instruction
from xlapy.opdefs.registry import BINARY, ELEMENTWISE, TERNARY, UNARY, all_opdefs
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape, dtypes

P = PrimitiveType
_DIMS = (4,)


def _class(t: PrimitiveType) -> str:
    if t == P.PRED:
        return "pred"
    if dtypes.is_complex(t):
        return "complex"
    if dtypes.is_floating(t):
        return "float"
    return "int"


_REFUSED = "the interpreter has no kernel for it either (UnimplementedError): both refuse it"

#: (opcode, type class of the operands; "a->b" for converts) -> why no generator: both
#: backends refuse these element types.
REFUSED: dict[tuple[str, str], str] = {
    ("clamp", "complex"): _REFUSED,
    ("remainder", "complex"): _REFUSED,
    ("mulhi", "pred"): _REFUSED,
    ("mulhi", "float"): _REFUSED,
    ("mulhi", "complex"): _REFUSED,
    ("shift-left", "float"): _REFUSED,
    ("shift-left", "complex"): _REFUSED,
    ("shift-right-arithmetic", "float"): _REFUSED,
    ("shift-right-arithmetic", "complex"): _REFUSED,
    ("shift-right-logical", "float"): _REFUSED,
    ("shift-right-logical", "complex"): _REFUSED,
    ("convert", "complex->pred"): _REFUSED,
    ("convert", "complex->int"): _REFUSED,
    ("convert", "complex->float"): _REFUSED,
}

#: Known gaps: the interpreter's kernel runs them on the cpu backend.
INTERPRETED: dict[tuple[str, str], str] = {
    ("bitcast-convert", "complex->complex"): "c64 -> c64 and c128 -> c128 (an identity): no "
    "complex element generator for bitcast-convert",
    ("maximum", "complex"): "no complex element generator (the interpreter's kernel: the real "
    "parts decide, as on XLA:CPU)",
    ("minimum", "complex"): "as maximum",
}

NOT_GENERATED = {**REFUSED, **INTERPRETED}


def _param(t: PrimitiveType, n: int):
    return make_instruction("parameter", [], {"parameter_number": n},
                            shape=Shape.array(t, _DIMS))


def _candidates():
    """(opcode, key class, operand types, result type) for every instruction an elementwise
    definition accepts on arrays of each type the CPU backend has."""
    types = list(el.TYPES)
    for opcode, opdef in sorted(all_opdefs().items()):
        if not opdef.has(ELEMENTWISE):
            continue
        if opcode in ("convert", "bitcast-convert"):
            for a in types:
                for b in types:
                    yield opcode, f"{_class(a)}->{_class(b)}", (a,), b
        elif opdef.has(UNARY):
            for t in types:
                yield opcode, _class(t), (t,), None
        elif opdef.has(BINARY):
            for t in types:
                yield opcode, _class(t), (t, t), None
        elif opdef.has(TERNARY):
            for t in types:
                first = P.PRED if opcode == "select" else t
                yield opcode, _class(t), (first, t, t), None


def _allowed():
    """(opcode, key, operand types, result type, instruction) the definitions accept."""
    out = []
    for opcode, key, ins, result in _candidates():
        operands = [_param(t, i) for i, t in enumerate(ins)]
        shape = Shape.array(result, _DIMS) if result is not None else None
        attrs = {"direction": "EQ"} if opcode == "compare" else None
        try:
            instr = make_instruction(opcode, operands, attrs, shape=shape)
        except XlaError:
            continue
        out.append((opcode, key, ins, result, instr))
    return out


ALLOWED = _allowed()


def test_the_sweep_sees_the_elementwise_ops():
    seen = {a[0] for a in ALLOWED}
    assert {"tanh", "add", "compare", "select", "clamp", "convert", "not", "popcnt"} <= seen
    assert len(seen) >= 55


def test_every_allowed_type_has_a_generator_or_a_reason():
    missing = sorted({(opcode, key) for opcode, key, _, _, instr in ALLOWED
                      if not el.supports(instr)})
    unexplained = [m for m in missing if m not in NOT_GENERATED]
    assert unexplained == [], "elementwise ops that would run interpreted on the cpu backend"
    stale = sorted(set(NOT_GENERATED) - set(missing))
    assert stale == [], "rows of NOT_GENERATED the CPU backend generates now: remove them"


def _text(opcode, ins, result, instr) -> str:
    params = "\n".join(f"  p{i} = {dtypes.type_name(t)}[4] parameter({i})" for i, t in enumerate(ins))
    args = ", ".join(f"p{i}" for i in range(len(ins)))
    extra = ", direction=EQ" if opcode == "compare" else ""
    return (f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {instr.shape} "
            f"{opcode}({args}){extra}\n}}\n")


@pytest.mark.parametrize("row", sorted(REFUSED))
def test_every_refused_row_is_refused_by_the_interpreter_too(row):
    cases = [a for a in ALLOWED if (a[0], a[1]) == row]
    assert cases, f"{row}: no element type of this class reaches the op"
    for opcode, _, ins, result, instr in cases:
        module = parse_hlo_module(_text(opcode, ins, result, instr))
        args = [np.zeros(_DIMS, dtypes.to_dtype(t)) for t in ins]
        with pytest.raises(XlaError):
            evaluate(module, *args)
