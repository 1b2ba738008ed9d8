"""Differential test: random fusible HLO programs on the compiled CPU backend against the
interpreter.

Each case (a fixed seed: the same programs on every run) builds a program of 3-25
instructions: elementwise unary and binary ops, compare/select/clamp, convert, broadcast,
reshape, transpose, slice, concatenate, pad, iota, reverse, constants and reduce
(add/max/min/mul over random dimensions), on f32/f64/s32/u32/s8/bf16/f16/pred, shapes of
rank 0-4 with small dimensions (1 and 0 included), its root a tuple of every unused value.
The program is printed as HLO text and parsed, then run on the interpreter and the backend;
the same text after xlapy's fusion pass (printed and parsed again) runs on both too, and
its interpreter result must be the original's bit for bit (the pass is exact).

What "equal" means is decided per value while the program is built, so that a correct
backend never fails and a wrong one cannot hide:
- exact values must match bit for bit (NaN payloads aside): integers and pred, and float
  values that stay multiples of 2^-q below 2^precision (inputs are multiples of 1/4, plus
  NaN/inf/-0 in some programs), where no rounding happens in any order of evaluation;
  only exact values reach discontinuous ops (compare, floor/round, sign, convert to an
  integer or pred, narrowing converts);
- inexact values (transcendentals, division, sums that round) are continuous functions of
  their inputs; each carries ``scale``, a bound on the magnitudes its rounding errors are
  relative to (forward error analysis through each op), and must satisfy
  |cpu - interpreter| <= RTOL |interpreter| + ATOL_SCALE * scale (f32: 1e-5 and 2e-6 ~ 16
  ulp of the scale; f64: 1e-12 and 4e-15), with NaN and inf in the same places; an inexact
  f16/bf16 value is never used again and may also differ by 1 ulp of its type.
Domain-limited ops only see operands whose value interval keeps them well inside the domain
(log/sqrt/rsqrt of values >= 0.5, exp of values <= 20, division by values outside
(-0.5, 0.5)), so no inexact value sits on a branch cut.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import xlapy.backends  # noqa: F401 - registers the "cpu" backend
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.passes import make_pipeline
from xlapy.verifier import verify_module

_OPS = Path(__file__).resolve().parents[2] / "ops"
if str(_OPS) not in sys.path:
    sys.path.insert(0, str(_OPS))

from backend_check import compare_arrays, run_cpu

SEEDS = range(150)

#: seed -> the cpu backend bug its program meets today (xfail, strict).
KNOWN_BACKEND_BUGS: dict[int, str] = {}

FLOATS = ("f32", "f64", "bf16", "f16")
INTS = ("s32", "u32", "s8")
TYPES = FLOATS + INTS + ("pred",)
NP = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16,
      "s32": np.int32, "u32": np.uint32, "s8": np.int8, "pred": np.bool_}
PRECISION = {"f32": 24, "f64": 53, "bf16": 8, "f16": 11}  # significand bits
RTOL = {"f32": 1e-5, "f64": 1e-12, "bf16": 1e-5, "f16": 1e-5}  # narrow: computed in f32
ATOL_SCALE = {"f32": 2e-6, "f64": 4e-15, "bf16": 2e-6, "f16": 2e-6}
USABLE_BOUND = 1e6  # inexact values beyond this magnitude are not used again
MAX_ELEMENTS = 256


@dataclass(frozen=True)
class Val:
    """A value of the program and what is known about it."""

    name: str
    ty: str
    dims: tuple
    exact: bool = True  # backend and interpreter must agree bit for bit
    lo: float = 0.0  # interval of the finite values (floats and integers)
    hi: float = 0.0
    q: int = 0  # exact floats: multiples of 2^-q
    scale: float = 0.0  # inexact: magnitude the rounding errors are relative to
    terminal: bool = False  # compared, never an operand again

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def size(self) -> int:
        return int(np.prod(self.dims, dtype=np.int64))


def _shape(ty: str, dims) -> str:
    return f"{ty}[{','.join(str(d) for d in dims)}]"


def _int_range(ty: str) -> tuple[int, int]:
    info = np.iinfo(NP[ty])
    return int(info.min), int(info.max)


def _literal(ty: str, v) -> str:
    if ty == "pred":
        return "true" if v else "false"
    if ty in INTS:
        return str(int(v))
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v) if v != int(v) or abs(v) > 1e15 else str(int(v)) if v != 0 or \
        math.copysign(1, v) > 0 else "-0"


class Program:
    """A random program: HLO text, its inputs, and the facts of its root values."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.lines: list[str] = []
        self.reducers: dict[tuple[str, str], str] = {}
        self.params: list[Val] = []
        self.inputs: list[np.ndarray] = []
        self.pool: list[Val] = []
        self.used: set[str] = set()
        self.count = 0
        self.specials = self.rng.random() < 0.35  # NaN/inf/-0 among the float inputs
        target = int(self.rng.integers(3, 26))
        for _ in range(int(self.rng.integers(1, 4))):
            self.parameter()
        made = 0
        attempts = 0
        while made < target and attempts < 20 * target:
            attempts += 1
            kind = self.rng.choice(KINDS, p=WEIGHTS)
            if getattr(self, "op_" + kind)() is not None:
                made += 1
        self.roots = [v for v in self.pool if v.name not in self.used and
                      not v.name.startswith("p")] or [self.pool[-1]]
        self.roots = self.roots[-4:]

    # -- text --------------------------------------------------------------------------------

    def emit(self, ty: str, dims, rhs: str, operands=(), **facts) -> Val:
        self.count += 1
        name = f"v{self.count}"
        self.lines.append(f"  {name} = {_shape(ty, dims)} {rhs}")
        for o in operands:
            self.used.add(o.name)
        v = Val(name, ty, tuple(dims), **facts)
        if ty in FLOATS and not v.exact and v.mag > USABLE_BOUND:
            v = replace(v, terminal=True)
        self.pool.append(v)
        return v

    def text(self) -> str:
        out = [f"HloModule diff_{self.seed}", ""]
        for (op, ty), name in self.reducers.items():
            out += [f"{name} {{", f"  x = {ty}[] parameter(0)", f"  y = {ty}[] parameter(1)",
                    f"  ROOT r = {ty}[] {op}(x, y)", "}", ""]
        body = list(self.lines)
        if len(self.roots) == 1:
            r = self.roots[0]
            body.append(f"  ROOT out = {_shape(r.ty, r.dims)} copy({r.name})")
        else:
            shapes = ", ".join(_shape(r.ty, r.dims) for r in self.roots)
            body.append(f"  ROOT out = ({shapes}) tuple({', '.join(r.name for r in self.roots)})")
        return "\n".join(out + ["ENTRY main {"] + body + ["}", ""])

    # -- choices -----------------------------------------------------------------------------

    def dims(self, rank=None) -> tuple:
        rank = int(self.rng.integers(0, 5)) if rank is None else rank
        while True:
            d = tuple(int(self.rng.choice([0, 1, 2, 3, 4, 5], p=[.03, .22, .25, .25, .15, .1]))
                      for _ in range(rank))
            if int(np.prod(d, dtype=np.int64)) <= MAX_ELEMENTS:
                return d

    def pick(self, pred=lambda v: True) -> Val | None:
        cands = [v for v in self.pool if not v.terminal and pred(v)]
        if not cands:
            return None
        full = [v for v in cands if v.size]
        if full and len(full) < len(cands) and self.rng.random() < 0.9:
            cands = full  # empty arrays make everything after them empty
        w = np.arange(1, len(cands) + 1, dtype=np.float64) ** 2  # recent values first
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def partner(self, a: Val, need_exact: bool = False) -> Val:
        """Another operand of a's type and dimensions (made if none fits)."""
        b = self.pick(lambda v: v.ty == a.ty and v.dims == a.dims and v is not a
                      and (v.exact or not need_exact))
        if b is not None and self.rng.random() < 0.8:
            return b
        if self.rng.random() < 0.5:
            return self.parameter(a.ty, a.dims)
        return self.broadcast_constant(a.ty, a.dims)

    def value(self, ty: str):
        """A random exact scalar of ``ty``."""
        if ty == "pred":
            return bool(self.rng.integers(0, 2))
        if ty in INTS:
            lo, hi = _int_range(ty)
            return int(self.rng.integers(max(lo, -8), min(hi, 8) + 1))
        k = 0 if self.rng.random() < 0.15 else int(self.rng.integers(-16, 17))
        return k / 4 * float(self.rng.choice([-1, 1]))

    def facts_of(self, ty: str, lo: float, hi: float, q: int) -> dict:
        if ty in FLOATS:
            return {"lo": lo, "hi": hi, "q": q}
        return {"lo": lo, "hi": hi}

    # -- leaves --------------------------------------------------------------------------------

    def parameter(self, ty=None, dims=None) -> Val:
        ty = ty or str(self.rng.choice(TYPES))
        dims = self.dims() if dims is None else dims
        n = len(self.params)
        shape = np.asarray(dims, dtype=np.int64)
        size = int(np.prod(shape))
        if ty == "pred":
            x = self.rng.integers(0, 2, size).astype(bool)
            facts = {}
        elif ty in INTS:
            lo, hi = _int_range(ty)
            if ty == "s8":  # the whole range: wrapping arithmetic
                x = self.rng.integers(lo, hi + 1, size)
            else:
                x = self.rng.integers(max(lo, -9), 10, size)
                if size and self.rng.random() < 0.3:
                    x[self.rng.integers(0, size)] = self.rng.choice([lo, hi])
            x = x.astype(NP[ty])
            facts = {"lo": float(x.min()) if size else 0.0, "hi": float(x.max()) if size else 0.0}
        else:
            x = self.rng.integers(-16, 17, size).astype(np.float64) / 4
            x[self.rng.random(size) < 0.2] = 0.0  # zeros often, -0 as often as +0
            x = np.where(self.rng.random(size) < 0.5, x, -x)
            if self.specials and size:
                k = self.rng.integers(0, size, 2)
                x[k] = self.rng.choice([np.nan, np.inf, -np.inf, -0.0], 2)
            finite = x[np.isfinite(x)]
            facts = {"lo": float(finite.min()) if finite.size else 0.0,
                         "hi": float(finite.max()) if finite.size else 0.0, "q": 2}
            x = x.astype(NP[ty])
        self.params.append(None)
        self.inputs.append(x.reshape(dims))
        self.count += 1
        v = Val(f"p{n}", ty, tuple(dims), **facts)
        self.lines.append(f"  p{n} = {_shape(ty, dims)} parameter({n})")
        self.params[-1] = v
        self.pool.append(v)
        return v

    def constant(self, ty: str, v=None) -> Val:
        v = self.value(ty) if v is None else v
        x = float(v) if ty != "pred" else 0.0
        return self.emit(ty, (), f"constant({_literal(ty, v)})", **self.facts_of(ty, x, x, 2))

    def broadcast_constant(self, ty: str, dims, v=None) -> Val:
        c = self.constant(ty, v)
        return self.emit(ty, dims, f"broadcast({c.name}), dimensions={{}}", [c],
                         **self.facts_of(ty, c.lo, c.hi, 2))

    def op_constant(self):
        ty = str(self.rng.choice(TYPES))
        rank = int(self.rng.integers(0, 3))
        dims = self.dims(rank)
        vals = np.array([self.value(ty) for _ in range(int(np.prod(dims, dtype=np.int64)))],
                        dtype=object).reshape(dims)

        def lit(a):
            if not isinstance(a, np.ndarray):
                return _literal(ty, a)
            if a.ndim == 0:
                return _literal(ty, a[()])
            return "{" + ", ".join(lit(x) for x in a) + "}"

        fl = [float(x) for x in vals.ravel()] or [0.0]
        return self.emit(ty, dims, f"constant({lit(vals)})",
                         **self.facts_of(ty, min(fl), max(fl), 2))

    def op_iota(self):
        ty = str(self.rng.choice([t for t in TYPES if t != "pred"]))
        dims = self.dims(int(self.rng.integers(1, 5)))
        d = int(self.rng.integers(0, len(dims)))
        return self.emit(ty, dims, f"iota(), iota_dimension={d}",
                         **self.facts_of(ty, 0.0, float(max(dims[d] - 1, 0)), 0))

    # -- elementwise -----------------------------------------------------------------------------

    def exact_float(self, ty, lo, hi, q) -> bool:
        mag = max(abs(lo), abs(hi))
        return q <= 12 and mag * 2.0 ** q < 2.0 ** PRECISION[ty]

    def float_result(self, a: Val, rhs: str, operands, lo, hi, q=None, scale=0.0, exact=None,
                     dims=None):
        """A float result (a's type; a's dimensions unless ``dims``): exact when every
        operand is and nothing rounds."""
        dims = a.dims if dims is None else dims
        exact = all(o.exact for o in operands) if exact is None else exact
        if exact and q is not None and self.exact_float(a.ty, lo, hi, q):
            return self.emit(a.ty, dims, rhs, operands, lo=lo, hi=hi, q=q)
        scale = max(scale, abs(lo), abs(hi), *(o.scale for o in operands))
        narrow = a.ty in ("bf16", "f16")
        return self.emit(a.ty, dims, rhs, operands, exact=False, lo=lo, hi=hi, scale=scale,
                         terminal=narrow)

    def op_unary(self):
        a = self.pick()
        if a is None:
            return None
        if a.ty == "pred":
            return self.emit("pred", a.dims, f"not({a.name})", [a])
        if a.ty in INTS:
            ops = ["negate", "not", "popcnt", "count-leading-zeros"]
            if a.ty[0] == "s":
                ops += ["abs", "sign"]
            op = str(self.rng.choice(ops))
            lo, hi = _int_range(a.ty)
            if op == "negate" and a.ty[0] == "s" and a.lo > lo:
                return self.emit(a.ty, a.dims, f"negate({a.name})", [a], lo=-a.hi, hi=-a.lo)
            if op == "sign":
                return self.emit(a.ty, a.dims, f"sign({a.name})", [a], lo=-1, hi=1)
            return self.emit(a.ty, a.dims, f"{op}({a.name})", [a], lo=lo, hi=hi)
        mag = a.mag
        ops = ["negate", "abs", "tanh", "logistic"]
        if a.exact:
            ops += ["floor", "ceil", "round-nearest-even", "round-nearest-afz", "sign"]
        if a.hi <= 20:
            ops += ["exponential", "exponential-minus-one"]
        if a.lo >= 0.5:
            ops += ["log", "sqrt", "rsqrt"]
        if a.lo >= -0.5:
            ops.append("log-plus-one")
        if mag <= 100:
            ops += ["sine", "cosine"]
        op = str(self.rng.choice(ops))
        r = f"{op}({a.name})"
        if op == "negate":
            return self.float_result(a, r, [a], -a.hi, -a.lo, a.q)
        if op == "abs":
            lo = 0.0 if a.lo <= 0 <= a.hi else min(abs(a.lo), abs(a.hi))
            return self.float_result(a, r, [a], lo, mag, a.q)
        if op in ("floor", "ceil", "round-nearest-even", "round-nearest-afz"):
            return self.float_result(a, r, [a], math.floor(a.lo), math.ceil(a.hi), 0)
        if op == "sign":
            return self.float_result(a, r, [a], -1.0, 1.0, 0)
        if op == "tanh":
            return self.float_result(a, r, [a], -1.0, 1.0, exact=False)
        if op == "logistic":
            return self.float_result(a, r, [a], 0.0, 1.0, exact=False)
        if op in ("sine", "cosine"):
            return self.float_result(a, r, [a], -1.0, 1.0, exact=False)
        if op == "exponential":
            e = math.exp(a.hi)
            return self.float_result(a, r, [a], 0.0, e, exact=False,
                                     scale=e * max(1.0, a.scale))
        if op == "exponential-minus-one":
            e = math.exp(a.hi)
            return self.float_result(a, r, [a], -1.0, e, exact=False,
                                     scale=e * max(1.0, a.scale))
        if op == "log":
            return self.float_result(a, r, [a], math.log(a.lo), math.log(a.hi), exact=False,
                                     scale=2 * a.scale)
        if op == "log-plus-one":
            return self.float_result(a, r, [a], math.log1p(a.lo), math.log1p(a.hi),
                                     exact=False, scale=2 * a.scale)
        if op == "sqrt":
            return self.float_result(a, r, [a], math.sqrt(a.lo), math.sqrt(a.hi), exact=False)
        # rsqrt
        return self.float_result(a, r, [a], 1 / math.sqrt(a.hi), 1 / math.sqrt(a.lo),
                                 exact=False, scale=1.5 * a.scale)

    def op_binary(self):
        a = self.pick()
        if a is None:
            return None
        if a.ty == "pred":
            b = self.partner(a)
            op = str(self.rng.choice(["and", "or", "xor"]))
            return self.emit("pred", a.dims, f"{op}({a.name}, {b.name})", [a, b])
        if a.ty in INTS:
            b = self.partner(a)
            ops = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
                   "and", "or", "xor", "shift-left", "shift-right-logical",
                   "shift-right-arithmetic"]
            op = str(self.rng.choice(ops))
            lo, hi = _int_range(a.ty)
            cands = {"add": (a.lo + b.lo, a.hi + b.hi), "subtract": (a.lo - b.hi, a.hi - b.lo),
                     "maximum": (max(a.lo, b.lo), max(a.hi, b.hi)),
                     "minimum": (min(a.lo, b.lo), min(a.hi, b.hi))}
            if op == "multiply":
                p = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
                cands["multiply"] = (min(p), max(p))
            rlo, rhi = cands.get(op, (lo, hi))
            if rlo < lo or rhi > hi:
                rlo, rhi = lo, hi
            return self.emit(a.ty, a.dims, f"{op}({a.name}, {b.name})", [a, b], lo=rlo, hi=rhi)
        exact_ops = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]
        if a.exact:
            exact_ops.append("remainder")
        op = str(self.rng.choice(exact_ops))
        b = self.partner(a, need_exact=(op == "remainder"))
        r = f"{op}({a.name}, {b.name})"
        if op in ("add", "subtract"):
            lo, hi = (a.lo + b.lo, a.hi + b.hi) if op == "add" else (a.lo - b.hi, a.hi - b.lo)
            return self.float_result(a, r, [a, b], lo, hi, max(a.q, b.q))
        if op == "multiply":
            p = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
            return self.float_result(a, r, [a, b], min(p), max(p), a.q + b.q,
                                     scale=max(a.scale * b.mag, b.scale * a.mag))
        if op in ("maximum", "minimum"):
            f = max if op == "maximum" else min
            return self.float_result(a, r, [a, b], f(a.lo, b.lo), f(a.hi, b.hi), max(a.q, b.q))
        if op == "remainder":
            m = min(a.mag, b.mag)
            return self.float_result(a, r, [a, b], -m, m, max(a.q, b.q))
        # divide: inexact; the divisor is an exact value (at least 2^-q away from 0, or 0:
        # a deterministic inf/NaN) or an interval outside (-0.5, 0.5)
        if b.exact:
            big = a.mag * 2.0 ** b.q
            return self.float_result(a, r, [a, b], -big, big, exact=False,
                                     scale=a.scale * 2.0 ** b.q)
        if b.lo >= 0.5 or b.hi <= -0.5:
            big = 2 * a.mag
            return self.float_result(a, r, [a, b], -big, big, exact=False,
                                     scale=max(2 * a.scale, 4 * a.mag * b.scale))
        return None

    def op_compare(self):
        a = self.pick(lambda v: v.exact and v.ty != "pred")
        if a is None:
            return None
        b = self.partner(a, need_exact=True)
        d = str(self.rng.choice(["EQ", "NE", "LT", "LE", "GT", "GE"]))
        return self.emit("pred", a.dims, f"compare({a.name}, {b.name}), direction={d}", [a, b])

    def op_select(self):
        a = self.pick()
        if a is None:
            return None
        p = self.pick(lambda v: v.ty == "pred" and v.dims == a.dims)
        if p is None:
            x = self.pick(lambda v: v.exact and v.ty != "pred" and v.dims == a.dims)
            if x is None:
                p = self.parameter("pred", a.dims)
            else:
                y = self.partner(x, need_exact=True)
                p = self.emit("pred", a.dims, f"compare({x.name}, {y.name}), direction=LT",
                              [x, y])
        b = self.partner(a)
        r = f"select({p.name}, {a.name}, {b.name})"
        if a.ty == "pred":
            return self.emit("pred", a.dims, r, [p, a, b])
        lo, hi = min(a.lo, b.lo), max(a.hi, b.hi)
        if a.ty in INTS:
            return self.emit(a.ty, a.dims, r, [p, a, b], lo=lo, hi=hi)
        return self.float_result(a, r, [p, a, b], lo, hi, max(a.q, b.q))

    def op_clamp(self):
        a = self.pick(lambda v: v.ty != "pred")
        if a is None:
            return None
        lo_v, hi_v = sorted([self.value(a.ty), self.value(a.ty)])
        if self.rng.random() < 0.5:  # rank-0 bounds on an array operand are legal HLO
            lo, hi = self.constant(a.ty, lo_v), self.constant(a.ty, hi_v)
        else:
            lo = self.broadcast_constant(a.ty, a.dims, lo_v)
            hi = self.broadcast_constant(a.ty, a.dims, hi_v)
        r = f"clamp({lo.name}, {a.name}, {hi.name})"
        if a.ty in INTS:
            return self.emit(a.ty, a.dims, r, [lo, a, hi], lo=lo_v, hi=hi_v)
        return self.float_result(a, r, [lo, a, hi], lo_v, hi_v, max(a.q, 2))

    def op_convert(self):
        a = self.pick()
        if a is None:
            return None
        to = str(self.rng.choice([t for t in TYPES if t != a.ty]))
        r = f"convert({a.name})"
        if a.ty == "pred":
            return self.emit(to, a.dims, r, [a], **self.facts_of(to, 0.0, 1.0, 0))
        if to == "pred":
            return self.emit(to, a.dims, r, [a]) if a.exact else None
        if to in INTS:
            if not a.exact:
                return None
            lo, hi = _int_range(to)
            if a.ty in INTS:
                ok = lo <= a.lo and a.hi <= hi
            else:  # truncation toward zero, saturating (inf too; NaN -> 0)
                ok = lo <= math.trunc(a.lo) and math.trunc(a.hi) <= hi and not self.specials
            if ok:
                return self.emit(to, a.dims, r, [a], lo=float(math.trunc(a.lo)),
                                 hi=float(math.trunc(a.hi)))
            return self.emit(to, a.dims, r, [a], lo=lo, hi=hi)
        # to a float type
        q = a.q if a.ty in FLOATS else 0
        if a.exact and self.exact_float(to, a.lo, a.hi, q):
            return self.emit(to, a.dims, r, [a], lo=a.lo, hi=a.hi, q=q)
        if a.exact:  # one rounding of exact values: deterministic, but no longer exact
            narrow = to in ("bf16", "f16")
            return self.emit(to, a.dims, r, [a], exact=False, lo=a.lo, hi=a.hi,
                             scale=a.mag, terminal=narrow)
        if PRECISION[to] < PRECISION[a.ty]:  # rounding an inexact value: terminal
            return self.emit(to, a.dims, r, [a], exact=False, lo=a.lo, hi=a.hi,
                             scale=a.scale, terminal=True)
        # widening an inexact value: its error is still the narrower type's, so its scale
        # is restated in units of the wider type's tolerance
        scale = a.scale * ATOL_SCALE[a.ty] / ATOL_SCALE[to]
        return self.emit(to, a.dims, r, [a], exact=False, lo=a.lo, hi=a.hi, scale=scale,
                         terminal=a.terminal)

    # -- data movement ------------------------------------------------------------------------

    def moved(self, a: Val, dims, rhs: str, operands=None, **changes) -> Val:
        facts = {"exact": a.exact, "lo": a.lo, "hi": a.hi, "q": a.q, "scale": a.scale}
        facts.update(changes)
        return self.emit(a.ty, dims, rhs, operands or [a], **facts)

    def op_broadcast(self):
        a = self.pick(lambda v: len(v.dims) < 4)
        if a is None:
            return None
        rank = int(self.rng.integers(len(a.dims), 5))
        for _ in range(10):
            keep = sorted(self.rng.choice(rank, len(a.dims), replace=False).tolist())
            dims = list(self.dims(rank))
            for k, d in zip(keep, a.dims):
                dims[k] = d
            if int(np.prod(dims, dtype=np.int64)) <= MAX_ELEMENTS:
                mapping = ",".join(str(k) for k in keep)
                return self.moved(a, dims, f"broadcast({a.name}), dimensions={{{mapping}}}")
        return None

    def op_reshape(self):
        a = self.pick()
        if a is None:
            return None
        n = a.size
        for _ in range(20):
            dims = self.dims()
            if n == 0 and 0 not in dims and len(dims) < 4:
                dims = dims + (0,)
            if int(np.prod(dims, dtype=np.int64)) == n:
                return self.moved(a, dims, f"reshape({a.name})")
        # the same elements with a 1 inserted or removed
        dims = [d for d in a.dims if d != 1] if 1 in a.dims else list(a.dims) + [1]
        if len(dims) > 4:
            return None
        return self.moved(a, tuple(dims), f"reshape({a.name})")

    def op_transpose(self):
        a = self.pick(lambda v: len(v.dims) >= 2)
        if a is None:
            return None
        perm = self.rng.permutation(len(a.dims)).tolist()
        dims = tuple(a.dims[p] for p in perm)
        perm_text = ",".join(map(str, perm))
        return self.moved(a, dims, f"transpose({a.name}), dimensions={{{perm_text}}}")

    def op_slice(self):
        a = self.pick(lambda v: len(v.dims) >= 1)
        if a is None:
            return None
        parts, dims = [], []
        for d in a.dims:
            start = int(self.rng.integers(0, d + 1))
            limit = int(self.rng.integers(start, d + 1))
            stride = int(self.rng.choice([1, 1, 2, 3]))
            parts.append(f"[{start}:{limit}" + (f":{stride}]" if stride != 1 else "]"))
            dims.append(-(-(limit - start) // stride))
        return self.moved(a, dims, f"slice({a.name}), slice={{{', '.join(parts)}}}")

    def op_concatenate(self):
        a = self.pick(lambda v: len(v.dims) >= 1)
        if a is None:
            return None
        d = int(self.rng.integers(0, len(a.dims)))
        others = [a]
        for _ in range(int(self.rng.integers(1, 3))):
            b = self.pick(lambda v: v.ty == a.ty and len(v.dims) == len(a.dims) and all(
                x == y for k, (x, y) in enumerate(zip(v.dims, a.dims)) if k != d))
            if b is None or self.rng.random() < 0.3:
                dims = list(a.dims)
                dims[d] = int(self.rng.integers(0, 4))
                b = self.broadcast_constant(a.ty, dims) if self.rng.random() < 0.5 else \
                    self.parameter(a.ty, tuple(dims))
            others.append(b)
        dims = list(a.dims)
        dims[d] = sum(o.dims[d] for o in others)
        if int(np.prod(dims, dtype=np.int64)) > MAX_ELEMENTS:
            return None
        names = ", ".join(o.name for o in others)
        return self.merged(a, others, dims, f"concatenate({names}), dimensions={{{d}}}")

    def merged(self, a: Val, operands, dims, rhs: str) -> Val:
        """A data-movement result holding values of several operands of a's type."""
        exact = all(o.exact for o in operands)
        facts = {"lo": min(o.lo for o in operands), "hi": max(o.hi for o in operands)}
        if a.ty in FLOATS:
            facts["q"] = max(o.q for o in operands)
            if not exact:
                facts.update(exact=False, scale=max(max(o.scale for o in operands),
                                                    facts["hi"], -facts["lo"]))
        return self.emit(a.ty, dims, rhs, operands, **facts)

    def op_pad(self):
        a = self.pick(lambda v: len(v.dims) >= 1)
        if a is None:
            return None
        v = self.constant(a.ty)
        parts, dims = [], []
        for d in a.dims:  # negative edges remove elements
            interior = int(self.rng.integers(0, 2)) if d > 1 else 0
            low, high = (int(x) for x in self.rng.integers(-1, 3, 2))
            parts.append(f"{low}_{high}" + (f"_{interior}" if interior else ""))
            dims.append(d + max(d - 1, 0) * interior + low + high)
        if int(np.prod(dims, dtype=np.int64)) > MAX_ELEMENTS or min(dims) < 0:
            return None
        return self.merged(a, [a, v], dims, f"pad({a.name}, {v.name}), padding={'x'.join(parts)}")

    def op_reverse(self):
        a = self.pick(lambda v: len(v.dims) >= 1)
        if a is None:
            return None
        k = int(self.rng.integers(1, len(a.dims) + 1))
        ds = sorted(self.rng.choice(len(a.dims), k, replace=False).tolist())
        return self.moved(a, a.dims, f"reverse({a.name}), dimensions={{{','.join(map(str, ds))}}}")

    # -- reduce ------------------------------------------------------------------------------

    def reducer(self, op: str, ty: str) -> str:
        key = (op, ty)
        if key not in self.reducers:
            self.reducers[key] = f"{op}_{ty}"
        return self.reducers[key]

    def op_reduce(self):
        a = self.pick(lambda v: len(v.dims) >= 1)
        if a is None:
            return None
        k = int(self.rng.integers(1, len(a.dims) + 1)) if self.rng.random() < 0.95 else 0
        ds = sorted(self.rng.choice(len(a.dims), k, replace=False).tolist())
        n = int(np.prod([a.dims[d] for d in ds], dtype=np.int64))
        dims = tuple(d for i, d in enumerate(a.dims) if i not in ds)
        if a.ty == "pred":
            op = str(self.rng.choice(["and", "or"]))
            init = "true" if op == "and" else "false"
        else:
            ops = ["add", "maximum", "minimum"]
            if a.exact:
                ops.append("multiply")
            op = str(self.rng.choice(ops))
            if a.ty in INTS:
                lo, hi = _int_range(a.ty)
                init = {"add": "0", "multiply": "1", "maximum": str(lo), "minimum": str(hi)}[op]
            else:
                init = {"add": "0", "multiply": "1", "maximum": "-inf", "minimum": "inf"}[op]
        c = self.emit(a.ty, (), f"constant({init})", **self.facts_of(a.ty, 0.0, 0.0, 0))
        rhs = (f"reduce({a.name}, {c.name}), dimensions={{{','.join(map(str, ds))}}}, "
               f"to_apply={self.reducer(op, a.ty)}")
        if a.ty == "pred":
            return self.emit("pred", dims, rhs, [a, c])
        if a.ty in INTS:
            lo, hi = _int_range(a.ty)
            if op in ("maximum", "minimum"):  # of no elements: the init
                rlo, rhi = (lo, hi) if n == 0 else (a.lo, a.hi)
            elif op == "add" and lo <= n * a.lo and n * a.hi <= hi:
                rlo, rhi = min(0, n * a.lo), max(0, n * a.hi)
            else:
                rlo, rhi = lo, hi
            return self.emit(a.ty, dims, rhs, [a, c], lo=rlo, hi=rhi)
        if op == "add":
            lo, hi = min(0.0, n * a.lo), max(0.0, n * a.hi)
            return self.float_result(a, rhs, [a, c], lo, hi, a.q, dims=dims,
                                     scale=max(n, 1) * max(a.scale, a.mag))
        if op == "multiply":
            m = a.mag ** n if n < 64 else math.inf
            if m > USABLE_BOUND:
                return None
            return self.float_result(a, rhs, [a, c], -m, m, a.q * n, scale=m, dims=dims)
        # max/min of no elements is the init (+-inf): an exact special value
        return self.float_result(a, rhs, [a, c], a.lo, a.hi, a.q, dims=dims)


KINDS = ["unary", "binary", "compare", "select", "clamp", "convert", "broadcast", "reshape",
         "transpose", "slice", "concatenate", "pad", "reverse", "iota", "constant", "reduce"]
_W = {"unary": 14, "binary": 16, "compare": 5, "select": 5, "clamp": 2, "convert": 8,
      "broadcast": 7, "reshape": 6, "transpose": 5, "slice": 6, "concatenate": 4, "pad": 4,
      "reverse": 3, "iota": 2, "constant": 2, "reduce": 9}
WEIGHTS = np.array([_W[k] for k in KINDS], dtype=np.float64) / sum(_W.values())


# -- comparison ----------------------------------------------------------------------------------


def _leaves(result):
    return list(result) if isinstance(result, tuple) else [result]


def compare_leaf(got, want, v: Val) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return (f"%{v.name}: cpu {got.dtype}{list(got.shape)}, interpreter "
                f"{want.dtype}{list(want.shape)}")
    if v.ty not in FLOATS or v.exact:
        if v.ty in FLOATS:
            g, w = got.astype(np.float64), want.astype(np.float64)
            bits = got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")
            bad = ~(bits | (np.isnan(g) & np.isnan(w)))
        else:
            bad = got != want
        if not bad.any():
            return None
        idx = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:4]]
        return (f"%{v.name} ({v.ty}, exact: bit-exact required): {int(bad.sum())} of "
                f"{bad.size} differ; " + "; ".join(
                    f"at {ix}: cpu {got[ix]!r}, interpreter {want[ix]!r}" for ix in idx))
    g, w = got.astype(np.float64), want.astype(np.float64)
    same_special = (np.isnan(g) & np.isnan(w)) | (np.isinf(w) & (g == w))
    finite = np.isfinite(g) & np.isfinite(w)
    allowed = RTOL[v.ty] * np.abs(w) + ATOL_SCALE[v.ty] * v.scale
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(finite, np.abs(g - w), np.inf)
    ok = same_special | (finite & (err <= allowed))
    if v.ty in ("bf16", "f16"):  # or the neighbour of a narrow rounding
        near = compare_arrays(got, want, v.name)
        if near is None:
            return None
    if ok.all():
        return None
    idx = [tuple(int(i) for i in ix) for ix in np.argwhere(~ok)[:4]]
    return (f"%{v.name} ({v.ty}, inexact, scale {v.scale:g}): {int((~ok).sum())} of {ok.size} "
            f"differ, max |error| {float(np.where(ok, 0, err).max()):g}; " + "; ".join(
                f"at {ix}: cpu {got[ix]!r}, interpreter {want[ix]!r}" for ix in idx))


def _cpu(module, prog: Program, text: str, what: str):
    """The module on the backend, kernel outputs guarded against writes outside of them."""
    try:
        return run_cpu(module, prog.inputs)
    except Exception as e:
        raise AssertionError(f"seed {prog.seed}: cpu backend, {what}: {type(e).__name__}: "
                             f"{e}\n{text}") from e


def _check(prog: Program, text: str, got, want, what: str) -> None:
    for v, g, w in zip(prog.roots, _leaves(got), _leaves(want)):
        msg = compare_leaf(g, w, v)
        assert msg is None, f"seed {prog.seed}, {what}: {msg}\n{text}"


def _cases():
    for s in SEEDS:
        marks = [pytest.mark.xfail(strict=True, reason="cpu backend: " + KNOWN_BACKEND_BUGS[s])] \
            if s in KNOWN_BACKEND_BUGS else []
        yield pytest.param(s, id=f"seed{s}", marks=marks)


@pytest.mark.parametrize("seed", list(_cases()))
def test_random_program(seed):
    prog = Program(seed)
    text = prog.text()
    module = parse_hlo_module(text)
    verify_module(module)
    want = evaluate(module, *prog.inputs)
    got = _cpu(module, prog, text, "the module")
    _check(prog, text, got, want, "cpu vs interpreter")

    fused = parse_hlo_module(text)
    make_pipeline(["fusion"]).run(fused)
    fused_text = fused.to_string(print_large_constants=True)
    fused = parse_hlo_module(fused_text)
    again = evaluate(fused, *prog.inputs)
    for v, g, w in zip(prog.roots, _leaves(again), _leaves(want)):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes() or compare_leaf(g, w, replace(
            v, exact=True)) is None, f"seed {seed}: the fusion pass changed %{v.name}\n{fused_text}"
    got = _cpu(fused, prog, fused_text, "the fused module")
    _check(prog, fused_text, got, want, "cpu on the fused module vs interpreter")


def test_programs_cover_the_op_set():
    """The seeds together exercise every kind of instruction and element type asked for."""
    texts = [Program(s).text() for s in SEEDS]
    joined = "\n".join(texts)
    for op in ["negate", "exponential", "tanh", "add(", "divide", "compare(", "select(",
               "clamp(", "convert(", "broadcast(", "reshape(", "transpose(", "slice(",
               "concatenate(", "pad(", "iota(", "reverse(", "constant(", "reduce(",
               "to_apply=add_", "to_apply=maximum_", "to_apply=minimum_", "to_apply=multiply_"]:
        assert op in joined, op
    for ty in TYPES:
        assert f" = {ty}[" in joined, ty
    ranks = {len(v.dims) for s in SEEDS[:40] for v in Program(s).pool}
    assert ranks == {0, 1, 2, 3, 4}
    sizes = [sum(1 for line in t.splitlines() if " = " in line and "parameter(" not in line
                 and not line.startswith(("  x =", "  y =", "  ROOT r ="))) for t in texts]
    assert min(sizes) >= 3 and max(sizes) <= 80
