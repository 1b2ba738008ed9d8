"""pad and concatenate: shape rules and the builder's Pad, PadInDim, ConcatInDim (spec 002
"Pad", "ConcatInDim"; shape_inference_test.cc; hlo_parser_test.cc)."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.padding import PaddingConfig, read_padding_config
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape
from xlapy.shape.text import Scanner


def infer(opcode, *shapes, result=None, **attrs):
    d = get_opdef(opcode)
    return d.infer_shape([parse_shape(s) for s in shapes], d.check_attrs(attrs),
                         None if result is None else parse_shape(result))


def params(*texts):
    b = XlaBuilder("p")
    return b, [ops.Parameter(b, i, parse_shape(t), f"p{i}") for i, t in enumerate(texts)]


# -- pad ------------------------------------------------------------------------------------


@pytest.mark.parametrize("operand, padding, expected", [
    # shape_inference_test Pad: dim 0 {low 0, high 2, interior 3}, dim 1 {1, 5, 0}.
    ("f32[10,25]", "0_2_3x1_5_0", "f32[39,31]{1,0}"),
    # hlo_parser_test: edge padding, interior padding, negative edge padding.
    ("f32[3]", "3_1", "f32[7]{0}"),
    ("f32[1,25,7,7]", "0_0_0x0_0_0x2_2_1x2_2_0", "f32[1,25,17,11]{3,2,1,0}"),
    ("f32[1,25,7,7,10]", "0_0_0x0_-10_0x0_-1_0x-2_-2_0x-1_-1_3", "f32[1,15,6,3,35]{4,3,2,1,0}"),
    # Interior padding happens before (negative) edge padding removes elements.
    ("f32[3]", "-1_-1_2", "f32[5]{0}"),
    # All zero: a no-op shape-wise.
    ("f32[2,3]", "0_0x0_0", "f32[2,3]{1,0}"),
    # Interior padding of an empty or one-element dimension adds nothing.
    ("f32[0,1]", "0_0_4x0_0_4", "f32[0,1]{1,0}"),
    # shape_inference_test UnboundedPad; a bounded dynamic dimension stays dynamic.
    ("f32[?,10]", "1_1_1x1_1_1", "f32[?,21]{1,0}"),
    ("f32[<=4]", "1_1", "f32[<=6]{0}"),
    ("f32[]", "", "f32[]"),
])
def test_pad_rule(operand, padding, expected):
    config = read_padding_config(Scanner(padding))
    assert str(infer("pad", operand, "f32[]", padding=config)) == expected


def test_pad_element_type_takes_the_higher_precision():
    assert str(infer("pad", "bf16[2]", "f32[]", padding=[(1, 1)])) == "f32[4]{0}"


def test_pad_errors():
    with pytest.raises(ShapeError, match="pad: Padding result in negative size for dimension 1"):
        infer("pad", "f32[10,25]", "f32[]", padding=[(0, 2, 3), (-20, -10, 0)])
    with pytest.raises(ShapeError, match=r"pad: Interior padding cannot be negative: 0_0_0x0_2_-1 "
                                         r"for operand f32\[3,4\]\{1,0\}"):
        infer("pad", "f32[3,4]", "f32[]", padding=[(0, 0, 0), (0, 2, -1)])
    with pytest.raises(ShapeError, match=r"The rank of the operand and the padding configuration do "
                                         r"not match: f32\[3,4\]\{1,0\} vs 0_0."):
        infer("pad", "f32[3,4]", "f32[]", padding=[(0, 0)])
    with pytest.raises(ShapeError, match="Pad operation does not support non-scalar padding values"):
        infer("pad", "f32[3]", "f32[1]", padding=[(0, 0)])
    with pytest.raises(ShapeError, match="The element types of the operands to Pad do not match"):
        infer("pad", "f32[3]", "s32[]", padding=[(0, 0)])
    with pytest.raises(ShapeError, match="Pad operation does not support tuple-shape operands."):
        infer("pad", "(f32[3])", "f32[]", padding=[(0, 0)])


def test_pad_builder():
    _b, (x, zero) = params("f32[3,4]", "f32[]")
    p = ops.Pad(x, zero, [(1, 2, 1), (-1, 0)])
    assert str(p.shape) == "f32[8,3]{1,0}"
    assert p.instruction.attrs["padding"].to_text() == "1_2_1x-1_0_0"
    q = ops.Pad(x, zero, ops.MakeEdgePaddingConfig([(0, 1), (2, 0)]))
    assert str(q.shape) == "f32[4,6]{1,0}"
    assert ops.MakeNoPaddingConfig(2) == PaddingConfig.of([(0, 0), (0, 0)])


def test_pad_in_dim():
    _b, (x, zero) = params("f32[3,4]", "f32[]")
    p = ops.PadInDim(x, zero, 1, 2, -1)
    assert str(p.shape) == "f32[3,5]{1,0}"
    assert p.instruction.opcode == "pad"
    assert p.instruction.attrs["padding"].to_text() == "0_0x2_-1"
    with pytest.raises(InvalidArgumentError, match="PadInDim: dimno 2 is out of bounds"):
        ops.PadInDim(x, zero, 2, 0, 0)


# -- concatenate ----------------------------------------------------------------------------


def test_concat_spec_examples():
    # 1-d: Concat({{2,3}, {4,5}, {6,7}}, 0) has 6 elements.
    b, (a1, a2, a3, m, n) = params("s32[2]", "s32[2]", "s32[2]", "s32[3,2]", "s32[1,2]")
    c = ops.ConcatInDim(b, [a1, a2, a3], 0)
    assert str(c.shape) == "s32[6]{0}"
    assert c.instruction.opcode == "concatenate" and c.instruction.attrs["dimensions"] == (0,)
    # 2-d: a is 3x2, b is 1x2; along dimension 0 the result is 4x2.
    assert str(ops.ConcatInDim(b, [m, n], 0).shape) == "s32[4,2]{1,0}"


def test_concat_rank0_cannot_be_concatenated():
    b, (s, t) = params("f32[]", "f32[]")
    with pytest.raises(ShapeError, match="concatenate: Concatenate dimension out of bounds: 0."):
        ops.ConcatInDim(b, [s, t], 0)


@pytest.mark.parametrize("shapes, dim, expected", [
    (["f32[32]", "f32[64]"], 0, "f32[96]{0}"),                            # ConcatenateWithCorrectShapes
    (["f32[32]", "f32[64]", "f32[32]"], 0, "f32[128]{0}"),
    (["f32[32,48]", "f32[32,64]", "f32[32,48]"], 1, "f32[32,160]{1,0}"),
    (["f32[<=32,160,10]", "f32[32,<=160,10]"], 0, "f32[<=64,<=160,10]{2,1,0}"),  # ...WithDynamicShapes
    (["f32[2,3]", "f32[4,3]"], 0, "f32[6,3]{1,0}"),                       # UnboundedConcatenate table
    (["f32[2,3]", "f32[?,?]"], 0, "f32[?,3]{1,0}"),
    (["f32[4,3]", "f32[<=2,<=3]"], 0, "f32[<=6,<=3]{1,0}"),
    (["f32[?,?]", "f32[?,?]"], 0, "f32[?,?]{1,0}"),
    (["f32[?,?]", "f32[<=2,<=3]"], 0, "f32[?,<=3]{1,0}"),
    (["f32[<=2,?]", "f32[<=4,3]"], 0, "f32[<=6,3]{1,0}"),
    (["f32[2,3]", "bf16[2,3]"], 1, "f32[2,6]{1,0}"),                      # higher precision wins
])
def test_concatenate_rule(shapes, dim, expected):
    assert str(infer("concatenate", *shapes, dimensions=[dim])) == expected


@pytest.mark.parametrize("shapes, dim, message", [
    (["f32[32]"], -1, r"Concatenate dimension out of bounds: -1."),
    (["f32[32]"], 1, r"Concatenate dimension out of bounds: 1."),
    (["f32[32]", "(f32[32])"], 0, "Expected array argument for operand of concatenation"),
    (["f32[32]", "s32[32]"], 0, "Cannot concatenate arrays with different element types: F32 vs S32."),
    (["f32[32,48]", "f32[32,64]"], 0, (r"Cannot concatenate arrays that differ in dimensions other "
                                      r"than the one being concatenated. Dimension 1 in both shapes "
                                      r"must be equal \(or compatible\): f32\[32,48\]\{1,0\} vs "
                                      r"f32\[32,64\]\{1,0\}.")),
    (["f32[2]", "f32[2,3]"], 0, (r"Cannot concatenate arrays with different ranks: 1 "
                                r"\(f32\[2\]\{0\}\) vs 2 \(f32\[2,3\]\{1,0\}\).")),
    (["f32[2,<=3]", "f32[2,<=4]"], 0, "Dimension 1 in both shapes must be equal"),
    (["f32[2,?]", "f32[2,3]", "f32[2,4]"], 0, "Mismatched dimension sizes 3 and 4 in dimension 1"),
    (["f32[2,?]", "f32[2,<=3]", "f32[2,<=4]"], 0, "Mismatched bound sizes 3 and 4 in dimension 1"),
])
def test_concatenate_errors(shapes, dim, message):
    with pytest.raises(ShapeError, match="^concatenate: .*" + message):
        infer("concatenate", *shapes, dimensions=[dim])


def test_concatenate_attribute_and_arity():
    with pytest.raises(ShapeError, match=r"dimensions must name exactly one dimension, got \{0,1\}"):
        infer("concatenate", "f32[2]", dimensions=[0, 1])
    with pytest.raises(ShapeError, match="expects at least 1 operands, got 0"):
        infer("concatenate", dimensions=[0])
    b = XlaBuilder("c")
    with pytest.raises(InvalidArgumentError, match="ConcatInDim: expected an XlaBuilder, got list"):
        ops.ConcatInDim([], [], 0)
    with pytest.raises(ShapeError, match="expects at least 1 operands, got 0"):
        ops.ConcatInDim(b, [], 0)
