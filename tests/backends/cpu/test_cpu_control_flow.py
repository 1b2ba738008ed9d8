"""Compiled while loops (xlapy.backends.cpu.control_flow) against the interpreter: each test
asserts the compiled path was taken (or, for loops that must stay in Python, that it was
not) and compares the results with ``xlapy.interpreter.evaluate`` bit for bit."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import buffers, native
from xlapy.backends.cpu import control_flow as cf
from xlapy.interpreter.evaluator import EvalContext, EvalOptions, evaluate
from xlapy.interpreter.values import flatten
from xlapy.npz import load_npz
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "jax"
BENCH_HLO = ROOT / "benchmarks" / "hlo"


def _walk(plan, seen=None):
    """Every step of ``plan`` and of the plans it runs (while loops compiled or not,
    calls, conditional branches)."""
    seen = set() if seen is None else seen
    for step in plan.steps:
        yield step
        subs = [getattr(step, "cond", None), getattr(step, "body", None)]
        for p in subs + list(getattr(step, "branches", [])):
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                yield from _walk(p, seen)


def _count(text: str):
    """(compiled whiles, Python whiles) of the compiled module, nested ones included."""
    steps = list(_walk(be.compile_module(parse_hlo_module(text)).entry))
    return (sum(isinstance(s, cf.CompiledWhileStep) for s in steps),
            sum(type(s) is be.WhileStep for s in steps))


def _same(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":  # bit-exact, NaN payloads aside
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan)
        assert np.array_equal(got[~nan].view(f"u{got.itemsize}"),
                              want[~nan].view(f"u{got.itemsize}"))
    else:
        assert np.array_equal(got, want)


def _leaves(value) -> list:
    return flatten(value) if isinstance(value, tuple) else [value]


def _python_loop(text: str, *args):
    """The result with every while left to the Python ``WhileStep`` (same kernels)."""
    be.clear_cache()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(cf, "compile_while", lambda planner, step: None)
            assert _count(text)[0] == 0
            return Client(backend="cpu").compile(parse_hlo_module(text))(*args)
    finally:
        be.clear_cache()


def _check(text: str, *args, compiled: int = 1, python: int = 0):
    """Run on the cpu backend and the interpreter; the loop counts as stated."""
    assert _count(text) == (compiled, python)
    module = parse_hlo_module(text)
    got = Client(backend="cpu").compile(module)(*args)
    want = evaluate(module, *args)
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        _same(a, b)
    return got


# -- loops ------------------------------------------------------------------------------------

COUNTER = """HloModule counter
c {
  p = s32[] parameter(0)
  k = s32[] constant(1000)
  ROOT lt = pred[] compare(p, k), direction=LT
}
b {
  p = s32[] parameter(0)
  three = s32[] constant(3)
  ROOT a = s32[] add(p, three)
}
ENTRY e {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=c, body=b
}
"""


@pytest.mark.parametrize("start", [0, 5, -7, 999, 2000, 2147483647])
def test_counter_array_state(start):
    got = _check(COUNTER, np.int32(start))
    want = start if start >= 1000 else start + 3 * -(-(1000 - start) // 3)
    assert int(got) == want


FORI = """HloModule fori
c {
  s = (s32[], f32[16], f32[16], pred[16], s64[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(37)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[16], f32[16], pred[16], s64[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[16] get-tuple-element(s), index=1
  w = f32[16] get-tuple-element(s), index=2
  acc = s64[] get-tuple-element(s), index=4
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  xw = f32[16] multiply(x, w)
  h = f32[] constant(0.25)
  hb = f32[16] broadcast(h), dimensions={}
  x1 = f32[16] add(xw, hb)
  two = f32[] constant(2)
  tb = f32[16] broadcast(two), dimensions={}
  big = pred[16] compare(x1, tb), direction=GT
  x2 = f32[16] select(big, hb, x1)
  ic = s64[] convert(i)
  acc1 = s64[] add(acc, ic)
  ROOT t = (s32[], f32[16], f32[16], pred[16], s64[]) tuple(i1, x2, w, big, acc1)
}
ENTRY e {
  x = f32[16] parameter(0)
  w = f32[16] parameter(1)
  zero = s32[] constant(0)
  p = pred[16] constant({0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0})
  z = s64[] constant(0)
  init = (s32[], f32[16], f32[16], pred[16], s64[]) tuple(zero, x, w, p, z)
  ROOT r = (s32[], f32[16], f32[16], pred[16], s64[]) while(init), condition=c, body=b
}
"""


def test_fori_loop_state_tuple():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(16).astype(np.float32)
    w = (rng.standard_normal(16) * 1.5).astype(np.float32)
    got = _check(FORI, x, w)
    assert int(got[0]) == 37 and int(got[4]) == 36 * 37 // 2
    _same(got[2], w)  # passed through unchanged
    assert got[2] is not w  # a fresh array, not the argument


NESTED = """HloModule nested
ic {
  s = (s32[], s32[], f32[8]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(j, n), direction=LT
}
ib {
  s = (s32[], s32[], f32[8]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  v = f32[8] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j1 = s32[] add(j, one)
  jf = f32[] convert(j)
  jb = f32[8] broadcast(jf), dimensions={}
  v1 = f32[8] add(v, jb)
  ROOT t = (s32[], s32[], f32[8]) tuple(j1, n, v1)
}
oc {
  s = (s32[], f32[8], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  k = s32[] constant(6)
  ROOT lt = pred[] compare(i, k), direction=LT
}
ob {
  s = (s32[], f32[8], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8] get-tuple-element(s), index=1
  cnt = s32[] get-tuple-element(s), index=2
  zero = s32[] constant(0)
  init = (s32[], s32[], f32[8]) tuple(zero, i, v)
  inner = (s32[], s32[], f32[8]) while(init), condition=ic, body=ib
  v1 = f32[8] get-tuple-element(inner), index=2
  j = s32[] get-tuple-element(inner), index=0
  half = f32[] constant(0.5)
  hb = f32[8] broadcast(half), dimensions={}
  v2 = f32[8] multiply(v1, hb)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  cnt1 = s32[] add(cnt, j)
  ROOT t = (s32[], f32[8], s32[]) tuple(i1, v2, cnt1)
}
ENTRY e {
  v = f32[8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8], s32[]) tuple(zero, v, zero)
  ROOT r = (s32[], f32[8], s32[]) while(init), condition=oc, body=ob
}
"""


def _loop_kernels(text: str, parts=("cond", "body")) -> list:
    """The kernel steps of the compiled whiles' conditions and bodies (nested ones too)."""
    program = be.compile_module(parse_hlo_module(text))
    out = []
    for step in program.kernels:
        if isinstance(step, cf.CompiledWhileStep):
            out += [s for part in parts for s in getattr(step, part).steps
                    if isinstance(s, be.KernelStep)]
    return out


def test_loop_kernels_are_compiled_only_inlined():
    """Kernels only a compiled loop runs exist only inlined into it: no function of their
    own is compiled or bound (a call of one says so), and the loops compute the same."""
    be.clear_cache()
    kernels = _loop_kernels(NESTED)
    assert kernels
    for step in kernels:
        assert isinstance(step.fn, functools.partial), step.spec.name
        with pytest.raises(RuntimeError, match="compiled only inlined"):
            step.fn(None, 0, 1)
    v = np.arange(8, dtype=np.float32)
    got = _check(NESTED, v, compiled=2)
    assert int(got[0]) == 6


SHARED_BODY = """HloModule shared
c {
  s = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  k = s32[] constant(4)
  ROOT lt = pred[] compare(i, k), direction=LT
}
b {
  s = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[16] get-tuple-element(s), index=1
  h = f32[] constant(0.5)
  hb = f32[16] broadcast(h), dimensions={}
  x1 = f32[16] multiply(x, hb)
  x2 = f32[16] add(x1, x)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[16]) tuple(i1, x2)
}
other {
  s = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[16] get-tuple-element(s), index=1
  x1 = f32[16] negate(x)
  ROOT t = (s32[], f32[16]) tuple(i, x1)
}
ENTRY e {
  x = f32[16] parameter(0)
  p = pred[] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[16]) tuple(zero, x)
  w = (s32[], f32[16]) while(init), condition=c, body=b
  k = (s32[], f32[16]) conditional(p, init, init), true_computation=b, false_computation=other
  wx = f32[16] get-tuple-element(w), index=1
  kx = f32[16] get-tuple-element(k), index=1
  ROOT r = f32[16] add(wx, kx)
}
"""


@pytest.mark.parametrize("pred", [True, False])
def test_body_shared_with_a_conditional_keeps_its_kernels(pred):
    """A body computation a conditional runs too keeps its kernels' own functions (the
    conditional's branch may run them outside the loop); the condition's are inlined only."""
    be.clear_cache()
    body = _loop_kernels(SHARED_BODY, ("body",))
    cond = _loop_kernels(SHARED_BODY, ("cond",))
    assert body and cond
    assert not any(isinstance(s.fn, functools.partial) for s in body)
    assert all(isinstance(s.fn, functools.partial) for s in cond)
    x = np.linspace(-2, 2, 16, dtype=np.float32)
    _check(SHARED_BODY, x, np.array(pred))


def test_nested_whiles():
    v = np.arange(8, dtype=np.float32) - 3.5
    got = _check(NESTED, v, compiled=2)
    assert int(got[2]) == sum(range(6))
    # the outer loop's body runs the inner loop natively (a call of its function)
    outer = [s for s in be.compile_module(parse_hlo_module(NESTED)).entry.steps
             if isinstance(s, cf.CompiledWhileStep)]
    assert len(outer) == 1
    assert any(isinstance(s, cf.CompiledWhileStep) for s in outer[0].body.steps)


def test_zero_trip_loop():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(16).astype(np.float32)
    w = rng.standard_normal(16).astype(np.float32)
    text = FORI.replace("zero = s32[] constant(0)", "zero = s32[] constant(40)")
    got = _check(text, x, w)
    assert int(got[0]) == 40 and int(got[4]) == 0
    _same(got[1], x)
    _same(got[2], w)
    assert not got[3].any()
    got[1][:] = 0  # the results are the loop's own buffers, not the arguments
    assert np.any(x != 0)


def test_zero_trip_nested_loop():
    text = NESTED.replace("k = s32[] constant(6)", "k = s32[] constant(1)")
    got = _check(text, np.ones(8, np.float32), compiled=2)
    assert int(got[0]) == 1 and int(got[2]) == 0  # the inner loop ran zero times


ZERO_SIZE = """HloModule zerosize
c {
  s = (s32[], f32[0], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[0], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  e = f32[0] get-tuple-element(s), index=1
  x = f32[3] get-tuple-element(s), index=2
  e1 = f32[0] add(e, e)
  x1 = f32[3] add(x, x)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[0], f32[3]) tuple(i1, e1, x1)
}
ENTRY e {
  e = f32[0] parameter(0)
  x = f32[3] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[0], f32[3]) tuple(zero, e, x)
  ROOT r = (s32[], f32[0], f32[3]) while(init), condition=c, body=b
}
"""


def test_zero_size_state_element():
    got = _check(ZERO_SIZE, np.zeros(0, np.float32), np.array([1, 2, 3], np.float32))
    assert got[1].shape == (0,) and got[2].tolist() == [16, 32, 48]


SWAP = """HloModule swap
c {
  s = (s32[], f32[N], f32[N], f32[N], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=4
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[N], f32[N], f32[N], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[N] get-tuple-element(s), index=1
  bb = f32[N] get-tuple-element(s), index=2
  cc = f32[N] get-tuple-element(s), index=3
  n = s32[] get-tuple-element(s), index=4
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  d = f32[N] subtract(a, cc)
  ROOT t = (s32[], f32[N], f32[N], f32[N], s32[]) tuple(i1, bb, a, d, n)
}
ENTRY e {
  a = f32[N] parameter(0)
  b = f32[N] parameter(1)
  c = f32[N] parameter(2)
  n = s32[] parameter(3)
  zero = s32[] constant(0)
  init = (s32[], f32[N], f32[N], f32[N], s32[]) tuple(zero, a, b, c, n)
  ROOT r = (s32[], f32[N], f32[N], f32[N], s32[]) while(init), condition=c, body=b
}
"""


@pytest.mark.parametrize("size", [4, 100])
@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_swapped_and_passed_through_elements(n, size):
    """The body swaps two state elements (each read before either is written), passes
    the bound through, and computes one from the old value of a swapped one; at 100
    elements that one is double-buffered (the loop exits from either copy)."""
    text = SWAP.replace("[N]", f"[{size}]")
    loop = [s for s in be.compile_module(parse_hlo_module(text)).entry.steps
            if isinstance(s, cf.CompiledWhileStep)]
    assert loop[0].swapped == ([3] if size * 4 >= cf.SWAP_MIN_BYTES else [])
    rng = np.random.default_rng(n)
    a, b, c = (rng.standard_normal(size).astype(np.float32) for _ in range(3))
    got = _check(text, a, b, c, np.int32(n))
    want_a, want_b = (a, b) if n % 2 == 0 else (b, a)
    _same(got[1], want_a)
    _same(got[2], want_b)


DOUBLE = """HloModule double
c {
  s = (s32[], f32[96], f32[96], f32[96]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(LIMIT)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[96], f32[96], f32[96]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[96] get-tuple-element(s), index=1
  y = f32[96] get-tuple-element(s), index=2
  z = f32[96] get-tuple-element(s), index=3
  h = f32[] constant(0.5)
  hb = f32[96] broadcast(h), dimensions={}
  xh = f32[96] multiply(x, hb)
  x1 = f32[96] add(xh, y)
  rx = f32[96] reverse(x), dimensions={0}
  y1 = f32[96] subtract(rx, z)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[96], f32[96], f32[96]) tuple(i1, x1, y1, x)
}
ENTRY e {
  x = f32[96] parameter(0)
  y = f32[96] parameter(1)
  z = f32[96] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[96], f32[96], f32[96]) tuple(zero, x, y, z)
  ROOT r = (s32[], f32[96], f32[96], f32[96]) while(init), condition=c, body=b
}
"""


@pytest.mark.parametrize("limit", [0, 1, 2, 5])
def test_double_buffered_state(limit):
    """Two leaves computed by kernels alternate between two buffers (one of them reads the
    other's old value reversed, so a kernel writing in place would be wrong); a third is
    copied from the old value of the first."""
    text = DOUBLE.replace("LIMIT", str(limit))
    loop = [s for s in be.compile_module(parse_hlo_module(text)).entry.steps
            if isinstance(s, cf.CompiledWhileStep)]
    assert loop[0].swapped == [1, 2]
    rng = np.random.default_rng(limit)
    x, y, z = (rng.standard_normal(96).astype(np.float32) for _ in range(3))
    got = _check(text, x, y, z)
    for _ in range(limit):
        x, y, z = x * np.float32(0.5) + y, x[::-1] - z, x
    for g, w in zip(got[1:], (x, y, z)):
        _same(g, w)


SCAN = """HloModule scan
c {
  s = (s32[], f32[10,4], f32[10,4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[10,4], f32[10,4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  xs = f32[10,4] get-tuple-element(s), index=1
  ys = f32[10,4] get-tuple-element(s), index=2
  carry = f32[4] get-tuple-element(s), index=3
  zero = s32[] constant(0)
  row = f32[1,4] dynamic-slice(xs, i, zero), dynamic_slice_sizes={1,4}
  r = f32[4] reshape(row)
  h = f32[] constant(0.5)
  hb = f32[4] broadcast(h), dimensions={}
  ch = f32[4] multiply(carry, hb)
  c1 = f32[4] add(ch, r)
  c2 = f32[1,4] reshape(c1)
  nine = s32[] constant(9)
  ri = s32[] subtract(nine, i)
  ys1 = f32[10,4] dynamic-update-slice(ys, c2, ri, zero)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[10,4], f32[10,4], f32[4]) tuple(i1, xs, ys1, c1)
}
ENTRY e {
  xs = f32[10,4] parameter(0)
  c0 = f32[4] parameter(1)
  zero = s32[] constant(0)
  z = f32[] constant(0)
  ys = f32[10,4] broadcast(z), dimensions={}
  init = (s32[], f32[10,4], f32[10,4], f32[4]) tuple(zero, xs, ys, c0)
  w = (s32[], f32[10,4], f32[10,4], f32[4]) while(init), condition=c, body=b
  ys1 = f32[10,4] get-tuple-element(w), index=2
  cf = f32[4] get-tuple-element(w), index=3
  ROOT r = (f32[10,4], f32[4]) tuple(ys1, cf)
}
"""


def test_scan_with_dynamic_slice_and_update():
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((10, 4)).astype(np.float32)
    c0 = rng.standard_normal(4).astype(np.float32)
    ys, carry = _check(SCAN, xs, c0)
    c = c0.copy()
    for i in range(10):  # the same f32 operations in the same order
        c = c * np.float32(0.5) + xs[i]
        _same(ys[9 - i], c)
    _same(carry, c)


COND_BODY = """HloModule condbody
br0 {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  ob = f32[4] broadcast(one), dimensions={}
  ROOT r = f32[4] add(x, ob)
}
br1 {
  x = f32[4] parameter(0)
  ROOT r = f32[4] add(x, x)
}
br2 {
  x = f32[4] parameter(0)
  ROOT r = f32[4] negate(x)
}
pt {
  x = s32[] parameter(0)
  ten = s32[] constant(10)
  ROOT r = s32[] add(x, ten)
}
pf {
  ROOT x = s32[] parameter(0)
}
c {
  s = (s32[], f32[4], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(9)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[4], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  acc = s32[] get-tuple-element(s), index=2
  two = s32[] constant(2)
  k = s32[] subtract(i, two)
  x1 = f32[4] conditional(k, x, x, x), branch_computations={br0, br1, br2}
  three = s32[] constant(3)
  small = pred[] compare(i, three), direction=LT
  acc1 = s32[] conditional(small, acc, acc), true_computation=pt, false_computation=pf
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[4], s32[]) tuple(i1, x1, acc1)
}
ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4], s32[]) tuple(zero, x, zero)
  ROOT r = (s32[], f32[4], s32[]) while(init), condition=c, body=b
}
"""


def test_conditionals_in_the_body():
    """Index conditional with in-range and out-of-range (last branch) selectors, and a
    pred conditional, inside a compiled loop."""
    x = np.array([1.5, -2.0, 0.0, 3.25], np.float32)
    got = _check(COND_BODY, x)
    assert int(got[2]) == 30


WHILE_IN_BRANCH = """HloModule n2
ic {
  s = (s32[], f32[64]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  k = s32[] constant(3)
  ROOT lt = pred[] compare(j, k), direction=LT
}
ib {
  s = (s32[], f32[64]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  v = f32[64] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j1 = s32[] add(j, one)
  v1 = f32[64] add(v, v)
  ROOT t = (s32[], f32[64]) tuple(j1, v1)
}
bt {
  v = f32[64] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[64]) tuple(z, v)
  w = (s32[], f32[64]) while(init), condition=ic, body=ib
  ROOT r = f32[64] get-tuple-element(w), index=1
}
bf {
  v = f32[64] parameter(0)
  ROOT r = f32[64] negate(v)
}
c {
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[64] get-tuple-element(s), index=1
  two = s32[] constant(2)
  p = pred[] compare(i, two), direction=LT
  v1 = f32[64] conditional(p, v, v), true_computation=bt, false_computation=bf
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[64]) tuple(i1, v1)
}
ENTRY e {
  v = f32[64] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[64]) tuple(z, v)
  ROOT w = (s32[], f32[64]) while(init), condition=c, body=b
}
"""


def test_while_in_a_conditional_in_a_while():
    v = np.linspace(-1, 1, 64).astype(np.float32)
    got = _check(WHILE_IN_BRANCH, v, compiled=2)
    _same(got[1], v * np.float32(64))  # x8 twice (the inner loop), then negated 4 times


CALL_MODULE = """HloModule calls
f {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  m = f32[8] multiply(a, b)
  ROOT t = (f32[8], f32[8]) tuple(m, a)
}
c {
  s = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  y = f32[8] get-tuple-element(s), index=2
  r = (f32[8], f32[8]) call(x, y), to_apply=f
  m = f32[8] get-tuple-element(r), index=0
  a = f32[8] get-tuple-element(r), index=1
  sm = f32[8] add(m, a)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[8], f32[8]) tuple(i1, sm, y)
}
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[8], f32[8]) tuple(zero, x, y)
  ROOT r = (s32[], f32[8], f32[8]) while(init), condition=c, body=b
}
"""


def test_call_in_the_body_unfused_plans():
    """The planner straight on an unoptimised module (no inlining, no fusion): a call in
    the body and one kernel per instruction, every intermediate in the workspace."""
    module = parse_hlo_module(CALL_MODULE)
    planner = be.Planner(module)
    entry = planner.plan(module.entry)
    compiled = planner.compile()
    loop = [s for s in entry.steps if isinstance(s, cf.CompiledWhileStep)]
    assert len(loop) == 1
    assert any(isinstance(s, be.CallStep) for s in loop[0].body.steps)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    y = np.linspace(0.5, 1.5, 8, dtype=np.float32)
    got = entry.execute([x, y], EvalContext(module, EvalOptions()))
    want = evaluate(module, x, y)
    for g, w in zip(_leaves(got), _leaves(want)):
        _same(g, w)
    assert compiled is not None


REDUCE_BODY = """HloModule reducebody
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
c {
  s = (s32[], f32[8,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(12)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[8,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8,16] get-tuple-element(s), index=1
  ninf = f32[] constant(-inf)
  r = f32[8] reduce(x, ninf), dimensions={1}, to_apply=mx
  rb = f32[8,16] broadcast(r), dimensions={0}
  h = f32[] constant(0.5)
  hb = f32[8,16] broadcast(h), dimensions={}
  x1 = f32[8,16] multiply(x, hb)
  x2 = f32[8,16] subtract(x1, rb)
  xt = f32[16,8] transpose(x2), dimensions={1,0}
  xr = f32[8,16] reshape(xt)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[8,16]) tuple(i1, xr)
}
ENTRY e {
  x = f32[8,16] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8,16]) tuple(zero, x)
  ROOT r = (s32[], f32[8,16]) while(init), condition=c, body=b
}
"""


def test_reduction_and_transpose_in_the_body():
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    _check(REDUCE_BODY, x)


CHUNKED = """HloModule chunked
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
c {
  s = (s32[], s32[262144], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], s32[262144], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s32[262144] get-tuple-element(s), index=1
  acc = s32[] get-tuple-element(s), index=2
  z = s32[] constant(0)
  r = s32[] reduce(x, z), dimensions={0}, to_apply=add
  acc1 = s32[] add(acc, r)
  acc2 = s32[] add(acc1, i)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], s32[262144], s32[]) tuple(i1, x, acc2)
}
ENTRY e {
  x = s32[262144] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], s32[262144], s32[]) tuple(zero, x, zero)
  ROOT r = (s32[], s32[262144], s32[]) while(init), condition=c, body=b
}
"""


def test_chunked_reduction_on_one_thread(monkeypatch):
    """With one thread a chunked reduction (partials in scratch, a second kernel combining
    them) runs inside the compiled loop; with two the loop is compiled too and native code
    splits the kernel's chunks over the worker pool (workers.py)."""
    x = np.random.default_rng(4).integers(-1000, 1000, 262144).astype(np.int32)
    be.clear_cache()
    try:
        if buffers.THREADS >= 2:
            got = _check(CHUNKED, x)
            assert int(got[2]) == 3 * int(x.sum(dtype=np.int64)) + 3
            be.clear_cache()
        monkeypatch.setattr(buffers, "THREADS", 1)
        module = parse_hlo_module(CHUNKED)
        loop = [s for s in be.compile_module(module).entry.steps
                if isinstance(s, cf.CompiledWhileStep)]
        assert len(loop) == 1
        kernels = [s for s in loop[0].body.steps if isinstance(s, be.KernelStep)]
        assert any(k.spec.then is not None and k.spec.scratch for k in kernels)
        got = _check(CHUNKED, x)
        assert int(got[2]) == 3 * int(x.sum(dtype=np.int64)) + 3
    finally:
        be.clear_cache()


# -- loops whose bodies call out (executor) and loops that stay in Python ------------------


def test_big_body_calls_out_to_both_cores():
    """A body whose kernel is split over both cores is compiled; native code calls the
    worker pool for it (no call out)."""
    n = buffers.PARALLEL_MIN_WORK * 2
    text = (f"HloModule big\nc {{\n s = (s32[], f32[{n}]) parameter(0)\n"
            " i = s32[] get-tuple-element(s), index=0\n k = s32[] constant(3)\n"
            " ROOT lt = pred[] compare(i, k), direction=LT\n}\n"
            f"b {{\n s = (s32[], f32[{n}]) parameter(0)\n"
            " i = s32[] get-tuple-element(s), index=0\n"
            f" x = f32[{n}] get-tuple-element(s), index=1\n"
            f" x1 = f32[{n}] add(x, x)\n one = s32[] constant(1)\n i1 = s32[] add(i, one)\n"
            f" ROOT t = (s32[], f32[{n}]) tuple(i1, x1)\n}}\n"
            f"ENTRY e {{\n x = f32[{n}] parameter(0)\n zero = s32[] constant(0)\n"
            f" init = (s32[], f32[{n}]) tuple(zero, x)\n"
            f" ROOT r = (s32[], f32[{n}]) while(init), condition=c, body=b\n}}\n")
    x = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    got = _check(text, x)
    _same(got[1], x * np.float32(8))
    be.clear_cache()
    kernels = {tuple(s.spec.outputs[0].dimensions): s for s in _loop_kernels(text, ("body",))}
    assert sorted(kernels) == [(), (n,)]
    assert not isinstance(kernels[(n,)].fn, functools.partial)  # a call out runs its function
    assert isinstance(kernels[()].fn, functools.partial)  # the counter: inlined only


SORT_BODY = """HloModule sortbody
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT
}
c {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  nx = f32[8] negate(x)
  sx = f32[8] sort(nx), dimensions={0}, to_apply=lt
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[8]) tuple(i1, sx)
}
ENTRY e {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, x)
  ROOT r = (s32[], f32[8]) while(init), condition=c, body=b
}
"""


def test_sort_in_the_body_compiles_the_loop():
    """A sort is a native kernel (backends/cpu/sort.py): the loop compiles whole."""
    x = np.random.default_rng(7).standard_normal(8).astype(np.float32)
    got = _check(SORT_BODY, x, compiled=1, python=0)
    want = x
    for _ in range(3):
        want = np.sort(-want)
    _same(got[1], want)


TOKEN_STATE = """HloModule tokenstate
c {
  s = (s32[], token[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], token[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  t = token[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], token[]) tuple(i1, t)
}
ENTRY e {
  zero = s32[] constant(0)
  t = token[] after-all()
  init = (s32[], token[]) tuple(zero, t)
  w = (s32[], token[]) while(init), condition=c, body=b
  ROOT i = s32[] get-tuple-element(w), index=0
}
"""


def test_token_state_keeps_the_python_loop():
    assert int(_check(TOKEN_STATE, compiled=0, python=1)) == 4


# -- jax dumps --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fori_loop", "while_loop", "scan_reverse", "rng_threefry"])
def test_jax_fixture_loops(name):
    """jax programs with loops (fori_loop, while_loop, a reversed scan, threefry's rounds):
    compiled; equal to the Python loop over the same kernels bit for bit, to the
    interpreter (bit for bit for integers; float sums are reassociated by the reduction
    kernels) and to XLA's recorded outputs."""
    text = (FIXTURES / f"{name}.pre.hlo").read_text()
    data = load_npz(FIXTURES / f"{name}.npz")
    args = [data[f"arg{i}"] for i in range(sum(1 for k in data if k.startswith("arg")))]
    outs = [data[f"out{i}"] for i in range(sum(1 for k in data if k.startswith("out")))]
    compiled, python = _count(text)
    assert compiled >= 1 and python == 0
    module = parse_hlo_module(text)
    got = _leaves(Client(backend="cpu").compile(module)(*args))
    for g, p in zip(got, _leaves(_python_loop(text, *args))):
        _same(g, p)
    want = _leaves(evaluate(module, *args))
    assert len(got) == len(want) == len(outs)
    for g, w, o in zip(got, want, outs):
        if o.dtype.kind == "f":
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(np.asarray(g), o, rtol=1e-5, atol=1e-6)
        else:
            _same(g, w)
            assert np.array_equal(np.asarray(g), o)


@pytest.mark.parametrize("name", ["while_scalar", "while_vector"])
def test_bench_fori_loops_match_the_python_loop(name):
    """The benchmark's jax fori_loop dumps (tiny: 100 iterations): the compiled loop equals
    the Python loop over the same kernels bit for bit (f32 tanh is the kernels'
    approximation, so the interpreter is only close), and XLA-like accuracy."""
    text = (BENCH_HLO / f"{name}.tiny.hlo").read_text()
    module = parse_hlo_module(text)
    rng = np.random.default_rng(6)
    args = [(rng.random(tuple(p.shape.dimensions)) * 0.5 + 0.25).astype(np.float32)
            for p in module.entry.parameters]
    assert _count(text) == (1, 0)
    got = Client(backend="cpu").compile(module)(*args)
    _same(got, _python_loop(text, *args))
    np.testing.assert_allclose(got, evaluate(module, *args), rtol=1e-5)


# -- pieces -----------------------------------------------------------------------------------


def test_results_survive_the_next_call():
    exe = Client(backend="cpu").compile(parse_hlo_module(FORI))
    x = np.ones(16, np.float32)
    first = exe(x, x)
    keep = [np.array(v, copy=True) for v in first]
    exe(x * 2, x * 3)
    for a, b in zip(first, keep):
        _same(a, b)


def _offsets(arena, handles) -> list:
    arena.finish()
    return [arena._offsets[h].constant for h in handles]


def test_arena_best_fit_and_coalescing():
    # emission-order best fit (the assignment kept when global packing does no better)
    arena = native._Arena()
    a, _ = arena.alloc(10)
    b, _ = arena.alloc(100)
    c, _ = arena.alloc(64)
    assert [arena._online[k] for k in (a, b, c)] == [0, 64, 192]
    arena.free(b)
    d, _ = arena.alloc(64)
    assert arena._online[d] == 64  # fits inside the freed range
    arena.free(a)
    arena.free(d)
    e, _ = arena.alloc(128)
    assert arena._online[e] == 0  # coalesced [0, 128)
    arena.free(c)
    f, _ = arena.alloc(300)
    assert arena._online[f] == 128  # grows from the free tail
    assert arena._online_size == 128 + 320
    wide, _ = arena.alloc(256)
    arena.alloc(64)
    narrow, _ = arena.alloc(128)
    arena.alloc(64)
    arena.free(wide)
    arena.free(narrow)
    g, _ = arena.alloc(100)
    assert arena._online[g] == arena._online[narrow]  # the smallest free range that holds it


def test_arena_packs_what_emission_order_fragments():
    # a small value takes the start of a dead large one; a larger value alive with it then
    # cannot use the rest: emission-order best fit needs 3 large slots' worth, the live
    # bytes never exceed 2 + a bit
    big = 1 << 20
    arena = native._Arena()
    a, _ = arena.alloc(big)
    b, _ = arena.alloc(big)
    arena.free(a)
    small, _ = arena.alloc(4096)
    c, _ = arena.alloc(big + 4096)
    arena.free(small)
    arena.free(b)
    arena.free(c)
    assert arena._online_size == 3 * big + 4096
    assert arena.max_live == 2 * big + 8192
    assert arena.size == arena.max_live
    offs = _offsets(arena, [a, b, small, c])
    sizes = [big, big, 4096, big + 4096]
    live = [(0, 2), (1, 6), (3, 5), (4, 7)]  # [alloc, free) events
    for i in range(4):
        for j in range(i):
            if live[i][0] < live[j][1] and live[j][0] < live[i][1]:
                assert offs[i] + sizes[i] <= offs[j] or offs[j] + sizes[j] <= offs[i]


def test_arena_random_live_ranges_never_overlap_and_pack_tightly():
    rng = np.random.default_rng(7)
    for trial in range(40):
        arena = native._Arena()
        alive, events, sizes = [], [], {}
        t = 0
        for _ in range(int(rng.integers(5, 60))):
            if alive and rng.random() < 0.45:
                k = alive.pop(int(rng.integers(len(alive))))
                arena.free(k)
                events[k][1] = t
            else:
                n = int(rng.choice([64, 200, 4096, 65536, 1 << 20])) * int(rng.integers(1, 4))
                k, _ = arena.alloc(n)
                sizes[k] = native._aligned(n)
                alive.append(k)
                events.append([t, 1 << 30])
            t += 1
        offs = _offsets(arena, list(sizes))
        for i in sizes:
            assert offs[i] % native.ALIGN == 0 and offs[i] + sizes[i] <= arena.size
            for j in sizes:
                if j < i and events[i][0] < events[j][1] and events[j][0] < events[i][1]:
                    assert offs[i] + sizes[i] <= offs[j] or offs[j] + sizes[j] <= offs[i]
        assert arena.max_live <= arena.size <= arena._online_size
        # the slack over the live bytes stays bounded (decreasing-size best fit)
        assert arena.size <= arena.max_live * 5 // 4 + (1 << 20), trial


def test_double_buffered_loop_is_emitted_once(monkeypatch):
    """The double-buffered leaves' two slots swap roles through phis of the loop header:
    the condition and body are emitted once (not a copy of the loop per parity)."""
    from xlapy.backends.cpu import jit

    texts = []
    compile_ir = jit.Jit.compile

    def keep(self, irmod, **kw):
        texts.append(str(irmod))
        return compile_ir(self, irmod, **kw)

    monkeypatch.setattr(jit.Jit, "compile", keep)
    module = parse_hlo_module(DOUBLE.replace("LIMIT", "3"))
    loop = [s for s in be.compile_module(module).entry.steps
            if isinstance(s, cf.CompiledWhileStep)]
    assert loop[0].swapped == [1, 2]
    text = "\n".join(texts)
    assert re.search(r"^cond0:", text, re.M) and re.search(r"^body0:", text, re.M)
    assert not re.search(r"^(cond|body|done)1:", text, re.M)
    assert '%"state1" = phi' in text and '%"next2" = phi' in text
