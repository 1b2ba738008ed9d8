"""Cumulative reduce-windows as O(n) prefix scans (jnp.cumsum/cumprod/cummax/cummin/
cumlogsumexp and lax.associative_scan's reduce-window form).

jax lowers a cumulative reduction along dimension ``d`` of length ``n`` to a reduce-window
whose window is ``n`` along ``d`` (1 elsewhere, no padding there), stride 1, no dilation, and
padding ``(n - 1, 0)`` (a forward inclusive scan), ``(0, n - 1)`` (``reverse=True``), or
``n`` instead of ``n - 1`` (exclusive scans). Evaluated literally that is n(n+1)/2 reducer
applications per row. The backend's ``reduce-window-rewriter`` pass (XLA's
ReduceWindowRewriter, xlapy/passes/reduce_window_rewriter.py) first rewrites every such
window longer than 16 into XLA:CPU's blocked tree of scans of at most 16 elements; what
reaches this kernel is a short forward scan, or a longer one the rewrite does not take (a
variadic reducer whose root is not a tuple instruction).

Here ``scan_form(root)`` recognises a forward scan and ``emit`` computes it in one pass per
row: an accumulator starts at the init value and takes the elements in order,
``acc = reducer(acc, x)``, each result receiving the accumulator after its own element
(inclusive); with padding ``n`` (exclusive: ``n + 1`` results) result k is the accumulator
before element k and result n the total. That is exactly the order the literal
reduce-window applies them in (window positions in order): bit for bit the reduce-window
emitter's results for every reducer, non-associative and variadic ones included. Reverse
scans are not taken: the literal window applies the elements from the output's own
position upwards, not from the end, so a running scan from the end would round floats
differently from XLA:CPU; the (short) reverse windows left by the rewrite run on the
reduce-window emitter, window by window.

Work items: one position of the dimensions before ``d`` times one block of the dimensions
after it (contiguous, up to ``reduction.BLOCK_BYTES`` of accumulators), so a scan along a
non-minor dimension updates a contiguous block of accumulators per step (vectorised) and a
scan along the last dimension is one row per work item.
"""

from __future__ import annotations

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu import reduction as red
from xlapy.backends.cpu.indexing import Index
from xlapy.backends.cpu.kernel_abi import KernelSpec, for_range


def scan_form(root):
    """(dimension, exclusive) when ``root`` is a forward cumulative reduce-window (see the
    module docstring), else None."""
    if root.opcode != "reduce-window":
        return None
    base = tuple(int(d) for d in root.operands[0].shape.dimensions)
    shapes = red._result_shapes(root)
    window = root.attrs["window"].dimensions
    if len(window) != len(base):
        return None
    found = None
    for d, wd in enumerate(window):
        if wd.window_reversal or wd.stride != 1 or wd.base_dilation != 1 or \
                wd.window_dilation != 1:
            return None
        if wd.size == 1 and wd.padding_low == 0 and wd.padding_high == 0:
            continue
        if found is not None:
            return None
        n = base[d]
        if wd.size != n or n < 2 or wd.padding_high != 0 or wd.padding_low not in (n - 1, n):
            return None
        found = (d, wd.padding_low == n)
    if found is None:
        return None
    d, exclusive = found  # an exclusive scan has n + 1 results: the last is the total
    want = base[:d] + (base[d] + int(exclusive),) + base[d + 1:]
    if any(tuple(int(x) for x in s.dimensions) != want for s in shapes):
        return None
    return found


def emit(module, name: str, root, inputs: list) -> KernelSpec:
    """The scan kernel of ``root`` (``scan_form(root)`` is not None; ``reduction.supports``
    holds): buffers as the reduction emitter's."""
    dim, exclusive = scan_form(root)
    n_ops = len(root.operands) // 2
    base = tuple(int(d) for d in root.operands[0].shape.dimensions)
    types = red._types(root)
    reducer = red.Reducer(root.attrs["to_apply"], types)
    n = base[dim]
    outer = red._prod(base[:dim])
    inner = red._prod(base[dim + 1:])
    if outer * inner * n == 0:
        return red._emit_empty(module, name, root, inputs)
    block = red.block_size(inner, types)
    n_blocks = -(-inner // block)
    fn = red._Fn(module, name, root, inputs)
    b = fn.b
    inits = red._inits(fn, root)
    accs = [fn.alloca(el.TYPES[et][1], block, f"acc{j}") for j, et in enumerate(types)]
    c = red._c
    before = exclusive  # result k: the accumulator before element k
    with for_range(b, fn.lo, fn.hi, "item") as item:
        blk = b.urem(item, c(n_blocks), name="blk") if n_blocks > 1 else c(0)
        o = b.udiv(item, c(n_blocks), name="o") if n_blocks > 1 else item
        m0 = b.mul(blk, c(block), name="m0")
        left = b.sub(c(inner), m0, name="left")
        cnt = b.select(b.icmp_signed("<", left, c(block)), left, c(block), name="cnt")
        row = b.mul(o, c(n * inner), name="row")  # linear position of (o, 0, 0)
        m_out = n + int(exclusive)  # results along the scan dimension
        orow = b.mul(o, c(m_out * inner), name="orow") if exclusive else row
        with for_range(b, 0, cnt, "init") as m:
            for j in range(n_ops):
                b.store(inits[j], b.gep(accs[j], [m], inbounds=True))
        with for_range(b, 0, n, "k") as k:
            at = b.add(row, b.add(b.mul(k, c(inner), name="koff"), m0), name="at")
            oat = b.add(orow, b.add(b.mul(k, c(inner)), m0), name="oat")
            with for_range(b, 0, cnt, "m") as m:
                pos = b.add(at, m, name="pos")
                ptrs = [b.gep(accs[j], [m], inbounds=True) for j in range(n_ops)]
                olds = [b.load(q, name=f"old{j}") for j, q in enumerate(ptrs)]
                xs = [fn.value(op, Index(b, base, linear=pos)) for op in root.operands[:n_ops]]
                news = reducer.exact(b, olds, xs)
                for j in range(n_ops):
                    b.store(news[j], ptrs[j])
                    red._store(b, fn.outs[j], b.add(oat, m), olds[j] if before else news[j],
                               types[j], f"out{j}")
        if exclusive:  # result n: the total
            oat = b.add(orow, b.add(c(n * inner), m0), name="tot")
            with for_range(b, 0, cnt, "m") as m:
                for j in range(n_ops):
                    v = b.load(b.gep(accs[j], [m], inbounds=True))
                    red._store(b, fn.outs[j], b.add(oat, m), v, types[j], f"tot{j}")
    b.ret_void()
    return red._spec(name, root, inputs, outer * n_blocks, n * block)


__all__ = ["emit", "scan_form"]
