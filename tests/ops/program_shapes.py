"""Test helpers for the shape rules of ops that call computations: a Computation with a
given program shape (``comp(["f32[]", "f32[]"], "f32[]")``) and ``infer`` over shape texts.

The computation's root is a bare IR instruction of the result shape: the rules only read
``program_shape()``, as XLA's read ComputeProgramShape()."""

from xlapy.hlo.ir import Computation, Instruction
from xlapy.opdefs import get_opdef
from xlapy.shape import parse_shape


def shape(s):
    return parse_shape(s) if isinstance(s, str) else s


def comp(params, result, name="c"):
    c = Computation(name)
    ps = []
    for i, p in enumerate(params):
        instr = Instruction("parameter", shape(p), [], {"parameter_number": i}, f"p{i}")
        ps.append(c.add_instruction(instr))
    result = shape(result)
    same = [p for p in ps if p.shape == result]
    root = same[0] if same else c.add_instruction(Instruction("custom-call", result, ps, {}, "r"))
    c.root = root
    return c


def infer(opcode, *shapes, result=None, **attrs):
    d = get_opdef(opcode)
    return d.infer_shape([shape(s) for s in shapes], d.check_attrs(attrs),
                         None if result is None else shape(result))
