"""cse: identical instructions merge (opcode, operands, attributes, shape with layout);
constants by bits; side effects, elided constants and different attributes stay apart."""

from pass_check import check, opcodes

import xlapy
from xlapy.passes import Cse


def test_identical_arithmetic_merged():
    text = """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a1 = f32[4] add(x, y)
  a2 = f32[4] add(x, y)
  m1 = f32[4] multiply(a1, a1)
  m2 = f32[4] multiply(a2, a2)
  ROOT r = f32[4] subtract(m1, m2)
}
"""
    m = check(text, ["cse", "dce"])
    assert opcodes(m) == {"parameter": 2, "add": 1, "multiply": 1, "subtract": 1}
    sub = m.entry.root
    assert sub.operands[0] is sub.operands[1]


def test_operand_order_matters_no_commutation():
    text = """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a1 = f32[4] add(x, y)
  a2 = f32[4] add(y, x)
  ROOT r = (f32[4], f32[4]) tuple(a1, a2)
}
"""
    m = check(text, ["cse"])
    assert opcodes(m)["add"] == 2


def test_constants_merge_by_bits_only():
    text = """
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  c1 = f32[] constant(1.5)
  c2 = f32[] constant(1.5)
  z = f32[] constant(0)
  nz = f32[] constant(-0)
  b1 = f32[2] broadcast(c1), dimensions={}
  b2 = f32[2] broadcast(c2), dimensions={}
  bz = f32[2] broadcast(z), dimensions={}
  bnz = f32[2] broadcast(nz), dimensions={}
  a1 = f32[2] add(x, b1)
  a2 = f32[2] add(x, b2)
  a3 = f32[2] add(x, bz)
  a4 = f32[2] add(x, bnz)
  ROOT r = (f32[2], f32[2], f32[2], f32[2]) tuple(a1, a2, a3, a4)
}
"""
    m = check(text, ["cse", "dce"])
    # 1.5 twice -> one constant, one broadcast, one add; 0 and -0 stay apart.
    assert opcodes(m) == {"parameter": 1, "constant": 3, "broadcast": 3, "add": 3, "tuple": 1}
    root = m.entry.root
    assert root.operands[0] is root.operands[1]
    assert root.operands[2] is not root.operands[3]


def test_attributes_and_layouts_keep_apart():
    text = """
HloModule m
ENTRY e {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[2,3]{1,0} parameter(1)
  lt = pred[2,3] compare(x, y), direction=LT
  gt = pred[2,3] compare(x, y), direction=GT
  c1 = f32[2,3]{1,0} copy(x)
  c2 = f32[2,3]{0,1} copy(x)
  c3 = f32[2,3]{0,1} copy(x)
  ROOT r = (pred[2,3], pred[2,3], f32[2,3]{1,0}, f32[2,3]{0,1}, f32[2,3]{0,1}) tuple(lt, gt, c1, c2, c3)
}
"""
    m = check(text, ["cse", "dce"])
    assert opcodes(m) == {"parameter": 2, "compare": 2, "copy": 2, "tuple": 1}


def test_side_effecting_rng_never_merged():
    text = """
HloModule m
ENTRY e {
  a = f32[] constant(0)
  b = f32[] constant(1)
  r1 = f32[8] rng(a, b), distribution=rng_uniform
  r2 = f32[8] rng(a, b), distribution=rng_uniform
  ROOT r = f32[8] subtract(r1, r2)
}
"""
    m = check(text, ["cse"])
    assert opcodes(m)["rng"] == 2
    out = xlapy.evaluate(m)
    assert (out != 0).any()  # two different draws


REDUCES = """
HloModule m
add1 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
add2 {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT t = f32[] add(p, q)
}
max1 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[3,4] parameter(0)
  z = f32[] constant(0)
  r1 = f32[3] reduce(x, z), dimensions={1}, to_apply=add1
  r2 = f32[3] reduce(x, z), dimensions={1}, to_apply=add2
  r3 = f32[3] reduce(x, z), dimensions={1}, to_apply=max1
  ROOT r = (f32[3], f32[3], f32[3]) tuple(r1, r2, r3)
}
"""


def test_identical_called_computations_merge_different_ones_do_not():
    m = check(REDUCES, ["cse", "dce"])
    assert opcodes(m)["reduce"] == 2  # add1 == add2 structurally; max1 differs
    assert {c.name for c in m.computations} == {"add1", "max1", "e"}


def test_iota_merged_and_elided_constants_not():
    text = """
HloModule m
ENTRY e {
  i1 = s32[4] iota(), iota_dimension=0
  i2 = s32[4] iota(), iota_dimension=0
  c1 = s32[4] constant({...})
  c2 = s32[4] constant({...})
  ROOT r = (s32[4], s32[4], s32[4], s32[4]) tuple(i1, i2, c1, c2)
}
"""
    m = xlapy.parse_hlo_module(text)
    assert Cse().run(m)
    xlapy.verify_module(m)
    root = m.entry.root
    assert root.operands[0] is root.operands[1]
    assert root.operands[2] is not root.operands[3]  # unknown values: maybe different


def test_no_change_reports_false():
    m = xlapy.parse_hlo_module(REDUCES)
    assert Cse().run(m)
    assert not Cse().run(m)


def test_calls_of_identical_deep_chains_merge():
    depth = 1500  # structural keys name callees by number: no recursion, no deep tuples
    lines = ["HloModule m"]
    for side in "ab":
        lines.append(f"{side}0 {{\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)\n}}")
        for k in range(1, depth + 1):
            lines.append(f"{side}{k} {{\n  p = f32[4] parameter(0)\n"
                         f"  ROOT r = f32[4] call(p), to_apply={side}{k - 1}\n}}")
    lines.append(f"ENTRY e {{\n  x = f32[4] parameter(0)\n"
                 f"  ca = f32[4] call(x), to_apply=a{depth}\n"
                 f"  cb = f32[4] call(x), to_apply=b{depth}\n"
                 f"  ROOT t = (f32[4], f32[4]) tuple(ca, cb)\n}}")
    m = check("\n".join(lines), ["cse"], seeds=(0,))
    root = m.entry.root
    assert root.operands[0] is root.operands[1]
    different = "\n".join(lines).replace("b0 {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)",
                                         "b0 {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] abs(p)")
    m = check(different, ["cse"], seeds=(0,))
    assert m.entry.root.operands[0] is not m.entry.root.operands[1]


def test_commuted_operands_merge_as_xlas_cse_when_asked():
    """Cse(commutative=True), the CPU backend's: XLA's CSE compares binary commutative ops
    ignoring operand order; other ops keep it."""
    text = """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a1 = f32[4] multiply(x, y)
  a2 = f32[4] multiply(y, x)
  d1 = f32[4] subtract(x, y)
  d2 = f32[4] subtract(y, x)
  ROOT r = (f32[4], f32[4], f32[4], f32[4]) tuple(a1, a2, d1, d2)
}
"""
    m = xlapy.parse_hlo_module(text)
    assert Cse(commutative=True).run(m)
    ops = opcodes(m)
    assert ops["multiply"] == 1 and ops["subtract"] == 2
    m = xlapy.parse_hlo_module(text)
    Cse().run(m)
    assert opcodes(m)["multiply"] == 2
