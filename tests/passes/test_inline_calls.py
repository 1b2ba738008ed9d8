"""inline: call instructions become copies of their callee's instructions (nested calls
too); composites stay; the callees go once unused; results keep their bits."""

from pathlib import Path

from pass_check import check, opcodes

import xlapy
from xlapy.passes import CallInliner

NESTED = """
HloModule m
inner {
  a = f32[4] parameter(0)
  ROOT n = f32[4] negate(a)
}
outer {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  c = f32[4] call(p), to_apply=inner
  ROOT s = f32[4] subtract(c, q)
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  c1 = f32[4] call(x, y), to_apply=outer
  c2 = f32[4] call(y, x), to_apply=outer
  ROOT r = f32[4] multiply(c1, c2)
}
"""


def test_nested_calls_inlined_callees_removed():
    m = check(NESTED, ["inline"])
    assert dict(opcodes(m)) == {"parameter": 2, "negate": 2, "subtract": 2, "multiply": 1}
    assert [c.name for c in m.computations] == ["e"]
    names = [i.name for i in m.entry.instructions]
    assert len(names) == len(set(names))


def test_callee_returning_a_parameter_and_tuple_results():
    text = """
HloModule m
ident {
  a = f32[3] parameter(0)
  b = s32[] parameter(1)
  ROOT a2 = f32[3] copy(a)
}
pick {
  a = f32[3] parameter(0)
  b = s32[] parameter(1)
  ROOT t = (s32[], f32[3]) tuple(b, a)
}
passthru {
  a = f32[3] parameter(0)
  ROOT a1 = f32[3] parameter(1)
}
ENTRY e {
  x = f32[3] parameter(0)
  i = s32[] parameter(1)
  c = f32[3] call(x, i), to_apply=ident
  t = (s32[], f32[3]) call(c, i), to_apply=pick
  g = f32[3] get-tuple-element(t), index=1
  ROOT p = f32[3] call(x, g), to_apply=passthru
}
"""
    m = check(text, ["inline"])
    assert opcodes(m)["call"] == 0
    assert m.entry.root.opcode == "get-tuple-element"


def test_composite_call_kept():
    text = (Path(__file__).parent.parent / "fixtures" / "jax" / "composite_call.pre.hlo").read_text()
    m = check(text, ["inline"])
    assert opcodes(m)["call"] == 1
    m2 = xlapy.parse_hlo_module(text)
    assert not CallInliner().run(m2)


def test_inline_then_cse_merges_the_copies():
    text = """
HloModule m
f {
  a = f32[4] parameter(0)
  ROOT e = f32[4] exponential(a)
}
ENTRY e {
  x = f32[4] parameter(0)
  c1 = f32[4] call(x), to_apply=f
  c2 = f32[4] call(x), to_apply=f
  ROOT r = f32[4] add(c1, c2)
}
"""
    m = check(text, ["inline", "cse", "dce"])
    assert dict(opcodes(m)) == {"parameter": 1, "exponential": 1, "add": 1}
