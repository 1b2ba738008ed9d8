"""Algebraic simplification: a TABLE of local rewrites (tinygrad-style), each row one
identity, applied to every instruction in post order until nothing changes.

Every row is exact: the rewritten module gives the same bits as the original for every
input of every element type the row accepts, NaN, inf and -0 included. Where an identity
everyone "knows" is not exact, the row is restricted and says why (``x + 0 -> x`` is wrong
for float ``x = -0``: ``-0 + +0 = +0``; ``x + (-0) -> x`` is right). The one liberty taken,
as XLA and every compiler take it: a *signalling* NaN passing through an arithmetic op comes
out quietened, so removing ``x + (-0)`` can keep a signalling NaN signalling; quiet NaNs
(all NaNs xlapy and jax produce) keep their bits. One more for ``transpose-dot``
(``transpose(dot(a, b)) -> dot(b, a)``, as XLA's simplifier does): a product of two NaNs
may carry the other operand's NaN payload, so an output that is NaN stays NaN but may have
other NaN bits.

A row's ``apply(instr)`` returns the replacement (an existing instruction, usually an
operand, or a new one not yet in the computation) or None. The driver replaces only when
the replacement's shape equals the instruction's, layout included, and leaves instructions
with control edges alone. The instructions a rewrite orphans are left for ``dce``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.passes.pass_manager import HloPass, same_bits, uniform_value
from xlapy.shape import dtypes


@dataclass(frozen=True)
class Rewrite:
    """One row of the table: ``opcode`` instructions matching ``apply`` become its result."""

    name: str
    opcode: str
    identity: str
    apply: Callable[[Instruction], Instruction | None]


# -- element-type classes -------------------------------------------------------------------


def _et(instr: Instruction):
    return instr.shape.element_type if instr.shape.is_array() else None


def _int(instr: Instruction) -> bool:
    """Signed or unsigned integers (not pred): two's complement, wrap-around."""
    et = _et(instr)
    return et is not None and dtypes.is_integral(et) and not dtypes.is_pred(et)


def _real_float(instr: Instruction) -> bool:
    et = _et(instr)
    return et is not None and dtypes.is_floating(et)


def _complex(instr: Instruction) -> bool:
    et = _et(instr)
    return et is not None and dtypes.is_complex(et)


def _is(instr: Instruction, want) -> bool:
    """Every element of ``instr`` is a constant with exactly the bits of ``want``."""
    v = uniform_value(instr)
    return v is not None and same_bits(v, want)


def _other_if(instr: Instruction, test: Callable[[Instruction], bool], commutative: bool):
    """For a binary op: the operand that is not the matching constant (rhs first)."""
    lhs, rhs = instr.operands
    if test(rhs):
        return lhs
    if commutative and test(lhs):
        return rhs
    return None


# -- the rows ---------------------------------------------------------------------------------


def _add_zero(instr):
    # x + 0 -> x, 0 + x -> x: integers only (two's complement; exact for every value).
    # NOT for floats: x = -0 gives -0 + +0 = +0.
    if _int(instr):
        return _other_if(instr, lambda o: _is(o, 0), commutative=True)
    return None


def _add_negative_zero(instr):
    # x + (-0) -> x, (-0) + x -> x: real and complex floats (componentwise). -0 is the
    # additive identity: +0 + -0 = +0, -0 + -0 = -0, inf and (quiet) NaN unchanged.
    if _real_float(instr):
        return _other_if(instr, lambda o: _is(o, -0.0), commutative=True)
    if _complex(instr):
        return _other_if(instr, lambda o: _is(o, complex(-0.0, -0.0)), commutative=True)
    return None


def _subtract_zero(instr):
    # x - 0 -> x: integers. Floats: x - (+0) -> x is exact (it is x + (-0)); x - (-0) is
    # not (-0 - -0 = +0), and the constant's bits decide which one it is.
    if _int(instr):
        return _other_if(instr, lambda o: _is(o, 0), commutative=False)
    if _real_float(instr):
        return _other_if(instr, lambda o: _is(o, 0.0), commutative=False)
    if _complex(instr):
        return _other_if(instr, lambda o: _is(o, complex(0.0, 0.0)), commutative=False)
    return None


def _multiply_one(instr):
    # x * 1 -> x, 1 * x -> x: integers and real floats (x * 1 = x for NaN, inf, -0).
    # NOT complex: (a+bi)(1+0i) = (a*1 - b*0) + (a*0 + b*1)i, and b = inf gives b*0 = NaN.
    if _int(instr) or _real_float(instr):
        return _other_if(instr, lambda o: _is(o, 1), commutative=True)
    return None


def _multiply_zero(instr):
    # x * 0 -> 0: integers only (the zero operand itself, already of the result's shape).
    # NOT floats: NaN * 0 = NaN, inf * 0 = NaN, -1 * 0 = -0.
    if not _int(instr):
        return None
    lhs, rhs = instr.operands
    if _is(rhs, 0):
        return rhs
    if _is(lhs, 0):
        return lhs
    return None


def _divide_one(instr):
    # x / 1 -> x: integers (INT_MIN / 1 = INT_MIN) and real floats (NaN, inf, -0 kept).
    # NOT complex: division by (1+0i) computes b*0 terms, NaN for infinite b.
    if _int(instr) or _real_float(instr):
        return _other_if(instr, lambda o: _is(o, 1), commutative=False)
    return None


def _negate_negate(instr):
    # -(-x) -> x: every type. Floats flip the sign bit twice (NaN payloads, -0 kept);
    # integers wrap: -(-INT_MIN) = INT_MIN.
    (x,) = instr.operands
    return x.operands[0] if x.opcode == "negate" else None


def _not_not(instr):
    # not(not(x)) -> x: pred (logical) and integers (bitwise).
    (x,) = instr.operands
    return x.operands[0] if x.opcode == "not" else None


def _transpose_identity(instr):
    # transpose(x, {0,1,...,n-1}) -> x: moves nothing.
    dims = tuple(instr.attrs["dimensions"])
    return instr.operands[0] if dims == tuple(range(len(dims))) else None


def _transpose_transpose(instr):
    # transpose(transpose(x, p1), p2) -> transpose(x, c) with c[i] = p1[p2[i]], or x when c
    # is the identity: result dimension i of the outer one is dimension p2[i] of the inner
    # one, which is dimension p1[p2[i]] of x. Data movement only: exact.
    (inner,) = instr.operands
    if inner.opcode != "transpose":
        return None
    p1, p2 = tuple(inner.attrs["dimensions"]), tuple(instr.attrs["dimensions"])
    composed = tuple(p1[i] for i in p2)
    x = inner.operands[0]
    if composed == tuple(range(len(composed))):
        return x
    return _new("transpose", [x], {"dimensions": composed}, instr)


def _transpose_dot(instr):
    # transpose(dot(a, b)) -> dot(b, a) when the transpose keeps the batch dimensions in
    # place and swaps the lhs free block with the rhs free block (each kept in order) and the
    # transpose is the dot's only user. dot(b, a)[.., j, i] sums the same products
    # b[.., k, j] * a[.., i, k] over the same k: the same value (XLA's algebraic simplifier
    # does this). The kernels then read the operands as they are stored.
    (dot,) = instr.operands
    if dot.opcode != "dot" or len(dot.operands) != 2 or len(dot.users) != 1 or \
            set(dot.attrs) - {"dot_dimension_numbers", "precision_config"}:
        return None
    a, b = dot.operands
    dn = dot.attrs["dot_dimension_numbers"]
    nb = len(dn.lhs_batch_dimensions)
    nl = len(a.shape.dimensions) - nb - len(dn.lhs_contracting_dimensions)
    nr = len(b.shape.dimensions) - nb - len(dn.rhs_contracting_dimensions)
    want = tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr)) + tuple(range(nb, nb + nl))
    if tuple(instr.attrs["dimensions"]) != want or want == tuple(range(len(want))):
        return None
    from xlapy.hlo.attrs.dot import DotDimensionNumbers

    attrs = {"dot_dimension_numbers": DotDimensionNumbers(
        lhs_contracting_dimensions=dn.rhs_contracting_dimensions,
        rhs_contracting_dimensions=dn.lhs_contracting_dimensions,
        lhs_batch_dimensions=dn.rhs_batch_dimensions,
        rhs_batch_dimensions=dn.lhs_batch_dimensions)}
    config = dot.attrs.get("precision_config")
    if config is not None:
        attrs["precision_config"] = type(config)(tuple(reversed(config.operand_precision)),
                                                 config.algorithm)
    return _new("dot", [b, a], attrs, instr)


def _reshape_reshape(instr):
    # reshape(reshape(x)) -> reshape(x): a reshape keeps the row-major element order.
    (inner,) = instr.operands
    if inner.opcode != "reshape":
        return None
    return _new("reshape", [inner.operands[0]], {}, instr)


def _reshape_same(instr):
    # reshape(x) -> x when the dimensions do not change.
    (x,) = instr.operands
    return x if x.shape.is_array() and x.shape.dimensions == instr.shape.dimensions else None


def _broadcast_identity(instr):
    # broadcast(x, dimensions={0,...,n-1}) -> x when no dimension is added.
    # (A broadcast of a scalar constant stays: it is the cheap form of a splat constant.)
    (x,) = instr.operands
    dims = tuple(instr.attrs["dimensions"])
    if (x.shape.is_array() and dims == tuple(range(x.shape.rank))
            and x.shape.dimensions == instr.shape.dimensions):
        return x
    return None


def _slice_full(instr):
    # slice(x, {[0:n0:1], ...}) -> x when every dimension is taken whole with stride 1.
    (x,) = instr.operands
    s = instr.attrs["slice"]
    if (all(st == 0 for st in s.starts) and tuple(s.limits) == tuple(x.shape.dimensions)
            and all(sd == 1 for sd in s.strides)):
        return x
    return None


def _pad_zero(instr):
    # pad(x, v, 0_0_0x...) -> x: no edge or interior padding adds or removes anything.
    x = instr.operands[0]
    config = instr.attrs["padding"]
    if all(d.edge_padding_low == 0 and d.edge_padding_high == 0 and d.interior_padding == 0
           for d in config.dimensions):
        return x
    return None


def _concatenate_one(instr):
    # concatenate(x) -> x: one operand, nothing to join.
    return instr.operands[0] if len(instr.operands) == 1 else None


def _convert_same(instr):
    # convert(x) -> x when x already has the result's element type (bits unchanged).
    (x,) = instr.operands
    return x if x.shape.is_array() and x.shape.element_type == instr.shape.element_type else None


def _copy(instr):
    # copy(x) -> x: the driver replaces only when the shapes (with layouts) are equal.
    return instr.operands[0]


def _select_constant(instr):
    # select(true, a, b) -> a; select(false, a, b) -> b: a constant predicate (every
    # element the same) picks one branch whole.
    p, a, b = instr.operands
    if _is(p, True):
        return a
    if _is(p, False):
        return b
    return None


def _reduce_no_dimensions(instr):
    # reduce(x, init, dimensions={}) computes f(init, x) per element, which is NOT x in
    # general. It is x when f is add and init is the exact additive identity (integers: 0;
    # floats: -0, since f(+0, -0) = +0) or f is multiply and init is 1 (integers, real
    # floats; complex excluded as for x * 1).
    if len(instr.operands) != 2 or tuple(instr.attrs["dimensions"]):
        return None
    x, init = instr.operands
    op = _binary_reducer(instr.attrs["to_apply"])
    if op == "add":
        if _int(x) and _is(init, 0):
            return x
        if _real_float(x) and _is(init, -0.0):
            return x
        if _complex(x) and _is(init, complex(-0.0, -0.0)):
            return x
    if op == "multiply" and (_int(x) or _real_float(x)) and _is(init, 1):
        return x
    return None


def _binary_reducer(comp: Computation) -> str | None:
    """``add``/``multiply``... when ``comp`` is (p0, p1) -> op(p0, p1) or op(p1, p0)."""
    root = comp.root
    if root is None or len(comp.instructions) != 3 or len(root.operands) != 2:
        return None
    if sorted(o.opcode for o in root.operands) != ["parameter", "parameter"]:
        return None
    if {o.parameter_number for o in root.operands} != {0, 1}:
        return None
    return root.opcode


def _tuple_of_gtes(instr):
    # tuple(gte(t, 0), ..., gte(t, n-1)) -> t: rebuilding a tuple from all its elements.
    ops = instr.operands
    if not ops or any(o.opcode != "get-tuple-element" for o in ops):
        return None
    t = ops[0].operands[0]
    if any(o.operands[0] is not t or o.attrs["index"] != i for i, o in enumerate(ops)):
        return None
    if not t.shape.is_tuple() or len(t.shape.tuple_shapes) != len(ops):
        return None
    return t


def _gte_of_tuple(instr):
    # get-tuple-element(tuple(a0, ..., an), i) -> ai.
    (t,) = instr.operands
    return t.operands[instr.attrs["index"]] if t.opcode == "tuple" else None


def _get_dimension_size_static(instr):
    # get-dimension-size(x), dimensions={d} -> constant(size of d), when d is static.
    (x,) = instr.operands
    (d,) = instr.attrs["dimensions"]
    shape = x.shape
    if not shape.is_array() or (shape.dynamic_dimensions and shape.dynamic_dimensions[d]):
        return None
    from xlapy.shape import PrimitiveType
    from xlapy.shape.literal import Literal

    literal = Literal.scalar(int(shape.dimensions[d]), PrimitiveType.S32)
    return _new("constant", [], {"literal": literal}, instr)


def _new(opcode, operands, attrs, like: Instruction) -> Instruction:
    from xlapy.opdefs import make_instruction

    return make_instruction(opcode, operands, attrs, shape=like.shape, name=like.name,
                            metadata=like.metadata)


#: The rewrite table. Identities hold bit for bit for the element types each row accepts.
TABLE: list[Rewrite] = [
    Rewrite("add-zero", "add", "x + 0 -> x (integers; not floats: -0 + 0 = +0)", _add_zero),
    Rewrite("add-negative-zero", "add", "x + (-0) -> x (floats, complex)", _add_negative_zero),
    Rewrite("subtract-zero", "subtract", "x - 0 -> x (integers; floats: x - (+0) only)", _subtract_zero),
    Rewrite("multiply-one", "multiply", "x * 1 -> x (integers, real floats; not complex)", _multiply_one),
    Rewrite("multiply-zero", "multiply", "x * 0 -> 0 (integers only: NaN*0, inf*0 are NaN)", _multiply_zero),
    Rewrite("divide-one", "divide", "x / 1 -> x (integers, real floats; not complex)", _divide_one),
    Rewrite("negate-negate", "negate", "-(-x) -> x (every type)", _negate_negate),
    Rewrite("not-not", "not", "not(not(x)) -> x (pred, integers)", _not_not),
    Rewrite("transpose-identity", "transpose", "transpose(x, identity) -> x", _transpose_identity),
    Rewrite("transpose-transpose", "transpose",
            "transpose(transpose(x, p1), p2) -> transpose(x, p1[p2]) or x", _transpose_transpose),
    Rewrite("transpose-dot", "transpose",
            "transpose(dot(a, b)) -> dot(b, a) (free blocks swapped, the dot's only user)",
            _transpose_dot),
    Rewrite("reshape-reshape", "reshape", "reshape(reshape(x)) -> reshape(x)", _reshape_reshape),
    Rewrite("reshape-same", "reshape", "reshape(x) -> x (same dimensions)", _reshape_same),
    Rewrite("broadcast-identity", "broadcast", "broadcast(x, {0..n-1}) -> x (same dimensions)",
            _broadcast_identity),
    Rewrite("slice-full", "slice", "slice(x, whole, stride 1) -> x", _slice_full),
    Rewrite("pad-zero", "pad", "pad(x, v, all zero) -> x", _pad_zero),
    Rewrite("concatenate-one", "concatenate", "concatenate(x) -> x", _concatenate_one),
    Rewrite("convert-same", "convert", "convert(x) -> x (same element type)", _convert_same),
    Rewrite("copy", "copy", "copy(x) -> x (same layout)", _copy),
    Rewrite("select-constant", "select", "select(true, a, b) -> a; select(false, a, b) -> b",
            _select_constant),
    Rewrite("reduce-no-dimensions", "reduce",
            "reduce(x, identity, {}) -> x (add with 0 / -0, multiply with 1)", _reduce_no_dimensions),
    Rewrite("tuple-of-gtes", "tuple", "tuple(gte(t,0), ..., gte(t,n-1)) -> t", _tuple_of_gtes),
    Rewrite("gte-of-tuple", "get-tuple-element", "gte(tuple(a0..an), i) -> ai", _gte_of_tuple),
    Rewrite("get-dimension-size-static", "get-dimension-size",
            "get-dimension-size(x, d) -> constant(size of d) (d static)",
            _get_dimension_size_static),
]



class AlgebraicSimplifier(HloPass):
    """Applies TABLE until no row matches. ``counts`` tallies the rewrites done, by row."""

    name = "simplify"

    def __init__(self, table: list[Rewrite] | None = None, max_rounds: int = 20):
        rows = TABLE if table is None else table
        self.by_opcode: dict[str, list[Rewrite]] = {}
        for row in rows:
            self.by_opcode.setdefault(row.opcode, []).append(row)
        self.max_rounds = max_rounds
        self.counts: dict[str, int] = {}

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            for _ in range(self.max_rounds):
                if not self._round(comp):
                    break
                changed = True
        return changed

    def _round(self, comp: Computation) -> bool:
        changed = False
        for instr in comp.post_order():
            if instr.parent is not comp or instr.control_predecessors or instr.control_successors:
                continue
            for row in self.by_opcode.get(instr.opcode, ()):
                new = row.apply(instr)
                if new is None or new is instr or new.shape != instr.shape:
                    continue
                if new.parent is None:
                    comp.add_instruction(new)
                comp.replace_instruction(instr, new)
                self.counts[row.name] = self.counts.get(row.name, 0) + 1
                changed = True
                break
        return changed
