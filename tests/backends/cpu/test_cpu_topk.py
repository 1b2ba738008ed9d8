"""Native top-k (xlapy.backends.cpu.sort.emit_topk) against the interpreter, bit for bit:
the ``topk`` instruction (jax's lax.top_k) with largest true and false, and XLA:CPU's ``TopK``
custom call; every element type with NaNs of both signs, signed zeros and ties (ties go to
the lower index); k from 1 to the whole row; inside while loops; results the caller holds
are not overwritten by later calls."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_diff import TYPES, run_both, same_bits, seed, shape_text, step_kinds, values

from xlapy.backends.cpu import sort as native_sort
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client


def _topk_text(t, dims, k, largest=True):
    out = tuple(dims[:-1]) + (k,)
    return (f"HloModule m\nENTRY e {{\n  x = {shape_text(t, dims)} parameter(0)\n"
            f"  ROOT r = ({shape_text(t, out)}, {shape_text('s32', out)}) topk(x), k={k}, "
            f"largest={'true' if largest else 'false'}\n}}\n")


def _custom_text(t, dims, k):
    out = tuple(dims[:-1]) + (k,)
    return (f"HloModule m\nENTRY e {{\n  x = {shape_text(t, dims)} parameter(0)\n"
            f"  ROOT r = ({shape_text(t, out)}, {shape_text('s32', out)}) custom-call(x), "
            f"custom_call_target=\"TopK\"\n}}\n")


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("dims,k", [((301,), 16), ((7, 97), 5), ((3, 4, 33), 33), ((5, 1), 1),
                                    ((2, 40), 0), ((0, 9), 3)])
def test_topk_every_type(t, dims, k):
    rng = np.random.default_rng(seed((t, dims, k)))
    x = values(t, dims, rng)
    for largest in (True, False):
        text = _topk_text(t, dims, k, largest)
        got, want, _ = run_both(text, x)
        same_bits(got, want)
        assert step_kinds(text, "topk") == ["KernelStep"]


@pytest.mark.parametrize("t", ["f32", "bf16", "s32", "u32"])
def test_topk_custom_call(t):
    rng = np.random.default_rng(23)
    x = values(t, (6, 129), rng)
    text = _custom_text(t, (6, 129), 9)
    got, want, _ = run_both(text, x)
    same_bits(got, want)
    assert step_kinds(text, "custom-call") == ["KernelStep"]


def test_topk_of_constant_rows_takes_the_lowest_indices():
    x = np.zeros((3, 50), np.float32)
    x[1, ::2] = -0.0  # -0 < +0 in the total order
    got, want, _ = run_both(_topk_text("f32", (3, 50), 7), x)
    same_bits(got, want)
    assert got[1][0].tolist() == list(range(7))
    assert got[1][1].tolist() == [1, 3, 5, 7, 9, 11, 13]


def test_topk_inside_a_while_loop():
    text = """HloModule m
cond {
  s = (s32[], f32[4,30]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,30]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4,30] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  t = (f32[4,6], s32[4,6]) topk(x), k=6, largest=true
  v = f32[4,6] get-tuple-element(t), index=0
  p = f32[4,24] slice(x), slice={[0:4], [6:30]}
  y = f32[4,30] concatenate(p, v), dimensions={1}
  ROOT r = (s32[], f32[4,30]) tuple(j, y)
}
ENTRY e {
  x = f32[4,30] parameter(0)
  zero = s32[] constant(0)
  s = (s32[], f32[4,30]) tuple(zero, x)
  w = (s32[], f32[4,30]) while(s), condition=cond, body=body
  ROOT r = f32[4,30] get-tuple-element(w), index=1
}
"""
    x = values("f32", (4, 30), np.random.default_rng(29))
    got, want, _ = run_both(text, x)
    same_bits(got, want)


def test_results_held_by_the_caller_stay():
    exe = Client(backend="cpu").compile(parse_hlo_module(_topk_text("f32", (4, 64), 8)))
    rng = np.random.default_rng(31)
    first = exe(values("f32", (4, 64), rng))
    kept = [np.array(v, copy=True) for v in first]
    exe(values("f32", (4, 64), rng))
    same_bits(tuple(first), tuple(kept))


def test_what_is_not_compiled_says_why():
    text = _topk_text("f32", (4, 64), 8)
    assert native_sort.topk_form(parse_hlo_module(text).entry.root) == (8, True)
    c = """HloModule m
ENTRY e {
  x = c64[4,8] parameter(0)
  ROOT r = (c64[4,2], s32[4,2]) custom-call(x), custom_call_target="TopK"
}
"""
    assert native_sort.topk_form(parse_hlo_module(c).entry.root) == \
        "complex values have no order"
