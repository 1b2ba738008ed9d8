"""The native sort's radix path (xlapy.backends.cpu.sort: rows of at least RADIX_MIN
elements whose comparator is a lexicographic chain of LT/GT comparisons) against the
interpreter, bit for bit (NaN payloads included): every float and integer type (f8s, f6s,
f4, sub-byte integers included; random bit patterns: every NaN payload, both zeros, denormals, infinities; and few distinct values:
ties), TOTALORDER and FLOAT comparisons, jax's canonicalising comparator, descending,
key-value pairs, argsort with an iota, jax's lexicographic num_keys=2 form, unstable integer
sorts, rows of odd sizes, sort dimensions first, middle and last, long rows (11-bit
digits), rows just below and from the threshold, and sorts inside a compiled while loop (one
reading and replacing the loop state). Under XLA:CPU's denormal flushing the
comparator itself sees denormals as zeros; there the radix path is checked against the
kernel's merge sort (the comparator run element by element)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from cpu_diff import run_both, seed, shape_text, step_kinds

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import sort as native_sort
from xlapy.interpreter.evaluator import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

NP = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16,
      "f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
      "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "s8": np.int8, "s16": np.int16,
      "s32": np.int32, "s64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
      "u64": np.uint64, "pred": np.bool_}
FLOATS = ("f32", "f64", "bf16", "f16", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz")
INTS = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "pred")
ALL = FLOATS + INTS
#: the other narrow floats (their encodings in the low bits of a byte) and sub-byte integers
NARROW = {"f8e4m3": (ml_dtypes.float8_e4m3, 8), "f8e3m4": (ml_dtypes.float8_e3m4, 8),
          "f8e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, 8),
          "f8e4m3b11fnuz": (ml_dtypes.float8_e4m3b11fnuz, 8),
          "f8e8m0fnu": (ml_dtypes.float8_e8m0fnu, 8), "f6e2m3fn": (ml_dtypes.float6_e2m3fn, 6),
          "f6e3m2fn": (ml_dtypes.float6_e3m2fn, 6), "f4e2m1fn": (ml_dtypes.float4_e2m1fn, 4),
          "s4": (ml_dtypes.int4, 4), "u4": (ml_dtypes.uint4, 4), "s2": (ml_dtypes.int2, 2),
          "u2": (ml_dtypes.uint2, 2)}


def _uint(t):
    return np.dtype(f"u{np.dtype(NP[t]).itemsize}")


def values(t, shape, rng, nan=True):
    """Random bit patterns and a few repeated values (ties), mixed; for floats specials
    of both signs among the repeated ones. ``nan=False``: NaNs replaced by 1."""
    shape = tuple(shape)
    size = int(np.prod(shape))
    if t == "pred":
        return rng.random(shape) < 0.5
    u = _uint(t)
    raw = rng.integers(0, np.iinfo(u).max, size, dtype=u, endpoint=True)
    if t in FLOATS:
        pool = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, 2.0], np.float64)
        pool = pool.astype(NP[t])
        pool_bits = list(pool.view(u))
        top = np.iinfo(u).max
        # NaNs with payloads, both signs, and the smallest denormals
        pool_bits += [u.type(top), u.type(top >> 1), u.type(1), u.type((top >> 1) + 2)]
        pool_bits = np.array(pool_bits, u)
    else:
        pool_bits = raw[:7].copy()
    picks = rng.random(size) < 0.5
    raw[picks] = pool_bits[rng.integers(0, len(pool_bits), int(picks.sum()))]
    x = raw.view(NP[t]).reshape(shape)
    if not nan and t in FLOATS:
        x = x.copy()
        with np.errstate(invalid="ignore"):
            x[np.isnan(x.astype(np.float64))] = NP[t](1)
    return x


def _same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), (g, w)


def _sort_text(types, dims, dim, comparator, stable=True):
    params = "\n".join(f"  p{k} = {shape_text(t, dims)} parameter({k})"
                       for k, t in enumerate(types))
    shape = shape_text(types[0], dims) if len(types) == 1 else \
        "(" + ", ".join(shape_text(t, dims) for t in types) + ")"
    ops = ", ".join(f"p{k}" for k in range(len(types)))
    return (f"HloModule m\n{comparator}\nENTRY e {{\n{params}\n"
            f"  ROOT s = {shape} sort({ops}), dimensions={{{dim}}}, "
            f"is_stable={'true' if stable else 'false'}, to_apply=cmp\n}}\n")


def _params(types):
    return "\n".join(f"  a{k} = {t}[] parameter({2 * k})\n  b{k} = {t}[] parameter({2 * k + 1})"
                     for k, t in enumerate(types))


def _is_float(t):
    return t in FLOATS or (t in NARROW and t[0] == "f")


def plain(types, direction="LT", total=True, key=0, swap=False):
    t = ", type=TOTALORDER" if total and _is_float(types[key]) else ""
    lhs, rhs = (f"b{key}", f"a{key}") if swap else (f"a{key}", f"b{key}")
    return (f"cmp {{\n{_params(types)}\n"
            f"  ROOT r = pred[] compare({lhs}, {rhs}), direction={direction}{t}\n}}")


def _canon(t, x, tag):
    """jax's canonicalisation of ``x`` (-0 -> 0, NaN -> nan) as in jnp.sort's comparator."""
    return (f"  ne.{tag} = pred[] compare({x}, {x}), direction=NE\n"
            f"  eq.{tag} = pred[] compare({x}, zero.{t}), direction=EQ\n"
            f"  s0.{tag} = {t}[] select(eq.{tag}, zero.{t}, {x})\n"
            f"  c.{tag} = {t}[] select(ne.{tag}, nan.{t}, s0.{tag})\n")


def jax_comparator(types, num_keys=1, direction="LT"):
    """jax's lax.sort comparator: floats canonicalised and compared in TOTALORDER, keys
    chained as or(lt0, and(eq0, lt1))."""
    lines = [_params(types)]
    for t in sorted({types[k] for k in range(num_keys) if _is_float(types[k])}):
        lines.append(f"  zero.{t} = {t}[] constant(0)\n  nan.{t} = {t}[] constant(nan)")
    keys = []
    for k in range(num_keys):
        t = types[k]
        if _is_float(t):
            lines.append(_canon(t, f"a{k}", f"a{k}") + _canon(t, f"b{k}", f"b{k}").rstrip())
            keys.append((f"c.a{k}", f"c.b{k}", ", type=TOTALORDER"))
        else:
            keys.append((f"a{k}", f"b{k}", ""))
    chain = None
    for k in reversed(range(num_keys)):
        x, y, ty = keys[k]
        lines.append(f"  lt{k} = pred[] compare({x}, {y}), direction={direction}{ty}")
        if chain is None:
            chain = f"lt{k}"
            continue
        lines.append(f"  eq{k} = pred[] compare({x}, {y}), direction=EQ{ty}")
        lines.append(f"  and{k} = pred[] and(eq{k}, {chain})")
        lines.append(f"  or{k} = pred[] or(lt{k}, and{k})")
        chain = f"or{k}"
    lines[-1] = "  ROOT " + lines[-1].lstrip()
    body = "\n".join(lines)
    return f"cmp {{\n{body}\n}}"


def _radix(text):
    instr = parse_hlo_module(text).entry.root
    assert native_sort.radix_keys(instr) is not None
    assert step_kinds(text, "sort") == ["KernelStep"]


def _check(text, *args):
    _radix(text)
    got, want, _ = run_both(text, *args)
    _same(got, want)


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("dims,dim", [((3, 300), 1), ((129,), 0), ((257, 3), 0),
                                      ((2, 131, 3), 1)])
def test_every_type_total_order(t, dims, dim):
    rng = np.random.default_rng(seed(("total", t, dims, dim)))
    x = values(t, dims, rng)
    for direction in ("LT", "GT"):
        _check(_sort_text([t], dims, dim, plain([t], direction)), x)
    _check(_sort_text([t], dims, dim, plain([t], "LT", swap=True)), x)  # descending


@pytest.mark.parametrize("t", FLOATS)
def test_jax_canonical_comparator(t):
    """jnp.sort's comparator: -0 and +0 tie (stable), every NaN ties with the others."""
    rng = np.random.default_rng(seed(("canon", t)))
    x = values(t, (4, 333), rng)
    for direction in ("LT", "GT"):
        text = _sort_text([t], (4, 333), 1, jax_comparator([t], 1, direction))
        _check(text, x)
        got = Client(backend="cpu", backend_options={"flush_denormals": False}).compile(
            parse_hlo_module(text))(x)
        _same(got, evaluate(parse_hlo_module(text), x))


@pytest.mark.parametrize("t", FLOATS)
def test_float_comparison_without_nans(t):
    """A FLOAT comparison (-0 equivalent to +0) on rows without NaNs, with and without
    denormal flushing (flushing: denormals are zeros to the comparator, so the interpreter,
    which never flushes, is compared with flushing off)."""
    rng = np.random.default_rng(seed(("float", t)))
    x = values(t, (3, 260), rng, nan=False)
    for direction in ("LT", "GT"):
        text = _sort_text([t], (3, 260), 1, plain([t], direction, total=False))
        _radix(text)
        got = Client(backend="cpu", backend_options={"flush_denormals": False}).compile(
            parse_hlo_module(text))(x)
        _same(got, evaluate(parse_hlo_module(text), x))


def _merge_only(monkeypatch):
    be.clear_cache()
    monkeypatch.setattr(native_sort, "RADIX_MIN", 1 << 62)


@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "f16"])
def test_flushed_denormals_as_the_comparator_sees_them(t, monkeypatch):
    """Under denormal flushing the radix keys order as the comparator's own code does: the
    radix path and the merge sort (the comparator inlined, run element by element) agree."""
    rng = np.random.default_rng(seed(("daz", t)))
    x = values(t, (3, 300), rng, nan=False)
    u = _uint(t)
    bits = x.view(u)
    bits[:, ::7] = rng.integers(1, 6, bits[:, ::7].shape).astype(u)  # tiny denormals
    bits[:, 3::7] |= u.type(1 << (8 * u.itemsize - 1))  # and negative ones
    texts = [_sort_text([t], (3, 300), 1, plain([t], "LT", total=False)),
             _sort_text([t, "s32"], (3, 300), 1, jax_comparator([t, "s32"], 1))]
    iota = np.broadcast_to(np.arange(300, dtype=np.int32), (3, 300)).copy()
    args = [(x,), (x, iota)]
    radix = []
    for text, a in zip(texts, args):
        _radix(text)
        radix.append(Client(backend="cpu").compile(parse_hlo_module(text))(*a))
    _merge_only(monkeypatch)
    try:
        for text, a, got in zip(texts, args, radix):
            assert native_sort.radix_keys(parse_hlo_module(text).entry.root) is not None
            _same(got, Client(backend="cpu").compile(parse_hlo_module(text))(*a))
    finally:
        monkeypatch.undo()
        be.clear_cache()


@pytest.mark.parametrize("t", ALL)
def test_key_value_pairs_and_argsort(t):
    """Payload operands of other types move with the key; argsort's iota shows the
    stable order of ties."""
    rng = np.random.default_rng(seed(("kv", t)))
    dims = (5, 211)
    key = values(t, dims, rng)
    iota = np.broadcast_to(np.arange(dims[1], dtype=np.int32), dims).copy()
    f64 = values("f64", dims, rng)
    bf = values("bf16", dims, rng)
    _check(_sort_text([t, "s32"], dims, 1, jax_comparator([t, "s32"], 1)), key, iota)
    _check(_sort_text([t, "f64", "bf16", "s32"], dims, 1, plain([t, "f64", "bf16", "s32"])),
           key, f64, bf, iota)
    _check(_sort_text(["s32", t], dims, 1, plain(["s32", t], "GT", key=1)), iota, key)


@pytest.mark.parametrize("t0,t1", [("f32", "s32"), ("bf16", "f32"), ("s32", "f64"),
                                   ("u8", "pred"), ("f64", "u64"), ("f16", "s8")])
def test_lexicographic_keys(t0, t1):
    """jax's num_keys=2 form: key 0, ties broken by key 1, then by position."""
    rng = np.random.default_rng(seed(("lex", t0, t1)))
    dims = (4, 300)
    a, b = values(t0, dims, rng), values(t1, dims, rng)
    iota = np.broadcast_to(np.arange(dims[1], dtype=np.int32), dims).copy()
    for direction in ("LT", "GT"):
        text = _sort_text([t0, t1, "s32"], dims, 1, jax_comparator([t0, t1, "s32"], 2,
                                                                     direction))
        _check(text, a, b, iota)


def test_rows_of_equal_and_nearly_equal_keys():
    """Rows whose every digit is the same (no pass moves anything), and rows where one
    digit varies."""
    x = np.zeros((4, 200), np.float32)
    x[1] = -0.0
    x[2, ::3] = -0.0  # -0 and +0 differ in TOTALORDER: the top digit varies
    x[3] = np.arange(200, dtype=np.float32)[::-1] * np.float32(2.0 ** -20) + np.float32(1)
    _check(_sort_text(["f32"], (4, 200), 1, plain(["f32"])), x)
    iota = np.broadcast_to(np.arange(200, dtype=np.int32), (4, 200)).copy()
    _check(_sort_text(["f32", "s32"], (4, 200), 1, jax_comparator(["f32", "s32"], 1)), x,
           iota)


def test_unstable_integer_sort():
    rng = np.random.default_rng(23)
    for t in ("s32", "u16", "s64"):
        x = values(t, (3, 500), rng)
        _check(_sort_text([t], (3, 500), 1, plain([t]), stable=False), x)


@pytest.mark.parametrize("t", ["f32", "s32", "f64"])
def test_long_rows(t):
    """Rows over 64K elements take 11-bit digits."""
    rng = np.random.default_rng(seed(("long", t)))
    n = 70001
    x = values(t, (2, n), rng)
    assert native_sort._digit_bits(n) == 11
    _check(_sort_text([t], (2, n), 1, jax_comparator([t], 1) if t in FLOATS else plain([t])),
           x)
    iota = np.broadcast_to(np.arange(n, dtype=np.int32), (2, n)).copy()
    _check(_sort_text([t, "s32"], (2, n), 1, plain([t, "s32"], "GT")), x, iota)


def test_radix_sort_inside_a_while_loop():
    text = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT, type=TOTALORDER
}
cond {
  s = (s32[], f32[3,211]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3,211]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[3,211] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  h = f32[] constant(-0.75)
  hb = f32[3,211] broadcast(h), dimensions={}
  y = f32[3,211] multiply(x, hb)
  z = f32[3,211] sort(y), dimensions={1}, is_stable=true, to_apply=cmp
  ROOT t = (s32[], f32[3,211]) tuple(j, z)
}
ENTRY e {
  x = f32[3,211] parameter(0)
  zero = s32[] constant(0)
  s = (s32[], f32[3,211]) tuple(zero, x)
  w = (s32[], f32[3,211]) while(s), condition=cond, body=body
  ROOT r = f32[3,211] get-tuple-element(w), index=1
}
"""
    x = values("f32", (3, 211), np.random.default_rng(29), nan=False)
    got, want, ran = run_both(text, x)
    _same(got, want)
    assert "CompiledWhileStep" in [type(s).__name__ for s in ran]


def _narrow_values(t, shape, rng, nan=True):
    """Every encoding of narrow type ``t`` (random bit patterns; integers: random values)."""
    dt, nbits = NARROW[t]
    if t[0] in "su":
        info = ml_dtypes.iinfo(dt)
        return rng.integers(int(info.min), int(info.max), shape, endpoint=True).astype(dt)
    x = rng.integers(0, 1 << nbits, shape, dtype=np.uint8).view(dt)
    if not nan:
        with np.errstate(invalid="ignore"):
            x[np.isnan(x.astype(np.float32))] = dt(1)
    return x


@pytest.mark.parametrize("t", list(NARROW))
@pytest.mark.parametrize("n", [127, 128, 300])
def test_narrow_and_sub_byte_types(t, n):
    """The other f8s, f6s, f4 and sub-byte integers: TOTALORDER both ways and argsort with
    an iota (jax's canonicalising comparator where the type has a zero), a FLOAT comparison
    without NaNs, on rows just below (the merge sort) and from the radix threshold."""
    rng = np.random.default_rng(seed(("narrow", t, n)))
    x = _narrow_values(t, (3, n), rng)
    iota = np.broadcast_to(np.arange(n, dtype=np.int32), (3, n)).copy()
    check = _check if n >= native_sort.RADIX_MIN else _check_merge
    for direction in ("LT", "GT"):
        check(_sort_text([t], (3, n), 1, plain([t], direction)), x)
        if t != "f8e8m0fnu":  # (no zero to canonicalise -0 to)
            check(_sort_text([t, "s32"], (3, n), 1, jax_comparator([t, "s32"], 1, direction)),
                  x, iota)
        if t[0] == "f":
            y = _narrow_values(t, (3, n), rng, nan=False)
            text = _sort_text([t, "s32"], (3, n), 1, plain([t, "s32"], direction, total=False))
            if n >= native_sort.RADIX_MIN:
                _radix(text)
            got = Client(backend="cpu", backend_options={"flush_denormals": False}).compile(
                parse_hlo_module(text))(y, iota)
            _same(got, evaluate(parse_hlo_module(text), y, iota))


def _check_merge(text, *args):
    assert step_kinds(text, "sort") == ["KernelStep"]
    got, want, _ = run_both(text, *args)
    _same(got, want)


@pytest.mark.parametrize("n", [126, 127, 128, 129])
def test_rows_around_the_radix_threshold(n):
    """Rows of RADIX_MIN - 2 .. RADIX_MIN + 1 (merge sort below, radix sort from it): ties,
    both zeros and NaN payloads in TOTALORDER, argsort of jax's comparator, num_keys=2."""
    assert native_sort.RADIX_MIN == 128
    rng = np.random.default_rng(seed(("threshold", n)))
    x = values("f32", (4, n), rng)
    k1 = values("s8", (4, n), rng)
    iota = np.broadcast_to(np.arange(n, dtype=np.int32), (4, n)).copy()
    check = _check if n >= native_sort.RADIX_MIN else _check_merge
    for direction in ("LT", "GT"):
        check(_sort_text(["f32"], (4, n), 1, plain(["f32"], direction)), x)
        check(_sort_text(["f32", "s32"], (4, n), 1,
                         jax_comparator(["f32", "s32"], 1, direction)), x, iota)
        check(_sort_text(["f32", "s8", "s32"], (4, n), 1,
                         jax_comparator(["f32", "s8", "s32"], 2, direction)), x, k1, iota)


def test_radix_sort_of_the_loop_state_in_place():
    """The sort reads the loop state directly and its result is the next state (argsort of
    a state that is already sorted in part: ties and repeated passes), rows sorted in
    parallel along a non-minor dimension."""
    text = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
cond {
  s = (s32[], f32[300,8], s32[300,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[300,8], s32[300,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[300,8] get-tuple-element(s), index=1
  v = s32[300,8] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  z = (f32[300,8], s32[300,8]) sort(x, v), dimensions={0}, is_stable=true, to_apply=cmp
  zx = f32[300,8] get-tuple-element(z), index=0
  zv = s32[300,8] get-tuple-element(z), index=1
  h = f32[] constant(-1)
  hb = f32[300,8] broadcast(h), dimensions={}
  y = f32[300,8] multiply(zx, hb)
  ROOT t = (s32[], f32[300,8], s32[300,8]) tuple(j, y, zv)
}
ENTRY e {
  x = f32[300,8] parameter(0)
  v = s32[300,8] parameter(1)
  zero = s32[] constant(0)
  s = (s32[], f32[300,8], s32[300,8]) tuple(zero, x, v)
  w = (s32[], f32[300,8], s32[300,8]) while(s), condition=cond, body=body
  rx = f32[300,8] get-tuple-element(w), index=1
  rv = s32[300,8] get-tuple-element(w), index=2
  ROOT r = (f32[300,8], s32[300,8]) tuple(rx, rv)
}
"""
    rng = np.random.default_rng(37)
    x = values("f32", (300, 8), rng, nan=False)
    v = np.broadcast_to(np.arange(300, dtype=np.int32)[:, None], (300, 8)).copy()
    got, want, ran = run_both(text, x, v)
    _same(got, want)
    assert "CompiledWhileStep" in [type(s).__name__ for s in ran]


def test_which_comparators_take_the_radix_path():
    """A comparator that is no chain of key comparisons (|a| < |b| is one: an elementwise
    key; a0 + a1 < b0 + b1 is not) keeps the merge sort."""
    abs_cmp = """cmp {
  a0 = f32[] parameter(0)
  b0 = f32[] parameter(1)
  x = f32[] abs(a0)
  y = f32[] abs(b0)
  ROOT r = pred[] compare(x, y), direction=LT
}"""
    sum_cmp = """cmp {
  a0 = f32[] parameter(0)
  b0 = f32[] parameter(1)
  a1 = f32[] parameter(2)
  b1 = f32[] parameter(3)
  x = f32[] add(a0, a1)
  y = f32[] add(b0, b1)
  ROOT r = pred[] compare(x, y), direction=LT
}"""
    x = values("f32", (3, 300), np.random.default_rng(31), nan=False)
    text = _sort_text(["f32"], (3, 300), 1, abs_cmp)
    _radix(text)
    got = Client(backend="cpu", backend_options={"flush_denormals": False}).compile(
        parse_hlo_module(text))(x)
    _same(got, evaluate(parse_hlo_module(text), x))
    text = _sort_text(["f32", "f32"], (3, 300), 1, sum_cmp)
    assert native_sort.radix_keys(parse_hlo_module(text).entry.root) is None
    assert step_kinds(text, "sort") == ["KernelStep"]
