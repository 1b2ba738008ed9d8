"""CHLO ops, as XLA legalizes them before translating to HLO.

XLA keeps ``chlo.erf``, ``chlo.top_k`` and ``chlo.ragged_dot`` as the HLO ops ``erf``,
``topk`` and ``ragged-dot`` (ChloLegalizeToHighLevelMhlo) and decomposes the others into
StableHLO ops (StableHLO's ChloLegalizeToStablehlo and its decomposition patterns): the
broadcasting binary ops (``chlo.broadcast_add`` ...) broadcast their operands (numpy rules,
or ``broadcast_dimensions``) and apply the op; ``erfc``, ``erf_inv``, ``lgamma``,
``digamma``, ``zeta``, ``polygamma``, ``bessel_i1e`` are the Cephes/Lanczos polynomial and
series approximations with XLA's coefficients, computed in f32 for narrower float types;
``sinh``/``cosh`` use ``exp(x + log(1/2))``; ``asin``, ``acos``, ``asinh``, ``acosh``,
``atanh``, ``atan`` the real-argument formulas; ``next_after`` works on the bit patterns;
``mulhi`` widens; ``tan`` is HLO ``tan``. The same formulas in the same operation order, so
results are XLA's bit for bit. Complex arguments of the inverse trigonometric and
hyperbolic functions are refused with an error at the op (XLA decomposes them with the
Hull et al. algorithm, which xlapy does not have).

Owns ``lower_chlo`` and the small expression builder (``Ex``) the formulas are written in.
"""

from __future__ import annotations

import math

import numpy as np

from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.literal import Literal
from xlapy.stablehlo import mlir as M
from xlapy.stablehlo.convert import LocatedError, Lowering, a_int, a_ints, attr, struct_of

P = PrimitiveType


class Ex:
    """An instruction being computed, with arithmetic that emits HLO instructions."""

    __slots__ = ("low", "inst")

    def __init__(self, low: Lowering, inst):
        self.low = low
        self.inst = inst

    @property
    def shape(self) -> Shape:
        return self.inst.shape

    @property
    def et(self) -> PrimitiveType:
        return self.inst.shape.element_type

    def _other(self, v) -> "Ex":
        return v if isinstance(v, Ex) else self.like(v)

    def like(self, value) -> "Ex":
        """A constant of this value's element type and shape (chlo.constant_like)."""
        return const(self.low, value, self.et, self.shape)

    def op(self, opcode: str, *others, **values) -> "Ex":
        operands = [self.inst] + [self._other(o).inst for o in others]
        return Ex(self.low, self.low.make(opcode, operands, values or None))

    def __add__(self, o): return self.op("add", o)
    def __radd__(self, o): return self._other(o).op("add", self)
    def __sub__(self, o): return self.op("subtract", o)
    def __rsub__(self, o): return self._other(o).op("subtract", self)
    def __mul__(self, o): return self.op("multiply", o)
    def __rmul__(self, o): return self._other(o).op("multiply", self)
    def __truediv__(self, o): return self.op("divide", o)
    def __rtruediv__(self, o): return self._other(o).op("divide", self)
    def __neg__(self): return self.op("negate")
    def __and__(self, o): return self.op("and", o)
    def __or__(self, o): return self.op("or", o)

    def cmp(self, other, direction: str) -> "Ex":
        from xlapy.stablehlo.convert import read_hlo_attrs

        values = read_hlo_attrs("compare", {"direction": direction})
        return Ex(self.low, self.low.make("compare", [self.inst, self._other(other).inst],
                                          values))

    def lt(self, o): return self.cmp(o, "LT")
    def le(self, o): return self.cmp(o, "LE")
    def gt(self, o): return self.cmp(o, "GT")
    def ge(self, o): return self.cmp(o, "GE")
    def eq(self, o): return self.cmp(o, "EQ")
    def ne(self, o): return self.cmp(o, "NE")

    def select(self, on_true, on_false) -> "Ex":
        t = on_true if isinstance(on_true, Ex) else on_false.like(on_true)
        f = on_false if isinstance(on_false, Ex) else t.like(on_false)
        return Ex(self.low, self.low.make("select", [self.inst, t.inst, f.inst]))

    def convert(self, et: PrimitiveType) -> "Ex":
        return Ex(self.low, self.low.make("convert", [self.inst],
                                          shape=self.shape.with_element_type(et)))

    def bitcast(self, et: PrimitiveType) -> "Ex":
        return Ex(self.low, self.low.make("bitcast-convert", [self.inst],
                                          shape=self.shape.with_element_type(et)))

    def abs(self): return self.op("abs")
    def exp(self): return self.op("exponential")
    def expm1(self): return self.op("exponential-minus-one")
    def log(self): return self.op("log")
    def log1p(self): return self.op("log-plus-one")
    def sqrt(self): return self.op("sqrt")
    def floor(self): return self.op("floor")
    def sin(self): return self.op("sine")
    def cos(self): return self.op("cosine")
    def sign(self): return self.op("sign")
    def is_finite(self): return self.op("is-finite")
    def atan2(self, o): return self.op("atan2", o)
    def pow(self, o): return self.op("power", o)
    def rem(self, o): return self.op("remainder", o)
    def clamp(self, lo, hi):
        return Ex(self.low, self.low.make("clamp", [self._other(lo).inst, self.inst,
                                                    self._other(hi).inst]))


def const(low: Lowering, value, et: PrimitiveType, shape: Shape) -> Ex:
    """A scalar constant of ``et`` broadcast to ``shape`` (chlo.constant_like as XLA
    exports it)."""
    dtype = dtypes.to_dtype(et)
    if dtypes.is_floating(et) or dtypes.is_complex(et):
        arr = np.asarray(value, dtype=np.float64 if not dtypes.is_complex(et) else complex)
        with np.errstate(over="ignore"):  # 1e308 in f32 is inf, as MLIR rounds it
            arr = arr.astype(dtype)
    else:
        v = int(value)
        bits = dtypes.bit_width(et)
        if dtypes.is_unsigned_integral(et):
            v &= (1 << bits) - 1
        arr = np.asarray(v).astype(dtype) if not dtypes.is_signed_integral(et) else \
            np.asarray(((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))).astype(dtype)
    scalar = low.make("constant", [], {"literal": Literal.from_array(arr, Shape.scalar(et))},
                      shape=Shape.scalar(et))
    if shape.rank == 0:
        return Ex(low, scalar)
    return Ex(low, low.make("broadcast", [scalar], {"dimensions": ()},
                            shape=shape.with_element_type(et)))


def _finfo(et):
    import ml_dtypes

    return ml_dtypes.finfo(dtypes.to_dtype(et))


def _upcast(x: Ex, fn, *rest: Ex) -> Ex:
    """materializeWithUpcast: compute in f32 for floats narrower than f32."""
    if dtypes.is_floating(x.et) and dtypes.bit_width(x.et) < 32:
        original = x.et
        args = [a.convert(P.F32) for a in (x, *rest)]
        return fn(*args).convert(original)
    return fn(x, *rest)


def _poly(x: Ex, coeffs) -> Ex:
    """Horner: ((c0 * x + c1) * x + c2) ..."""
    if not coeffs:
        return x.like(0.0)
    p = x.like(coeffs[0])
    for c in coeffs[1:]:
        p = p * x + c
    return p


# -- erf family -----------------------------------------------------------------------------

_ERFC_P64 = [2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
             4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
             9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2]
_ERFC_Q64 = [1.00000000000000000000E0, 1.32281951154744992508E1, 8.67072140885989742329E1,
             3.54937778887819891062E2, 9.75708501743205489753E2, 1.82390916687909736289E3,
             2.24633760818710981792E3, 1.65666309194161350182E3, 5.57535340817727675546E2]
_ERFC_R64 = [5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
             6.16021097993053585195E0, 7.40974269950448939160E0, 2.97886665372100240670E0]
_ERFC_S64 = [1.00000000000000000000E0, 2.26052863220117276590E0, 9.39603524938001434673E0,
             1.20489539808096656605E1, 1.70814450747565897222E1, 9.60896809063285878198E0,
             3.36907645100081516050E0]
_ERF_T64 = [9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
            7.00332514112805075473E3, 5.55923013010394962768E4]
_ERF_U64 = [1.00000000000000000000E0, 3.35617141647503099647E1, 5.21357949780152679795E2,
            4.59432382970980127987E3, 2.26290000613890934246E4, 4.92673942608635921086E4]
_ERFC_P32 = [+2.326819970068386E-2, -1.387039388740657E-1, +3.687424674597105E-1,
             -5.824733027278666E-1, +6.210004621745983E-1, -4.944515323274145E-1,
             +3.404879937665872E-1, -2.741127028184656E-1, +5.638259427386472E-1]
_ERFC_R32 = [-1.047766399936249E+1, +1.297719955372516E+1, -7.495518717768503E+0,
             +2.921019019210786E+0, -1.015265279202700E+0, +4.218463358204948E-1,
             -2.820767439740514E-1, +5.641895067754075E-1]
_ERF_T32 = [+7.853861353153693E-5, -8.010193625184903E-4, +5.188327685732524E-3,
            -2.685381193529856E-2, +1.128358514861418E-1, -3.761262582423300E-1,
            +1.128379165726710E+0]


def _erfc_ge_one_f64(x: Ex) -> Ex:
    z = -(x * x)
    exp_z = z.exp()
    ax = x.abs()
    approx_1_8 = exp_z * _poly(ax, _ERFC_P64) / _poly(ax, _ERFC_Q64)
    approx_8_inf = exp_z * _poly(ax, _ERFC_R64) / _poly(ax, _ERFC_S64)
    approx = ax.lt(8.0).select(approx_1_8, approx_8_inf)
    clamped = z.lt(-7.09782712893383996843E2).select(x.like(0.0), approx)
    return x.lt(0.0).select(x.like(2.0) - clamped, clamped)


def _erf_le_one_f64(x: Ex) -> Ex:
    x2 = x * x
    return x * _poly(x2, _ERF_T64) / _poly(x2, _ERF_U64)


def _erfc_ge_one_f32(x: Ex) -> Ex:
    x2 = x * x
    z = -x2
    ax = x.abs()
    one = x.like(1.0)
    recip = one / x2
    exp_z = z.exp()
    e_over_x = exp_z * (one / ax)
    lt_two = ax.lt(2.0)
    poly = lt_two.select(_poly(recip, _ERFC_P32), _poly(recip, _ERFC_R32))
    approx = e_over_x * poly
    clamped = z.lt(-88.72283905206835).select(x.like(0.0), approx)
    return x.lt(0.0).select(x.like(2.0) - clamped, clamped)


def _erf_le_one_f32(x: Ex) -> Ex:
    return x * _poly(x * x, _ERF_T32)


def _erfc(x: Ex) -> Ex:
    def f32(x):
        approx = _erfc_ge_one_f32(x)
        one = x.like(1.0)
        erf_based = one - _erf_le_one_f32(x)
        return x.abs().lt(one).select(erf_based, approx)

    if x.et == P.F64:
        approx = _erfc_ge_one_f64(x)
        one = x.like(1.0)
        erf_based = one - _erf_le_one_f64(x)
        return x.abs().lt(one).select(erf_based, approx)
    return _upcast(x, f32)


_W_LT5 = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
          -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
_W_GT5 = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
          -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
_W_LT625 = [-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
            1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
            6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
            2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
            1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
            4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
            0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
            0.24015818242558961693, 1.6536545626831027356]
_W_LT16 = [2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
           1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
           2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
           6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
           0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
           -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
           3.0838856104922207635]
_W_GT16 = [-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
           -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
           2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
           -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
           7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
           1.0103004648645343977, 4.8499064014085844221]


def _erf_inv_edge(x: Ex, result: Ex) -> Ex:
    return x.abs().eq(1).select(x * x.like(math.inf), result)


def _erf_inv32(x: Ex) -> Ex:
    w = -((x * -x).log1p())
    lt = w.lt(5.0)
    w = lt.select(w - 2.5, w.sqrt() - 3.0)

    def coefficient(i):
        return lt.select(x.like(_W_LT5[i]), x.like(_W_GT5[i]))
    p = coefficient(0)
    for i in range(1, 9):
        p = coefficient(i) + p * w
    return _erf_inv_edge(x, p * x)


def _erf_inv64(x: Ex) -> Ex:
    w = -((x * -x).log1p())
    lt625 = w.lt(6.25)
    lt16 = w.lt(16.0)

    def coefficient(i):
        c = x.like(_W_LT625[i])
        if i < 19:
            c = lt625.select(c, x.like(_W_LT16[i]))
        if i < 17:
            c = lt16.select(c, x.like(_W_GT16[i]))
        return c
    sqrt_w = w.sqrt()
    w_minus = w - 3.125
    shift = lt16.select(w.like(3.25), w.like(5.0))
    w = lt625.select(w_minus, sqrt_w - shift)
    p = coefficient(0)
    for i in range(1, 17):
        p = coefficient(i) + p * w
    for i in range(17, 19):
        p = lt16.select(coefficient(i) + p * w, p)
    for i in range(19, 23):
        p = lt625.select(coefficient(i) + p * w, p)
    return _erf_inv_edge(x, p * x)


def _erf_inv(x: Ex) -> Ex:
    if x.et == P.F64:
        return _erf_inv64(x)
    return _upcast(x, _erf_inv32)


# -- gamma family ---------------------------------------------------------------------------

_LANCZOS_G = 7.0
_LANCZOS_BASE = 0.99999999999980993227684700473478
_LANCZOS = [676.520368121885098567009190444019, -1259.13921672240287047156078755283,
            771.3234287776530788486528258894, -176.61502916214059906584551354,
            12.507343278686904814458936853, -0.13857109526572011689554707,
            9.984369578019570859563e-6, 1.50563273514931155834e-7]


def _lgamma(x: Ex) -> Ex:
    half = x.like(0.5)
    reflect = x.lt(half)
    one = x.like(1)
    z = reflect.select(-x, x - one)
    a = x.like(_LANCZOS_BASE)
    for i, c in enumerate(_LANCZOS):
        a = a + x.like(c) / (z + x.like(i + 1))
    lph = x.like(_LANCZOS_G + 0.5)
    t = lph + z
    log_t = x.like(math.log(_LANCZOS_G + 0.5)) + (z / lph).log1p()
    r = ((z + half) - t / log_t) * log_t
    lgamma = (x.like((math.log(2) + math.log(math.pi)) / 2) + r) + a.log()
    ax = x.abs()
    frac = ax - ax.floor()
    frac = half.lt(frac).select(one - frac, frac)
    denom = (x.like(math.pi) * frac).sin().log()
    reflection = (x.like(math.log(math.pi)) - denom) - lgamma
    reflection = denom.is_finite().select(reflection, -denom)
    lgamma = reflect.select(reflection, lgamma)
    is_inf = x.abs().eq(x.like(math.inf))
    return is_inf.select(x.like(math.inf), lgamma)


def _digamma(x: Ex) -> Ex:
    half = x.like(0.5)
    reflect = x.lt(half)
    one = x.like(1)
    z = reflect.select(-x, x - one)
    zero = x.like(0.0)
    a = x.like(_LANCZOS_BASE)
    a_prime = zero
    for i, c in enumerate(_LANCZOS):
        coeff = x.like(c)
        zt = z + x.like(i + 1)
        a_prime = a_prime - coeff / (zt * zt)
        a = a + coeff / zt
    lph = x.like(_LANCZOS_G + 0.5)
    t = lph + z
    log_t = x.like(math.log(_LANCZOS_G + 0.5)) + (z / lph).log1p()
    digamma = (log_t + a_prime / a) - x.like(_LANCZOS_G) / t
    reduced = x + (x + x.like(0.5)).floor().abs()
    pi = x.like(math.pi)
    pix = pi * reduced
    reflection = digamma - (pi * pix.cos()) / pix.sin()
    digamma = reflect.select(reflection, digamma)
    is_pole = x.le(zero) & x.eq(x.floor())
    return is_pole.select(x.like(math.nan), digamma)


_ZETA = [-7.1661652561756670113e18, 1.8152105401943546773e17, -4.5979787224074726105e15,
         1.1646782814350067249e14, -2.950130727918164224e12, 7.47242496e10,
         -1.8924375803183791606e9, 47900160.0, -1209600.0, 30240.0, -720.0, 12.0]


def _zeta(x: Ex, q: Ex) -> Ex:
    zero = q.like(0.0)
    one = q.like(1.0)
    acc = q
    neg_x = -x
    power_sum = q.pow(neg_x)
    for _ in range(9):
        acc = acc + one
        q_neg = acc.pow(neg_x)
        power_sum = power_sum + q_neg
    acc = acc + one
    q_neg = acc.pow(neg_x)
    one_x = x.like(1.0)
    correction = (q_neg * acc) / (x - one_x)
    rsqrt_acc = one / (acc * acc)
    horner_sum = zero
    for i in range(11):
        lhs = x + x.like(23 - 1 - 2 * i)
        rhs = x + x.like(23 - 2 - 2 * i)
        horner_prod = lhs * rhs
        horner_sum = horner_prod * (rsqrt_acc * (horner_sum + acc.like(1.0 / _ZETA[i])))
    tail = q_neg * (q_neg.like(0.5) + (x / acc) * (acc.like(1.0 / _ZETA[11]) + horner_sum))
    accurate = (power_sum + correction) + tail
    smallest = acc.like(float(_finfo(acc.et).smallest_subnormal))
    out = q_neg.abs().lt(power_sum.abs() * smallest).select(power_sum, accurate)
    nan = x.like(math.nan)
    out = x.lt(one_x).select(nan, out)
    q_le_zero = q.le(zero)
    x_not_int = x.ne(x.floor())
    out = (q_le_zero & x_not_int).select(nan, out)
    inf = x.like(math.inf)
    at_pole = q_le_zero & q.eq(q.floor())
    x_even_int = x.eq(x.floor()) & x.rem(x.like(2.0)).eq(zero)
    out = at_pole.select(x_even_int.select(inf, nan), out)
    return x.eq(one).select(inf, out)


def _polygamma(n: Ex, x: Ex) -> Ex:
    one = x.like(1.0)
    two = x.like(2.0)
    sign = (two * n.rem(two)) - one
    n1 = n + one
    result = (sign * _lgamma(n1).exp()) * _zeta(n1, x)
    zero = x.like(0.0)
    result = n.eq(zero).select(_digamma(x), result)
    non_natural = n.ne(n.floor()) | n.lt(zero)
    return non_natural.select(x.like(math.nan), result)


# -- bessel ---------------------------------------------------------------------------------

_I1E_A32 = [9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
            -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
            4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
            -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
            2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
            -1.76416518357834055153E-1, 2.52587186443633654823E-1]
_I1E_B32 = [-3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
            -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
            7.78576235018280120474E-1]
_I1E_A64 = [2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
            -1.10559694773538630805E-15, 7.60068429473540693410E-15,
            -5.04218550472791168711E-14, 3.22379336594557470981E-13,
            -1.98397439776494371520E-12, 1.17361862988909016308E-11,
            -6.66348972350202774223E-11, 3.62559028155211703701E-10,
            -1.88724975172282928790E-9] + _I1E_A32
_I1E_B64 = [7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
            -3.20952592199342395980E-17, 2.96262899764595013876E-16,
            3.30820231092092828324E-16, -1.88035477551078244854E-15,
            -3.81440307243700780478E-15, 1.04202769841288027642E-14,
            4.27244001671195135429E-14, -2.10154184277266431302E-14,
            -4.08355111109219731823E-13, -7.19855177624590851209E-13,
            2.03562854414708950722E-12, 1.41258074366137813316E-11,
            3.25260358301548823856E-11, -1.89749581235054123450E-11,
            -5.58974346219658380687E-10] + _I1E_B32


def _chebyshev(x: Ex, coeffs) -> Ex:
    b0 = x.like(0.0)
    b1 = x.like(0.0)
    b2 = x.like(0.0)
    for c in coeffs:
        b2 = b1
        b1 = b0
        b0 = ((x * b1) - b2) + x.like(c)
    return (b0 - b2) * x.like(0.5)


def _bessel_i1e(x: Ex) -> Ex:
    def impl(x, a, b):
        z = x.abs()
        half, two = x.like(0.5), x.like(2.0)
        le8 = z * _chebyshev((half * z) - two, a)
        gt8 = _chebyshev((x.like(32.0) / z) - two, b) / z.sqrt()
        return x.sign() * z.le(x.like(8.0)).select(le8, gt8)

    if x.et == P.F64:
        return impl(x, _I1E_A64, _I1E_B64)
    return _upcast(x, lambda x: impl(x, _I1E_A32, _I1E_B32))


# -- trigonometric and hyperbolic -----------------------------------------------------------


def _log_half(x: Ex) -> Ex:
    # log(0.5) of the element type, as XLA's folding leaves it.
    return x.like(np.log(np.asarray(0.5, dtypes.to_dtype(x.et))))


def _cosh(x: Ex) -> Ex:
    def f(x):
        lh = _log_half(x)
        return (x + lh).exp() + (lh - x).exp()
    return _upcast(x, f)


def _sinh_large(x: Ex) -> Ex:
    lh = _log_half(x)
    return (x + lh).exp() - (lh - x).exp()


def _sinh(x: Ex) -> Ex:
    def f(x):
        large = _sinh_large(x)
        expm1 = x.expm1()
        one = x.like(1.0)
        small = x.like(0.5) * (expm1 + expm1 / (expm1 + one))
        return x.abs().lt(one).select(small, large)
    return _upcast(x, f)


def _asin(x: Ex) -> Ex:
    one = x.like(1)
    ta = x.atan2(one + ((one - x) * (one + x)).sqrt())
    return ta + ta


def _acos(x: Ex) -> Ex:
    one = x.like(1)
    return ((one - x) * (one + x)).sqrt().atan2(x)


def _acosh(x: Ex) -> Ex:
    two = x.like(2)
    large = x.ge(x.like(float(_finfo(x.et).max)) / two)
    one = x.like(1)
    s = (x - one).sqrt()
    return large.select(two.log() + x.log(), (s * ((x + one).sqrt() + s)).log1p())


def _asinh(x: Ex) -> Ex:
    ax = x.abs()
    large = ax.ge(x.like(float(_finfo(x.et).max)).sqrt())
    one = x.like(1)
    ax2 = ax * ax
    small = (ax + ax2 / (one + (one + ax2).sqrt())).log1p()
    return x.sign() * large.select(x.like(2).log() + ax.log(), small)


def _atanh(x: Ex) -> Ex:
    big = x.abs().gt(x.like(1))
    return big.select(x.like(math.nan), (x.log1p() - (-x).log1p()) * x.like(0.5))


def _next_after(x: Ex, y: Ex) -> Ex:
    bits = dtypes.bit_width(x.et)
    it = {8: P.S8, 16: P.S16, 32: P.S32, 64: P.S64}[bits]
    xi, yi = x.bitcast(it), y.bitcast(it)
    nan_input = x.ne(x) | y.ne(y)
    nan_bits = x.like(math.nan).bitcast(it)
    sign_bit = 1 << (bits - 1)
    sign_mask = xi.like(sign_bit)
    neg_sign_mask = xi.like(~sign_bit)
    x_abs, y_abs = xi & neg_sign_mask, yi & neg_sign_mask
    equal = x.eq(y)
    zero = xi.like(0)
    x_zero, y_zero = x_abs.eq(zero), y_abs.eq(zero)
    x_sign, y_sign = xi & sign_mask, yi & sign_mask
    one = xi.like(1)
    x_zero_y_nonzero = y_sign | one
    smaller = x_abs.gt(y_abs) | x_sign.ne(y_sign)
    result = xi + smaller.select(xi.like(-1), one)
    result = x_zero.select(y_zero.select(yi, x_zero_y_nonzero), result)
    result = equal.select(yi, result)
    result = nan_input.select(nan_bits, result)
    return result.bitcast(x.et)


def _mulhi(x: Ex, y: Ex) -> Ex:
    et = x.et
    bits = dtypes.bit_width(et)
    signed = dtypes.is_signed_integral(et)
    if bits < 64:
        wide = {8: (P.S16, P.U16), 16: (P.S32, P.U32), 32: (P.S64, P.U64)}[bits][0 if signed
                                                                                 else 1]
        prod = x.convert(wide) * y.convert(wide)
        shift = prod.like(bits)
        return prod.op("shift-right-arithmetic" if signed else "shift-right-logical",
                       shift).convert(et)
    if not signed:
        c32, lo_mask = x.like(32), x.like(0xFFFFFFFF)
        a_hi = x.op("shift-right-logical", c32)
        b_hi = y.op("shift-right-logical", y.like(32))
        a_lo = x & lo_mask
        b_lo = y & y.like(0xFFFFFFFF)
        p3 = a_hi * b_hi
        p1 = a_lo * b_hi
        carry_p0 = (a_lo * b_lo).op("shift-right-logical", c32)
        mid1 = p1 + carry_p0
        mid2 = (a_hi * b_lo) + (mid1 & lo_mask)
        return (p3 + mid1.op("shift-right-logical", c32)) + mid2.op("shift-right-logical",
                                                                      c32)
    ux, uy = x.convert(P.U64), y.convert(P.U64)
    hi = _mulhi(ux, uy)
    hi = hi - x.lt(x.like(0)).select(uy, uy.like(0))
    hi = hi - y.lt(y.like(0)).select(ux, ux.like(0))
    return hi.convert(et)


# -- op table -------------------------------------------------------------------------------

_UNARY = {
    "chlo.erfc": _erfc, "chlo.erf_inv": _erf_inv, "chlo.lgamma": lambda x: _upcast(x, _lgamma),
    "chlo.digamma": lambda x: _upcast(x, _digamma), "chlo.bessel_i1e": _bessel_i1e,
    "chlo.cosh": _cosh, "chlo.sinh": _sinh, "chlo.asin": _asin, "chlo.acos": _acos,
    "chlo.acosh": _acosh, "chlo.asinh": _asinh, "chlo.atanh": _atanh,
    "chlo.atan": lambda x: x.atan2(x.like(1)), "chlo.square": lambda x: x * x,
    "chlo.tan": lambda x: x.op("tan"),
    "chlo.is_inf": lambda x: x.abs().eq(x.like(math.inf)),
    "chlo.is_pos_inf": lambda x: x.eq(x.like(math.inf)),
    "chlo.is_neg_inf": lambda x: x.eq(x.like(-math.inf)),
}
_COMPLEX_OK = {"chlo.square", "chlo.tan", "chlo.conj", "chlo.erf"}
_BINARY = {
    "chlo.zeta": lambda x, q: _upcast(x, _zeta, q),
    "chlo.polygamma": lambda n, x: _upcast(n, _polygamma, x),
    "chlo.next_after": _next_after, "chlo.mulhi": _mulhi,
}
_BROADCAST = {
    "add": "add", "atan2": "atan2", "divide": "divide", "maximum": "maximum",
    "minimum": "minimum", "multiply": "multiply", "power": "power", "remainder": "remainder",
    "shift_left": "shift-left", "shift_right_arithmetic": "shift-right-arithmetic",
    "shift_right_logical": "shift-right-logical", "subtract": "subtract", "and": "and",
    "or": "or", "xor": "xor", "complex": "complex",
}


def _square_complex(z: Ex) -> Ex:
    x = z.op("real")
    y = z.op("imag")
    real = (x.is_finite() & x.abs().eq(y.abs())).select(x.like(0), (x - y) * (x + y))
    imag = x.like(2) * (x * y)
    return real.op("complex", imag)


def lower_chlo(low: Lowering, op: M.Op) -> None:
    name = op.name
    xs = [Ex(low, i) for i in low.operands(op)]
    if name == "chlo.erf":
        low.bind(op, low.make("erf", [xs[0].inst], shape=low.result_shape(op)))
        return
    if name == "chlo.top_k":
        k = a_int(op, "k")
        low.bind(op, low.make("topk", [xs[0].inst], {"k": k, "largest": True},
                              shape=low.result_shape(op)))
        return
    if name == "chlo.ragged_dot":
        return _ragged_dot(low, op)
    if name == "chlo.scan":
        return _scan(low, op)
    if name == "chlo.conj":
        x = xs[0]
        out = x if not dtypes.is_complex(x.et) else x.op("real").op("complex",
                                                                      -x.op("imag"))
        low.values[id(op.results[0])] = out.inst
        return
    if name == "chlo.constant_like":
        value = attr(op, "value")
        shape = low.result_shape(op)
        v = getattr(value, "value", None)
        if v is None:
            raise LocatedError(f"{name}: unsupported value {value.text}", value.pos)
        low.bind(op, const(low, v, shape.element_type, shape).inst)
        return
    if name.startswith("chlo.broadcast_") and name != "chlo.broadcast_select":
        return _broadcast_binary(low, op, xs)
    if name == "chlo.broadcast_select":
        shape = low.result_shape(op)
        args = [_broadcast_to(low, x.inst, shape, None) if x.shape.rank or i else x.inst
                for i, x in enumerate(xs)]
        low.bind(op, low.make("select", args, shape=shape))
        return
    if name in _UNARY or name in _BINARY:
        if any(dtypes.is_complex(x.et) for x in xs):
            if name == "chlo.square":
                low.values[id(op.results[0])] = _square_complex(xs[0]).inst
                return
            if name not in _COMPLEX_OK:
                raise LocatedError(f"'{name}' on complex values is not supported by xlapy's "
                                   "import (XLA decomposes it with the Hull et al. algorithm; "
                                   "not transcribed)", op.name_pos)
        if name in ("chlo.sinh", "chlo.cosh") and not dtypes.is_floating(xs[0].et):
            raise LocatedError(f"'{name}' takes floating-point values", op.name_pos)
        fn = _UNARY.get(name) or _BINARY[name]
        out = fn(*xs)
        inst = out.inst
        declared = low.result_shape(op)
        if not declared.compatible(inst.shape):
            raise LocatedError(f"{name}: the decomposition gives {inst.shape}, the op declares "
                               f"{declared}", op.pos)
        low.values[id(op.results[0])] = inst
        return
    from xlapy.stablehlo.convert import unsupported_message

    raise LocatedError(unsupported_message(name), op.name_pos)


def _broadcast_to(low: Lowering, inst, shape: Shape, dims):
    if inst.shape.dimensions == shape.dimensions and inst.shape.rank == shape.rank:
        return inst
    from xlapy.stablehlo.lowerings import broadcast_in_dim

    if dims is None:  # numpy: right-aligned
        dims = tuple(range(shape.rank - inst.shape.rank, shape.rank))
    out = shape.with_element_type(inst.shape.element_type)
    return broadcast_in_dim(low, inst, dims, out)


def _broadcast_binary(low: Lowering, op: M.Op, xs: list) -> None:
    kind = op.name[len("chlo.broadcast_"):]
    shape = low.result_shape(op)
    dims = a_ints(op, "broadcast_dimensions", None)
    lhs, rhs = xs[0].inst, xs[1].inst
    rank = max(lhs.shape.rank, rhs.shape.rank)
    out = Shape.array(lhs.shape.element_type, shape.dimensions) if shape.rank == rank else None
    if out is None:
        raise LocatedError(f"{op.name}: result rank {shape.rank} for operands of rank {rank}",
                           op.pos)
    if dims is not None and lhs.shape.rank != rhs.shape.rank:
        # broadcast_dimensions maps the lower-rank operand into the higher-rank one
        if lhs.shape.rank < rhs.shape.rank:
            lhs = _broadcast_to(low, lhs, out, dims)
            rhs = _broadcast_to(low, rhs, out, None)
        else:
            rhs = _broadcast_to(low, rhs, out, dims)
            lhs = _broadcast_to(low, lhs, out, None)
    else:
        lhs = _broadcast_to(low, lhs, out, None)
        rhs = _broadcast_to(low, rhs, out, None)
    if kind == "compare":
        from xlapy.stablehlo.convert import a_enum

        texts = {"direction": a_enum(op, "comparison_direction")}
        ctype = a_enum(op, "compare_type", None)
        if ctype is not None and ctype != "NOTYPE":
            texts["type"] = ctype
        low.bind(op, low.make("compare", [lhs, rhs], texts=texts, shape=shape))
        return
    if kind in ("next_after", "polygamma", "zeta"):
        out_ex = _BINARY["chlo." + kind](Ex(low, lhs), Ex(low, rhs))
        low.values[id(op.results[0])] = out_ex.inst
        return
    opcode = _BROADCAST.get(kind)
    if opcode is None:
        from xlapy.stablehlo.convert import unsupported_message

        raise LocatedError(unsupported_message(op.name), op.name_pos)
    low.bind(op, low.make(opcode, [lhs, rhs], shape=shape))


def _scan(low: Lowering, op: M.Op) -> None:
    """chlo.scan -> HLO scan (XLA keeps it as the high-level op)."""
    from xlapy.stablehlo.convert import a_bool

    body = low.conv.region(low, op.regions[0], op)
    low.cur_op = op
    n_inputs = op.attrs["num_inputs"].value if "num_inputs" in op.attrs else None
    operands = low.operands(op)
    if n_inputs is None:
        seg = op.attrs.get("operandSegmentSizes")
        n_inputs = seg.values[0] if isinstance(seg, M.DenseArrayAttr) else len(operands) // 2
    values = {"dimensions": (a_int(op, "dimension"),), "num_carries": len(operands) - n_inputs,
              "is_reverse": a_bool(op, "is_reverse"), "to_apply": body}
    assoc = op.attrs.get("is_associative")
    if assoc is not None:
        values["is_associative"] = a_bool(op, "is_associative")
    low.bind(op, low.make("scan", operands, values, shape=low.result_shape(op)))


def _ragged_dot(low: Lowering, op: M.Op) -> None:
    f = struct_of(low.conv, attr(op, "ragged_dot_dimension_numbers"),
                  f"{op.name}: ragged_dot_dimension_numbers")

    def ints(key):
        return "{" + ",".join(str(int(v)) for v in f.get(key, ())) + "}"

    texts = {"lhs_batch_dims": ints("lhs_batching_dimensions"),
             "rhs_batch_dims": ints("rhs_batching_dimensions"),
             "lhs_contracting_dims": ints("lhs_contracting_dimensions"),
             "rhs_contracting_dims": ints("rhs_contracting_dimensions"),
             "lhs_ragged_dims": ints("lhs_ragged_dimensions"),
             "rhs_group_dims": ints("rhs_group_dimensions")}
    from xlapy.stablehlo.lowerings import _precision_text

    texts.update(_precision_text(low, op))
    low.bind(op, low.make("ragged-dot", low.operands(op), texts=texts,
                          shape=low.result_shape(op)))
