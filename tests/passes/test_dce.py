"""dce: dead instructions and unreachable computations go; roots, parameters and side
effects (own or inside called computations) stay."""

from pass_check import check, opcodes

import xlapy
from xlapy.passes import DeadCodeElimination

DEAD_ARITH = """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  dead1 = f32[4] multiply(x, y)
  dead2 = f32[4] negate(dead1)
  ROOT r = f32[4] add(x, y)
}
"""


def test_dead_chain_removed_parameters_kept():
    m = check(DEAD_ARITH, ["dce"])
    assert opcodes(m) == {"parameter": 2, "add": 1}
    assert [p.name for p in m.entry.parameters] == ["x", "y"]


def test_unused_parameter_kept_and_second_run_changes_nothing():
    m = xlapy.parse_hlo_module(DEAD_ARITH)
    assert DeadCodeElimination().run(m) is True
    assert DeadCodeElimination().run(m) is False


SIDE_EFFECTS = """
HloModule m
body {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[3] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  t = token[] after-all()
  o = token[] outfeed(v, t), outfeed_shape=f32[3]{0}
  ROOT r = (s32[], f32[3]) tuple(i1, v)
}
cond {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(2)
  ROOT lt = pred[] compare(i, n), direction=LT
}
pure_body {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[3] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], f32[3]) tuple(i1, v)
}
unused {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
ENTRY e {
  x = f32[3] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, x)
  w = (s32[], f32[3]) while(init), condition=cond, body=body
  w2 = (s32[], f32[3]) while(init), condition=cond, body=pure_body
  t = token[] after-all()
  o = token[] outfeed(x, t), outfeed_shape=f32[3]{0}
  ROOT n = f32[3] negate(x)
}
"""


def test_side_effects_kept_pure_while_and_unused_computation_removed():
    m = check(SIDE_EFFECTS, ["dce"])
    c = opcodes(m)
    assert c["while"] == 1  # the loop with an outfeed in its body stays
    assert m.entry.instruction("w").opcode == "while"
    assert c["outfeed"] == 1
    names = {comp.name for comp in m.computations}
    assert names == {"body", "cond", "e"}  # pure_body (its loop was dead) and unused went


def test_dead_operands_of_root_chain_only():
    text = """
HloModule m
ENTRY e {
  x = s32[5] parameter(0)
  c = s32[] constant(7)
  b = s32[5] broadcast(c), dimensions={}
  unused = s32[5] subtract(x, b)
  ROOT r = s32[5] multiply(x, b)
}
"""
    m = check(text, ["dce"])
    assert opcodes(m) == {"parameter": 1, "constant": 1, "broadcast": 1, "multiply": 1}
