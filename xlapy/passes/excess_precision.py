"""Excess precision: XLA:CPU's ``xla_allow_excess_precision`` (on by default), as a pass.

What XLA:CPU does (jaxlib 0.10.2, XLA 5a9e73cbd925; established by dumping every pass with
``XLA_FLAGS=--xla_dump_hlo_pass_re=.*`` with the flag on and off, see
tools/gen_numerics_fixtures.py): the CPU pipeline's ``FloatNormalization`` for bf16 computes
every bf16 instruction XLA:CPU has no bf16 support for (elementwise arithmetic, dot, ...) in
f32 and inserts a ``convert`` back to bf16 after it. With excess precision allowed, a user
of that instruction which is itself a ``convert`` bf16 -> f32 is not given the rounded value:
it is replaced by the f32 result (``ChangeOutputTypeThenInsertConvertBack``). So in

    e = bf16[...] exponential(s)        c = f32[...] convert(e)        d = divide(e, ...)

``c`` reads exp's f32 value unrounded, while ``d`` still reads the bf16 value. Only the
last rounding before such a convert is skipped: the converts normalization puts between
two bf16 operations (``s`` rounded to bf16 before ``exponential``) stay, and so does an
explicit f32 -> bf16 -> f32 chain in the user's HLO (``SimplifyFPConversions``, which would
remove it, runs on XLA:CPU only in its oneDNN pipeline, off by default). f16 is not
normalized on XLA:CPU (f16 programs agree bit for bit with the flag either way).

This pass makes the same value explicit in HLO, so that the CPU backend computes XLA:CPU's
default numbers with exact kernels: each ``f32 convert(h)`` whose operand ``h`` is a bf16
elementwise operation or dot becomes ``h`` computed at f32 (its bf16 operands converted to
f32, which is exact). ``h`` itself stays for its other users. Unlike the other passes in
xlapy.passes this one changes results (by design, within the precision the HLO asked for);
the interpreter never runs it, the CPU backend runs it unless excess precision is turned off
(``CpuBackend(allow_excess_precision=False)``, ``xlapy run --xla_allow_excess_precision=false``).
"""

from __future__ import annotations

from xlapy.hlo.ir import Instruction, Module
from xlapy.passes.pass_manager import HloPass
from xlapy.shape.dtypes import PrimitiveType

_LOW, _HIGH = PrimitiveType.BF16, PrimitiveType.F32

#: Elementwise opcodes whose f32 value can differ from the bf16 one rounded back (data
#: movement, comparisons and conversions cannot: nothing is rounded there).
_SKIP = frozenset({"convert", "bitcast-convert", "compare", "reduce-precision", "copy",
                   "stochastic-convert"})


def _upcast(instr: Instruction) -> bool:
    """Would XLA:CPU's bf16 FloatNormalization compute ``instr`` in f32 and round after?"""
    if not (instr.shape.is_array() and instr.shape.element_type == _LOW):
        return False
    if instr.opcode == "dot":
        return True
    from xlapy.errors import XlaError
    from xlapy.opdefs import get_opdef

    try:
        opdef = get_opdef(instr.opcode)
    except XlaError:  # an opcode without an op definition: leave it alone
        return False
    return opdef.has("elementwise") and instr.opcode not in _SKIP


def at_f32(instr: Instruction, comp, narrow=lambda et: et == _LOW, to=_HIGH) -> Instruction:
    """``instr`` computed in f32 (or float type ``to``), added to ``comp``: its array
    operands of an element type ``narrow`` accepts (bf16 by default) converted to it (exactly:
    the callers' operands are values ``to`` holds)."""
    from xlapy.opdefs import make_instruction

    suffix = to.name.lower()
    operands = []
    for op in instr.operands:
        if op.shape.is_array() and narrow(op.shape.element_type):
            op = comp.add_instruction(make_instruction(
                "convert", [op], {}, shape=op.shape.with_element_type(to),
                name=f"{op.name}.{suffix}"))
        operands.append(op)
    new = make_instruction(instr.opcode, operands, dict(instr.attrs.items()),
                           shape=instr.shape.with_element_type(to),
                           name=f"{instr.name}.{suffix}", metadata=instr.metadata)
    return comp.add_instruction(new)


class ExcessPrecision(HloPass):
    """``f32 convert(bf16 op(...))`` -> ``f32 op(f32 operands)`` (see the module docstring)."""

    name = "excess-precision"

    def run(self, module: Module) -> bool:
        from xlapy.opdefs import make_instruction

        changed = False
        for comp in module.computations:
            wide = {}  # id(h) -> h computed at f32
            for instr in comp.post_order():
                if instr.opcode != "convert" or instr.shape.element_type != _HIGH:
                    continue
                (h,) = instr.operands
                if not _upcast(h) or h.control_predecessors or h.control_successors:
                    continue
                if id(h) not in wide:
                    wide[id(h)] = (h, at_f32(h, comp))
                comp.replace_instruction(instr, wide[id(h)][1])
                changed = True
            # h's other users read the f32 value rounded, as XLA's normalization gives them:
            # one f32 instruction (the operation computed once: a row fusion keeps it for
            # both its sum and its rounded users)
            for h, h32 in wide.values():
                if h.users or h is comp.root:
                    comp.replace_instruction(h, comp.add_instruction(make_instruction(
                        "convert", [h32], {}, shape=h.shape, name=f"{h.name}.round",
                        metadata=h.metadata)))
        return changed
