"""Element generators: the LLVM IR computing one element of an HLO instruction from the
elements of its operands, per opcode (in the spirit of XLA's ElementalIrEmitter).

``ElementalEmitter(builder, loader)`` emits ``value_at(instr, index)``: the element of
``instr`` at ``index`` (an Index: the linear position in a row-major array of some
dimensions, with the multi-dimensional index derived on demand). Elementwise opcodes ask
their operands for the same index, broadcast maps the index through its ``dimensions``,
and instructions outside the generated expression come from ``loader(instr, index)`` (a
load from a buffer, or an embedded scalar constant). Every value is named after its
instruction.

Compiled element types: f32, f64, s32, s64, u32, u64 (and pred as compare results and
select predicates). Semantics are the interpreter's (xlapy.interpreter.kernels.elementwise)
and XLA:CPU's: integer x / 0 = -1 and INT_MIN / -1 = INT_MIN, two's-complement wrap,
NaN-propagating maximum/minimum ordering -0 < +0, float -> int truncating with saturation
and NaN -> 0 (llvm.fptosi.sat), f32 transcendentals computed in f64 and rounded (as the
interpreter's libm helper) so the results agree bit for bit, except f32 tanh (a
vectorisable rational approximation, within a few ulp).
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.hlo.attrs.enums import ComparisonType
from xlapy.shape import PrimitiveType as PT

from xlapy.backends.cpu import indexing
from xlapy.backends.cpu.indexing import I64, Index

F32, F64 = ir.FloatType(), ir.DoubleType()
I1, I8 = ir.IntType(1), ir.IntType(8)

# element type -> (kind, LLVM value type): kind "f" float, "s" signed, "u" unsigned, "p" pred
TYPES = {
    PT.F32: ("f", F32), PT.F64: ("f", F64),
    PT.S32: ("s", ir.IntType(32)), PT.S64: ("s", I64),
    PT.U32: ("u", ir.IntType(32)), PT.U64: ("u", I64),
    PT.PRED: ("p", I1),
}

UNARY = {"negate", "abs", "exponential", "log", "sqrt", "tanh"}
BINARY = {"add", "subtract", "multiply", "divide", "maximum", "minimum"}
ELEMENTWISE = UNARY | BINARY | {"compare", "select", "convert"}
FLOAT_ONLY = {"exponential", "log", "sqrt", "tanh"}
_TRANSCENDENTAL = {"exponential": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt"}

_FCMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def memory_type(et) -> ir.Type:
    """How an element of type ``et`` is stored in a buffer (pred: one byte)."""
    kind, ty = TYPES[et]
    return I8 if kind == "p" else ty


def load_value(builder: ir.IRBuilder, ptr, et, name: str):
    """Load the element at ``ptr`` (a pointer to memory_type(et)) as its compute value
    (pred: i1)."""
    v = builder.load(ptr, name=f"{name}.load")
    if TYPES[et][0] == "p":
        v = builder.icmp_unsigned("!=", v, ir.Constant(I8, 0), name=f"{name}.pred")
    return v


def store_value(builder: ir.IRBuilder, value, ptr, et, name: str) -> None:
    """Store the compute value ``value`` of element type ``et`` at ``ptr``."""
    if TYPES[et][0] == "p":
        value = builder.zext(value, I8, name=f"{name}.byte")
    builder.store(value, ptr)


def _et(shape):
    return shape.element_type


def supports(instr) -> bool:
    """Whether an element generator exists for ``instr`` with its element types."""
    shape = instr.shape
    if not shape.is_array() or _et(shape) not in TYPES:
        return False
    if any(not o.shape.is_array() or _et(o.shape) not in TYPES for o in instr.operands):
        return False
    op = instr.opcode
    out = TYPES[_et(shape)][0]
    ins = [TYPES[_et(o.shape)][0] for o in instr.operands]
    if op == "broadcast":
        return _et(instr.operands[0].shape) == _et(shape)
    if op in UNARY or op in BINARY:
        if out == "p" or any(_et(o.shape) != _et(shape) for o in instr.operands):
            return False
        return out == "f" or op not in FLOAT_ONLY
    if op == "compare":
        ctype = instr.attrs["type"]
        return (ins[0] != "p" and _et(instr.operands[0].shape) == _et(instr.operands[1].shape)
                and ctype != ComparisonType.TOTALORDER)
    if op == "select":
        return (ins[0] == "p" and _et(instr.operands[1].shape) == _et(shape)
                and _et(instr.operands[2].shape) == _et(shape) and out != "p"
                and tuple(instr.operands[0].shape.dimensions) == tuple(shape.dimensions))
    if op == "convert":
        return True
    return False


class ElementalEmitter:
    """Generates the element of an instruction at an index (memoised per index object)."""

    def __init__(self, builder: ir.IRBuilder, loader, members):
        self.b = builder
        self.loader = loader
        self.members = members  # the instructions generated here (others: loader)
        self.module = builder.module
        self._memo: dict[tuple[int, int], ir.Value] = {}
        self._alive: list = []  # the Index objects of memo keys (their ids must stay unique)

    # -- helpers ---------------------------------------------------------------------------

    def _intrinsic(self, name: str, ret, args):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return fn

    def _libm(self, name: str):
        return self._intrinsic(name, F64, [F64])

    def _signbit(self, v, ty, name):
        bits = ir.IntType(32 if ty == F32 else 64)
        iv = self.b.bitcast(v, bits, name=f"{name}.bits")
        return self.b.icmp_signed("<", iv, ir.Constant(bits, 0), name=f"{name}.sign")

    # -- the generator ---------------------------------------------------------------------

    def value_at(self, instr, index: Index):
        key = (id(instr), id(index))
        v = self._memo.get(key)
        if v is None:
            if id(instr) in self.members:
                v = self._generate(instr, index)
            else:
                v = self.loader(instr, index)
            self._memo[key] = v
            self._alive.append(index)
        return v

    def _generate(self, instr, index):
        op = instr.opcode
        if op in indexing.GENERATORS:  # data movement: the operands' elements at mapped indices
            return indexing.GENERATORS[op](self, instr, index)
        args = [self.value_at(o, index) for o in instr.operands]
        name = instr.name
        if op in BINARY:
            return self._binary(op, *args, _et(instr.shape), name)
        if op in UNARY:
            return self._unary(op, args[0], _et(instr.shape), name)
        if op == "compare":
            return self._compare(instr, *args, name)
        if op == "select":
            return self.b.select(args[0], args[1], args[2], name=name)
        if op == "convert":
            return self._convert(args[0], _et(instr.operands[0].shape), _et(instr.shape), name)
        raise NotImplementedError(f"no element generator for {op}")

    def _binary(self, op, a, c, et, name):
        b = self.b
        kind, ty = TYPES[et]
        if kind == "f":
            if op == "add":
                return b.fadd(a, c, name=name)
            if op == "subtract":
                return b.fsub(a, c, name=name)
            if op == "multiply":
                return b.fmul(a, c, name=name)
            if op == "divide":
                return b.fdiv(a, c, name=name)
            return self._float_minmax(op, a, c, ty, name)
        signed = kind == "s"
        if op == "add":
            return b.add(a, c, name=name)
        if op == "subtract":
            return b.sub(a, c, name=name)
        if op == "multiply":
            return b.mul(a, c, name=name)
        if op in ("maximum", "minimum"):
            cmp = b.icmp_signed if signed else b.icmp_unsigned
            pick = cmp(">" if op == "maximum" else "<", a, c, name=f"{name}.cmp")
            return b.select(pick, a, c, name=name)
        return self._int_divide(a, c, ty, signed, name)

    def _int_divide(self, a, c, ty, signed, name):
        b = self.b
        zero = b.icmp_unsigned("==", c, ir.Constant(ty, 0), name=f"{name}.byzero")
        minus_one = ir.Constant(ty, -1)
        if signed:
            int_min = ir.Constant(ty, -(1 << (ty.width - 1)))
            overflow = b.and_(b.icmp_signed("==", a, int_min, name=f"{name}.ismin"),
                              b.icmp_signed("==", c, minus_one, name=f"{name}.ism1"),
                              name=f"{name}.overflow")
            bad = b.or_(zero, overflow, name=f"{name}.bad")
            safe = b.select(bad, ir.Constant(ty, 1), c, name=f"{name}.safe")
            q = b.sdiv(a, safe, name=f"{name}.q")
            q = b.select(overflow, a, q, name=f"{name}.ovq")
        else:
            safe = b.select(zero, ir.Constant(ty, 1), c, name=f"{name}.safe")
            q = b.udiv(a, safe, name=f"{name}.q")
        return b.select(zero, minus_one, q, name=name)  # x / 0 = -1 (all bits set)

    def _float_minmax(self, op, a, c, ty, name):
        b = self.b
        a_nan = b.fcmp_unordered("uno", a, a, name=f"{name}.anan")
        c_nan = b.fcmp_unordered("uno", c, c, name=f"{name}.cnan")
        zero = ir.Constant(ty, 0.0)
        both_zero = b.and_(b.fcmp_ordered("==", a, zero, name=f"{name}.az"),
                           b.fcmp_ordered("==", c, zero, name=f"{name}.cz"),
                           name=f"{name}.zeros")
        a_neg = self._signbit(a, ty, f"{name}.a")
        if op == "maximum":
            r = b.select(b.fcmp_ordered(">", a, c, name=f"{name}.gt"), a, c, name=f"{name}.pick")
            z = b.select(a_neg, c, a, name=f"{name}.zpick")  # max(-0, +0) = +0
        else:
            r = b.select(b.fcmp_ordered("<", a, c, name=f"{name}.lt"), a, c, name=f"{name}.pick")
            z = b.select(a_neg, a, c, name=f"{name}.zpick")  # min(+0, -0) = -0
        r = b.select(both_zero, z, r, name=f"{name}.ordered")
        r = b.select(c_nan, c, r, name=f"{name}.cprop")
        return b.select(a_nan, a, r, name=name)  # NaN propagates, the lhs first

    def _unary(self, op, x, et, name):
        b = self.b
        kind, ty = TYPES[et]
        if kind == "f":
            if op == "negate":
                return b.fneg(x, name=name)
            if op == "abs":
                fabs = self._intrinsic(f"llvm.fabs.{_suffix(ty)}", ty, [ty])
                return b.call(fabs, [x], name=name)
            if op == "sqrt":  # correctly rounded in any precision
                fn = self._intrinsic(f"llvm.sqrt.{_suffix(ty)}", ty, [ty])
                return b.call(fn, [x], name=name)
            if op == "tanh" and ty == F32:
                return self._tanh_f32(x, name)
            # exp/log (and f64 tanh) through libm in f64, rounded to the result type (the
            # interpreter's libm helper): bit-exact with it, but a scalar call per element
            wide = x if ty == F64 else b.fpext(x, F64, name=f"{name}.wide")
            if op == "tanh":
                fn = self._libm("tanh")
            else:
                fn = self._intrinsic(f"{_TRANSCENDENTAL[op]}.f64", F64, [F64])
            r = b.call(fn, [wide], name=f"{name}.f64" if ty != F64 else name)
            return r if ty == F64 else b.fptrunc(r, ty, name=name)
        if op == "negate":
            return b.sub(ir.Constant(ty, 0), x, name=name)  # -INT_MIN = INT_MIN
        if op == "abs":
            if kind == "u":
                return x
            neg = b.icmp_signed("<", x, ir.Constant(ty, 0), name=f"{name}.neg")
            return b.select(neg, b.sub(ir.Constant(ty, 0), x, name=f"{name}.minus"), x,
                            name=name)
        raise NotImplementedError(op)

    def _tanh_f32(self, x, name):
        """f32 tanh without a libm call, so the loop vectorises: a rational approximation
        (odd degree-13 numerator, even degree-6 denominator, as XLA:CPU/Eigen) on x clamped
        to +-7.9053111 (where f32 tanh is +-1), tanh(x) = x for |x| < 4e-4. A few ulp off
        the correctly rounded value; NaN passes through."""
        b = self.b

        def c(v):
            return ir.Constant(F32, v)

        bound = 7.90531110763549805
        lo = b.fcmp_ordered("<", x, c(-bound), name=f"{name}.below")
        xc = b.select(lo, c(-bound), x, name=f"{name}.lo")
        hi = b.fcmp_ordered(">", xc, c(bound), name=f"{name}.above")
        xc = b.select(hi, c(bound), xc, name=f"{name}.clamped")
        x2 = b.fmul(xc, xc, name=f"{name}.x2")
        p = c(-2.76076847742355e-16)
        for k, coef in enumerate((2.00018790482477e-13, -8.60467152213735e-11,
                                  5.12229709037114e-08, 1.48572235717979e-05,
                                  6.37261928875436e-04, 4.89352455891786e-03)):
            p = b.fadd(b.fmul(p, x2, name=f"{name}.pm{k}"), c(coef), name=f"{name}.p{k}")
        p = b.fmul(p, xc, name=f"{name}.num")
        q = c(1.19825839466702e-06)
        for k, coef in enumerate((1.18534705686654e-04, 2.26843463243900e-03,
                                  4.89352518554385e-03)):
            q = b.fadd(b.fmul(q, x2, name=f"{name}.qm{k}"), c(coef), name=f"{name}.q{k}")
        r = b.fdiv(p, q, name=f"{name}.ratio")
        fabs = self._intrinsic("llvm.fabs.f32", F32, [F32])
        tiny = b.fcmp_ordered("<", b.call(fabs, [x], name=f"{name}.abs"), c(0.0004),
                              name=f"{name}.tiny")
        return b.select(tiny, x, r, name=name)

    def _compare(self, instr, a, c, name):
        direction = _FCMP[instr.attrs["direction"].value]
        kind, _ = TYPES[_et(instr.operands[0].shape)]
        b = self.b
        if kind == "f":
            if direction == "!=":
                return b.fcmp_unordered("!=", a, c, name=name)  # NaN != x is true
            return b.fcmp_ordered(direction, a, c, name=name)
        if kind == "s":
            return b.icmp_signed(direction, a, c, name=name)
        return b.icmp_unsigned(direction, a, c, name=name)

    def _convert(self, x, src, dst, name):
        b = self.b
        sk, st = TYPES[src]
        dk, dt = TYPES[dst]
        if src == dst:
            return x
        if dk == "p":
            if sk == "f":
                return b.fcmp_unordered("!=", x, ir.Constant(st, 0.0), name=name)
            return b.icmp_unsigned("!=", x, ir.Constant(st, 0), name=name)
        if sk == "p":
            return (b.uitofp(x, dt, name=name) if dk == "f" else b.zext(x, dt, name=name))
        if sk == "f" and dk == "f":
            return (b.fpext(x, dt, name=name) if dt == F64 else b.fptrunc(x, dt, name=name))
        if sk == "f":  # truncate toward zero, saturate, NaN -> 0
            sat = "llvm.fptosi.sat" if dk == "s" else "llvm.fptoui.sat"
            fn = self._intrinsic(f"{sat}.i{dt.width}.{_suffix(st)}", dt, [st])
            return b.call(fn, [x], name=name)
        if dk == "f":
            return (b.sitofp(x, dt, name=name) if sk == "s" else b.uitofp(x, dt, name=name))
        if st.width == dt.width:
            return x
        if st.width > dt.width:
            return b.trunc(x, dt, name=name)
        return b.sext(x, dt, name=name) if sk == "s" else b.zext(x, dt, name=name)


def _suffix(ty) -> str:
    return "f32" if ty == F32 else "f64"


__all__ = ["ELEMENTWISE", "ElementalEmitter", "Index", "TYPES", "load_value", "memory_type",
           "store_value", "supports"]
