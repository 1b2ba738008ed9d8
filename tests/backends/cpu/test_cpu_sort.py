"""The native sort (xlapy.backends.cpu.sort.emit_sort) against the interpreter, bit for bit:
every element type with NaNs of both signs, signed zeros and ties; one and several operands;
comparators the library's key path matches and ones it does not (compiled only here); FLOAT
comparisons of NaNs (no strict weak order: the merge sort's order); sort dimensions first,
middle and last; odd sizes; unstable sorts; sorts inside while loops; results the caller
holds are not overwritten by later calls."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_diff import TYPES, bits, run_both, same_bits, seed, shape_text, step_kinds, values

from xlapy.backends.cpu import sort as native_sort
from xlapy.interpreter.evaluator import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client


def _sort_text(types, dims, dim, comparator, stable=True):
    params = "\n".join(f"  p{k} = {shape_text(t, dims)} parameter({k})"
                       for k, t in enumerate(types))
    shape = shape_text(types[0], dims) if len(types) == 1 else \
        "(" + ", ".join(shape_text(t, dims) for t in types) + ")"
    ops = ", ".join(f"p{k}" for k in range(len(types)))
    return (f"HloModule m\n{comparator}\nENTRY e {{\n{params}\n"
            f"  ROOT s = {shape} sort({ops}), dimensions={{{dim}}}, "
            f"is_stable={'true' if stable else 'false'}, to_apply=cmp\n}}\n")


def _cmp_params(types):
    return "\n".join(f"  a{k} = {t}[] parameter({2 * k})\n  b{k} = {t}[] parameter({2 * k + 1})"
                     for k, t in enumerate(types))


def plain(types, direction="LT", ctype=None, key=0):
    t = f", type={ctype}" if ctype else ""
    return (f"cmp {{\n{_cmp_params(types)}\n"
            f"  ROOT r = pred[] compare(a{key}, b{key}), direction={direction}{t}\n}}")


def _type(t):
    return ", type=TOTALORDER" if t in ("f32", "f64", "bf16") else ""


def lexicographic(types):
    """Operand 0 ascending (TOTALORDER for floats), ties by operand 1 descending."""
    return (f"cmp {{\n{_cmp_params(types)}\n"
            f"  lt0 = pred[] compare(a0, b0), direction=LT{_type(types[0])}\n"
            f"  eq0 = pred[] compare(a0, b0), direction=EQ{_type(types[0])}\n"
            f"  gt1 = pred[] compare(a1, b1), direction=GT{_type(types[1])}\n"
            f"  tie = pred[] and(eq0, gt1)\n"
            f"  ROOT r = pred[] or(lt0, tie)\n}}")


def by_abs(t):
    """|a| < |b| (not a pattern the library matches: compiled only natively)."""
    return (f"cmp {{\n{_cmp_params([t])}\n"
            f"  x = {t}[] abs(a0)\n  y = {t}[] abs(b0)\n"
            f"  ROOT r = pred[] compare(x, y), direction=LT\n}}")


def no_nan(x):
    """``x`` with its NaNs made 1.5 (comparators not in TOTALORDER order NaNs in no strict
    weak order; test_float_comparison_of_nans covers those)."""
    x = x.copy()
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        x[np.isnan(x.astype(np.float64))] = 1.5
    return x


def _check(text, *args, kinds=("KernelStep", "KeyedSortStep")):
    got, want, _ = run_both(text, *args)
    same_bits(got, want)
    assert step_kinds(text, "sort") and all(k in kinds for k in step_kinds(text, "sort")), \
        step_kinds(text, "sort")


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("dims,dim", [((37,), 0), ((5, 33), 1), ((33, 5), 0), ((3, 19, 4), 1),
                                      ((2, 1), 1), ((4, 0), 1)])
def test_one_operand_every_type(t, dims, dim):
    rng = np.random.default_rng(seed((t, dims, dim)))
    x = values(t, dims, rng)
    ctype = "TOTALORDER" if t in ("f32", "f64", "bf16") else None
    for direction in ("LT", "GT"):
        _check(_sort_text([t], dims, dim, plain([t], direction, ctype)), x)


@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
def test_float_comparison_of_nans(t):
    """A FLOAT LT with NaNs is no strict weak order: the radix keys do not apply to a row with
    a NaN and the kernel's merge sort runs it (rows without NaNs: the radix sort, from 128
    elements). Its order is then the merge sort's (as XLA:CPU's is std::stable_sort's)
    and always a permutation of the row; the interpreter's order of such a row is its own
    algorithm's (a permutation too), so rows with NaNs are checked to be permutations and rows
    without equal the interpreter's."""
    rng = np.random.default_rng(3)
    for n in (7, 40, 301):
        x = values(t, (4, n), rng)
        x[3] = values(t, (n,), rng, specials=False)
        x[:3, n // 2] = np.nan  # every other row has a NaN
        text = _sort_text([t], (4, n), 1, plain([t], "LT"))
        got = Client(backend="cpu").compile(parse_hlo_module(text))(x)
        assert step_kinds(text, "sort") == ["KernelStep"]
        for row_x, row_got in zip(x, got):
            width = f"u{row_x.itemsize}"
            key = np.sort(bits(row_x).view(width).reshape(-1))
            assert np.array_equal(np.sort(bits(row_got).view(width).reshape(-1)), key)
        clean, _, _ = run_both(_sort_text([t], (1, n), 1, plain([t], "LT")), x[3:])
        same_bits(got[3:], evaluate(parse_hlo_module(
            _sort_text([t], (1, n), 1, plain([t], "LT"))), x[3:]))
        same_bits(clean, got[3:])


@pytest.mark.parametrize("t", TYPES)
def test_key_value_pairs_and_lexicographic(t):
    rng = np.random.default_rng(5)
    dims = (6, 123)
    key = values(t, dims, rng)
    val = values("s32", dims, rng, spread=3)
    _check(_sort_text([t, "s32"], dims, 1, plain([t, "s32"], "LT",
                                                 "TOTALORDER" if t in ("f32", "f64", "bf16")
                                                 else None)), key, val)
    iota = np.broadcast_to(np.arange(dims[1], dtype=np.int32), dims).copy()
    _check(_sort_text([t, "s32", "s32"], dims, 1,
                      lexicographic([t, "s32", "s32"])), key, val, iota)


def by_sum(t):
    """a0 + a1 < b0 + b1: a key of two operands (the library's pattern match takes keys of
    one operand only: compiled natively)."""
    return (f"cmp {{\n{_cmp_params([t, t])}\n"
            f"  x = {t}[] add(a0, a1)\n  y = {t}[] add(b0, b1)\n"
            f"  ROOT r = pred[] compare(x, y), direction=LT{_type(t)}\n}}")


@pytest.mark.parametrize("t", TYPES)
def test_comparator_the_library_does_not_match_compiles(t):
    rng = np.random.default_rng(7)
    for dims, dim in (((4, 257), 1), ((300, 3), 0), ((2, 33, 3), 1)):
        x, y = no_nan(values(t, dims, rng)), no_nan(values(t, dims, rng))
        text = _sort_text([t, t], dims, dim, by_sum(t))
        _check(text, x, y, kinds=("KernelStep",))


def test_unstable_sorts():
    rng = np.random.default_rng(11)
    # integers: equivalent elements are identical, any order of them is the same result
    x = values("s32", (3, 200), rng)
    _check(_sort_text(["s32"], (3, 200), 1, plain(["s32"]), stable=False), x,
           kinds=("KernelStep",))
    # rows of at most 16: std::sort insertion-sorts (stable), compiled as stable
    y = no_nan(values("f32", (9, 16), rng))
    y2 = no_nan(values("f32", (9, 16), rng))
    _check(_sort_text(["f32", "f32"], (9, 16), 1, by_sum("f32"), stable=False), y, y2,
           kinds=("KernelStep",))
    # longer rows with equivalent but different elements: std::sort's order, the library's
    # replay (not the native kernel)
    z = no_nan(values("f32", (2, 300), rng))
    text = _sort_text(["f32"], (2, 300), 1, by_abs("f32"), stable=False)
    assert native_sort.sort_support(parse_hlo_module(text).entry.root) is not None
    got, want, _ = run_both(text, z)
    same_bits(got, want)


def test_sort_inside_a_while_loop():
    text = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  x = f32[] abs(a)
  y = f32[] abs(b)
  ROOT r = pred[] compare(x, y), direction=GT
}
cond {
  s = (s32[], f32[3,21]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3,21]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[3,21] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  h = f32[] constant(-0.75)
  hb = f32[3,21] broadcast(h), dimensions={}
  y = f32[3,21] add(x, hb)
  z = f32[3,21] sort(y), dimensions={1}, is_stable=true, to_apply=cmp
  ROOT t = (s32[], f32[3,21]) tuple(j, z)
}
ENTRY e {
  x = f32[3,21] parameter(0)
  zero = s32[] constant(0)
  s = (s32[], f32[3,21]) tuple(zero, x)
  w = (s32[], f32[3,21]) while(s), condition=cond, body=body
  ROOT r = f32[3,21] get-tuple-element(w), index=1
}
"""
    x = no_nan(values("f32", (3, 21), np.random.default_rng(13)))
    got, want, ran = run_both(text, x)
    same_bits(got, want)
    assert "CompiledWhileStep" in [type(s).__name__ for s in ran]  # the sort runs natively


def test_results_held_by_the_caller_stay():
    text = _sort_text(["f32", "s32"], (4, 50), 1, """cmp {
  a0 = f32[] parameter(0)
  b0 = f32[] parameter(1)
  a1 = s32[] parameter(2)
  b1 = s32[] parameter(3)
  x = f32[] abs(a0)
  y = f32[] abs(b0)
  ROOT r = pred[] compare(x, y), direction=LT
}""")
    exe = Client(backend="cpu").compile(parse_hlo_module(text))
    rng = np.random.default_rng(17)
    a = (no_nan(values("f32", (4, 50), rng)), values("s32", (4, 50), rng))
    b = (no_nan(values("f32", (4, 50), rng)), values("s32", (4, 50), rng))
    first = exe(*a)
    kept = [np.array(v, copy=True) for v in first]
    exe(*b)
    same_bits(tuple(first), tuple(kept))


def test_complex_operands_by_their_real_part():
    text = _sort_text(["c64"], (3, 40), 1, """cmp {
  a0 = c64[] parameter(0)
  b0 = c64[] parameter(1)
  x = f32[] real(a0)
  y = f32[] real(b0)
  ROOT r = pred[] compare(x, y), direction=LT
}""")
    rng = np.random.default_rng(19)
    z = np.empty((3, 40), np.complex64)
    z.real = no_nan(values("f32", (3, 40), rng))
    z.imag = values("f32", (3, 40), rng)
    _check(text, z, kinds=("KernelStep",))


def test_unstable_reason():
    text = _sort_text(["f32"], (2, 300), 1, by_abs("f32"), stable=False)
    reason = native_sort.sort_support(parse_hlo_module(text).entry.root)
    assert "std::sort" in reason
