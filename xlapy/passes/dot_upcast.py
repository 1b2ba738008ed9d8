"""Narrow-float dots computed in f32, as HLO: XLA:CPU's ``FloatNormalization`` (bf16) and
``ChangeOpDataType`` (the other narrow floats) give its dot emitter only f32 dots.

A ``dot`` whose operands are floats of at most 32 bits with at least one narrower (bf16,
f16, the f8 types), and whose result is such a float, becomes

    convert(dot(convert(a, f32), convert(b, f32)) : f32, result type)

(a convert of an f32 operand, or of an f32 result, is left out). Converting a narrow float
to f32 is exact, so the products and their f32 sum are what the CPU backend computed for
such a dot before (its library path: operands converted to f32, the sum rounded once to the
result type); only the summation order may differ, as between any two GEMMs. The rewrite
moves such dots onto the f32 kernels (generated GEMMs, native in loops) and lets the
result's convert fuse into its consumers.

Dots with batch dimensions or any dimension numbers are rewritten alike (the dimension
numbers and precision config are kept). Integer, complex and f64 dots, and sparse dots
(more than two operands), are left alone. The interpreter never runs this pass; the CPU
backend's pipeline does (backend.PIPELINE).
"""

from __future__ import annotations

from xlapy.hlo.ir import Instruction, Module
from xlapy.passes.excess_precision import at_f32
from xlapy.passes.pass_manager import HloPass
from xlapy.shape import dtypes
from xlapy.shape.dtypes import PrimitiveType

_F32 = PrimitiveType.F32


def _narrow_float(et) -> bool:
    return dtypes.is_floating(et) and dtypes.bit_width(et) < 32


def upcast(instr: Instruction) -> bool:
    """Whether ``instr`` is a dot this pass computes in f32."""
    if instr.opcode != "dot" or len(instr.operands) != 2 or not instr.shape.is_array():
        return False
    types = [instr.shape.element_type] + [o.shape.element_type for o in instr.operands
                                          if o.shape.is_array()]
    if len(types) != 3:
        return False
    if not all(t == _F32 or _narrow_float(t) for t in types):
        return False
    return any(_narrow_float(t) for t in types)


class DotUpcast(HloPass):
    """Narrow-float dots -> f32 dots between converts (see the module docstring)."""

    name = "dot-upcast"

    def run(self, module: Module) -> bool:
        from xlapy.opdefs import make_instruction

        changed = False
        for comp in module.computations:
            for instr in comp.post_order():
                if not upcast(instr) or instr.control_predecessors or \
                        instr.control_successors:
                    continue
                dot = at_f32(instr, comp, _narrow_float)
                new = dot if instr.shape.element_type == _F32 else comp.add_instruction(
                    make_instruction("convert", [dot], {}, shape=instr.shape,
                                     name=f"{instr.name}.round", metadata=instr.metadata))
                comp.replace_instruction(instr, new)
                changed = True
        return changed


__all__ = ["DotUpcast", "upcast"]
