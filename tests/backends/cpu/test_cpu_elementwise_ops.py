"""Every elementwise opcode on every element type the CPU backend's element generators
implement (xlapy.backends.cpu.elemental), compiled through ``Client(backend="cpu")`` and
compared with the interpreter on edge-case inputs (NaN, +-0, +-inf, denormals, the
narrow types' every encoding, integer minima/maxima, shift amounts past the width, values
around every conversion's overflow).

Integers, pred and every exactly rounded float operation are compared bit for bit (the
sign of zero included; NaNs by position). The polynomial transcendentals are compared with
the maximum ulp errors measured against the interpreter (fmath.ULP_BOUNDS: exp 1, log 1,
expm1 2, log1p 2, tanh 0 (f32: XLA:CPU's approximation in both) / 3 (f64), logistic 4, f32
erf 1; power, a libm call in both
paths now, keeps its one ulp; one ulp of the
narrow type for bf16/f16/f8/f6/f4), libm-backed functions with one ulp (two in f64: glibc against NumPy/SciPy); ``test_measured_ulp_errors`` measures the
errors again on 2^16 inputs per function and type.

Each test builds one module per opcode with one ROOT tuple element per element type, so
the whole file compiles a few hundred LLVM kernels in a few dozen modules.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu.fmath import ULP_BOUNDS
from xlapy.interpreter.evaluator import evaluate
from xlapy.interpreter.kernels.numeric import convert, total_order_key
from xlapy.interpreter.values import flatten
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client
from xlapy.shape import dtypes

N = 257  # not a multiple of any vector width: the loops' remainders run too

ALL = sorted(dtypes.type_name(t) for t in el.TYPES if el.TYPES[t][0] != "c")
COMPLEX = ["c64", "c128"]
FLOATS = [t for t in ALL if el.TYPES[dtypes.from_name(t)][0] == "f"]
NARROW = [t for t in FLOATS if t not in ("f32", "f64")]
INTS = [t for t in ALL if el.TYPES[dtypes.from_name(t)][0] in "su"]
SIGNED = [t for t in INTS if t[0] == "s"]

# Every narrow float computes through the same decode -> f32 -> round path; the ops whose
# results exercise each format's own rules (-0, NaN, overflow, denormals) run on every float
# type, the others on a representative set (compile time: each kernel costs ~0.1 s).
SOME_FLOATS = ["f32", "f64", "bf16", "f16", "f8e4m3fn", "f8e5m2fnuz"]
EVERY_FLOAT_OPS = {"negate", "abs", "sign", "floor", "exponential", "is-finite", "add",
                   "multiply", "maximum"}
SOME_INTS = ["s1", "s4", "s8", "s32", "u2", "u8", "u64"]

POLY = {"exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic",
        "power"}
LIBM = {"cbrt", "sine", "cosine", "tan", "erf", "acos", "acosh", "asin", "asinh", "atanh",
        "cosh", "sinh", "atan2"}
# Complex ops whose formulas use f64 transcendental functions (test_complex).
COMPLEX_LIBM = (el.COMPLEX_UNARY | el.COMPLEX_BINARY) - {
    "add", "subtract", "multiply", "divide", "negate", "real", "imag"}
FLOAT_UNARY = sorted(el.FLOAT_UNARY)
FLOAT_BINARY = sorted(el.FLOAT_BINARY)
INT_UNARY = sorted(el.INT_UNARY)
INT_BINARY = sorted(el.INT_BINARY)


def _dtype(t: str) -> np.dtype:
    return np.dtype(dtypes.to_dtype(dtypes.from_name(t)))


def _bits_of(t: str) -> int:
    return dtypes.bit_width(dtypes.from_name(t))


# -- inputs ----------------------------------------------------------------------------------

_FLOAT_SPECIALS = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 0.5, -0.5, 2.0,
                   -2.0, 3.0, -3.0, 1e-40, -1e-45, 3e38, -3e38, 88.7, -103.0, 1e-8, 0.75]


def _float_specials(t: str) -> np.ndarray:
    dt = _dtype(t)
    if t in ("f32", "f64"):
        extra = [np.finfo(dt).max, -np.finfo(dt).max, np.finfo(dt).tiny,
                 np.finfo(dt).smallest_subnormal, -np.finfo(dt).smallest_subnormal, 709.7,
                 -745.0, 1e-310]
        with np.errstate(all="ignore"):
            return np.array(_FLOAT_SPECIALS + extra, np.float64).astype(dt)
    import ml_dtypes
    info = ml_dtypes.finfo(dt)
    vals = [float(v) for v in _FLOAT_SPECIALS] + [float(info.max), -float(info.max),
                                                  float(info.tiny),
                                                  float(info.smallest_subnormal)]
    with np.errstate(all="ignore"):
        return convert(np.array(vals, np.float32), dt)


def _all_encodings(t: str) -> np.ndarray | None:
    """Every encoding of an 8-bit-or-narrower float type, as an array of that type."""
    bits = _bits_of(t)
    if bits > 8:
        return None
    return np.arange(1 << bits, dtype=np.uint8).view(_dtype(t))


def float_values(t: str, seed: int, n: int = N) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = _dtype(t)
    enc = _all_encodings(t)
    if enc is not None:
        return rng.permutation(np.resize(enc, n))
    if t in ("f32", "f64"):
        x = (rng.standard_normal(n) * 10).astype(dt)
        raw = rng.integers(0, 1 << (8 * dt.itemsize - 1), n // 4, dtype=np.uint64)
        raw = raw.astype(f"u{dt.itemsize}").view(dt)
        raw = np.where(rng.integers(0, 2, raw.size).astype(bool), -raw, raw)
        x[n // 2: n // 2 + raw.size] = raw
    else:  # bf16, f16: random encodings and ordinary values
        x = convert((rng.standard_normal(n) * 10).astype(np.float32), dt)
        raw = rng.integers(0, 1 << 16, n // 3, dtype=np.uint64).astype(np.uint16).view(dt)
        x[n // 2: n // 2 + raw.size] = raw
    sp = _float_specials(t)
    x[: sp.size] = rng.permutation(sp)
    return x


def int_values(t: str, seed: int, n: int = N) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = _dtype(t)
    bits = _bits_of(t)
    signed = t[0] == "s"
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    wide = rng.integers(lo, hi, n, dtype=np.int64 if hi < (1 << 63) else np.uint64,
                        endpoint=True)
    small = rng.integers(-4 if signed else 0, 9, n)
    wide[n // 2:] = small[n // 2:].astype(wide.dtype)
    special = [lo, hi, 0, 1, bits - 1, bits, bits + 1, 2 if hi >= 2 else 0]
    if signed:
        special += [-1, -2 if lo <= -2 else 0, lo + 1]
    wide[: len(special)] = np.array(special, dtype=object).astype(wide.dtype)
    return convert(wide, dt)


def values(t: str, seed: int, n: int = N) -> np.ndarray:
    if t == "pred":
        return np.random.default_rng(seed).integers(0, 2, n).astype(bool)
    if t in FLOATS:
        return float_values(t, seed, n)
    return int_values(t, seed, n)


def grid_pair(t: str, seed: int, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    """Two operands whose first elements cross every special value with every other."""
    a, c = values(t, seed, n), values(t, seed + 1, n)
    if t == "pred":
        a[:4], c[:4] = [False, False, True, True], [False, True, False, True]
        return a, c
    if t in FLOATS:
        sp = _float_specials(t)[:14]
    else:
        bits = _bits_of(t)
        if bits <= 4:  # every pair of values
            sp = np.unique(int_values(t, 0, 64))
        else:
            sp = np.unique(int_values(t, 0, 11)[:11])
    k = min(sp.size, int(np.sqrt(n)))
    sp = sp[:k]
    a[: k * k] = np.repeat(sp, k)
    c[: k * k] = np.tile(sp, k)
    return a, c


# -- running ---------------------------------------------------------------------------------


def module(params: list[tuple[str, str]], body: list[str], roots: list[tuple[str, str]],
           n: int = N) -> str:
    lines = [f"  {p} = {t}[{n}] parameter({k})" for k, (p, t) in enumerate(params)]
    lines += [f"  {line}" for line in body]
    shapes = ", ".join(f"{t}[{n}]" for _, t in roots)
    names = ", ".join(r for r, _ in roots)
    lines.append(f"  ROOT out = ({shapes}) tuple({names})")
    return "HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


def run_both(text: str, args, *, compiled: bool = True):
    """(got, want) as lists of arrays; with ``compiled``, every non-parameter, non-tuple
    instruction must have an element generator."""
    mod = parse_hlo_module(text)
    if compiled:
        for instr in mod.entry.instructions:
            if instr.opcode not in ("parameter", "tuple", "constant"):
                assert el.supports(instr), f"not generated: {instr}"
    # the chains mix precisions on purpose (f32 with f64): allowed, as XLA's verifier allows it
    got = Client(backend="cpu").compile(parse_hlo_module(text), allow_mixed_precision=True)(*args)
    want = evaluate(mod, *args)
    return list(flatten(got)), list(flatten(want))


def _keys(x: np.ndarray) -> np.ndarray:
    return total_order_key(x)


def same(got, want, what: str, ulps: int = 0) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    t = dtypes.from_dtype(want.dtype)
    if not dtypes.is_floating(t):
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, f"{what}: at {bad[:5]} got {got[bad[:5]]} want {want[bad[:5]]}"
        return
    g32, w32 = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w32)
    bad = np.nonzero(np.isnan(g32) != nan)[0]
    assert bad.size == 0, f"{what}: NaN at {bad[:5]}: got {got[bad[:5]]} want {want[bad[:5]]}"
    distance = np.abs(_keys(got) - _keys(want))
    distance[nan] = 0
    bad = np.nonzero(distance > ulps)[0]
    assert bad.size == 0, (f"{what}: {bad.size} elements off by more than {ulps} ulp, e.g. at "
                           f"{bad[:5]} got {got[bad[:5]]} want {want[bad[:5]]}")


def near(got, want, what: str, eps: float) -> None:
    """Complex values within ``eps`` machine epsilons of ``want``, relative to ``|want|``
    (norm-wise, as complex functions' accuracy is stated); NaN and infinities where ``want``
    has them."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    finite = np.isfinite(want)
    nan = np.isnan(want)
    bad = np.nonzero((np.isnan(got) != nan) | (~finite & ~nan & (got != want)))[0]
    assert bad.size == 0, f"{what}: at {bad[:5]} got {got[bad[:5]]} want {want[bad[:5]]}"
    scale = np.maximum(np.abs(want[finite]), np.finfo(want.real.dtype).tiny)
    rel = np.abs(got[finite] - want[finite]) / scale / np.finfo(want.real.dtype).eps
    worst = np.argsort(rel)[::-1][:5]
    assert not (rel > eps).any(), (f"{what}: {int((rel > eps).sum())} elements further than "
                                   f"{eps} eps, e.g. got {got[finite][worst]} want "
                                   f"{want[finite][worst]}")


def ulp_tolerance(op: str, t: str) -> int:
    if op in POLY:
        if t in ("f32", "f64"):
            return ULP_BOUNDS.get((op, t), 1)
        return 1
    if op in LIBM:  # glibc vs NumPy/SciPy in f64 (erf: glibc vs cephes differ by 2)
        return 2 if t == "f64" else 1
    return 0


# -- unary -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary(op):
    out_of = {"is-finite": lambda t: "pred"}
    roots, body, params, args = [], [], [], []
    types = FLOATS if op in EVERY_FLOAT_OPS else SOME_FLOATS
    for k, t in enumerate(types):
        params.append((f"x{k}", t))
        rt = out_of.get(op, lambda t: t)(t)
        body.append(f"r{k} = {rt}[{N}] {op}(x{k})")
        roots.append((f"r{k}", rt))
        x = values(t, 10 + k)
        if op in ("log", "log-plus-one", "sqrt", "rsqrt", "acosh") and t in ("f32", "f64"):
            x[30:90] = np.abs(x[30:90])  # more of the domain
        args.append(x)
    got, want = run_both(module(params, body, roots), args)
    for t, g, w in zip(types, got, want):
        same(g, w, f"{op} {t}", ulp_tolerance(op, t))


@pytest.mark.parametrize("op", INT_UNARY + ["not"])
def test_int_pred_unary(op):
    types = [t for t in INTS if not (op in ("abs", "sign") and t[0] == "u")]  # HLO: signed
    if op == "not":
        types = types + ["pred"]
    params = [(f"x{k}", t) for k, t in enumerate(types)]
    body = [f"r{k} = {t}[{N}] {op}(x{k})" for k, t in enumerate(types)]
    roots = [(f"r{k}", t) for k, t in enumerate(types)]
    got, want = run_both(module(params, body, roots), [values(t, 20 + k)
                                                       for k, t in enumerate(types)])
    for t, g, w in zip(types, got, want):
        same(g, w, f"{op} {t}")


# -- binary ----------------------------------------------------------------------------------


@pytest.mark.parametrize("op", FLOAT_BINARY)
def test_float_binary(op):
    params, body, roots, args = [], [], [], []
    types = FLOATS if op in EVERY_FLOAT_OPS else SOME_FLOATS
    for k, t in enumerate(types):
        params += [(f"a{k}", t), (f"b{k}", t)]
        body.append(f"r{k} = {t}[{N}] {op}(a{k}, b{k})")
        roots.append((f"r{k}", t))
        a, c = grid_pair(t, 30 + k)
        args += [a, c]
    got, want = run_both(module(params, body, roots), args)
    for t, g, w in zip(types, got, want):
        same(g, w, f"{op} {t}", ulp_tolerance(op, t))


@pytest.mark.parametrize("op", INT_BINARY)
def test_int_binary(op):
    params, body, roots, args = [], [], [], []
    types = INTS if op in ("add", "divide", "remainder", "shift-right-arithmetic") else SOME_INTS
    for k, t in enumerate(types):
        params += [(f"a{k}", t), (f"b{k}", t)]
        body.append(f"r{k} = {t}[{N}] {op}(a{k}, b{k})")
        roots.append((f"r{k}", t))
        args += list(grid_pair(t, 40 + k))
    got, want = run_both(module(params, body, roots), args)
    for t, g, w in zip(types, got, want):
        same(g, w, f"{op} {t}")


def test_pred_binary():
    ops = sorted(el.PRED_BINARY)
    a, c = grid_pair("pred", 50)
    body = [f"r{k} = pred[{N}] {op}(a, b)" for k, op in enumerate(ops)]
    roots = [(f"r{k}", "pred") for k in range(len(ops))]
    got, want = run_both(module([("a", "pred"), ("b", "pred")], body, roots), [a, c])
    for op, g, w in zip(ops, got, want):
        same(g, w, f"{op} pred")


# -- compare, select, clamp -------------------------------------------------------------------


@pytest.mark.parametrize("t", ALL)
def test_compare(t):
    kinds = ["FLOAT", "TOTALORDER"] if t in FLOATS else [None]
    body, roots = [], []
    every = t in ("f32", "f64", "bf16", "f8e4m3fnuz", "s8", "u64", "s2", "pred")
    for d in ("EQ", "NE", "LT", "LE", "GT", "GE") if every else ("NE", "LT"):
        for ct in kinds:
            name = f"c{d}{ct or ''}"
            suffix = f", type={ct}" if ct else ""
            body.append(f"{name} = pred[{N}] compare(a, b), direction={d}{suffix}")
            roots.append((name, "pred"))
    a, c = grid_pair(t, 60)
    got, want = run_both(module([("a", t), ("b", t)], body, roots), [a, c])
    for (name, _), g, w in zip(roots, got, want):
        same(g, w, f"compare {name} {t}")


def test_select_clamp_every_type():
    params, body, roots, args = [("p", "pred")], [], [], [values("pred", 70)]
    for k, t in enumerate(ALL):
        params += [(f"lo{k}", t), (f"x{k}", t), (f"hi{k}", t)]
        body.append(f"sel{k} = {t}[{N}] select(p, x{k}, hi{k})")
        roots.append((f"sel{k}", t))
        body.append(f"cl{k} = {t}[{N}] clamp(lo{k}, x{k}, hi{k})")
        roots.append((f"cl{k}", t))
        lo, x = grid_pair(t, 71 + k)
        hi = values(t, 90 + k)
        args += [lo, x, hi]
    got, want = run_both(module(params, body, roots), args)
    for (name, t), g, w in zip(roots, got, want):
        same(g, w, f"{name} {t}")


def test_scalar_operands_and_scalar_predicate():
    text = f"""HloModule m
ENTRY e {{
  x = bf16[{N}] parameter(0)
  lo = bf16[] parameter(1)
  hi = bf16[] parameter(2)
  p = pred[] parameter(3)
  y = s8[{N}] parameter(4)
  c = bf16[{N}] clamp(lo, x, hi)
  s = bf16[{N}] select(p, c, x)
  m = s8[{N}] multiply(y, y)
  ROOT out = (bf16[{N}], s8[{N}]) tuple(s, m)
}}
"""
    x = values("bf16", 1)
    args = [x, convert(np.float32(-2.5), x.dtype), convert(np.float32(7.0), x.dtype),
            np.bool_(True), values("s8", 2)]
    got, want = run_both(text, args)
    for g, w in zip(got, want):
        same(g, w, "scalar operands")


# -- conversions -----------------------------------------------------------------------------

_CONVERT_EDGES = [2.0**31, -2.0**31 - 1e3, 2.0**32, 2.0**63, -2.0**63, 2.0**64, -0.5, 0.5,
                  1.5, 2.5, 4294967295.7, 2147483647.5, -2147483648.9, 127.5, -128.9, 255.5,
                  256.0, 32767.5, -32768.5, 65535.5, 65504.0, 65519.0, 65520.0, 448.0, 464.0,
                  480.0, 57344.0, 61440.0, 240.0, 248.0, 15.5, 7.5, 6.0, 6.5, 28.0, 30.0,
                  1e-40, 5e-39, 3e-39, 2.0**-127, 2.0**-128, 1.5 * 2.0**-127, 3e38, 1.7e38,
                  2.0**127 * 1.5, 3 * 2.0**20, 2.0**24 + 2.0**16 + 1, 1.00390625,
                  1.01171875, 2.0**-24, 2.0**-25, 2.0**-17, 2.0**-18, 1e30, -1e30]


def convert_sources(t: str, seed: int, n: int) -> np.ndarray:
    x = values(t, seed, n)
    if t in ("f32", "f64"):
        edges = np.array(_CONVERT_EDGES, np.float64)
        edges = np.concatenate([edges, -edges]).astype(_dtype(t))
        x[: edges.size] = edges
        rng = np.random.default_rng(seed)
        # values in every narrow type's range with random low bits (rounding, ties)
        m = n // 4
        scale = np.ldexp(1.0, rng.integers(-30, 20, m))
        x[-m:] = (rng.uniform(-1, 1, m) * scale).astype(_dtype(t))
    elif t in INTS:
        rng = np.random.default_rng(seed)
        bits = _bits_of(t)
        if bits >= 32:  # values whose rounding to bf16/f32 goes through ties
            m = n // 4
            base = rng.integers(1, 1 << (bits - 9), m).astype(np.uint64) << np.uint64(8)
            x[-m:] = convert(base + np.uint64(1), x.dtype)
    return x


# f32/f64 convert to every type; integers wide enough to round go to every float; every
# other source to a set covering its decode, float -> int saturation, int -> int wrapping,
# -> pred and a narrow -> narrow rounding.
CONVERT_TARGETS = {"f32": ALL, "f64": ALL,
                   **{t: FLOATS + ["s4", "u8", "pred"] for t in ("s64", "u64", "s32", "u32")}}
SOME_TARGETS = ["f64", "s32", "u8", "s4", "pred", "f8e5m2", "bf16"]


@pytest.mark.parametrize("src", ALL)
def test_convert(src):
    n = 1031
    targets = [d for d in CONVERT_TARGETS.get(src, SOME_TARGETS) if d != src]
    body = [f"r{k} = {d}[{n}] convert(x)" for k, d in enumerate(targets)]
    roots = [(f"r{k}", d) for k, d in enumerate(targets)]
    got, want = run_both(module([("x", src)], body, roots, n), [convert_sources(src, 80, n)])
    for (_, d), g, w in zip(roots, got, want):
        same(g, w, f"convert {src} -> {d}")


def test_narrow_rounding_exhaustive():
    """f32 -> every narrow float on every exponent with the mantissa bits around each
    format's rounding position (ties, just below and above), and f64 -> the f8/f6/f4
    types (rounded once): bit for bit ml_dtypes (f16 NaNs quiet, as XLA:CPU's F16C
    conversion makes them; NumPy keeps a signalling one signalling)."""
    exps = np.arange(256, dtype=np.uint32)
    mants = np.unique(np.concatenate([
        np.arange(0, 1 << 23, 1 << 13, dtype=np.uint32),
        (np.arange(0, 1 << 23, 1 << 13, dtype=np.uint32)[:, None]
         + np.array([1, (1 << 12) - 1, 1 << 12, (1 << 12) + 1], np.uint32)).ravel(),
        (np.arange(0, 1 << 23, 1 << 16, dtype=np.uint32)[:, None]
         + np.array([1, (1 << 15) - 1, 1 << 15, (1 << 15) + 1], np.uint32)).ravel(),
        (np.arange(0, 1 << 23, 1 << 19, dtype=np.uint32)[:, None]
         + np.array([(1 << 18) - 1, 1 << 18, (1 << 18) + 1, (1 << 19) - 1], np.uint32)).ravel(),
        (np.arange(0, 1 << 23, 1 << 20, dtype=np.uint32)[:, None]
         + np.array([(1 << 19) - 1, 1 << 19, (1 << 19) + 1, (1 << 22) + 1], np.uint32)).ravel(),
    ]))
    bits = ((exps[:, None] << np.uint32(23)) | mants[None, :]).ravel()
    bits = np.concatenate([bits, bits | np.uint32(1 << 31)])
    x32 = bits.view(np.float32)
    n = x32.size
    x64 = x32.astype(np.float64) * (1 + np.random.default_rng(0).uniform(-1e-9, 1e-9, n))
    body, roots = [], []
    for k, t in enumerate(NARROW):
        body.append(f"a{k} = {t}[{n}] convert(x)")
        roots.append((f"a{k}", t))
        if _bits_of(t) <= 8:
            body.append(f"b{k} = {t}[{n}] convert(y)")
            roots.append((f"b{k}", t))
    text = module([("x", "f32"), ("y", "f64")], body, roots, n)
    got, want = run_both(text, [x32, x64])
    for (name, t), g, w in zip(roots, got, want):
        assert g.dtype == w.dtype
        g8, w8 = g.view(f"u{g.itemsize}"), w.view(f"u{w.itemsize}")
        bad = np.nonzero(g8 != w8)[0]
        src = x32 if name[0] == "a" else x64
        assert bad.size == 0, (f"{name} -> {t}: {bad.size} encodings differ, e.g. "
                               f"{src[bad[:4]]} -> {g8[bad[:4]]} want {w8[bad[:4]]}")


def test_bitcast_convert_same_width():
    # every float to and from an unsigned integer of its width, and the integers among
    # themselves (float -> float is the composition of the two)
    def kind(t):
        return "f" if t in FLOATS else "i"

    pairs = [(s, d) for s in ALL for d in ALL
             if s != d and _bits_of(s) == _bits_of(d)
             and (kind(s) == "i" and kind(d) == "i" or
                  (kind(s) == "f") != (kind(d) == "f") and (s[0] in "up" or d[0] in "up"))]
    params = [(f"x{k}", s) for k, s in enumerate(ALL)]
    index = {s: k for k, s in enumerate(ALL)}
    body = [f"r{k} = {d}[{N}] bitcast-convert(x{index[s]})" for k, (s, d) in enumerate(pairs)]
    roots = [(f"r{k}", d) for k, (s, d) in enumerate(pairs)]
    args = [values(s, 100 + k) for k, s in enumerate(ALL)]
    # canonical NaNs only for the f8 types with several NaN encodings (see elemental)
    for k, s in enumerate(ALL):
        if s in ("f8e5m2", "f8e4m3", "f8e3m4"):
            args[k] = convert(args[k].astype(np.float32), args[k].dtype)
    got, want = run_both(module(params, body, roots), args)
    for (s, d), g, w in zip(pairs, got, want):
        if d in FLOATS:
            g, w = g.view(f"u{g.itemsize}"), w.view(f"u{w.itemsize}")
        same(g, w, f"bitcast-convert {s} -> {d}")


RP_TYPES = ["f32", "f64", "bf16", "f16", "f8e5m2", "f8e4m3fnuz", "f8e8m0fnu", "f4e2m1fn"]


@pytest.mark.parametrize("eb,mb", [(5, 10), (8, 7), (4, 3), (2, 1), (11, 52), (3, 0)])
def test_reduce_precision(eb, mb):
    body = [f"r{k} = {t}[{N}] reduce-precision(x{k}), exponent_bits={eb}, mantissa_bits={mb}"
            for k, t in enumerate(RP_TYPES)]
    roots = [(f"r{k}", t) for k, t in enumerate(RP_TYPES)]
    params = [(f"x{k}", t) for k, t in enumerate(RP_TYPES)]
    got, want = run_both(module(params, body, roots), [values(t, 110 + k)
                                                       for k, t in enumerate(RP_TYPES)])
    for t, g, w in zip(RP_TYPES, got, want):
        same(g, w, f"reduce-precision({eb},{mb}) {t}")


# -- chains and mixed precision ----------------------------------------------------------------


CHAINS = {
    "bf16": f"""HloModule m
ENTRY e {{
  x = bf16[{N}] parameter(0)
  y = bf16[{N}] parameter(1)
  a = bf16[{N}] multiply(x, y)
  b = bf16[{N}] add(a, x)
  c = bf16[{N}] exponential(b)
  d = bf16[{N}] divide(c, y)
  f = f32[{N}] convert(d)
  g = f32[{N}] tanh(f)
  h = bf16[{N}] convert(g)
  i = bf16[{N}] maximum(h, x)
  ROOT out = (bf16[{N}], f32[{N}]) tuple(i, f)
}}
""",
    "f8": f"""HloModule m
ENTRY e {{
  x = f8e4m3fn[{N}] parameter(0)
  y = f8e5m2[{N}] parameter(1)
  a = f8e4m3fn[{N}] multiply(x, x)
  b = f8e5m2[{N}] convert(a)
  c = f8e5m2[{N}] subtract(b, y)
  d = f16[{N}] convert(c)
  e = f16[{N}] sqrt(d)
  f = pred[{N}] compare(e, d), direction=LT, type=TOTALORDER
  g = f16[{N}] select(f, e, d)
  ROOT out = (f16[{N}], f8e4m3fn[{N}]) tuple(g, a)
}}
""",
    "ints": f"""HloModule m
ENTRY e {{
  x = s8[{N}] parameter(0)
  y = u4[{N}] parameter(1)
  a = s8[{N}] multiply(x, x)
  b = s8[{N}] shift-right-arithmetic(a, x)
  c = u4[{N}] convert(b)
  d = u4[{N}] power(c, y)
  e = u4[{N}] popcnt(d)
  f = s2[{N}] convert(e)
  g = f32[{N}] convert(f)
  h = f32[{N}] log-plus-one(g)
  ROOT out = (f32[{N}], s8[{N}]) tuple(h, b)
}}
""",
    "mixed": f"""HloModule m
ENTRY e {{
  x = f32[{N}] parameter(0)
  y = f64[{N}] parameter(1)
  a = f64[{N}] add(x, y)
  b = f64[{N}] power(a, y)
  c = pred[{N}] compare(x, y), direction=GT
  d = f64[{N}] select(c, x, b)
  e = f64[{N}] clamp(x, d, y)
  ROOT out = (f64[{N}], pred[{N}]) tuple(e, c)
}}
""",
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain(name):
    text = CHAINS[name]
    mod = parse_hlo_module(text)
    args = [values(dtypes.type_name(p.shape.element_type), 120 + k)
            for k, p in enumerate(mod.entry.parameters)]
    got, want = run_both(text, args)
    for g, w in zip(got, want):
        same(g, w, f"chain {name}", ulps=3)


# -- complex ---------------------------------------------------------------------------------


def complex_values(t: str, seed: int, n: int = N) -> np.ndarray:
    """Components crossing every special value (NaN, +-0, +-inf, denormal) with every other."""
    part = "f32" if t == "c64" else "f64"
    re, im = float_values(part, seed, n), float_values(part, seed + 7, n)
    sp = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1, -1, 2.5, 1e-40, 3e38], _dtype(part))
    k = sp.size
    re[: k * k], im[: k * k] = np.repeat(sp, k), np.tile(sp, k)
    out = np.empty(n, _dtype(t))
    out.real, out.imag = re, im
    return out


@pytest.mark.parametrize("t", COMPLEX)
def test_complex(t):
    """Every generated complex op, bit for bit (XLA's formulas, libm pieces in f64)."""
    part = "f32" if t == "c64" else "f64"
    other = "c128" if t == "c64" else "c64"
    body, roots = [], []
    for op in sorted(el.COMPLEX_BINARY):
        body.append(f"b{len(body)} = {t}[{N}] {op}(a, b)")
        roots.append((f"b{len(roots)}", t))
    for op in sorted(el.COMPLEX_UNARY):
        rt = part if op in ("real", "imag", "abs") else t
        body.append(f"b{len(body)} = {rt}[{N}] {op}(a)")
        roots.append((f"b{len(roots)}", rt))
    body += [f"b{len(body)} = pred[{N}] compare(a, b), direction=EQ",
             f"b{len(body) + 1} = pred[{N}] compare(a, b), direction=NE",
             f"b{len(body) + 2} = {t}[{N}] complex(x, y)",
             f"b{len(body) + 3} = {other}[{N}] convert(a)",
             f"b{len(body) + 4} = {t}[{N}] convert(x)",
             f"b{len(body) + 5} = {t}[{N}] select(p, a, b)",
             f"k = {t}[] constant((1.5, -2))",
             f"kb = {t}[{N}] broadcast(k), dimensions={{}}",
             f"b{len(body) + 6} = {t}[{N}] multiply(a, kb)"]
    roots += [(f"b{len(roots)}", "pred"), (f"b{len(roots) + 1}", "pred"),
              (f"b{len(roots) + 2}", t), (f"b{len(roots) + 3}", other),
              (f"b{len(roots) + 4}", t), (f"b{len(roots) + 5}", t), (f"b{len(roots) + 6}", t)]
    text = module([("a", t), ("b", t), ("x", part), ("y", part), ("p", "pred")], body, roots)
    a = complex_values(t, 1)
    c = complex_values(t, 2)[::-1].copy()
    got, want = run_both(text, [a, c, values(part, 3), values(part, 4), values("pred", 5)])
    ops = [line.split("(")[0].split()[-1] for line in body if line.startswith("b")]
    for (name, rt), op, g, w in zip(roots, ops, got, want):
        g, w = np.asarray(g), np.asarray(w)
        # c128: the f64 pieces (exp, log, pow, sin, atan2, ...) are glibc's in the backend and
        # NumPy's in the interpreter, which on AVX-512 hosts are NumPy's own SIMD loops, not
        # glibc (bit for bit on AVX2 hosts). A part that cancels (expm1's imaginary part,
        # rsqrt's real part) can then differ by many of its own ulps while the complex value
        # is within 1.4 eps of the other: those ops are held to 4 eps relative to |want|.
        # c64 computes the pieces in f64 and rounds, so it stays bit-exact everywhere.
        ulps = 2 if t == "c128" and op in COMPLEX_LIBM else 0  # abs: a real result
        if t == "c128" and op in COMPLEX_LIBM and g.dtype.kind == "c":
            near(g, w, f"{name} {t}", 4)
        elif g.dtype.kind == "c":
            same(g.real.copy(), w.real.copy(), f"{name} {t} real part", ulps)
            same(g.imag.copy(), w.imag.copy(), f"{name} {t} imaginary part", ulps)
        else:
            same(g, w, f"{name} {t}", ulps)


def test_complex_reduce_and_iota():
    text = f"""HloModule m
add {{
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT c = c64[] add(a, b)
}}
ENTRY e {{
  x = c64[{N}] parameter(0)
  i = c64[{N}] iota(), iota_dimension=0
  s = c64[{N}] add(x, i)
  z = c64[] constant((0, 0))
  r = c64[] reduce(s, z), dimensions={{0}}, to_apply=add
  j = bf16[{N}] iota(), iota_dimension=0
  ROOT out = (c64[], c64[{N}], bf16[{N}]) tuple(r, s, j)
}}
"""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(N) + 1j * rng.standard_normal(N)).astype(np.complex64)
    got, want = run_both(text, [x], compiled=False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1:], want[1:]):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes()


# -- what is not generated runs interpreted --------------------------------------------------


def test_stochastic_convert():
    cases = [("f32", "u32", "s32"), ("f32", "u32", "s8"), ("f64", "u64", "s64"),
             ("bf16", "u16", "s16"), ("f8e4m3fn", "u8", "s8"), ("f16", "u16", "s4")]
    params, body, roots, args = [], [], [], []
    for k, (src, rnd, dst) in enumerate(cases):
        params += [(f"x{k}", src), (f"r{k}", rnd)]
        body.append(f"sc{k} = {dst}[{N}] stochastic-convert(x{k}, r{k})")
        roots.append((f"sc{k}", dst))
        x = values(src, 130 + k)
        if src in ("f32", "f64"):
            x[20:60] = np.linspace(-300, 300, 40).astype(x.dtype)
            x[60:64] = [2.0**31, -2.0**31, 2.0**63, -2.0**63 - 4096]
        args += [x, values(rnd, 140 + k)]
    got, want = run_both(module(params, body, roots), args)
    for (name, t), g, w in zip(roots, got, want):
        same(g, w, f"stochastic-convert {name} -> {t}")


def test_unsupported_instructions_are_interpreted():
    text = f"""HloModule m
ENTRY e {{
  x = c64[{N}] parameter(0)
  y = f32[{N}] parameter(1)
  r = u32[{N}] parameter(2)
  a = c64[{N}] add(x, x)
  b = f32[{N}] real(a)
  w = f64[{N}] convert(y)
  c = pred[{N}] compare(y, w), direction=LT, type=TOTALORDER
  d = c64[{N}] bitcast-convert(x)
  ROOT out = (f32[{N}], pred[{N}], c64[{N}]) tuple(b, c, d)
}}
"""
    mod = parse_hlo_module(text)
    generated = {i.name: el.supports(i) for i in mod.entry.instructions}
    assert generated == {"x": False, "y": False, "r": False, "a": True, "b": True,
                         "w": True, "c": False, "d": False, "out": False}
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(N) + 1j * rng.standard_normal(N)).astype(np.complex64)
    got, want = run_both(text, [x, values("f32", 6), values("u32", 7)], compiled=False)
    for g, w in zip(got, want):
        same(g, w, "interpreted")


def test_supports_is_exact():
    """supports() answers for the operand and result types, not the opcode alone."""
    cases = [  # (parameters, root, generated)
        (["s8[4]", "s8[4]"], "s8[4] add(p0, p1)", True),
        (["pred[4]", "pred[4]"], "pred[4] add(p0, p1)", True),
        (["bf16[4]"], "bf16[4] cbrt(p0)", True),
        (["f8e4m3fn[4]"], "pred[4] is-finite(p0)", True),
        (["f32[4]", "f64[4]"], "pred[4] compare(p0, p1), direction=LT", True),
        (["f32[4]", "f64[4]"], "pred[4] compare(p0, p1), direction=LT, type=TOTALORDER",
         False),
        (["f32[4]", "bf16[4]"], "f32[4] add(p0, p1)", True),
        (["c64[4]", "c64[4]"], "c64[4] add(p0, p1)", True),
        (["c64[4]", "c64[4]"], "pred[4] compare(p0, p1), direction=LT", False),
        (["c64[4]"], "c64[4] log(p0)", True),
        (["c64[4]"], "f32[4] convert(p0)", False),
        (["f32[4]", "u32[4]"], "s32[4] stochastic-convert(p0, p1)", True),
        (["f32[4]", "u32[4]"], "u32[4] stochastic-convert(p0, p1)", False),
        (["f32[4]"], "u16[4,2] bitcast-convert(p0)", True),
        (["f32[4]"], "s32[4] bitcast-convert(p0)", True),
        (["s4[4]"], "f4e2m1fn[4] bitcast-convert(p0)", True),
        (["f32[]", "f32[4]", "f32[]"], "f32[4] clamp(p0, p1, p2)", True),
    ]
    for params, root, want in cases:
        lines = [f"  p{k} = {s} parameter({k})" for k, s in enumerate(params)]
        text = "HloModule m\nENTRY e {\n" + "\n".join(lines) + f"\n  ROOT r = {root}\n}}\n"
        assert el.supports(parse_hlo_module(text).entry.root) is want, root


# -- accuracy and vectorisation of the polynomial transcendentals -----------------------------


def _kernel(ty_name: str, op: str, nargs: int = 1):
    """A loop ``out[i] = op(in0[i], ...)`` built from the element generators alone."""
    from llvmlite import ir

    from xlapy.backends.cpu.indexing import Index
    from xlapy.backends.cpu.jit import get_jit

    text = module([(f"a{k}", ty_name) for k in range(nargs)],
                  [f"r = {ty_name}[{N}] {op}({', '.join(f'a{k}' for k in range(nargs))})"],
                  [("r", ty_name)])
    root = parse_hlo_module(text).entry.root.operands[0]
    et = dtypes.from_name(ty_name)
    mty = el.memory_type(et)
    irmod = ir.Module(name="k")
    i64 = ir.IntType(64)
    fn = ir.Function(irmod, ir.FunctionType(ir.VoidType(), [mty.as_pointer()] * (nargs + 1)
                                            + [i64]), name="k")
    for a in fn.args[:-1]:
        a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    entry = b.block
    head, body, done = (fn.append_basic_block(s) for s in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, fn.args[-1]), body, done)
    b.position_at_end(body)
    ptrs = {id(p): fn.args[k] for k, p in enumerate(root.operands)}

    def loader(instr, index):
        return el.load_value(b, b.gep(ptrs[id(instr)], [index.linear]), et, instr.name)

    emitter = el.ElementalEmitter(b, loader, {id(root)})
    v = emitter.value_at(root, Index(b, (N,), linear=i))
    el.store_value(b, v, b.gep(fn.args[nargs], [i]), et, "r")
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    compiled = get_jit().compile(irmod, use_disk_cache=False)  # keep the optimised IR
    import ctypes
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (nargs + 1)), ctypes.c_int64)
    f = proto(compiled.function_address("k"))
    return f, compiled, root


@pytest.mark.parametrize("op", ["exponential", "log", "tanh", "exponential-minus-one",
                                "log-plus-one", "logistic", "erf"])
def test_transcendentals_vectorise(op):
    _, compiled, _ = _kernel("f32", op)
    asm = compiled.assembly()
    # The vector width is the host's (8 floats with AVX2, 16 with AVX-512): any f32 vector
    # of at least 4 lanes (or f64 pieces of at least 2) means the loop was vectorised.
    lanes = [int(n) for n in re.findall(r"<(\d+) x float>", asm)]
    lanes += [2 * int(n) for n in re.findall(r"<(\d+) x double>", asm)]
    assert lanes and max(lanes) >= 4, f"{op} f32 loop not vectorised"
    assert "call float @exp" not in asm and "call double @exp" not in asm


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_measured_ulp_errors(t):
    """Maximum error in ulps against the interpreter on 2^16 inputs per function, spread
    over the function's whole domain (random bit patterns and a dense central range)."""
    rng = np.random.default_rng(11)
    dt = _dtype(t)
    n = 1 << 16
    measured = {}
    for op, (lo, hi) in {"exponential": (-110, 90), "exponential-minus-one": (-20, 90),
                         "log": (0, 10), "log-plus-one": (-1, 3), "tanh": (-5, 5),
                         "logistic": (-20, 20), "erf": (-5, 5)}.items():
        if op == "erf" and t == "f64":
            continue
        nargs = 1
        f, _, root = _kernel(t, op, nargs)
        xs = []
        for k in range(nargs):
            x = rng.uniform(lo, hi, n).astype(dt)
            raw = rng.integers(0, np.iinfo(f"u{dt.itemsize}").max, n // 4,
                               dtype=f"u{dt.itemsize}").view(dt)
            x[: raw.size] = raw
            xs.append(x)
        got = np.empty_like(xs[0])
        f(*[x.ctypes.data for x in xs], got.ctypes.data, n)
        from xlapy.interpreter.evaluator import EvalContext, EvalOptions
        want = EvalContext(None, EvalOptions()).run_instruction(root, xs)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), op
        measured[op] = int(np.abs(_keys(got) - _keys(want))[~nan].max())
    for op, err in measured.items():
        assert err <= ULP_BOUNDS[(op, t)], f"{op} {t}: {err} ulp (bound {ULP_BOUNDS[(op, t)]})"


@pytest.mark.parametrize("op,lo,hi", [("sine", -10, 10), ("cosine", -1e4, 1e4), ("tan", -4, 4),
                                      ("cbrt", -1e3, 1e3), ("atan2", -10, 10),
                                      ("power", 0, 4)])
def test_f32_libm_functions_are_the_interpreters_bit_for_bit(op, lo, hi):
    """f32 sin, cos, tan, cbrt, atan2 and pow: the C library's f32 functions (sinf, ...)
    in both, as XLA:CPU computes them, on uniform values and random bit patterns (NaNs,
    infinities, denormals); pow's exponents include integers, negative bases among them."""
    rng = np.random.default_rng(12)
    n = 1 << 14
    nargs = 2 if op in ("atan2", "power") else 1
    f, _, root = _kernel("f32", op, nargs)
    xs = []
    for k in range(nargs):
        x = rng.uniform(lo, hi, n).astype(np.float32)
        x[: n // 4] = rng.integers(0, 1 << 32, n // 4, dtype=np.uint64).astype(
            np.uint32).view(np.float32)
        if op == "power" and k == 1:
            x[n // 4:] = rng.uniform(-30, 30, n - n // 4).astype(np.float32)
            x[n // 4: n // 2] = np.round(x[n // 4: n // 2])
        if op == "power" and k == 0:
            x[n // 2: n // 2 + 64] *= -1
        xs.append(x)
    got = np.empty_like(xs[0])
    f(*[x.ctypes.data for x in xs], got.ctypes.data, n)
    from xlapy.interpreter.evaluator import EvalContext, EvalOptions
    want = EvalContext(None, EvalOptions()).run_instruction(root, xs)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def _flat_loop_kernel(text: str):
    """The loop kernel ``loop_emitter.emit_loop`` makes of the entry root of ``text`` (the
    entry's parameters its inputs), compiled with its optimised IR kept; returns the
    function (the kernel ABI) and the compiled module."""
    import ctypes

    from llvmlite import ir

    from xlapy.backends.cpu.jit import get_jit
    from xlapy.backends.cpu.loop_emitter import emit_loop

    entry = parse_hlo_module(text).entry
    irmod = ir.Module(name="t")
    spec = emit_loop(irmod, "k", [entry.root], entry.parameters, {})
    compiled = get_jit().compile(irmod, use_disk_cache=False)
    proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                             ctypes.c_int64)
    return proto(compiled.function_address("k")), compiled, spec, str(irmod)


def test_flat_loop_is_parallel_without_overlap_checks():
    """A flat loop kernel's item loop is marked parallel (its iterations are the ABI's
    independent work items) and not interleaved: LLVM vectorises it with no run-time
    overlap checks and no scalar copy of the loop they would guard."""
    text = ("HloModule m\nENTRY e {\n  a = f32[1000] parameter(0)\n"
            "  b = f32[1000] parameter(1)\n  ROOT r = f32[1000] add(a, b)\n}\n")
    _, compiled, _, ir_text = _flat_loop_kernel(text)
    assert "llvm.loop.parallel_accesses" in ir_text
    assert '!"llvm.loop.interleave.count", i32 1' in ir_text  # no reduction to interleave
    assert ir_text.count("!llvm.access.group") == 3  # two loads, one store
    asm = compiled.assembly()
    assert re.search(r"<\d+ x float>", asm), "the loop was not vectorised"
    assert "memcheck" not in asm and "found.conflict" not in asm


@pytest.mark.parametrize("n", [1, 7, 16, 33, 1000])
def test_flat_loop_in_place_and_split(n):
    """The parallel loop is right over any item range, and with its output buffer being
    one of its inputs (identical memory: each item reads its own elements only)."""
    import ctypes

    text = (f"HloModule m\nENTRY e {{\n  a = f32[{n}] parameter(0)\n"
            f"  b = f32[{n}] parameter(1)\n  m = f32[{n}] multiply(a, b)\n"
            f"  ROOT r = f32[{n}] subtract(m, a)\n}}\n")
    f, compiled, spec, _ = _flat_loop_kernel(text)  # compiled: keeps the code loaded
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    want = a * b - a
    out = np.empty_like(a)
    bufs = (ctypes.c_void_p * 3)(a.ctypes.data, b.ctypes.data, out.ctypes.data)
    cut = n // 3
    f(bufs, 0, cut)
    f(bufs, cut, spec.domain)
    np.testing.assert_array_equal(out, want)
    inplace = a.copy()
    bufs = (ctypes.c_void_p * 3)(inplace.ctypes.data, b.ctypes.data, inplace.ctypes.data)
    f(bufs, 0, spec.domain)
    np.testing.assert_array_equal(inplace, want)
    compiled.close()
