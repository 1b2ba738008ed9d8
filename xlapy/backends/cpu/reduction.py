"""Reduction kernels: reduce and reduce-window, alone or as the root of an input fusion,
following the calling convention of ``kernel_abi`` (``void f(i8** bufs, i64 lo, i64 hi)``).

``emit(module, name, root, inputs)`` adds the kernel(s) computing ``root`` to ``module`` and
returns their ``KernelSpec``. ``inputs`` are the instructions read from ``bufs[0..]`` (a
fused computation's parameters and large constants, or an unfused reduce's operands); the
output buffers follow (one per result: a variadic reduce has several), then the scratch
buffers. Every instruction between the inputs and the root's operands is generated element
by element (``elemental.ElementalEmitter``), so producers never materialise; rank-0
constants that are not inputs become immediates, larger ones internal globals.

Loop structure of a reduce. The operand's dimensions (ignoring size-1 ones) are grouped into
*segments*, maximal runs of consecutive reduced or kept dimensions; a segment's positions
are contiguous in its dimensions' row-major order, so each segment is one loop:

- *row reduction* (the last segment is reduced; also full reductions): a work item is one
  output element; loops over the reduced segments, the innermost contiguous. With a
  recognised associative reducer (``add``/``multiply``/``maximum``/``minimum``/``and``/``or``
  of its two parameters, element types computed in their storage type, and max/min of
  narrow floats, exact in f32) the accumulator
  update carries ``reassoc`` (floats) or is an LLVM min/max intrinsic, so LLVM vectorises
  it with several independent vector accumulators, combined at the end. jax's
  argmax/argmin reducer (``arg_form``) over a minor reduced segment runs in vector lanes
  (``_ArgRow``: lane l folds positions l, l + W, ... with the reducer's rule and remembers
  its value's position; the lanes combine by the order the reducer picks by, positions
  deciding between NaNs and equal numbers: bit-exact). Any other reducer runs in order.
- *column reduction* (the last segment is kept): a work item is a block of output elements
  (up to BLOCK_BYTES of accumulators: 4096 f32, whole rows of most shapes, so each
  work item reads long contiguous runs) of the minor kept segment (and one position of the other kept segments);
  the block's accumulators live on the stack, each reduced position updates the whole block
  in an inner loop over contiguous elements (vectorised across outputs, every output
  accumulated in order: exact whatever the reducer).
- *chunking*: when there are fewer than MIN_ITEMS work items but many elements and the
  reducer is recognised, the longest reduced segment is split into chunks (more work
  items, so the runtime runs them on both cores); each chunk starts from the reducer's
  identity and writes its partial result to scratch, and ``spec.then`` combines the
  partials of each output, in chunk order, after the init value.

The init value is combined exactly once per output: accumulators start from it (or from the
identity when chunked, the ``then`` kernel starting from the init value). A reduced
dimension of size 0 gives the init value.

Reduce-window: a work item is a block of positions (``block_size``) along the output's last
dimension (at one position of the others); for each window position, in row-major window
order, the inner loop updates the block's accumulators. Positions falling in padding or
base-dilation holes are skipped (a branch-free select keeps the accumulator), as the
interpreter and XLA:CPU do; a window without elements gives the init value. The loops run
only over window positions that fall inside the dilated base (bounds computed per output
position, per block along the last dimension), and a window longer than the operand along a
dimension walks the operand's elements instead, so the work grows with the output and the
operand, never with the window, stride, dilation or padding sizes (a 1x2**62 window with
2**62 padding costs what a 1x3 one does; XLA:CPU loops over the whole window).

Float results differ from the interpreter only by reassociation: recognised float ``add``
and ``multiply`` row reductions (vector accumulators, chunks) and reductions of more than
64 elements per output (the interpreter's pairwise tree against in-order loops here).
Integer, min/max, and/or and every other reducer are bit-exact.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu import indexing
from xlapy.backends.cpu.indexing import Index
from xlapy.backends.cpu.kernel_abi import I64, KernelSpec, buffer_pointer, declare_kernel, for_range
from xlapy.backends.cpu.scalar_computation import (
    constant_value,
    inline_computation,
    supports_computation,
)
from xlapy.errors import InvalidArgumentError
from xlapy.shape import PrimitiveType as PT
from xlapy.shape import dtypes

#: Bytes of the stack accumulators of one work item of a column reduction or
#: reduce-window (a block of output elements; L1-resident).
BLOCK_BYTES = 16384
#: Fewer work items than this: chunk the reduction (when recognised and large).
MIN_ITEMS = 8
#: Elements per chunk, at least.
CHUNK_MIN = 1 << 16
#: Chunks per output, at most.
MAX_CHUNKS = 64

#: Reducers combined out of order (vector accumulators, chunks): their root.
ASSOCIATIVE = frozenset({"add", "multiply", "maximum", "minimum", "and", "or"})

_ROOTS = ("reduce", "reduce-window")


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


def _dims(instr) -> tuple[int, ...]:
    return tuple(int(d) for d in instr.shape.dimensions)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _what(root) -> str:
    return f"{root.opcode} %{root.name}"


# -- what is supported ------------------------------------------------------------------------


def _array_ok(shape) -> bool:
    return shape.is_array() and not shape.is_dynamic() and shape.element_type in el.TYPES


def _result_shapes(root) -> list:
    return list(root.shape.tuple_shapes) if root.shape.is_tuple() else [root.shape]


def recognised_op(comp) -> str | None:
    """The opcode of a reducer that is ``op(param0, param1)`` (either order) with ``op``
    associative and commutative, on an element type computed in its storage type (so
    reordering changes at most float rounding); None otherwise."""
    params = comp.parameters
    root = comp.root
    if len(params) != 2 or root is None or root.opcode not in ASSOCIATIVE:
        return None
    if len(root.operands) != 2 or {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    if root.operands[0] is root.operands[1]:
        return None
    et = root.shape.element_type
    if not all(s.is_array() and not s.dimensions and s.element_type == et
               for s in (root.shape, params[0].shape, params[1].shape)):
        return None
    if et not in el.TYPES:
        return None
    kind, ty = el.TYPES[et]
    if kind == "p":
        return root.opcode if root.opcode in ("maximum", "minimum", "and", "or") else None
    if kind == "c":  # complex: the computation inlined as it is
        return None
    # computed wider than stored: rounds at every step, except max and min, whose result
    # is one of the stored values: exact in the wider type (the NaN a step would round to
    # the format's NaN is made so when the result is stored: _store)
    if el.memory_type(et) != ty and (kind != "f" or root.opcode not in ("maximum", "minimum")):
        return None
    if kind == "f" and root.opcode in ("and", "or"):
        return None
    return root.opcode


def _reducer_ok(root) -> bool:
    comp = root.attrs["to_apply"]
    n = len(root.operands) // 2
    params = comp.parameters
    if len(params) != 2 * n or comp.root is None:
        return False
    results = _result_shapes(root)
    in_types = [o.shape.element_type for o in root.operands[:n]]
    for k in range(n):
        for p in (params[k], params[n + k]):
            if not p.shape.is_array() or p.shape.dimensions or \
                    p.shape.element_type != in_types[k]:
                return False
        if results[k].element_type != in_types[k]:
            return False
    if recognised_op(comp) is not None:
        return True
    rshape = comp.root.shape
    rleaves = list(rshape.tuple_shapes) if rshape.is_tuple() else [rshape]
    if len(rleaves) != n or any(s.is_tuple() for s in rleaves):
        return False
    return supports_computation(comp)


def _generated(instr) -> bool:
    if instr.opcode == "constant":
        return _array_ok(instr.shape)
    if instr.opcode in indexing.GENERATORS:
        return indexing.supports(instr)
    return el.supports(instr)


def _default_inputs(root) -> list:
    comp = root.parent
    if comp is not None and getattr(comp, "is_fusion_computation", False):
        return [i for i in comp.instructions if i.opcode == "parameter"]
    return list(root.operands)


def supports(root, inputs=None) -> bool:
    """Whether ``emit`` compiles ``root`` (a reduce or reduce-window). With ``inputs``, the
    instructions between them and the root must have element generators too; without,
    the root's operands are its inputs (the parameters when ``root`` is in a computation
    the fusion pass made)."""
    if root.opcode not in _ROOTS or root.has_side_effect:
        return False
    ops = root.operands
    if not ops or len(ops) % 2:
        return False
    n = len(ops) // 2
    if not all(_array_ok(o.shape) for o in ops) or not all(_array_ok(s)
                                                          for s in _result_shapes(root)):
        return False
    if len(_result_shapes(root)) != n:
        return False
    base = _dims(ops[0])
    if any(_dims(o) != base for o in ops[:n]) or any(o.shape.dimensions for o in ops[n:]):
        return False
    if root.opcode == "reduce-window":
        window = root.attrs["window"]
        if len(window.dimensions) != len(base):
            return False
        if any(wd.window_reversal or wd.stride < 1 or wd.base_dilation < 1 or
               wd.window_dilation < 1 for wd in window.dimensions):
            return False
    else:
        dims = tuple(root.attrs["dimensions"])
        if len(set(dims)) != len(dims) or any(not 0 <= d < len(base) for d in dims):
            return False
    if not _reducer_ok(root):
        return False
    if inputs is None:
        inputs = _default_inputs(root)
    stop = {id(i) for i in inputs}
    for m in _members(root, stop):
        if m.opcode == "parameter" or not _generated(m):
            return False
    return True


def _members(root, stop: set) -> list:
    """The instructions generated for the root's operands, stopping at ``stop`` ids."""
    seen: set[int] = set()
    out: list = []
    stack = list(root.operands)
    while stack:
        instr = stack.pop()
        if id(instr) in seen or id(instr) in stop:
            continue
        seen.add(id(instr))
        out.append(instr)
        stack.extend(instr.operands)
    return out


# -- the reducer ------------------------------------------------------------------------------


def _intrinsic(module, name, ret, args):
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    return fn


def _float_suffix(ty) -> str:
    if isinstance(ty, ir.HalfType):
        return "f16"
    return "f32" if isinstance(ty, ir.FloatType) else "f64"


def identity(op: str, et) -> ir.Constant:
    """The identity of a recognised reducer ``op`` on element type ``et``."""
    kind, ty = el.TYPES[et]
    if kind == "p":
        return ir.Constant(ty, 1 if op in ("minimum", "and") else 0)
    if kind == "f":
        return ir.Constant(ty, {"add": -0.0, "multiply": 1.0, "maximum": float("-inf"),
                                "minimum": float("inf")}[op])
    w = ty.width
    if op in ("add", "or"):
        return ir.Constant(ty, 0)
    if op == "multiply":
        return ir.Constant(ty, 1)
    if op == "and":
        return ir.Constant(ty, (1 << w) - 1)
    if kind == "s":
        v = -(1 << (w - 1)) if op == "maximum" else (1 << (w - 1)) - 1
        return ir.Constant(ty, v & ((1 << w) - 1))
    return ir.Constant(ty, 0 if op == "maximum" else (1 << w) - 1)


class Reducer:
    """A reduce's computation, emitted inline: ``exact`` applies it (the computation's own
    semantics), ``fast`` applies a recognised one with reassociation allowed."""

    def __init__(self, comp, types: list):
        self.comp = comp
        self.types = types
        self.op = recognised_op(comp) if len(types) == 1 else None
        # a recognised narrow-float max/min runs in f32 without per-step rounding
        self.rounds_once = self.op in ("maximum", "minimum") and types[0] in el.FORMATS

    def exact(self, b: ir.IRBuilder, accs: list, xs: list) -> list:
        if self.op is not None:
            return [self._assoc(b, accs[0], xs[0], fast=False)]
        return inline_computation(b, self.comp, list(accs) + list(xs))

    def fast(self, b: ir.IRBuilder, acc, x):
        return self._assoc(b, acc, x, fast=True)

    def identity(self) -> ir.Constant:
        return identity(self.op, self.types[0])

    def _assoc(self, b, a, c, *, fast: bool):
        op, et = self.op, self.types[0]
        kind, ty = el.TYPES[et]
        if kind == "p":
            return b.and_(a, c, name="acc") if op in ("and", "minimum") else \
                b.or_(a, c, name="acc")
        if kind == "f":
            flags = ("reassoc", "nsz") if fast else ()
            if op == "add":
                return b.fadd(a, c, name="acc", flags=flags)
            if op == "multiply":
                return b.fmul(a, c, name="acc", flags=flags)
            fn = _intrinsic(b.module, f"llvm.{op}.{_float_suffix(ty)}", ty, [ty, ty])
            return b.call(fn, [a, c], name="acc")  # NaN-propagating, -0 < +0
        if op == "add":
            return b.add(a, c, name="acc")
        if op == "multiply":
            return b.mul(a, c, name="acc")
        if op == "and":
            return b.and_(a, c, name="acc")
        if op == "or":
            return b.or_(a, c, name="acc")
        prefix = ("s" if kind == "s" else "u") + ("max" if op == "maximum" else "min")
        fn = _intrinsic(b.module, f"llvm.{prefix}.i{ty.width}", ty, [ty, ty])
        return b.call(fn, [a, c], name="acc")


# -- a kernel function's state ----------------------------------------------------------------


class _Fn:
    """One kernel function: its buffers, the loader for inputs and constants, and an
    element emitter for the instructions between the inputs and the root."""

    def __init__(self, module, name, root, inputs, scratch_types=()):
        self.module = module
        self.root = root
        self.fn, self.b = declare_kernel(module, name)
        b = self.b
        bufs = self.fn.args[0]
        self.lo, self.hi = self.fn.args[1], self.fn.args[2]
        self.in_ptr = {}
        for k, instr in enumerate(inputs):
            if id(instr) not in self.in_ptr:
                et = instr.shape.element_type
                self.in_ptr[id(instr)] = buffer_pointer(b, bufs, k, el.memory_type(et),
                                                        f"in{k}")
        self.outs = []
        base = len(inputs)
        for j, shape in enumerate(_result_shapes(root)):
            self.outs.append(buffer_pointer(b, bufs, base + j,
                                            el.memory_type(shape.element_type), f"out{j}"))
        base += len(self.outs)
        self.scratch = [buffer_pointer(b, bufs, base + s, el.memory_type(et), f"scratch{s}")
                        for s, et in enumerate(scratch_types)]
        stop = {id(i) for i in inputs}
        members = _members(root, stop)
        self.emitter = el.ElementalEmitter(
            b, self._load, {id(m) for m in members if m.opcode not in ("constant",
                                                                        "parameter")})
        self._globals: dict[int, ir.Value] = {}
        self._name = name

    def _load(self, instr, index):
        b = self.b
        et = instr.shape.element_type
        ptr = self.in_ptr.get(id(instr))
        if ptr is None and instr.opcode == "constant":
            value = constant_value(instr)
            if not instr.shape.dimensions:
                return el.immediate(et, np.asarray(value).reshape(())[()])
            ptr = self._global(instr, value)
        if ptr is None:
            raise InvalidArgumentError(
                f"{_what(self.root)}: %{instr.name} ({instr.shape}) is neither an input "
                f"nor generated element-wise")
        if instr.shape.dimensions:
            if tuple(index.dims) != _dims(instr):
                raise InvalidArgumentError(
                    f"{_what(self.root)}: an index of {list(index.dims)} for %{instr.name} "
                    f"({instr.shape})")
            ptr = b.gep(ptr, [index.linear], inbounds=True, name=f"{instr.name}.ptr")
        return el.load_value(b, ptr, et, instr.name)

    def _global(self, instr, value):
        got = self._globals.get(id(instr))
        if got is None:
            et = instr.shape.element_type
            data = np.ascontiguousarray(np.asarray(value, dtype=dtypes.to_dtype(et)))
            raw = data.tobytes()
            aty = ir.ArrayType(el.I8, len(raw))
            g = ir.GlobalVariable(self.module, aty,
                                  name=self.module.get_unique_name(f"{self._name}.const"))
            g.global_constant = True
            g.linkage = "internal"
            g.align = 64
            g.initializer = ir.Constant(aty, bytearray(raw))
            got = g.bitcast(el.memory_type(et).as_pointer())  # a constant expression
            self._globals[id(instr)] = got
        return got

    def alloca(self, ty, count: int, name: str):
        """A stack array of ``count`` values in the entry block."""
        b = self.b
        block = b.block
        entry = self.fn.entry_basic_block
        with b.goto_block(entry):
            if entry.instructions:
                b.position_before(entry.instructions[0])
            slot = b.alloca(ty, size=_c(count) if count != 1 else None, name=name)
        b.position_at_end(block)
        return slot

    def value(self, instr, index):
        return self.emitter.value_at(instr, index)


# -- index helpers ----------------------------------------------------------------------------


class _Seg:
    """A run of consecutive non-unit dimensions of the same class (reduced or kept)."""

    def __init__(self, reduced: bool):
        self.reduced = reduced
        self.dims: list[int] = []
        self.size = 1
        self.stride = 1  # operand stride of the segment's positions
        self.out_stride = 1  # output stride (kept segments)


def _segments(base: tuple, reduced: set) -> list:
    segs: list[_Seg] = []
    for d, n in enumerate(base):
        if n == 1:
            continue
        r = d in reduced
        if not segs or segs[-1].reduced != r:
            segs.append(_Seg(r))
        segs[-1].dims.append(d)
        segs[-1].size *= n
    stride = 1
    for s in reversed(segs):
        s.stride = stride
        stride *= s.size
    ostride = 1
    for s in reversed([s for s in segs if not s.reduced]):
        s.out_stride = ostride
        ostride *= s.size
    return segs


def _split(b, v, sizes: list, name: str) -> list:
    """The mixed-radix digits of ``v`` over ``sizes`` (row-major: the last varies fastest)."""
    out = []
    for k in range(len(sizes) - 1, -1, -1):
        n = sizes[k]
        if k == 0:
            out.append(v)
        elif n == 1:
            out.append(_c(0))
        else:
            out.append(b.urem(v, _c(n), name=f"{name}.d{k}"))
            v = b.udiv(v, _c(n), name=f"{name}.q{k}")
    out.reverse()
    return out


def _operand_index(b, base: tuple, segs: list, vals: dict) -> Index:
    """The Index of the operand at segment positions ``vals`` (id(seg) -> i64): linear from
    the segment strides, the multi-index digits derived (unused ones are dead code)."""
    linear = None
    multi = [_c(0)] * len(base)
    for s in segs:
        v = vals[id(s)]
        term = v if s.stride == 1 else b.mul(v, _c(s.stride), name="seg.off")
        linear = term if linear is None else b.add(linear, term, name="seg.lin")
        sizes = [base[d] for d in s.dims]
        if 0 in sizes:
            continue
        for d, digit in zip(s.dims, _split(b, v, sizes, "seg")):
            multi[d] = digit
    return Index(b, base, linear=linear if linear is not None else _c(0), multi=multi)


def _out_linear(b, segs: list, vals: dict):
    lin = None
    for s in segs:
        if s.reduced:
            continue
        v = vals[id(s)]
        term = v if s.out_stride == 1 else b.mul(v, _c(s.out_stride), name="out.off")
        lin = term if lin is None else b.add(lin, term, name="out.lin")
    return lin if lin is not None else _c(0)


def _store(b, ptr, pos, value, et, name, reducer=None):
    if reducer is not None and reducer.rounds_once:
        # a narrow float max/min accumulated without rounding: rounded once, as the
        # reducer's last step rounds its result (exact but for a NaN's payload)
        value = el.round_to(b, value, et, f"{name}.rnd")
    el.store_value(b, value, b.gep(ptr, [pos], inbounds=True, name=f"{name}.ptr"), et, name)


def _load(b, ptr, pos, et, name):
    return el.load_value(b, b.gep(ptr, [pos], inbounds=True, name=f"{name}.ptr"), et, name)


def _loops(b, segs: list, vals: dict, ranges: dict, body):
    """Nested loops over ``segs`` in order (position ranges ``ranges[id]`` or the whole
    segment), calling ``body()`` innermost with ``vals`` filled."""
    if not segs:
        body()
        return
    s, rest = segs[0], segs[1:]
    start, stop = ranges.get(id(s), (_c(0), _c(s.size)))
    with for_range(b, start, stop, f"r{s.dims[0]}") as i:
        vals[id(s)] = i
        _loops(b, rest, vals, ranges, body)


# -- reduce -----------------------------------------------------------------------------------


def emit(module: ir.Module, name: str, root, inputs: list) -> KernelSpec:
    """Add the kernel computing ``root`` (a reduce or reduce-window) to ``module``; see the
    module docstring for the buffers and the loop structure."""
    if not supports(root, inputs):
        raise InvalidArgumentError(
            f"{_what(root)}: the CPU reduction emitter does not support this instruction "
            f"({root.shape} from {', '.join(str(o.shape) for o in root.operands)})")
    if root.opcode == "reduce":
        return _emit_reduce(module, name, root, list(inputs))
    from xlapy.backends.cpu import scan  # (scan builds on this module)

    if scan.scan_form(root) is not None:  # cumulative: an O(n) prefix scan
        return scan.emit(module, name, root, list(inputs))
    return _emit_reduce_window(module, name, root, list(inputs))


def block_size(n: int, types: list) -> int:
    """Output elements per block: at most ``n``, accumulators of ``types`` within
    BLOCK_BYTES."""
    width = sum(np.dtype(dtypes.to_dtype(et)).itemsize for et in types)
    return max(1, min(n, BLOCK_BYTES // width))


def _types(root) -> list:
    return [s.element_type for s in _result_shapes(root)]


def _spec(name, root, inputs, domain, cost, **kw) -> KernelSpec:
    return KernelSpec(name=name, n_inputs=len(inputs), outputs=_result_shapes(root),
                      domain=int(domain), cost=max(1, int(cost)), **kw)


def _inits(fn: _Fn, root) -> list:
    n = len(root.operands) // 2
    return [fn.value(o, Index.scalar(fn.b)) for o in root.operands[n:]]


def _emit_fill(module, name, root, inputs, n_out: int) -> KernelSpec:
    """Every output element is the init value (reduced or windowed over no element)."""
    fn = _Fn(module, name, root, inputs)
    b = fn.b
    inits = _inits(fn, root)
    types = _types(root)
    with for_range(b, fn.lo, fn.hi, "o") as o:
        for j, (v, et) in enumerate(zip(inits, types)):
            _store(b, fn.outs[j], o, v, et, f"out{j}")
    b.ret_void()
    return _spec(name, root, inputs, n_out, 1)


def _emit_empty(module, name, root, inputs) -> KernelSpec:
    fn = _Fn(module, name, root, inputs)
    fn.b.ret_void()
    return _spec(name, root, inputs, 0, 1)


def _emit_reduce(module, name, root, inputs) -> KernelSpec:
    base = _dims(root.operands[0])
    reduced = set(root.attrs["dimensions"])
    n_out = _prod(base[d] for d in range(len(base)) if d not in reduced)
    k_red = _prod(base[d] for d in reduced)
    if n_out == 0:
        return _emit_empty(module, name, root, inputs)
    if k_red == 0:
        return _emit_fill(module, name, root, inputs, n_out)
    segs = _segments(base, reduced)
    reducer = Reducer(root.attrs["to_apply"], _types(root))
    column = bool(segs) and not segs[-1].reduced
    block = block_size(segs[-1].size, _types(root)) if column else 1
    items = n_out if not column else (n_out // segs[-1].size) * -(-segs[-1].size // block)
    red_segs = [s for s in segs if s.reduced]
    chunks, chunk_seg = 1, None
    if reducer.op is not None and items < MIN_ITEMS and red_segs:
        chunk_seg = max(red_segs, key=lambda s: s.size)  # the longest reduced segment
        chunks = min(MAX_CHUNKS, chunk_seg.size, (n_out * k_red) // CHUNK_MIN)
        if chunks <= 1:
            chunks, chunk_seg = 1, None
    return _reduce_kernel(module, name, root, inputs, segs, reducer, column, block, chunks,
                          chunk_seg)


def _reduce_kernel(module, name, root, inputs, segs, reducer, column, block, chunks,
                   chunk_seg) -> KernelSpec:
    n = len(root.operands) // 2
    base = _dims(root.operands[0])
    types = _types(root)
    n_out = _prod(s.size for s in segs if not s.reduced)
    k_red = _prod(s.size for s in segs if s.reduced)
    chunked = chunk_seg is not None
    fn = _Fn(module, name, root, inputs, types if chunked else ())
    b = fn.b
    inits = _inits(fn, root)
    start_values = [reducer.identity()] if chunked else inits
    kept = [s for s in segs if not s.reduced]
    red = [s for s in segs if s.reduced]
    minor = kept[-1] if column else None
    outer = [s for s in kept if s is not minor]
    n_blocks = -(-minor.size // block) if column else 1
    n_outer = _prod(s.size for s in outer)
    domain = n_outer * n_blocks * chunks
    value_tys = [el.TYPES[et][1] for et in types]
    arg = None
    if not column and not chunked and red and red[-1] is segs[-1]:
        arg = arg_form(root.attrs["to_apply"], types)
        if arg is not None and red[-1].size < 2 * _arg_lanes(types):
            arg = None
    if column:
        accs = [fn.alloca(ty, block, f"acc{j}") for j, ty in enumerate(value_tys)]
    else:
        accs = [fn.alloca(ty, 1, f"acc{j}") for j, ty in enumerate(value_tys)]
    # results go to the outputs, or (chunked) to this chunk's partials in scratch
    with for_range(b, fn.lo, fn.hi, "item") as item:
        rest, chunk = (item, None)
        if chunked:
            chunk = b.urem(item, _c(chunks), name="chunk")
            rest = b.udiv(item, _c(chunks), name="item.rest")
        vals: dict = {}
        ranges: dict = {}
        if column:
            blk = b.urem(rest, _c(n_blocks), name="blk") if n_blocks > 1 else _c(0)
            ob = b.udiv(rest, _c(n_blocks), name="ob") if n_blocks > 1 else rest
        else:
            ob = rest
        for s, v in zip(outer, _split(b, ob, [s.size for s in outer], "o")):
            vals[id(s)] = v
        if chunked:
            lo = b.udiv(b.mul(chunk, _c(chunk_seg.size)), _c(chunks), name="chunk.lo")
            hi = b.udiv(b.mul(b.add(chunk, _c(1)), _c(chunk_seg.size)), _c(chunks),
                        name="chunk.hi")
            ranges[id(chunk_seg)] = (lo, hi)
        if column:
            m0 = b.mul(blk, _c(block), name="m0")
            left = b.sub(_c(minor.size), m0, name="left")
            cnt = b.select(b.icmp_signed("<", left, _c(block)), left, _c(block), name="cnt")
            with for_range(b, 0, cnt, "init") as m:
                for j in range(n):
                    b.store(start_values[j], b.gep(accs[j], [m], inbounds=True))

            def body():
                with for_range(b, 0, cnt, "m") as m:
                    vals[id(minor)] = b.add(m0, m, name="col")
                    idx = _operand_index(b, base, segs, vals)
                    xs = [fn.value(o, idx) for o in root.operands[:n]]
                    ptrs = [b.gep(accs[j], [m], inbounds=True) for j in range(n)]
                    olds = [b.load(p) for p in ptrs]
                    news = reducer.exact(b, olds, xs)
                    for p, v in zip(ptrs, news):
                        b.store(v, p)

            _loops(b, red, vals, ranges, body)
            with for_range(b, 0, cnt, "st") as m:
                vals[id(minor)] = b.add(m0, m, name="col")
                pos = _out_linear(b, segs, vals)
                if chunked:
                    pos = b.add(b.mul(chunk, _c(n_out)), pos, name="part")
                for j in range(n):
                    dst = fn.scratch[j] if chunked else fn.outs[j]
                    v = b.load(b.gep(accs[j], [m], inbounds=True))
                    _store(b, dst, pos, v, types[j], f"out{j}", reducer)
        elif arg is not None:
            for j in range(n):
                b.store(start_values[j], accs[j])
            row = _ArgRow(fn, root, base, segs, red[-1], arg, types)
            _loops(b, red[:-1], vals, ranges, lambda: row.emit(vals, accs, reducer))
            pos = _out_linear(b, segs, vals)
            for j in range(n):
                _store(b, fn.outs[j], pos, b.load(accs[j]), types[j], f"out{j}", reducer)
        else:
            for j in range(n):
                b.store(start_values[j], accs[j])

            def body():
                idx = _operand_index(b, base, segs, vals)
                xs = [fn.value(o, idx) for o in root.operands[:n]]
                olds = [b.load(a) for a in accs]
                if reducer.op is not None:
                    news = [reducer.fast(b, olds[0], xs[0])]
                else:
                    news = reducer.exact(b, olds, xs)
                for a, v in zip(accs, news):
                    b.store(v, a)

            _loops(b, red, vals, ranges, body)
            pos = _out_linear(b, segs, vals)
            if chunked:
                pos = b.add(b.mul(chunk, _c(n_out)), pos, name="part")
            for j in range(n):
                dst = fn.scratch[j] if chunked else fn.outs[j]
                _store(b, dst, pos, b.load(accs[j]), types[j], f"out{j}", reducer)
    b.ret_void()
    cost = (k_red // chunks) * (block if column else 1)
    then = None
    scratch = []
    if chunked:
        then = _emit_combine(module, f"{name}_combine", root, inputs, reducer, chunks, n_out)
        scratch = [(np.dtype(dtypes.to_dtype(et)), chunks * n_out) for et in types]
    return _spec(name, root, inputs, domain, cost, scratch=scratch, then=then)


def _emit_combine(module, name, root, inputs, reducer, chunks: int, n_out: int) -> KernelSpec:
    """The ``then`` kernel of a chunked reduction: out[o] = init combined with the chunks'
    partials scratch[c * n_out + o], in chunk order."""
    types = _types(root)
    fn = _Fn(module, name, root, inputs, types)
    b = fn.b
    inits = _inits(fn, root)
    with for_range(b, fn.lo, fn.hi, "o") as o:
        accs = list(inits)
        for c in range(chunks):
            pos = b.add(_c(c * n_out), o, name="part")
            xs = [_load(b, fn.scratch[j], pos, et, f"p{c}") for j, et in enumerate(types)]
            accs = reducer.exact(b, accs, xs)
        for j, (v, et) in enumerate(zip(accs, types)):
            _store(b, fn.outs[j], o, v, et, f"out{j}", reducer)
    b.ret_void()
    return _spec(name, root, inputs, n_out, chunks, parallel=n_out * chunks >= (1 << 16))


# -- argmax/argmin reducers -------------------------------------------------------------------

#: Bytes of the widest operand's lanes in the vectorised argmax/argmin row loop (several
#: vector registers: independent select chains).
ARG_LANE_BYTES = 128


def _normal_compare(instr, x, y, kinds: dict):
    """The direction of compare ``instr`` as ``x <dir> y`` ("GT", "LT", "EQ", "NE"; mirrored
    when written ``y <dir'> x``), None when it is no such compare of its element type's
    default comparison."""
    if instr.opcode != "compare" or len(instr.operands) != 2:
        return None
    ctype = instr.attrs["type"]
    et = instr.operands[0].shape.element_type
    if ctype is not None and ctype.value != kinds.get(el.TYPES[et][0]):
        return None
    d = instr.attrs["direction"].value
    a, c = instr.operands
    if a is x and c is y:
        return d
    if a is y and c is x:
        return {"GT": "LT", "LT": "GT", "EQ": "EQ", "NE": "NE"}.get(d)
    return None


_DEFAULT_TYPE = {"f": "FLOAT", "s": "SIGNED", "u": "UNSIGNED"}


def arg_form(comp, types: list) -> str | None:
    """"GT" (argmax) or "LT" (argmin) when reducer ``comp`` of (values, indices) is jax's
    argmax/argmin form: with (a, i) the accumulator (parameters 0, 1) and (b, j) the element
    (parameters 2, 3), keep = a DIR b or a != a (the NaN test; optional for integer values,
    whose keep may also be and/or of the compare with itself),
    result (select(keep, a, b), select(keep or (a == b and i < j), i, j)); values f32, f64,
    bf16, f16 (computed in f32) or integers, indices integers (computed in their storage
    types). As a binary operation
    this picks, for the value, the greatest element under: NaNs above every number (the first
    NaN of a run), numbers by DIR with equal ones (-0 == +0) resolved to the later; for the
    index, the same classes, equal numbers resolved to the smaller index. None otherwise."""
    if len(types) != 2 or comp.num_parameters != 4:
        return None
    vk, vty = el.TYPES.get(types[0], ("", None))
    ik, ity = el.TYPES.get(types[1], ("", None))
    if vk not in "fsu" or ik not in "su" or not vk or not ik:
        return None
    if el.memory_type(types[1]) != ity:
        return None
    if el.memory_type(types[0]) != vty and types[0] not in (PT.BF16, PT.F16):
        return None  # (bf16/f16: computed in f32, exactly as the reducer computes them)
    a, i, bv, j = comp.parameters
    root = comp.root
    if root is None or root.opcode != "tuple" or len(root.operands) != 2:
        return None
    sv, si = root.operands
    if sv.opcode != "select" or si.opcode != "select":
        return None
    keep, x, y = sv.operands
    if x is not a or y is not bv:
        return None
    q, x, y = si.operands
    if x is not i or y is not j:
        return None
    vkinds = {vk: _DEFAULT_TYPE[vk]}
    ikinds = {ik: _DEFAULT_TYPE[ik]}
    if keep.opcode in ("and", "or") and len(keep.operands) == 2 and \
            keep.operands[0] is keep.operands[1]:
        strict, nan = keep.operands[0], None  # and(c, c), or(c, c): c
    elif keep.opcode == "compare":
        strict, nan = keep, None
    elif keep.opcode == "or" and len(keep.operands) == 2:
        strict, nan = keep.operands
        if _normal_compare(strict, a, a, vkinds) == "NE":
            strict, nan = nan, strict
        if _normal_compare(nan, a, a, vkinds) != "NE":
            return None
    else:
        return None
    if vk == "f" and nan is None:
        return None
    direction = _normal_compare(strict, a, bv, vkinds)
    if direction not in ("GT", "LT"):
        return None
    if q.opcode != "or" or len(q.operands) != 2:
        return None
    first, tie = q.operands
    if tie is keep:
        first, tie = tie, first
    if first is not keep or tie.opcode != "and" or len(tie.operands) != 2:
        return None
    eq, lt = tie.operands
    if _normal_compare(eq, a, bv, vkinds) != "EQ":
        eq, lt = lt, eq
    if _normal_compare(eq, a, bv, vkinds) != "EQ" or _normal_compare(lt, i, j, ikinds) != "LT":
        return None
    return direction


def _arg_lanes(types: list) -> int:
    width = max(np.dtype(dtypes.to_dtype(et)).itemsize for et in types)
    return max(4, ARG_LANE_BYTES // width)


class _ArgRow:
    """The vectorised argmax/argmin of one run of the innermost reduced segment (contiguous
    in the operand): W lanes, lane l folding positions l, l + W, ... in order with the
    reducer's own rule and remembering the position its value came from; the lanes then
    combine by the order ``arg_form`` describes (positions decide between NaNs and between
    equal numbers), the result joins the accumulator (``Reducer.exact``: the run lies after
    everything folded before), and the positions past the last whole step of W fold in order."""

    def __init__(self, fn, root, base, segs, inner, direction, types):
        self.fn, self.root, self.base, self.segs, self.inner = fn, root, base, segs, inner
        self.direction, self.types = direction, types
        self.lanes = _arg_lanes(types)
        self.kinds = [el.TYPES[et][0] for et in types]
        self.tys = [el.TYPES[et][1] for et in types]
        self.vtys = [ir.VectorType(t, self.lanes) for t in self.tys]
        self.pty = ir.IntType(32) if inner.size < (1 << 31) else I64
        self.ptyv = ir.VectorType(self.pty, self.lanes)
        self.state = [fn.alloca(t, 1, f"lane{k}") for k, t in enumerate(self.vtys)]
        self.state.append(fn.alloca(self.ptyv, 1, "lane.pos"))

    def _vectors(self, vals, start):
        """The W operand elements from inner position ``start`` as two vectors."""
        fn, b, W = self.fn, self.fn.b, self.lanes
        out = []
        for k, o in enumerate(self.root.operands[:2]):
            ptr = fn.in_ptr.get(id(o))
            if ptr is not None and self.inner.stride == 1 and o.shape.dimensions and \
                    el.memory_type(o.shape.element_type) == self.tys[k]:
                vals[id(self.inner)] = start
                idx = _operand_index(b, self.base, self.segs, vals)
                p = b.gep(ptr, [idx.linear], inbounds=True, name=f"lv{k}.ptr")
                p = b.bitcast(p, self.vtys[k].as_pointer())
                v = b.load(p, name=f"lv{k}")
                v.align = self.tys[k].width // 8 if isinstance(self.tys[k], ir.IntType) else \
                    (4 if self.tys[k] == ir.FloatType() else 8)
            elif self._iota_along(o):  # (the position in the segment, as iota truncates)
                pos = start if self.tys[k].width == 64 else b.trunc(start, self.tys[k])
                v = b.insert_element(ir.Constant(self.vtys[k], ir.Undefined), pos,
                                     ir.Constant(ir.IntType(32), 0))
                v = b.shuffle_vector(v, ir.Constant(self.vtys[k], ir.Undefined),
                                     ir.Constant(ir.VectorType(ir.IntType(32), W), [0] * W))
                v = b.add(v, ir.Constant(self.vtys[k], list(range(W))), name=f"lv{k}.iota")
            else:
                v = ir.Constant(self.vtys[k], ir.Undefined)
                for lane in range(W):
                    vals[id(self.inner)] = b.add(start, _c(lane), name="lane.at")
                    idx = _operand_index(b, self.base, self.segs, vals)
                    v = b.insert_element(v, fn.value(o, idx), ir.Constant(ir.IntType(32), lane))
            out.append(v)
        return out

    def _iota_along(self, o) -> bool:
        """Whether generated integer operand ``o`` is an iota (or a broadcast of a 1-D one)
        counting along the inner segment, a single dimension."""
        if len(self.inner.dims) != 1 or el.TYPES[o.shape.element_type][0] not in "su" or \
                id(o) not in self.fn.emitter.members:
            return False
        d = self.inner.dims[0]
        if o.opcode == "iota":
            return o.attrs["iota_dimension"] == d
        if o.opcode == "broadcast" and o.operands[0].opcode == "iota" and \
                id(o.operands[0]) in self.fn.emitter.members:
            io = o.operands[0]
            dims = tuple(o.attrs["dimensions"])
            return io.attrs["iota_dimension"] < len(dims) and dims[io.attrs["iota_dimension"]] == d
        return False

    def _less(self, k, x, y):
        b = self.b
        if self.kinds[k] == "f":
            return b.fcmp_ordered("<", x, y)
        if self.kinds[k] == "s":
            return b.icmp_signed("<", x, y)
        return b.icmp_unsigned("<", x, y)

    def _beats(self, x, y):
        """x DIR y on values (ordered: false with a NaN)."""
        return self._less(0, y, x) if self.direction == "GT" else self._less(0, x, y)

    def _equal(self, x, y):
        b = self.b
        if self.kinds[0] == "f":
            return b.fcmp_ordered("==", x, y)
        return b.icmp_unsigned("==", x, y)

    def _isnan(self, x):
        if self.kinds[0] != "f":
            return None
        return self.b.fcmp_unordered("uno", x, x)

    def emit(self, vals, accs, reducer):
        fn, b, W, n = self.fn, self.fn.b, self.lanes, self.inner.size
        self.b = b
        steps = n // W
        lane_pos = ir.Constant(self.ptyv, list(range(W)))
        first = self._vectors(vals, _c(0))
        for s, v in zip(self.state, first + [lane_pos]):
            b.store(v, s)
        with for_range(b, 1, steps, "arg.step") as t:
            start = b.mul(t, _c(W), name="arg.start")
            xv, xi = self._vectors(vals, start)
            av, ai, ap = (b.load(s) for s in self.state)
            keep = self._beats(av, xv)
            nan = self._isnan(av)
            if nan is not None:
                keep = b.or_(keep, nan)
            keep_i = b.or_(keep, b.and_(self._equal(av, xv), self._less(1, ai, xi)))
            s0 = b.trunc(start, self.pty) if self.pty != I64 else start
            pos = b.insert_element(ir.Constant(self.ptyv, ir.Undefined), s0,
                                   ir.Constant(ir.IntType(32), 0))
            pos = b.shuffle_vector(pos, ir.Constant(self.ptyv, ir.Undefined),
                                   ir.Constant(ir.VectorType(ir.IntType(32), W), [0] * W))
            pos = b.add(pos, lane_pos, name="arg.pos")
            b.store(b.select(keep, av, xv), self.state[0])
            b.store(b.select(keep_i, ai, xi), self.state[1])
            b.store(b.select(keep, ap, pos), self.state[2])
        av, ai, ap = (b.load(s) for s in self.state)
        cv, ci, cp = (b.extract_element(x, ir.Constant(ir.IntType(32), 0)) for x in (av, ai, ap))
        for lane in range(1, W):
            at = ir.Constant(ir.IntType(32), lane)
            lv, li, lp = (b.extract_element(x, at) for x in (av, ai, ap))
            cv, ci, cp = self._combine(cv, ci, cp, lv, li, lp)
        olds = [b.load(a) for a in accs]
        news = reducer.exact(b, olds, [cv, ci])
        for a, v in zip(accs, news):
            b.store(v, a)
        with for_range(b, steps * W, n, "arg.tail") as p:
            vals[id(self.inner)] = p
            idx = _operand_index(b, self.base, self.segs, vals)
            xs = [fn.value(o, idx) for o in self.root.operands[:2]]
            olds = [b.load(a) for a in accs]
            for a, v in zip(accs, reducer.exact(b, olds, xs)):
                b.store(v, a)

    def _combine(self, xv, xi, xp, yv, yi, yp):
        """The greater of two lanes' (value, index, position of the value) under the
        reducer's order (positions of different lanes interleave)."""
        b = self.b
        x_first = b.icmp_unsigned("<", xp, yp)
        x_beats, y_beats = self._beats(xv, yv), self._beats(yv, xv)
        ties = b.not_(b.or_(x_beats, y_beats))  # equal numbers, or a NaN among them
        # equal numbers: the value of the later position, the smaller index
        take_x = b.or_(x_beats, b.and_(ties, b.not_(x_first)))
        take_xi = b.or_(x_beats, b.and_(ties, b.not_(self._less(1, yi, xi))))
        xn, yn = self._isnan(xv), self._isnan(yv)
        if xn is not None:
            # NaNs first: the NaN of the earlier position, value and index alike
            both = b.and_(xn, yn)
            nan_x = b.or_(b.and_(both, x_first), b.and_(xn, b.not_(yn)))
            any_nan = b.or_(xn, yn)
            take_x = b.select(any_nan, nan_x, take_x)
            take_xi = b.select(any_nan, nan_x, take_xi)
        return (b.select(take_x, xv, yv), b.select(take_xi, xi, yi),
                b.select(take_x, xp, yp))


# -- reduce-window ----------------------------------------------------------------------------


def _emit_reduce_window(module, name, root, inputs) -> KernelSpec:
    n = len(root.operands) // 2
    base = _dims(root.operands[0])
    out_dims = _dims(root) if root.shape.is_array() else \
        tuple(int(d) for d in root.shape.tuple_shapes[0].dimensions)
    n_out = _prod(out_dims)
    if n_out == 0:
        return _emit_empty(module, name, root, inputs)
    if _prod(base) == 0:  # every window position is padding
        return _emit_fill(module, name, root, inputs, n_out)
    types = _types(root)
    reducer = Reducer(root.attrs["to_apply"], types)
    window = root.attrs["window"].dimensions
    fn = _Fn(module, name, root, inputs)
    b = fn.b
    inits = _inits(fn, root)
    value_tys = [el.TYPES[et][1] for et in types]
    rank = len(base)
    if rank == 0:  # one window of one element
        with for_range(b, fn.lo, fn.hi, "item"):
            xs = [fn.value(o, Index.scalar(b)) for o in root.operands[:n]]
            for j, (v, et) in enumerate(zip(reducer.exact(b, inits, xs), types)):
                _store(b, fn.outs[j], _c(0), v, et, f"out{j}", reducer)
        b.ret_void()
        return _spec(name, root, inputs, 1, 1)
    last = out_dims[-1]
    block = block_size(last, types)
    n_blocks = -(-last // block)
    n_outer = _prod(out_dims[:-1])
    accs = [fn.alloca(ty, block, f"acc{j}") for j, ty in enumerate(value_tys)]

    def position(o, k, d):
        """(operand index clamped into range, in-base predicate or None) of window
        position ``k`` of output position ``o`` along dimension ``d``."""
        wd = window[d]
        p = o if wd.stride == 1 else b.mul(o, _c(wd.stride), name=f"w{d}.o")
        if wd.window_dilation != 1:
            k = b.mul(k, _c(wd.window_dilation), name=f"w{d}.k")
        p = b.add(p, k, name=f"w{d}.p")
        if wd.padding_low:
            p = b.sub(p, _c(wd.padding_low), name=f"w{d}.pos")
        checked = wd.padding_low > 0 or wd.padding_high > 0 or wd.base_dilation > 1
        if not checked:
            return p, None
        bd, size = wd.base_dilation, base[d]
        ok = b.and_(b.icmp_signed(">=", p, _c(0), name=f"w{d}.ge"),
                    b.icmp_signed("<=", p, _c((size - 1) * bd), name=f"w{d}.le"),
                    name=f"w{d}.in")
        if bd > 1:
            ok = b.and_(ok, b.icmp_signed("==", b.srem(p, _c(bd), name=f"w{d}.rem"), _c(0),
                                          name=f"w{d}.hole"), name=f"w{d}.ok")
            p = b.sdiv(p, _c(bd), name=f"w{d}.q")
        p = b.select(b.icmp_signed("<", p, _c(0)), _c(0), p, name=f"w{d}.cl")
        p = b.select(b.icmp_signed(">", p, _c(size - 1)), _c(size - 1), p, name=f"w{d}.idx")
        return p, ok

    def offset(o, d):
        """a = padding_low - o * stride: window position k reads padded position
        k * window_dilation - a of the dilated base."""
        wd = window[d]
        step = o if wd.stride == 1 else b.mul(o, _c(wd.stride), name=f"w{d}.os")
        return b.sub(_c(wd.padding_low), step, name=f"w{d}.a")

    def slot_range(o, d):
        """[first, end) of the window positions of output ``o`` along ``d`` that fall
        inside the dilated base (holes still to check): padding is never iterated."""
        wd = window[d]
        a = offset(o, d)
        first = _smax(b, _c(0), _ceildiv(b, a, wd.window_dilation))
        last = _floordiv(b, b.add(a, _c((base[d] - 1) * wd.base_dilation)), wd.window_dilation)
        end = _smin(b, _c(wd.size), b.add(last, _c(1)))
        return a, first, end

    def element_range(o, d):
        """[first, end) of the operand elements along ``d`` some window position of output
        ``o`` reads (a window longer than the operand: iterate elements, not positions)."""
        wd = window[d]
        a = offset(o, d)
        neg = b.sub(_c(0), a)
        first = _smax(b, _c(0), _ceildiv(b, neg, wd.base_dilation))
        span = b.add(neg, _c((wd.size - 1) * wd.window_dilation))
        end = _smin(b, _c(base[d]), b.add(_floordiv(b, span, wd.base_dilation), _c(1)))
        return a, first, end

    def slot_index(a, k, d):
        """(operand index, hole predicate or None) of window position ``k`` given
        ``a = offset(o, d)`` and ``k`` within slot_range."""
        wd = window[d]
        kk = k if wd.window_dilation == 1 else b.mul(k, _c(wd.window_dilation))
        p = b.sub(kk, a, name=f"w{d}.p")
        if wd.base_dilation == 1:
            return p, None
        ok = b.icmp_signed("==", b.srem(p, _c(wd.base_dilation)), _c(0), name=f"w{d}.hole")
        return b.sdiv(p, _c(wd.base_dilation), name=f"w{d}.e"), ok

    def element_index(a, e, d):
        """(operand index, predicate or None) of operand element ``e``: some window position
        reads it when ``e * base_dilation + a`` is a multiple of the window dilation."""
        wd = window[d]
        if wd.window_dilation == 1:
            return e, None
        pos = b.add(e if wd.base_dilation == 1 else b.mul(e, _c(wd.base_dilation)), a)
        ok = b.icmp_signed("==", b.srem(pos, _c(wd.window_dilation)), _c(0), name=f"w{d}.at")
        return e, ok

    # A window longer than the operand dimension is walked over the operand's elements,
    # a shorter one over its positions: work per output grows with min(window, operand).
    by_element = [window[d].size > base[d] for d in range(rank)]

    with for_range(b, fn.lo, fn.hi, "item") as item:
        blk = b.urem(item, _c(n_blocks), name="blk") if n_blocks > 1 else _c(0)
        ob = b.udiv(item, _c(n_blocks), name="ob") if n_blocks > 1 else item
        outer = _split(b, ob, list(out_dims[:-1]), "o")
        m0 = b.mul(blk, _c(block), name="m0")
        left = b.sub(_c(last), m0, name="left")
        cnt = b.select(b.icmp_signed("<", left, _c(block)), left, _c(block), name="cnt")
        with for_range(b, 0, cnt, "init") as m:
            for j in range(n):
                b.store(inits[j], b.gep(accs[j], [m], inbounds=True))

        def update(m, idx, oks):
            index = Index(b, base, multi=idx)
            xs = [fn.value(o, index) for o in root.operands[:n]]
            ptrs = [b.gep(accs[j], [m], inbounds=True) for j in range(n)]
            olds = [b.load(q) for q in ptrs]
            news = reducer.exact(b, olds, xs)
            if oks:
                valid = oks[0]
                for extra in oks[1:]:
                    valid = b.and_(valid, extra, name="valid")
                news = [b.select(valid, new, old) for new, old in zip(news, olds)]
            for q, v in zip(ptrs, news):
                b.store(v, q)

        def loops(d, idx, oks):
            if d < rank - 1:  # one output position: only the positions inside the base
                rng = element_range if by_element[d] else slot_range
                a, first, end = rng(outer[d], d)
                with for_range(b, first, end, f"k{d}") as k:
                    p, ok = (element_index if by_element[d] else slot_index)(a, k, d)
                    loops(d + 1, idx + [p], oks + ([ok] if ok is not None else []))
                return
            if by_element[d]:  # per column, its own elements
                with for_range(b, 0, cnt, "m") as m:
                    a, first, end = element_range(b.add(m0, m, name="col"), d)
                    with for_range(b, first, end, f"k{d}") as e:
                        p, ok = element_index(a, e, d)
                        update(m, idx + [p], oks + ([ok] if ok is not None else []))
                return
            # the positions any column of the block reads, each column checking its own
            # (the inner loop over columns vectorises)
            _, first, _ = slot_range(b.add(m0, b.sub(cnt, _c(1))), d)
            _, _, end = slot_range(m0, d)
            with for_range(b, first, end, f"k{d}") as k, \
                    for_range(b, 0, cnt, "m") as m:
                p, ok = position(b.add(m0, m, name="col"), k, d)
                update(m, idx + [p], oks + ([ok] if ok is not None else []))

        loops(0, [], [])
        with for_range(b, 0, cnt, "st") as m:
            col = b.add(m0, m, name="col")
            pos = col
            stride = last
            for d in range(rank - 2, -1, -1):
                pos = b.add(pos, b.mul(outer[d], _c(stride)), name="out.lin")
                stride *= out_dims[d]
            for j in range(n):
                v = b.load(b.gep(accs[j], [m], inbounds=True))
                _store(b, fn.outs[j], pos, v, types[j], f"out{j}", reducer)
    b.ret_void()
    cost = block * max(1, _prod(min(wd.size, d) for wd, d in zip(window, base)))
    return _spec(name, root, inputs, n_outer * n_blocks, cost)


def _smax(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _smin(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _floordiv(b, x, c: int):
    """floor(x / c) for a constant c > 0 (sdiv truncates toward zero)."""
    if c == 1:
        return x
    q = b.sdiv(x, _c(c))
    inexact = b.icmp_signed("!=", b.srem(x, _c(c)), _c(0))
    return b.sub(q, b.zext(b.and_(inexact, b.icmp_signed("<", x, _c(0))), I64))


def _ceildiv(b, x, c: int):
    """ceil(x / c) for a constant c > 0."""
    if c == 1:
        return x
    return b.sub(_c(0), _floordiv(b, b.sub(_c(0), x), c))


__all__ = ["ASSOCIATIVE", "BLOCK_BYTES", "CHUNK_MIN", "MAX_CHUNKS", "MIN_ITEMS", "Reducer", "emit",
           "identity", "recognised_op", "supports"]
