"""Element generators: the LLVM IR computing one element of an HLO instruction from the
elements of its operands, per opcode (in the spirit of XLA's ElementalIrEmitter).

``ElementalEmitter(builder, loader, members)`` emits ``value_at(instr, index)``: the element
of ``instr`` at ``index`` (an Index: the linear position in a row-major array of some
dimensions, with the multi-dimensional index derived on demand). Elementwise opcodes ask
their operands for the same index (rank-0 operands for the scalar index), data-movement
opcodes map it (``indexing``), and instructions outside the generated expression come from
``loader(instr, index)`` (a load from a buffer, or an embedded scalar constant). Every value
is named after its instruction.

Element types (``TYPES[et] = (kind, compute type)``; ``memory_type``/``load_value``/
``store_value`` are the one place where storage and compute types meet):

- pred ("p", i1; stored as one byte), signed "s" and unsigned "u" integers of every width
  s1..s64/u1..u64 (computed in iN, so wrap-around is LLVM's; sub-byte types are stored one
  per byte, low bits, as ml_dtypes does), f32 and f64 ("f").
- the narrow floats bf16, f16, every f8 (e5m2, e4m3, e4m3fn, e4m3fnuz, e5m2fnuz,
  e4m3b11fnuz, e3m4, e8m0fnu), f6e2m3fn, f6e3m2fn, f4e2m1fn ("f", computed in f32 as XLA
  does). Their compute value is always an f32 holding a value of the narrow type: loads
  decode the bits exactly, every operation producing a narrow float rounds its f32 result
  (``round_to``: round-to-nearest-even with the format's overflow/NaN rules, bit for bit as
  ml_dtypes/the interpreter's ``convert``), stores encode. The codecs are integer bit
  manipulation (no libcall, vectorisable); values below a format's normal range are rounded
  with one f32 addition of a power of two. NaN payloads survive loads, stores, select and
  data movement bit for bit (bf16/f16 in the f32 payload, the other NaN encodings of
  f8e5m2/f8e4m3/f8e3m4 as a marker in the low bits), while computed results and converts
  give the interpreter's NaN. ``decode`` remembers the bits it decoded, so stores and bit
  views of loaded values reuse them (a copy or transpose of bf16 costs no codec). f32 ->
  f16 uses the host's F16C ``vcvtps2ph`` (``HW_F16``), as XLA:CPU does: a signalling NaN
  comes out quiet, as in the interpreter's convert; f16 negate/abs flip or clear the sign
  bit of the encoding.
- complex c64/c128 ("c", the struct {re, im} of f32/f64; stored as NumPy does).

Semantics are the interpreter's (xlapy.interpreter.kernels.elementwise, numeric): integer
x / 0 = -1, x % 0 = x, INT_MIN / -1 = INT_MIN, shifts by >= the width give 0 (or the sign
fill), power by squaring over the exponent's low 6 bits as XLA:CPU (negative exponents, an
unsigned one's sign bit too: 0 except bases 1 and -1), NaN-propagating
maximum/minimum ordering -0 < +0, float -> int truncating with saturation and NaN -> 0,
int -> narrow float through f32, f64 -> f8/f6/f4 rounded once, f64 -> bf16/f16/e8m0 through
f32, TOTALORDER on the sign-magnitude keys of the encodings.

Transcendentals: exp, expm1, log, log1p, tanh, logistic (f32, f64, and narrow floats through
f32) and f32 erf are vectorisable polynomial/range-reduction IR (``fmath``); measured
maximum errors against the interpreter (libm/SciPy in f64, rounded): exp 1 ulp, log 1,
expm1 2, log1p 2, tanh 2 (f32) / 3 (f64), logistic 4 (the interpreter's own
1 / (1 + exp(-x)) rounds three times), f32 erf 1 (``fmath.ULP_BOUNDS``, re-measured by
tests/backends/cpu/test_cpu_elementwise_ops.py). Narrow results of these are within one ulp
of the narrow type. sqrt, rsqrt (in f64 for f32) and every other operation are exact (bit
for bit the interpreter's). f32 sin, cos, tan, cbrt, atan2 and power call the C library's
f32 functions per element (sinf, ...: what XLA:CPU calls, bit for bit, and the
interpreter's libm_single); f64 ones, f64 erf, the inverse trigonometric/hyperbolic
functions, sinh, cosh and remainder (fmod) call libm per element (f32 through f64, as the
interpreter; glibc's f64 results may differ from NumPy's/SciPy's by an ulp or two).

Complex: every elementwise op the interpreter implements (add, subtract, multiply, divide
(Smith's algorithm with XLA's fix-ups), power, atan2, negate, real, imag, abs (hypot), sign,
exp, expm1, log, log1p, logistic, sqrt, rsqrt, sin, cos, tan, tanh, the inverse
trigonometric/hyperbolic functions, sinh, cosh, complex, compare EQ/NE, select, convert),
with the interpreter's formulas (complex_math; XLA:CPU's), libm pieces in f64 and glibc's
C99 complex functions where the interpreter uses NumPy's (which are glibc's).

Fused multiply-adds (``CONTRACT``: the backend's ``fma_contraction``, XLA:CPU's default, on
while a program compiles; off, the semantics above are exact): XLA:CPU compiles with LLVM's
FP-op fusion allowed, so an f32/f64 product feeding an add or subtract in the same kernel is
rounded once when the add is the product's one use (LLVM's DAG combiner). An emitter then
emits ``llvm.fma`` for an add or subtract one of whose operands is a product its own
multiply made and nothing else in the kernel reads (``_uses``) - (x*y) + c -> fma(x, y, c),
c + (x*y) -> fma(x, y, c), (x*y) - c -> fma(x, y, -c), c - (x*y) -> fma(-x, y, c), the left
product first - and a complex product's parts as XLA:CPU fuses them, re = fma(re, cr, -(im*ci)), im = fma(im, cr,
re*ci) (docs/numerics.md; pinned against real XLA:CPU by tests/backends/cpu/
test_cpu_numerics.py).

bitcast-convert between bit widths reinterprets bytes as XLA does (little-endian: a narrower
result adds a minor dimension holding the pieces of each element, least significant first, a
wider one joins the pieces along the operand's minor dimension).

Not generated (``supports`` says False, the interpreter runs them): TOTALORDER compares of
mixed precision, complex compares other than EQ/NE, bitcast-converts to or from complex
types, complex -> real converts (the interpreter rejects them too).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from types import GeneratorType

from llvmlite import ir

from xlapy.backends.cpu import indexing
from xlapy.backends.cpu.fmath import FMath
from xlapy.backends.cpu.indexing import I64, Index
from xlapy.hlo.attrs.enums import ComparisonType
from xlapy.shape import PrimitiveType as PT
from xlapy.shape import dtypes

F32, F64 = ir.FloatType(), ir.DoubleType()
I1, I8, I16, I32 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32)


# -- narrow float formats -------------------------------------------------------------------


@dataclass(frozen=True)
class FloatFormat:
    """A narrow float encoding, stored in the low ``bits`` of one byte (two for 16 bits).

    ``special``: "bf16" (the top half of an f32), "ieee" (the top exponent holds inf and
    NaNs), "fn" (no inf; the all-ones magnitude is NaN, overflow gives NaN), "fnuz" (no inf,
    no -0; the negative-zero encoding is the only NaN), "sat" (no inf, no NaN: overflow
    saturates), "e8m0" (an unsigned power of two; 0xFF is NaN)."""

    bits: int
    exponent: int
    mantissa: int
    bias: int
    special: str

    @property
    def storage(self) -> ir.IntType:
        return I16 if self.bits > 8 else I8


FORMATS: dict[PT, FloatFormat] = {
    PT.BF16: FloatFormat(16, 8, 7, 127, "bf16"),
    PT.F16: FloatFormat(16, 5, 10, 15, "ieee"),
    PT.F8E5M2: FloatFormat(8, 5, 2, 15, "ieee"),
    PT.F8E4M3: FloatFormat(8, 4, 3, 7, "ieee"),
    PT.F8E3M4: FloatFormat(8, 3, 4, 3, "ieee"),
    PT.F8E4M3FN: FloatFormat(8, 4, 3, 7, "fn"),
    PT.F8E4M3FNUZ: FloatFormat(8, 4, 3, 8, "fnuz"),
    PT.F8E5M2FNUZ: FloatFormat(8, 5, 2, 16, "fnuz"),
    PT.F8E4M3B11FNUZ: FloatFormat(8, 4, 3, 11, "fnuz"),
    PT.F8E8M0FNU: FloatFormat(8, 8, 0, 127, "e8m0"),
    PT.F6E2M3FN: FloatFormat(6, 2, 3, 1, "sat"),
    PT.F6E3M2FN: FloatFormat(6, 3, 2, 3, "sat"),
    PT.F4E2M1FN: FloatFormat(4, 2, 1, 1, "sat"),
}

# element type -> (kind, LLVM compute type): kind "f" float, "s" signed, "u" unsigned, "p" pred
TYPES: dict[PT, tuple[str, ir.Type]] = {
    PT.PRED: ("p", I1), PT.F32: ("f", F32), PT.F64: ("f", F64),
    **{t: ("s", ir.IntType(dtypes.bit_width(t)))
       for t in (PT.S1, PT.S2, PT.S4, PT.S8, PT.S16, PT.S32, PT.S64)},
    **{t: ("u", ir.IntType(dtypes.bit_width(t)))
       for t in (PT.U1, PT.U2, PT.U4, PT.U8, PT.U16, PT.U32, PT.U64)},
    **{t: ("f", F32) for t in FORMATS},
    PT.C64: ("c", ir.LiteralStructType([F32, F32])),
    PT.C128: ("c", ir.LiteralStructType([F64, F64])),
}


def _intrinsic(module: ir.Module, name: str, ret, args) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    return fn


def _c(ty, v):
    return ir.Constant(ty, v)


def _umin(b: ir.IRBuilder, x, c: int, name: str):
    k = _c(x.type, c)
    return b.select(b.icmp_unsigned(">", x, k, name=f"{name}.gt"), k, x, name=name)


def _host_f16c() -> bool:
    """Whether the host converts f16 in hardware (F16C: every AVX2 or AVX-512 x86-64)."""
    from llvmlite import binding as llvm

    try:
        return "+f16c" in llvm.get_host_cpu_features().flatten().split(",")
    except RuntimeError:  # a host LLVM cannot describe: the integer codecs
        return False


#: f32 -> f16 rounded by the host's F16C instruction (vcvtps2ph), as XLA:CPU does: the same
#: values as the integer encoder below, except that a signalling NaN becomes quiet (XLA:CPU's
#: answer too); 2.2x faster on f16 elementwise code.
HW_F16 = _host_f16c()
I16 = ir.IntType(16)


def decode(b: ir.IRBuilder, raw, fmt: FloatFormat, name: str):
    """The f32 value of the narrow encoding ``raw`` (fmt.storage), exactly as ml_dtypes
    widens it (NaN payloads: bf16 and f16 keep theirs, the f8 types give the quiet NaN)."""
    x = b.zext(raw, I32, name=f"{name}.w")
    if fmt.special == "bf16":
        return _with_encoding(b.bitcast(b.shl(x, _c(I32, 16), name=f"{name}.sh"), F32,
                                        name=f"{name}.f32"), fmt, raw)
    if fmt.bits < fmt.storage.width:
        x = b.and_(x, _c(I32, (1 << fmt.bits) - 1), name=f"{name}.low")
    if fmt.special == "e8m0":  # 2^(x - 127); x = 0 is 2^-127 (an f32 denormal), 0xFF NaN
        v = b.shl(x, _c(I32, 23), name=f"{name}.exp")
        v = b.select(b.icmp_unsigned("==", x, _c(I32, 0), name=f"{name}.min"),
                     _c(I32, 0x00400000), v, name=f"{name}.v0")
        v = b.select(b.icmp_unsigned("==", x, _c(I32, 0xFF), name=f"{name}.isnan"),
                     _c(I32, 0x7FC00000), v, name=f"{name}.v1")
        return _with_encoding(b.bitcast(v, F32, name=f"{name}.f32"), fmt, raw)
    top = fmt.bits - 1
    m = fmt.mantissa
    mag = b.and_(x, _c(I32, (1 << top) - 1), name=f"{name}.mag")
    sign = b.shl(b.lshr(x, _c(I32, top), name=f"{name}.s"), _c(I32, 31), name=f"{name}.sign")
    # the magnitude's exponent and mantissa placed as an f32's, then rebiased by a power
    # of two (exact; encodings with a zero exponent become f32 denormals first)
    placed = b.bitcast(b.shl(mag, _c(I32, 23 - m), name=f"{name}.place"), F32,
                       name=f"{name}.placed")
    v = b.bitcast(b.fmul(placed, _c(F32, 2.0 ** (127 - fmt.bias)), name=f"{name}.scaled"),
                  I32, name=f"{name}.vb")
    # a zero exponent (the format's denormals): mantissa * 2^(1 - bias - m), a normal f32,
    # so the widening stays exact when the CPU flushes f32 denormals (DAZ: see denormals.py)
    tiny = b.bitcast(b.fmul(b.uitofp(mag, F32, name=f"{name}.int"),
                            _c(F32, 2.0 ** (1 - fmt.bias - m)), name=f"{name}.tiny"),
                     I32, name=f"{name}.tb")
    v = b.select(b.icmp_unsigned("<", mag, _c(I32, 1 << m), name=f"{name}.isden"), tiny, v,
                 name=f"{name}.vd")
    if fmt.special == "ieee":
        inf = ((1 << fmt.exponent) - 1) << m
        mant = b.and_(mag, _c(I32, (1 << m) - 1), name=f"{name}.mant")
        if fmt.bits == 16:  # f16 keeps its NaN payload (numpy)
            payload = b.shl(mant, _c(I32, 23 - m), name=f"{name}.payload")
            special = b.or_(payload, _c(I32, 0x7F800000), name=f"{name}.special")
        else:  # the quiet NaN (ml_dtypes); other NaN encodings keep a marker in the low bits
            marker = b.xor(mant, _c(I32, 1 << (m - 1)), name=f"{name}.marker")
            special = b.select(b.icmp_unsigned("==", mag, _c(I32, inf), name=f"{name}.isinf"),
                               _c(I32, 0x7F800000),
                               b.or_(marker, _c(I32, 0x7FC00000), name=f"{name}.qnan"),
                               name=f"{name}.special")
        v = b.select(b.icmp_unsigned(">=", mag, _c(I32, inf), name=f"{name}.top"), special, v,
                     name=f"{name}.v")
    elif fmt.special == "fn":
        v = b.select(b.icmp_unsigned("==", mag, _c(I32, (1 << top) - 1), name=f"{name}.isnan"),
                     _c(I32, 0x7FC00000), v, name=f"{name}.v")
    elif fmt.special == "fnuz":
        v = b.select(b.icmp_unsigned("==", x, _c(I32, 1 << top), name=f"{name}.isnan"),
                     _c(I32, 0x7FC00000), v, name=f"{name}.v")
    v = b.or_(v, sign, name=f"{name}.signed")
    return _with_encoding(b.bitcast(v, F32, name=f"{name}.f32"), fmt, raw)


def _with_encoding(value, fmt: FloatFormat, raw):
    """Remember that the f32 ``value`` decodes ``raw`` (fmt.storage), so a store or a bit
    view of it reuses the encoding instead of re-encoding (loads stored unchanged cost
    nothing)."""
    value._xlapy_encoding = (fmt, raw)
    return value


def encoding_of(b: ir.IRBuilder, value, fmt: FloatFormat, name: str):
    """The storage encoding of the narrow compute value ``value``: the decoded bits when
    ``value`` came from ``decode``, else ``encode(..., keep_nan=True)``."""
    known = getattr(value, "_xlapy_encoding", None)
    if known is not None and known[0] == fmt:
        return known[1]
    return encode(b, value, fmt, name, keep_nan=True)


def encode(b: ir.IRBuilder, value, fmt: FloatFormat, name: str, keep_nan: bool = False):
    """The narrow encoding (fmt.storage) of the f32 (or, for the f8/f6/f4 formats other
    than e8m0, f64) ``value``, rounded to nearest even once, with the format's overflow and
    NaN rules (ml_dtypes' conversion bit for bit). ``keep_nan``: a NaN that ``decode`` made
    keeps its encoding (bf16 payloads, the f8 NaN markers; stores and bit views), otherwise
    NaNs become the format's conversion result (a computed value)."""
    src = value.type
    wide = src == F64
    if wide and fmt.special in ("bf16", "e8m0") or wide and fmt.bits == 16:
        raise ValueError(f"encode: {fmt} is converted from f32 only")
    if fmt.special == "ieee" and fmt.bits == 16 and HW_F16 and not wide:
        # F16C's vcvtps2ph, as XLA:CPU: RNE, inf on overflow, denormals kept; a NaN becomes
        # sign | quiet | the top 9 payload bits (the integer path below keeps a signalling
        # NaN signalling); stores of decoded values keep their own encoding (encoding_of)
        return b.bitcast(b.fptrunc(value, ir.HalfType(), name=f"{name}.h"), I16,
                         name=f"{name}.enc")
    iw = I64 if wide else I32
    width, sm, sb = (64, 52, 1023) if wide else (32, 23, 127)
    bits = b.bitcast(value, iw, name=f"{name}.bits")
    sign = b.lshr(bits, _c(iw, width - 1), name=f"{name}.s")
    a = b.and_(bits, _c(iw, (1 << (width - 1)) - 1), name=f"{name}.a")
    inf_bits = ((1 << (width - sm - 1)) - 1) << sm
    isnan = b.icmp_unsigned(">", a, _c(iw, inf_bits), name=f"{name}.isnan")
    store = fmt.storage

    def out(v):
        v = b.trunc(v, store, name=f"{name}.enc") if iw.width > store.width else v
        return v

    if fmt.special == "bf16":
        rnd = b.add(b.and_(b.lshr(a, _c(I32, 16), name=f"{name}.lsb0"), _c(I32, 1),
                           name=f"{name}.lsb"), _c(I32, 0x7FFF), name=f"{name}.bias")
        mag = b.lshr(b.add(a, rnd, name=f"{name}.r"), _c(I32, 16), name=f"{name}.mag")
        nan = _c(I32, 0x7FC0)
        if keep_nan:  # the NaN's own top half (unless only its low half held a payload)
            top = b.lshr(a, _c(I32, 16), name=f"{name}.top")
            nan = b.select(b.icmp_unsigned(">", top, _c(I32, 0x7F80), name=f"{name}.ok"), top,
                           nan, name=f"{name}.keep")
        mag = b.select(isnan, nan, mag, name=f"{name}.nan")
        return out(b.or_(mag, b.shl(sign, _c(I32, 15), name=f"{name}.sh"), name=f"{name}.v"))
    if fmt.special == "e8m0":
        normal = b.lshr(b.add(a, _c(I32, 0x400000), name=f"{name}.r"), _c(I32, 23),
                        name=f"{name}.normal")  # ties round up
        # f32 denormals: at most 2^-127 is 2^-127 (encoding 0), anything above 2^-126
        denormal = b.zext(b.icmp_unsigned(">", a, _c(I32, 0x400000), name=f"{name}.up"), I32,
                          name=f"{name}.den")
        n = b.select(b.icmp_unsigned("<", a, _c(I32, 0x800000), name=f"{name}.small"),
                     denormal, normal, name=f"{name}.n")
        bad = b.or_(b.or_(isnan, b.icmp_unsigned("!=", sign, _c(I32, 0), name=f"{name}.neg"),
                          name=f"{name}.b0"),
                    b.or_(b.icmp_unsigned("==", a, _c(I32, 0), name=f"{name}.zero"),
                          b.icmp_unsigned("==", a, _c(I32, inf_bits), name=f"{name}.inf"),
                          name=f"{name}.b1"), name=f"{name}.bad")
        return out(b.select(bad, _c(I32, 0xFF), _umin(b, n, 0xFF, f"{name}.cap"),
                            name=f"{name}.v"))
    m = fmt.mantissa
    shift = sm - m
    # normal range: round the mantissa to m bits (to nearest even), rebias the exponent
    lsb = b.and_(b.lshr(a, _c(iw, shift), name=f"{name}.lsb0"), _c(iw, 1), name=f"{name}.lsb")
    r = b.add(a, b.add(lsb, _c(iw, (1 << (shift - 1)) - 1), name=f"{name}.bias"),
              name=f"{name}.r")
    normal = b.sub(b.lshr(r, _c(iw, shift), name=f"{name}.top"), _c(iw, (sb - fmt.bias) << m),
                   name=f"{name}.normal")
    # below the smallest normal: |x| + 2^(1 - bias - m + sm) rounds |x| to a multiple of
    # the smallest denormal; the added power's encoding subtracted leaves the magnitude
    magic = 2.0 ** (1 - fmt.bias - m + sm)
    fabs = _intrinsic(b.module, f"llvm.fabs.{'f64' if wide else 'f32'}", src, [src])
    t = b.fadd(b.call(fabs, [value], name=f"{name}.abs"), _c(src, magic), name=f"{name}.t")
    magic_bits = b.bitcast(_c(src, magic), iw)
    denormal = b.sub(b.bitcast(t, iw, name=f"{name}.tb"), magic_bits, name=f"{name}.den")
    small = b.icmp_unsigned("<", a, _c(iw, (sb + 1 - fmt.bias) << sm), name=f"{name}.small")
    mag = b.select(small, denormal, normal, name=f"{name}.mag")
    top = fmt.bits - 1
    signed = b.shl(sign, _c(iw, top), name=f"{name}.sbit")
    if fmt.special == "ieee":
        inf = ((1 << fmt.exponent) - 1) << m
        mag = _umin(b, mag, inf, f"{name}.ovf")  # overflow and inf -> inf
        if fmt.bits == 16:  # f16 keeps the top of the payload (numpy), never becoming inf
            payload = b.lshr(b.and_(a, _c(iw, 0x7FFFFF), name=f"{name}.pl"), _c(iw, 13),
                             name=f"{name}.payload")
            payload = b.select(b.icmp_unsigned("==", payload, _c(iw, 0), name=f"{name}.pl0"),
                               _c(iw, 1), payload, name=f"{name}.pl1")
            nan = b.or_(payload, _c(iw, inf), name=f"{name}.nanv")
        elif keep_nan:  # decode's marker back to the mantissa (never 0: that is inf)
            quiet = 1 << (m - 1)
            mant = b.xor(b.and_(a, _c(iw, (1 << m) - 1), name=f"{name}.mk"), _c(iw, quiet),
                         name=f"{name}.mant")
            mant = b.select(b.icmp_unsigned("==", mant, _c(iw, 0), name=f"{name}.m0"),
                            _c(iw, quiet), mant, name=f"{name}.m1")
            nan = b.or_(mant, _c(iw, inf), name=f"{name}.nanv")
        else:
            nan = _c(iw, inf | (1 << (m - 1)))
        mag = b.select(isnan, nan, mag, name=f"{name}.nan")
        return out(b.or_(mag, signed, name=f"{name}.v"))
    if fmt.special == "fn":
        nan_mag = (1 << top) - 1
        over = b.or_(isnan, b.icmp_unsigned(">", mag, _c(iw, nan_mag - 1), name=f"{name}.big"),
                     name=f"{name}.over")
        mag = b.select(over, _c(iw, nan_mag), mag, name=f"{name}.nan")
        return out(b.or_(mag, signed, name=f"{name}.v"))
    if fmt.special == "fnuz":
        over = b.or_(isnan, b.icmp_unsigned(">", mag, _c(iw, (1 << top) - 1), name=f"{name}.big"),
                     name=f"{name}.over")
        v = b.select(b.icmp_unsigned("==", mag, _c(iw, 0), name=f"{name}.zero"), _c(iw, 0),
                     b.or_(mag, signed, name=f"{name}.sv"), name=f"{name}.nz")  # no -0
        return out(b.select(over, _c(iw, 1 << top), v, name=f"{name}.v"))
    # "sat": no inf or NaN; overflow saturates. NaN: f4 gives -0, f6 the zero of the
    # opposite sign (ml_dtypes).
    mag = _umin(b, mag, (1 << top) - 1, f"{name}.sat")
    v = b.or_(mag, signed, name=f"{name}.sv")
    if fmt.bits == 4:
        nan = _c(iw, 1 << top)
    else:
        nan = b.shl(b.xor(sign, _c(iw, 1), name=f"{name}.ns"), _c(iw, top), name=f"{name}.nanv")
    return out(b.select(isnan, nan, v, name=f"{name}.v"))


def round_to(b: ir.IRBuilder, value, et, name: str):
    """``value`` (an f32, or f64 for the f8/f6/f4 types) as element type ``et``'s compute
    value: rounded to the narrow format for narrow floats (XLA's convert), unchanged
    otherwise."""
    fmt = FORMATS.get(et)
    if fmt is None:
        return value
    if value.type == F64 and (fmt.special in ("bf16", "e8m0") or fmt.bits == 16):
        value = b.fptrunc(value, F32, name=f"{name}.f32")  # XLA rounds these through f32
    return decode(b, encode(b, value, fmt, f"{name}.rnd"), fmt, f"{name}.dec")


def memory_type(et) -> ir.Type:
    """How an element of type ``et`` is stored in a buffer: pred and the sub-byte integers
    in one byte, narrow floats as their encoding (i8, or i16 for bf16/f16)."""
    kind, ty = TYPES[et]
    if kind == "p":
        return I8
    if et in FORMATS:
        return FORMATS[et].storage
    if kind in "su" and ty.width < 8:
        return I8
    return ty


def load_value(builder: ir.IRBuilder, ptr, et, name: str):
    """Load the element at ``ptr`` (a pointer to memory_type(et)) as its compute value
    (pred: i1; narrow floats: f32; sub-byte integers: iN)."""
    kind, ty = TYPES[et]
    if kind == "c":
        return _load_complex(builder, ptr, ty, name)
    v = builder.load(ptr, name=f"{name}.load")
    if kind == "p":
        return builder.icmp_unsigned("!=", v, ir.Constant(I8, 0), name=f"{name}.pred")
    if et in FORMATS:
        return decode(builder, v, FORMATS[et], name)
    if kind in "su" and ty.width < 8:
        return builder.trunc(v, ty, name=f"{name}.val")
    return v


def _load_complex(builder: ir.IRBuilder, ptr, ty, name: str):
    """A complex element as two component loads (vectorisable), joined in a struct."""
    zero = ir.Constant(I32, 0)
    v = ir.Constant(ty, ir.Undefined)
    for k, part in enumerate(("re", "im")):
        p = builder.gep(ptr, [zero, ir.Constant(I32, k)], inbounds=True, name=f"{name}.{part}p")
        v = builder.insert_value(v, builder.load(p, name=f"{name}.{part}"), k,
                                 name=f"{name}.c{k}")
    return v


def store_value(builder: ir.IRBuilder, value, ptr, et, name: str) -> None:
    """Store the compute value ``value`` of element type ``et`` at ``ptr``."""
    kind, ty = TYPES[et]
    if kind == "c":
        zero = ir.Constant(I32, 0)
        for k, part in enumerate(("re", "im")):
            p = builder.gep(ptr, [zero, ir.Constant(I32, k)], inbounds=True,
                            name=f"{name}.{part}p")
            builder.store(builder.extract_value(value, k, name=f"{name}.{part}"), p)
        return
    if kind == "p" or (kind in "su" and ty.width < 8):
        value = builder.zext(value, I8, name=f"{name}.byte")
    elif et in FORMATS:
        value = encoding_of(builder, value, FORMATS[et], f"{name}.st")
    builder.store(value, ptr)


def immediate(et, value) -> ir.Constant:
    """A scalar ``value`` (NumPy/Python) of element type ``et`` as an LLVM constant of its
    compute type."""
    kind, ty = TYPES[et]
    if kind == "p":
        return ir.Constant(ty, int(bool(value)))
    if kind == "f":
        return ir.Constant(ty, float(value))
    if kind == "c":
        value = complex(value)
        part = ty.elements[0]
        return ir.Constant(ty, [ir.Constant(part, value.real), ir.Constant(part, value.imag)])
    return ir.Constant(ty, int(value) & ((1 << ty.width) - 1))


# -- which instructions are generated -------------------------------------------------------

FLOAT_UNARY = {
    "abs", "negate", "sign", "floor", "ceil", "round-nearest-afz", "round-nearest-even",
    "is-finite", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
    "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "tanh", "erf", "real", "imag", "acos",
    "acosh", "asin", "asinh", "atanh", "cosh", "sinh",
}
INT_UNARY = {"abs", "negate", "sign", "not", "popcnt", "count-leading-zeros"}
PRED_UNARY = {"not"}
FLOAT_BINARY = {"add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
                "power", "atan2"}
INT_BINARY = {"add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
              "power", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
              "shift-right-logical", "mulhi"}
# pred arithmetic is int8(x) OP int8(y) != 0 (XLA's EmitPredBinaryOp)
PRED_BINARY = {"add": "or", "maximum": "or", "or": "or", "multiply": "and", "minimum": "and",
               "and": "and", "xor": "xor"}

UNARY = FLOAT_UNARY | INT_UNARY | PRED_UNARY
BINARY = FLOAT_BINARY | INT_BINARY | set(PRED_BINARY)
# complex (c64, c128): XLA:CPU's formulas as the interpreter's complex_math, componentwise
# C99 complex functions (glibc's, which NumPy's are, bit for bit), in c128 for c64 too
_C99 = {"sqrt": "csqrt", "acos": "cacos", "acosh": "cacosh", "asin": "casin",
        "asinh": "casinh", "atanh": "catanh", "cosh": "ccosh", "sinh": "csinh"}
COMPLEX_UNARY = {"negate", "real", "imag", "abs", "sign", "exponential", "sine", "cosine",
                 "tan", "tanh", "exponential-minus-one", "log-plus-one", "logistic", "rsqrt",
                 "log", *_C99}
COMPLEX_BINARY = {"add", "subtract", "multiply", "divide", "power", "atan2"}
ELEMENTWISE = UNARY | BINARY | {"compare", "select", "clamp", "convert", "bitcast-convert",
                                "reduce-precision", "complex", "stochastic-convert"}

# libm functions of one f64 argument (f32 operands are widened and the result rounded)
# C library functions XLA:CPU calls for f32 elements (glibc's, bit for bit: measured through
# jax 0.10.2), where rounding the f64 function differs by an ulp in 1-15% of the elements
_LIBM_F32 = {"sin": "sinf", "cos": "cosf", "tan": "tanf", "cbrt": "cbrtf", "atan2": "atan2f",
             "pow": "powf"}
_LIBM = {"cbrt": "cbrt", "sine": "sin", "cosine": "cos", "tan": "tan", "erf": "erf",
         "acos": "acos", "acosh": "acosh", "asin": "asin", "asinh": "asinh",
         "atanh": "atanh", "cosh": "cosh", "sinh": "sinh"}

_FCMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _et(shape):
    return shape.element_type


def _array(shape) -> bool:
    return shape.is_array() and shape.element_type in TYPES and not shape.is_dynamic()


def _fits(operand, shape, scalar_ok: bool = True) -> bool:
    dims = tuple(operand.shape.dimensions)
    return dims == tuple(shape.dimensions) or (scalar_ok and not dims)


def _bitcast_dims(operand, result, src, dst) -> bool:
    """The shapes of a bitcast-convert from ``src`` to ``dst``: equal for equal bit widths;
    a narrower result adds a minor dimension of the ratio, a wider one removes it."""
    ws, wd = dtypes.bit_width(src), dtypes.bit_width(dst)
    odims, dims = tuple(operand.dimensions), tuple(result.dimensions)
    if ws == wd:
        return odims == dims
    if ws < wd:
        return wd % ws == 0 and odims == dims + (wd // ws,)
    return ws % wd == 0 and dims == odims + (ws // wd,)


def _widens(src, dst) -> bool:
    """A float operand of type ``src`` meets ``dst``'s work type exactly."""
    s, d = TYPES[src][1], TYPES[dst][1]
    return s == d or (s == F32 and d == F64)


def supports(instr) -> bool:
    """Whether an element generator implements ``instr`` with its operand and result types
    (data-movement opcodes: ``indexing.supports``)."""
    op = instr.opcode
    if op in indexing.GENERATORS:
        return indexing.supports(instr)
    if op not in ELEMENTWISE:
        return False
    shape = instr.shape
    ops = instr.operands
    if not _array(shape) or not all(_array(o.shape) for o in ops):
        return False
    out = _et(shape)
    kind = TYPES[out][0]
    ins = [_et(o.shape) for o in ops]
    kinds = [TYPES[t][0] for t in ins]
    if op == "bitcast-convert":
        return len(ops) == 1 and "c" not in (kind, kinds[0]) and \
            _bitcast_dims(ops[0].shape, shape, ins[0], out)
    if op in ("convert", "reduce-precision"):
        if len(ops) != 1 or not _fits(ops[0], shape, scalar_ok=False):
            return False
        if op == "reduce-precision":
            return kind == "f" and ins[0] == out
        return kinds[0] != "c" or kind == "c"  # complex -> real is not defined
    if not all(_fits(o, shape) for o in ops):
        return False
    if "c" in kinds or kind == "c":
        return _supports_complex(instr, op, out, kind, ins, kinds)
    if op == "stochastic-convert":  # float -> signed integer (XLA implements no other)
        return kinds == ["f", "u"] and kind == "s" and \
            tuple(ops[0].shape.dimensions) == tuple(shape.dimensions)
    if op == "compare":
        a, c = ins
        if kinds[0] != kinds[1]:
            return False
        if kinds[0] != "f":
            return a == c
        if instr.attrs["type"] == ComparisonType.TOTALORDER:
            return a == c
        return True
    if op == "select":
        if kinds[0] != "p" or len(ops) != 3:
            return False
        if kind == "f":
            return kinds[1] == "f" and kinds[2] == "f"
        return ins[1] == out and ins[2] == out
    if op == "clamp":
        if kind == "f":
            return all(k == "f" and _widens(t, out) for k, t in zip(kinds, ins))
        return all(t == out for t in ins)
    if len(ops) == 1:
        x = ins[0]
        if kinds[0] == "f":
            want = PT.PRED if op == "is-finite" else x
            return op in FLOAT_UNARY and out == want
        if kinds[0] == "p":
            return op in PRED_UNARY and out == x
        return op in INT_UNARY and out == x
    if len(ops) == 2:
        if kind == "f":
            return op in FLOAT_BINARY and all(k == "f" and _widens(t, out)
                                               for k, t in zip(kinds, ins))
        if any(t != out for t in ins):
            return False
        if kind == "p":
            return op in PRED_BINARY
        return op in INT_BINARY
    return False


def _supports_complex(instr, op, out, kind, ins, kinds) -> bool:
    if op == "compare":
        return ins[0] == ins[1] and instr.attrs["direction"].value in ("EQ", "NE")
    if op == "select":
        return kinds[0] == "p" and ins[1] == out and ins[2] == out
    if op == "complex":
        part = dtypes.complex_component_type(out)
        return ins == [part, part]
    if len(ins) == 1 and kinds[0] == "c":
        if op in ("real", "imag", "abs"):
            return out == dtypes.complex_component_type(ins[0])
        return op in COMPLEX_UNARY and out == ins[0]
    if len(ins) == 2 and kind == "c":
        return op in COMPLEX_BINARY and ins == [out, out]
    return False


# -- the generator --------------------------------------------------------------------------


#: Data movement whose element is its operand's element unchanged (the same IR value).
_MOVES_VALUE = frozenset({"bitcast", "reshape", "broadcast", "transpose", "slice", "copy",
                          "reverse"})

#: Whether emitters made now contract a multiply feeding an add or subtract into one fused
#: multiply-add (XLA:CPU's default: its LLVM target options allow FP-op fusion); set by the
#: backend while it compiles a program with ``fma_contraction`` on.
CONTRACT: contextvars.ContextVar[bool] = contextvars.ContextVar("fma_contraction",
                                                                default=False)


class ElementalEmitter:
    """Generates the element of an instruction at an index (memoised per index object)."""

    def __init__(self, builder: ir.IRBuilder, loader, members):
        self.b = builder
        self.loader = loader
        self.members = members  # the instructions generated here (others: loader)
        self.module = builder.module
        self.math = FMath(builder)
        self._memo: dict[tuple[int, int], ir.Value] = {}
        self._alive: list = []  # the Index objects of memo keys (their ids must stay unique)
        self._scalar = Index.scalar(builder)
        self.contract = CONTRACT.get()
        # id -> (the fmul of an HLO multiply, its operands): what an add may contract
        self._products: dict[int, tuple] = {}
        self._use_counts: dict[int, int] = {}  # id -> ``_uses`` (members outlive the emitter)

    # -- helpers ---------------------------------------------------------------------------

    def _intrinsic(self, name: str, ret, args):
        return _intrinsic(self.module, name, ret, args)

    def _call(self, base: str, args, name: str):
        """An overloaded float intrinsic (llvm.fabs, llvm.floor, ...) on args[0]'s type."""
        ty = args[0].type
        fn = self._intrinsic(f"{base}.{_suffix(ty)}", ty, [a.type for a in args])
        return self.b.call(fn, args, name=name)

    def _libm(self, fname: str, args, name: str, single: bool = False):
        """libm ``fname`` of f32/f64 arguments, evaluated in f64 and rounded to args[0]'s
        type (the interpreter's libm helper); ``single``: f32 arguments through the C
        library's f32 function (_LIBM_F32: XLA:CPU's, the interpreter's libm_single)."""
        b = self.b
        ty = args[0].type
        if single and ty == F32 and fname in _LIBM_F32:
            fn = self._intrinsic(_LIBM_F32[fname], F32, [F32] * len(args))
            return b.call(fn, list(args), name=name)
        wide = [a if a.type == F64 else b.fpext(a, F64, name=f"{name}.wide") for a in args]
        fn = self._intrinsic(fname, F64, [F64] * len(args))
        r = b.call(fn, wide, name=f"{name}.f64" if ty != F64 else name)
        return r if ty == F64 else b.fptrunc(r, ty, name=name)

    def _signbit(self, v, name):
        bits = ir.IntType(32 if v.type == F32 else 64)
        iv = self.b.bitcast(v, bits, name=f"{name}.bits")
        return self.b.icmp_signed("<", iv, ir.Constant(bits, 0), name=f"{name}.sign")

    # -- the generator ---------------------------------------------------------------------

    def value_at(self, instr, index: Index):
        """The element of ``instr`` at ``index``. The expression DAG below it is generated
        with an explicit stack, not recursion: each element being generated is a generator
        (``_element``) that yields the ``(operand, index)`` elements it needs and gets their
        values back, so a fused chain of any length needs memory, not Python's stack."""
        key = (id(instr), id(index))
        v = self._memo.get(key)
        if v is not None:
            return v
        if id(instr) not in self.members:
            return self._remember(key, index, self.loader(instr, index))
        stack = [(key, index, self._element(instr, index))]
        v = None
        while stack:
            key, index, gen = stack[-1]
            try:
                operand, at = gen.send(v)
            except StopIteration as done:
                stack.pop()
                v = self._remember(key, index, done.value)
                continue
            key = (id(operand), id(at))
            v = self._memo.get(key)
            if v is None:
                if id(operand) in self.members:
                    stack.append((key, at, self._element(operand, at)))
                else:
                    v = self._remember(key, at, self.loader(operand, at))
        return v

    def _remember(self, key, index, value):
        self._memo[key] = value
        self._alive.append(index)
        return value

    def _element(self, instr, index):
        """A generator of the element of member ``instr`` at ``index``: yields ``(operand,
        index)`` for each operand element it needs, returns the value."""
        op = instr.opcode
        if op == "iota" and (_et(instr.shape) in FORMATS or TYPES[_et(instr.shape)][0] == "c"):
            return self._iota(instr, index)  # the element types indexing's iota leaves out
        if op == "bitcast-convert" and dtypes.bit_width(_et(instr.shape)) != \
                dtypes.bit_width(_et(instr.operands[0].shape)):
            return (yield from self._bitcast_resize(instr, index))
        if op in indexing.GENERATORS:  # data movement: the operands' elements at mapped indices
            got = indexing.GENERATORS[op](self, instr, index)
            if type(got) is GeneratorType:
                got = yield from got
            return got
        args = []
        for o in instr.operands:  # elementwise: rank-0 operands at the scalar index
            at = self._scalar if not o.shape.dimensions and index.dims else index
            args.append((yield o, at))
        return self._compute(instr, args)

    def _compute(self, instr, args):
        """An elementwise instruction's element from its operands' elements."""
        op = instr.opcode
        ins = [_et(o.shape) for o in instr.operands]
        out = _et(instr.shape)
        name = instr.name
        if op == "convert":
            return self.convert(args[0], ins[0], out, name)
        if op == "bitcast-convert":
            return self._bitcast_convert(args[0], ins[0], out, name)
        if op == "reduce-precision":
            return self._reduce_precision(args[0], out, instr.attrs["exponent_bits"],
                                          instr.attrs["mantissa_bits"], name)
        if "c" in (TYPES[out][0], *(TYPES[t][0] for t in ins)) and op not in ("select",
                                                                              "convert"):
            return self._complex(instr, op, args, ins, out, name)
        if op == "compare":
            return self._compare(instr, args, ins, name)
        if op == "stochastic-convert":
            return self._stochastic_convert(args[0], args[1], ins, out, name)
        if op == "select":
            t, f = args[1:]
            if TYPES[out][0] == "f":  # operands of another float type are converted
                t = self.convert(t, ins[1], out, f"{name}.t")
                f = self.convert(f, ins[2], out, f"{name}.f")
            v = self.b.select(args[0], t, f, name=name)
            fmt = FORMATS.get(out)
            if fmt is not None:  # select the encodings too when both are known
                et_, ef_ = (getattr(x, "_xlapy_encoding", None) for x in (t, f))
                if et_ is not None and ef_ is not None and et_[0] == fmt and ef_[0] == fmt:
                    _with_encoding(v, fmt, self.b.select(args[0], et_[1], ef_[1],
                                                         name=f"{name}.enc"))
            return v
        kind, ty = TYPES[out]
        if op in ("negate", "abs") and out == PT.F16 and ins[0] == PT.F16:
            known = getattr(args[0], "_xlapy_encoding", None)
            if known is not None:  # on the bits, as XLA:CPU (a signalling NaN stays one)
                raw = known[1]
                raw = self.b.xor(raw, ir.Constant(raw.type, 0x8000), name=f"{name}.bits") \
                    if op == "negate" else \
                    self.b.and_(raw, ir.Constant(raw.type, 0x7FFF), name=f"{name}.bits")
                return decode(self.b, raw, FORMATS[PT.F16], name)
        if kind == "f":  # operands in the result's work type (exact)
            args = [self._widen(a, ty, f"{name}.a{k}") for k, a in enumerate(args)]
        if op == "clamp":
            return self._finish(self._clamp(args, kind, ty, name), out, name)
        if len(args) == 1:
            x = args[0]
            kx = TYPES[ins[0]][0]
            if kx == "f":
                r = self._float_unary(op, x, name)
                return r if op == "is-finite" else self._finish(r, out, name)
            if kx == "p":
                return self.b.xor(x, ir.Constant(I1, 1), name=name)
            return self._int_unary(op, x, kx == "s", name)
        if kind == "f":
            fusable = op == "multiply" and self.contract and self._uses(instr) == 1
            return self._finish(self._float_binary(op, *args, name, fusable), out, name)
        if kind == "p":
            return self._pred_binary(op, *args, name)
        return self._int_binary(op, *args, kind == "s", name)

    def _iota(self, instr, index):
        """iota of a narrow float (the position rounded to the type, as a convert from
        s64) or a complex type (the position as the real part)."""
        et = _et(instr.shape)
        i = index.multi[instr.attrs["iota_dimension"]]
        if et in FORMATS:
            return self.convert(i, PT.S64, et, instr.name)
        part = dtypes.complex_component_type(et)
        return self.convert(self.convert(i, PT.S64, part, f"{instr.name}.re"), part, et,
                            instr.name)

    def _widen(self, v, ty, name):
        return self.b.fpext(v, ty, name=name) if v.type != ty else v

    def _finish(self, v, et, name):
        """A float result in its element type (narrow floats rounded)."""
        if et in FORMATS:
            return round_to(self.b, v, et, name)
        return v

    # -- floats ----------------------------------------------------------------------------

    def _float_unary(self, op, x, name):
        b = self.b
        ty = x.type
        m = self.math
        if op == "negate":
            return b.fneg(x, name=name)
        if op == "abs":
            return self._call("llvm.fabs", [x], name)
        if op == "sign":  # +-1 or the zero itself; NaN stays
            nz = b.fcmp_ordered("!=", x, ir.Constant(ty, 0.0), name=f"{name}.nz")
            mag = b.select(nz, ir.Constant(ty, 1.0), ir.Constant(ty, 0.0), name=f"{name}.mag")
            r = self._call("llvm.copysign", [mag, x], f"{name}.r")
            return b.select(b.fcmp_unordered("uno", x, x, name=f"{name}.nan"), x, r, name=name)
        if op in ("floor", "ceil", "round-nearest-afz", "round-nearest-even"):
            base = {"floor": "llvm.floor", "ceil": "llvm.ceil", "round-nearest-afz": "llvm.round",
                    "round-nearest-even": "llvm.roundeven"}[op]
            return self._call(base, [x], name)
        if op == "is-finite":
            return b.fcmp_ordered("<", self._call("llvm.fabs", [x], f"{name}.abs"),
                                  ir.Constant(ty, float("inf")), name=name)
        if op == "real":
            return x
        if op == "imag":
            return ir.Constant(ty, 0.0)
        if op == "sqrt":  # correctly rounded in any precision
            return self._call("llvm.sqrt", [x], name)
        if op == "rsqrt":  # 1 / sqrt(x) in f64, rounded (the interpreter's)
            wide = x if ty == F64 else b.fpext(x, F64, name=f"{name}.wide")
            r = b.fdiv(ir.Constant(F64, 1.0), self._call("llvm.sqrt", [wide], f"{name}.sqrt"),
                       name=f"{name}.r" if ty != F64 else name)
            return r if ty == F64 else b.fptrunc(r, ty, name=name)
        if op == "exponential":
            return m.exp(x, name)
        if op == "exponential-minus-one":
            return m.expm1(x, name)
        if op == "log":
            return m.log(x, name)
        if op == "log-plus-one":
            return m.log1p(x, name)
        if op == "tanh":
            return m.tanh(x, name)
        if op == "erf" and ty == F32:
            return m.erf_f32(x, name)
        if op == "logistic":  # 1 / (1 + exp(-x)) (XLA's LogisticExpander)
            e = m.exp(b.fneg(x, name=f"{name}.neg"), f"{name}.exp")
            one = ir.Constant(ty, 1.0)
            return b.fdiv(one, b.fadd(one, e, name=f"{name}.den"), name=name)
        return self._libm(_LIBM[op], [x], name, single=True)

    def _uses(self, instr) -> int:
        """How many values of this kernel read ``instr``'s element: its users here, through
        the data movement that only moves the value (a use by an instruction generated
        elsewhere, or a stored result, counts too). XLA:CPU's LLVM fuses a product into an
        add or subtract only when that is the product's one use."""
        known = self._use_counts.get(id(instr))
        if known is not None:
            return known
        n = int(instr.parent is not None and instr.parent.root is instr)
        for user in instr.users:
            if id(user) not in self.members:
                n += 2
                break
            k = sum(o is instr for o in user.operands)
            n += k * self._uses(user) if user.opcode in _MOVES_VALUE else k
        self._use_counts[id(instr)] = n
        return n

    def _float_binary(self, op, a, c, name, fusable=False):
        """``a op c`` of f32/f64 values; ``fusable``: a multiply whose product an add or
        subtract may fuse (``CONTRACT``)."""
        b = self.b
        if op in ("add", "subtract") and self.contract:
            fused = self._contracted(op, a, c, name)
            if fused is not None:
                return fused
        if op == "add":
            return b.fadd(a, c, name=name)
        if op == "subtract":
            return b.fsub(a, c, name=name)
        if op == "multiply":
            product = b.fmul(a, c, name=name)
            if fusable:
                self._products[id(product)] = (product, a, c)
            return product
        if op == "divide":
            return b.fdiv(a, c, name=name)
        if op == "remainder":  # fmod: exact, the dividend's sign
            return b.frem(a, c, name=name)
        if op in ("maximum", "minimum"):
            return self._float_minmax(op, a, c, name)
        if op == "power":
            return self._libm("pow", [a, c], name, single=True)
        return self._libm("atan2", [a, c], name, single=True)

    def _contracted(self, op, a, c, name):
        """``a op c`` as one fused multiply-add when an operand is a product this emitter
        made whose one use this is (the left one first), else None: XLA:CPU's LLVM
        contraction (module docstring, ``CONTRACT``): (x*y) + c -> fma(x, y, c), (x*y) - c -> fma(x, y, -c),
        a + (x*y) -> fma(x, y, a), a - (x*y) -> fma(-x, y, a)."""
        b = self.b
        left, right = self._products.get(id(a)), self._products.get(id(c))
        if left is not None and left[0] is a:
            z = c if op == "add" else b.fneg(c, name=f"{name}.neg")
            return self._call("llvm.fma", [left[1], left[2], z], name)
        if right is not None and right[0] is c:
            x = right[1] if op == "add" else b.fneg(right[1], name=f"{name}.neg")
            return self._call("llvm.fma", [x, right[2], a], name)
        return None

    def _float_minmax(self, op, a, c, name):
        b = self.b
        ty = a.type
        a_nan = b.fcmp_unordered("uno", a, a, name=f"{name}.anan")
        c_nan = b.fcmp_unordered("uno", c, c, name=f"{name}.cnan")
        zero = ir.Constant(ty, 0.0)
        both_zero = b.and_(b.fcmp_ordered("==", a, zero, name=f"{name}.az"),
                           b.fcmp_ordered("==", c, zero, name=f"{name}.cz"),
                           name=f"{name}.zeros")
        a_neg = self._signbit(a, f"{name}.a")
        if op == "maximum":
            r = b.select(b.fcmp_ordered(">", a, c, name=f"{name}.gt"), a, c, name=f"{name}.pick")
            z = b.select(a_neg, c, a, name=f"{name}.zpick")  # max(-0, +0) = +0
        else:
            r = b.select(b.fcmp_ordered("<", a, c, name=f"{name}.lt"), a, c, name=f"{name}.pick")
            z = b.select(a_neg, a, c, name=f"{name}.zpick")  # min(+0, -0) = -0
        r = b.select(both_zero, z, r, name=f"{name}.ordered")
        r = b.select(c_nan, c, r, name=f"{name}.cprop")
        return b.select(a_nan, a, r, name=name)  # NaN propagates, the lhs first

    def _clamp(self, args, kind, ty, name):
        """clamp(lo, x, hi) = min(max(x, lo), hi); floats: a NaN anywhere is the result
        (lo's first, then x's, then hi's)."""
        b = self.b
        lo, x, hi = args
        if kind == "f":
            r = self._float_minmax("minimum", self._float_minmax("maximum", x, lo, f"{name}.max"),
                                   hi, f"{name}.min")
            for k, v in ((2, hi), (1, x), (0, lo)):
                r = b.select(b.fcmp_unordered("uno", v, v, name=f"{name}.nan{k}"), v, r,
                             name=f"{name}.n{k}")
            return r
        if kind == "p":
            return b.and_(b.or_(x, lo, name=f"{name}.or"), hi, name=name)
        cmp = b.icmp_signed if kind == "s" else b.icmp_unsigned
        r = b.select(cmp(">", x, lo, name=f"{name}.gt"), x, lo, name=f"{name}.max")
        return b.select(cmp("<", r, hi, name=f"{name}.lt"), r, hi, name=name)

    # -- integers --------------------------------------------------------------------------

    def _int_unary(self, op, x, signed, name):
        b = self.b
        ty = x.type
        zero = ir.Constant(ty, 0)
        if op == "negate":
            return b.sub(zero, x, name=name)  # -INT_MIN = INT_MIN
        if op == "abs":
            if not signed:
                return x
            neg = b.icmp_signed("<", x, zero, name=f"{name}.neg")
            return b.select(neg, b.sub(zero, x, name=f"{name}.minus"), x, name=name)
        if op == "sign":
            if ty.width == 1:  # s1 holds -1 or 0, u1 1 or 0: the sign is the value
                return x
            pos = b.icmp_signed(">", x, zero, name=f"{name}.ispos") if signed else \
                b.icmp_unsigned("!=", x, zero, name=f"{name}.ispos")
            r = b.zext(pos, ty, name=f"{name}.pos")
            if signed:
                neg = b.zext(b.icmp_signed("<", x, zero, name=f"{name}.isneg"), ty,
                             name=f"{name}.neg")
                r = b.sub(r, neg, name=name)
            return r
        if op == "not":
            return b.xor(x, ir.Constant(ty, -1), name=name)
        if op == "popcnt":
            fn = self._intrinsic(f"llvm.ctpop.i{ty.width}", ty, [ty])
            return b.call(fn, [x], name=name)
        # count-leading-zeros (of 0: the width)
        fn = self._intrinsic(f"llvm.ctlz.i{ty.width}", ty, [ty, I1])
        return b.call(fn, [x, ir.Constant(I1, 0)], name=name)

    def _pred_binary(self, op, a, c, name):
        b = self.b
        how = PRED_BINARY[op]
        if how == "or":
            return b.or_(a, c, name=name)
        if how == "and":
            return b.and_(a, c, name=name)
        return b.xor(a, c, name=name)

    def _int_binary(self, op, a, c, signed, name):
        b = self.b
        ty = a.type
        if op == "add":
            return b.add(a, c, name=name)
        if op == "subtract":
            return b.sub(a, c, name=name)
        if op == "multiply":
            return b.mul(a, c, name=name)
        if op == "and":
            return b.and_(a, c, name=name)
        if op == "or":
            return b.or_(a, c, name=name)
        if op == "xor":
            return b.xor(a, c, name=name)
        if op in ("maximum", "minimum"):
            cmp = b.icmp_signed if signed else b.icmp_unsigned
            pick = cmp(">" if op == "maximum" else "<", a, c, name=f"{name}.cmp")
            return b.select(pick, a, c, name=name)
        if op == "divide":
            return self._int_divide(a, c, ty, signed, name)
        if op == "remainder":
            return self._int_remainder(a, c, ty, signed, name)
        if op in ("shift-left", "shift-right-logical", "shift-right-arithmetic"):
            return self._shift(op, a, c, ty, name)
        if op == "mulhi":
            wide = ir.IntType(2 * ty.width)
            ext = b.sext if signed else b.zext
            p = b.mul(ext(a, wide, name=f"{name}.a"), ext(c, wide, name=f"{name}.c"),
                      name=f"{name}.p")
            return b.trunc(b.lshr(p, ir.Constant(wide, ty.width), name=f"{name}.hi"), ty,
                           name=name)
        return self._int_power(a, c, ty, signed, name)

    def _int_divide(self, a, c, ty, signed, name):
        b = self.b
        zero = b.icmp_unsigned("==", c, ir.Constant(ty, 0), name=f"{name}.byzero")
        minus_one = ir.Constant(ty, -1)
        if signed:
            overflow = self._int_overflow(a, c, ty, name)
            bad = b.or_(zero, overflow, name=f"{name}.bad")
            safe = b.select(bad, ir.Constant(ty, 1), c, name=f"{name}.safe")
            q = b.sdiv(a, safe, name=f"{name}.q")
            q = b.select(overflow, a, q, name=f"{name}.ovq")
        else:
            safe = b.select(zero, ir.Constant(ty, 1), c, name=f"{name}.safe")
            q = b.udiv(a, safe, name=f"{name}.q")
        return b.select(zero, minus_one, q, name=name)  # x / 0 = -1 (all bits set)

    def _int_overflow(self, a, c, ty, name):
        """INT_MIN OP -1 (which traps in hardware)."""
        b = self.b
        int_min = ir.Constant(ty, 1 << (ty.width - 1))
        return b.and_(b.icmp_unsigned("==", a, int_min, name=f"{name}.ismin"),
                      b.icmp_unsigned("==", c, ir.Constant(ty, -1), name=f"{name}.ism1"),
                      name=f"{name}.overflow")

    def _int_remainder(self, a, c, ty, signed, name):
        b = self.b
        zero = b.icmp_unsigned("==", c, ir.Constant(ty, 0), name=f"{name}.byzero")
        if signed:
            overflow = self._int_overflow(a, c, ty, name)
            bad = b.or_(zero, overflow, name=f"{name}.bad")
            safe = b.select(bad, ir.Constant(ty, 1), c, name=f"{name}.safe")
            r = b.srem(a, safe, name=f"{name}.r")  # INT_MIN % 1 = 0 as INT_MIN % -1
        else:
            safe = b.select(zero, ir.Constant(ty, 1), c, name=f"{name}.safe")
            r = b.urem(a, safe, name=f"{name}.r")
        return b.select(zero, a, r, name=name)  # x % 0 = x

    def _shift(self, op, a, c, ty, name):
        """Shift amounts read as unsigned; >= the width gives 0 (arithmetic: the sign)."""
        b = self.b
        out = b.icmp_unsigned(">=", c, ir.Constant(ty, ty.width), name=f"{name}.out")
        amount = b.select(out, ir.Constant(ty, 0), c, name=f"{name}.amount")
        if op == "shift-left":
            return b.select(out, ir.Constant(ty, 0), b.shl(a, amount, name=f"{name}.shl"),
                            name=name)
        if op == "shift-right-logical":
            return b.select(out, ir.Constant(ty, 0), b.lshr(a, amount, name=f"{name}.shr"),
                            name=name)
        fill = b.ashr(a, ir.Constant(ty, ty.width - 1), name=f"{name}.fill")
        return b.select(out, fill, b.ashr(a, amount, name=f"{name}.sar"), name=name)

    def _int_power(self, a, c, ty, signed, name):
        """XLA:CPU's EmitIntegerPow: square-and-multiply with wrap-around over the
        exponent's low 6 bits only; a negative exponent (its sign bit set in the storage
        width: unsigned types of 8 bits or more too, sub-byte types widened to 8 bits
        first) gives 1 for base 1, +-1 by the exponent's parity for base -1 (all bits
        set), 0 otherwise (see the interpreter's _int_power)."""
        b = self.b
        one = ir.Constant(ty, 1)
        zero = ir.Constant(ty, 0)
        if ty.width == 1:  # s1/u1: exponent 0 gives 1; s1 -1^-1 = -1, 0^-1 = 0, u1 x^1 = x
            nonzero = b.icmp_unsigned("!=", c, zero, name=f"{name}.nz")
            return b.select(nonzero, a, one, name=name)
        steps = min(6, ty.width)
        acc = one
        base = a
        e = c
        for k in range(steps):
            bit = b.trunc(e, I1, name=f"{name}.bit{k}")
            acc = b.select(bit, b.mul(acc, base, name=f"{name}.m{k}"), acc, name=f"{name}.acc{k}")
            if k + 1 < steps:
                base = b.mul(base, base, name=f"{name}.sq{k}")
                e = b.lshr(e, one, name=f"{name}.e{k}")
        if not signed and ty.width < 8:  # zero-extended to 8 bits: never negative
            return acc
        negative = b.icmp_signed("<", c, zero, name=f"{name}.neg")
        odd = b.trunc(c, I1, name=f"{name}.odd")
        minus_one = ir.Constant(ty, -1)
        neg_result = b.select(b.icmp_unsigned("==", a, one, name=f"{name}.is1"), one,
                              b.select(b.icmp_unsigned("==", a, minus_one, name=f"{name}.ism1"),
                                       b.select(odd, minus_one, one, name=f"{name}.pm1"), zero,
                                       name=f"{name}.nr1"), name=f"{name}.nr")
        return b.select(negative, neg_result, acc, name=name)

    # -- compare ---------------------------------------------------------------------------

    def _compare(self, instr, args, ins, name):
        direction = _FCMP[instr.attrs["direction"].value]
        a, c = args
        kind = TYPES[ins[0]][0]
        b = self.b
        if kind == "f":
            if instr.attrs["type"] == ComparisonType.TOTALORDER:
                ka = self._total_order_key(a, ins[0], f"{name}.ka")
                kc = self._total_order_key(c, ins[1], f"{name}.kc")
                return b.icmp_signed(direction, ka, kc, name=name)
            if a.type != c.type:  # mixed precision meets in f64
                a = self._widen(a, F64, f"{name}.a")
                c = self._widen(c, F64, f"{name}.c")
            if direction == "!=":
                return b.fcmp_unordered("!=", a, c, name=name)  # NaN != x is true
            return b.fcmp_ordered(direction, a, c, name=name)
        if kind == "s":
            return b.icmp_signed(direction, a, c, name=name)
        return b.icmp_unsigned(direction, a, c, name=name)  # unsigned, pred (false < true)

    def _total_order_key(self, v, et, name):
        """XLA's TOTALORDER key of a float: the sign-magnitude encoding as a two's
        complement integer (-NaN < -inf < ... < -0 < +0 < ... < inf < +NaN); types without
        -0 (fnuz) close the gap at zero, f8e8m0fnu orders by its bits."""
        b = self.b
        bits = self.float_bits(v, et, name)
        width = bits.type.width
        fmt = FORMATS.get(et)
        wt = bits.type if width >= 32 else I32
        if width < 32:
            bits = b.zext(bits, I32, name=f"{name}.w")
        if fmt is not None and fmt.special == "e8m0":
            return bits
        sign = b.icmp_unsigned("!=", b.lshr(bits, ir.Constant(wt, width - 1), name=f"{name}.s"),
                               ir.Constant(wt, 0), name=f"{name}.neg")
        mag = b.and_(bits, ir.Constant(wt, (1 << (width - 1)) - 1), name=f"{name}.mag")
        minus = b.sub(b.sub(ir.Constant(wt, 0), mag, name=f"{name}.m0"), ir.Constant(wt, 1),
                      name=f"{name}.minus")  # -mag - 1
        if fmt is not None and fmt.special == "fnuz":
            # negative magnitudes step up by one (no -0); the NaN (sign, zero magnitude) is
            # the smallest key
            minus = b.sub(ir.Constant(wt, 0), mag, name=f"{name}.fnuz")
            nan = b.icmp_unsigned("==", mag, ir.Constant(wt, 0), name=f"{name}.nan")
            minus = b.select(nan, ir.Constant(wt, -(1 << (width - 1))), minus, name=f"{name}.nk")
        return b.select(sign, minus, mag, name=name)

    # -- conversions -----------------------------------------------------------------------

    def float_bits(self, v, et, name):
        """The encoding of the float compute value ``v`` of type ``et`` (an iN, N its bit
        width): f32/f64 bits, bf16 the top half of its f32 (exact, NaN payloads too), other
        narrow types re-encoded (exact: the value is representable)."""
        b = self.b
        if et == PT.F32:
            return b.bitcast(v, I32, name=f"{name}.bits")
        if et == PT.F64:
            return b.bitcast(v, I64, name=f"{name}.bits")
        fmt = FORMATS[et]
        raw = encoding_of(b, v, fmt, f"{name}.enc")
        if fmt.bits < raw.type.width:
            raw = b.trunc(raw, ir.IntType(fmt.bits), name=f"{name}.bits")
        return raw

    def _from_bits(self, bits, et, name):
        """The compute value of the encoding ``bits`` (an iN, N the bit width of ``et``)."""
        b = self.b
        kind, ty = TYPES[et]
        if kind == "p":
            return b.icmp_unsigned("!=", bits, ir.Constant(bits.type, 0), name=name)
        if kind in "su":
            return bits
        if et in (PT.F32, PT.F64):
            return b.bitcast(bits, ty, name=name)
        fmt = FORMATS[et]
        if bits.type.width < fmt.storage.width:
            bits = b.zext(bits, fmt.storage, name=f"{name}.st")
        return decode(b, bits, fmt, name)

    def _bits(self, x, src, name):
        """The encoding of the compute value ``x`` of type ``src`` (an iN, N its bit width;
        pred: 0 or 1 in an i8)."""
        kind = TYPES[src][0]
        if kind == "p":
            return self.b.zext(x, I8, name=f"{name}.bits")
        if kind == "f":
            return self.float_bits(x, src, name)
        return x

    def _bitcast_convert(self, x, src, dst, name):
        return self._from_bits(self._bits(x, src, name), dst, name)

    def _bitcast_resize(self, instr, index):
        """A bitcast-convert between bit widths (XLA's rule, little-endian): a wider result
        element joins the operand's pieces along its minor dimension, least significant
        first; a narrower one is the piece of the operand element its minor index names."""
        b = self.b
        operand = instr.operands[0]
        src, dst = _et(operand.shape), _et(instr.shape)
        ws, wd = dtypes.bit_width(src), dtypes.bit_width(dst)
        odims = tuple(operand.shape.dimensions)
        name = instr.name
        if ws < wd:
            wide = ir.IntType(wd)
            acc = None
            for j in range(wd // ws):
                at = Index(b, odims, multi=list(index.multi) + [ir.Constant(I64, j)])
                v = yield operand, at
                piece = b.zext(self._bits(v, src, f"{name}.p{j}"), wide, name=f"{name}.z{j}")
                if j:
                    piece = b.shl(piece, ir.Constant(wide, j * ws), name=f"{name}.s{j}")
                    acc = b.or_(acc, piece, name=f"{name}.or{j}")
                else:
                    acc = piece
            return self._from_bits(acc, dst, name)
        v = yield operand, Index(b, odims, multi=list(index.multi[:-1]))
        bits = self._bits(v, src, name)
        shift = b.mul(index.multi[-1], ir.Constant(I64, wd), name=f"{name}.at")
        if ws < 64:
            shift = b.trunc(shift, bits.type, name=f"{name}.sh")
        piece = b.trunc(b.lshr(bits, shift, name=f"{name}.shr"), ir.IntType(wd),
                        name=f"{name}.piece")
        return self._from_bits(piece, dst, name)

    def convert(self, x, src, dst, name):
        """XLA's convert of the compute value ``x`` of type ``src`` to type ``dst``."""
        b = self.b
        if src == dst:
            return x
        sk, st = TYPES[src]
        dk, dt = TYPES[dst]
        if dk == "c":  # complex -> complex componentwise; real -> (x, 0)
            part = dtypes.complex_component_type(dst)
            if sk == "c":
                re, im = (self.convert(b.extract_value(x, k, name=f"{name}.p{k}"),
                                       dtypes.complex_component_type(src), part, f"{name}.{k}")
                          for k in (0, 1))
            else:
                re = self.convert(x, src, part, f"{name}.re")
                im = ir.Constant(dt.elements[0], 0.0)
            return self._pack(re, im, dt, name)
        if dk == "p":
            if sk == "f":
                return b.fcmp_unordered("!=", x, ir.Constant(st, 0.0), name=name)  # NaN: true
            return b.icmp_unsigned("!=", x, ir.Constant(st, 0), name=name)
        if sk == "p":
            if dk == "f":
                return self._finish(b.uitofp(x, dt, name=f"{name}.f"), dst, name)
            return b.zext(x, dt, name=name)
        if sk == "f" and dk == "f":
            if dst in FORMATS:
                return round_to(b, x, dst, name)
            x = self._canonical_nan(x, src, name)
            if dt == st:
                return x
            return b.fpext(x, dt, name=name) if dt == F64 else b.fptrunc(x, dt, name=name)
        if sk == "f":  # truncate toward zero, saturate, NaN -> 0
            return self._saturating_int(x, st, dt, dk == "s", name)
        if dk == "f":  # int -> float: one rounding (narrow types: through f32, as ml_dtypes)
            to = F32 if dst in FORMATS else dt
            f = (b.sitofp(x, to, name=f"{name}.f") if sk == "s"
                 else b.uitofp(x, to, name=f"{name}.f"))
            return self._finish(f, dst, name)
        if st.width == dt.width:
            return x
        if st.width > dt.width:
            return b.trunc(x, dt, name=name)
        return b.sext(x, dt, name=name) if sk == "s" else b.zext(x, dt, name=name)

    def _saturating_int(self, x, st, dt, signed: bool, name: str):
        """Float ``x`` (type ``st``) -> integer type ``dt``: truncated toward zero, out of
        range at the nearest bound, NaN -> 0 (llvm.fptosi.sat's values). Written as
        compares, selects and a plain fptosi/fptoui of a value in range, which vectorise
        (this LLVM scalarises the saturating intrinsics' vectors: an f32 -> s8 convert took
        0.45 ns an element, 16 scalar conversions a vector)."""
        b = self.b
        bits = dt.width
        lo = -(2 ** (bits - 1)) if signed else 0
        top = 2 ** (bits - 1) if signed else 2 ** bits  # the first value past the range
        mantissa = 24 if st == F32 else 53
        narrow = bits < 32
        conv_t = ir.IntType(32) if narrow else dt
        # below lo (NaN too: the compare is false): lo; at or past top: the largest value
        t = b.select(b.fcmp_ordered(">", x, ir.Constant(st, float(lo)), name=f"{name}.gtlo"),
                     x, ir.Constant(st, float(lo)), name=f"{name}.lo")
        if bits < mantissa:  # top - 1 is a float: clamp to it
            t = b.select(b.fcmp_ordered("<", t, ir.Constant(st, float(top - 1)),
                                        name=f"{name}.lthi"),
                         t, ir.Constant(st, float(top - 1)), name=f"{name}.hi")
            over = None
        else:  # top is a power of two: values from it on take the largest integer
            over = b.fcmp_ordered(">=", t, ir.Constant(st, float(top)), name=f"{name}.over")
            t = b.select(over, ir.Constant(st, 0.0), t, name=f"{name}.inrange")
        r = (b.fptosi(t, conv_t, name=f"{name}.i") if signed or narrow
             else b.fptoui(t, conv_t, name=f"{name}.i"))
        if narrow:
            r = b.trunc(r, dt, name=f"{name}.t")
        if over is not None:
            r = b.select(over, ir.Constant(dt, (top - 1) & ((1 << bits) - 1)), r,
                         name=f"{name}.max")
        nan = b.fcmp_unordered("uno", x, x, name=f"{name}.nan")
        return b.select(nan, ir.Constant(dt, 0), r, name=name)

    def _stochastic_convert(self, x, rnd, ins, out, name):
        """Float -> signed integer, the magnitude rounded up when the random bits (read as a
        fraction of 2^bits) are below its fractional part; inf and out-of-range values
        saturate (at the bounds as the operand's type holds them), NaN -> 0 (the
        interpreter's, after XLA's evaluator), in f64."""
        import numpy as np

        from xlapy.interpreter.kernels.numeric import convert as np_convert  # bounds only
        b = self.b
        ty = TYPES[out][1]
        bits = ty.width
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        src_dtype = dtypes.to_dtype(ins[0])
        with np.errstate(all="ignore"):
            lo_f, hi_f = (float(np.asarray(np_convert(np.asarray(float(v)), src_dtype),
                                           np.float64)) for v in (lo, hi))
        rbits = dtypes.bit_width(ins[1])
        v = self._widen(x, F64, f"{name}.v")
        inf = ir.Constant(F64, float("inf"))
        magnitude = self._call("llvm.fabs", [v], f"{name}.mag")
        finite = b.fcmp_ordered("<", magnitude, inf, name=f"{name}.finite")
        zero = ir.Constant(F64, 0.0)
        trunc_f = b.select(finite, self._call("llvm.trunc", [magnitude], f"{name}.t"), zero,
                           name=f"{name}.tf")
        fraction = b.fsub(magnitude, trunc_f, name=f"{name}.frac")
        fixed_f = b.select(finite, b.fmul(fraction, ir.Constant(F64, 2.0 ** rbits),
                                          name=f"{name}.scaled"), zero, name=f"{name}.ff")
        cap = ir.Constant(F64, 2.0 ** 64 - 2048)
        fixed_f = b.select(b.fcmp_ordered(">", fixed_f, cap, name=f"{name}.big"), cap, fixed_f,
                           name=f"{name}.fc")
        fixed = b.fptoui(fixed_f, I64, name=f"{name}.fixed")
        in_range = b.fcmp_ordered("<", trunc_f, ir.Constant(F64, 2.0 ** 63), name=f"{name}.ok")
        truncated = b.fptosi(b.select(in_range, trunc_f, zero, name=f"{name}.ts"), I64,
                             name=f"{name}.trunc")
        random = b.zext(rnd, I64, name=f"{name}.rnd") if rnd.type.width < 64 else rnd
        up = b.icmp_unsigned("<", random, fixed, name=f"{name}.up")
        at_max = b.and_(up, b.icmp_signed("==", truncated, ir.Constant(I64, hi),
                                          name=f"{name}.ismax"), name=f"{name}.wrap")
        rounded = b.select(at_max, ir.Constant(I64, lo),
                           b.add(truncated, b.zext(up, I64, name=f"{name}.inc"),
                                 name=f"{name}.sum"), name=f"{name}.rounded")
        negative = b.icmp_signed("<", b.bitcast(v, I64, name=f"{name}.bits"),
                                 ir.Constant(I64, 0), name=f"{name}.neg")
        r = b.select(negative, b.sub(ir.Constant(I64, 0), rounded, name=f"{name}.minus"),
                     rounded, name=f"{name}.signed")
        r = b.select(b.fcmp_ordered(">=", v, ir.Constant(F64, hi_f), name=f"{name}.hi"),
                     ir.Constant(I64, hi), r, name=f"{name}.sathi")
        r = b.select(b.fcmp_ordered("<=", v, ir.Constant(F64, lo_f), name=f"{name}.lo"),
                     ir.Constant(I64, lo), r, name=f"{name}.satlo")
        r = b.select(b.fcmp_unordered("uno", v, v, name=f"{name}.nan"), ir.Constant(I64, 0), r,
                     name=f"{name}.r")
        return r if bits == 64 else b.trunc(r, ty, name=name)

    # -- complex ---------------------------------------------------------------------------

    def _pack(self, re, im, ty, name):
        b = self.b
        v = b.insert_value(ir.Constant(ty, ir.Undefined), re, 0, name=f"{name}.re")
        return b.insert_value(v, im, 1, name=name)

    def _parts(self, z, name):
        return (self.b.extract_value(z, 0, name=f"{name}.re"),
                self.b.extract_value(z, 1, name=f"{name}.im"))

    def _complex(self, instr, op, args, ins, out, name):
        b = self.b
        if op == "complex":
            return self._pack(args[0], args[1], TYPES[out][1], name)
        if op == "compare":
            (ar, ai), (cr, ci) = self._parts(args[0], f"{name}.a"), self._parts(args[1],
                                                                                f"{name}.c")
            if instr.attrs["direction"].value == "EQ":
                return b.and_(b.fcmp_ordered("==", ar, cr, name=f"{name}.r"),
                              b.fcmp_ordered("==", ai, ci, name=f"{name}.i"), name=name)
            return b.or_(b.fcmp_unordered("!=", ar, cr, name=f"{name}.r"),
                         b.fcmp_unordered("!=", ai, ci, name=f"{name}.i"), name=name)
        ty = TYPES[ins[0]][1]
        re, im = self._parts(args[0], f"{name}.x")
        if op == "real":
            return re
        if op == "imag":
            return im
        if op == "abs":
            return self._complex_abs(re, im, name)
        if op == "negate":
            return self._pack(b.fneg(re, name=f"{name}.nr"), b.fneg(im, name=f"{name}.ni"), ty,
                              name)
        if op == "sign":  # z / |z|, and 0 for 0
            r = self._complex_abs(re, im, f"{name}.abs")
            zero = ir.Constant(re.type, 0.0)
            is0 = b.fcmp_ordered("==", r, zero, name=f"{name}.is0")
            return self._pack(b.select(is0, zero, b.fdiv(re, r, name=f"{name}.dr"),
                                       name=f"{name}.sr"),
                              b.select(is0, zero, b.fdiv(im, r, name=f"{name}.di"),
                                       name=f"{name}.si"), ty, name)
        if op == "exponential":
            return self._pack(*self._complex_exp(re, im, name), ty, name)
        if op in ("sine", "cosine"):
            return self._pack(*self._complex_sin_cos(re, im, op == "sine", name), ty, name)
        if op in ("tanh", "tan"):
            return self._pack(*self._complex_tanh(re, im, op == "tan", name), ty, name)
        if op == "exponential-minus-one":
            return self._pack(*self._complex_expm1(re, im, name), ty, name)
        if op == "log-plus-one":
            return self._pack(*self._complex_log1p(re, im, name), ty, name)
        if op == "logistic":  # 1 / (1 + exp(-z))
            part = re.type
            er, ei = self._complex_exp(b.fneg(re, name=f"{name}.nr"), b.fneg(im, name=f"{name}.ni"),
                                       f"{name}.exp")
            one, zero = ir.Constant(part, 1.0), ir.Constant(part, 0.0)
            return self._complex_divide(one, zero, b.fadd(one, er, name=f"{name}.dr"),
                                        b.fadd(zero, ei, name=f"{name}.di"), ty, name)
        if op == "rsqrt":
            return self._pack(*self._complex_rsqrt(re, im, name), ty, name)
        if op == "log":
            return self._pack(*self._complex_log(re, im, name), ty, name)
        if op in _C99:
            return self._pack(*self._c99(_C99[op], re, im, name), ty, name)
        cr, ci = self._parts(args[1], f"{name}.y")
        if op == "power":
            return self._pack(*self._complex_pow(re, im, cr, ci, name), ty, name)
        if op == "atan2":
            return self._pack(*self._complex_atan2(re, im, cr, ci, name), ty, name)
        if op == "add":
            return self._pack(b.fadd(re, cr, name=f"{name}.ar"), b.fadd(im, ci, name=f"{name}.ai"),
                              ty, name)
        if op == "subtract":
            return self._pack(b.fsub(re, cr, name=f"{name}.sr"), b.fsub(im, ci, name=f"{name}.si"),
                              ty, name)
        if op == "multiply" and self.contract:  # as XLA:CPU fuses them (measured):
            # re = fma(re, cr, -(im * ci)), im = fma(im, cr, re * ci)
            ii = b.fneg(b.fmul(im, ci, name=f"{name}.ii"), name=f"{name}.nii")
            ri = b.fmul(re, ci, name=f"{name}.ri")
            return self._pack(self._call("llvm.fma", [re, cr, ii], f"{name}.mr"),
                              self._call("llvm.fma", [im, cr, ri], f"{name}.mi"), ty, name)
        if op == "multiply":
            return self._pack(
                b.fsub(b.fmul(re, cr, name=f"{name}.rr"), b.fmul(im, ci, name=f"{name}.ii"),
                       name=f"{name}.mr"),
                b.fadd(b.fmul(re, ci, name=f"{name}.ri"), b.fmul(im, cr, name=f"{name}.ir"),
                       name=f"{name}.mi"), ty, name)
        return self._complex_divide(re, im, cr, ci, ty, name)

    def _complex_abs(self, re, im, name):
        """hypot, NaN when either part is NaN. c64: sqrt(re^2 + im^2) in f64, rounded to f32
        (the squares are exact in f64 and cannot overflow it: what glibc's hypotf computes,
        and plain vector arithmetic); c128: libm's hypot."""
        b = self.b
        if re.type != F64:
            wr = b.fpext(re, F64, name=f"{name}.wr")
            wi = b.fpext(im, F64, name=f"{name}.wi")
            sq = b.fadd(b.fmul(wr, wr, name=f"{name}.rr"), b.fmul(wi, wi, name=f"{name}.ii"),
                        name=f"{name}.sum")
            r = b.fptrunc(self._call("llvm.sqrt", [sq], f"{name}.sqrt"), re.type,
                          name=f"{name}.hypot")
        else:
            r = self._libm("hypot", [re, im], f"{name}.hypot")
        nan = b.or_(b.fcmp_unordered("uno", re, re, name=f"{name}.rn"),
                    b.fcmp_unordered("uno", im, im, name=f"{name}.in"), name=f"{name}.nan")
        return b.select(nan, ir.Constant(re.type, float("nan")), r, name=name)

    def _np_max(self, a, c, name):
        """NumPy's maximum: a when a >= c or a is NaN, else c."""
        b = self.b
        take = b.or_(b.fcmp_ordered(">=", a, c, name=f"{name}.ge"),
                     b.fcmp_unordered("uno", a, a, name=f"{name}.an"), name=f"{name}.take")
        return b.select(take, a, c, name=name)

    def _np_min(self, a, c, name):
        b = self.b
        take = b.or_(b.fcmp_ordered("<=", a, c, name=f"{name}.le"),
                     b.fcmp_unordered("uno", a, a, name=f"{name}.an"), name=f"{name}.take")
        return b.select(take, a, c, name=name)

    def _complex_sin_cos(self, x, y, sine, name):
        """sin/cos(x + iy) through sinh/cosh of y from one exp (XLA's formulas)."""
        b = self.b
        part = x.type
        half = ir.Constant(part, 0.5)
        exp_y = self._libm("exp", [y], f"{name}.ey")
        hp = b.fmul(half, exp_y, name=f"{name}.hp")
        hn = b.fdiv(half, exp_y, name=f"{name}.hn")
        sin_x = self._libm("sin", [x], f"{name}.sin")
        cos_x = self._libm("cos", [x], f"{name}.cos")
        sinh_y = b.fsub(hp, hn, name=f"{name}.sinh")
        cosh_y = b.fadd(hp, hn, name=f"{name}.cosh")
        if sine:
            return (b.fmul(sin_x, cosh_y, name=f"{name}.re"),
                    b.fmul(cos_x, sinh_y, name=f"{name}.im"))
        return (b.fmul(cos_x, cosh_y, name=f"{name}.re"),
                b.fneg(b.fmul(sin_x, sinh_y, name=f"{name}.ss"), name=f"{name}.im"))

    def _complex_tanh(self, a0, b0, tan, name):
        """tanh(a + ib) from expm1(+-2a), cos b and sin b with XLA's infinity and NaN cases;
        tan(z) = -i tanh(iz)."""
        b = self.b
        part = a0.type
        neg_one, four = ir.Constant(part, -1.0), ir.Constant(part, 4.0)
        zero, inf, nan = (ir.Constant(part, v) for v in (0.0, float("inf"), float("nan")))
        if tan:
            a, c = b.fmul(neg_one, b0, name=f"{name}.a"), a0
        else:
            a, c = a0, b0
        two_a = b.fadd(a, a, name=f"{name}.2a")
        e2m1 = self._libm("expm1", [two_a], f"{name}.ep")
        en2m1 = self._libm("expm1", [b.fmul(neg_one, two_a, name=f"{name}.m2a")], f"{name}.en")
        real_num = b.fsub(e2m1, en2m1, name=f"{name}.rn")
        cos_c = self._libm("cos", [c], f"{name}.cos")
        sin_c = self._libm("sin", [c], f"{name}.sin")
        imag_num = b.fmul(four, b.fmul(cos_c, sin_c, name=f"{name}.cs"), name=f"{name}.in")
        sum_m2 = b.fadd(e2m1, en2m1, name=f"{name}.sm2")
        den = b.fadd(sum_m2, b.fmul(b.fmul(cos_c, cos_c, name=f"{name}.cc"), four,
                                    name=f"{name}.cc4"), name=f"{name}.den")
        real = b.select(b.fcmp_ordered("==", sum_m2, inf, name=f"{name}.big"),
                        self._call("llvm.copysign", [neg_one, a], f"{name}.sgn"),
                        b.fdiv(real_num, den, name=f"{name}.rq"), name=f"{name}.re0")
        imag = b.fdiv(imag_num, den, name=f"{name}.iq")
        a_inf = b.fcmp_ordered("==", self._call("llvm.fabs", [a], f"{name}.aa"), inf,
                               name=f"{name}.ainf")
        nan_2b = b.fcmp_unordered("uno", imag_num, imag_num, name=f"{name}.n2b")
        real = b.select(b.and_(nan_2b, b.not_(a_inf, name=f"{name}.fin"), name=f"{name}.rnan"),
                        nan, real, name=f"{name}.re")
        imag = b.select(b.or_(b.fcmp_ordered("==", c, zero, name=f"{name}.c0"),
                              b.and_(a_inf, nan_2b, name=f"{name}.in2"), name=f"{name}.izero"),
                        zero, imag, name=f"{name}.im")
        if tan:
            return imag, b.fmul(neg_one, real, name=f"{name}.tim")
        return real, imag

    def _complex_expm1(self, a, c, name):
        b = self.b
        part = a.type
        one, zero = ir.Constant(part, 1.0), ir.Constant(part, 0.0)
        expm1_a = self._libm("expm1", [a], f"{name}.em1")
        sin_c = self._libm("sin", [c], f"{name}.sin")
        # cos(c) - 1 = -2 sin(c/2)^2, in f64 and rounded
        wide = c if part == F64 else b.fpext(c, F64, name=f"{name}.cw")
        s = self._libm("sin", [b.fdiv(wide, ir.Constant(F64, 2.0), name=f"{name}.h")],
                       f"{name}.sh")
        cm1 = b.fmul(ir.Constant(F64, -2.0), b.fmul(s, s, name=f"{name}.s2"), name=f"{name}.cm")
        cos_m1 = cm1 if part == F64 else b.fptrunc(cm1, part, name=f"{name}.cm1")
        real = b.fadd(b.fmul(expm1_a, b.fadd(cos_m1, one, name=f"{name}.c1"), name=f"{name}.p"),
                      cos_m1, name=f"{name}.re")
        imag = b.fmul(b.fadd(expm1_a, one, name=f"{name}.e1"), sin_c, name=f"{name}.im0")
        imag = b.select(b.fcmp_ordered("==", c, zero, name=f"{name}.c0"), zero, imag,
                        name=f"{name}.im")
        return real, imag

    def _complex_log1p(self, a, c, name):
        b = self.b
        part = a.type
        one, half = ir.Constant(part, 1.0), ir.Constant(part, 0.5)
        a1 = b.fadd(a, one, name=f"{name}.a1")
        abs_a1 = self._call("llvm.fabs", [a1], f"{name}.aa1")
        abs_c = self._call("llvm.fabs", [c], f"{name}.ac")
        big = self._np_max(abs_a1, abs_c, f"{name}.big")
        small = self._np_min(abs_a1, abs_c, f"{name}.small")
        big_m1 = b.select(b.fcmp_ordered(">", a1, abs_c, name=f"{name}.gt"), a,
                          b.fsub(big, one, name=f"{name}.bm"), name=f"{name}.bm1")
        ratio = b.fdiv(small, big, name=f"{name}.ratio")
        r = b.fadd(b.fmul(half, self._libm("log1p", [b.fmul(ratio, ratio, name=f"{name}.r2")],
                                           f"{name}.l1"), name=f"{name}.hl"),
                   self._libm("log1p", [big_m1], f"{name}.l2"), name=f"{name}.r")
        real = b.select(b.fcmp_unordered("uno", r, r, name=f"{name}.rn"), small, r,
                        name=f"{name}.re")
        return real, self._libm("atan2", [c, a1], f"{name}.im")

    def _complex_rsqrt(self, a, c, name):
        """rsqrt(|z|) (cos(-t/2) + i sin(-t/2)), t = arg z, with XLA's zero and infinity
        cases."""
        b = self.b
        part = a.type
        zero, inf, nan = (ir.Constant(part, v) for v in (0.0, float("inf"), float("nan")))
        wa, wc = ((v if part == F64 else b.fpext(v, F64, name=f"{name}.w{k}"))
                  for k, v in enumerate((a, c)))
        hyp = b.call(self._intrinsic("hypot", F64, [F64, F64]), [wa, wc], name=f"{name}.hyp")
        r = b.fdiv(ir.Constant(F64, 1.0), self._call("llvm.sqrt", [hyp], f"{name}.sq"),
                   name=f"{name}.rw")
        r = r if part == F64 else b.fptrunc(r, part, name=f"{name}.r0")
        any_nan = b.or_(b.fcmp_unordered("uno", a, a, name=f"{name}.an"),
                        b.fcmp_unordered("uno", c, c, name=f"{name}.cn"), name=f"{name}.nan")
        r = b.select(any_nan, nan, r, name=f"{name}.r")
        angle = b.fmul(self._libm("atan2", [c, a], f"{name}.arg"), ir.Constant(part, -0.5),
                       name=f"{name}.angle")
        cos = self._libm("cos", [angle], f"{name}.cos")
        sin = self._libm("sin", [angle], f"{name}.sin")
        zz = b.and_(b.fcmp_ordered("==", a, zero, name=f"{name}.a0"),
                    b.fcmp_ordered("==", c, zero, name=f"{name}.c0"), name=f"{name}.zz")
        c_inf = b.fcmp_ordered("==", self._call("llvm.fabs", [c], f"{name}.acab"), inf,
                               name=f"{name}.cinf")
        a_inf = b.fcmp_ordered("==", self._call("llvm.fabs", [a], f"{name}.aab"), inf,
                               name=f"{name}.ainf")
        edge = b.or_(b.and_(c_inf, b.fcmp_unordered("uno", a, a, name=f"{name}.an2"),
                            name=f"{name}.e1"), a_inf, name=f"{name}.edge")
        real = b.select(zz, inf, b.select(edge, self._call("llvm.copysign", [zero, a],
                                                           f"{name}.za"),
                                          b.fmul(r, cos, name=f"{name}.rc"), name=f"{name}.re0"),
                        name=f"{name}.re")
        imag = b.select(zz, nan, b.select(edge, b.fneg(self._call("llvm.copysign", [zero, c],
                                                                  f"{name}.zc"),
                                                       name=f"{name}.nzc"),
                                          b.fmul(r, sin, name=f"{name}.rs"), name=f"{name}.im0"),
                        name=f"{name}.im")
        return real, imag

    def _complex_pow(self, a, c, x, y, name):
        """(a + ci)^(x + yi) = |z|^x e^(-y arg z) (cos q + i sin q), q = x arg z + y ln|z|,
        with XLA's cut-offs for zero, one and infinite bases and zero exponents."""
        b = self.b
        part = a.type
        zero, one, inf = (ir.Constant(part, v) for v in (0.0, 1.0, float("inf")))
        r = self._complex_abs(a, c, f"{name}.abs")
        arg = self._libm("atan2", [c, a], f"{name}.arg")
        coeff = b.fmul(self._libm("pow", [r, x], f"{name}.pow"),
                       self._libm("exp", [b.fmul(b.fneg(y, name=f"{name}.ny"), arg,
                                                 name=f"{name}.ya")], f"{name}.exp"),
                       name=f"{name}.coeff")
        q = b.fadd(b.fmul(x, arg, name=f"{name}.xa"),
                   b.fmul(y, self._libm("log", [r], f"{name}.log"), name=f"{name}.yl"),
                   name=f"{name}.q")
        re = b.fmul(coeff, self._libm("cos", [q], f"{name}.cos"), name=f"{name}.re0")
        im = b.fmul(coeff, self._libm("sin", [q], f"{name}.sin"), name=f"{name}.im0")

        def eq(v, k, tag):
            return b.fcmp_ordered("==", v, k, name=f"{name}.{tag}")

        y0 = eq(y, zero, "y0")
        c0 = eq(c, zero, "c0")
        cases = [
            (b.and_(b.and_(eq(r, zero, "r0"), y0, name=f"{name}.k1a"),
                    b.fcmp_ordered("<=", zero, x, name=f"{name}.xge"), name=f"{name}.k1"),
             b.select(eq(x, zero, "x0"), one, zero, name=f"{name}.k1v")),
            (b.and_(eq(x, zero, "x0b"), y0, name=f"{name}.k2"), one),
            (b.and_(eq(a, one, "a1"), c0, name=f"{name}.k3"), one),
        ]
        a_inf = b.and_(b.and_(eq(a, inf, "ainf"), c0, name=f"{name}.k4a"), y0, name=f"{name}.k4b")
        cases.append((b.and_(a_inf, b.fcmp_ordered(">", x, zero, name=f"{name}.xgt"),
                             name=f"{name}.k4"), inf))
        cases.append((b.and_(a_inf, b.fcmp_ordered("<", x, zero, name=f"{name}.xlt"),
                             name=f"{name}.k5"), zero))
        for k, (cond, value) in enumerate(cases):
            re = b.select(cond, value, re, name=f"{name}.re{k}")
            im = b.select(cond, zero, im, name=f"{name}.im{k}")
        return re, im

    def _c99(self, fname, re, im, name):
        """A C99 complex function of libm (``{double, double} f(double, double)`` in the
        x86-64 ABI of ``_Complex double``), in c128 and rounded for c64."""
        b = self.b
        part = re.type
        wide = [v if part == F64 else b.fpext(v, F64, name=f"{name}.w{k}")
                for k, v in enumerate((re, im))]
        pair = ir.LiteralStructType([F64, F64])
        r = b.call(self._intrinsic(fname, pair, [F64, F64]), wide, name=f"{name}.{fname}")
        out = [b.extract_value(r, k, name=f"{name}.p{k}") for k in (0, 1)]
        if part != F64:
            out = [b.fptrunc(v, part, name=f"{name}.r{k}") for k, v in enumerate(out)]
        return out

    def _complex_log(self, a, c, name):
        """log|z| (C99 clog's real part: accurate next to |z| = 1) + i atan2(c, a); NaN when
        either part is NaN."""
        b = self.b
        real, _ = self._c99("clog", a, c, name)
        nan = b.or_(b.fcmp_unordered("uno", a, a, name=f"{name}.an"),
                    b.fcmp_unordered("uno", c, c, name=f"{name}.cn"), name=f"{name}.nan")
        real = b.select(nan, ir.Constant(a.type, float("nan")), real, name=f"{name}.re")
        return real, self._libm("atan2", [c, a], f"{name}.im")

    def _cmul(self, ar, ai, br, bi, name):
        b = self.b
        return (b.fsub(b.fmul(ar, br, name=f"{name}.rr"), b.fmul(ai, bi, name=f"{name}.ii"),
                       name=f"{name}.re"),
                b.fadd(b.fmul(ar, bi, name=f"{name}.ri"), b.fmul(ai, br, name=f"{name}.ir"),
                       name=f"{name}.im"))

    def _complex_atan2(self, yr, yi, xr, xi, name):
        """atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)) in complex arithmetic."""
        b = self.b
        part = yr.type
        zero, one = ir.Constant(part, 0.0), ir.Constant(part, 1.0)
        x2 = self._cmul(xr, xi, xr, xi, f"{name}.x2")
        y2 = self._cmul(yr, yi, yr, yi, f"{name}.y2")
        root = self._c99("csqrt", b.fadd(x2[0], y2[0], name=f"{name}.sr"),
                         b.fadd(x2[1], y2[1], name=f"{name}.si"), f"{name}.root")
        iy = self._cmul(zero, one, yr, yi, f"{name}.iy")
        qty = ir.LiteralStructType([part, part])
        q = self._complex_divide(b.fadd(xr, iy[0], name=f"{name}.nr"),
                                 b.fadd(xi, iy[1], name=f"{name}.ni"), root[0], root[1], qty,
                                 f"{name}.q")
        lr, li = self._complex_log(*self._parts(q, f"{name}.qp"), f"{name}.log")
        return self._cmul(zero, ir.Constant(part, -1.0), lr, li, f"{name}.mi")

    def _complex_exp(self, a, c, name):
        """e^a (cos c + i sin c); exp(a/2)^2 when e^a overflows; imag +0 when c = 0."""
        b = self.b
        part = a.type
        exp_a = self._libm("exp", [a], f"{name}.ea")
        exp_half = self._libm("exp", [b.fmul(a, ir.Constant(part, 0.5), name=f"{name}.h")],
                              f"{name}.eh")
        cos_c = self._libm("cos", [c], f"{name}.cos")
        sin_c = self._libm("sin", [c], f"{name}.sin")
        over = b.fcmp_ordered("==", exp_a, ir.Constant(part, float("inf")), name=f"{name}.ovf")

        def scaled(t, tag):
            big = b.fmul(b.fmul(exp_half, t, name=f"{name}.{tag}h"), exp_half,
                         name=f"{name}.{tag}hh")
            return b.select(over, big, b.fmul(exp_a, t, name=f"{name}.{tag}e"),
                            name=f"{name}.{tag}")

        re = scaled(cos_c, "re")
        im = scaled(sin_c, "im")
        im = b.select(b.fcmp_ordered("==", c, ir.Constant(part, 0.0), name=f"{name}.c0"),
                      ir.Constant(part, 0.0), im, name=f"{name}.im0")
        return re, im

    def _complex_divide(self, ar, ai, br, bi, ty, name):
        """Smith's algorithm, then XLA's fix-ups where both parts came out NaN (a zero
        divisor: inf signed like the divisor's real part times the numerator; infinite
        numerator or denominator: the signed infinite or zero limits)."""
        b = self.b
        part = ar.type
        zero, one, inf = (ir.Constant(part, v) for v in (0.0, 1.0, float("inf")))

        def fabs(v, tag):
            return self._call("llvm.fabs", [v], f"{name}.{tag}")

        def finite(v, tag):
            return b.fcmp_ordered("<", fabs(v, f"{tag}a"), inf, name=f"{name}.{tag}")

        def is_inf(v, tag):
            return b.fcmp_ordered("==", fabs(v, f"{tag}a"), inf, name=f"{name}.{tag}")

        def not_nan(v, tag):
            return b.fcmp_ordered("ord", v, v, name=f"{name}.{tag}")

        mul, add, sub, div = b.fmul, b.fadd, b.fsub, b.fdiv
        ratio_ri = div(br, bi, name=f"{name}.rri")
        denom_ri = add(bi, mul(ratio_ri, br, name=f"{name}.t1"), name=f"{name}.dri")
        ratio_ir = div(bi, br, name=f"{name}.rir")
        denom_ir = add(br, mul(ratio_ir, bi, name=f"{name}.t2"), name=f"{name}.dir")
        small_re = b.fcmp_ordered("<", fabs(br, "abr"), fabs(bi, "abi"), name=f"{name}.small")
        cr = b.select(small_re,
                      div(add(mul(ratio_ri, ar, name=f"{name}.t3"), ai, name=f"{name}.t4"),
                          denom_ri, name=f"{name}.cr1"),
                      div(add(mul(ratio_ir, ai, name=f"{name}.t5"), ar, name=f"{name}.t6"),
                          denom_ir, name=f"{name}.cr2"), name=f"{name}.cr")
        ci = b.select(small_re,
                      div(sub(mul(ratio_ri, ai, name=f"{name}.t7"), ar, name=f"{name}.t8"),
                          denom_ri, name=f"{name}.ci1"),
                      div(sub(ai, mul(ratio_ir, ar, name=f"{name}.t9"), name=f"{name}.t10"),
                          denom_ir, name=f"{name}.ci2"), name=f"{name}.ci")

        zero_den = b.and_(b.and_(b.fcmp_ordered("==", br, zero, name=f"{name}.br0"),
                                 b.fcmp_ordered("==", bi, zero, name=f"{name}.bi0"),
                                 name=f"{name}.b0"),
                          b.or_(not_nan(ar, "arn"), not_nan(ai, "ain"), name=f"{name}.an"),
                          name=f"{name}.zden")
        inf_b = self._call("llvm.copysign", [inf, br], f"{name}.infb")
        zero_r, zero_i = mul(inf_b, ar, name=f"{name}.zr"), mul(inf_b, ai, name=f"{name}.zi")

        def signed_unit(flag, v, tag):
            return self._call("llvm.copysign", [b.select(flag, one, zero, name=f"{name}.{tag}u"),
                                                v], f"{name}.{tag}")

        ar_inf, ai_inf = is_inf(ar, "ari"), is_inf(ai, "aii")
        inf_num = b.and_(b.or_(ar_inf, ai_inf, name=f"{name}.ainf"),
                         b.and_(finite(br, "brf"), finite(bi, "bif"), name=f"{name}.bfin"),
                         name=f"{name}.infn")
        ar_s, ai_s = signed_unit(ar_inf, ar, "ars"), signed_unit(ai_inf, ai, "ais")
        infn_r = mul(inf, add(mul(ar_s, br, name=f"{name}.n1"), mul(ai_s, bi, name=f"{name}.n2"),
                              name=f"{name}.n3"), name=f"{name}.infnr")
        infn_i = mul(inf, sub(mul(ai_s, br, name=f"{name}.n4"), mul(ar_s, bi, name=f"{name}.n5"),
                              name=f"{name}.n6"), name=f"{name}.infni")
        br_inf, bi_inf = is_inf(br, "bri"), is_inf(bi, "bii")
        inf_den = b.and_(b.or_(br_inf, bi_inf, name=f"{name}.binf"),
                         b.and_(finite(ar, "arf"), finite(ai, "aif"), name=f"{name}.afin"),
                         name=f"{name}.infd")
        br_s, bi_s = signed_unit(br_inf, br, "brs"), signed_unit(bi_inf, bi, "bis")
        infd_r = mul(zero, add(mul(ar, br_s, name=f"{name}.d1"), mul(ai, bi_s, name=f"{name}.d2"),
                               name=f"{name}.d3"), name=f"{name}.infdr")
        infd_i = mul(zero, sub(mul(ai, br_s, name=f"{name}.d4"), mul(ar, bi_s, name=f"{name}.d5"),
                               name=f"{name}.d6"), name=f"{name}.infdi")
        both_nan = b.and_(b.fcmp_unordered("uno", cr, cr, name=f"{name}.crn"),
                          b.fcmp_unordered("uno", ci, ci, name=f"{name}.cin"), name=f"{name}.bn")

        def fix(normal, z, n, d, tag):
            v = b.select(inf_den, d, normal, name=f"{name}.{tag}d")
            v = b.select(inf_num, n, v, name=f"{name}.{tag}n")
            v = b.select(zero_den, z, v, name=f"{name}.{tag}z")
            return b.select(both_nan, v, normal, name=f"{name}.{tag}")

        return self._pack(fix(cr, zero_r, infn_r, infd_r, "re"),
                          fix(ci, zero_i, infn_i, infd_i, "im"), ty, name)

    def _canonical_nan(self, x, et, name):
        """The f32 value of a narrow float as ml_dtypes widens it: the f8 types with several
        NaN encodings carry a marker in a NaN's low bits (see decode), dropped here."""
        fmt = FORMATS.get(et)
        if fmt is None or fmt.special != "ieee" or fmt.bits != 8:
            return x
        b = self.b
        bits = b.bitcast(x, I32, name=f"{name}.xb")
        clean = b.bitcast(b.and_(bits, _c(I32, ~((1 << fmt.mantissa) - 1)), name=f"{name}.cb"),
                          F32, name=f"{name}.clean")
        return b.select(b.fcmp_unordered("uno", x, x, name=f"{name}.xnan"), clean, x,
                        name=f"{name}.canon")

    def _reduce_precision(self, x, et, exponent_bits, mantissa_bits, name):
        """Round the mantissa to ``mantissa_bits`` (nearest even), then exponents above the
        reduced range become inf and those at or below its bottom zero; NaN stays. On the
        type's own bits for f16/bf16/f32/f64, on the f16 bits (f32 for f8e8m0fnu) of the
        f8/f6/f4 types, rounded back (the interpreter's, as XLA:CPU)."""
        b = self.b
        if et in (PT.F32, PT.F64, PT.BF16, PT.F16):
            work = et
        else:
            work = PT.F32 if et == PT.F8E8M0FNU else PT.F16
        bits = self.float_bits(x, work, f"{name}.w")
        ity = bits.type
        nbits = ity.width
        src_mantissa = {PT.F32: 23, PT.F64: 52, PT.BF16: 7, PT.F16: 10}[work]
        src_exponent = nbits - 1 - src_mantissa
        sign_mask = 1 << (nbits - 1)
        exp_mask = ((1 << src_exponent) - 1) << src_mantissa
        is_nan = b.icmp_unsigned(">", b.and_(bits, ir.Constant(ity, sign_mask - 1),
                                             name=f"{name}.mag"),
                                 ir.Constant(ity, exp_mask), name=f"{name}.isnan")
        u = bits
        if mantissa_bits < src_mantissa:
            shift = src_mantissa - mantissa_bits
            last = 1 << shift
            lsb = b.lshr(b.and_(u, ir.Constant(ity, last), name=f"{name}.lb"),
                         ir.Constant(ity, shift), name=f"{name}.lsb")
            bias = b.add(lsb, ir.Constant(ity, (1 << (shift - 1)) - 1), name=f"{name}.bias")
            u = b.and_(b.add(u, bias, name=f"{name}.r"), ir.Constant(ity, ~(last - 1)),
                       name=f"{name}.rounded")
        if exponent_bits < src_exponent:
            exponent_bias = (1 << (src_exponent - 1)) - 1
            reduced_bias = (1 << (exponent_bits - 1)) - 1
            max_exp = (exponent_bias + reduced_bias) << src_mantissa
            min_exp = (exponent_bias - reduced_bias) << src_mantissa
            exponent = b.and_(u, ir.Constant(ity, exp_mask), name=f"{name}.exp")
            signed_zero = b.and_(u, ir.Constant(ity, sign_mask), name=f"{name}.sz")
            inf = b.or_(signed_zero, ir.Constant(ity, exp_mask), name=f"{name}.inf")
            u = b.select(b.icmp_unsigned(">", exponent, ir.Constant(ity, max_exp),
                                         name=f"{name}.over"), inf, u, name=f"{name}.o")
            u = b.select(b.icmp_unsigned("<=", exponent, ir.Constant(ity, min_exp),
                                         name=f"{name}.under"), signed_zero, u,
                         name=f"{name}.u")
        v = b.select(is_nan, x, self._from_bits(u, work, f"{name}.v"), name=f"{name}.r")
        if work != et:  # back from the f16 (f32) work value: a conversion, NaNs included
            v = self.convert(v, PT.F32, et, name)
        return v


def _suffix(ty) -> str:
    return "f32" if ty == F32 else "f64"


__all__ = [
    "ELEMENTWISE",
    "FORMATS",
    "TYPES",
    "ElementalEmitter",
    "FloatFormat",
    "Index",
    "decode",
    "encode",
    "encoding_of",
    "immediate",
    "load_value",
    "memory_type",
    "round_to",
    "store_value",
    "supports",
]
