"""Narrow-float dots computed in f32, and integer dots in a float that holds them, as HLO.

XLA:CPU's ``FloatNormalization`` (bf16) and ``ChangeOpDataType`` (the other narrow floats)
give its dot emitter only f32 dots.

A ``dot`` whose operands are floats of at most 32 bits with at least one narrower (bf16,
f16, the f8 types), and whose result is such a float, becomes

    convert(dot(convert(a, f32), convert(b, f32)) : f32, result type)

(a convert of an f32 operand, or of an f32 result, is left out). Converting a narrow float
to f32 is exact, so the products and their f32 sum are what the CPU backend computed for
such a dot before (its library path: operands converted to f32, the sum rounded once to the
result type); only the summation order may differ, as between any two GEMMs. The rewrite
moves such dots onto the f32 kernels (generated GEMMs, native in loops) and lets the
result's convert fuse into its consumers.

**Integer dots** whose sums a float holds exactly become float dots too, exactly: a dot of
integer (or pred) operands with an integer result, k terms per sum, operands of at most A
and B in magnitude (by their types: 2^(w-1) signed, 2^w - 1 unsigned, 1 pred), sums in f32
when k * A * B <= 2^24 and in f64 when it is <= 2^53:

    convert(convert(dot(convert(a, F), convert(b, F)) : F, s32 or s64), result type)

Every product and every partial sum, in any order, is an integer of at most k * A * B in
magnitude, so F holds it exactly; the float-to-integer convert is then exact (s32 where the
bound fits it) and the last convert wraps to the result's width as the dot's own sums do
(an integer dot sums in its result type, two's complement: the exact sum taken modulo
2^width is the same number). So small s8 x s8 -> s32 dots take the f32 GEMM kernels, bit
for bit what the integer dot gives; larger bounds (s32 operands) and pred results (a pred
dot ORs its ANDs) are left alone.

**Narrow-float dots** a backend's core reads as they are (``narrow_core``; the CPU backend's
gemm_words.py: bf16 operands on an AVX512-BF16 host, denormals flushed) keep their
operands: an f32 result stays, a narrower one becomes ``convert(dot(a, b) : f32)``.

**Int8 dots** a backend's integer core takes (``integer_core``; the CPU backend's
gemm_words.py: s8/u8 operands, above its small-dot limit, on a host with AVX2) stay integer
dots: their 32-bit wrapping sums are the dot's. A result other than s32/u32 becomes an s32
dot and a convert (the wrapped 32-bit sum wraps to any narrower width alike; a 64-bit
result only where every sum fits 31 bits, else the float route above).

Dots with batch dimensions or any dimension numbers are rewritten alike (the dimension
numbers and precision config are kept). Complex and f64 dots, and sparse dots (more than
two operands), are left alone. The interpreter never runs this pass; the CPU backend's
pipeline does (backend.PIPELINE).
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


def _magnitude(et) -> int:
    """The largest magnitude of a value of integer or pred type ``et``."""
    if et == PrimitiveType.PRED:
        return 1
    bits = dtypes.bit_width(et)
    return 1 << (bits - 1) if dtypes.is_signed_integral(et) else (1 << bits) - 1


def _bound(instr: Instruction) -> int | None:
    """k * A * B (see the module docstring) of an integer dot ``instr`` of integer or pred
    operands, None for other instructions."""
    if instr.opcode != "dot" or len(instr.operands) != 2 or not instr.shape.is_array():
        return None
    if not dtypes.is_integral(instr.shape.element_type):
        return None
    lhs, rhs = instr.operands
    ets = [o.shape.element_type for o in (lhs, rhs) if o.shape.is_array()]
    if len(ets) != 2 or not all(dtypes.is_integral(t) or t == PrimitiveType.PRED
                                for t in ets):
        return None
    k = 1
    for d in instr.attrs["dot_dimension_numbers"].lhs_contracting_dimensions:
        k *= lhs.shape.dimensions[d]
    return k * _magnitude(ets[0]) * _magnitude(ets[1])


def exact_float(instr: Instruction) -> PrimitiveType | None:
    """F32 or F64 when ``instr`` is an integer dot whose sums that float holds exactly
    (see the module docstring), else None."""
    bound = _bound(instr)
    if bound is None:
        return None
    return _F32 if bound <= 1 << 24 else PrimitiveType.F64 if bound <= 1 << 53 else None


def _int32_sums(instr: Instruction, integer_core) -> bool:
    """Whether integer dot ``instr`` stays an integer dot with 32-bit sums: ``integer_core``
    (the backend's rule, see DotUpcast) takes it, and its result has at most 32 bits (the
    wrapped 32-bit sum wraps to it) or 64 bits with every sum within 31 bits."""
    bound = _bound(instr)
    if bound is None or integer_core is None or not integer_core(instr):
        return False
    return dtypes.bit_width(instr.shape.element_type) <= 32 or bound < 1 << 31


def _in_int32(instr: Instruction, comp) -> Instruction:
    """Int8 dot ``instr`` with an s32 result (u32 kept), converted to its result type."""
    from xlapy.opdefs import make_instruction

    et = instr.shape.element_type
    if et in (PrimitiveType.S32, PrimitiveType.U32):
        return instr
    attrs = dict(instr.attrs.items())
    dot = comp.add_instruction(make_instruction(
        "dot", list(instr.operands), attrs, shape=instr.shape.with_element_type(
            PrimitiveType.S32), name=f"{instr.name}.s32", metadata=instr.metadata))
    return comp.add_instruction(make_instruction(
        "convert", [dot], {}, shape=instr.shape, name=f"{instr.name}.wrap",
        metadata=instr.metadata))


def _in_float(instr: Instruction, comp, ft: PrimitiveType) -> Instruction:
    """Integer dot ``instr`` summed in float ``ft`` (exact_float's), back in its type."""
    from xlapy.opdefs import make_instruction

    def convert(x, et, name):
        return comp.add_instruction(make_instruction(
            "convert", [x], {}, shape=x.shape.with_element_type(et), name=name,
            metadata=instr.metadata))

    dot = at_f32(instr, comp, lambda et: True, to=ft)
    whole = PrimitiveType.S32 if ft == _F32 else PrimitiveType.S64
    value = convert(dot, whole, f"{instr.name}.sum")
    if instr.shape.element_type != whole:
        value = convert(value, instr.shape.element_type, f"{instr.name}.wrap")
    return value


class DotUpcast(HloPass):
    """Narrow-float dots -> f32 dots between converts; integer dots -> float dots that sum
    them exactly (see the module docstring). ``integer_core(dot) -> bool``: which integer
    dots a backend computes with wrapping 32-bit sums itself (the CPU backend's int8 core);
    those stay integer dots. ``narrow_core(dot) -> bool``: which narrow-float dots it sums
    in f32 reading the narrow operands themselves (the CPU backend's bf16 core); those keep
    their operands, an f32 dot (rounded to a narrower result)."""

    name = "dot-upcast"

    def __init__(self, integer_core=None, narrow_core=None):
        super().__init__()
        self.integer_core = integer_core
        self.narrow_core = narrow_core

    def run(self, module: Module) -> bool:
        from xlapy.opdefs import make_instruction

        changed = False
        for comp in module.computations:
            for instr in comp.post_order():
                if instr.control_predecessors or instr.control_successors:
                    continue
                if _int32_sums(instr, self.integer_core):
                    new = _in_int32(instr, comp)
                    if new is not instr:
                        comp.replace_instruction(instr, new)
                        changed = True
                    continue
                ft = exact_float(instr)
                if ft is not None:
                    comp.replace_instruction(instr, _in_float(instr, comp, ft))
                    changed = True
                    continue
                if not upcast(instr):
                    continue
                if self.narrow_core is not None and self.narrow_core(instr):
                    if instr.shape.element_type == _F32:
                        continue
                    dot = comp.add_instruction(make_instruction(
                        "dot", list(instr.operands), dict(instr.attrs.items()),
                        shape=instr.shape.with_element_type(_F32), name=f"{instr.name}.f32",
                        metadata=instr.metadata))
                else:
                    dot = at_f32(instr, comp, _narrow_float)
                new = dot if instr.shape.element_type == _F32 else comp.add_instruction(
                    make_instruction("convert", [dot], {}, shape=instr.shape,
                                     name=f"{instr.name}.round", metadata=instr.metadata))
                comp.replace_instruction(instr, new)
                changed = True
        return changed


__all__ = ["DotUpcast", "exact_float", "upcast"]
