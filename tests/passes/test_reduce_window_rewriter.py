"""reduce-window-rewriter (XLA's ReduceWindowRewriter): cumulative reduce-windows longer than
16 become XLA:CPU's blocked tree of scans. The tree's shape against XLA:CPU's optimised module,
the match, and the numbers: an independent reference of the tree (plain Python, one
rounding per reducer application) against the interpreter and the CPU backend, bit for bit,
and both against outputs of real XLA:CPU (the cumulative_long jax fixture), which the
literal windows did not give (bf16 rows of 1000: 2,990 of 4,000 elements differed)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from pass_check import check

import xlapy
from xlapy.npz import load_npz
from xlapy.passes.reduce_window_rewriter import CPU_BASE_LENGTH, scan_window, tree_scan
from xlapy.runtime import Client

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "jax"
NP = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "s32": np.int32}


def _text(t, dims, dim, *, reverse=False, exclusive=False, op="add", init="0"):
    n = dims[dim]
    pad = n if exclusive else n - 1
    size = "x".join(str(n) if d == dim else "1" for d in range(len(dims)))
    pads = "x".join((f"0_{pad}" if reverse else f"{pad}_0") if d == dim else "0_0"
                    for d in range(len(dims)))
    out = [d + int(exclusive and k == dim) for k, d in enumerate(dims)]
    shape = ",".join(map(str, dims))
    return (f"HloModule m\nred {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
            f"  ROOT c = {t}[] {op}(a, b)\n}}\nENTRY e {{\n  x = {t}[{shape}] parameter(0)\n"
            f"  z = {t}[] constant({init})\n  ROOT r = {t}[{','.join(map(str, out))}] "
            f"reduce-window(x, z), window={{size={size} pad={pads}}}, to_apply=red\n}}\n")


# -- an independent reference of the tree -----------------------------------------------------


def _fold(init, seq, f):
    acc = init
    for v in seq:
        acc = f(acc, v)
    return acc


def _literal(xs, f, init, forward, exclusive):
    """The window of reduce-window itself: each output folds its window's elements in
    order from the init value (padding skipped)."""
    n = len(xs)
    if forward:
        return [_fold(init, xs[:k + (0 if exclusive else 1)], f) for k in range(n + exclusive)]
    return [_fold(init, xs[k:], f) for k in range(n)] + ([init] if exclusive else [])


def _tree(xs, f, init, forward, exclusive, b=CPU_BASE_LENGTH):
    """XLA's ReduceWindowRewriter on one row, step by step (the pass's docstring)."""
    n = len(xs)
    if n <= b:
        return _literal(xs, f, init, forward, exclusive)
    m = -(-n // b)
    padded = list(xs) + [init] * (m * b - n)
    outer = [_literal(padded[j * b:(j + 1) * b], f, init, forward, False) for j in range(m)]
    totals = [o[-1] if forward else o[0] for o in outer]
    inner = _tree(totals, f, init, forward, True, b)
    prefix = inner[:m] if forward else inner[1:]
    out = [f(v, prefix[j]) for j, block in enumerate(outer) for v in block][:n]
    if exclusive:
        out = [init] + out if forward else out + [init]
    return out


def _adder(t):
    """Addition of two ``t`` values rounded once to ``t`` (the narrow types through f32)."""
    ty = NP[t]
    return lambda a, b: ty(np.float32(a) + np.float32(b))


@pytest.mark.parametrize("t", ["bf16", "f32", "f16"])
@pytest.mark.parametrize("n", [17, 40, 300])
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_sums_are_the_tree_bit_for_bit(t, n, reverse, exclusive):
    rng = np.random.default_rng(n * 7 + reverse * 2 + exclusive)
    x = (rng.standard_normal((3, n)) * 5).astype(NP[t])
    f, init = _adder(t), NP[t](0)
    want = np.array([_tree(list(row), f, init, not reverse, exclusive) for row in x], NP[t])
    text = _text(t, (3, n), 1, reverse=reverse, exclusive=exclusive)
    for backend in ("interpreter", "cpu"):
        got = np.asarray(Client(backend=backend).compile(xlapy.parse_hlo_module(text))(x))
        assert got.view(np.uint8).tobytes() == want.view(np.uint8).tobytes(), backend
    literal = np.array([_literal(list(row), f, init, not reverse, exclusive) for row in x],
                       NP[t])
    if t == "bf16" and n == 300:  # the order shows: the literal window is another number
        assert literal.view(np.uint16).tobytes() != want.view(np.uint16).tobytes()


def test_a_scan_along_the_first_dimension():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((70, 4)) * 5).astype(ml_dtypes.bfloat16)
    f, init = _adder("bf16"), ml_dtypes.bfloat16(0)
    want = np.array([_tree(list(col), f, init, True, False) for col in x.T],
                    ml_dtypes.bfloat16).T
    text = _text("bf16", (70, 4), 0)
    for backend in ("interpreter", "cpu"):
        got = np.asarray(Client(backend=backend).compile(xlapy.parse_hlo_module(text))(x))
        assert got.view(np.uint16).tobytes() == want.view(np.uint16).tobytes(), backend


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_xla_cpu_outputs_bit_for_bit(backend):
    """jax's cumsum/cumprod/cummax/cummin of bf16, f16 and f32, forward, reverse and
    exclusive, along either dimension: the outputs real XLA:CPU gave."""
    z = load_npz(FIXTURES / "cumulative_long.npz")
    args = [z[f"arg{i}"] for i in range(5)]
    text = (FIXTURES / "cumulative_long.pre.hlo").read_text()
    got = Client(backend=backend).compile(xlapy.parse_hlo_module(text))(*args)
    assert len(got) == 7
    for i, g in enumerate(got):
        want = z[f"out{i}"]
        g = np.asarray(g)
        assert g.dtype == want.dtype and g.shape == want.shape
        assert g.view(np.uint8).tobytes() == want.view(np.uint8).tobytes(), f"out{i}"


# -- the rewrite --------------------------------------------------------------------------------


def _windows(module):
    return sorted((str(i.shape).split("{")[0], i.attrs["window"].to_text())
                  for c in module.computations for i in c.instructions
                  if i.opcode == "reduce-window")


def test_the_tree_xla_cpu_builds_for_1000():
    """XLA:CPU's module for jnp.cumsum(f32[4,1000], axis=1) has these three reduce-windows:
    [4,63,16] and [4,4,16] scans of 16, and an exclusive scan of the last 4 totals."""
    m = check(_text("f32", (4, 1000), 1), ["reduce-window-rewriter"], fixed_point=False)
    assert _windows(m) == [
        ("f32[4,4,16]", "size=1x1x16 pad=0_0x0_0x15_0"),
        ("f32[4,5]", "size=1x4 pad=0_0x4_0"),
        ("f32[4,63,16]", "size=1x1x16 pad=0_0x0_0x15_0"),
    ]
    assert {i.opcode for i in m.entry.instructions} >= {"pad", "reshape", "slice", "broadcast",
                                                       "map"}


def test_the_tree_keeps_the_scan_dimension_in_place():
    """XLA moves the scan dimension last (a transpose each way); splitting it where it is
    applies the reducer to the same values in the same order."""
    m = check(_text("f32", (40, 3), 0, reverse=True), ["reduce-window-rewriter"])
    assert _windows(m) == [("f32[3,16,3]", "size=1x16x1 pad=0_0x0_15x0_0"),
                           ("f32[4,3]", "size=3x1 pad=0_3x0_0")]
    assert not any(i.opcode == "transpose" for i in m.entry.instructions)


def test_what_is_rewritten():
    def form(text):
        return scan_window(xlapy.parse_hlo_module(text).entry.root)

    assert form(_text("f32", (3, 17), 1)) == (1, True, False)
    assert form(_text("f32", (3, 17), 1, reverse=True, exclusive=True)) == (1, False, True)
    assert form(_text("s32", (17,), 0, op="maximum")) == (0, True, False)
    assert form(_text("f32", (3, 16), 1)) is None  # not longer than the base length
    shorter = _text("f32", (3, 17), 1).replace("size=1x17", "size=1x16")
    assert form(shorter.replace("f32[3,17] reduce", "f32[3,18] reduce")) is None
    two = _text("f32", (17, 17), 1).replace("size=1x17 pad=0_0", "size=2x17 pad=1_0")
    assert form(two) is None
    strided = _text("f32", (3, 17), 1).replace("pad=0_0x16_0", "stride=1x2 pad=0_0x16_0")
    assert form(strided.replace("f32[3,17] reduce", "f32[3,9] reduce")) is None


def test_a_variadic_scan_combines_each_result_with_its_own_component():
    """A running (max, index) scan whose ties go to the later element: each result's map
    applies its own component of the reducer's tuple root to the block scans and the
    prefixes."""
    text = """HloModule m
latest_max {
  best = f32[] parameter(0)
  at = s32[] parameter(1)
  v = f32[] parameter(2)
  k = s32[] parameter(3)
  ge = pred[] compare(v, best), direction=GE
  new_best = f32[] select(ge, v, best)
  new_at = s32[] select(ge, k, at)
  ROOT pair = (f32[], s32[]) tuple(new_best, new_at)
}
ENTRY e {
  x = f32[2,70] parameter(0)
  io = s32[2,70] iota(), iota_dimension=1
  lowest = f32[] constant(-inf)
  none = s32[] constant(-1)
  ROOT r = (f32[2,70], s32[2,70]) reduce-window(x, io, lowest, none), window={size=1x70 pad=0_0x69_0}, to_apply=latest_max
}
"""
    m = check(text, ["reduce-window-rewriter"])
    maps = [i for i in m.entry.instructions if i.opcode == "map"]
    assert len(maps) == 2 and all(len(i.operands) == 4 for i in maps)
    assert [i.attrs["to_apply"].root.opcode for i in maps] == ["select", "select"]
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 3, (2, 70)).astype(np.float32)  # ties
    f = (lambda acc, v: v if v[0] >= acc[0] else acc)
    want = [_tree([(x[r, k], k) for k in range(70)], f, (-np.inf, -1), True, False)
            for r in range(2)]
    for backend in ("interpreter", "cpu"):
        vals, idx = Client(backend=backend).compile(xlapy.parse_hlo_module(text))(x)
        assert np.array_equal(vals, [[v for v, _ in row] for row in want]), backend
        assert np.array_equal(idx, [[k for _, k in row] for row in want]), backend


def test_empty_rows_and_the_interpreters_tree_is_built_once():
    text = _text("f32", (0, 40), 1)
    for backend in ("interpreter", "cpu"):
        got = Client(backend=backend).compile(xlapy.parse_hlo_module(text))(
            np.zeros((0, 40), np.float32))
        assert np.asarray(got).shape == (0, 40)
    rw = xlapy.parse_hlo_module(_text("f32", (2, 40), 1)).entry.root
    assert tree_scan(rw) is tree_scan(rw)
