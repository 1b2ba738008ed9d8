"""Variadic reduces as jax emits them for argmax/argmin (a reduce over (values, iota) whose
reducer keeps the better value and the lower index on ties, NaN winning for floats) compiled
by the reduction emitter, against the interpreter bit for bit: every element type with NaNs,
signed zeros and ties; rows, columns, several dimensions, odd sizes; as jax fuses them (the
iota generated inside the reduction's input fusion); inside while loops."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_diff import FLOATS, TYPES, run_both, same_bits, seed, shape_text, step_kinds, values


def _reducer(t, direction):
    nan = ("  ne = pred[] compare(a, a), direction=NE\n  better = pred[] or(cmp, ne)\n"
           if t in FLOATS else "  better = pred[] and(cmp, cmp)\n")
    return (f"arg {{\n  a = {t}[] parameter(0)\n  i = s32[] parameter(1)\n"
            f"  b = {t}[] parameter(2)\n  j = s32[] parameter(3)\n"
            f"  cmp = pred[] compare(a, b), direction={direction}\n{nan}"
            f"  v = {t}[] select(better, a, b)\n"
            f"  eq = pred[] compare(a, b), direction=EQ\n"
            f"  lt = pred[] compare(i, j), direction=LT\n"
            f"  tie = pred[] and(eq, lt)\n  take = pred[] or(better, tie)\n"
            f"  k = s32[] select(take, i, j)\n"
            f"  ROOT r = ({t}[], s32[]) tuple(v, k)\n}}")


def _init(t, direction):
    if t in FLOATS:
        return "-inf" if direction == "GT" else "inf"
    if t == "pred":
        return "false" if direction == "GT" else "true"
    if t == "u32":
        return "0" if direction == "GT" else "4294967295"
    return "-2147483648" if direction == "GT" else "2147483647"


def _argmax_text(t, dims, red, direction="GT"):
    out = [d for k, d in enumerate(dims) if k not in red]
    axis = red[0]
    return (f"HloModule m\n{_reducer(t, direction)}\nENTRY e {{\n"
            f"  x = {shape_text(t, dims)} parameter(0)\n"
            f"  io = {shape_text('s32', dims)} iota(), iota_dimension={axis}\n"
            f"  z = {t}[] constant({_init(t, direction)})\n  zi = s32[] constant(0)\n"
            f"  r = ({shape_text(t, out)}, {shape_text('s32', out)}) reduce(x, io, z, zi), "
            f"dimensions={{{','.join(map(str, red))}}}, to_apply=arg\n"
            f"  ROOT k = {shape_text('s32', out)} get-tuple-element(r), index=1\n}}\n")


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("dims,red", [((7, 301), (1,)), ((301, 7), (0,)), ((3, 33, 5), (1,)),
                                      ((1, 1), (1,)), ((129,), (0,))])
def test_argmax_argmin_every_type(t, dims, red):
    rng = np.random.default_rng(seed((t, dims)))
    x = values(t, dims, rng)
    for direction in ("GT", "LT"):
        text = _argmax_text(t, dims, red, direction)
        got, want, _ = run_both(text, x)
        same_bits(got, want)
        assert step_kinds(text, "reduce") == ["KernelStep"]


def test_all_nan_and_ties():
    x = np.full((4, 40), np.nan, np.float32)
    x[1] = 3.0
    x[2, 5:] = -np.inf
    x[3, 7] = -0.0
    x[3, 9] = 0.0
    for direction in ("GT", "LT"):
        got, want, _ = run_both(_argmax_text("f32", (4, 40), (1,), direction), x)
        same_bits(got, want)


def test_argmax_inside_a_while_loop():
    text = f"""HloModule m
{_reducer("f32", "GT")}
cond {{
  s = (s32[], f32[5,17]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], f32[5,17]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[5,17] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  io = s32[5,17] iota(), iota_dimension=1
  z = f32[] constant(-inf)
  zi = s32[] constant(0)
  r = (f32[5], s32[5]) reduce(x, io, z, zi), dimensions={{1}}, to_apply=arg
  k = s32[5] get-tuple-element(r), index=1
  kf = f32[5] convert(k)
  kb = f32[5,17] broadcast(kf), dimensions={{0}}
  y = f32[5,17] subtract(x, kb)
  ROOT t = (s32[], f32[5,17]) tuple(j, y)
}}
ENTRY e {{
  x = f32[5,17] parameter(0)
  zero = s32[] constant(0)
  s = (s32[], f32[5,17]) tuple(zero, x)
  w = (s32[], f32[5,17]) while(s), condition=cond, body=body
  ROOT r = f32[5,17] get-tuple-element(w), index=1
}}
"""
    x = values("f32", (5, 17), np.random.default_rng(37))
    got, want, ran = run_both(text, x)
    same_bits(got, want)
    assert "InterpretStep" not in [type(s).__name__ for s in ran]
