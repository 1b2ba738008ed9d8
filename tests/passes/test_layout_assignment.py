"""layout-assignment: default layouts where missing; entry parameter/result layouts made
to match entry_computation_layout with copies; values keep their bits; text round trip."""

from collections import Counter

from pass_check import check

import xlapy
from xlapy.passes import make_pipeline
from xlapy.passes.layout_assignment import with_missing_layouts
from xlapy.shape import PrimitiveType, Shape

TEXT = """
HloModule m, entry_computation_layout={(f32[2,3]{0,1}, f32[3,2]{1,0})->f32[2,3]{0,1}}
ENTRY e {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[3,2]{1,0} parameter(1)
  t = f32[2,3]{1,0} transpose(y), dimensions={1,0}
  ROOT a = f32[2,3]{1,0} add(x, t)
}
"""


def test_entry_layouts_matched_with_copies():
    m = check(TEXT, ["layout-assignment"])
    entry = m.entry
    assert str(entry.parameter(0).shape) == "f32[2,3]{0,1}"
    assert str(entry.parameter(1).shape) == "f32[3,2]{1,0}"
    assert entry.root.opcode == "copy" and str(entry.root.shape) == "f32[2,3]{0,1}"
    assert Counter(i.opcode for i in entry.instructions)["copy"] == 2
    text = m.to_string()
    assert xlapy.parse_hlo_module(text).to_string() == text
    assert not make_pipeline(["layout-assignment"]).run(m)  # idempotent


def test_missing_layouts_get_the_default():
    m = xlapy.parse_hlo_module("""
HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  ROOT n = f32[2,3] negate(x)
}
""")
    bare = Shape.array(PrimitiveType.F32, [2, 3], layout=None)
    m.entry.root.shape = bare
    m.entry.parameter(0).shape = Shape.tuple([bare]).tuple_shapes[0]
    assert make_pipeline(["layout-assignment"]).run(m)
    assert str(m.entry.root.shape) == "f32[2,3]{1,0}"
    assert str(m.entry.parameter(0).shape) == "f32[2,3]{1,0}"
    tup = with_missing_layouts(Shape.tuple([bare, Shape.array(PrimitiveType.S32, [4])]))
    assert str(tup) == "(f32[2,3]{1,0}, s32[4]{0})"
    keep = Shape.array(PrimitiveType.F32, [2, 3]).with_layout(None)
    assert with_missing_layouts(keep).layout is not None


def test_module_already_matching_is_unchanged():
    m = xlapy.parse_hlo_module(TEXT.replace("{0,1}", "{1,0}"))
    assert not make_pipeline(["layout-assignment"]).run(m)
