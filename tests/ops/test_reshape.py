"""reshape, dynamic-reshape, transpose, reverse: shape rules, the builder's Reshape forms,
Collapse, Transpose, Rev (spec 002 "Reshape", "Collapse", "Transpose", "Rev";
shape_inference_test.cc; hlo_parser_test.cc)."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import Attrs
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.opdefs.registry import OpCall
from xlapy.opdefs.shape_ops import common_factors, infer_reshape_shape
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def infer(opcode, *shapes, result=None, **attrs):
    d = get_opdef(opcode)
    return d.infer_shape([parse_shape(s) for s in shapes], d.check_attrs(attrs),
                         None if result is None else parse_shape(result))


def param(text="f32[4,2,3]"):
    b = XlaBuilder("r")
    return b, ops.Parameter(b, 0, parse_shape(text), "v")


def opcodes(b, root):
    return [i.opcode for i in b.build(root).computation.instructions if i.opcode != "parameter"]


# -- reshape: the spec's examples -----------------------------------------------------------


@pytest.mark.parametrize("dims, sizes, shape, emitted", [
    # In-order collapse: no transpose.
    ((0, 1, 2), (24,), "f32[24]{0}", ["reshape"]),
    ((0, 1, 2), (8, 3), "f32[8,3]{1,0}", ["reshape"]),
    # Out-of-order collapse: the operand is read in dimension order {1,2,0}.
    ((1, 2, 0), (24,), "f32[24]{0}", ["transpose", "reshape"]),
    ((1, 2, 0), (8, 3), "f32[8,3]{1,0}", ["transpose", "reshape"]),
    ((1, 2, 0), (2, 6, 2), "f32[2,6,2]{2,1,0}", ["transpose", "reshape"]),
])
def test_reshape_with_dimension_order(dims, sizes, shape, emitted):
    b, v = param()
    r = ops.Reshape(v, dims, sizes)
    assert str(r.shape) == shape
    assert opcodes(b, r) == emitted


def test_reshape_dimension_order_transposes_first():
    _b, v = param()
    r = ops.Reshape(v, (1, 2, 0), (24,))
    t = r.instruction.operands[0]
    assert t.opcode == "transpose" and t.attrs["dimensions"] == (1, 2, 0)
    assert str(t.shape) == "f32[2,3,4]{1,0,2}"  # XLA gives a transpose the bitcast layout


def test_reshape_scalar_special_cases():
    # Reshape(f32[1x1] {{5}}, {0,1}, {}) == 5 and Reshape(5, {}, {1,1}) == f32[1x1] {{5}}.
    b, m = param("f32[1,1]")
    assert str(ops.Reshape(m, (0, 1), ()).shape) == "f32[]"
    s = ops.Parameter(b, 1, parse_shape("f32[]"), "s")
    assert str(ops.Reshape(s, (), (1, 1)).shape) == "f32[1,1]{1,0}"


def test_reshape_new_sizes_and_shape_forms():
    _b, v = param()
    r = ops.Reshape(v, [6, 4])
    assert str(r.shape) == "f32[6,4]{1,0}"
    assert r.instruction.attrs["inferred_dimension"] == -1
    r2 = ops.Reshape(parse_shape("f32[3,8]"), v)
    assert str(r2.shape) == "f32[3,8]{1,0}"
    with pytest.raises(ShapeError, match=r"reshape: Reshape operation has mismatched element "
                                         r"counts: from=24 \(f32\[4,2,3\]\{2,1,0\}\) to=25 "
                                         r"\(f32\[5,5\]\{1,0\}\)."):
        ops.Reshape(v, [5, 5])
    with pytest.raises(InvalidArgumentError, match=r"Reshape dimensions \[0,0,1\] are not a "
                                                   r"permutation of the operand dimensions"):
        ops.Reshape(v, (0, 0, 1), (24,))
    with pytest.raises(ShapeError, match="Reshaping with unbounded result shape is not supported."):
        ops.Reshape(v, [None, 4])


# -- reshape: dynamic dimensions (shape_inference_test.cc) ---------------------------------


@pytest.mark.parametrize("operand, sizes, inferred, expected", [
    ("f32[1,<=1]", (1,), -1, "f32[<=1]{0}"),                    # InferReshapeDegenerateCombine
    ("f32[<=10]", (1, 10), 0, "f32[<=1,10]{1,0}"),              # InferReshapeSplit
    ("f32[<=5]", (1, 5), -1, "f32[1,<=5]{1,0}"),                # ...SplitSingleNonDegenerate
    ("f32[<=6]", (3, 2), -1, "f32[<=3,2]{1,0}"),                # ...SplitMultipleNonDegenerate
    ("s64[128,<=128]", (64, 2, 64, 2), -1, "s64[64,2,<=64,2]{3,2,1,0}"),  # ...WithMajor
    ("f32[6,<=10]", (60,), -11, "f32[<=60]{0}"),                # InferReshapeCombine
    ("f32[6,<=10]", (2, 3, 10), -11, "f32[2,3,<=10]{2,1,0}"),   # UnchangedDimension
    ("f32[?]", (2, 3), -1, "f32[2,3]{1,0}"),                    # UnboundedReshape
])
def test_reshape_dynamic_propagation(operand, sizes, inferred, expected):
    shape = parse_shape(operand)
    call = OpCall("reshape", (shape,), Attrs({}))
    assert str(infer_reshape_shape(call, shape, sizes, inferred)) == expected
    _b, x = param(operand)
    if inferred >= 0:
        r = ops.ReshapeWithInferredDimension(x, sizes, inferred)
        assert r.instruction.attrs["inferred_dimension"] == inferred
    else:
        r = ops.Reshape(x, sizes)
    assert str(r.shape) == expected


def test_reshape_dynamic_errors():
    _b, x = param("f32[?,<=3]")
    with pytest.raises(ShapeError, match="Reshape operand with bounded and unbounded dynamism "
                                         "not supported."):
        ops.Reshape(x, [3])
    _, y = param("f32[2,<=6]")
    with pytest.raises(ShapeError, match="both splitted and combined is not supported"):
        ops.Reshape(y, [3, 4])
    _, z = param("f32[2,<=1,3]")
    with pytest.raises(ShapeError, match="Dynamic degenerated dimension that's not most-minor "
                                         "nor most-major is not supported"):
        ops.Reshape(z, [6])


def test_common_factors():
    assert common_factors([2, 3], [2, 3]) == [(0, 0), (1, 1), (2, 2)]
    assert common_factors([6, 10], [60]) == [(0, 0), (2, 1)]
    assert common_factors([4, 2, 3], [8, 3]) == [(0, 0), (2, 1), (3, 2)]
    assert common_factors([2, 5, 1, 3], [1, 10, 3]) == [(0, 0), (0, 1), (2, 2), (3, 2), (4, 3)]
    # Products that differ after a leading zero: one group (XLA's comment example).
    assert common_factors([0, 10, 3], [0, 3]) == [(0, 0), (3, 2)]
    assert common_factors([2, 0], [0]) == [(0, 0), (2, 1)]


# -- HLO reshape and dynamic-reshape --------------------------------------------------------


def test_hlo_reshape_rule():
    assert str(infer("reshape", "f32[4,8]", result="f32[32]")) == "f32[32]{0}"
    assert str(infer("reshape", "f32[2]", result="f32[1,2]{0,1}", inferred_dimension=1)) == "f32[1,2]{0,1}"
    # hlo_parser_test: an unbounded operand is exempt from the element count check.
    assert str(infer("reshape", "f32[?]", result="f32[3]")) == "f32[3]{0}"
    with pytest.raises(ShapeError, match=r"reshape: Reshape operation has mismatched element counts: "
                                         r"from=32 \(f32\[4,8\]\{1,0\}\) to=31 \(f32\[31\]\{0\}\)."):
        infer("reshape", "f32[4,8]", result="f32[31]")
    with pytest.raises(ShapeError, match=r"element types differ"):
        infer("reshape", "f32[4]", result="s32[4]")
    with pytest.raises(ShapeError, match="the result shape must be given"):
        infer("reshape", "f32[4]")
    with pytest.raises(ShapeError, match="Expected array argument for reshape"):
        infer("reshape", "(f32[4])", result="f32[4]")
    with pytest.raises(ShapeError, match="inferred_dimension=2 is out of bounds"):
        infer("reshape", "f32[4]", result="f32[2,2]", inferred_dimension=2)


def test_hlo_dynamic_reshape_rule():
    assert str(infer("dynamic-reshape", "f32[4,<=8]", "s32[]", "s32[]", result="f32[<=8,4]")) == "f32[<=8,4]{1,0}"
    with pytest.raises(ShapeError, match="expects one dim size operand per result dimension; "
                                         "got 1 for 2 result dimensions"):
        infer("dynamic-reshape", "f32[4,<=8]", "s32[]", result="f32[4,<=8]")
    with pytest.raises(ShapeError, match="Reshape operation has mismatched element counts: from=32"):
        infer("dynamic-reshape", "f32[4,<=8]", "s32[]", "s32[]", result="f32[4,<=7]")
    with pytest.raises(ShapeError, match=r"DynamicReshape's dim size has to be scalar S32, got \(s64\[\]\)"):
        infer("dynamic-reshape", "f32[4]", "s64[]", result="f32[<=4]")
    with pytest.raises(ShapeError, match="dynamic-reshape: expects at least 1 operands, got 0"):
        infer("dynamic-reshape", result="f32[10,20]")


def test_dynamic_reshape_builder():
    b, x = param("f32[32]")
    n = ops.Parameter(b, 1, parse_shape("s32[]"), "n")
    four = ops.Parameter(b, 2, parse_shape("s32[]"), "four")
    r = ops.DynamicReshape(x, [n, four], [8, 4], [True, False])
    assert str(r.shape) == "f32[<=8,4]{1,0}"
    assert [o.name for o in r.instruction.operands] == ["v", "n", "four"]
    with pytest.raises(ShapeError, match=r"DynamicReshape has to have the same number of elements "
                                         r"in new_sizes \(2\) and dims_are_dynamic \(1\)"):
        ops.DynamicReshape(x, [n, four], [8, 4], [True])


# -- Collapse -------------------------------------------------------------------------------


@pytest.mark.parametrize("dims, shape", [
    ((0, 1, 2), "f32[24]{0}"),
    # The page's text labels these two the other way round; XLA's builder merges the named
    # dimensions: {0,1} of 4x2x3 is 8x3, {1,2} is 4x6.
    ((0, 1), "f32[8,3]{1,0}"),
    ((1, 2), "f32[4,6]{1,0}"),
])
def test_collapse_spec_examples(dims, shape):
    b, v = param()
    c = ops.Collapse(v, dims)
    assert str(c.shape) == shape
    assert opcodes(b, c) == ["reshape"]


def test_collapse_trivial_and_errors():
    _b, v = param()
    assert ops.Collapse(v, [1]) is v  # one dimension: the operand itself, nothing emitted
    assert ops.Collapse(v, []) is v
    with pytest.raises(InvalidArgumentError, match=r"Collapse: Collapsed dimensions are not in "
                                                   r"consecutive order \(got \{1,0\}\)"):
        ops.Collapse(v, [1, 0])
    with pytest.raises(InvalidArgumentError, match="not in consecutive order"):
        ops.Collapse(v, [0, 2])
    with pytest.raises(InvalidArgumentError, match=r"out of bounds for f32\[4,2,3\]"):
        ops.Collapse(v, [2, 3])


# -- transpose ------------------------------------------------------------------------------


def test_transpose():
    # shape_inference_test Transpose / Rank1Transpose / UnboundedTranspose.
    assert str(infer("transpose", "f32[2,3,4,5]", dimensions=[1, 2, 3, 0])) == "f32[3,4,5,2]{2,1,0,3}"
    assert str(infer("transpose", "f32[5]", dimensions=[0])) == "f32[5]{0}"
    assert str(infer("transpose", "f32[1,?,2,?,<=2]{4,3,2,1,0}", dimensions=[4, 0, 3, 2, 1])) == \
        "f32[<=2,1,?,2,?]{0,2,3,4,1}"
    # hlo_parser_test: f32[20,10]{1,0} transposed by {1,0} is f32[10,20]{0,1} (a bitcast).
    assert str(infer("transpose", "f32[20,10]{1,0}", dimensions=[1, 0])) == "f32[10,20]{0,1}"
    with pytest.raises(ShapeError, match=r"transpose: Transpose dimensions \[0,0\] are not a "
                                         r"permutation of the operand dimensions \(operand shape "
                                         r"is f32\[2,3\]\{1,0\}\)."):
        infer("transpose", "f32[2,3]", dimensions=[0, 0])
    with pytest.raises(ShapeError, match=r"Transpose dimensions \[1,0\] are not a permutation"):
        infer("transpose", "f32[2,3,4]", dimensions=[1, 0])


def test_transpose_builder_matches_reshape_with_dimension_order():
    # Spec: Transpose(x, p) is the same as Reshape(x, p, Permute(p, x.shape.dimensions)).
    _b, v = param("f32[2,3,4,5]")
    perm = (1, 2, 3, 0)
    t = ops.Transpose(v, perm)
    r = ops.Reshape(v, perm, [v.shape.dimensions[p] for p in perm])
    assert t.shape.dimensions == r.shape.dimensions == (3, 4, 5, 2)
    assert t.instruction.attrs["dimensions"] == perm


# -- reverse --------------------------------------------------------------------------------


def test_reverse():
    assert str(infer("reverse", "f32[10,25]", dimensions=[0, 1])) == "f32[10,25]{1,0}"
    assert str(infer("reverse", "f32[?,10]", dimensions=[0, 1])) == "f32[?,10]{1,0}"
    assert str(infer("reverse", "f32[4,3,2,1]{0,1,2,3}", dimensions=[0, 1])) == "f32[4,3,2,1]{0,1,2,3}"
    with pytest.raises(ShapeError, match=r"reverse: One of the reverse dimensions \(2\) is "
                                         r"out-of-bounds in shape f32\[10,25\]\{1,0\}."):
        infer("reverse", "f32[10,25]", dimensions=[0, 2])
    with pytest.raises(ShapeError, match="a dimension number is duplicated in reverse"):
        infer("reverse", "f32[10,25]", dimensions=[1, 1])
    with pytest.raises(ShapeError, match="Expected array argument for operand of reverse"):
        infer("reverse", "(f32[2])", dimensions=[0])


def test_rev_builder():
    _b, v = param()
    r = ops.Rev(v, [0, 2])
    assert r.shape == v.shape
    assert r.instruction.opcode == "reverse" and r.instruction.attrs["dimensions"] == (0, 2)
