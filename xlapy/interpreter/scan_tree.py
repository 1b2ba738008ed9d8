"""Cumulative reduce-windows as blocked tree scans: XLA's ReduceWindowRewriter, the rewrite
itself (the pass is ``xlapy.passes.reduce_window_rewriter``; it lives here, below the passes,
because the interpreter evaluates the same tree).

jax lowers ``cumsum``/``cumprod``/``cummax``/``cummin``/``cumlogsumexp`` (and the scans of
``lax.associative_scan``'s reduce-window form) along a dimension of length ``n`` to a
reduce-window whose window is ``n`` along that dimension and trivial elsewhere, stride 1, no
dilation, padding ``(n - 1, 0)`` (forward, inclusive), ``(0, n - 1)`` (reverse), or ``n``
instead of ``n - 1`` (exclusive: ``n + 1`` results). XLA:CPU does not evaluate that window
literally (n(n+1)/2 reducer applications per row): its ReduceWindowRewriter (run to a fixed
point, base length 16 on CPU) rewrites every such scan longer than the base length ``B``
into a tree, assuming the reducer associative and commutative as reduce-window's page lets
it:

1. the scan dimension padded with the init value to ``m * B`` elements (``m = ceil(n /
   B)``) and split into ``[m, B]`` (a reshape);
2. an *outer* scan of every block: a reduce-window of size ``B`` along the ``B`` dimension
   (padding ``B - 1`` low, or high for a reverse scan);
3. the last element of each block's scan (the first for a reverse scan): each block's total,
   ``m`` of them along the scan dimension;
4. an *inner* exclusive scan of the totals: a reduce-window of size ``m`` padded ``m``
   (``m + 1`` results), sliced to the ``m`` prefixes before each block (after it, reverse);
5. each block's scan combined with its prefix by the reducer, ``f(outer, inner)`` (a
   ``map``; for a variadic reducer, component ``i`` of its root for result ``i``);
6. reshaped back, sliced to ``n``, and an exclusive scan padded with the init value at its
   start (its end, reverse).

XLA first transposes the scan dimension to the last one and back at the end; here the
blocks are split where the dimension is (a reshape), which applies the reducer to the same
values in the same order - the same bits - without the two transposes (a scan along a
non-minor dimension then runs on contiguous rows of accumulators, ``backends.cpu.scan``).
The inner scan is itself a cumulative reduce-window, rewritten again while ``m > B``. What
remains are windows of at most ``B`` elements, which every backend evaluates in window
order - so a scan's float results are those of this tree, not of the literal window:
``jnp.cumsum`` of bf16 gives XLA:CPU's bits only this way. The CPU backend runs the pass;
the interpreter evaluates the same rewrite of the instruction (``interpreter.kernels.
reduction``), so the two and XLA:CPU agree bit for bit on cumulative reduce-windows.

The match is XLA's (TryOptimizeCumSumOrProd): exactly one non-trivial window dimension,
of length above ``B``, window size equal to it, stride 1, no dilation or reversal, the
padding above; a variadic reducer's root must be a tuple instruction. The reducer itself
is not checked (XLA's comment: the rewrite holds for the associative and commutative
reducers reduce-window assumes). XLA's other rewrite in this pass, rank-1 reduce-windows
reshaped to rank 2, changes no value and is not reproduced.
"""

from __future__ import annotations

import weakref

from xlapy.hlo.attrs.padding import PaddingConfig
from xlapy.hlo.attrs.slicing import SliceRanges
from xlapy.hlo.attrs.window import Window, WindowDimension
from xlapy.hlo.ir import Computation, Instruction, Module

#: XLA:CPU's base length (cpu_compiler: ReduceWindowRewriter(16)).
CPU_BASE_LENGTH = 16


def scan_window(rw: Instruction, base_length: int = CPU_BASE_LENGTH):
    """``(dimension, forward, exclusive)`` when ``rw`` is a reduce-window the rewrite
    applies to (the module docstring's match), else None."""
    if rw.opcode != "reduce-window" or base_length <= 1:
        return None
    n_in = len(rw.operands) // 2
    operand = rw.operands[0].shape
    if not operand.is_array() or operand.is_dynamic():
        return None
    dims = [int(d) for d in operand.dimensions]
    window = rw.attrs["window"].dimensions
    if len(window) != len(dims):
        return None
    found = [d for d, wd in enumerate(window) if not wd.is_trivial]
    if len(found) != 1:
        return None
    d = found[0]
    n, wd = dims[d], window[d]
    if n <= base_length:
        return None
    root = rw.attrs["to_apply"].root
    if n_in > 1 and (root is None or root.opcode != "tuple"):
        return None
    lo, hi = wd.padding_low, wd.padding_high
    forward = lo in (n - 1, n) and hi == 0
    reverse = hi in (n - 1, n) and lo == 0
    if (wd.stride != 1 or wd.size != n or not (forward or reverse) or wd.window_reversal
            or wd.base_dilation != 1 or wd.window_dilation != 1):
        return None
    return d, forward, (lo if forward else hi) == n


class _Emit:
    """Adds instructions to ``comp`` (shapes inferred), named after the rewritten one."""

    def __init__(self, comp: Computation, rw: Instruction):
        self.comp, self.name, self.metadata = comp, rw.name, rw.metadata

    def __call__(self, opcode: str, operands, attrs=None, shape=None) -> Instruction:
        from xlapy.opdefs import make_instruction

        return self.comp.add_instruction(make_instruction(
            opcode, list(operands), attrs or {}, shape=shape, name=f"{self.name}.{opcode}",
            metadata=self.metadata))

    def window(self, rank: int, axis: int, size: int, pad: int, forward: bool) -> Window:
        dims = [WindowDimension(1)] * rank
        dims[axis] = WindowDimension(size, padding_low=pad if forward else 0,
                                     padding_high=0 if forward else pad)
        return Window(tuple(dims))

    def reduce_window(self, inputs, inits, window, to_apply):
        return self("reduce-window", list(inputs) + list(inits),
                    {"window": window, "to_apply": to_apply})

    def parts(self, value: Instruction, count: int) -> list[Instruction]:
        if count == 1:
            return [value]
        return [self("get-tuple-element", [value], {"index": i}) for i in range(count)]

    def slice(self, x: Instruction, axis: int, start: int, limit: int) -> Instruction:
        dims = [int(d) for d in x.shape.dimensions]
        starts, limits = [0] * len(dims), list(dims)
        starts[axis], limits[axis] = start, limit
        return self("slice", [x], {"slice": SliceRanges.of(starts, limits)})

    def pad(self, x: Instruction, value: Instruction, axis: int, low: int, high: int):
        config = [(0, 0)] * x.shape.rank
        config[axis] = (low, high)
        return self("pad", [x, value], {"padding": PaddingConfig.of(config)})

    def reshape(self, x: Instruction, dims) -> Instruction:
        return self("reshape", [x], shape=x.shape.with_dimensions(list(dims)))


def _component(to_apply: Computation, index: int, module: Module | None) -> Computation:
    """``to_apply`` with component ``index`` of its tuple root as the root (every
    parameter kept): the function combining result ``index``."""
    comp = to_apply.clone(suffix=f"component{index}")
    comp.root = comp.root.operands[index]
    comp.remove_dead_instructions(keep=lambda i: i.opcode == "parameter")
    if module is not None:
        module.add_computation(comp)
    return comp


def rewrite(rw: Instruction, base_length: int = CPU_BASE_LENGTH) -> Instruction | None:
    """Replace the cumulative reduce-window ``rw`` by its tree scan (module docstring);
    returns the instruction now standing for it, or None when the rewrite does not apply.
    New reduce-windows of the tree may match again (run to a fixed point)."""
    form = scan_window(rw, base_length)
    if form is None:
        return None
    dim, forward, exclusive = form
    comp = rw.parent
    emit = _Emit(comp, rw)
    count = len(rw.operands) // 2
    sources, inits = list(rw.operands[:count]), list(rw.operands[count:])
    to_apply: Computation = rw.attrs["to_apply"]
    dims = [int(d) for d in sources[0].shape.dimensions]
    rank, n, b = len(dims), dims[dim], base_length
    m = -(-n // b)
    if m * b != n:
        sources = [emit.pad(x, v, dim, 0, m * b - n) for x, v in zip(sources, inits)]
    padded = [int(d) for d in sources[0].shape.dimensions]
    blocks = dims[:dim] + [m] + dims[dim + 1:]  # one element per block
    tiled = [emit.reshape(x, dims[:dim] + [m, b] + dims[dim + 1:]) for x in sources]
    outer = emit.parts(emit.reduce_window(
        tiled, inits, emit.window(rank + 1, dim + 1, b, b - 1, forward), to_apply), count)
    edge = b - 1 if forward else 0
    totals = [emit.reshape(emit.slice(o, dim + 1, edge, edge + 1), blocks) for o in outer]
    inner = emit.parts(emit.reduce_window(
        totals, inits, emit.window(rank, dim, m, m, forward), to_apply), count)
    start = 0 if forward else 1
    kept = [d for d in range(rank + 1) if d != dim + 1]
    prefixes = [emit("broadcast", [emit.slice(p, dim, start, start + m)],
                     {"dimensions": kept}, shape=o.shape) for p, o in zip(inner, outer)]
    module = comp.module
    results = []
    for i in range(count):
        combine = to_apply if count == 1 else _component(to_apply, i, module)
        scan = emit("map", outer + prefixes,
                    {"dimensions": list(range(rank + 1)), "to_apply": combine})
        scan = emit.reshape(scan, padded)
        if m * b != n:
            scan = emit.slice(scan, dim, 0, n)
        if exclusive:
            scan = emit.pad(scan, inits[i], dim, 1 if forward else 0, 0 if forward else 1)
        results.append(scan)
    out = results[0] if count == 1 else emit("tuple", results)
    comp.replace_instruction(rw, out)
    return out


def rewrite_all(comps, base_length: int) -> bool:
    """Rewrite the matching reduce-windows of ``comps`` until none is left (the inner scans
    of a tree may match again); whether any was."""
    changed = False
    while True:
        found = False
        for comp in comps:
            for instr in comp.post_order():
                if rewrite(instr, base_length) is not None:
                    found = True
        if not found:
            return changed
        changed = True


_TREES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tree_scan(rw: Instruction, base_length: int = CPU_BASE_LENGTH) -> Computation:
    """A computation of ``rw``'s operands computing ``rw`` as the rewrite does (for
    ``scan_window(rw)`` not None): the interpreter evaluates it in place of the literal
    window. Built once per instruction."""
    key = (base_length, rw.attrs["window"], tuple(o.shape for o in rw.operands))
    cached = _TREES.get(rw)
    if cached is not None and cached[0] == key:
        return cached[1]
    from xlapy.opdefs import make_instruction

    comp = Computation(f"{rw.name}.tree_scan")
    params = [comp.add_instruction(make_instruction("parameter", [], {"parameter_number": i},
                                                    shape=o.shape, name=f"p{i}"))
              for i, o in enumerate(rw.operands)]
    comp.set_root(comp.add_instruction(rw.clone(params)))
    rewrite_all([comp], base_length)
    _TREES[rw] = (key, comp)
    return comp


__all__ = ["CPU_BASE_LENGTH", "rewrite", "rewrite_all", "scan_window", "tree_scan"]
