"""simplify: each row of the rewrite table fires where it is exact and nowhere else. Every
case checks the rewritten module's opcodes AND that random inputs (NaN, inf, -0 included)
give the same bits before and after; the refused cases show the identity really fails."""

import numpy as np
import pytest
from pass_check import check, opcodes

import xlapy
from xlapy.passes import TABLE, AlgebraicSimplifier


def _module(ty, body, params=("x",), root_ty=None):
    ps = "\n".join(f"  {p} = {ty} parameter({i})" for i, p in enumerate(params))
    return f"HloModule m\nENTRY e {{\n{ps}\n{body}\n}}\n"


def _splat(name, ty, value):
    scalar = ty.split("[")[0] + "[]"
    return f"  {name}_s = {scalar} constant({value})\n  {name} = {ty} broadcast({name}_s), dimensions={{}}"


# (case id, HLO text, opcodes left in the entry after simplify+dce)
FIRES = [
    ("add-zero-int", _module("s32[6]", _splat("z", "s32[6]", 0) + "\n  ROOT r = s32[6] add(z, x)"),
     {"parameter": 1}),
    ("add-negative-zero-f32", _module("f32[6]", _splat("z", "f32[6]", "-0") + "\n  ROOT r = f32[6] add(x, z)"),
     {"parameter": 1}),
    ("add-negative-zero-c64", _module("c64[6]", _splat("z", "c64[6]", "(-0, -0)")
                                      + "\n  ROOT r = c64[6] add(x, z)"), {"parameter": 1}),
    ("subtract-zero-int", _module("u8[6]", _splat("z", "u8[6]", 0) + "\n  ROOT r = u8[6] subtract(x, z)"),
     {"parameter": 1}),
    ("subtract-positive-zero-f16", _module("f16[6]", _splat("z", "f16[6]", 0)
                                           + "\n  ROOT r = f16[6] subtract(x, z)"), {"parameter": 1}),
    ("multiply-one-f32", _module("f32[6]", _splat("o", "f32[6]", 1) + "\n  ROOT r = f32[6] multiply(o, x)"),
     {"parameter": 1}),
    ("multiply-one-bf16", _module("bf16[6]", _splat("o", "bf16[6]", 1)
                                  + "\n  ROOT r = bf16[6] multiply(x, o)"), {"parameter": 1}),
    ("multiply-zero-int", _module("s64[6]", _splat("z", "s64[6]", 0) + "\n  ROOT r = s64[6] multiply(x, z)"),
     {"constant": 1, "broadcast": 1, "parameter": 1}),
    ("divide-one-f64", _module("f64[6]", _splat("o", "f64[6]", 1) + "\n  ROOT r = f64[6] divide(x, o)"),
     {"parameter": 1}),
    ("divide-one-s8", _module("s8[6]", _splat("o", "s8[6]", 1) + "\n  ROOT r = s8[6] divide(x, o)"),
     {"parameter": 1}),
    ("negate-negate", _module("f32[6]", "  n = f32[6] negate(x)\n  ROOT r = f32[6] negate(n)"),
     {"parameter": 1}),
    ("negate-negate-int", _module("s32[6]", "  n = s32[6] negate(x)\n  ROOT r = s32[6] negate(n)"),
     {"parameter": 1}),
    ("not-not", _module("pred[6]", "  n = pred[6] not(x)\n  ROOT r = pred[6] not(n)"), {"parameter": 1}),
    ("transpose-identity", _module("f32[2,3]", "  ROOT r = f32[2,3] transpose(x), dimensions={0,1}"),
     {"parameter": 1}),
    ("transpose-transpose-cancel", _module(
        "f32[2,3,4]", "  t = f32[4,2,3] transpose(x), dimensions={2,0,1}\n"
        "  ROOT r = f32[2,3,4] transpose(t), dimensions={1,2,0}"), {"parameter": 1}),
    ("transpose-transpose-compose", _module(
        "f32[2,3,4]", "  t = f32[3,2,4] transpose(x), dimensions={1,0,2}\n"
        "  ROOT r = f32[4,2,3] transpose(t), dimensions={2,1,0}"), {"parameter": 1, "transpose": 1}),
    ("reshape-reshape", _module(
        "f32[2,6]", "  a = f32[3,4] reshape(x)\n  ROOT r = f32[12] reshape(a)"),
     {"parameter": 1, "reshape": 1}),
    ("reshape-same", _module("f32[2,6]", "  ROOT r = f32[2,6] reshape(x)"), {"parameter": 1}),
    ("broadcast-identity", _module("f32[2,6]", "  ROOT r = f32[2,6] broadcast(x), dimensions={0,1}"),
     {"parameter": 1}),
    ("slice-full", _module("f32[2,6]", "  ROOT r = f32[2,6] slice(x), slice={[0:2], [0:6:1]}"),
     {"parameter": 1}),
    ("pad-zero", _module("f32[2,6]", "  v = f32[] constant(7)\n"
                         "  ROOT r = f32[2,6] pad(x, v), padding=0_0x0_0_0"), {"parameter": 1}),
    ("concatenate-one", _module("f32[2,6]", "  ROOT r = f32[2,6] concatenate(x), dimensions={1}"),
     {"parameter": 1}),
    ("convert-same", _module("f32[6]", "  ROOT r = f32[6] convert(x)"), {"parameter": 1}),
    ("copy", _module("f32[2,6]{1,0}", "  c = f32[2,6]{1,0} copy(x)\n  ROOT r = f32[2,6] negate(c)"),
     {"parameter": 1, "negate": 1}),
    ("select-true", _module("f32[6]", "  p = pred[] constant(true)\n"
                            "  ROOT r = f32[6] select(p, x, y)", params=("x", "y")), {"parameter": 2}),
    ("select-false-array", _module("f32[6]", _splat("p", "pred[6]", "false")
                                   + "\n  ROOT r = f32[6] select(p, x, y)", params=("x", "y")),
     {"parameter": 2}),
    ("tuple-of-gtes", _module("(f32[6], s32[2])", "  a = f32[6] get-tuple-element(x), index=0\n"
                              "  b = s32[2] get-tuple-element(x), index=1\n"
                              "  ROOT r = (f32[6], s32[2]) tuple(a, b)"), {"parameter": 1}),
    ("gte-of-tuple", _module("f32[6]", "  t = (f32[6], f32[6]) tuple(y, x)\n"
                             "  ROOT r = f32[6] get-tuple-element(t), index=1", params=("x", "y")),
     {"parameter": 2}),
    ("get-dimension-size-static", _module("f32[2,6]", "  ROOT r = s32[] get-dimension-size(x), "
                                          "dimensions={1}"), {"parameter": 1, "constant": 1}),
]

REDUCE_NO_DIMS = """
HloModule m
{name} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] {op}(a, b)
}}
ENTRY e {{
  x = {t}[2,3] parameter(0)
  i = {t}[] constant({init})
  ROOT r = {t}[2,3] reduce(x, i), dimensions={{}}, to_apply={name}
}}
"""

FIRES += [
    ("reduce-no-dims-add-f32", REDUCE_NO_DIMS.format(name="add", t="f32", op="add", init="-0"),
     {"parameter": 1}),
    ("reduce-no-dims-add-s32", REDUCE_NO_DIMS.format(name="add", t="s32", op="add", init="0"),
     {"parameter": 1}),
    ("reduce-no-dims-mul-f32", REDUCE_NO_DIMS.format(name="mul", t="f32", op="multiply", init="1"),
     {"parameter": 1}),
]


# transpose(dot) rows: checked on inputs without NaN (which NaN a product of two NaNs
# propagates depends on the operands' order, and XLA keeps no NaN payload)
DOT_FIRES = [
    ("transpose-dot", _module("f32[5,3]", "  d = f32[3,4] dot(x, y), lhs_contracting_dims={0}, "
                              "rhs_contracting_dims={0}\n"
                              "  ROOT r = f32[4,3] transpose(d), dimensions={1,0}",
                              params=("x", "y")).replace("y = f32[5,3]", "y = f32[5,4]"),
     {"parameter": 2, "dot": 1}),
    # a batch dimension kept in place, two lhs free dimensions swapped with one rhs free one
    ("transpose-dot-batched", _module(
        "f32[2,3,6,5]", "  d = f32[2,3,6,4] dot(x, y), lhs_batch_dims={0}, rhs_batch_dims={0}, "
        "lhs_contracting_dims={3}, rhs_contracting_dims={1}, operand_precision={high,default}\n"
        "  ROOT r = f32[2,4,3,6] transpose(d), dimensions={0,3,1,2}",
        params=("x", "y")).replace("y = f32[2,3,6,5]", "y = f32[2,5,4]"),
     {"parameter": 2, "dot": 1}),
]


def _no_nan_args(module, seed):
    rng = np.random.default_rng(seed)
    values = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 0.5, 3.0, -2.25]
    return [rng.choice(values, tuple(p.shape.dimensions)).astype(np.float32)
            for p in module.entry.parameters]


@pytest.mark.parametrize("text,left", [c[1:] for c in DOT_FIRES], ids=[c[0] for c in DOT_FIRES])
def test_transpose_dot_fires_and_keeps_bits(text, left):
    module = xlapy.parse_hlo_module(text)
    for seed in (0, 1, 2):
        m = check(text, ["simplify", "dce"], args=_no_nan_args(module, seed))
    assert dict(opcodes(m)) == left


def test_transpose_dot_swaps_operands_and_their_attributes():
    text = dict((c[0], c[1]) for c in DOT_FIRES)["transpose-dot-batched"]
    m = check(text, ["simplify", "dce"], args=_no_nan_args(xlapy.parse_hlo_module(text), 0))
    dot = m.entry.root
    assert dot.opcode == "dot" and [o.name for o in dot.operands] == ["y", "x"]
    dn = dot.attrs["dot_dimension_numbers"]
    assert (dn.lhs_batch_dimensions, dn.rhs_batch_dimensions) == ((0,), (0,))
    assert (dn.lhs_contracting_dimensions, dn.rhs_contracting_dimensions) == ((1,), (3,))
    assert [p.value for p in dot.attrs["precision_config"].operand_precision] == \
        ["default", "high"]


@pytest.mark.parametrize("root", [
    # the dot has another user: swapping would compute it twice
    "  t = f32[4,3] transpose(d), dimensions={1,0}\n  ROOT r = (f32[4,3], f32[3,4]) tuple(t, d)",
])
def test_transpose_dot_stays_when_the_dot_has_other_users(root):
    text = _module("f32[5,3]", "  d = f32[3,4] dot(x, y), lhs_contracting_dims={0}, "
                   "rhs_contracting_dims={0}\n" + root,
                   params=("x", "y")).replace("y = f32[5,3]", "y = f32[5,4]")
    m = check(text, ["simplify", "dce"], args=_no_nan_args(xlapy.parse_hlo_module(text), 0))
    assert opcodes(m)["transpose"] == 1 and opcodes(m)["dot"] == 1


def test_transpose_dot_stays_when_the_batch_moves():
    text = _module("f32[2,3,5]", "  d = f32[2,3,4] dot(x, y), lhs_batch_dims={0}, "
                   "rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}\n"
                   "  ROOT r = f32[3,2,4] transpose(d), dimensions={1,0,2}",
                   params=("x", "y")).replace("y = f32[2,3,5]", "y = f32[2,5,4]")
    m = check(text, ["simplify", "dce"], args=_no_nan_args(xlapy.parse_hlo_module(text), 0))
    assert opcodes(m)["transpose"] == 1


@pytest.mark.parametrize("text,left", [c[1:] for c in FIRES], ids=[c[0] for c in FIRES])
def test_rewrite_fires_and_keeps_bits(text, left):
    m = check(text, ["simplify", "dce"])
    assert dict(opcodes(m)) == left


# Identities that are NOT exact: the pass must leave them, and evaluation shows why.
# (case id, text, opcode that must stay, input where the identity fails, what it fails on)
REFUSED = [
    ("float-add-positive-zero", _module("f32[1]", _splat("z", "f32[1]", 0) + "\n  ROOT r = f32[1] add(x, z)"),
     "add", np.array([-0.0], np.float32)),  # -0 + 0 = +0
    ("float-subtract-negative-zero", _module("f32[1]", _splat("z", "f32[1]", "-0")
                                             + "\n  ROOT r = f32[1] subtract(x, z)"),
     "subtract", np.array([-0.0], np.float32)),  # -0 - -0 = +0
    ("float-multiply-zero", _module("f32[1]", _splat("z", "f32[1]", 0) + "\n  ROOT r = f32[1] multiply(x, z)"),
     "multiply", np.array([np.inf], np.float32)),  # inf * 0 = NaN
    ("complex-multiply-one", _module("c64[1]", _splat("o", "c64[1]", "(1, 0)")
                                     + "\n  ROOT r = c64[1] multiply(x, o)"),
     "multiply", np.array([complex(1.0, np.inf)], np.complex64)),  # inf*0 in the cross terms
    ("reduce-no-dims-add-positive-zero",
     REDUCE_NO_DIMS.format(name="add", t="f32", op="add", init="0").replace("[2,3]", "[1]"),
     "reduce", np.array([-0.0], np.float32)),
]


@pytest.mark.parametrize("text,opcode,x", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_inexact_identity_refused(text, opcode, x):
    m = check(text, ["simplify", "dce"], args=[x])
    assert opcodes(m)[opcode] == 1
    # The identity really is wrong on x: the result's bits are not x's.
    out = xlapy.evaluate(m, x)
    assert out.tobytes() != x.tobytes()


def test_size_of_a_dynamic_dimension_stays():
    text = _module("f32[2,<=6]", "  ROOT r = s32[] get-dimension-size(x), dimensions={1}")
    m = check(text, ["simplify"])
    assert opcodes(m)["get-dimension-size"] == 1


def test_layout_changing_copy_stays():
    text = _module("f32[2,3]{1,0}", "  ROOT r = f32[2,3]{0,1} copy(x)")
    m = check(text, ["simplify"])
    assert opcodes(m)["copy"] == 1


def test_non_constant_or_mixed_operands_do_not_match():
    text = _module("f32[3]", "  c = f32[3] constant({-0, -0, 0})\n"
                   "  a = f32[3] add(x, c)\n  p = pred[3] constant({true, false, true})\n"
                   "  ROOT r = f32[3] select(p, a, x)")
    m = check(text, ["simplify", "dce"])
    assert opcodes(m) == {"parameter": 1, "constant": 2, "add": 1, "select": 1}


def test_every_row_is_exercised_and_documented():
    fired = set()
    for _, text, _ in FIRES + DOT_FIRES:
        m = xlapy.parse_hlo_module(text)
        s = AlgebraicSimplifier()
        s.run(m)
        fired |= set(s.counts)
    assert fired == {row.name for row in TABLE}
    assert all("->" in row.identity for row in TABLE)


def test_chains_simplify_in_one_run():
    text = _module("f32[2,3]", "  a = f32[3,2] transpose(x), dimensions={1,0}\n"
                   "  b = f32[2,3] transpose(a), dimensions={1,0}\n  c = f32[2,3] negate(b)\n"
                   "  d = f32[2,3] negate(c)\n  e = f32[2,3] copy(d)\n"
                   "  ROOT r = f32[2,3] convert(e)")
    m = check(text, ["simplify", "dce"])
    assert dict(opcodes(m)) == {"parameter": 1}
    assert m.entry.root is m.entry.parameter(0)
