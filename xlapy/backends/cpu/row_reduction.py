"""The kernel of a row fusion (backends/cpu/row_fusion.py): row reductions and the
elementwise work consuming them, one work item per row (XLA's row-reduction emitter running
a multi-output fusion).

For row ``i`` (the first ``p`` dimensions of the root's dimensions S, linearised), the
kernel runs, in the fused computation's order, one loop over the row's columns per row
reduction (accumulating with the reducer's reassociating update, so LLVM vectorises it as
the reduction emitter's row reductions), keeping each result in a stack slot, then one loop
writing the root's row; every other member is generated element by element
(``elemental.ElementalEmitter``, a fresh one per loop: values never cross loops), and a row
reduction read by a later loop is its slot. The row is read from memory by the first loop
and from the cache by the others (the pass bounds its length), and nothing but the root is
written: softmax and layer norm read their input once.

Buffers (``kernel_abi``): the fusion's inputs (its parameters, then its large constants),
then the root's output. Domain: the rows; cost: columns x (reductions + 1).
"""

from __future__ import annotations

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu.indexing import Index
from xlapy.backends.cpu.kernel_abi import KernelSpec, for_range
from xlapy.backends.cpu.reduction import Reducer, _c, _Fn, _store


def _dims(instr) -> tuple:
    return tuple(int(d) for d in instr.shape.dimensions)


def split_of(root) -> int:
    """The row/column split: the first reduced dimension of the fusion's row reductions."""
    reduces = [i for i in root.parent.instructions if i.opcode == "reduce"]
    return min(min(r.attrs["dimensions"]) for r in reduces)


def emit(module, name: str, root, inputs: list) -> KernelSpec:
    """The kernel computing ``root`` (the fused computation's root) row by row."""
    comp = root.parent
    full = _dims(root)
    p = split_of(root)
    cols = 1
    for d in full[p:]:
        cols *= d
    rows = 1
    for d in full[:p]:
        rows *= d
    fn = _Fn(module, name, root, inputs)
    b = fn.b
    order = comp.post_order()
    reduces = [i for i in order if i.opcode == "reduce"]
    skip = ("constant", "parameter", "reduce")
    generated = {id(m) for m in order if m.opcode not in skip}
    slots = {}
    for r in reduces:
        et = r.shape.element_type
        slots[id(r)] = fn.alloca(el.TYPES[et][1], 1, f"{r.name}.acc")

    def loader(instr, index):
        slot = slots.get(id(instr))
        if slot is not None:
            return b.load(slot, name=f"{instr.name}.row")
        return fn._load(instr, index)

    def emitter():
        return el.ElementalEmitter(b, loader, generated)

    with for_range(b, fn.lo, fn.hi, "row") as row:
        base = b.mul(row, _c(cols), name="row.base")
        for r in reduces:
            reducer = Reducer(r.attrs["to_apply"], [r.shape.element_type])
            slot = slots[id(r)]
            init = emitter().value_at(r.operands[1], Index.scalar(b))
            b.store(init, slot)
            with for_range(b, 0, cols, f"{r.name}.col") as col:
                idx = Index(b, full, linear=b.add(base, col, name="pos"))
                x = emitter().value_at(r.operands[0], idx)
                b.store(reducer.fast(b, b.load(slot), x), slot)
        with for_range(b, 0, cols, "out.col") as col:
            pos = b.add(base, col, name="pos")
            v = emitter().value_at(root, Index(b, full, linear=pos))
            _store(b, fn.outs[0], pos, v, root.shape.element_type, "out")
    b.ret_void()
    return KernelSpec(name=name, n_inputs=len(inputs), outputs=[root.shape], domain=rows,
                      cost=max(1, cols * (len(reduces) + 1)))


__all__ = ["emit", "split_of"]
