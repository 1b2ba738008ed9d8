"""sort: the shape rule (InferVariadicOpShape(kSort) cases of shape_inference_test.cc, the
comparator checks of the verifier), the spec page's example, the Sort builder function and
the HLO text of the attributes."""

import pytest

from program_shapes import comp, infer
from xlapy import ops
from xlapy.ops.builder import XlaBuilder
from xlapy.errors import InvalidArgumentError
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import ShapeError
from xlapy.shape import parse_shape


def lt(*types):
    params = [f"{t}[]" for t in types for _ in (0, 1)]
    return comp(params, "pred[]", "compare")


def test_sort_shapes():
    assert infer("sort", "f32[4]", dimensions=[0], to_apply=lt("f32")) == parse_shape("f32[4]")
    # SortManyValues: several operands of one dimensions, any element types: a tuple.
    got = infer("sort", "f32[4]", "s32[4]", "u32[4]", dimensions=[0],
                to_apply=lt("f32", "s32", "u32"))
    assert got == parse_shape("(f32[4], s32[4], u32[4])")
    # The layouts of the operands are kept.
    got = infer("sort", "f32[1024,16]{0,1}", "s32[1024,16]{0,1}", dimensions=[0],
                to_apply=lt("f32", "s32"))
    assert str(got) == "(f32[1024,16]{0,1}, s32[1024,16]{0,1})"
    # UnboundedSort.
    assert infer("sort", "f32[?,10]", dimensions=[1], to_apply=lt("f32")) == parse_shape(
        "f32[?,10]")
    # The spec page: operands [3, 1], [42, 50], [-3.0, 1.1] sort together into a 3-tuple.
    got = infer("sort", "s32[2]", "s32[2]", "f32[2]", dimensions=[0],
                to_apply=lt("s32", "s32", "f32"))
    assert got == parse_shape("(s32[2], s32[2], f32[2])")


@pytest.mark.parametrize("shapes, types, message", [
    # BadSort / BadSortValuesMismatch.
    (["f32[4]", "f32[5]"], ["f32", "f32"],
     r"Sort keys and values dimensions must match. Keys shape is: f32\[4\]\{0\}\n, Values "
     r"shape \(operand index 1\) is: f32\[5\]\{0\}"),
    (["f32[4]", "f32[4]", "f32[5]"], ["f32"] * 3, r"Sort keys[\s\S]*\(operand index 2\)"),
    (["(f32[4])"], ["f32"], r"Expected array argument for operand 0 of sort"),
])
def test_sort_shape_errors(shapes, types, message):
    with pytest.raises(ShapeError, match="sort: " + message):
        infer("sort", *shapes, dimensions=[0], to_apply=comp(["f32[]"] * 2 * len(types),
                                                             "pred[]"))


def test_sort_comparator_and_dimension_errors():
    with pytest.raises(ShapeError, match=r"sort: The Sort compare computation shape does not "
                                         r"lead to a scalar predicate shape: f32\[\]"):
        infer("sort", "f32[4]", dimensions=[0], to_apply=comp(["f32[]", "f32[]"], "f32[]"))
    with pytest.raises(ShapeError, match="Expected computation compare called from sort to have "
                                         "4 parameters, has 2"):
        infer("sort", "f32[4]", "s32[4]", dimensions=[0], to_apply=lt("f32"))
    with pytest.raises(ShapeError, match=r"Expected the 2-th parameter of the compare "
                                         r"computation of sort to have shape s32\[\], but got "
                                         r"f32\[\]"):
        infer("sort", "f32[4]", "s32[4]", dimensions=[0], to_apply=lt("f32", "f32"))
    # Floating point precision may differ (XLA compares ignoring it).
    assert infer("sort", "bf16[4]", dimensions=[0], to_apply=lt("f32")) == parse_shape("bf16[4]")
    with pytest.raises(ShapeError, match="Expected the sort_dimension 2 of sort to be smaller "
                                         "than the rank 2 of the operand"):
        infer("sort", "f32[4,3]", dimensions=[2], to_apply=lt("f32"))
    with pytest.raises(ShapeError, match="sort takes exactly one dimension, got {0,1}"):
        infer("sort", "f32[4,3]", dimensions=[0, 1], to_apply=lt("f32"))
    with pytest.raises(ShapeError, match="Expected at least 1 operand for sort instruction"):
        infer("sort", dimensions=[0], to_apply=lt("f32"))


def _comparator(b, *types):
    sub = b.create_sub_builder("lt")
    params = [ops.Parameter(sub, i, parse_shape(f"{t}[]"), f"p.{i}")
              for i, t in enumerate(t for t in types for _ in (0, 1))]
    return sub.build(ops.Lt(params[0], params[1]))


def test_sort_builder():
    b = XlaBuilder("s")
    keys = ops.Parameter(b, 0, parse_shape("f32[8,5]"), "keys")
    values = ops.Parameter(b, 1, parse_shape("s32[8,5]"), "values")
    one = ops.Sort(keys, _comparator(b, "f32"))
    assert one.shape == parse_shape("f32[8,5]")
    assert one.instruction.attrs["dimensions"] == (1,)  # -1: the last dimension
    both = ops.Sort([keys, values], _comparator(b, "f32", "s32"), dimension=0, is_stable=True)
    assert both.shape == parse_shape("(f32[8,5], s32[8,5])")
    with pytest.raises(ShapeError, match="sort: Expected the sort_dimension 2"):
        ops.Sort([keys], _comparator(b, "f32"), dimension=2)
    with pytest.raises(InvalidArgumentError, match="Sort: needs at least one operand"):
        ops.Sort([], _comparator(b, "f32"))
    comp_ = b.build(both)
    assert str(comp_.program_shape()) == (
        "(keys: f32[8,5], values: s32[8,5]) -> (f32[8,5], s32[8,5])")
    root = comp_.computation.root
    assert ", ".join(attribute_texts(root, HloPrintOptions.default())) == (
        f"dimensions={{0}}, is_stable=true, to_apply=%{root.attrs['to_apply'].name}")
    assert root.attrs["to_apply"].program_shape().parameters == [
        parse_shape(s) for s in ("f32[]", "f32[]", "s32[]", "s32[]")]
    assert comp_.module.entry is comp_.computation


HLO = """HloModule module

compare {
  p.0.lhs = f32[] parameter(0)
  p.0.rhs = f32[] parameter(1)
  p.1.lhs = s32[] parameter(2)
  p.1.rhs = s32[] parameter(3)
  ROOT lt = pred[] compare(p.0.lhs, p.0.rhs), direction=LT
}

ENTRY Sort {
  keys = f32[1024,16]{0,1} parameter(0)
  values = s32[1024,16]{0,1} parameter(1)
  ROOT sorted = (f32[1024,16]{0,1}, s32[1024,16]{0,1}) sort(keys, values), {attrs}
}
"""


@pytest.mark.parametrize("attrs", [
    "dimensions={0}, to_apply=%compare",                  # hlo_parser_test "SortKeyValueR2"
    "dimensions={1}, is_stable=true, to_apply=%compare",  # "SortKeyStable"
])
def test_sort_hlo_text(attrs):
    module = parse_hlo_module(HLO.replace("{attrs}", attrs))
    assert ", ".join(attribute_texts(module.entry.root, HloPrintOptions.default())) == attrs
