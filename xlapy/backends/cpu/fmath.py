"""Vectorisable f32/f64 transcendentals in LLVM IR, for the element generators.

Every function here is branch-free straight-line IR (selects, integer bit manipulation,
``llvm.fmuladd``/``llvm.roundeven``/``llvm.fabs``/``llvm.copysign`` intrinsics, no libm
call), so a loop of them vectorises (``<8 x float>`` on AVX2). Inputs and results are f32 or
f64 values (the type of ``x``).

Methods (``FMath(builder)``):

- ``exp(x)``: x = k ln2 + r (Cody-Waite, |r| <= ln2/2, k = roundeven(x log2e)),
  e^r = 1 + r + r^2 Q(r), scaled by 2^k in two steps (so results that are denormal are
  rounded once, and 2^k itself never leaves the normal range).
- ``expm1(x)``: the same reduction, 2^k (e^r - 1) + (2^k - 1), with e^r - 1 = r + r^2 Q(r)
  (no cancellation near 0; x = 0 returns x, keeping -0).
- ``log(x)``: x = 2^e m with m in [sqrt(1/2), sqrt(2)) (denormals scaled first),
  log(m) = f - (f^2/2 - s (f^2/2 + s^2 T(s^2))), f = m - 1, s = f / (2 + f).
- ``log1p(x)``: log(1 + x) plus the rounding error of 1 + x divided by 1 + x.
- ``tanh(x)``: f32: XLA:CPU's rational approximation (``_tanh_f32``, bit for bit); f64:
  sign(x) e / (e + 2), e = expm1(2|x|) (|x| clamped where tanh rounds to 1).
- ``erf_f32(x)``: f32 erf in f64: x P(x^2) near 0, 1 - e^(-x^2) R(x) beyond 0.9
  (polynomial fits of erf(x)/x and erfc(x) e^(x^2)), rounded once.

Q and T are Chebyshev fits (mpmath.chebyfit, 40 digits) of (e^r - 1 - r) / r^2 on
|r| <= ln2/2 (degree 4 for f32, 10 for f64; fit error 6.5e-8 and 1.4e-18 on Q, i.e. 8e-9
and 2e-19 relative on e^r) and of (2 atanh(s) - 2 s) / s^3 as a function of z = s^2 on
[0, 0.0295] (degree 3 for f32, 6 for f64). ln2 is split into a high part with trailing zero
bits (so k ln2_hi is exact) and a low part.

Measured maximum error against the interpreter (libm in f64, rounded) on 2^24 inputs
spread over each function's whole domain (tests/backends/cpu/test_cpu_elementwise_ops.py
measures them again on every run): see ``ULP_BOUNDS``.
"""

from __future__ import annotations

from llvmlite import ir

F32, F64 = ir.FloatType(), ir.DoubleType()
I32, I64 = ir.IntType(32), ir.IntType(64)

#: Maximum measured error in ulps against the interpreter, per (function, type); the tests
#: compare with these tolerances.
ULP_BOUNDS = {
    ("exponential", "f32"): 1, ("exponential", "f64"): 1,
    ("exponential-minus-one", "f32"): 2, ("exponential-minus-one", "f64"): 2,
    ("log", "f32"): 1, ("log", "f64"): 1,
    ("log-plus-one", "f32"): 2, ("log-plus-one", "f64"): 2,
    ("tanh", "f32"): 0, ("tanh", "f64"): 3,  # f32: XLA:CPU's approximation in both paths
    ("logistic", "f32"): 4, ("logistic", "f64"): 4,
    ("erf", "f32"): 1,
}

# Q(r) = (e^r - 1 - r) / r^2, highest degree first.
_Q32 = (0.0013926183587713494, 0.008363179052722578, 0.041666554617204574,
        0.16666576989698775, 0.5)
_Q64 = (2.0914686968086876e-09, 2.5105217004720745e-08, 2.75572736431103e-07,
        2.7557255400206422e-06, 2.4801587325547743e-05, 0.00019841269874820627,
        0.0013888888888883748, 0.008333333333326136, 0.04166666666666667,
        0.1666666666666667, 0.5)
# T(z) = (2 atanh(s) - 2 s) / s^3, z = s^2, highest degree first.
_T32 = (0.23330581938241893, 0.2855081659971155, 0.40000121876972, 0.6666666655445165)
_T64 = (0.14616585424888623, 0.15331710618210773, 0.18182889455674947,
        0.22222211130259878, 0.2857142862600327, 0.39999999999899444, 0.666666666666667)


# erf(x) / x as a polynomial in z = x^2 on |x| < 0.91; erfc(x) e^(x^2) as a polynomial in
# t = (x - 2.45) / 1.55 on 0.9 <= x <= 4 (fits: 1.6e-13 and 3.6e-12 absolute).
_ERF_P = (1.1413784540118495e-06, -1.4191955267583969e-05, 0.00011995870567762662,
          -0.0008545479338139947, 0.005223896946202668, -0.02686615775091791,
          0.11283791567429725, -0.3761263889997664, 1.1283791670953487)
_ERF_R = (4.54867634192138e-07, -1.304584364759986e-06, 1.745025178039049e-06,
          -4.643494416261721e-06, 1.545270025094838e-05, -4.029084353431596e-05,
          9.962819435614224e-05, -0.0002471325229479481, 0.0005992865569798427,
          -0.0014112608903125634, 0.0032281053469164953, -0.007158179091081104,
          0.015345528609005411, -0.03170454203322303, 0.06288826093177333,
          -0.11919874338646885, 0.2145870922410938)


class _Consts:
    """The per-type constants of the reductions."""

    def __init__(self, ty):
        if ty == F32:
            self.ity, self.mant, self.bias, self.width = I32, 23, 127, 32
            self.ln2_hi, self.ln2_lo = 0.693145751953125, 1.4286068203094173e-06
            self.exp_lo, self.exp_hi = -104.0, 89.0  # beyond: 0 and inf
            self.q, self.t = _Q32, _T32
            self.sqrt_half_bits = 0x3F3504F3
            self.denormal_scale = 23
            self.expm1_big = 100  # k above which 2^k - 1 = 2^k in the type
        else:
            self.ity, self.mant, self.bias, self.width = I64, 52, 1023, 64
            self.ln2_hi, self.ln2_lo = 0.6931471803691238, 1.9082149292705877e-10
            self.exp_lo, self.exp_hi = -746.0, 710.0
            self.q, self.t = _Q64, _T64
            self.sqrt_half_bits = 0x3FE6A09E667F3BCD
            self.denormal_scale = 54
            self.tanh_clamp = 20.0  # tanh(x) rounds to 1 above 19.06
            self.expm1_big = 1000
        self.log2e = 1.4426950408889634
        self.ln2 = 0.6931471805599453


class FMath:
    """Emits the functions at ``builder``'s position; every value is named ``name.*``."""

    def __init__(self, builder: ir.IRBuilder):
        self.b = builder
        self.module = builder.module

    # -- helpers ---------------------------------------------------------------------------

    def _intrinsic(self, name: str, ret, args):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return fn

    def call(self, base: str, args, name: str):
        ty = args[0].type
        suffix = "f32" if ty == F32 else "f64"
        fn = self._intrinsic(f"{base}.{suffix}", ty, [a.type for a in args])
        return self.b.call(fn, args, name=name)

    def fma(self, a, c, d, name):
        """a * c + d (fused where the target has FMA)."""
        return self.call("llvm.fmuladd", [a, c, d], name)

    def horner(self, coeffs, x, name):
        ty = x.type
        acc = ir.Constant(ty, coeffs[0])
        for k, c in enumerate(coeffs[1:]):
            acc = self.fma(acc, x, ir.Constant(ty, c), f"{name}.h{k}")
        return acc

    def is_nan(self, x, name):
        return self.b.fcmp_unordered("uno", x, x, name=f"{name}.isnan")

    def _clamp(self, x, lo, hi, name):
        """x clamped to [lo, hi]; NaN becomes lo (the caller restores NaN)."""
        b, ty = self.b, x.type
        x = b.select(b.fcmp_unordered("<", x, ir.Constant(ty, lo), name=f"{name}.lt"),
                     ir.Constant(ty, lo), x, name=f"{name}.lo")
        return b.select(b.fcmp_ordered(">", x, ir.Constant(ty, hi), name=f"{name}.gt"),
                        ir.Constant(ty, hi), x, name=f"{name}.hi")

    def _pow2(self, n, k: _Consts, name):
        """2^n for an integer n (of k.ity) in the normal exponent range."""
        b = self.b
        ty = F32 if k.width == 32 else F64
        e = b.add(n, ir.Constant(k.ity, k.bias), name=f"{name}.biased")
        return b.bitcast(b.shl(e, ir.Constant(k.ity, k.mant), name=f"{name}.bits"), ty,
                         name=name)

    def _reduce(self, x, k: _Consts, name):
        """(kf, n, r): x = n ln2 + r with |r| <= ln2/2 (x already clamped, not NaN)."""
        b, ty = self.b, x.type
        kf = self.call("llvm.roundeven", [b.fmul(x, ir.Constant(ty, k.log2e),
                                                  name=f"{name}.scaled")], f"{name}.k")
        r = self.fma(kf, ir.Constant(ty, -k.ln2_hi), x, f"{name}.rhi")
        r = self.fma(kf, ir.Constant(ty, -k.ln2_lo), r, f"{name}.r")
        n = b.fptosi(kf, k.ity, name=f"{name}.n")
        return kf, n, r

    def _em1(self, r, k: _Consts, name):
        """e^r - 1 for |r| <= ln2/2: r + r^2 Q(r)."""
        b = self.b
        q = self.horner(k.q, r, f"{name}.q")
        return self.fma(b.fmul(r, r, name=f"{name}.r2"), q, r, f"{name}.em1")

    # -- exp, expm1 ------------------------------------------------------------------------

    def exp(self, x, name: str):
        b, ty = self.b, x.type
        k = _Consts(ty)
        xc = self._clamp(x, k.exp_lo, k.exp_hi, f"{name}.x")
        _, n, r = self._reduce(xc, k, name)
        p = b.fadd(ir.Constant(ty, 1.0), self._em1(r, k, name), name=f"{name}.p")
        # p * 2^n as p * 2^(n/2) * 2^(n - n/2): exact until the last product, which rounds
        # once (also into the denormals) or overflows to inf.
        n1 = b.ashr(n, ir.Constant(k.ity, 1), name=f"{name}.n1")
        n2 = b.sub(n, n1, name=f"{name}.n2")
        v = b.fmul(p, self._pow2(n1, k, f"{name}.s1"), name=f"{name}.v1")
        v = b.fmul(v, self._pow2(n2, k, f"{name}.s2"), name=f"{name}.v")
        return b.select(self.is_nan(x, name), x, v, name=name)

    def expm1(self, x, name: str):
        b, ty = self.b, x.type
        k = _Consts(ty)
        xc = self._clamp(x, k.exp_lo, k.exp_hi, f"{name}.x")
        _, n, r = self._reduce(xc, k, name)
        em1 = self._em1(r, k, name)
        # 2^n (e^r - 1) + (2^n - 1) with 2^n kept normal: n below -bias+1 gives -1 anyway.
        lo_n = ir.Constant(k.ity, 1 - k.bias)
        nt = b.select(b.icmp_signed("<", n, lo_n, name=f"{name}.nsmall"), lo_n, n,
                      name=f"{name}.nt")
        big = b.icmp_signed(">", n, ir.Constant(k.ity, k.expm1_big), name=f"{name}.big")
        nt = b.select(big, ir.Constant(k.ity, 0), nt, name=f"{name}.ntb")
        t = self._pow2(nt, k, f"{name}.t")
        small = self.fma(t, em1, b.fsub(t, ir.Constant(ty, 1.0), name=f"{name}.tm1"),
                         f"{name}.small")
        # large n: e^x (the -1 is below half an ulp), scaled in two steps as exp
        p = b.fadd(ir.Constant(ty, 1.0), em1, name=f"{name}.p")
        n1 = b.ashr(n, ir.Constant(k.ity, 1), name=f"{name}.n1")
        n2 = b.sub(n, n1, name=f"{name}.n2")
        large = b.fmul(b.fmul(p, self._pow2(n1, k, f"{name}.s1"), name=f"{name}.v1"),
                       self._pow2(n2, k, f"{name}.s2"), name=f"{name}.large")
        v = b.select(big, large, small, name=f"{name}.v")
        zero = b.fcmp_ordered("==", x, ir.Constant(ty, 0.0), name=f"{name}.zero")
        v = b.select(zero, x, v, name=f"{name}.z")  # expm1(-0) = -0
        return b.select(self.is_nan(x, name), x, v, name=name)

    # -- log, log1p ------------------------------------------------------------------------

    def _log_parts(self, x, k: _Consts, name):
        """(e, f, s, hfsq, R) for positive finite x: x = 2^e (1 + f), the pieces of
        log(1 + f) = f - (hfsq - s (hfsq + R))."""
        b, ty = self.b, x.type
        tiny = b.fcmp_ordered("<", x, ir.Constant(ty, 2.0 ** (1 - k.bias)), name=f"{name}.tiny")
        xs = b.select(tiny, b.fmul(x, ir.Constant(ty, 2.0 ** k.denormal_scale),
                                   name=f"{name}.scaled"), x, name=f"{name}.xs")
        shift = b.select(tiny, ir.Constant(k.ity, k.denormal_scale), ir.Constant(k.ity, 0),
                         name=f"{name}.shift")
        ix = b.sub(b.bitcast(xs, k.ity, name=f"{name}.bits"),
                   ir.Constant(k.ity, k.sqrt_half_bits), name=f"{name}.ix")
        e = b.sub(b.ashr(ix, ir.Constant(k.ity, k.mant), name=f"{name}.e0"), shift,
                  name=f"{name}.e")
        mbits = b.add(b.and_(ix, ir.Constant(k.ity, (1 << k.mant) - 1), name=f"{name}.mm"),
                      ir.Constant(k.ity, k.sqrt_half_bits), name=f"{name}.mbits")
        m = b.bitcast(mbits, ty, name=f"{name}.m")
        f = b.fsub(m, ir.Constant(ty, 1.0), name=f"{name}.f")
        s = b.fdiv(f, b.fadd(f, ir.Constant(ty, 2.0), name=f"{name}.2f"), name=f"{name}.s")
        z = b.fmul(s, s, name=f"{name}.z")
        big_r = b.fmul(z, self.horner(k.t, z, f"{name}.t"), name=f"{name}.R")
        hfsq = b.fmul(b.fmul(f, f, name=f"{name}.ff"), ir.Constant(ty, 0.5), name=f"{name}.hfsq")
        ef = b.sitofp(e, ty, name=f"{name}.ef")
        return ef, f, s, hfsq, big_r

    def _log_combine(self, ef, f, s, hfsq, big_r, extra, k: _Consts, name):
        """e ln2 + log(1 + f) (+ extra, a small correction)."""
        b, ty = self.b, ef.type
        inner = self.fma(s, b.fadd(hfsq, big_r, name=f"{name}.hr"),
                         self.fma(ef, ir.Constant(ty, k.ln2_lo), extra, f"{name}.lo"),
                         f"{name}.in")
        low = b.fsub(b.fsub(hfsq, inner, name=f"{name}.d"), f, name=f"{name}.df")
        return b.fsub(b.fmul(ef, ir.Constant(ty, k.ln2_hi), name=f"{name}.hi"), low,
                      name=f"{name}.v")

    def _log_specials(self, x, v, name):
        """log's values at 0 (-inf), negatives (NaN), +inf and NaN."""
        b, ty = self.b, x.type
        v = b.select(b.fcmp_ordered("==", x, ir.Constant(ty, float("inf")), name=f"{name}.inf"),
                     x, v, name=f"{name}.vinf")
        v = b.select(b.fcmp_ordered("==", x, ir.Constant(ty, 0.0), name=f"{name}.zero"),
                     ir.Constant(ty, float("-inf")), v, name=f"{name}.vzero")
        v = b.select(b.fcmp_ordered("<", x, ir.Constant(ty, 0.0), name=f"{name}.neg"),
                     ir.Constant(ty, float("nan")), v, name=f"{name}.vneg")
        return b.select(self.is_nan(x, name), x, v, name=name)

    def log(self, x, name: str):
        ty = x.type
        k = _Consts(ty)
        ef, f, s, hfsq, big_r = self._log_parts(x, k, name)
        v = self._log_combine(ef, f, s, hfsq, big_r, ir.Constant(ty, 0.0), k, name)
        return self._log_specials(x, v, name)

    def log1p(self, x, name: str):
        b, ty = self.b, x.type
        k = _Consts(ty)
        one = ir.Constant(ty, 1.0)
        u = b.fadd(x, one, name=f"{name}.u")
        ef, f, s, hfsq, big_r = self._log_parts(u, k, name)
        # log(1 + x) = log(u) + (x - (u - 1)) / u to first order (u = 1 + x rounded)
        corr = b.fdiv(b.fsub(x, b.fsub(u, one, name=f"{name}.um1"), name=f"{name}.err"), u,
                      name=f"{name}.corr")
        finite = b.fcmp_ordered("<", self.call("llvm.fabs", [u], f"{name}.absu"),
                                ir.Constant(ty, float("inf")), name=f"{name}.finite")
        corr = b.select(finite, corr, ir.Constant(ty, 0.0), name=f"{name}.corrf")
        v = self._log_combine(ef, f, s, hfsq, big_r, corr, k, name)
        v = self._log_specials(u, v, name + ".l")
        zero = b.fcmp_ordered("==", x, ir.Constant(ty, 0.0), name=f"{name}.zero")
        v = b.select(zero, x, v, name=f"{name}.z")  # log1p(-0) = -0
        return b.select(self.is_nan(x, name), x, v, name=name)

    # -- tanh, pow -------------------------------------------------------------------------

    def tanh(self, x, name: str):
        b, ty = self.b, x.type
        if ty == F32:
            return self._tanh_f32(x, name)
        k = _Consts(ty)
        ax = self.call("llvm.fabs", [x], f"{name}.abs")
        ax = b.select(b.fcmp_ordered(">", ax, ir.Constant(ty, k.tanh_clamp), name=f"{name}.big"),
                      ir.Constant(ty, k.tanh_clamp), ax, name=f"{name}.ax")
        e = self.expm1(b.fadd(ax, ax, name=f"{name}.2x"), f"{name}.em1")
        v = b.fdiv(e, b.fadd(e, ir.Constant(ty, 2.0), name=f"{name}.den"), name=f"{name}.q")
        return self.call("llvm.copysign", [v, x], name)

    def _tanh_f32(self, x, name: str):
        """XLA:CPU's f32 tanh (its EmitFastTanh with FMAs; the numbers are the
        interpreter's, numeric.TANH_F32): x itself below 0.0004 in magnitude, +-1 from 20
        on, else the rational function x P(x^2) / Q(x^2) of x clamped to +-TANH_F32_CLAMP,
        each polynomial in Horner form by FMAs, NaN kept."""
        from xlapy.interpreter.kernels.numeric import TANH_F32_CLAMP, TANH_F32_DEN, TANH_F32_NUM

        b = self.b
        ax = self.call("llvm.fabs", [x], f"{name}.abs")
        hi, lo = ir.Constant(F32, TANH_F32_CLAMP), ir.Constant(F32, -TANH_F32_CLAMP)
        xc = b.select(b.fcmp_ordered(">", x, hi, name=f"{name}.gt"), hi, x, name=f"{name}.c0")
        xc = b.select(b.fcmp_ordered("<", xc, lo, name=f"{name}.lt"), lo, xc, name=f"{name}.c")
        x2 = b.fmul(xc, xc, name=f"{name}.x2")
        num = b.fmul(xc, self.horner(TANH_F32_NUM, x2, f"{name}.p"), name=f"{name}.num")
        r = b.fdiv(num, self.horner(TANH_F32_DEN, x2, f"{name}.q"), name=f"{name}.r")
        r = b.select(b.fcmp_ordered("<", ax, ir.Constant(F32, 0.0004), name=f"{name}.tiny"),
                     x, r, name=f"{name}.small")
        one = self.call("llvm.copysign", [ir.Constant(F32, 1.0), x], f"{name}.one")
        return b.select(b.fcmp_ordered(">=", ax, ir.Constant(F32, 20.0), name=f"{name}.big"),
                        one, r, name=name)

    def erf_f32(self, x, name: str):
        """f32 erf computed in f64: x P(x^2) for |x| < 0.9, else sign(x) (1 - e^(-x^2)
        R(|x|)) with |x| clamped to 4 (where f32 erf is 1); rounded once."""
        b = self.b
        xd = b.fpext(x, F64, name=f"{name}.xd")
        ax = self.call("llvm.fabs", [xd], f"{name}.ax")
        big_x = b.fcmp_ordered(">", ax, ir.Constant(F64, 4.0), name=f"{name}.over")
        axc = b.select(big_x, ir.Constant(F64, 4.0), ax, name=f"{name}.axc")
        z = b.fmul(axc, axc, name=f"{name}.z")  # exact: x has 24 bits
        small = b.fmul(xd, self.horner(_ERF_P, z, f"{name}.p"), name=f"{name}.small")
        t = b.fmul(b.fsub(axc, ir.Constant(F64, 2.45), name=f"{name}.t0"),
                   ir.Constant(F64, 1 / 1.55), name=f"{name}.t")
        tail = b.fmul(self.exp(b.fneg(z, name=f"{name}.nz"), f"{name}.exp"),
                      self.horner(_ERF_R, t, f"{name}.r"), name=f"{name}.erfc")
        large = self.call("llvm.copysign", [b.fsub(ir.Constant(F64, 1.0), tail,
                                                   name=f"{name}.one"), xd], f"{name}.large")
        v = b.select(b.fcmp_ordered("<", ax, ir.Constant(F64, 0.9), name=f"{name}.near0"),
                     small, large, name=f"{name}.v")
        v = b.select(self.is_nan(xd, name), xd, v, name=f"{name}.nan")
        return b.fptrunc(v, F32, name=name)


__all__ = ["ULP_BOUNDS", "FMath"]
