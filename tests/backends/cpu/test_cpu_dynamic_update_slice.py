"""Compiled dynamic-update-slice (xlapy.backends.cpu.gather_scatter: in place, work = the
update) against the interpreter, bit for bit: starts clamped to [0, dim - size] (negative,
past the end, the extremes of every index type), every element type, odd shapes, updates
split over threads; loops of updates into a big buffer run as one native loop writing the
buffer in place (the whole-buffer copy per update is gone), and neither the caller's buffer
nor a result the caller holds is ever written."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ops"))  # the interpreter's op tests
from indexing_kernel_helpers import TYPES, check, compiled_whiles, run_cpu, steps_of
from movement_eval_helpers import ALL_TYPES, np_dtype, sample


def _text(t, odims, udims, it="s32"):
    starts = "\n".join(f"  start{d} = {it}[] parameter({2 + d})" for d in range(len(odims)))
    names = ", ".join(f"start{d}" for d in range(len(odims)))
    o = ",".join(map(str, odims))
    u = ",".join(map(str, udims))
    return f"""HloModule m
ENTRY e {{
  x = {t}[{o}] parameter(0)
  u = {t}[{u}] parameter(1)
{starts}
  ROOT r = {t}[{o}] dynamic-update-slice(x, u{", " if names else ""}{names})
}}"""


def _dus(x, u, starts, t="f32", it="s32"):
    text = _text(t, x.shape, u.shape, it)
    args = [np.array(s).astype(np_dtype(it)) for s in starts]
    return check(text, x, u, *args, opcode="dynamic-update-slice")


@pytest.mark.parametrize("seed", range(16))
def test_random_shapes_and_starts(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(0, 4))
    odims = [int(s) for s in rng.integers(1, 7, rank)]
    udims = [int(rng.integers(0, n + 1)) for n in odims]
    x = rng.standard_normal(odims).astype(np.float32)
    u = rng.standard_normal(udims).astype(np.float32)
    starts = [int(rng.integers(-3, n + 3)) for n in odims]
    got = _dus(x, u, starts)
    want = x.copy()
    if u.size:
        c = [min(max(s, 0), n - m) for s, n, m in zip(starts, odims, udims)]
        want[tuple(slice(a, a + m) for a, m in zip(c, udims))] = u
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("it", ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"])
def test_index_types_and_extremes(it):
    info = np.iinfo(np_dtype(it))
    x = np.zeros((9, 5), np.float32)
    u = np.ones((2, 3), np.float32)
    for starts in ((info.max, info.min), (info.min, info.max), (3, 1)):
        _dus(x, u, starts, it=it)


@pytest.mark.parametrize("t", sorted(set(ALL_TYPES) | set(TYPES)))
def test_every_element_type(t):
    _dus(sample(t, (5, 7)), sample(t, (2, 3), offset=11), (4, -1), t=t)


def test_large_update_split_over_threads():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1000, 300)).astype(np.float32)
    u = rng.standard_normal((701, 257)).astype(np.float32)
    (step,) = steps_of(_text("f32", x.shape, u.shape), "dynamic-update-slice")
    assert step.spec.in_place == ((0, 0),) and step.spec.domain == 701  # the update's rows
    _dus(x, u, (500, 17))


LOOP = """HloModule m

cond {
  s = (s32[], f32[1048576], f32[1000]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(1000)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[1048576], f32[1000]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  buf = f32[1048576] get-tuple-element(s), index=1
  row = f32[1000] get-tuple-element(s), index=2
  fi = f32[] convert(i)
  b = f32[1000] broadcast(fi), dimensions={}
  upd = f32[1000] multiply(row, b)
  k = s32[] constant(1000)
  start = s32[] multiply(i, k)
  new = f32[1048576] dynamic-update-slice(buf, upd, start)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[1048576], f32[1000]) tuple(i2, new, row)
}

ENTRY e {
  buf = f32[1048576] parameter(0)
  row = f32[1000] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[1048576], f32[1000]) tuple(zero, buf, row)
  w = (s32[], f32[1048576], f32[1000]) while(init), condition=cond, body=body
  ROOT r = f32[1048576] get-tuple-element(w), index=1
}
"""


def test_a_loop_of_updates_into_a_big_buffer_is_native_and_in_place():
    # The 2,563x row: the update kernel's work is the row, so the loop compiles;
    # the buffer is written in place: it lives in the loop's result buffer the whole loop
    # (the workspace holds no copy of it).
    (loop,) = compiled_whiles(LOOP)
    assert loop.resident == [1] and loop.ws_bytes < 4 * 1048576
    rng = np.random.default_rng(2)
    buf = rng.standard_normal(1048576).astype(np.float32)
    row = rng.standard_normal(1000).astype(np.float32)
    kept = buf.copy()
    got = check(LOOP, buf, row, opcode="dynamic-update-slice")
    np.testing.assert_array_equal(buf, kept)  # the caller's buffer is not written
    want = buf.copy()
    for i in range(1000):
        want[i * 1000:(i + 1) * 1000] = row * np.float32(i)
    np.testing.assert_array_equal(got, want)


def test_an_update_read_after_the_buffer_is_written_is_copied_first():
    # The old buffer is read after the update (a live operand): not written in place.
    text = LOOP.replace(
        "  ROOT t = (s32[], f32[1048576], f32[1000]) tuple(i2, new, row)",
        "  old = f32[1000] slice(buf), slice={[0:1000]}\n"
        "  row2 = f32[1000] add(row, old)\n"
        "  ROOT t = (s32[], f32[1048576], f32[1000]) tuple(i2, new, row2)")
    text = text.replace("constant(1000)\n  ROOT lt", "constant(7)\n  ROOT lt")
    (loop,) = compiled_whiles(text)
    assert loop.ws_bytes >= 4 * 1048576  # a second buffer in the workspace: the copy
    rng = np.random.default_rng(3)
    args = (rng.standard_normal(1048576).astype(np.float32),
            rng.standard_normal(1000).astype(np.float32))
    check(text, *args, opcode="dynamic-update-slice")


def test_held_results_are_never_overwritten():
    text = _text("f32", (300, 200), (10, 200))
    x = np.zeros((300, 200), np.float32)
    u = np.ones((10, 200), np.float32)
    first = run_cpu(text, x, u, np.int32(5), np.int32(0))
    kept = np.array(first, copy=True)
    second = run_cpu(text, first, u * 2, np.int32(50), np.int32(0))
    np.testing.assert_array_equal(first, kept)
    assert not x.any()
    assert second[55, 0] == 2 and second[5, 0] == 1


def test_non_default_layouts():
    text = _text("f32", (5, 7), (2, 3)).replace("f32[5,7] parameter(0)",
                                                "f32[5,7]{0,1} parameter(0)")
    text = text.replace("ROOT r = f32[5,7] dynamic", "ROOT r = f32[5,7]{0,1} dynamic")
    check(text, sample("f32", (5, 7)), sample("f32", (2, 3), offset=9), np.int32(2),
          np.int32(5), opcode="dynamic-update-slice")
