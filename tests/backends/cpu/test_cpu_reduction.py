"""The reduction emitter (xlapy.backends.cpu.reduction) and inlined scalar computations
against the interpreter: reduce over every kind of dimension set (rows, columns, full, none,
size-1 and size-0 dimensions, chunked), variadic reduces, reduce-window with padding,
strides and dilations, input fusions from the fusion pass, every reduce of the jax fixtures;
kernels run over their whole domain, in two halves and item by item.

Tolerance vs the interpreter: integer, and/or, min/max reductions and non-associative
reducers on at most 64 elements per output are bit-exact. Float add/multiply may be
reassociated (vector accumulators, chunks, and the interpreter's pairwise tree beyond 64
elements): the difference of the two results is at most 2*K*eps*sum(|terms|) for K terms
per output (each is within (K-1)*eps*sum(|terms|) of the exact value), which the tests
check per element (for products, of the logarithms' terms: values are kept near 1).
"""

from __future__ import annotations

import ctypes
import glob
import os

import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

from xlapy.backends.cpu import reduction
from xlapy.backends.cpu.jit import get_jit
from xlapy.backends.cpu.scalar_computation import inline_computation, supports_computation
from xlapy.errors import InvalidArgumentError
from xlapy.interpreter.evaluator import EvalContext, EvalOptions, evaluate
from xlapy.npz import load_npz
from xlapy.parser import parse_hlo_module
from xlapy.passes import make_pipeline
from xlapy.runtime import Client
from xlapy.shape import dtypes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
FIXTURES = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "jax", "*.pre.hlo")))
PROTO = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

NP = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "s64": np.int64,
      "u32": np.uint32, "u64": np.uint64, "pred": np.bool_}


# -- running kernels ----------------------------------------------------------------------------


class Batch:
    """Several kernels emitted into one LLVM module, compiled once."""

    def __init__(self):
        self.module = ir.Module(name="test_reduction")
        self.specs = []
        self.compiled = None

    def add(self, root, inputs):
        spec = reduction.emit(self.module, f"k{len(self.specs)}", root, inputs)
        self.specs.append(spec)
        return spec

    def compile(self, **options):
        self.compiled = get_jit().compile(self.module, **options)
        return self.compiled


def run_kernel(spec, compiled, arrays, mode="whole"):
    """Run ``spec`` (and its ``then``) on ``arrays`` (one per input). ``mode``: "whole"
    (one call over the domain), "halves" (the second half first), "items" (one call per
    work item, last first). Returns the output arrays."""
    outs = [np.full(tuple(s.dimensions), 0x5A, dtypes.to_dtype(s.element_type))
            for s in spec.outputs]
    scratch = [np.full(n, 0x5A, dt) for dt, n in spec.scratch]
    held = [np.ascontiguousarray(a) for a in arrays] + outs + scratch
    bufs = (ctypes.c_void_p * max(1, len(held)))(*[a.ctypes.data for a in held])
    s = spec
    while s is not None:
        fn = PROTO(compiled.function_address(s.name))
        n = s.domain
        if mode == "halves" and n >= 2:
            fn(bufs, n // 2, n)
            fn(bufs, 0, n // 2)
        elif mode == "items":
            for i in reversed(range(n)):
                fn(bufs, i, i + 1)
        else:
            fn(bufs, 0, n)
        s = s.then
    return outs


def _constant(instr):
    return EvalContext(None, EvalOptions()).run_instruction(instr, [])


def _input_arrays(inputs, args):
    """The buffer contents of ``inputs`` (parameters from ``args``, constants)."""
    out = []
    for i in inputs:
        if i.opcode == "parameter":
            out.append(np.asarray(args[i.parameter_number]))
        else:
            out.append(np.asarray(_constant(i)))
    return out


def _unique(instrs):
    seen, out = set(), []
    for i in instrs:
        if id(i) not in seen:
            seen.add(id(i))
            out.append(i)
    return out


# -- comparing ----------------------------------------------------------------------------------


def assert_close(got, want, terms_abs=None, k=1, what=""):
    """Bit-exact (NaN = NaN) unless ``terms_abs`` (sum of |terms| per output) is given: then
    within 2*k*eps*terms_abs."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    if terms_abs is None or got.dtype.kind != "f":
        if got.dtype.kind == "f":
            same = (got == want) | (np.isnan(got) & np.isnan(want))
            # -0 and +0: only bit-exact results must agree on the sign
            same &= (np.signbit(got) == np.signbit(want)) | np.isnan(got)
        else:
            same = got == want
        bad = np.flatnonzero(~np.asarray(same).reshape(-1))
        assert bad.size == 0, (what, bad[:5], got.reshape(-1)[bad[:5]], want.reshape(-1)[bad[:5]])
        return
    eps = np.finfo(got.dtype).eps
    bound = 2.0 * max(k, 1) * eps * np.asarray(terms_abs, np.float64) + np.finfo(got.dtype).tiny
    both_nan = np.isnan(got) & np.isnan(want)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    ok = both_nan | (got == want) | (diff <= bound)
    bad = np.flatnonzero(~np.asarray(ok).reshape(-1))
    assert bad.size == 0, (what, bad[:5], got.reshape(-1)[bad[:5]], want.reshape(-1)[bad[:5]])


# -- inputs -------------------------------------------------------------------------------------


def _values(t, shape, op, rng):
    dt = NP[t]
    if t == "pred":
        return rng.random(shape) < (0.9 if op in ("and", "minimum") else 0.1)
    if t in ("f32", "f64"):
        if op == "multiply":
            return (1 + rng.uniform(-0.01, 0.01, shape)).astype(dt)
        x = (rng.standard_normal(shape) * 10).astype(dt)
        if op in ("maximum", "minimum") and x.size > 8:
            flat = x.reshape(-1)
            flat[rng.integers(0, flat.size, 2)] = [np.inf, -np.inf]
            flat[rng.integers(0, flat.size)] = -0.0
            if x.size > 50:
                flat[rng.integers(0, flat.size)] = np.nan
        return x
    info = np.iinfo(dt)
    if op in ("and", "or"):
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    if op == "multiply":
        return rng.integers(-3 if info.min else 0, 4, shape).astype(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


def _init(t, op):
    """A non-identity init value where the reducer allows (combined exactly once)."""
    return {"f32": "0.5", "f64": "-0.25", "pred": "false" if op in ("or", "maximum") else
            "true"}.get(t, "3" if op != "and" else "-1" if t[0] == "s" else "4294967295"
                    if t == "u32" else "18446744073709551615")


REDUCER = """r_{op}_{t} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] {op}(a, b)
}}
"""


def _reduce_module(t, op, shape, dims, init=None):
    out = [n for d, n in enumerate(shape) if d not in dims]
    init = _init(t, op) if init is None else init
    text = (f"HloModule m\n{REDUCER.format(op=op, t=t)}\nENTRY e {{\n"
            f"  p = {t}[{','.join(map(str, shape))}] parameter(0)\n"
            f"  z = {t}[] constant({init})\n"
            f"  ROOT r = {t}[{','.join(map(str, out))}] reduce(p, z), "
            f"dimensions={{{','.join(map(str, dims))}}}, to_apply=r_{op}_{t}\n}}\n")
    return parse_hlo_module(text)


SHAPES = [
    ((257,), (0,)),                # full, not a multiple of the vector width
    ((5, 257), (1,)),              # rows
    ((257, 5), (0,)),              # columns (minor kept dimension of 5)
    ((37, 4500), (0,)),            # columns in two blocks, the second partial
    ((3, 4, 5), (0, 2)),           # mixed: row type with an outer reduced dimension
    ((3, 4, 5), (1,)),             # column type with an outer kept dimension
    ((2, 3, 4, 5), (1, 3)),
    ((2, 3, 4, 5), (0, 1)),        # columns: two minor kept dimensions flattened
    ((4, 1, 6), (1,)),             # a size-1 reduced dimension
    ((4, 1, 6), (0, 1)),
    ((6, 7), ()),                  # no reduced dimension: init combined with each element
    ((3, 0, 4), (1,)),             # a size-0 reduced dimension: the init value
    ((3, 0), (0,)),                # an empty output
    ((), ()),                      # rank 0
    ((1, 1), (0, 1)),
    ((1 << 18,), (0,)),            # long full reduction: chunked
    ((3, 100003), (1,)),           # few long rows: chunked
    ((100003, 3), (0,)),           # few long columns: chunked
]
SMALL = [s for s in SHAPES if np.prod(s[0], dtype=np.int64) < 100000]

CASES = [("f32", "add", SHAPES), ("f32", "maximum", SHAPES), ("f64", "multiply", SMALL),
         ("f64", "minimum", SMALL), ("s32", "add", SHAPES), ("s32", "maximum", SMALL),
         ("s64", "multiply", SMALL), ("u32", "minimum", SMALL), ("u64", "add", SMALL),
         ("u32", "and", SMALL), ("s64", "or", SMALL), ("pred", "and", SMALL),
         ("pred", "or", SMALL), ("pred", "maximum", SMALL)]


def _terms_abs(x, dims, op, init):
    """sum(|terms|) per output: of the values, or of their logarithms for products."""
    a = np.abs(np.log(np.abs(x.astype(np.float64)))) if op == "multiply" else \
        np.abs(x.astype(np.float64))
    s = a.sum(axis=tuple(dims)) if dims else a
    return s + abs(float(init)) + 1e-300


@pytest.mark.parametrize("t,op,shapes", CASES, ids=[f"{t}-{op}" for t, op, _ in CASES])
def test_reduce_against_interpreter(t, op, shapes):
    rng = np.random.default_rng(hash((t, op)) % 2**32)
    batch = Batch()
    cases = []
    for shape, dims in shapes:
        module = _reduce_module(t, op, shape, dims)
        root = module.entry.root
        assert reduction.supports(root), (shape, dims)
        inputs = _unique(root.operands)  # the init constant comes from a buffer too
        spec = batch.add(root, inputs)
        x = _values(t, shape, op, rng)
        cases.append((module, inputs, spec, x, shape, dims))
    compiled = batch.compile()
    for module, inputs, spec, x, shape, dims in cases:
        want = evaluate(module, x)
        k = int(np.prod([shape[d] for d in dims], dtype=np.int64))
        float_sum = t[0] == "f" and op in ("add", "multiply")
        terms = _terms_abs(x, dims, op, _init(t, op)) if float_sum else None
        arrays = _input_arrays(inputs, [x])
        modes = ("whole", "halves", "items") if spec.domain <= 4096 else ("whole", "halves")
        results = [run_kernel(spec, compiled, arrays, mode)[0] for mode in modes]
        for mode, got in zip(modes, results):
            assert_close(got, want, terms, k, what=(shape, dims, mode))
            # the result never depends on how the work items are split
            assert_close(got, results[0], what=(shape, dims, mode, "split"))


def test_chunking_and_work_items():
    """A long full reduction becomes chunks with a combining ``then`` kernel; row and
    column reductions with enough outputs do not chunk."""
    full = _reduce_module("f32", "add", (1 << 20,), (0,)).entry.root
    rows = _reduce_module("f32", "add", (4096, 256), (1,)).entry.root
    block = reduction.block_size(1 << 30, [rows.shape.element_type])
    assert block == reduction.BLOCK_BYTES // 4
    cols = _reduce_module("f32", "add", (64, 16 * block), (0,)).entry.root
    argmax_root = parse_hlo_module(_argmax_text((1 << 20,), (0,))).entry.root
    batch = Batch()
    sf = batch.add(full, [full.operands[0]])
    sr = batch.add(rows, [rows.operands[0]])
    sc = batch.add(cols, [cols.operands[0]])
    sa = batch.add(argmax_root, list(argmax_root.operands[:2]))
    assert sf.then is not None and sf.domain >= reduction.MIN_ITEMS and sf.scratch
    assert sf.then.domain == 1 and sf.scratch[0][1] == sf.domain
    assert sr.then is None and sr.domain == 4096 and sr.cost == 256
    assert sc.then is None and sc.domain == 16 and sc.cost == 64 * block
    assert sa.then is None and sa.domain == 1  # not associative: one in-order loop


def test_inner_loops_are_vectorised():
    """The float row sum keeps vector accumulators; the column sum updates a vector of
    outputs per row (checked in the optimised IR)."""
    rows = _reduce_module("f32", "add", (64, 1000), (1,)).entry.root
    cols = _reduce_module("f32", "maximum", (1000, 64), (0,)).entry.root
    for root in (rows, cols):
        batch = Batch()
        batch.add(root, [root.operands[0]])
        text = batch.compile(use_disk_cache=False).assembly()  # optimised here
        assert " x float>" in text, root.operands[0].shape


def _same_bits_as_interpreter(module, x):
    """The reduce kernel of ``module``'s root on ``x``, run whole and in halves: the
    interpreter's dtype and bits."""
    root = module.entry.root
    batch = Batch()
    inputs = _unique(root.operands)
    spec = batch.add(root, inputs)
    compiled = batch.compile()
    want = np.asarray(evaluate(module, x)).reshape(-1)
    for mode in ("whole", "halves"):
        got = run_kernel(spec, compiled, _input_arrays(inputs, [x]), mode)[0].reshape(-1)
        assert got.dtype == want.dtype
        width = np.dtype(f"u{got.dtype.itemsize}")
        np.testing.assert_array_equal(got.view(width), want.view(width))


NARROW = [("bf16", "add", (5, 60), (1,)), ("bf16", "add", (60, 7), (0,)),
          ("f16", "maximum", (9, 33), (0, 1)), ("f8e4m3fn", "add", (7, 20), (1,)),
          ("s8", "add", (300, 5), (0,)), ("u4", "add", (40, 3), (0,)),
          ("s16", "multiply", (3, 2000), (1,))]


@pytest.mark.parametrize("t,op,shape,dims", NARROW, ids=[f"{c[0]}-{c[1]}" for c in NARROW])
def test_narrow_types(t, op, shape, dims):
    """Narrow floats are computed in f32 and rounded after every step (never reordered:
    bit-exact for at most 64 terms per output) - but max and min, exact in f32, are
    recognised (vector accumulators, rounded once when stored); narrow integers wrap."""
    module = _reduce_module(t, op, shape, dims, init="1")
    root = module.entry.root
    assert reduction.supports(root)
    float_type = t[0] in "fb"
    if float_type:  # rounding at every step: never reordered, except max and min
        want_op = op if op in ("maximum", "minimum") else None
        assert reduction.recognised_op(root.attrs["to_apply"]) == want_op
    rng = np.random.default_rng(11)
    dt = dtypes.to_dtype(root.shape.element_type)
    x = (rng.standard_normal(shape) * 3).astype(dt) if float_type else \
        rng.integers(0, 15, shape).astype(dt)
    _same_bits_as_interpreter(module, x)


@pytest.mark.parametrize("t", ["bf16", "f16", "f8e5m2"])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("shape,dims", [((6, 3000), (1,)), ((3000, 6), (0,)), ((70000,), (0,))])
def test_narrow_max_min_are_recognised_and_exact(t, op, shape, dims):
    """max/min of narrow floats: vector accumulators in f32 (and chunks for a long full
    reduction), rounded once when stored - the interpreter's bits, NaNs, infinities and
    signed zeros included."""
    module = _reduce_module(t, op, shape, dims)
    root = module.entry.root
    assert reduction.recognised_op(root.attrs["to_apply"]) == op
    rng = np.random.default_rng(12)
    dt = dtypes.to_dtype(root.shape.element_type)
    x = (rng.standard_normal(shape) * 3).astype(dt)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 5)] = np.inf
    flat[rng.integers(0, flat.size, 5)] = -np.inf
    flat[rng.integers(0, flat.size, 5)] = -0.0
    if dims == (1,):  # rows: one all NaN, one with a NaN
        x[1] = np.nan
        x[2, 7] = np.nan
    elif x.ndim == 2:  # columns: one all NaN, one with a NaN
        x[:, 4] = np.nan
        x[11, 3] = np.nan
    else:
        flat[60000] = np.nan
    _same_bits_as_interpreter(module, x)


# -- variadic reduce ----------------------------------------------------------------------------


def _argmax_text(shape, dims, vt="f32", it="s32"):
    """A jax-style argmax (first maximal element, NaN wins, ties to the lower index) with
    select/compare only."""
    out = [n for d, n in enumerate(shape) if d not in dims]
    s = ",".join(map(str, shape))
    o = ",".join(map(str, out))
    return f"""HloModule m
argmax {{
  a = {vt}[] parameter(0)
  ia = {it}[] parameter(1)
  c = {vt}[] parameter(2)
  ic = {it}[] parameter(3)
  gt = pred[] compare(a, c), direction=GT
  v1 = {vt}[] select(gt, a, c)
  i1 = {it}[] select(gt, ia, ic)
  eq = pred[] compare(a, c), direction=EQ
  lt = pred[] compare(ia, ic), direction=LT
  imin = {it}[] select(lt, ia, ic)
  i2 = {it}[] select(eq, imin, i1)
  isnan = pred[] compare(a, a), direction=NE
  v = {vt}[] select(isnan, a, v1)
  i = {it}[] select(isnan, ia, i2)
  ROOT t = ({vt}[], {it}[]) tuple(v, i)
}}

ENTRY e {{
  x = {vt}[{s}] parameter(0)
  idx = {it}[{s}] parameter(1)
  lo = {vt}[] constant(-inf)
  zero = {it}[] constant(0)
  ROOT r = ({vt}[{o}], {it}[{o}]) reduce(x, idx, lo, zero), dimensions={{{",".join(map(str, dims))}}}, to_apply=argmax
}}
"""


@pytest.mark.parametrize("shape,dims", [((37, 100), (1,)), ((100, 37), (0,)), ((3, 5, 7), (0, 2)),
                                        ((6, 50), (0, 1)), ((4, 0), (1,)), ((1000,), (0,))])
def test_variadic_argmax(shape, dims):
    module = parse_hlo_module(_argmax_text(shape, dims))
    root = module.entry.root
    assert reduction.supports(root)
    rng = np.random.default_rng(1)
    x = rng.integers(-5, 5, shape).astype(np.float32)  # many ties
    if x.size > 20:
        x.reshape(-1)[[3, 17]] = np.nan
    idx = rng.permutation(x.size).reshape(shape).astype(np.int32)
    batch = Batch()
    inputs = _unique(root.operands)
    spec = batch.add(root, inputs)
    compiled = batch.compile()
    want = evaluate(module, x, idx)
    for mode in ("whole", "halves", "items"):
        got = run_kernel(spec, compiled, _input_arrays(inputs, [x, idx]), mode)
        assert len(got) == 2
        for g, w in zip(got, want):
            assert_close(g, w, what=mode)


def test_non_associative_reducer_runs_in_order():
    """f(a, b) = 10a + b (through a call and a constant): XLA's left fold in row-major
    order, bit for bit, for rows, columns and windows."""
    text = """HloModule m
inner {
  x = s64[] parameter(0)
  y = s64[] parameter(1)
  ten = s64[] constant(10)
  m = s64[] multiply(x, ten)
  ROOT s = s64[] add(m, y)
}
f {
  a = s64[] parameter(0)
  b = s64[] parameter(1)
  ROOT c = s64[] call(a, b), to_apply=inner
}
ENTRY e {
  p = s64[4,6] parameter(0)
  z = s64[] constant(7)
  rows = s64[4] reduce(p, z), dimensions={1}, to_apply=f
  cols = s64[6] reduce(p, z), dimensions={0}, to_apply=f
  win = s64[3,3] reduce-window(p, z), window={size=2x3 stride=1x2 pad=0_0x1_1}, to_apply=f
  ROOT t = (s64[4], s64[6], s64[3,3]) tuple(rows, cols, win)
}
"""
    module = parse_hlo_module(text)
    assert supports_computation(module.computation("f"))
    assert reduction.recognised_op(module.computation("f")) is None
    x = np.arange(1, 25, dtype=np.int64).reshape(4, 6) % 9
    want = evaluate(module, x)
    batch = Batch()
    roots = list(module.entry.root.operands)
    specs = [batch.add(r, _unique(r.operands)) for r in roots]
    compiled = batch.compile()
    assert want[0][0] == int("7" + "".join(str(v) for v in x[0]))
    for r, spec, w in zip(roots, specs, want):
        got = run_kernel(spec, compiled, _input_arrays(_unique(r.operands), [x]), "items")[0]
        assert_close(got, w, what=r.name)



def _jax_arg_text(shape, dims, vt="f32", it="s32", direction="GT", index="iota", init=None,
                  producer=None):
    """jax's argmax (GT) / argmin (LT) reducer (keep the accumulator when it is DIR the
    element or NaN; the smaller index among equal values) over (x or ``producer``'s
    expression of x, an iota along the last reduced dimension or ``index``: a parameter)."""
    out = [n for d, n in enumerate(shape) if d not in dims]
    s, o = ",".join(map(str, shape)), ",".join(map(str, out))
    # (integers: jax's NaN test is always false; the form takes it or leaves it out)
    nan = "  ne = pred[] compare(a, a), direction=NE\n  keep = pred[] or(cmp, ne)" \
        if vt[0] in "fb" or vt == "s32" else f"  keep = pred[] compare(a, c), direction={direction}"
    lo, zero = init or ("-inf" if direction == "GT" else "inf", "0")
    if vt[0] not in "fb" and init is None:
        lo = "0"
    last = max(dims)
    idx = (f"  io = {it}[{shape[last]}] iota(), iota_dimension=0\n"
           f"  idx = {it}[{s}] broadcast(io), dimensions={{{last}}}") if index == "iota" else \
        f"  idx = {it}[{s}] parameter(1)"
    xv = f"  x = {vt}[{s}] parameter(0)"
    if producer is not None:
        xv = f"  x0 = {vt}[{s}] parameter(0)\n" + producer
    return f"""HloModule m
arg {{
  a = {vt}[] parameter(0)
  c = {vt}[] parameter(2)
  cmp = pred[] compare(a, c), direction={direction}
{nan}
  sv = {vt}[] select(keep, a, c)
  eq = pred[] compare(a, c), direction=EQ
  ia = {it}[] parameter(1)
  ic = {it}[] parameter(3)
  lt = pred[] compare(ia, ic), direction=LT
  tie = pred[] and(eq, lt)
  ki = pred[] or(keep, tie)
  si = {it}[] select(ki, ia, ic)
  ROOT t = ({vt}[], {it}[]) tuple(sv, si)
}}

ENTRY e {{
{xv}
{idx}
  lo = {vt}[] constant({lo})
  zero = {it}[] constant({zero})
  ROOT r = ({vt}[{o}], {it}[{o}]) reduce(x, idx, lo, zero), dimensions={{{",".join(map(str, dims))}}}, to_apply=arg
}}
"""


def _np_type(t):
    return {"bf16": ml_dtypes.bfloat16, "f16": np.float16}.get(t) or NP.get(t) or \
        np.dtype(t.replace("s", "int").replace("u", "uint"))


def _arg_values(vt, shape, rng, few=5):
    """Few distinct values (ties), and for floats -0/+0, infinities, NaNs of both signs with
    payloads (some rows all NaN, some all -inf), denormals."""
    dt = _np_type(vt)
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        pool = np.array([info.min, info.max, 0, 1, 2, info.max - 1], dt)
        x = rng.integers(-few, few, shape).astype(dt)
        pick = rng.random(shape) < 0.1
        x[pick] = pool[rng.integers(0, len(pool), int(pick.sum()))]
        return x
    u = np.dtype(f"u{np.dtype(dt).itemsize}")
    tiny = np.array(1, u).view(dt)
    nans = np.array([np.iinfo(u).max, np.iinfo(u).max >> 1, (np.iinfo(u).max >> 1) - 5], u)
    pool = np.concatenate([np.array([0.0, -0.0, np.inf, -np.inf, 2.0, tiny, -tiny], dt),
                           nans.view(dt)])
    x = rng.integers(-few, few, shape).astype(dt)
    flat = x.reshape(-1)
    pick = rng.random(flat.size) < 0.05
    flat[pick] = pool[rng.integers(0, len(pool), int(pick.sum()))]
    zeros = rng.random(flat.size) < 0.3
    flat[zeros] = np.where(rng.random(int(zeros.sum())) < 0.5, dt(0.0), dt(-0.0))
    if x.ndim >= 2 and x.shape[0] >= 4:
        x[1] = nans.view(dt)[rng.integers(0, 3, x[1].shape)]
        x[2] = -np.inf
        x[3] = np.where(rng.random(x[3].shape) < 0.5, dt(0.0), dt(-0.0))
    return x


def _same_bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    w = np.dtype(f"u{got.dtype.itemsize}")
    bad = np.flatnonzero(got.reshape(-1).view(w) != want.reshape(-1).view(w))
    assert bad.size == 0, (what, bad[:5], got.reshape(-1)[bad[:5]], want.reshape(-1)[bad[:5]])


ARG_CASES = [((40, 517), (1,)), ((9, 32), (1,)), ((9, 63), (1,)), ((9, 64), (1,)),
             ((9, 65), (1,)), ((5, 3, 200), (2,)), ((4, 70, 3, 66), (1, 3)),
             ((3, 130, 4), (0, 1)), ((1, 4099), (1,)), ((2100,), (0,))]


@pytest.mark.parametrize("shape,dims", ARG_CASES)
@pytest.mark.parametrize("direction", ["GT", "LT"])
def test_jax_argmax_argmin_rows(shape, dims, direction):
    """jax's argmax/argmin reducer (the vectorised lane form where the last reduced
    dimension is the operand's minor one and at least two steps of lanes long) against the
    interpreter bit for bit: value and index, NaNs (first one wins), -0/+0 (equal: the
    smaller index; the value of the later one), ties, rows all NaN or all -inf, indices an
    iota or arbitrary values with ties, work items split."""
    rng = np.random.default_rng(seed_of(shape, dims, direction))
    x = _arg_values("f32", shape, rng)
    for index in ("iota", "param"):
        module = parse_hlo_module(_jax_arg_text(shape, dims, direction=direction, index=index))
        root = module.entry.root
        types = [o.shape.element_type for o in root.operands[:2]]
        assert reduction.arg_form(root.attrs["to_apply"], types) == direction
        args = [x] if index == "iota" else [x, rng.integers(0, 7, shape).astype(np.int32)]
        want = evaluate(module, *args)
        got = Client(backend="cpu").compile(module)(*args)
        for g, w in zip(got, want):
            _same_bits(g, w, (index, "client"))
        if index == "param":
            batch = Batch()
            inputs = _unique(root.operands)
            spec = batch.add(root, inputs)
            compiled = batch.compile()
            for mode in ("whole", "halves", "items"):
                got = run_kernel(spec, compiled, _input_arrays(inputs, args), mode)
                for g, w in zip(got, want):
                    _same_bits(g, w, (index, mode))


def seed_of(*key) -> int:
    return int.from_bytes(repr(key).encode()[-8:], "little") % (1 << 31)


ARG_TYPES = [("f64", "s32"), ("f64", "s64"), ("f32", "u32"), ("bf16", "s32"), ("f16", "s32"), ("s32", "s32"), ("s8", "s32"),
             ("u8", "s64"), ("s64", "s32"), ("u64", "u32"), ("u32", "s32")]


@pytest.mark.parametrize("vt,it", ARG_TYPES)
def test_jax_argmax_argmin_types(vt, it):
    rng = np.random.default_rng(seed_of(vt, it))
    shape = (6, 301)
    x = _arg_values(vt, shape, rng)
    for direction in ("GT", "LT"):
        for index in ("iota", "param"):
            module = parse_hlo_module(_jax_arg_text(shape, (1,), vt, it, direction, index))
            root = module.entry.root
            types = [o.shape.element_type for o in root.operands[:2]]
            assert reduction.arg_form(root.attrs["to_apply"], types) == direction
            args = [x]
            if index == "param":
                args.append(rng.integers(0, 9, shape).astype(_np_type(it)))
            want = evaluate(module, *args)
            got = Client(backend="cpu").compile(module)(*args)
            for g, w in zip(got, want):
                _same_bits(g, w, (vt, it, direction, index))


def test_jax_argmax_of_fused_and_strided_operands_and_inits():
    """Operands generated element by element (x * 2 fused in; a transpose: the reduced
    dimension strided in memory), a NaN init and an init index that beats the row's."""
    rng = np.random.default_rng(41)
    x = _arg_values("f32", (40, 300), rng)
    xt = np.ascontiguousarray(x.T)
    cases = [
        (_jax_arg_text((40, 300), (1,), producer="  two = f32[] constant(2)\n"
                       "  tb = f32[40,300] broadcast(two), dimensions={}\n"
                       "  x = f32[40,300] multiply(x0, tb)"), [x]),
        (_jax_arg_text((40, 300), (1,), producer="  x = f32[40,300] transpose(x0), "
                       "dimensions={1,0}").replace("x0 = f32[40,300]", "x0 = f32[300,40]"),
         [xt]),
        (_jax_arg_text((40, 300), (1,), init=("nan", "5")), [x]),
        (_jax_arg_text((40, 300), (1,), direction="LT", init=("-inf", "-1")), [x]),
        (_jax_arg_text((40, 300), (1,), init=("0", "-3")), [x]),
    ]
    for text, args in cases:
        module = parse_hlo_module(text)
        want = evaluate(module, *args)
        got = Client(backend="cpu").compile(module)(*args)
        for g, w in zip(got, want):
            _same_bits(g, w, text.splitlines()[-2])


def test_arg_form_recognises_only_the_exact_pattern():
    """Variants with other semantics keep the in-order loop: TOTALORDER values, the
    element's NaN test, ties to the larger index, the select arms swapped, the index kept
    without the value's NaN test."""
    base = _jax_arg_text((4, 300), (1,))
    variants = [
        base.replace("direction=GT", "direction=GT, type=TOTALORDER"),
        base.replace("compare(a, a), direction=NE", "compare(c, c), direction=NE"),
        base.replace("compare(ia, ic), direction=LT", "compare(ia, ic), direction=GT"),
        base.replace("select(keep, a, c)", "select(keep, c, a)"),
        base.replace("or(keep, tie)", "or(cmp, tie)"),
    ]
    for text in [base] + variants:
        assert text.count("\n") == base.count("\n")
        root = parse_hlo_module(text).entry.root
        form = reduction.arg_form(root.attrs["to_apply"],
                                  [o.shape.element_type for o in root.operands[:2]])
        assert (form is not None) == (text is base), text


def test_jax_argmax_inside_a_while_loop():
    text = _jax_arg_text((8, 200), (1,)).split("ENTRY")[0] + """cond {
  s = (s32[], f32[8,200], s32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8,200], s32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8,200] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  io = s32[200] iota(), iota_dimension=0
  idx = s32[8,200] broadcast(io), dimensions={1}
  lo = f32[] constant(-inf)
  zero = s32[] constant(0)
  r = (f32[8], s32[8]) reduce(x, idx, lo, zero), dimensions={1}, to_apply=arg
  k = s32[8] get-tuple-element(r), index=1
  h = f32[] constant(-1)
  hb = f32[8,200] broadcast(h), dimensions={}
  y = f32[8,200] multiply(x, hb)
  ROOT t = (s32[], f32[8,200], s32[8]) tuple(j, y, k)
}
ENTRY e {
  x = f32[8,200] parameter(0)
  zero = s32[] constant(0)
  z8 = s32[8] broadcast(zero), dimensions={}
  s = (s32[], f32[8,200], s32[8]) tuple(zero, x, z8)
  w = (s32[], f32[8,200], s32[8]) while(s), condition=cond, body=body
  ROOT k = s32[8] get-tuple-element(w), index=2
}
"""
    x = _arg_values("f32", (8, 200), np.random.default_rng(47))
    module = parse_hlo_module(text)
    _same_bits(Client(backend="cpu").compile(module)(x), evaluate(module, x), "while")


# -- reduce-window ------------------------------------------------------------------------------


WINDOWS = [
    ((10,), "size=3"),
    ((10,), "size=3 stride=2 pad=1_2"),
    ((11,), "size=2 stride=3 lhs_dilate=2 pad=1_1"),          # base dilation: holes skipped
    ((9,), "size=3 rhs_dilate=2 stride=2"),
    ((12,), "size=4 pad=-1_-2"),                              # negative padding crops
    ((7, 9), "size=3x3 stride=2x2 pad=1_1x1_1"),
    ((7, 9), "size=2x4 stride=1x3 pad=0_1x2_0 lhs_dilate=2x1 rhs_dilate=1x2"),
    ((2, 8, 9, 3), "size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0"),  # NHWC pooling
    ((2, 4200), "size=1x5 pad=0_0x2_2"),                      # two blocks along the minor dim
    ((4,), "size=9 pad=4_4"),                                 # windows mostly padding
    ((3,), "size=2 pad=5_5 lhs_dilate=3"),                    # windows entirely padding
    ((0, 3), "size=1x2 pad=1_1x0_0"),                         # empty operand, windows of padding
    ((), ""),                                                 # rank 0
    ((16,), "size=16 pad=15_0"),          # a cumulative sum the reduce-window-rewriter leaves
    ((130,), "size=100 stride=3 pad=20_0"),                   # long windows (K > 64)
    # windows longer than the operand: walked over its elements, never over the padding
    ((5,), "size=12 pad=6_6"),
    ((4,), "size=9 stride=2 pad=7_3 rhs_dilate=2"),
    ((5,), "size=6 stride=3 pad=9_9 lhs_dilate=3 rhs_dilate=2"),
    ((6, 4), "size=9x11 stride=2x3 pad=5_4x7_6 lhs_dilate=2x1 rhs_dilate=1x2"),
    ((3, 5), "size=7x2 pad=4_4x1_1 rhs_dilate=3x1"),
]

# Windows, strides, dilations and paddings of 2**62 on f32[2,3] (issue 12): the work grows
# with the output and the operand, never with those sizes (XLA:CPU itself spins on the
# first). Run in a child process with a time limit so that a kernel looping over the window
# fails the test rather than hanging the suite.
HUGE_WINDOWS = [
    (f"size=1x{2**62}", [[], []]),
    (f"size=1x{2**62} pad=0_0x{2**62}_0", [[0, 1, 3, 6], [0, 4, 9, 15]]),
    (f"size=1x{2**61} stride=1x{2**59} pad=0_0x{2**61}_{2**61}",
     [[0, 6, 6, 6, 6], [0, 15, 15, 15, 15]]),
    (f"size=1x1 stride=1x{2**62}", [[1], [4]]),
    (f"size=1x2 rhs_dilate=1x{2**62}", [[], []]),
    (f"size=1x2 stride=1x{2**61} lhs_dilate=1x{2**61}", [[1, 2], [4, 5]]),
]

_HUGE_SCRIPT = """
import json, sys
import numpy as np
from xlapy.runtime import Client
out = []
for text in json.loads(sys.stdin.read()):
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    out.append(np.asarray(Client(backend="cpu").compile(text)(x)).tolist())
print(json.dumps(out))
"""


def test_huge_windows_cost_what_their_output_costs():
    import json
    import subprocess
    import sys

    texts = [_window_module("f32", "add", (2, 3), w, "0").to_string() for w, _ in HUGE_WINDOWS]
    for text, (_, want) in zip(texts, HUGE_WINDOWS):  # the interpreter agrees
        got = evaluate(parse_hlo_module(text), np.arange(1, 7, dtype=np.float32).reshape(2, 3))
        assert got.tolist() == want, text
    proc = subprocess.run([sys.executable, "-c", _HUGE_SCRIPT], input=json.dumps(texts),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [want for _, want in HUGE_WINDOWS]


def _window_module(t, op, shape, window, init):
    """A reduce-window module; the parser infers the result shape."""
    return parse_hlo_module(
        f"HloModule m\n{REDUCER.format(op=op, t=t)}\nENTRY e {{\n"
        f"  p = {t}[{','.join(map(str, shape))}] parameter(0)\n"
        f"  z = {t}[] constant({init})\n"
        f"  ROOT r = reduce-window(p, z), window={{{window}}}, to_apply=r_{op}_{t}\n}}\n")


@pytest.mark.parametrize("t,op,init", [("f32", "add", "0.5"), ("f32", "maximum", "-inf"),
                                       ("s32", "add", "3"), ("u64", "minimum", "1000")])
def test_reduce_window_against_interpreter(t, op, init):
    rng = np.random.default_rng(3)
    batch = Batch()
    cases = []
    for shape, window in WINDOWS:
        module = _window_module(t, op, shape, window, init)
        root = module.entry.root
        assert reduction.supports(root), (shape, window)
        spec = batch.add(root, [root.operands[0]])
        x = _values(t, shape, op, rng)
        cases.append((module, spec, x, shape, window))
    compiled = batch.compile()
    for module, spec, x, shape, window in cases:
        want = evaluate(module, x)
        root = module.entry.root
        k = int(np.prod([min(wd.size, n) for wd, n in zip(root.attrs["window"].dimensions,
                                                           shape)], dtype=np.int64))
        terms = None
        if t[0] == "f" and op == "add":
            terms = np.full(want.shape, np.abs(x).sum() + 0.5 if x.size else 0.5)
        for mode in ("whole", "halves", "items"):
            got = run_kernel(spec, compiled, [x], mode)[0]
            assert_close(got, want, terms, k, what=(shape, window, mode))


def test_variadic_reduce_window():
    text = """HloModule m
argmax {
  a = f32[] parameter(0)
  ia = s32[] parameter(1)
  c = f32[] parameter(2)
  ic = s32[] parameter(3)
  ge = pred[] compare(a, c), direction=GE
  v = f32[] select(ge, a, c)
  i = s32[] select(ge, ia, ic)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[6,9] parameter(0)
  idx = s32[6,9] parameter(1)
  lo = f32[] constant(-inf)
  m1 = s32[] constant(-1)
  ROOT r = (f32[3,5], s32[3,5]) reduce-window(x, idx, lo, m1), window={size=3x3 stride=2x2 pad=1_1x1_1}, to_apply=argmax
}
"""
    module = parse_hlo_module(text)
    root = module.entry.root
    assert reduction.supports(root)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, (6, 9)).astype(np.float32)
    idx = np.arange(54, dtype=np.int32).reshape(6, 9)
    batch = Batch()
    inputs = _unique(root.operands)
    spec = batch.add(root, inputs)
    compiled = batch.compile()
    want = evaluate(module, x, idx)
    for mode in ("whole", "items"):
        got = run_kernel(spec, compiled, _input_arrays(inputs, [x, idx]), mode)
        for g, w in zip(got, want):
            assert_close(g, w, what=mode)


# -- input fusions ------------------------------------------------------------------------------


SOFTMAX = """HloModule jit_softmax
region_0.1 {
  reduce_max.3 = f32[] parameter(0)
  reduce_max.4 = f32[] parameter(1)
  ROOT reduce_max.5 = f32[] maximum(reduce_max.3, reduce_max.4)
}
region_1.2 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}
ENTRY main.3 {
  x.1 = f32[@R,@C]{1,0} parameter(0)
  constant.5 = f32[] constant(-inf)
  reduce_max.7 = f32[@R]{0} reduce(x.1, constant.5), dimensions={1}, to_apply=region_0.1
  constant.3 = f32[] constant(-inf)
  broadcast.1 = f32[@R]{0} broadcast(constant.3), dimensions={}
  max.1 = f32[@R]{0} maximum(reduce_max.7, broadcast.1)
  broadcast_in_dim.2 = f32[@R,1]{1,0} reshape(max.1)
  sub.4 = f32[@R,1]{1,0} broadcast(broadcast_in_dim.2), dimensions={0,1}
  sub.5 = f32[@R]{0} reshape(sub.4)
  sub.6 = f32[@R,@C]{1,0} broadcast(sub.5), dimensions={0}
  sub.7 = f32[@R,@C]{1,0} subtract(x.1, sub.6)
  exp.1 = f32[@R,@C]{1,0} exponential(sub.7)
  constant.4 = f32[] constant(0)
  reduce_sum.7 = f32[@R]{0} reduce(exp.1, constant.4), dimensions={1}, to_apply=region_1.2
  broadcast_in_dim.3 = f32[@R,1]{1,0} reshape(reduce_sum.7)
  div.4 = f32[@R,1]{1,0} broadcast(broadcast_in_dim.3), dimensions={0,1}
  div.5 = f32[@R]{0} reshape(div.4)
  div.6 = f32[@R,@C]{1,0} broadcast(div.5), dimensions={0}
  ROOT div.7 = f32[@R,@C]{1,0} divide(exp.1, div.6)
}
"""

# layernorm's statistics, the squared deviations fused into the second reduce
LAYERNORM = """HloModule jit_ln
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY main {
  x = f32[@R,@C]{1,0} parameter(0)
  zero = f32[] constant(0)
  sum = f32[@R]{0} reduce(x, zero), dimensions={1}, to_apply=add
  n = f32[] constant(@C)
  nb = f32[@R]{0} broadcast(n), dimensions={}
  mean = f32[@R]{0} divide(sum, nb)
  mb = f32[@R,@C]{1,0} broadcast(mean), dimensions={0}
  d = f32[@R,@C]{1,0} subtract(x, mb)
  sq = f32[@R,@C]{1,0} multiply(d, d)
  ss = f32[@R]{0} reduce(sq, zero), dimensions={1}, to_apply=add
  var = f32[@R]{0} divide(ss, nb)
  ROOT t = (f32[@R]{0}, f32[@R]{0}) tuple(mean, var)
}
"""

# producers of every kind inside input fusions: broadcasts, transposes, slices, iota, a
# column reduction of a fused expression, a reduce-window of a fused relu
MIXED = """HloModule mixed
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[40,70] parameter(0)
  v = f32[70] parameter(1)
  vb = f32[40,70] broadcast(v), dimensions={1}
  xv = f32[40,70] multiply(x, vb)
  zero = f32[] constant(0)
  cols = f32[70] reduce(xv, zero), dimensions={0}, to_apply=add
  xt = f32[70,40] transpose(x), dimensions={1,0}
  sl = f32[70,30] slice(xt), slice={[0:70], [5:35]}
  io = f32[70,30] iota(), iota_dimension=1
  e = f32[70,30] add(sl, io)
  rows = f32[70] reduce(e, zero), dimensions={1}, to_apply=add
  zb = f32[40,70] broadcast(zero), dimensions={}
  relu = f32[40,70] maximum(x, zb)
  ninf = f32[] constant(-inf)
  pool = f32[20,35] reduce-window(relu, ninf), window={size=3x3 stride=2x2 pad=1_1x1_1}, to_apply=max
  ROOT t = (f32[70], f32[70], f32[20,35]) tuple(cols, rows, pool)
}
"""


def _fused_cases(text, args):
    """(fusion instruction, its root, inputs, input arrays, reference value) for every
    kInput fusion of the module after the backend's passes."""
    module = parse_hlo_module(text)
    make_pipeline(("inline", "simplify", "cse", "dce", "fusion"), verify=False).run(module)
    ctx = EvalContext(module, EvalOptions())
    env: dict = {}
    ctx.call(module.entry, list(args), env)
    out = []
    for instr in module.entry.instructions:
        if instr.opcode != "fusion" or str(instr.attrs["kind"]) not in ("kInput",
                                                                        "FusionKind.INPUT"):
            continue
        comp = instr.attrs["calls"]
        params = comp.parameters
        arrays = [np.asarray(env[id(o)]) for o in instr.operands]
        big = [c for c in comp.instructions if c.opcode == "constant" and c.shape.dimensions]
        inputs = params + big
        arrays += [np.asarray(_constant(c)) for c in big]
        out.append((instr, comp.root, inputs, arrays, env[id(instr)]))
    return out


def _check_fused(text, args, expect):
    cases = _fused_cases(text, args)
    assert len(cases) == expect
    batch = Batch()
    specs = []
    for fusion, root, inputs, arrays, want in cases:
        assert reduction.supports(root, inputs), fusion.attrs["calls"].to_string() \
            if hasattr(fusion.attrs["calls"], "to_string") else root.name
        specs.append(batch.add(root, inputs))
    compiled = batch.compile()
    for (fusion, root, inputs, arrays, want), spec in zip(cases, specs):
        k = max(1, int(np.prod(root.operands[0].shape.dimensions)) //
                max(1, int(np.prod(root.shape.dimensions))))
        for mode in ("whole", "halves"):
            got = run_kernel(spec, compiled, arrays, mode)[0]
            terms = None
            if root.attrs["to_apply"].root.opcode == "add":
                terms = _fused_terms(root, inputs, arrays)
            assert_close(got, want, terms, k, what=(root.name, mode))


def _fused_terms(root, inputs, arrays):
    """sum(|terms|) per output of a fused add-reduce, by the interpreter in f64 on |x|."""
    comp = root.parent
    ctx = EvalContext(None, EvalOptions())
    env: dict = {}
    ctx.call(comp, arrays[:len(comp.parameters)], env)
    x = np.abs(np.asarray(env[id(root.operands[0])], np.float64))
    if root.opcode == "reduce":
        return x.sum(axis=tuple(root.attrs["dimensions"])) + 1.0
    return np.full(tuple(root.shape.dimensions), x.sum() + 1.0)


def test_softmax_fusions():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((37, 300)).astype(np.float32) * 4
    _check_fused(SOFTMAX.replace("@R", "37").replace("@C", "300"), [x], expect=2)


def test_layernorm_fusions():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((33, 520)).astype(np.float32) + 3
    _check_fused(LAYERNORM.replace("@R", "33").replace("@C", "520"), [x], expect=2)


def test_mixed_producer_fusions():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((40, 70)).astype(np.float32)
    v = rng.standard_normal(70).astype(np.float32)
    _check_fused(MIXED, [x, v], expect=3)


def test_fused_array_constant_is_embedded():
    """A constant array inside the fused expression that is not an input: an internal
    global."""
    text = """HloModule m
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}
ENTRY e {
  p = s32[2,3] parameter(0)
  k = s32[2,3] constant({{1, 2, 3}, {40, 50, 60}})
  s = s32[2,3] multiply(p, k)
  z = s32[] constant(0)
  ROOT r = s32[3] reduce(s, z), dimensions={0}, to_apply=add
}
"""
    module = parse_hlo_module(text)
    root = module.entry.root
    p = module.entry.parameters[0]
    batch = Batch()
    spec = batch.add(root, [p])
    compiled = batch.compile()
    x = np.array([[1, 1, 1], [2, 3, 4]], np.int32)
    got = run_kernel(spec, compiled, [x])[0]
    np.testing.assert_array_equal(got, evaluate(module, x))


# -- every reduce of the jax fixtures -----------------------------------------------------------


def _read(path) -> str:
    with open(path) as f:
        return f.read()


def _fixture_cases(path, fuse):
    module = parse_hlo_module(_read(path))
    # cumulative windows as the backend runs them: XLA:CPU's tree of scans of at most 16
    passes = ("inline", "reduce-window-rewriter", "simplify", "cse", "dce") + \
        (("fusion",) if fuse else ())
    make_pipeline(passes, verify=False).run(module)
    data = load_npz(path.replace(".pre.hlo", ".npz"))
    args = [data[f"arg{i}"] for i in range(len(module.entry.parameters))]
    ctx = EvalContext(module, EvalOptions())
    env: dict = {}
    ctx.call(module.entry, args, env)
    out = []
    for instr in module.entry.instructions:
        if instr.opcode in ("reduce", "reduce-window") and not fuse:
            inputs = _unique(instr.operands)
            if reduction.supports(instr, inputs):
                arrays = [np.asarray(env[id(o)]) for o in inputs]
                out.append((instr, inputs, arrays, env[id(instr)]))
        elif instr.opcode == "fusion" and fuse:
            comp = instr.attrs["calls"]
            root = comp.root
            if root.opcode not in ("reduce", "reduce-window"):
                continue
            big = [c for c in comp.instructions if c.opcode == "constant" and c.shape.dimensions]
            inputs = comp.parameters + big
            if reduction.supports(root, inputs):
                arrays = [np.asarray(env[id(o)]) for o in instr.operands]
                arrays += [np.asarray(_constant(c)) for c in big]
                out.append((root, inputs, arrays, env[id(instr)]))
    return out


def test_jax_fixture_reductions():
    """Every reduce/reduce-window of the jax fixtures the emitter supports, unfused and as
    input fusions, against the interpreter's values in the same module."""
    paths = [p for p in FIXTURES if " reduce(" in _read(p) or "reduce-window(" in _read(p)]
    assert paths
    batch = Batch()
    cases = []
    for path in paths:
        for fuse in (False, True):
            for root, inputs, arrays, want in _fixture_cases(path, fuse):
                cases.append((path, root, inputs, arrays, want, batch.add(root, inputs)))
    compiled = batch.compile()
    assert len(cases) >= 30, len(cases)
    for path, root, inputs, arrays, want, spec in cases:
        got = run_kernel(spec, compiled, arrays, "halves")
        wants = list(want) if isinstance(want, tuple) else [want]
        op = root.attrs["to_apply"].root.opcode
        loose = op in ("add", "multiply") and root.shape.is_array() and \
            np.dtype(dtypes.to_dtype(root.shape.element_type)).kind == "f"
        for g, w in zip(got, wants):
            w = np.asarray(w)
            if not loose:
                assert_close(g, w, what=(path, root.name))
                continue
            x = np.abs(_operand_value(root, inputs, arrays).astype(np.float64))
            k = max(1, x.size // max(1, w.size))
            if op == "multiply":
                terms = np.abs(w.astype(np.float64)) * k
            elif root.opcode == "reduce":
                terms = x.sum(axis=tuple(root.attrs["dimensions"])) + 1.0
            else:
                terms = np.full(w.shape, x.sum() + 1.0)
            assert_close(g, w, terms, k, what=(path, root.name))


def _operand_value(root, inputs, arrays):
    """The value of the root's first operand (computed by the interpreter when fused)."""
    operand = root.operands[0]
    for i, a in zip(inputs, arrays):
        if i is operand:
            return np.asarray(a)
    comp = root.parent
    env: dict = {}
    EvalContext(None, EvalOptions()).call(comp, arrays[:len(comp.parameters)], env)
    return np.asarray(env[id(operand)])


# -- supports and errors ------------------------------------------------------------------------


def test_unsupported_reducers_and_errors():
    text = """HloModule m
odd {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] atan2(a, b)
}
ENTRY e {
  p = f32[4,5] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=odd
}
"""
    module = parse_hlo_module(text)
    root = module.entry.root
    if supports_computation(module.computation("odd")):  # elemental grew atan2
        assert reduction.supports(root)
        return
    assert not reduction.supports(root)
    with pytest.raises(InvalidArgumentError, match="reduce %r"):
        reduction.emit(ir.Module(), "k", root, [root.operands[0]])
    # an operand that is neither an input nor generated
    add_root = _reduce_module("f32", "add", (4, 5), (1,)).entry.root
    assert not reduction.supports(add_root, [])
    with pytest.raises(InvalidArgumentError, match="reduce %r"):
        reduction.emit(ir.Module(), "k", add_root, [])


def test_recognised_reducers():
    def comp(op, t="f32", swap=False):
        a, b = ("b", "a") if swap else ("a", "b")
        m = parse_hlo_module(f"HloModule m\n{REDUCER.format(op=op, t=t)}\nENTRY e {{\n"
                             f"  ROOT p = {t}[] parameter(0)\n}}\n".replace(
                                 f"{op}(a, b)", f"{op}({a}, {b})"))
        return m.computation(f"r_{op}_{t}")

    assert reduction.recognised_op(comp("add")) == "add"
    assert reduction.recognised_op(comp("maximum", swap=True)) == "maximum"
    assert reduction.recognised_op(comp("subtract")) is None
    assert reduction.recognised_op(comp("and", "s32")) == "and"
    assert reduction.recognised_op(comp("and", "pred")) == "and"
    assert reduction.recognised_op(comp("add", "pred")) is None


# -- inline_computation directly ----------------------------------------------------------------


def test_inline_computation_tuple_root_and_comparator():
    text = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  lt = pred[] compare(a, b), direction=LT
  neg = f32[] negate(a)
  two = f32[] constant(2)
  m = f32[] multiply(neg, two)
  ROOT t = (pred[], f32[]) tuple(lt, m)
}
ENTRY e {
  ROOT p = f32[] parameter(0)
}
"""
    module = parse_hlo_module(text)
    comp = module.computation("cmp")
    assert supports_computation(comp)
    f32 = ir.FloatType()
    mod = ir.Module()
    fnty = ir.FunctionType(ir.VoidType(), [f32, f32, ir.IntType(8).as_pointer(),
                                           f32.as_pointer()])
    fn = ir.Function(mod, fnty, name="cmp")
    b = ir.IRBuilder(fn.append_basic_block())
    lt, m = inline_computation(b, comp, [fn.args[0], fn.args[1]])
    b.store(b.zext(lt, ir.IntType(8)), fn.args[2])
    b.store(m, fn.args[3])
    b.ret_void()
    compiled = get_jit().compile(mod)
    proto = ctypes.CFUNCTYPE(None, ctypes.c_float, ctypes.c_float, ctypes.c_void_p,
                             ctypes.c_void_p)
    call = proto(compiled.function_address("cmp"))
    flag = np.zeros(1, np.uint8)
    val = np.zeros(1, np.float32)
    call(1.5, 2.0, flag.ctypes.data, val.ctypes.data)
    assert flag[0] == 1 and val[0] == -3.0
    call(2.5, 2.0, flag.ctypes.data, val.ctypes.data)
    assert flag[0] == 0 and val[0] == -5.0
    with pytest.raises(InvalidArgumentError, match="takes 2 arguments"):
        inline_computation(b, comp, [fn.args[0]])
