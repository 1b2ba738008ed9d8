"""Batch-norm expansion: batch-norm-inference, batch-norm-training and batch-norm-grad become
the elementwise ops, broadcasts and sum reductions they stand for (XLA's BatchNormExpander),
so that a backend compiles them as any other code.

The formulas are the interpreter's (xlapy/interpreter/kernels/linalg.py): mean and the
population variance over every dimension but ``feature_index``, the variance of the centred
values (two passes, as the interpreter: XLA's expander takes E[x^2] - E[x]^2 instead), and
``epsilon`` as XLA stores it, a 32-bit float. f64 operands are computed in f64, every other
float type in f32 (narrow floats converted once at each end, as XLA:CPU computes them). The
interpreter computes in f64 and rounds once, so f32 results differ from its by roundings:
the expansion is not a bit-exact pass; it runs where the backend compiles, not in
``xlapy opt``'s defaults.

Left alone: operands with no elements (the interpreter's NaN means of 0/0 are kept as they
are), dynamic shapes, non-float operands (the shape rule rejects them anyway).
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.opdefs import make_instruction
from xlapy.passes.pass_manager import HloPass
from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.literal import Literal

OPCODES = frozenset({"batch-norm-inference", "batch-norm-training", "batch-norm-grad"})


def _expandable(bn: Instruction) -> bool:
    x = bn.operands[0].shape
    return (x.is_array() and not x.is_dynamic() and dtypes.is_floating(x.element_type)
            and all(int(d) > 0 for d in x.dimensions)
            and all(not o.shape.is_dynamic() for o in bn.operands))


class _Builder:
    """Adds the expansion's instructions to ``comp``, computing in ``ct``."""

    def __init__(self, comp: Computation, bn: Instruction, sums: Computation):
        self.comp, self.sums = comp, sums
        x = bn.operands[0].shape
        self.ct = PrimitiveType.F64 if x.element_type == PrimitiveType.F64 \
            else PrimitiveType.F32
        self.dims = tuple(int(d) for d in x.dimensions)
        self.fi = int(bn.attrs["feature_index"])
        self.full = Shape.array(self.ct, self.dims)
        self.feat = Shape.array(self.ct, (self.dims[self.fi],))
        self.count = int(np.prod(self.dims)) // self.dims[self.fi]

    def add(self, opcode, operands, shape, attrs=None):
        return self.comp.add_instruction(make_instruction(opcode, operands, attrs or {},
                                                          shape=shape, name=opcode))

    def wide(self, v):
        shape = Shape.array(self.ct, tuple(int(d) for d in v.shape.dimensions))
        return v if v.shape == shape else self.add("convert", [v], shape)

    def const(self, value, shape):
        c = self.add("constant", [], Shape.scalar(self.ct),
                     {"literal": Literal.scalar(value, self.ct)})
        return self.add("broadcast", [c], shape, {"dimensions": []})

    def bcast(self, v):  # a feature vector along feature_index
        return self.add("broadcast", [v], self.full, {"dimensions": [self.fi]})

    def op(self, opcode, *operands):
        return self.add(opcode, list(operands), operands[0].shape)

    def sum(self, v):  # over every dimension but feature_index
        zero = self.add("constant", [], Shape.scalar(self.ct),
                        {"literal": Literal.scalar(0, self.ct)})
        others = [d for d in range(len(self.dims)) if d != self.fi]
        return self.add("reduce", [v, zero], self.feat,
                        {"dimensions": others, "to_apply": self.sums})

    def mean(self, v):
        return self.op("divide", self.sum(v), self.const(self.count, self.feat))

    def out(self, v, shape):
        """``v`` in the result's element type and layout."""
        if v.shape.element_type != shape.element_type:
            return self.add("convert", [v], shape)
        return v if v.shape == shape else self.add("copy", [v], shape)


def _sum_computation(module: Module, ct) -> Computation:
    comp = Computation("bn_sum")
    module.add_computation(comp)
    scalar = Shape.scalar(ct)
    a = comp.add_instruction(make_instruction("parameter", [], {"parameter_number": 0},
                                              shape=scalar, name="x"))
    b = comp.add_instruction(make_instruction("parameter", [], {"parameter_number": 1},
                                              shape=scalar, name="y"))
    comp.root = comp.add_instruction(make_instruction("add", [a, b], {}, shape=scalar,
                                                      name="add"))
    return comp


def expand(bn: Instruction, sums: Computation) -> Instruction:
    """Replace one batch-norm instruction by its expansion (``sums``: a scalar add of the
    computing type); returns the instruction now standing for its result."""
    b = _Builder(bn.parent, bn, sums)
    x = b.wide(bn.operands[0])
    eps = b.const(float(np.float32(bn.attrs["epsilon"])), b.feat)
    op = bn.opcode
    if op == "batch-norm-inference":
        scale, offset, mean, var = (b.wide(o) for o in bn.operands[1:])
        centred = b.op("subtract", x, b.bcast(mean))
        y = b.op("divide", centred, b.bcast(b.op("sqrt", b.op("add", var, eps))))
        y = b.op("add", b.op("multiply", y, b.bcast(scale)), b.bcast(offset))
        result = b.out(y, bn.shape)
    elif op == "batch-norm-training":
        scale, offset = (b.wide(o) for o in bn.operands[1:])
        mean = b.mean(x)
        centred = b.op("subtract", x, b.bcast(mean))
        var = b.mean(b.op("multiply", centred, centred))
        y = b.op("divide", centred, b.bcast(b.op("sqrt", b.op("add", var, eps))))
        y = b.op("add", b.op("multiply", y, b.bcast(scale)), b.bcast(offset))
        leaves = bn.shape.tuple_shapes
        values = [b.out(v, s) for v, s in zip((y, mean, var), leaves)]
        result = b.add("tuple", values, bn.shape)
    else:  # batch-norm-grad
        scale, mean, var, dy = (b.wide(o) for o in bn.operands[1:])
        var_eps = b.op("add", var, eps)
        root = b.op("sqrt", var_eps)
        centred = b.op("subtract", x, b.bcast(mean))
        sum_dy = b.sum(dy)
        sum_dy_centred = b.sum(b.op("multiply", dy, centred))
        grad_scale = b.op("divide", sum_dy_centred, root)
        n = b.const(b.count, b.feat)
        c = b.op("divide", b.op("divide", sum_dy_centred, n), var_eps)
        d = b.op("divide", sum_dy, n)
        inner = b.op("subtract", b.op("subtract", dy, b.bcast(d)),
                     b.op("multiply", b.bcast(c), centred))
        grad_x = b.op("multiply", b.bcast(b.op("divide", scale, root)), inner)
        leaves = bn.shape.tuple_shapes
        values = [b.out(v, s) for v, s in zip((grad_x, grad_scale, sum_dy), leaves)]
        result = b.add("tuple", values, bn.shape)
    bn.parent.replace_instruction(bn, result)
    return result


class BatchNormExpander(HloPass):
    """Expands every batch-norm instruction with elements into elementwise ops and sums."""

    name = "batch-norm-expander"

    def run(self, module: Module) -> bool:
        sums: dict = {}
        changed = False
        for comp in list(module.computations):
            for instr in list(comp.instructions):
                if instr.parent is comp and instr.opcode in OPCODES and _expandable(instr):
                    ct = PrimitiveType.F64 \
                        if instr.operands[0].shape.element_type == PrimitiveType.F64 \
                        else PrimitiveType.F32
                    if ct not in sums:
                        sums[ct] = _sum_computation(module, ct)
                    expand(instr, sums[ct])
                    changed = True
        return changed


__all__ = ["BatchNormExpander", "expand"]
