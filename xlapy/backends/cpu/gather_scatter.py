"""Compiled kernels of the data-dependent indexing ops: gather, scatter, select-and-scatter
and dynamic-update-slice (``supports(instr)`` / ``emit(module, name, instr)``; the kernel's
inputs are the instruction's operands in order, ``kernel_abi``).

Semantics are the interpreter's (xlapy.interpreter.kernels.gather_scatter, reduction), which
follow XLA's evaluator and XLA:CPU:

- gather: every start index is clamped so its slice fits (``clamp(S, 0, dim - size)``);
  explicit batching dimensions (operand_batching_dims / start_indices_batching_dims) take
  the batch position itself. Start indices of any integer type, unsigned by value (a u64 of
  2**64 - 1 clamps to the largest start). Work item: an output row when the last output
  dimension is a window dimension (one strided, usually contiguous, copy), else an output
  element.
- scatter: in place (``KernelSpec.in_place``: output k starts as operand k); updates are
  applied in row-major order of the update scatter positions, window elements inside; a
  window that does not fit in the operand at its start is skipped whole (not clamped). The
  update computation is inlined (scalar_computation), any number of operands (variadic
  scatter). Work item: a block of window elements of at least ITEM_BYTES (whole lines). Items
  run in parallel only when two different window elements can never reach the same
  operand element (every dimension the indices address has a window of size 1, as in
  embedding gradients); each item visits the scatter positions in order, so every target
  sees its updates in XLA's order whatever the split, and the result is the sequential one
  bit for bit. A window of one item, one cache line to RUN_WINDOW elements, keeps the open
  run of consecutive updates of one window on the stack (segment ops over sorted ids) and
  stores it when another window starts: the same combiner calls in the same order.
- select-and-scatter: the output is filled with the init value (first kernel), then per
  source element (second kernel, ``spec.then``) the window's elements inside the base are
  visited in row-major order, select(selected, current) deciding whether to keep the
  selected one (the first element of a window starts as selected), and
  output[selected] = scatter(output[selected], source) - in source row-major order.
  Parallel over source elements when windows cannot overlap (stride >= dilated window
  size in every dimension), sequential otherwise (overlapping windows select the same
  element from several source positions; the order of their scatter calls is kept).
- dynamic-update-slice: in place; starts clamped to [0, dim - update size] as XLA does;
  work item: a row of the update, copied bitwise. Its work is the update's size, never the
  operand's, so a loop of updates into a big buffer stays a cheap native loop
  (control_flow).

Elements are moved as their stored bits (gather, dynamic-update-slice) or loaded and stored
through ``elemental.load_value``/``store_value`` where a computation combines them.
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu import indexing
from xlapy.backends.cpu.indexing import Index
from xlapy.backends.cpu.kernel_abi import (I64, KernelSpec, buffer_pointer, declare_kernel,
                                           for_range, mark_parallel, smin)
from xlapy.backends.cpu.scalar_computation import inline_computation, supports_computation
from xlapy.shape import dtypes

OPCODES = frozenset({"gather", "scatter", "select-and-scatter", "dynamic-update-slice"})

I1 = ir.IntType(1)
#: The least window bytes a scatter work item takes (whole cache lines). Each item walks
#: every scatter position; items narrower than this split each update row between threads,
#: and both threads then stream all of the updates: a scatter-add of 200,000 rows of 64 f32
#: took 2.7 ms in four items of one line, 1.45 ms as one (XLA:CPU 1.4, one thread too).
ITEM_BYTES = 8192
#: Windows of one cache line up to this many elements (one work item) combine consecutive
#: updates of the same window on the stack (``_emit_scatter``): jax.ops.segment_max over
#: sorted ids f32[100000,32] -> 500 segments 0.78 -> 0.46 ms (XLA 0.57), segment_sum 0.46 ->
#: 0.15 ms; shuffled ids cost up to 20% more (a flush per update); one-element windows
#: (histograms: 0.43 -> 0.87 ms) keep the plain loop.
RUN_WINDOW = 64
#: The largest select-and-scatter window (elements) compiled.
MAX_WINDOW = 1 << 16


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


def _dims(shape) -> tuple[int, ...]:
    return tuple(int(d) for d in shape.dimensions)


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _strides(dims) -> list[int]:
    out, s = [], 1
    for n in reversed(dims):
        out.append(s)
        s *= n
    return out[::-1]


def _static_array(shape) -> bool:
    return shape.is_array() and not shape.is_dynamic() and shape.element_type in el.TYPES


def _index_type(shape) -> bool:
    return _static_array(shape) and el.TYPES[shape.element_type][0] in "su"


# -- which instructions ---------------------------------------------------------------------


def supports(instr) -> bool:
    """Whether ``emit`` compiles ``instr`` (static shapes, element types the generators
    know, integer indices, inlinable computations)."""
    op = instr.opcode
    if op not in OPCODES:
        return False
    # Layouts do not matter: the backend's buffers are logical row-major arrays whatever
    # a shape's layout says (only a bitcast reads one).
    leaves = [leaf for _, leaf in instr.shape.leaves()]
    if not leaves or not all(_static_array(s) for s in leaves):
        return False
    if not all(o.shape.is_array() for o in instr.operands):
        return False
    if op == "dynamic-update-slice":
        return indexing.supports(instr)
    if op == "gather":
        operand, indices = instr.operands
        return (_static_array(operand.shape) and _index_type(indices.shape)
                and operand.shape.element_type == instr.shape.element_type)
    if op == "scatter":
        n = len(instr.operands) // 2
        operands, indices, updates = (instr.operands[:n], instr.operands[n],
                                      instr.operands[n + 1:])
        if not _index_type(indices.shape) or len(updates) != n or len(leaves) != n:
            return False
        for o, u, s in zip(operands, updates, leaves):
            if not (_static_array(o.shape) and _static_array(u.shape)):
                return False
            if not (o.shape.element_type == u.shape.element_type == s.element_type):
                return False
        comp = instr.attrs["to_apply"]
        return comp.num_parameters == 2 * n and supports_computation(comp)
    # select-and-scatter
    operand, source, init = instr.operands
    et = instr.shape.element_type
    if not all(_static_array(o.shape) and o.shape.element_type == et
               for o in (operand, source, init)) or init.shape.dimensions:
        return False
    window = instr.attrs["window"].dimensions
    if len(window) != len(operand.shape.dimensions) or any(w.window_reversal for w in window):
        return False
    # Every window position is visited: huge windows (mostly padding) stay with the
    # interpreter, which iterates elements instead.
    if _prod(w.size for w in window) > MAX_WINDOW or any(
            max(w.size, w.stride, w.padding_low, w.padding_high, w.window_dilation,
                w.base_dilation) >= 2**31 for w in window):
        return False
    select, scatter = instr.attrs["select"], instr.attrs["scatter"]
    return (select.num_parameters == 2 and scatter.num_parameters == 2
            and select.root.shape.is_array() and select.root.shape.element_type == el.PT.PRED
            and supports_computation(select) and supports_computation(scatter))


def emit(module: ir.Module, name: str, instr) -> KernelSpec:
    """Add the kernel of ``instr`` (``supports`` holds) to ``module``."""
    op = instr.opcode
    if op == "gather":
        return _emit_gather(module, name, instr)
    if op == "scatter":
        return _emit_scatter(module, name, instr)
    if op == "select-and-scatter":
        return _emit_select_and_scatter(module, name, instr)
    return _emit_dynamic_update_slice(module, name, instr)


# -- shared pieces --------------------------------------------------------------------------


def _buffer(b, bufs, k, et, name):
    return buffer_pointer(b, bufs, k, el.memory_type(et), name)


def _as_index(b, value, et, name: str):
    """An integer element as a signed i64 start: signed by sign extension, unsigned by
    value (u64 of 2**63 or more: beyond every dimension, saturated, never wrapped)."""
    kind, ty = el.TYPES[et]
    if ty.width < 64:
        return b.sext(value, I64, name=name) if kind == "s" else b.zext(value, I64, name=name)
    if kind == "u":
        neg = b.icmp_signed("<", value, _c(0), name=f"{name}.big")
        return b.select(neg, _c(2**63 - 1), value, name=name)
    return value


def _clamp(b, v, lo: int, hi: int, name: str):
    v = b.select(b.icmp_signed("<", v, _c(lo)), _c(lo), v, name=f"{name}.lo")
    return b.select(b.icmp_signed(">", v, _c(hi)), _c(hi), v, name=name)


def _linear(b, multi, dims, name: str):
    """sum(multi[d] * stride[d]) over a row-major array of ``dims``."""
    acc = None
    for d, (i, s) in enumerate(zip(multi, _strides(dims))):
        if dims[d] == 1:
            continue
        term = i if s == 1 else b.mul(i, _c(s), name=f"{name}.m{d}")
        acc = term if acc is None else b.add(acc, term, name=f"{name}.a{d}")
    return _c(0) if acc is None else acc


def _gep(b, ptr, pos, name: str):
    return b.gep(ptr, [pos], inbounds=True, name=name)


def _copy_element(b, dst, dpos, src, spos, name: str) -> None:
    b.store(b.load(_gep(b, src, spos, f"{name}.sp"), name=f"{name}.v"),
            _gep(b, dst, dpos, f"{name}.dp"))


class _Indices:
    """Loads of start-index components: ``at(batch_multi, k)`` is component ``k`` of the
    index vector at the batch position ``batch_multi`` (the start-indices dimensions other
    than index_vector_dim, in order), as a signed i64."""

    def __init__(self, b, ptr, shape, index_vector_dim: int):
        self.b, self.ptr, self.et = b, ptr, shape.element_type
        self.dims = _dims(shape)
        self.ivd = index_vector_dim

    def at(self, batch_multi: list, k: int, name: str):
        b = self.b
        multi = list(batch_multi)
        if self.ivd < len(self.dims):
            multi.insert(self.ivd, _c(k))
        pos = _linear(b, multi, self.dims, f"{name}.pos")
        v = el.load_value(b, _gep(b, self.ptr, pos, f"{name}.p"), self.et, name)
        return _as_index(b, v, self.et, f"{name}.i64")


def _batch_axis(indices_dim: int, index_vector_dim: int) -> int:
    return indices_dim - (1 if indices_dim > index_vector_dim else 0)


# -- gather ---------------------------------------------------------------------------------


def _emit_gather(module, name, instr) -> KernelSpec:
    operand, indices = instr.operands
    dn = instr.attrs["gather_dimension_numbers"]
    sizes = [int(s) for s in instr.attrs["slice_sizes"]]
    et = instr.shape.element_type
    out_dims = _dims(instr.shape)
    odims = _dims(operand.shape)
    rank = len(odims)
    n_out = _prod(out_dims)
    k_last = len(out_dims) - 1
    offset_dims = list(dn.offset_dims)
    # A row whose last dimension is a window dimension is one strided run of the operand;
    # otherwise every element has its own start (work item: an element).
    by_rows = bool(out_dims) and k_last in offset_dims
    last = out_dims[-1] if by_rows else 1
    rows = n_out // last if last else 0
    spec = KernelSpec(name=name, n_inputs=2, outputs=[instr.shape], domain=rows,
                      cost=max(last, 1))
    fn, b = declare_kernel(module, name)
    if not rows:
        b.ret_void()
        return spec
    bufs = fn.args[0]
    src = _buffer(b, bufs, 0, et, "operand")
    idx = _Indices(b, _buffer(b, bufs, 1, indices.shape.element_type, "indices"),
                   indices.shape, dn.index_vector_dim)
    out = _buffer(b, bufs, 2, et, "out")
    batch_out = [k for k in range(len(out_dims)) if k not in offset_dims]
    offset_operand = [d for d in range(rank) if d not in dn.collapsed_slice_dims
                      and d not in dn.operand_batching_dims]
    ostrides = _strides(odims)

    def operand_pos(multi, tag):
        batch = [multi[k] for k in batch_out]
        acc = _c(0)
        for d in range(rank):
            if odims[d] == 1:
                continue  # every position along it is 0
            if d in dn.start_index_map:
                s = idx.at(batch, dn.start_index_map.index(d), f"{tag}.s{d}")
                s = _clamp(b, s, 0, max(odims[d] - sizes[d], 0), f"{tag}.c{d}")
            elif d in dn.operand_batching_dims:
                k = dn.operand_batching_dims.index(d)
                s = batch[_batch_axis(dn.start_indices_batching_dims[k], dn.index_vector_dim)]
            else:
                s = None
            if d in offset_operand:
                w = multi[offset_dims[offset_operand.index(d)]]
                s = w if s is None else b.add(s, w, name=f"{tag}.w{d}")
            if s is not None:
                acc = b.add(acc, b.mul(s, _c(ostrides[d]), name=f"{tag}.t{d}"),
                            name=f"{tag}.o{d}")
        return acc

    lo, hi = fn.args[1], fn.args[2]
    with for_range(b, lo, hi, "row") as r:
        if by_rows:
            outer = Index(b, out_dims[:-1], linear=r).multi if len(out_dims) > 1 else []
            row_start = b.mul(r, _c(last), name="row.start")
            d_last = offset_operand[offset_dims.index(k_last)]
            base = operand_pos(outer + [_c(0)], "base")
            with for_range(b, 0, last, "j") as j:
                step = j if ostrides[d_last] == 1 else b.mul(j, _c(ostrides[d_last]))
                _copy_element(b, out, b.add(row_start, j), src, b.add(base, step), "g")
        else:
            multi = Index(b, out_dims, linear=r).multi if out_dims else []
            _copy_element(b, out, r, src, operand_pos(multi, "e"), "g")
    b.ret_void()
    return spec


# -- scatter --------------------------------------------------------------------------------


def _emit_scatter(module, name, instr) -> KernelSpec:
    n = len(instr.operands) // 2
    operands, indices, updates = instr.operands[:n], instr.operands[n], instr.operands[n + 1:]
    dn = instr.attrs["scatter_dimension_numbers"]
    comp = instr.attrs["to_apply"]
    ets = [o.shape.element_type for o in operands]
    odims = _dims(operands[0].shape)
    udims = _dims(updates[0].shape)
    rank, urank = len(odims), len(udims)
    window_axes = list(dn.update_window_dims)
    scatter_axes = [a for a in range(urank) if a not in window_axes]
    wshape = [udims[a] for a in window_axes]
    sshape = [udims[a] for a in scatter_axes]
    window_operand = [d for d in range(rank) if d not in dn.inserted_window_dims
                      and d not in dn.input_batching_dims]
    n_windows, n_window = _prod(sshape), _prod(wshape)
    outputs = [s for _, s in instr.shape.leaves()]

    def wsize(d):
        return wshape[window_operand.index(d)] if d in window_operand else 1

    # Different window elements never meet when every addressed dimension has window 1.
    disjoint = all(wsize(d) == 1 for d in dn.scatter_dims_to_operand_dims)
    # a work item: a block of window elements of whole cache lines, at least ITEM_BYTES,
    # so that threads never share a line of the updates or the operand and each pays the
    # walk over the scatter positions (their indices, the fit test) once per block
    line = max(1, 512 // max(dtypes.bit_width(et) for et in ets))
    block = max(1, min(n_window, line * max(1, ITEM_BYTES // 64)))
    domain = -(-n_window // block) if n_windows else 0
    spec = KernelSpec(name=name, n_inputs=2 * n + 1, outputs=outputs, domain=domain,
                      cost=max(n_windows, 1) * block, parallel=disjoint,
                      in_place=tuple((k, k) for k in range(n)))
    fn, b = declare_kernel(module, name)
    if not domain:
        b.ret_void()
        return spec
    bufs = fn.args[0]
    upd = [_buffer(b, bufs, n + 1 + k, et, f"upd{k}") for k, et in enumerate(ets)]
    idx = _Indices(b, _buffer(b, bufs, n, indices.shape.element_type, "indices"),
                   indices.shape, dn.index_vector_dim)
    out = [_buffer(b, bufs, 2 * n + 1 + k, et, f"out{k}") for k, et in enumerate(ets)]
    ostrides = _strides(odims)
    if domain == 1:  # the whole window: constant bounds (no loop at all for one element)
        w_lo, w_hi = _c(0), _c(n_window)
    else:
        lo, hi = fn.args[1], fn.args[2]
        w_lo = b.mul(lo, _c(block), name="w.lo")
        w_hi = b.mul(hi, _c(block), name="w.hi")
        w_hi = smin(b, w_hi, _c(n_window), name="w.end")
    trailing = window_axes == list(range(urank - len(window_axes), urank))
    runs = domain == 1 and n_windows > 1 and line <= n_window <= RUN_WINDOW
    if runs:  # the open run: its target base (-1: none) and its values, in compute types
        run_at = b.alloca(I64, name="run.at")
        b.store(_c(-1), run_at)
        run_acc = [b.alloca(el.TYPES[et][1], size=n_window, name=f"run{k}")
                   for k, et in enumerate(ets)]

    def window_offset(w):
        """(window element ``w``'s offset from the window's base in the operand, its
        multi-index in the window)."""
        wmulti = Index(b, tuple(wshape), linear=w).multi if wshape else []
        return _linear_sum(b, wmulti, [ostrides[d] for d in window_operand], "t"), wmulti

    def element(s, smulti, w):
        """(the target's offset from the window's base, the update's position)."""
        rel, wmulti = window_offset(w)
        if trailing:
            return rel, b.add(b.mul(s, _c(n_window)), w, name="upos")
        umulti = [None] * urank
        for a, v in zip(scatter_axes, smulti):
            umulti[a] = v
        for a, v in zip(window_axes, wmulti):
            umulti[a] = v
        return rel, _linear(b, umulti, udims, "upos")

    def run_flush(at):
        with for_range(b, 0, n_window, "fw") as w:
            target = b.add(at, window_offset(w)[0], name="ft")
            for k, (acc, o, et) in enumerate(zip(run_acc, out, ets)):
                v = b.load(b.gep(acc, [w], inbounds=True), name=f"fv{k}")
                el.store_value(b, v, _gep(b, o, target, f"fst{k}.p"), et, f"fst{k}")

    def run_apply(s, smulti, base, from_out):
        """acc = f(acc, update) over the window; ``from_out``: acc starts as the operand."""
        with for_range(b, 0, n_window, "rw") as w:
            rel, upos = element(s, smulti, w)
            slots = [b.gep(acc, [w], inbounds=True) for acc in run_acc]
            if from_out:
                target = b.add(base, rel, name="rt")
                cur = [el.load_value(b, _gep(b, o, target, f"rcur{k}.p"), et, f"rcur{k}")
                       for k, (o, et) in enumerate(zip(out, ets))]
            else:
                cur = [b.load(q, name=f"racc{k}") for k, q in enumerate(slots)]
            new = [el.load_value(b, _gep(b, u, upos, f"rnew{k}.p"), et, f"rnew{k}")
                   for k, (u, et) in enumerate(zip(upd, ets))]
            for q, v in zip(slots, inline_computation(b, comp, cur + new)):
                b.store(v, q)

    with for_range(b, 0, n_windows, "s") as s:
        smulti = Index(b, tuple(sshape), linear=s).multi if sshape else []
        valid = ir.Constant(I1, 1)
        base = _c(0)
        for d in range(rank):
            if d in dn.scatter_dims_to_operand_dims:
                start = idx.at(smulti, dn.scatter_dims_to_operand_dims.index(d), f"s{d}")
            elif d in dn.input_batching_dims:
                k = dn.input_batching_dims.index(d)
                start = smulti[_batch_axis(dn.scatter_indices_batching_dims[k],
                                           dn.index_vector_dim)]
            else:
                continue  # starts at 0: always fits (the verifier bounds the window)
            ok = b.and_(b.icmp_signed(">=", start, _c(0)),
                        b.icmp_signed("<=", start, _c(odims[d] - wsize(d))), name=f"ok{d}")
            valid = b.and_(valid, ok, name=f"valid{d}")
            base = b.add(base, b.mul(start, _c(ostrides[d])), name=f"base{d}")
        if runs:
            # Consecutive positions updating the same window (a segment's rows, sorted
            # indices) combine in a stack run, stored once when another window starts: the
            # combiner sees the same values in the same order, without a store and a load
            # of the operand between two updates (a chain through memory per update)
            at = b.load(run_at, name="at")
            same = b.and_(valid, b.icmp_signed("==", base, at), name="same")
            with b.if_else(same) as (then, otherwise):
                with then:
                    run_apply(s, smulti, base, False)
                with otherwise, b.if_then(valid):
                    with b.if_then(b.icmp_signed(">=", at, _c(0), name="open")):
                        run_flush(at)
                    run_apply(s, smulti, base, True)
                    b.store(base, run_at)
        else:
            inner = for_range(b, w_lo, w_hi, "w")
            with b.if_then(valid), inner as w:
                rel, upos = element(s, smulti, w)
                target = b.add(base, rel, name="target")
                cur = [el.load_value(b, _gep(b, o, target, f"cur{k}.p"), et, f"cur{k}")
                       for k, (o, et) in enumerate(zip(out, ets))]
                new = [el.load_value(b, _gep(b, u, upos, f"new{k}.p"), et, f"new{k}")
                       for k, (u, et) in enumerate(zip(upd, ets))]
                res = inline_computation(b, comp, cur + new)
                for k, (v, o, et) in enumerate(zip(res, out, ets)):
                    el.store_value(b, v, _gep(b, o, target, f"st{k}.p"), et, f"st{k}")
            # one scatter position's window elements are distinct operand elements
            mark_parallel(module, inner, upd + out, hints=[("llvm.loop.interleave.count", 1)])
    if runs:
        at = b.load(run_at, name="last")
        with b.if_then(b.icmp_signed(">=", at, _c(0), name="open.last")):
            run_flush(at)
    b.ret_void()
    return spec


def _linear_sum(b, multi, strides, name: str):
    acc = _c(0)
    for d, (i, s) in enumerate(zip(multi, strides)):
        acc = b.add(acc, i if s == 1 else b.mul(i, _c(s)), name=f"{name}{d}")
    return acc


# -- select-and-scatter ---------------------------------------------------------------------


def _emit_select_and_scatter(module, name, instr) -> KernelSpec:
    operand, source = instr.operands[:2]
    et = instr.shape.element_type
    odims = _dims(operand.shape)
    sdims = _dims(source.shape)
    window = instr.attrs["window"].dimensions
    select, scatter = instr.attrs["select"], instr.attrs["scatter"]
    n_out, n_src = _prod(odims), _prod(sdims)
    # 1: fill the output with init
    fill = KernelSpec(name=name, n_inputs=3, outputs=[instr.shape], domain=n_out)
    fn, b = declare_kernel(module, name)
    if n_out:
        init_v = b.load(_buffer(b, fn.args[0], 2, et, "init"), name="init.v")
        out = _buffer(b, fn.args[0], 3, et, "out")
        with for_range(b, fn.args[1], fn.args[2], "i") as i:
            b.store(init_v, _gep(b, out, i, "o"))
    b.ret_void()
    if not n_out or not n_src:
        return fill
    # 2: per source element, select in its window and scatter
    overlap = any(wd.stride < (wd.size - 1) * wd.window_dilation + 1 for wd in window)
    win = _prod(wd.size for wd in window)
    tname = f"{name}.scatter"
    fill.then = KernelSpec(name=tname, n_inputs=3, outputs=[instr.shape], domain=n_src,
                           cost=max(win, 1), parallel=not overlap)
    fn, b = declare_kernel(module, tname)
    bufs = fn.args[0]
    src = _buffer(b, bufs, 0, et, "operand")
    srcv = _buffer(b, bufs, 1, et, "source")
    out = _buffer(b, bufs, 3, et, "out")
    ty = el.TYPES[et][1]
    sel_v = b.alloca(ty, name="sel.v")
    sel_p = b.alloca(I64, name="sel.p")
    have = b.alloca(I1, name="have")
    rank = len(odims)
    ostrides = _strides(odims)
    with for_range(b, fn.args[1], fn.args[2], "o") as o:
        omulti = Index(b, sdims, linear=o).multi if sdims else []
        b.store(ir.Constant(I1, 0), have)
        b.store(_c(0), sel_p)
        loops = []
        ks = []
        for d in range(rank):  # nested loops over the window, row-major
            loop = for_range(b, 0, window[d].size, f"k{d}")
            ks.append(loop.__enter__())
            loops.append(loop)
        inside = ir.Constant(I1, 1)
        pos = _c(0)
        for d in range(rank):
            wd = window[d]
            p = omulti[d] if wd.stride == 1 else b.mul(omulti[d], _c(wd.stride))
            k = ks[d] if wd.window_dilation == 1 else b.mul(ks[d], _c(wd.window_dilation))
            p = b.sub(b.add(p, k), _c(wd.padding_low), name=f"p{d}")
            bd = wd.base_dilation
            ok = b.and_(b.icmp_signed(">=", p, _c(0)),
                        b.icmp_signed("<=", p, _c((odims[d] - 1) * bd)), name=f"in{d}")
            if bd > 1:
                pc = _clamp(b, p, 0, (odims[d] - 1) * bd, f"pc{d}")
                ok = b.and_(ok, b.icmp_unsigned("==", b.urem(pc, _c(bd)), _c(0)))
                p = b.udiv(pc, _c(bd))
            inside = b.and_(inside, ok, name=f"inside{d}")
            p = _clamp(b, p, 0, odims[d] - 1, f"q{d}")
            pos = b.add(pos, p if ostrides[d] == 1 else b.mul(p, _c(ostrides[d])))
        with b.if_then(inside):
            cur = el.load_value(b, _gep(b, src, pos, "cur.p"), et, "cur")
            had = b.load(have, name="had")
            with b.if_else(had) as (then, otherwise):
                with then:
                    (keep,) = inline_computation(b, select, [b.load(sel_v), cur])
                    with b.if_then(b.not_(keep)):
                        b.store(cur, sel_v)
                        b.store(pos, sel_p)
                with otherwise:
                    b.store(cur, sel_v)
                    b.store(pos, sel_p)
                    b.store(ir.Constant(I1, 1), have)
        for loop in reversed(loops):
            loop.__exit__(None, None, None)
        with b.if_then(b.load(have, name="found")):
            t = b.load(sel_p, name="target")
            tp = _gep(b, out, t, "tgt.p")
            current = el.load_value(b, tp, et, "acc")
            value = el.load_value(b, _gep(b, srcv, o, "src.p"), et, "srcv")
            (res,) = inline_computation(b, scatter, [current, value])
            el.store_value(b, res, tp, et, "res")
    b.ret_void()
    return fill


# -- dynamic-update-slice -------------------------------------------------------------------


def _emit_dynamic_update_slice(module, name, instr) -> KernelSpec:
    operand, update = instr.operands[:2]
    starts_in = instr.operands[2:]
    et = instr.shape.element_type
    odims = _dims(operand.shape)
    udims = _dims(update.shape)
    n_upd = _prod(udims)
    last = udims[-1] if udims else 1
    rows = n_upd // last if last else 0
    n = len(instr.operands)
    spec = KernelSpec(name=name, n_inputs=n, outputs=[instr.shape], domain=rows,
                      cost=max(last, 1), in_place=((0, 0),))
    fn, b = declare_kernel(module, name)
    if not rows:
        b.ret_void()
        return spec
    bufs = fn.args[0]
    upd = _buffer(b, bufs, 1, et, "update")
    out = _buffer(b, bufs, n, et, "out")
    starts = []
    for d, s_instr in enumerate(starts_in):
        set_ = s_instr.shape.element_type
        v = el.load_value(b, _buffer(b, bufs, 2 + d, set_, f"start{d}"), set_, f"start{d}")
        starts.append(_clamp(b, _as_index(b, v, set_, f"start{d}.i64"), 0,
                             odims[d] - udims[d], f"start{d}.c"))
    ostrides = _strides(odims)
    with for_range(b, fn.args[1], fn.args[2], "row") as r:
        outer = Index(b, udims[:-1], linear=r).multi if len(udims) > 1 else []
        dst = _c(0)
        for d, (i, s) in enumerate(zip(outer + [_c(0)] * (len(udims) - len(outer)), starts)):
            dst = b.add(dst, b.mul(b.add(i, s), _c(ostrides[d])), name=f"dst{d}")
        row_start = b.mul(r, _c(last), name="row.start")
        with for_range(b, 0, last, "j") as j:
            _copy_element(b, out, b.add(dst, j), upd, b.add(row_start, j), "u")
    b.ret_void()
    return spec


__all__ = ["OPCODES", "emit", "supports"]
