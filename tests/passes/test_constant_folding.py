"""constant-folding: all-constant instructions become constants with the interpreter's
exact bits (NaN, -0, inf) and the original shape and layout; side effects, rng, iota,
broadcasts, elided constants and oversized results are left alone."""

import numpy as np
from pass_check import check, opcodes

import xlapy
from xlapy.passes import ConstantFolding


def _literal(m, name=None):
    instr = m.entry.root if name is None else m.entry.instruction(name)
    assert instr.opcode == "constant"
    return instr.attrs["literal"]


def test_arithmetic_with_special_values_folds_bit_exactly():
    text = """
HloModule m
ENTRY e {
  a = f32[5] constant({-0, 1, inf, nan, 3})
  b = f32[5] constant({0, -0, -inf, 1, -0})
  s = f32[5] add(a, b)
  ROOT m = f32[5] multiply(s, b)
}
"""
    m = check(text, ["constant-folding", "dce"], args=[])
    assert dict(opcodes(m)) == {"constant": 1}
    with np.errstate(invalid="ignore"):
        want = (np.float32([-0.0, 1, np.inf, np.nan, 3]) + np.float32([0, -0.0, -np.inf, 1, -0.0])) \
            * np.float32([0, -0.0, -np.inf, 1, -0.0])
    assert _literal(m).array.tobytes() == want.tobytes()


def test_layout_and_shape_kept():
    text = """
HloModule m
ENTRY e {
  a = s32[2,3]{1,0} constant({{1, 2, 3}, {4, 5, 6}})
  t = s32[3,2]{0,1} transpose(a), dimensions={1,0}
  ROOT r = s32[3,2]{0,1} negate(t)
}
"""
    m = check(text, ["constant-folding", "dce"], args=[])
    lit = _literal(m)
    assert str(m.entry.root.shape) == "s32[3,2]{0,1}"
    assert lit.array.tolist() == [[-1, -4], [-2, -5], [-3, -6]]


def test_folds_with_called_computation_and_mixed_parameters():
    text = """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[] parameter(0)
  c = f32[4] constant({1, 2, 3, 4.5})
  z = f32[] constant(0)
  r = f32[] reduce(c, z), dimensions={0}, to_apply=add
  ROOT y = f32[] add(x, r)
}
"""
    m = check(text, ["constant-folding", "dce"])
    assert dict(opcodes(m)) == {"parameter": 1, "constant": 1, "add": 1}
    assert float(_literal(m, m.entry.root.operands[1].name).array) == 10.5


def test_not_folded_rng_iota_broadcast_elided_and_large():
    text = """
HloModule m
ENTRY e {
  a = f32[] constant(0)
  b = f32[] constant(1)
  r = f32[4] rng(a, b), distribution=rng_uniform
  i = s32[4] iota(), iota_dimension=0
  br = f32[4] broadcast(b), dimensions={}
  el = s32[4] constant({...})
  n = s32[4] negate(el)
  ROOT t = (f32[4], s32[4], f32[4], s32[4]) tuple(r, i, br, n)
}
"""
    m = xlapy.parse_hlo_module(text)
    assert not ConstantFolding().run(m)
    big = """
HloModule m
ENTRY e {
  a = f32[64] constant({...})
  ROOT n = f32[64] negate(a)
}
""".replace("{...}", "{" + ", ".join(["1"] * 64) + "}")
    m = xlapy.parse_hlo_module(big)
    assert not ConstantFolding(max_elements=63).run(m)
    assert ConstantFolding(max_elements=64).run(m)
    assert _literal(m).array.tolist() == [-1.0] * 64


def test_integer_wraparound_and_conversion():
    text = """
HloModule m
ENTRY e {
  a = s8[3] constant({127, -128, 5})
  one = s8[3] constant({1, 1, 1})
  s = s8[3] add(a, one)
  ROOT c = f16[3] convert(s)
}
"""
    m = check(text, ["constant-folding", "dce"], args=[])
    assert _literal(m).array.tolist() == [-128.0, -127.0, 6.0]
