"""Cumulative reduce-windows as O(n) prefix scans (jnp.cumsum/cumprod/cummax/cummin/
cumlogsumexp and lax.associative_scan's reduce-window form).

jax lowers a cumulative reduction along dimension ``d`` of length ``n`` to a reduce-window
whose window is ``n`` along ``d`` (1 elsewhere, no padding there), stride 1, no dilation, and
padding ``(n - 1, 0)`` (a forward inclusive scan), ``(0, n - 1)`` (``reverse=True``), or
``n`` instead of ``n - 1`` (exclusive scans). Evaluated literally that is n(n+1)/2 reducer
applications per row. XLA's ReduceWindowRewriter (TryOptimizeCumSumOrProd, same match:
exactly one non-trivial window dimension, size == n, padding low n-1 or n and high 0, or the
mirror) rewrites it into a blocked tree scan, assuming the reducer associative and
commutative; its float results are therefore reassociated sums, not the literal window's.

Here ``scan_form(root)`` recognises that shape and ``emit`` computes it in one pass per row:
an accumulator starts at the init value and takes the elements in scan order,
``acc = reducer(acc, x)``, each result receiving the accumulator after its own element
(inclusive). Padding ``n`` gives ``n + 1`` results, by reduce-window's semantics: forward,
result k is the accumulator before element k and result n the total (exclusive); reverse,
results 0..n-1 are the inclusive ones and result n the init value.

- Forward scans take the elements in increasing order, which is exactly the order the
  literal reduce-window applies them in (window positions in order): bit for bit the
  reduce-window emitter's results for every reducer, including non-associative and variadic
  ones (argmax-style scans).
- Reverse scans take the elements from the end; the literal window applies them from the
  output's own position upwards. The two agree for associative and commutative reducers, so
  reverse scans are only recognised for the reducers ``reduction.recognised_op`` names
  (add/multiply/maximum/minimum/and/or); float add/multiply then differ by reassociation
  only, as XLA's rewrite does (integers, min/max, and/or are exact).

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
    """(dimension, reverse, exclusive) when ``root`` is a cumulative reduce-window (see
    the module docstring), else None."""
    if root.opcode != "reduce-window":
        return None
    n_ops = len(root.operands) // 2
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
        if wd.size != n or n < 2:
            return None
        lo, hi = wd.padding_low, wd.padding_high
        if hi == 0 and lo in (n - 1, n):
            found = (d, False, lo == n)
        elif lo == 0 and hi in (n - 1, n):
            found = (d, True, hi == n)
        else:
            return None
    if found is None:
        return None
    d, _, exclusive = found  # an exclusive scan has n + 1 results: the last is the total
    want = base[:d] + (base[d] + int(exclusive),) + base[d + 1:]
    if any(tuple(int(x) for x in s.dimensions) != want for s in shapes):
        return None
    if found[1]:  # reverse: only where the order of the elements cannot matter
        reducer = red.Reducer(root.attrs["to_apply"], red._types(root))
        if n_ops != 1 or reducer.op is None:
            return None
    return found


def emit(module, name: str, root, inputs: list) -> KernelSpec:
    """The scan kernel of ``root`` (``scan_form(root)`` is not None; ``reduction.supports``
    holds): buffers as the reduction emitter's."""
    dim, reverse, exclusive = scan_form(root)
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
    before = exclusive and not reverse  # result k: the accumulator before element k
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
            kk = b.sub(c(n - 1), k, name="kk") if reverse else k
            at = b.add(row, b.add(b.mul(kk, c(inner), name="koff"), m0), name="at")
            oat = b.add(orow, b.add(b.mul(kk, c(inner)), m0), name="oat")
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
        if exclusive:  # result n: the total (forward), the init value (reverse)
            oat = b.add(orow, b.add(c(n * inner), m0), name="tot")
            with for_range(b, 0, cnt, "m") as m:
                for j in range(n_ops):
                    v = inits[j] if reverse else b.load(b.gep(accs[j], [m], inbounds=True))
                    red._store(b, fn.outs[j], b.add(oat, m), v, types[j], f"tot{j}")
    b.ret_void()
    return red._spec(name, root, inputs, outer * n_blocks, n * block)


__all__ = ["emit", "scan_form"]
