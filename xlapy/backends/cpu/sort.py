"""Native sort and top-k kernels: any comparator, any number of operands, stable.

``emit_sort(module, name, instr)`` adds the kernel of a ``sort`` to ``module`` and returns its
``KernelSpec`` (kernel ABI: the operands, then one output per operand); ``sort_support``
says at plan time why a sort cannot be compiled (a reason string) or None.

The sort dimension ``d`` of length ``n`` splits the operands' positions into independent
rows (one per position of the other dimensions; the elements of a row are ``inner`` apart,
``inner`` the product of the dimensions after ``d``). A work item is one row, so rows run
in parallel. Each row is copied into a work array per operand (values move as their bits:
NaN payloads and -0 survive; the values move with their keys, so every access is
sequential) and sorted by a bottom-up merge sort: runs of RUN
elements insertion-sorted, then merged pairwise, both stable (an element moves before an
earlier one only when the comparator says it is less). For a comparator that is a strict
weak order this is the stable order, XLA's for ``is_stable=true`` and the interpreter's.
For one that is not (a FLOAT comparison of NaNs) the order is the algorithm's, as it is
for XLA:CPU's std::stable_sort; the result is always a permutation of each row (the
interpreter's binary-search merge is not: two elements can get the same rank, leaving a
slot unwritten). The two work arrays of every operand (2n values) come from ``malloc``
once per kernel call, not per row.

The comparator is one internal LLVM function ``less(a_0*, b_0*, a_1*, b_1*, ...) -> i1``
emitted by ``scalar_computation.inline_computation`` (the element generators' semantics)
on two elements given by pointers to their values; LLVM inlines it.

``is_stable=false``: XLA:CPU runs libstdc++'s ``std::sort`` (introsort), whose order of
equivalent elements is its own. The interpreter reproduces it (interpreter/kernels/sort.py:
the stable order, then std::sort replayed on the equivalence classes of rows whose
equivalent elements differ in bits). Rows of at most 16 elements are only insertion-sorted
by std::sort, which is stable, so those sorts compile here as stable ones. Longer unstable
sorts compile only when no two elements can be equivalent and differ in bits: one operand
whose comparator is a (possibly descending) LT/GT comparison of the operand itself with an
integer or pred type (equivalent elements are equal, hence identical). Other unstable sorts
stay on the library's path, which replays std::sort for the rows where it matters.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu.kernel_abi import I64, KernelSpec, buffer_pointer, declare_kernel, for_range
from xlapy.backends.cpu.scalar_computation import (
    inline_computation,
    inline_expression,
    supports_computation,
)

I1, I8, I32 = ir.IntType(1), ir.IntType(8), ir.IntType(32)
#: Elements per insertion-sorted run before the merge passes.
RUN = 16
#: std::sort's threshold: rows this short are insertion-sorted only (stable).
STD_SORT_THRESHOLD = 16


def _c(v: int, ty=I64) -> ir.Constant:
    return ir.Constant(ty, int(v))


def _dims(shape) -> tuple:
    return tuple(int(d) for d in shape.dimensions)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _array_ok(shape) -> bool:
    return shape.is_array() and not shape.is_dynamic() and shape.element_type in el.TYPES


# -- what is supported ------------------------------------------------------------------------


def _plain_unstable_ok(instr) -> bool:
    """is_stable=false with no equivalent-but-different elements possible (see the module
    docstring): one integer/pred operand compared LT/GT with itself."""
    if len(instr.operands) != 1:
        return False
    kind = el.TYPES[instr.operands[0].shape.element_type][0]
    if kind not in "sup":
        return False
    root = instr.attrs["to_apply"].root
    if root.opcode != "compare" or root.attrs["direction"].value not in ("LT", "GT"):
        return False
    return {o.opcode for o in root.operands} == {"parameter"} and \
        {o.parameter_number for o in root.operands} == {0, 1}


def sort_support(instr) -> str | None:
    """None when ``emit_sort`` compiles ``instr``, else why not."""
    if instr.opcode != "sort":
        return "not a sort"
    ops = instr.operands
    if not ops or not all(_array_ok(o.shape) for o in ops):
        return "an operand's element type has no element generator"
    dims = _dims(ops[0].shape)
    if any(_dims(o.shape) != dims for o in ops):
        return "operands of different dimensions"
    (d,) = tuple(instr.attrs["dimensions"]) or (None,)
    if d is None or not 0 <= d < max(1, len(dims)):
        return "no single sort dimension"
    comp = instr.attrs["to_apply"]
    if comp is None or comp.num_parameters != 2 * len(ops):
        return "the comparator does not take two parameters per operand"
    root = comp.root
    if root is None or not root.shape.is_array() or root.shape.dimensions or \
            el.TYPES.get(root.shape.element_type, ("",))[0] != "p":
        return "the comparator does not return pred[]"
    for k, o in enumerate(ops):
        for p in (comp.parameters[2 * k], comp.parameters[2 * k + 1]):
            if p.shape.element_type != o.shape.element_type:
                return f"comparator parameter {p.parameter_number} is not of operand {k}'s type"
    if not supports_computation(comp):
        return "the comparator has an instruction without an element generator"
    n = dims[d] if dims else 1
    if not instr.attrs["is_stable"] and n > STD_SORT_THRESHOLD and not _plain_unstable_ok(instr):
        return ("is_stable=false over more than 16 elements with possibly equivalent but "
                "different elements: std::sort's order (the library's replay)")
    return None


# -- emission ---------------------------------------------------------------------------------


class _Var:
    """A mutable i64/i32 variable on the stack (mem2reg makes it a register)."""

    def __init__(self, fn_b, entry_b, ty, init, name):
        self.b = fn_b
        self.ptr = entry_b.alloca(ty, name=name)
        fn_b.store(init, self.ptr)

    def get(self, name=""):
        return self.b.load(self.ptr, name=name)

    def set(self, v):
        self.b.store(v, self.ptr)


def _while(b, cond_fn, body_fn, name):
    """while cond_fn(): body_fn() (cond_fn emits at the header, returns an i1)."""
    fn = b.function
    head = fn.append_basic_block(f"{name}.head")
    body = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(cond_fn(), body, done)
    b.position_at_end(body)
    body_fn()
    b.branch(head)
    b.position_at_end(done)


def _libc(module, name, ret, args):
    got = module.globals.get(name)
    if got is None:
        got = ir.Function(module, ir.FunctionType(ret, args), name=name)
    return got


def _emit_less(module, name, instr):
    """``i1 less(a_0*, b_0*, a_1*, b_1*, ...)``: the comparator on elements a and b given
    as pointers to each operand's value (memory type)."""
    ops = instr.operands
    tys = []
    for o in ops:
        mt = el.memory_type(o.shape.element_type).as_pointer()
        tys += [mt, mt]
    fn = ir.Function(module, ir.FunctionType(I1, tys), name=f"{name}.less")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args = []
    for k, o in enumerate(ops):
        et = o.shape.element_type
        args.append(el.load_value(b, fn.args[2 * k], et, f"x{k}a"))
        args.append(el.load_value(b, fn.args[2 * k + 1], et, f"x{k}b"))
    (out,) = inline_computation(b, instr.attrs["to_apply"], args)
    if out.type != I1:
        out = b.icmp_unsigned("!=", out, ir.Constant(out.type, 0))
    b.ret(out)
    return fn


def _sequential_merge(b, entry, sp, dp, lo_, mid, hi_, less_at, n_ops):
    """Merge the sorted runs [lo, mid) and [mid, hi) of ``sp`` into ``dp``: the right
    element goes first only when it is less (stable); one comparison per element."""

    def at(p, i):
        return b.gep(p, [i], inbounds=True)

    ii = _Var(b, entry, I64, lo_, "mi")
    jj = _Var(b, entry, I64, mid, "mj")
    kk = _Var(b, entry, I64, lo_, "mk")

    def both_left():
        return b.and_(b.icmp_signed("<", ii.get(), mid),
                      b.icmp_signed("<", jj.get(), hi_))

    def take():
        iv, jv, kv = ii.get(), jj.get(), kk.get()
        xs = [at(p, iv) for p in sp]
        ys = [at(p, jv) for p in sp]
        right = less_at(ys, xs)  # the right element only when less
        for k in range(n_ops):
            v = b.select(right, b.load(ys[k]), b.load(xs[k]))
            b.store(v, at(dp[k], kv))
        jj.set(b.select(right, b.add(jv, _c(1)), jv))
        ii.set(b.select(right, iv, b.add(iv, _c(1))))
        kk.set(b.add(kv, _c(1)))

    _while(b, both_left, take, "merge")
    for var, stop, tag in ((ii, mid, "restl"), (jj, hi_, "restr")):
        def rest_cond(var=var, stop=stop):
            return b.icmp_signed("<", var.get(), stop)

        def rest_body(var=var):
            v_, k_ = var.get(), kk.get()
            for k in range(n_ops):
                b.store(b.load(at(sp[k], v_)), at(dp[k], k_))
            var.set(b.add(v_, _c(1)))
            kk.set(b.add(k_, _c(1)))

        _while(b, rest_cond, rest_body, tag)


def emit_sort(module: ir.Module, name: str, instr) -> KernelSpec:
    """The kernel of sort ``instr`` (``sort_support(instr)`` is None): per row the radix
    sort when ``radix_keys`` gives the comparator's keys and the row is long enough (rows
    where a FLOAT comparison meets a NaN fall back), the merge sort otherwise."""
    ops = instr.operands
    n_ops = len(ops)
    dims = _dims(ops[0].shape)
    (d,) = instr.attrs["dimensions"]
    n = dims[d] if dims else 1
    outer = _prod(dims[:d]) if dims else 1
    inner = _prod(dims[d + 1:]) if dims else 1
    rows = outer * inner
    outs_spec = [o.shape for o in ops]
    fn, b = declare_kernel(module, name)
    if rows == 0 or n == 0:
        b.ret_void()
        return KernelSpec(name, n_ops, outs_spec, 0)
    keys = radix_keys(instr) if n >= RADIX_MIN else None
    less = _emit_less(module, name, instr)
    bufs, lo, hi = fn.args
    entry = ir.IRBuilder(fn.entry_basic_block)
    entry.position_at_start(fn.entry_basic_block)
    ets = [o.shape.element_type for o in ops]
    mtys = [el.memory_type(et) for et in ets]
    in_ptrs = [buffer_pointer(b, bufs, k, mt, f"in{k}") for k, mt in enumerate(mtys)]
    out_ptrs = [buffer_pointer(b, bufs, n_ops + k, mt, f"out{k}") for k, mt in enumerate(mtys)]
    held = [b.alloca(mt, name=f"held{k}") for k, mt in enumerate(mtys)]  # (b: still in entry)
    malloc = _libc(module, "malloc", I8.as_pointer(), [I64])
    free = _libc(module, "free", ir.VoidType(), [I8.as_pointer()])
    # two arrays of n values per operand: the row being sorted, and the merge target (the
    # radix sort's passes alternate between the first and the output); then the radix
    # sort's histograms and its flags of the digits that move something
    sizes = [_byte_size(mt) for mt in mtys]
    offsets, off = [], 0
    for k in range(n_ops):
        for _ in range(2):
            offsets.append(off)
            off += -(-n * sizes[k] // 64) * 64
    radix = None
    if keys is not None:
        radix = _Radix(keys, n, _digit_bits(n))
        radix.offset = off
        off += radix.bytes
    raw = b.call(malloc, [_c(off + 64)], name="rows.raw")
    arrs = []
    for k, mt in enumerate(mtys):
        for a in range(2):
            p = b.gep(raw, [_c(offsets[2 * k + a])], inbounds=True)
            arrs.append(b.bitcast(p, mt.as_pointer(), name=f"row{k}.{a}"))
    arr_a, arr_b = arrs[0::2], arrs[1::2]

    def at(p, i):
        return b.gep(p, [i], inbounds=True)

    def less_at(ptrs_x, ptrs_y):
        args = []
        for px, py in zip(ptrs_x, ptrs_y):
            args += [px, py]
        return b.call(less, args, name="lt")

    def merge_row(base):
        with for_range(b, 0, n, "fill") as j:
            src_at = b.add(base, j if inner == 1 else b.mul(j, _c(inner)))
            for k in range(n_ops):
                b.store(b.load(at(in_ptrs[k], src_at)), at(arr_a[k], j))
        # insertion sort of every run of RUN elements (stable)
        n_runs = -(-n // RUN)
        with for_range(b, 0, n_runs, "run") as r:
            start = b.mul(r, _c(RUN), name="start")
            end = b.add(start, _c(RUN))
            end = b.select(b.icmp_signed("<", end, _c(n)), end, _c(n), name="end")
            with for_range(b, b.add(start, _c(1)), end, "t") as t:
                for k in range(n_ops):
                    b.store(b.load(at(arr_a[k], t)), held[k])
                s = _Var(b, entry, I64, t, "s")

                def cond():
                    sv = s.get("sv")
                    go = b.icmp_signed(">", sv, start)
                    blk_more = b.function.append_basic_block("ins.cmp")
                    blk_join = b.function.append_basic_block("ins.join")
                    here = b.block
                    b.cbranch(go, blk_more, blk_join)
                    b.position_at_end(blk_more)
                    prev = b.sub(sv, _c(1))
                    lt = less_at(held, [at(a, prev) for a in arr_a])
                    more_end = b.block
                    b.branch(blk_join)
                    b.position_at_end(blk_join)
                    phi = b.phi(I1, name="ins.go")
                    phi.add_incoming(ir.Constant(I1, 0), here)
                    phi.add_incoming(lt, more_end)
                    return phi

                def body():
                    sv = s.get()
                    prev = b.sub(sv, _c(1))
                    for a in arr_a:
                        b.store(b.load(at(a, prev)), at(a, sv))
                    s.set(prev)

                _while(b, cond, body, "ins")
                sv = s.get()
                for k in range(n_ops):
                    b.store(b.load(held[k]), at(arr_a[k], sv))
        # bottom-up merges, ping-pong between the two arrays of every operand
        flip = _Var(b, entry, I1, ir.Constant(I1, 0), "flip")  # true: the row is in arr_b
        w = _Var(b, entry, I64, _c(RUN), "w")

        def more_passes():
            return b.icmp_signed("<", w.get(), _c(n))

        def one_pass():
            wv = w.get("wv")
            fv = flip.get("fv")
            sp = [b.select(fv, pb, pa) for pa, pb in zip(arr_a, arr_b)]
            dp = [b.select(fv, pa, pb) for pa, pb in zip(arr_a, arr_b)]
            two = b.shl(wv, _c(1), name="two")
            n_pairs = b.udiv(b.add(_c(n - 1), two), two, name="pairs")
            with for_range(b, 0, n_pairs, "pair") as pr:
                lo_ = b.mul(pr, two, name="lo")
                mid = b.add(lo_, wv)
                mid = b.select(b.icmp_signed("<", mid, _c(n)), mid, _c(n), name="mid")
                hi_ = b.add(lo_, two)
                hi_ = b.select(b.icmp_signed("<", hi_, _c(n)), hi_, _c(n), name="hi")
                _sequential_merge(b, entry, sp, dp, lo_, mid, hi_, less_at, n_ops)
            flip.set(b.not_(fv))
            w.set(two)

        _while(b, more_passes, one_pass, "pass")
        fv = flip.get("final")
        final = [b.select(fv, pb, pa) for pa, pb in zip(arr_a, arr_b)]
        with for_range(b, 0, n, "out") as j:
            dst_at = b.add(base, j if inner == 1 else b.mul(j, _c(inner)), name="dst.at")
            for k in range(n_ops):
                b.store(b.load(at(final[k], j)), at(out_ptrs[k], dst_at))

    if radix is not None:
        radix.bind(b, entry, raw, ets, in_ptrs, out_ptrs, arr_a, inner)
    with for_range(b, lo, hi, "row") as row:
        if inner == 1:
            base = b.mul(row, _c(n), name="base")
        else:
            o = b.udiv(row, _c(inner), name="o")
            i = b.urem(row, _c(inner), name="i")
            base = b.add(b.mul(o, _c(n * inner)), i, name="base")
        if radix is None:
            merge_row(base)
        else:
            done = radix.emit_row(base)
            if done is not None:  # a FLOAT comparison met a NaN: the comparator's merge sort
                with b.if_then(b.not_(done), likely=False):
                    merge_row(base)
    b.call(free, [raw])
    b.ret_void()
    log = max(1, (n - 1).bit_length())
    cost = n * log * max(1, n_ops) if radix is None else n * 4 * max(1, n_ops)
    return KernelSpec(name, n_ops, outs_spec, rows, cost=cost)


def _byte_size(mt) -> int:
    if isinstance(mt, ir.IntType):
        return max(1, mt.width // 8)
    return 4 if mt == ir.FloatType() else 8


# -- radix sort -------------------------------------------------------------------------------

#: Rows at least this long sort by radix when ``radix_keys`` applies (shorter ones by the
#: merge sort, whose cost has no per-row histogram to clear and scan).
RADIX_MIN = 128


def _digit_bits(n: int) -> int:
    """Bits per radix digit: 256 buckets for rows up to 64K elements (the histograms stay
    small next to the row), 2048 above (fewer passes over a long row)."""
    return 11 if n > (1 << 16) else 8


@dataclass(frozen=True)
class RadixKey:
    """One key of a lexicographic comparator as an unsigned integer of ``width`` bits
    ordered as the comparison orders: the comparator's expression ``tree`` of the element
    (its parameter ``param`` itself, or an elementwise expression of it) of operand
    ``operand``, compared as ``kind`` ("total": a float's TOTALORDER key; "float": a FLOAT
    comparison, -0 equivalent to +0, NaNs in no order; "signed", "unsigned": integers and
    pred), descending when ``descending``."""

    operand: int
    tree: object
    param: object
    kind: str
    width: int
    descending: bool


def radix_keys(instr) -> list | None:
    """The keys of sort ``instr``'s comparator, most significant first, when it is a
    lexicographic chain of LT/GT comparisons the radix sort orders exactly as the
    comparator does (``library.sort_levels``' pattern: each level compares the same
    elementwise expression of one operand's two elements); None otherwise. A stable sort
    by these keys is the comparator's stable order (``is_stable=false`` sorts compile only
    where every order of equivalent elements is the same: ``sort_support``)."""
    if sort_support(instr) is not None:
        return None
    from xlapy.backends.cpu.library import sort_levels
    from xlapy.hlo.attrs.enums import ComparisonType

    levels = sort_levels(instr)
    if not levels:
        return None
    out = []
    for lv in levels:
        tree = lv.transform if lv.transform is not None else lv.param
        et = tree.shape.element_type
        if et not in el.TYPES or not (0 <= lv.operand < len(instr.operands)):
            return None
        kind, ty = el.TYPES[et]
        if kind == "f":
            fmt = el.FORMATS.get(et)
            full = 32 if ty == ir.FloatType() else 64  # the compute type's bits
            if lv.ctype == ComparisonType.TOTALORDER:
                rk, width = "total", (fmt.bits if fmt is not None else full)
            else:
                rk, width = "float", full
        elif kind == "s":
            rk, width = "signed", ty.width
        elif kind in "up":
            rk, width = "unsigned", ty.width
        else:
            return None
        out.append(RadixKey(lv.operand, tree, lv.param, rk, width, bool(lv.descending)))
    return out


class _Radix:
    """The LSD radix sort of one row, emitted into a sort kernel: one pass over the row
    counts every digit of every key (and notes NaNs under FLOAT comparisons: such a row
    goes to the merge sort); then one stable counting pass per digit whose values are not
    all the same, least significant digit of the least significant key first, moving every
    operand's element (its bits: NaN payloads and -0 survive) between the first work array
    and the output so that the last pass lands in the output. Keys are computed from the
    elements again in every pass (no key array)."""

    def __init__(self, keys, n: int, bits: int):
        self.keys, self.n, self.bits = keys, n, bits
        self.radix = 1 << bits
        self.digits = [-(-k.width // bits) for k in keys]
        self.first = [sum(self.digits[:q]) for q in range(len(keys))]
        self.total = sum(self.digits)
        self.count_type = I32 if n < (1 << 31) else I64
        count_bytes = self.count_type.width // 8
        self.bytes = -(-(self.total * self.radix * count_bytes + self.total) // 64) * 64
        self.fallback = any(k.kind == "float" for k in keys)

    def bind(self, b, entry, raw, ets, in_ptrs, out_ptrs, scratch, inner):
        self.b, self.entry = b, entry
        self.ets, self.in_ptrs, self.out_ptrs, self.scratch = ets, in_ptrs, out_ptrs, scratch
        self.inner = inner
        self.em = el.ElementalEmitter(b, None, set())
        base = b.gep(raw, [_c(self.offset)], inbounds=True)
        self.hist_raw = base
        self.hist = b.bitcast(base, self.count_type.as_pointer(), name="hist")
        cb = self.count_type.width // 8
        self.moves = b.gep(base, [_c(self.total * self.radix * cb)], inbounds=True,
                           name="moves")  # i8 per digit: 1 when its pass moves something

    # -- keys ------------------------------------------------------------------------------

    def key(self, q: int, ptrs, pos):
        """(key q of the element at ``pos`` of ``ptrs`` as an i64, its NaN flag or None)."""
        b, k = self.b, self.keys[q]
        et = self.ets[k.operand]
        v = el.load_value(b, b.gep(ptrs[k.operand], [pos], inbounds=True), et, f"k{q}")
        if k.tree is not k.param:
            v = inline_expression(b, k.tree, {id(k.param): v})
        w = k.width
        wt = ir.IntType(w)
        nan = None
        if k.kind == "total":
            et_t = k.tree.shape.element_type
            key = self.em._total_order_key(v, et_t, f"k{q}.to")
            fmt = el.FORMATS.get(et_t)
            if key.type.width != w:
                key = b.trunc(key, wt)
            if fmt is None or fmt.special != "e8m0":  # two's complement -> offset binary
                key = b.xor(key, ir.Constant(wt, 1 << (w - 1)))
        elif k.kind == "float":
            nan = b.fcmp_unordered("uno", v, v, name=f"k{q}.nan")
            z = b.fadd(v, ir.Constant(v.type, 0.0), name=f"k{q}.z")  # -0 -> +0 (and, as the
            bits = b.bitcast(z, wt)  # comparison, denormals under DAZ)
            sign = b.ashr(bits, ir.Constant(wt, w - 1))
            key = b.xor(bits, b.or_(sign, ir.Constant(wt, 1 << (w - 1))))
        elif k.kind == "signed":
            key = b.xor(v, ir.Constant(wt, 1 << (w - 1)))
        else:
            key = v
        if k.descending:
            key = b.not_(key)
        if w < 64:
            key = b.zext(key, I64)
        return key, nan

    def _digit(self, key, shift):
        b = self.b
        if not (isinstance(shift, ir.Constant) and shift.constant == 0):
            key = b.lshr(key, shift)
        return b.and_(key, _c(self.radix - 1))

    # -- one row ---------------------------------------------------------------------------

    def emit_row(self, base):
        """Sort the row at ``base``; an i1 (true: sorted) when a NaN can send the row to the
        merge sort, else None."""
        b, n, R, ct = self.b, self.n, self.radix, self.count_type
        inner = self.inner
        memset = _libc(self.b.module, "llvm.memset.p0.i64", ir.VoidType(),
                       [I8.as_pointer(), I8, I64, I1])
        b.call(memset, [self.hist_raw, ir.Constant(I8, 0),
                        _c(self.total * R * (ct.width // 8)), ir.Constant(I1, 0)])
        srcs = [b.gep(p, [base], inbounds=True) for p in self.in_ptrs]
        nan = _Var(b, self.entry, I1, ir.Constant(I1, 0), "nan") if self.fallback else None
        one = ir.Constant(ct, 1)
        with for_range(b, 0, n, "count") as j:
            pos = j if inner == 1 else b.mul(j, _c(inner))
            for q in range(len(self.keys)):
                key, isnan = self.key(q, srcs, pos)
                for dd in range(self.digits[q]):
                    dig = self._digit(key, _c(dd * self.bits))
                    slot = b.add(dig, _c((self.first[q] + dd) * R))
                    p = b.gep(self.hist, [slot], inbounds=True)
                    b.store(b.add(b.load(p), one), p)
                if isnan is not None:
                    nan.set(b.or_(nan.get(), isnan))
        if nan is None:
            self._passes(base, srcs)
            return None
        done = nan.get("row.nan")
        with b.if_then(b.not_(done), likely=True):
            self._passes(base, srcs)
        return b.not_(done)

    def _passes(self, base, srcs):
        b, n, R, ct, inner = self.b, self.n, self.radix, self.count_type, self.inner
        n_ops = len(self.in_ptrs)
        # the digits whose values differ (element 0's bucket does not hold the whole row)
        passes = _c(0)
        for q in range(len(self.keys)):
            key, _ = self.key(q, srcs, _c(0))
            for dd in range(self.digits[q]):
                d = self.first[q] + dd
                dig = self._digit(key, _c(dd * self.bits))
                cnt = b.load(b.gep(self.hist, [b.add(dig, _c(d * R))], inbounds=True))
                moves = b.icmp_unsigned("!=", cnt, ir.Constant(ct, n))
                b.store(b.zext(moves, I8), b.gep(self.moves, [_c(d)], inbounds=True))
                passes = b.add(passes, b.zext(moves, I64))
        outs = [b.gep(p, [base], inbounds=True) for p in self.out_ptrs]
        with b.if_else(b.icmp_unsigned("==", passes, _c(0))) as (none, some):
            # every digit is the same across the row: it is sorted already
            with none, for_range(b, 0, n, "same") as j:
                pos = j if inner == 1 else b.mul(j, _c(inner))
                for k in range(n_ops):
                    b.store(b.load(b.gep(srcs[k], [pos], inbounds=True)),
                            b.gep(outs[k], [pos], inbounds=True))
            with some:
                src = [_Var(b, self.entry, p.type, p, f"src{k}") for k, p in enumerate(srcs)]
                stride = _Var(b, self.entry, I64, _c(inner), "stride")
                done = _Var(b, self.entry, I64, _c(0), "done")
                for q in reversed(range(len(self.keys))):  # least significant key first
                    with for_range(b, 0, self.digits[q], f"digit{q}") as dd:
                        d = b.add(dd, _c(self.first[q]))
                        moves = b.load(b.gep(self.moves, [d], inbounds=True))
                        with b.if_then(b.icmp_unsigned("!=", moves, ir.Constant(I8, 0))):
                            self._one_pass(q, d, dd, passes, done, src, stride, outs)

    def _one_pass(self, q, d, dd, passes, done, src, stride, outs):
        b, n, R, ct, inner = self.b, self.n, self.radix, self.count_type, self.inner
        # the pass that is last (counting back, every second one) writes the output
        left = b.sub(b.sub(passes, _c(1)), done.get())
        to_out = b.icmp_unsigned("==", b.and_(left, _c(1)), _c(0), name="to.out")
        dsts = [b.select(to_out, o, s) for o, s in zip(outs, self.scratch)]
        dstride = b.select(to_out, _c(inner), _c(1), name="dstride")
        # exclusive prefix sums: the first position of each bucket
        h = b.gep(self.hist, [b.mul(d, _c(R))], inbounds=True, name="h")
        acc = _Var(b, self.entry, ct, ir.Constant(ct, 0), "acc")
        with for_range(b, 0, R, "scan") as r:
            p = b.gep(h, [r], inbounds=True)
            c = b.load(p)
            a = acc.get()
            b.store(a, p)
            acc.set(b.add(a, c))
        shift = b.mul(dd, _c(self.bits), name="shift")
        sps = [s.get(f"sp{k}") for k, s in enumerate(src)]
        sstride = stride.get("sstride")
        one = ir.Constant(ct, 1)
        with for_range(b, 0, n, "move") as j:
            pos = b.mul(j, sstride)
            key, _ = self.key(q, sps, pos)
            slot = b.gep(h, [self._digit(key, shift)], inbounds=True)
            at = b.load(slot)
            b.store(b.add(at, one), slot)
            at = b.zext(at, I64) if ct != I64 else at
            dpos = b.mul(at, dstride)
            for k in range(len(sps)):
                b.store(b.load(b.gep(sps[k], [pos], inbounds=True)),
                        b.gep(dsts[k], [dpos], inbounds=True))
        for k, s in enumerate(src):
            s.set(dsts[k])
        stride.set(dstride)
        done.set(b.add(done.get(), _c(1)))


# -- top-k ------------------------------------------------------------------------------------


def topk_form(instr):
    """(k, largest) of a ``topk`` instruction or XLA:CPU's ``TopK`` custom call (the k
    largest), or a reason string when ``emit_topk`` cannot compile it."""
    if instr.opcode == "topk":
        k = int(instr.attrs["k"])
        largest = instr.attrs["largest"]
        largest = True if largest is None else bool(largest)
    elif instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == "TopK":
        shapes = instr.shape.tuple_shapes if instr.shape.is_tuple() else ()
        if len(shapes) != 2 or not shapes[0].dimensions:
            return "a TopK custom call without a (values, indices) result"
        from xlapy.interpreter.custom_calls import lookup_custom_call

        target = lookup_custom_call("TopK")
        if target is None or target.source != "xlapy.interpreter.custom_calls_lapack":
            return "TopK is registered by the user (their function runs)"
        k, largest = int(shapes[0].dimensions[-1]), True
    else:
        return "not a top-k"
    if len(instr.operands) != 1:
        return "top-k of several operands"
    x = instr.operands[0].shape
    if not _array_ok(x) or not x.dimensions:
        return "the operand is not an array of a generated element type with a dimension"
    if el.TYPES[x.element_type][0] == "c":
        return "complex values have no order"
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple() else ()
    want = _dims(x)[:-1] + (k,)
    if len(shapes) != 2 or _dims(shapes[0]) != want or _dims(shapes[1]) != want or \
            shapes[0].element_type != x.element_type or \
            el.TYPES.get(shapes[1].element_type, ("",))[0] != "s" or \
            el.TYPES[shapes[1].element_type][1].width != 32:
        return "the result is not (values, s32 indices) of the operand's rows"
    if k > _dims(x)[-1]:
        return "k exceeds the last dimension"
    return k, largest


def _order_key(em, b, v, et):
    """An i64 increasing with ``v`` in XLA's total order (floats: TOTALORDER's keys;
    unsigned integers and pred: their value; signed: theirs)."""
    kind, ty = el.TYPES[et]
    if kind == "f":
        key = em._total_order_key(v, et, "key")
        return b.sext(key, I64) if key.type.width < 64 else key
    if kind == "s":
        return b.sext(v, I64) if ty.width < 64 else v
    if ty.width < 64:  # unsigned, pred
        return b.zext(v, I64)
    return b.xor(v, _c(-(1 << 63)))  # u64: flip the sign bit, compare signed


def emit_topk(module: ir.Module, name: str, instr) -> KernelSpec:
    """The kernel of a top-k (``topk_form(instr)`` is a (k, largest) pair): per row a
    binary heap of the k best (key, index) pairs so far, its root the worst of them (an
    element replaces the root only when strictly better: a later index never wins a tie),
    then the heap emptied worst first into the row's results. O(n log k) per row."""
    k, largest = topk_form(instr)
    xshape = instr.operands[0].shape
    et = xshape.element_type
    dims = _dims(xshape)
    n = dims[-1]
    rows = _prod(dims[:-1])
    vshape, ishape = instr.shape.tuple_shapes
    fn, b = declare_kernel(module, name)
    if rows == 0 or k == 0:
        b.ret_void()
        return KernelSpec(name, 1, [vshape, ishape], 0)
    bufs, lo, hi = fn.args
    entry = ir.IRBuilder(fn.entry_basic_block)
    entry.position_at_start(fn.entry_basic_block)
    mt = el.memory_type(et)
    x_ptr = buffer_pointer(b, bufs, 0, mt, "x")
    v_ptr = buffer_pointer(b, bufs, 1, mt, "values")
    i_ptr = buffer_pointer(b, bufs, 2, I32, "indices")
    malloc = _libc(module, "malloc", I8.as_pointer(), [I64])
    free = _libc(module, "free", ir.VoidType(), [I8.as_pointer()])
    raw = b.call(malloc, [_c(16 * k)], name="heap.raw")
    hkey = b.bitcast(raw, I64.as_pointer(), name="hkey")
    hidx = b.gep(hkey, [_c(k)], inbounds=True, name="hidx")
    em = el.ElementalEmitter(b, None, set())

    def at(p, i):
        return b.gep(p, [i], inbounds=True)

    def better(ka, ia, kb, ib):
        """(ka, ia) comes before (kb, ib) in the result."""
        gt = b.icmp_signed(">", ka, kb)
        tie = b.and_(b.icmp_signed("==", ka, kb), b.icmp_signed("<", ia, ib))
        return b.or_(gt, tie)

    def sift_down(size, key, index):
        """Put (key, index) at the root of the heap of ``size`` elements and restore the
        heap order (parent worse than its children)."""
        hole = _Var(b, entry, I64, _c(0), "hole")
        go = _Var(b, entry, I1, ir.Constant(I1, 1), "go")

        def cond():
            child = b.add(b.shl(hole.get(), _c(1)), _c(1))
            return b.and_(go.get(), b.icmp_signed("<", child, size))

        def body():
            h = hole.get()
            c1 = b.add(b.shl(h, _c(1)), _c(1))
            c2 = b.add(c1, _c(1))
            k1, i1 = b.load(at(hkey, c1)), b.load(at(hidx, c1))
            has2 = b.icmp_signed("<", c2, size)
            c2s = b.select(has2, c2, c1)
            k2, i2 = b.load(at(hkey, c2s)), b.load(at(hidx, c2s))
            # the worse child (the one the other is better than)
            take2 = b.and_(has2, better(k1, i1, k2, i2))
            c = b.select(take2, c2, c1)
            kc = b.select(take2, k2, k1)
            ic = b.select(take2, i2, i1)
            down = better(key, index, kc, ic)  # the new pair is better than the worse child
            with b.if_else(down) as (then, otherwise):
                with then:
                    b.store(kc, at(hkey, h))
                    b.store(ic, at(hidx, h))
                    hole.set(c)
                with otherwise:
                    go.set(ir.Constant(I1, 0))

        _while(b, cond, body, "sift")
        h = hole.get()
        b.store(key, at(hkey, h))
        b.store(index, at(hidx, h))

    def sift_up(pos, key, index):
        hole = _Var(b, entry, I64, pos, "uhole")
        go = _Var(b, entry, I1, ir.Constant(I1, 1), "ugo")

        def cond():
            return b.and_(go.get(), b.icmp_signed(">", hole.get(), _c(0)))

        def body():
            h = hole.get()
            parent = b.lshr(b.sub(h, _c(1)), _c(1))
            kp, ip = b.load(at(hkey, parent)), b.load(at(hidx, parent))
            up = better(kp, ip, key, index)  # the parent is better: the new pair goes up
            with b.if_else(up) as (then, otherwise):
                with then:
                    b.store(kp, at(hkey, h))
                    b.store(ip, at(hidx, h))
                    hole.set(parent)
                with otherwise:
                    go.set(ir.Constant(I1, 0))

        _while(b, cond, body, "up")
        h = hole.get()
        b.store(key, at(hkey, h))
        b.store(index, at(hidx, h))

    with for_range(b, lo, hi, "row") as row:
        base = b.mul(row, _c(n), name="base")
        out_base = b.mul(row, _c(k), name="obase")
        with for_range(b, 0, n, "j") as j:
            v = el.load_value(b, at(x_ptr, b.add(base, j)), et, "x")
            key = _order_key(em, b, v, et)
            if not largest:
                key = b.not_(key)
            full = b.icmp_signed(">=", j, _c(k))
            with b.if_else(full) as (then, otherwise):
                with then:
                    wins = better(key, j, b.load(at(hkey, _c(0))), b.load(at(hidx, _c(0))))
                    with b.if_then(wins):
                        sift_down(_c(k), key, j)
                with otherwise:
                    sift_up(j, key, j)
        # empty the heap worst first: result position size-1, size-2, ..., 0
        with for_range(b, 0, k, "pop") as t:
            size = b.sub(_c(k), t, name="size")
            last = b.sub(size, _c(1))
            idx = b.load(at(hidx, _c(0)), name="best.idx")
            dst = b.add(out_base, last)
            b.store(b.load(at(x_ptr, b.add(base, idx))), at(v_ptr, dst))
            b.store(b.trunc(idx, I32), at(i_ptr, dst))
            moved_k, moved_i = b.load(at(hkey, last)), b.load(at(hidx, last))
            with b.if_then(b.icmp_signed(">", last, _c(0))):
                sift_down(last, moved_k, moved_i)
    b.call(free, [raw])
    b.ret_void()
    log = max(1, (k - 1).bit_length())
    return KernelSpec(name, 1, [vshape, ishape], rows, cost=n + k * log)


__all__ = ["RADIX_MIN", "RUN", "RadixKey", "emit_sort", "emit_topk", "radix_keys", "sort_support",
           "topk_form"]
