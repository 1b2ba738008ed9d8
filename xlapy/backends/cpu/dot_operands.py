"""Dot operands in an order the GEMMs read in place: the CPU backend's ``dot-operands`` pass.

XLA:CPU's layout assignment gives a dot's operands layouts its GEMM can read (each operand
a [batch, rows, columns] array of matrices with contiguous rows or columns); where an
operand's value has another layout, it inserts a copy, which fusion then makes a loop
kernel of its own (``einsum('bhqd,hde->bqhe')``: a copy fusion, the dot, a copy fusion).
This backend keeps every array row-major, so the same thing is a transpose: a dot that
neither the generated GEMMs (``gemm_kernel.form``) nor BLAS in place
(``library.native_gemm``) can run as it is - because an operand's batch, free or
contracting dimensions do not read as one strided dimension each, or its matrices have
neither contiguous rows nor contiguous columns - gets each such operand transposed first:

    dot(a, b)  ->  dot(transpose(a, perm_a), transpose(b, perm_b))

with the batch dimensions first (in the dot's order), then the free dimensions (in their
order, so the result's dimensions do not move) and the contracting ones (in the dot's
order, so they still pair), free before contracting when the operand's innermost dimension
is a contracting one and after otherwise - the order that moves the least: the innermost
dimension stays innermost and the copy moves rows of it. The dimension numbers are
renumbered to match; the result is the same array, element for element (a transpose moves
values, never rounds them). Before, such dots ran on the library's NumPy path, which made
the same copy single-threaded in Python on every call (and kept a loop containing the dot
from running natively); the transpose is a compiled parallel kernel that fusion can merge
with the operand's producer.
"""

from __future__ import annotations

from xlapy.hlo.attrs.dot import DotDimensionNumbers
from xlapy.hlo.ir import Instruction, Module
from xlapy.passes.fusion import InstructionFusion
from xlapy.passes.pass_manager import HloPass


def readable(dims, batch, free, contracting, free_first: bool) -> bool:
    """Whether an operand of ``dims`` (row-major) reads as [batch, free, contracting]
    matrices (``free_first``: the lhs's [m, k]; else the rhs's [k, n]) that BLAS reads in
    place, each group one strided dimension (``library._group``, ``blas.matrix_form``: the
    rule ``library.native_gemm`` applies)."""
    from xlapy.backends.cpu import blas, library

    strides = library._row_major_strides(dims)
    groups = [library._group(dims, strides, g) for g in (batch, free, contracting)]
    if any(g is None for g in groups):
        return False
    _, free_group, contracting_group = groups
    (rows, row_stride), (cols, col_stride) = \
        (free_group, contracting_group) if free_first else (contracting_group, free_group)
    return blas.matrix_form(rows, cols, row_stride, col_stride) is not None


def _order(dims, batch, free, contracting) -> list[int]:
    """The permutation putting an operand in the order the module docstring gives."""
    inner = next((d for d in range(len(dims) - 1, -1, -1) if dims[d] != 1), None)
    tail = free + contracting if inner in contracting else contracting + free
    return list(batch) + tail


def _sides(dot):
    lhs, rhs = dot.operands
    dn = dot.attrs["dot_dimension_numbers"]
    out = []
    for x, batch, contracting, free_first in (
            (lhs, dn.lhs_batch_dimensions, dn.lhs_contracting_dimensions, True),
            (rhs, dn.rhs_batch_dimensions, dn.rhs_contracting_dimensions, False)):
        dims = [int(d) for d in x.shape.dimensions]
        batch, contracting = list(batch), list(contracting)
        free = [d for d in range(len(dims)) if d not in batch and d not in contracting]
        out.append((x, dims, batch, free, contracting, free_first))
    return out


def rewrite(dot) -> bool:
    """Whether ``dot`` is one this pass transposes operands of (module docstring)."""
    from xlapy.backends.cpu import gemm_kernel, library

    if dot.opcode != "dot" or len(dot.operands) != 2 or not dot.shape.is_array() or \
            dot.shape.is_dynamic() or dot.control_predecessors or dot.control_successors:
        return False
    if any(not o.shape.is_array() or o.shape.is_dynamic() for o in dot.operands):
        return False
    if isinstance(gemm_kernel.form(dot), gemm_kernel.Form) or \
            library.native_gemm(dot) is not None:
        return False
    return any(not readable(dims, b, f, c, ff) for _, dims, b, f, c, ff in _sides(dot))


def _transposed(dot, comp) -> Instruction:
    from xlapy.opdefs import make_instruction

    operands, numbers = [], {}
    for side, (x, dims, batch, free, contracting, free_first) in zip(
            ("lhs", "rhs"), _sides(dot)):
        if readable(dims, batch, free, contracting, free_first):
            operands.append(x)
            numbers[side] = (batch, contracting)
            continue
        perm = _order(dims, batch, free, contracting)
        x = comp.add_instruction(make_instruction(
            "transpose", [x], {"dimensions": tuple(perm)},
            shape=x.shape.with_dimensions([dims[p] for p in perm]),
            name=f"{dot.name}.{side}", metadata=dot.metadata))
        operands.append(x)
        numbers[side] = ([perm.index(d) for d in batch], [perm.index(d) for d in contracting])
    dn = DotDimensionNumbers(lhs_contracting_dimensions=numbers["lhs"][1],
                             rhs_contracting_dimensions=numbers["rhs"][1],
                             lhs_batch_dimensions=numbers["lhs"][0],
                             rhs_batch_dimensions=numbers["rhs"][0])
    attrs = dict(dot.attrs.items())
    attrs["dot_dimension_numbers"] = dn
    return comp.add_instruction(make_instruction("dot", operands, attrs, shape=dot.shape,
                                                 name=f"{dot.name}.t", metadata=dot.metadata))


class DotOperands(HloPass):
    """Transposes the operands of dots the GEMMs cannot read in place (module docstring)."""

    name = "dot-operands"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in InstructionFusion._computations(module):
            if getattr(comp, "is_fusion_computation", False):
                continue
            for instr in comp.post_order():
                if rewrite(instr):
                    comp.replace_instruction(instr, _transposed(instr, comp))
                    changed = True
        return changed


__all__ = ["DotOperands", "readable", "rewrite"]
