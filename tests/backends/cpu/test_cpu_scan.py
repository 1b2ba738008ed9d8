"""Cumulative reduce-windows (jnp.cumsum/cumprod/cummax/cummin and their reverse and
exclusive forms) on the CPU backend: the reduce-window-rewriter's tree of scans of at most
16 (XLA:CPU's) with the forward ones as O(n) prefix scans (xlapy.backends.cpu.scan), against
the interpreter (which evaluates the same tree), bit for bit for every type and reducer.
Forward scans are also checked bit for bit against the literal reduce-window kernel (same
order of the elements), for any reducer, variadic ones included. Scan dimension first,
middle, last; odd sizes; fused producers; inside while loops; reverse scans are not prefix
scans (the literal window folds from each output's own position)."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_diff import FLOATS, TYPES, run_both, same_bits, seed, shape_text, step_kinds, values

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import scan
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

OPS = {"f32": ("add", "multiply", "maximum", "minimum"), "f64": ("add", "maximum"),
       "bf16": ("add", "maximum", "minimum"), "s32": ("add", "multiply", "maximum", "minimum",
                                                      "and", "or"),
       "u32": ("add", "maximum", "or"), "pred": ("and", "or", "maximum")}
INIT = {"add": "0", "multiply": "1", "maximum": "-inf", "minimum": "inf", "and": "-1",
        "or": "0"}


def _init(t, op):
    if t == "pred":
        return "true" if op in ("and", "minimum") else "false"
    v = INIT[op]
    if t in FLOATS:
        return v
    if op == "maximum":
        return "0" if t == "u32" else "-2147483648"
    if op == "minimum":
        return "4294967295" if t == "u32" else "2147483647"
    if op == "and":
        return "4294967295" if t == "u32" else "-1"
    return v


def _window(dims, dim, reverse, exclusive):
    n = dims[dim]
    pad = n if exclusive else n - 1
    size = "x".join(str(n) if d == dim else "1" for d in range(len(dims)))
    pads = "x".join((f"0_{pad}" if reverse else f"{pad}_0") if d == dim else "0_0"
                    for d in range(len(dims)))
    return f"window={{size={size} pad={pads}}}"


def _scan_text(t, op, dims, dim, reverse=False, exclusive=False, producer=False):
    body = f"  y = {shape_text(t, dims)} negate(x)\n" if producer else ""
    src = "y" if producer else "x"
    out = tuple(d + int(exclusive and k == dim) for k, d in enumerate(dims))
    return (f"HloModule m\nred {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
            f"  ROOT c = {t}[] {op}(a, b)\n}}\nENTRY e {{\n"
            f"  x = {shape_text(t, dims)} parameter(0)\n{body}"
            f"  z = {t}[] constant({_init(t, op)})\n"
            f"  ROOT r = {shape_text(t, out)} reduce-window({src}, z), "
            f"{_window(dims, dim, reverse, exclusive)}, to_apply=red\n}}\n")


def _literal(text, *args):
    """The result with the scan rewrite off: the reduce-window kernel, window by window."""
    saved = scan.scan_form
    be.clear_cache()
    try:
        scan.scan_form = lambda root: None
        return Client(backend="cpu").compile(parse_hlo_module(text))(*args)
    finally:
        scan.scan_form = saved
        be.clear_cache()


def _arg(t, dims, op, rng):
    if op == "multiply" and t in FLOATS:
        return (1 + rng.uniform(-0.05, 0.05, dims)).astype(np.float32 if t == "f32" else
                                                          np.float64)
    if op == "multiply":
        return rng.integers(-2, 3, dims).astype(np.int32)
    return values(t, dims, rng, specials=op in ("maximum", "minimum"))


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("dims,dim", [((5, 301), 1), ((77, 3), 0), ((2, 33, 5), 1), ((2,), 0)])
def test_cumulative_every_type(t, dims, dim):
    rng = np.random.default_rng(seed((t, dims, dim)))
    for op in OPS[t]:
        x = _arg(t, dims, op, rng)
        for reverse, exclusive in ((False, False), (True, False), (False, True), (True, True)):
            text = _scan_text(t, op, dims, dim, reverse, exclusive)
            root = parse_hlo_module(text).entry.root
            assert scan.scan_form(root) == (None if reverse else (dim, exclusive))
            got, want, _ = run_both(text, x)
            same_bits(got, want)
            if not reverse:
                same_bits(got, _literal(text, x))


def test_fused_producer_and_long_rows():
    rng = np.random.default_rng(41)
    x = values("f32", (4, 3001), rng, specials=False)
    text = _scan_text("f32", "add", (4, 3001), 1, producer=True)
    got, want, _ = run_both(text, x)
    same_bits(got, want)
    same_bits(got, _literal(text, x))
    kinds = step_kinds(text, "reduce-window")  # the tree's scans: 3001 -> 188 -> 12 blocks
    assert len(kinds) >= 2 and set(kinds) == {"KernelStep"}


def test_variadic_forward_scan_of_a_non_associative_reducer():
    """A running argmax-style scan (value, index): forward scans take any reducer; the blocks
    of the tree are scanned in the literal window's order."""
    text = """HloModule m
red {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(b, a), direction=GT
  v = f32[] select(gt, b, a)
  k = s32[] select(gt, j, i)
  ROOT r = (f32[], s32[]) tuple(v, k)
}
ENTRY e {
  x = f32[3,50] parameter(0)
  io = s32[3,50] iota(), iota_dimension=1
  z = f32[] constant(-inf)
  zi = s32[] constant(-1)
  ROOT r = (f32[3,50], s32[3,50]) reduce-window(x, io, z, zi), window={size=1x50 pad=0_0x49_0}, to_apply=red
}
"""
    root = parse_hlo_module(text).entry.root
    assert scan.scan_form(root) == (1, False)
    x = values("f32", (3, 50), np.random.default_rng(43))
    got, want, _ = run_both(text, x)
    same_bits(got, want)
    same_bits(got, _literal(text, x))


def test_what_is_not_a_scan():
    def form(window, op="add", t="f32", dims=(3, 8)):
        text = (f"HloModule m\nred {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
                f"  ROOT c = {t}[] {op}(a, b)\n}}\nENTRY e {{\n"
                f"  x = {shape_text(t, dims)} parameter(0)\n  z = {t}[] constant(0)\n"
                f"  ROOT r = {t}[3,8] reduce-window(x, z), window={{{window}}}, "
                f"to_apply=red\n}}\n")
        return scan.scan_form(parse_hlo_module(text).entry.root)

    assert form("size=1x8 pad=0_0x7_0") == (1, False)
    assert form("size=1x7 pad=0_0x6_0") is None  # a window shorter than the row
    assert form("size=2x8 pad=1_0x7_0") is None  # two non-trivial dimensions
    assert form("size=1x8 pad=0_0x7_0", op="subtract") == (1, False)
    assert form("size=1x8 pad=0_0x0_7") is None  # reverse: folds from each output upwards


def test_scan_inside_a_while_loop():
    text = """HloModule m
red {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}
cond {
  s = (s32[], s32[4,37]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[4,37]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s32[4,37] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  z = s32[] constant(0)
  y = s32[4,37] reduce-window(x, z), window={size=1x37 pad=0_0x36_0}, to_apply=red
  ROOT t = (s32[], s32[4,37]) tuple(j, y)
}
ENTRY e {
  x = s32[4,37] parameter(0)
  zero = s32[] constant(0)
  s = (s32[], s32[4,37]) tuple(zero, x)
  w = (s32[], s32[4,37]) while(s), condition=cond, body=body
  ROOT r = s32[4,37] get-tuple-element(w), index=1
}
"""
    x = values("s32", (4, 37), np.random.default_rng(47))
    got, want, ran = run_both(text, x)
    same_bits(got, want)
    assert "CompiledWhileStep" in [type(s).__name__ for s in ran]
