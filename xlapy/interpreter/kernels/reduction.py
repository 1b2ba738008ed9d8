"""Kernels of the reductions: reduce, reduce-window, select-and-scatter, and map.

Called computations (reducers, select/scatter functions, map functions) are evaluated on
whole arrays: a computation made of elementwise ops on scalar parameters computes the same
thing element by element when its parameters are given equally shaped arrays, so one
``ctx.call`` combines many pairs at once (``apply_computation``). A computation that is not
elementwise on its parameters (it contains a reduce, a while loop, a broadcast, ...) or whose
vectorised result has the wrong shape is run element by element instead.

Semantics (XLA's HLO semantics, as its reference evaluator and XLA:CPU implement them):
- reduce: the reducer combines accumulators (its first N parameters) with inputs (its last N).
  Up to FOLD_LIMIT (64) elements per output are a left fold in row-major order,
  f(...f(f(init, x0), x1)..., x_{K-1}) - the order of XLA's evaluator and of XLA:CPU's loops
  (through jax, f(a, b) = 10a + b over 1..6 gives 123456 and bf16 sums round at each step
  in that order). Longer reductions, which the page lets backends reassociate, are a
  pairwise tree keeping element order (the left operand is the earlier part), then
  ``f(init, tree)``. A size-0 reduced dimension gives the init value. The init value is
  combined exactly once, as in XLA's evaluator; XLA:CPU may combine a non-identity init
  several times in long reductions (one per vector accumulator) or not at all (a reduce
  without reduced dimensions) - the page requires init to be an identity.
- reduce-window: windows over the base dilated by ``lhs_dilate`` and padded; positions that
  fall in padding or dilation holes are skipped (not combined), as XLA's evaluator and
  XLA:CPU do (checked through jax: a sum window with init 100 over two padding elements and
  one element 1 gives 101); a window without any element gives the init value. Windows are
  read from strided views of a dilated, padded copy of the operand when that copy is small,
  else through index tables (``window_tables``) whose size grows with the output and the
  operand, never with the window, stride, dilation or padding sizes. A cumulative window
  longer than 16 (``jnp.cumsum``'s: one non-trivial window dimension as long as the
  operand's, padded for a scan) is evaluated as XLA:CPU evaluates it, through the blocked
  tree scan its ReduceWindowRewriter makes of it (``interpreter.scan_tree``; the
  CPU backend runs the pass): windows of at most 16 in window order, block totals scanned
  the same way, then combined - so float scans give XLA:CPU's bits, in O(n) per row.
- select-and-scatter: per window the select function (selected, current) -> keep selected
  is applied in window (row-major) order to the elements inside the base (padding skipped),
  so ties go to the first element in row-major order, as the page (select's first argument
  has the lexicographically smaller index) and XLA's evaluator say. XLA:CPU agrees on
  windows without padding; with padding its reduce-window loops may visit a window column
  by column (seen through jax), which changes which of equal elements is chosen. The scatter
  function is called as scatter(current output value, source value), the page's parameter
  order (XLA:CPU agrees: a subtract scatter gives init - source), in source row-major order
  for elements selected several times.
- map: the computation applied elementwise.
"""

from __future__ import annotations

import weakref

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.window import Window, dilated_bound, strided_bound
from xlapy.hlo.ir import callees_first
from xlapy.interpreter.evaluator import EvaluationError
from xlapy.interpreter.registry import kernel
from xlapy.opdefs import get_opdef
from xlapy.opdefs.registry import ELEMENTWISE
from xlapy.shape import dtypes

# -- evaluating a scalar computation on arrays -------------------------------------------------

# Opcodes a vectorisable computation may contain besides the elementwise ones: structure and
# data movement, which on scalars pass values through.
_STRUCTURAL = {"parameter", "constant", "tuple", "get-tuple-element", "call", "copy", "bitcast",
               "reshape", "broadcast", "opt-barrier"}

#: computation -> (its instruction count, vectorisable). Weak keys: an entry goes with its
#: computation, so the cache keeps no module (nor its constants) alive.
_vectorisable_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scalar_shaped(shape) -> bool:
    return all(leaf.is_array() and leaf.rank == 0 for _, leaf in shape.leaves())


def is_vectorisable(comp) -> bool:
    """True when ``comp`` only has scalar-shaped elementwise instructions, structure and data
    movement on scalars, and calls of such computations, so it computes elementwise when its
    parameters are arrays (the one rule of every kernel that applies a scalar computation to
    arrays: reduce, reduce-window, map, scatter...). The called computations are decided
    first (callees_first: a call chain needs no recursion)."""
    got = _cached(comp)
    if got is not None:
        return got
    for c in callees_first([comp]):
        if _cached(c) is None:
            _vectorisable_cache[c] = (len(c.instructions), _vectorisable_here(c))
    return _vectorisable_cache[comp][1]


def _cached(comp) -> bool | None:
    got = _vectorisable_cache.get(comp)
    if got is not None and got[0] == len(comp.instructions):
        return got[1]
    return None


def _vectorisable_here(comp) -> bool:
    """is_vectorisable's test of ``comp``'s own instructions (its callees decided already)."""
    ok = True
    for instr in comp.instructions:
        if not _scalar_shaped(instr.shape):
            ok = False
        elif instr.opcode == "call":
            ok = all(_cached(c) is True for c in instr.called_computations())
        elif instr.opcode in _STRUCTURAL:
            ok = True
        elif instr.opcode == "stochastic-convert":  # its random bits operand: element by element
            ok = False
        else:
            try:
                ok = get_opdef(instr.opcode).has(ELEMENTWISE)
            except InvalidArgumentError:  # no definition: run it element by element
                ok = False
            if ok and instr.opcode == "bitcast-convert":  # a width change changes the shape
                ok = (_scalar_shaped(instr.operands[0].shape)
                      and dtypes.bit_width(instr.shape.element_type)
                      == dtypes.bit_width(instr.operands[0].shape.element_type))
        if not ok:
            break
    return ok


def _result_dtypes(comp) -> list[np.dtype]:
    shape = comp.root.shape
    shapes = shape.tuple_shapes if shape.is_tuple() else (shape,)
    return [dtypes.to_dtype(s.element_type) for s in shapes]


def _leaves(value, n: int, what: str) -> list:
    if isinstance(value, tuple):
        if len(value) != n:
            raise EvaluationError(f"{what}: the computation returned {len(value)} values, "
                                  f"expected {n}")
        return list(value)
    if n != 1:
        raise EvaluationError(f"{what}: the computation returned one value, expected {n}")
    return [value]


def _fit(leaf, shape: tuple[int, ...], dtype: np.dtype):
    """The leaf as an array of ``shape`` and ``dtype``, or None if it cannot be one."""
    if isinstance(leaf, np.generic):
        leaf = np.asarray(leaf)
    if not isinstance(leaf, np.ndarray) or leaf.dtype != dtype:
        return None
    if leaf.shape == shape:
        return leaf
    if leaf.ndim == 0:
        return np.broadcast_to(leaf, shape).copy()
    return None


def apply_computation(ctx, comp, args: list, shape: tuple[int, ...], what: str) -> list:
    """Evaluate ``comp`` elementwise over arrays ``args`` (each of ``shape`` or 0-d) and
    return its result leaves (a list: one per tuple element, or one), each of ``shape``."""
    dts = _result_dtypes(comp)
    n = len(dts)
    args = [np.asarray(a) for a in args]
    if is_vectorisable(comp):
        full = [a if a.shape == shape else np.broadcast_to(a, shape).copy() for a in args]
        try:
            with np.errstate(all="ignore"):
                result = ctx.call(comp, full)
        except (EvaluationError, ValueError):
            result = None  # a kernel that only takes scalars: the loop below repeats any
            #                genuine error with scalar arguments
        if result is not None:
            leaves = _leaves(result, n, what)
            fitted = [_fit(leaf, shape, dt) for leaf, dt in zip(leaves, dts)]
            if all(f is not None for f in fitted):
                return fitted
    return _apply_elementwise_loop(ctx, comp, args, shape, dts, what)


def _apply_elementwise_loop(ctx, comp, args, shape, dts, what) -> list:
    """The computation called once per element (computations that are not elementwise)."""
    n = len(dts)
    outs = [np.empty(shape, dt) for dt in dts]
    flat_args = [np.broadcast_to(a, shape).reshape(-1) if a.shape == shape or a.ndim == 0
                 else None for a in args]
    if any(a is None for a in flat_args):
        raise EvaluationError(f"{what}: argument shapes {[a.shape for a in args]} do not "
                              f"match {shape}")
    flat_outs = [o.reshape(-1) for o in outs]
    for i in range(int(np.prod(shape, dtype=np.int64))):
        scalars = [a[i:i + 1].reshape(()) for a in flat_args]
        leaves = _leaves(ctx.call(comp, scalars), n, what)
        for o, leaf in zip(flat_outs, leaves):
            o[i] = np.asarray(leaf).reshape(())
    return outs


# -- reduce -------------------------------------------------------------------------------------


def _input_dtypes(comp, n: int) -> list[np.dtype]:
    params = comp.program_shape().parameters
    return [dtypes.to_dtype(p.element_type) for p in params[n:2 * n]]


#: Reductions of up to this many elements per output are a left fold in row-major order;
#: longer ones a pairwise tree (log2 of the length vectorised calls).
FOLD_LIMIT = 64


def reduce_last_axis(ctx, comp, inits: list, leaves: list, mask, result_dtypes, what: str) -> list:
    """Reduce the last axis of each array in ``leaves`` (the N inputs, shape (..., K)) with
    the reducer ``comp`` and the N ``inits``. ``mask`` (shape (..., K), or None when every
    element exists) marks the elements that exist; the others (window padding, dilation
    holes) are skipped. Returns the N results of shape (...)."""
    out_shape = leaves[0].shape[:-1]
    k = leaves[0].shape[-1]
    init_full = [np.broadcast_to(np.asarray(i).astype(dt), out_shape)
                 for i, dt in zip(inits, result_dtypes)]
    if k == 0 or 0 in out_shape:
        return [np.array(x) for x in init_full]
    if k <= FOLD_LIMIT:
        # f(...f(f(init, x0), x1)..., x_{K-1}): the evaluator's (and XLA:CPU's) order
        acc = [np.array(x) for x in init_full]
        for j in range(k):
            step = apply_computation(ctx, comp, acc + [x[..., j] for x in leaves], out_shape,
                                     what)
            if mask is None:
                acc = step
            else:
                p = mask[..., j]
                acc = [np.where(p, new, old) for new, old in zip(step, acc)]
        return [a.astype(dt, copy=False) for a, dt in zip(acc, result_dtypes)]
    reduced, present = _tree(ctx, comp, leaves, mask, what)
    out = apply_computation(ctx, comp, [np.asarray(i) for i in inits] + reduced, out_shape, what)
    if present is not None:
        out = [np.where(present, o, i) for o, i in zip(out, init_full)]
    return [o.astype(dt, copy=False) for o, dt in zip(out, result_dtypes)]


def _tree(ctx, comp, leaves: list, mask, what: str):
    """Combine the last axis pairwise, keeping element order (the left operand of each
    combination is the earlier part); absent elements (mask false) are skipped. Returns
    (leaves without the last axis, presence or None)."""
    while leaves[0].shape[-1] > 1:
        k = leaves[0].shape[-1]
        half = k // 2
        left = [x[..., 0:2 * half:2] for x in leaves]
        right = [x[..., 1:2 * half:2] for x in leaves]
        combined = apply_computation(ctx, comp, left + right, left[0].shape, what)
        if mask is not None:
            ml, mr = mask[..., 0:2 * half:2], mask[..., 1:2 * half:2]
            both = ml & mr
            combined = [np.where(both, c, np.where(ml, a, b))
                        for c, a, b in zip(combined, left, right)]
            new_mask = ml | mr
        if k % 2:
            combined = [np.concatenate([c, x[..., -1:]], axis=-1)
                        for c, x in zip(combined, leaves)]
            if mask is not None:
                new_mask = np.concatenate([new_mask, mask[..., -1:]], axis=-1)
        leaves = combined
        if mask is not None:
            mask = new_mask
    out_shape = leaves[0].shape[:-1]
    return ([x.reshape(out_shape) for x in leaves],
            None if mask is None else mask.reshape(out_shape))


def _pack(values: list, instr):
    return tuple(values) if instr.shape.is_tuple() else values[0]


@kernel("reduce")
def reduce_kernel(ctx, instr, args):
    n = len(args) // 2
    inputs, inits = args[:n], args[n:]
    comp = instr.attrs["to_apply"]
    dims = list(instr.attrs["dimensions"])
    what = f"reduce %{instr.name}"
    rank = inputs[0].ndim
    keep = [d for d in range(rank) if d not in dims]
    base = inputs[0].shape
    out_shape = tuple(base[d] for d in keep)
    k = int(np.prod([base[d] for d in dims], dtype=np.int64))
    result_dtypes = _result_dtypes(comp)
    in_dtypes = _input_dtypes(comp, n)
    leaves = []
    for x, dt in zip(inputs, in_dtypes):
        if x.shape != base:
            raise EvaluationError(f"{what}: the inputs have different dimensions "
                                  f"{[a.shape for a in inputs]}")
        moved = np.transpose(x, keep + dims).reshape(out_shape + (k,))
        leaves.append(moved if moved.dtype == dt else moved.astype(dt))
    return _pack(reduce_last_axis(ctx, comp, inits, leaves, None, result_dtypes, what), instr)


# -- windows ------------------------------------------------------------------------------------


def dilate_and_pad(x: np.ndarray, axes, window: Window, fill, *, with_mask: bool):
    """The base of a window: ``x`` with ``base_dilation - 1`` holes between neighbours and
    ``padding_low/high`` elements added (negative padding removes elements) along ``axes``
    (one per window dimension). Holes and padding hold ``fill``. Returns (array, mask of
    the positions that hold an element of x, or None when with_mask is false)."""
    shape = list(x.shape)
    dst, src = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for axis, wd in zip(axes, window.dimensions):
        n, bd, lo = x.shape[axis], wd.base_dilation, wd.padding_low
        size = max(lo + dilated_bound(n, bd) + wd.padding_high, 0)
        shape[axis] = size
        # element k lands at lo + k * bd; keep the k with 0 <= lo + k * bd < size
        k0 = 0 if lo >= 0 else (-lo + bd - 1) // bd
        k1 = min(n, (size - 1 - lo) // bd + 1) if size > 0 else 0
        if k1 <= k0:
            src[axis] = slice(0, 0)
            dst[axis] = slice(0, 0)
        else:
            src[axis] = slice(k0, k1)
            start = lo + k0 * bd
            dst[axis] = slice(start, start + (k1 - k0 - 1) * bd + 1, bd)
    out = np.full(shape, fill, dtype=x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    mask = None
    if with_mask:
        mask = np.zeros(shape, dtype=bool)
        mask[tuple(dst)] = True
    return out, mask


def window_output_dims(padded_shape, axes, window: Window) -> list[int]:
    return [strided_bound(padded_shape[a], dilated_bound(wd.size, wd.window_dilation), wd.stride)
            for a, wd in zip(axes, window.dimensions)]


def windows(x: np.ndarray, window: Window) -> np.ndarray:
    """All windows of an already dilated and padded array, as a read-only view of shape
    (outputs..., window sizes...)."""
    outs = window_output_dims(x.shape, range(x.ndim), window)
    sizes = [wd.size for wd in window.dimensions]
    if 0 in outs or 0 in sizes:
        return np.empty(tuple(outs) + tuple(sizes), dtype=x.dtype)
    st = x.strides
    # as_strided goes through the array interface, which does not know ml_dtypes types:
    # stride over their bits as unsigned integers of the same size
    foreign = x.dtype.type.__module__ != "numpy"
    base = x.view(np.dtype(f"u{x.dtype.itemsize}")) if foreign else x
    view = np.lib.stride_tricks.as_strided(
        base, shape=tuple(outs) + tuple(sizes),
        strides=tuple(s * wd.stride for s, wd in zip(st, window.dimensions))
        + tuple(s * wd.window_dilation for s, wd in zip(st, window.dimensions)),
        writeable=False)
    return view.view(x.dtype) if foreign else view


def flat_windows(view: np.ndarray, rank: int) -> np.ndarray:
    """A window view (outputs..., sizes...) as an array (outputs..., K), K elements in
    row-major window order."""
    return view.reshape(view.shape[:rank] + (int(np.prod(view.shape[rank:], dtype=np.int64)),))


#: Window positions are computed in int64 when every intermediate stays below this.
_INT64_SAFE = 1 << 62


def window_tables(dims, window: Window) -> list[np.ndarray]:
    """Per window dimension, which operand element each window slot reads: an array
    (outputs along the dimension, slots) of operand indices, -1 where the slot falls in
    padding or a base-dilation hole. The slots are the window positions in order when the
    window is no longer than the operand dimension, else the operand elements in order
    (each at most once per window, in window order): the tables, like the work, grow with
    the output and the operand, never with the window, padding, stride or dilation sizes
    (a 1x2**62 window with a 2**62 padding costs what a 1x3 window does)."""
    tables = []
    for n, wd in zip(dims, window.dimensions):
        lo, bd, st, wdl, size = (wd.padding_low, wd.base_dilation, wd.stride,
                                 wd.window_dilation, wd.size)
        padded = lo + dilated_bound(n, bd) + wd.padding_high
        out = strided_bound(max(padded, 0), dilated_bound(size, wdl), st)
        by_slot = size <= n
        bound = max(out - 1, 0) * st + abs(lo) + max((size - 1) * wdl, max(n - 1, 0) * bd)
        dt = np.int64 if bound < _INT64_SAFE else object  # object: exact Python ints
        q = np.arange(out, dtype=np.int64).astype(dt) * st - lo  # p = q + j * wdl
        if by_slot:
            p = q[:, None] + np.arange(size, dtype=np.int64).astype(dt)[None, :] * wdl
            hit = (p >= 0) & (p <= (n - 1) * bd)
            if bd != 1:
                hit &= p % bd == 0
                p = p // bd
            table = np.where(hit, p, -1)
        else:
            d = np.arange(n, dtype=np.int64).astype(dt)[None, :] * bd - q[:, None]
            hit = d >= 0
            if wdl != 1:
                hit &= d % wdl == 0
                d = d // wdl
            hit &= d < size
            table = np.where(hit, np.arange(n, dtype=np.int64)[None, :], -1)
        tables.append(np.asarray(table, dtype=np.int64).reshape(out, size if by_slot else n))
    return tables


def gather_windows(x: np.ndarray, tables: list[np.ndarray], rows: slice | None = None,
                   *, positions: bool = False):
    """The windows of ``x`` (rows ``rows`` of the first output dimension): (values of shape
    (outputs..., K), mask of the elements that exist or None when all do, and with
    ``positions`` the operand linear index of each element, -1 for absent ones)."""
    rank = len(tables)
    if rows is not None:
        tables = [tables[0][rows]] + tables[1:]
    outs = tuple(t.shape[0] for t in tables)
    ks = tuple(t.shape[1] for t in tables)
    k = int(np.prod(ks, dtype=np.int64))
    # one take per dimension: (out0, K0, out1, K1, ...), then windows last
    order = list(range(0, 2 * rank, 2)) + list(range(1, 2 * rank, 2))
    if x.size:
        values = x
        for d, t in enumerate(tables):
            values = np.take(values, np.maximum(t, 0), axis=2 * d)
        values = values.transpose(order).reshape(outs + (k,))
    else:
        values = np.zeros(outs + (k,), x.dtype)
    oks = [t >= 0 for t in tables]
    mask = None
    if not all(ok.all() for ok in oks):
        mask = np.ones((), bool)
        for d, ok in enumerate(oks):
            mask = mask[..., None, None] & ok
        mask = mask.transpose(order).reshape(outs + (k,))
    if not positions:
        return values, mask, None
    linear = np.zeros((), np.int64)
    for t, n in zip(tables, x.shape):
        linear = linear[..., None, None] * n + np.maximum(t, 0)
    linear = linear.transpose(order).reshape(outs + (k,))
    if mask is not None:
        linear = np.where(mask, linear, -1)
    return values, mask, linear


#: reduce-window materialises the windows of at most this many elements at a time.
CHUNK_ELEMENTS = 1 << 22


def _check_window(window: Window, rank: int, what: str) -> None:
    if len(window.dimensions) != rank:
        raise EvaluationError(f"{what}: the window has {len(window.dimensions)} dimensions, "
                              f"the operand {rank}")


def _needs_mask(x: np.ndarray, window: Window) -> bool:
    return any(wd.padding_low > 0 or wd.padding_high > 0 or (wd.base_dilation > 1 and n > 1)
               for wd, n in zip(window.dimensions, x.shape))


def _strided(shape, window: Window) -> bool:
    """Whether the windows are best read from a dilated, padded copy of the operand (strided
    views; fast): when that copy stays within a few times the operand and the output and
    no window, stride or dilation is longer than it. Otherwise (huge padding, windows,
    strides or dilations; an empty result) ``window_tables`` reads them, in time and memory
    bounded by the output and the operand."""
    padded = out = 1
    for n, wd in zip(shape, window.dimensions):
        size = max(wd.padding_low + dilated_bound(n, wd.base_dilation) + wd.padding_high, 0)
        win = dilated_bound(wd.size, wd.window_dilation)
        if win > size or wd.stride > size or wd.window_dilation > size:
            return False
        padded *= size
        out *= strided_bound(size, win, wd.stride)
    total = int(np.prod(shape, dtype=np.int64))
    return out > 0 and padded <= 4 * (total + out) + (1 << 16)


def _window_leaves(xs: list, inits: list, window: Window):
    """(output dimensions, K, leaves(rows) -> (leaves of shape (rows..., K), mask or None))
    for the windows of the inputs ``xs`` (already of the reducer's input types)."""
    x0 = xs[0]
    rank = x0.ndim
    if _strided(x0.shape, window):
        views, mask = [], None
        masked = _needs_mask(x0, window)
        for x, init in zip(xs, inits):
            padded, m = dilate_and_pad(x, range(rank), window, np.asarray(init).astype(x.dtype),
                                       with_mask=masked and mask is None)
            if m is not None:
                mask = windows(m, window)
            views.append(windows(padded, window))
        out_shape = views[0].shape[:rank]
        k = int(np.prod(views[0].shape[rank:], dtype=np.int64))

        def leaves(sl):
            return ([flat_windows(v[sl], rank) for v in views],
                    None if mask is None else flat_windows(mask[sl], rank))
    else:
        tables = window_tables(x0.shape, window)
        out_shape = tuple(t.shape[0] for t in tables)
        k = int(np.prod([t.shape[1] for t in tables], dtype=np.int64))

        def leaves(sl):
            gathered = [gather_windows(x, tables, sl) for x in xs]
            return [g[0] for g in gathered], gathered[0][1]
    return out_shape, k, leaves


@kernel("reduce-window")
def reduce_window_kernel(ctx, instr, args):
    from xlapy.interpreter import scan_tree

    if scan_tree.scan_window(instr) is not None:  # a cumulative scan: XLA:CPU's tree
        return ctx.call(scan_tree.tree_scan(instr), args)
    n = len(args) // 2
    inputs, inits = args[:n], args[n:]
    comp = instr.attrs["to_apply"]
    window = instr.attrs["window"]
    what = f"reduce-window %{instr.name}"
    rank = inputs[0].ndim
    _check_window(window, rank, what)
    result_dtypes = _result_dtypes(comp)
    in_dtypes = _input_dtypes(comp, n)
    xs = [x if x.dtype == dt else x.astype(dt) for x, dt in zip(inputs, in_dtypes)]
    if rank == 0:  # a rank-0 operand: one window of one element
        leaves = [x.reshape(1) for x in xs]
        return _pack(reduce_last_axis(ctx, comp, inits, leaves, None, result_dtypes, what),
                     instr)
    out_shape, k, leaves_of = _window_leaves(xs, inits, window)
    # materialise the windows of a few leading output rows at a time
    row = max(1, k * int(np.prod(out_shape[1:], dtype=np.int64)))
    chunk = max(1, CHUNK_ELEMENTS // row)
    parts = []
    for start in range(0, max(out_shape[0], 1), chunk):
        leaves, mask = leaves_of(slice(start, start + chunk))
        parts.append(reduce_last_axis(ctx, comp, inits, leaves, mask, result_dtypes, what))
    results = [np.concatenate([p[i] for p in parts], axis=0) if len(parts) > 1 else parts[0][i]
               for i in range(n)]
    return _pack(results, instr)


# -- select-and-scatter -------------------------------------------------------------------------


@kernel("select-and-scatter")
def select_and_scatter_kernel(ctx, instr, args):
    operand, source, init = args
    window = instr.attrs["window"]
    select, scatter = instr.attrs["select"], instr.attrs["scatter"]
    what = f"select-and-scatter %{instr.name}"
    rank = operand.ndim
    _check_window(window, rank, what)
    out_dtype = dtypes.to_dtype(instr.shape.element_type)
    if rank == 0:
        values, present = operand.reshape(1), np.ones(1, bool)
        where = np.zeros(1, np.int64)
    elif _strided(operand.shape, window):
        positions = np.arange(operand.size, dtype=np.int64).reshape(operand.shape)
        padded, mask = dilate_and_pad(operand, range(rank), window,
                                      np.zeros((), operand.dtype), with_mask=True)
        padded_pos, _ = dilate_and_pad(positions, range(rank), window, -1, with_mask=False)
        values = flat_windows(windows(padded, window), rank)
        present = flat_windows(windows(mask, window), rank)
        where = flat_windows(windows(padded_pos, window), rank)
    else:
        values, present, where = gather_windows(operand, window_tables(operand.shape, window),
                                                positions=True)
        if present is None:
            present = np.ones(values.shape, bool)
    out_shape = values.shape[:-1]
    if tuple(source.shape) != out_shape:
        raise EvaluationError(f"{what}: source has dimensions {list(source.shape)}, the "
                              f"windows of the operand {list(out_shape)}")
    result = np.full(operand.size, np.asarray(init), dtype=out_dtype)
    k = values.shape[-1]
    if k and source.size:
        selected = values[..., 0].copy()
        index = where[..., 0].copy()
        have = present[..., 0].copy()
        for j in range(1, k):
            current, p = values[..., j], present[..., j]
            (keep,) = apply_computation(ctx, select, [selected, current], out_shape,
                                        f"{what} (select)")
            take = p & (~have | ~keep.astype(bool))
            selected = np.where(take, current, selected)
            index = np.where(take, where[..., j], index)
            have |= p
        targets = index[have]  # row-major source order
        updates = source[have].astype(out_dtype, copy=False)
        _scatter_in_order(ctx, scatter, result, targets, updates, f"{what} (scatter)")
    return result.reshape(operand.shape)


def _scatter_in_order(ctx, comp, result, targets, updates, what) -> None:
    """result[t] = comp(result[t], u) for each (t, u) in order; repeated targets are applied
    in rounds, each round a vectorised call over distinct targets."""
    if targets.size == 0:
        return
    order = np.argsort(targets, kind="stable")
    sorted_t = targets[order]
    starts = np.r_[0, np.flatnonzero(sorted_t[1:] != sorted_t[:-1]) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, sorted_t.size]))
    rank = np.empty_like(order)
    rank[order] = np.arange(sorted_t.size) - group_start
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        t, u = targets[sel], updates[sel]
        (new,) = apply_computation(ctx, comp, [result[t], u], t.shape, what)
        result[t] = new


# -- map ----------------------------------------------------------------------------------------


@kernel("map")
def map_kernel(ctx, instr, args):
    comp = instr.attrs["to_apply"]
    shape = tuple(args[0].shape) if args else tuple(instr.shape.dimensions)
    for a in args:
        if tuple(a.shape) != shape:
            raise EvaluationError(f"map %{instr.name}: operands have different dimensions "
                                  f"{[list(x.shape) for x in args]}")
    (out,) = apply_computation(ctx, comp, list(args), shape, f"map %{instr.name}")
    return out


__all__ = ["apply_computation", "dilate_and_pad", "flat_windows", "gather_windows",
           "is_vectorisable", "reduce_last_axis", "window_output_dims", "window_tables",
           "windows"]
