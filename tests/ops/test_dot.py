"""dot, ragged-dot and scaled-dot: InferDotOpShape / InferRaggedDotOpShape (the
shape_inference_test.cc cases with their messages), the preferred element type, the
semantics page's Dot/DotGeneral tables, and the builder's Dot, DotGeneral, RaggedDot,
ScaledDot."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.dot import (
    DotDimensionNumbers as DD,
)
from xlapy.hlo.attrs.dot import (
    Precision,
    PrecisionConfig,
)
from xlapy.hlo.attrs.dot import (
    RaggedDotDimensionNumbers as RD,
)
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, parse_shape


def infer(opcode, *shapes, result=None, **attrs):
    d = get_opdef(opcode)
    return str(d.infer_shape([parse_shape(s) for s in shapes], d.check_attrs(attrs),
                             None if result is None else parse_shape(result)))


def dot(lhs, rhs, dnums, result=None):
    return infer("dot", lhs, rhs, dot_dimension_numbers=dnums, result=result)


MATMUL = DD(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])


@pytest.mark.parametrize("lhs,rhs,dnums,expected", [
    ("f32[]", "f32[32]", DD(), "f32[32]{0}"),                                 # ScalarDotVector
    ("f32[32,32,32]", "f32[32,64]", MATMUL, "f32[32,32,64]{2,1,0}"),          # DotWithRankHigherThanTwo
    ("f32[64]", "f32[64]", DD([0], [0]), "f32[]"),                            # VectorDotVector
    ("f32[32,64]", "f32[64]", MATMUL, "f32[32]{0}"),                          # MatrixDotVector
    ("f32[32]", "f32[32,64]", DD([0], [0]), "f32[64]{0}"),                    # VectorDotMatrix
    ("f32[32,64]", "f32[64,48]", MATMUL, "f32[32,48]{1,0}"),                  # MatrixDotMatrix
    ("f32[5,2,11,3]", "f32[5,2,3,14]", DD([3], [2], [0, 1], [0, 1]), "f32[5,2,11,14]{3,2,1,0}"),
    ("f32[2,11,3,2]", "f32[2,3,2,14]", DD([2, 3], [1, 2], [0], [0]), "f32[2,11,14]{2,1,0}"),
    ("f32[2,11,3]", "f32[3,2,14]", DD([2], [0], [0], [1]), "f32[2,11,14]{2,1,0}"),
    ("f32[?,10]", "f32[?,10]", MATMUL, "f32[?,10]{1,0}"),                     # UnboundedDot
    ("f32[?,<=3,?]", "f32[2,4,5]", DD([2], [1], [0], [0]), "f32[?,<=3,5]{2,1,0}"),
    ("bf16[4,8]", "f32[8,2]", MATMUL, "f32[4,2]{1,0}"),                       # higher precision
    ("s8[4,8]", "s16[8,2]", MATMUL, "s16[4,2]{1,0}"),
])
def test_dot_shapes(lhs, rhs, dnums, expected):
    assert dot(lhs, rhs, dnums) == expected


def test_semantics_page_tables():
    assert dot("f32[7]", "f32[7]", DD([0], [0])) == "f32[]"
    assert dot("f32[3,4]", "f32[4]", MATMUL) == "f32[3]{0}"
    assert dot("f32[3,4]", "f32[4,5]", MATMUL) == "f32[3,5]{1,0}"
    # DotGeneral contracting dimension 1 of both: {{1,2,3},{4,5,6}} . {{1,1,1},{2,2,2}}
    assert dot("f32[2,3]", "f32[2,3]", DD([1], [1])) == "f32[2,2]{1,0}"
    # batch dimension 0 with 2x2 matrices
    assert dot("f32[2,2,2]", "f32[2,2,2]", DD([2], [1], [0], [0])) == "f32[2,2,2]{2,1,0}"
    assert dot("f32[8,3,4]", "f32[8,4,5]", DD([2], [1], [0], [0])) == "f32[8,3,5]{2,1,0}"
    assert dot("f32[8,6,3,4]", "f32[8,6,4,5]", DD([3], [2], [0, 1], [0, 1])) == "f32[8,6,3,5]{3,2,1,0}"


@pytest.mark.parametrize("result,expected", [
    ("s32[32,32]", "s32[32,32]{1,0}"),   # DotWithIntegralPreferredElementType (s8 x s16)
    ("f32[32,32]", "f32[32,32]{1,0}"),   # IntegralDotWithFloatingPointPreferredElementType
    ("u32[32,32]", "u32[32,32]{1,0}"),   # ...WithDifferentSignedness
    ("s8[32,32]", "s8[32,32]{1,0}"),     # DotWithNarrowerPreferredElementType
])
def test_preferred_element_type_is_the_declared_result_type(result, expected):
    assert dot("s8[32,32]", "s16[32,32]", MATMUL, result=result) == expected


def test_preferred_element_type_for_floats():
    assert dot("bf16[32,32]", "f32[32,32]", MATMUL, result="f32[32,32]") == "f32[32,32]{1,0}"
    assert dot("bf16[32,32]", "f32[32,32]", MATMUL, result="bf16[32,32]") == "bf16[32,32]{1,0}"
    assert dot("bf16[32,32]", "bf16[32,32]", MATMUL, result="s32[32,32]") == "s32[32,32]{1,0}"


@pytest.mark.parametrize("lhs,rhs,dnums,message", [
    ("f32[64]", "f32[32]", DD([0], [0]),
     (r"Cannot infer shape for dot operation: f32\[64\]\{0\} <dot> f32\[32\]\{0\}. Contracting "
     r"dimension sizes are not compatible.")),
    ("f32[32,64]", "f32[32]", MATMUL, "Contracting dimension sizes are not compatible."),
    ("f32[64]", "f32[32,64]", DD([0], [0]), "Contracting dimension sizes are not compatible."),
    ("f32[32,64]", "f32[32,64]", MATMUL, "Contracting dimension sizes are not compatible."),
    ("f32[2,11,3,2]", "f32[2,3,14]", DD([2, 3], [1], [0], [0]),
     "Must specify the same number of contracting dimensions for lhs and rhs."),
    ("f32[2,11,3]", "f32[3,3,14]", DD([2], [1], [0], [0]), "Batch dimension sizes are not compatible"),
    ("f32[2,11,3]", "f32[2,3,14]", DD([2], [1], [0], []),
     "Must the same number of batch dimensions for lhs and rhs."),
    ("f32[2,11,3]", "f32[2,3,14]", DD([3], [0], [0], [1]),
     (r"A dimension number is out of range in Dot: lhs_contracting_dimensions: 3 "
     r"rhs_contracting_dimensions: 0 lhs_batch_dimensions: 0 rhs_batch_dimensions: 1. "
     r"f32\[2,11,3\]\{2,1,0\} f32\[2,3,14\]\{2,1,0\}")),
    ("f32[2,11,3]", "f32[2,3,14]", DD([0], [0], [0], [1]), "A dimension number is not unique in Dot"),
    ("f32[2,3]", "f32[3]", DD([-1], [0]), "A dimension number is out of range"),
    ("(f32[2])", "f32[2]", DD([0], [0]), r"Expected array argument for lhs of dot, but got \(f32\[2\]\{0\}\)."),
])
def test_dot_errors(lhs, rhs, dnums, message):
    with pytest.raises(ShapeError, match="^dot: .*" + message):
        dot(lhs, rhs, dnums)


def test_dot_attribute_kinds():
    d = get_opdef("dot")
    attrs = d.check_attrs({"precision_config": PrecisionConfig([Precision.HIGHEST, "highest"])})
    assert attrs["dot_dimension_numbers"] == DD()
    with pytest.raises(InvalidArgumentError, match="must be DotDimensionNumbers"):
        d.check_attrs({"dot_dimension_numbers": [[1], [0]]})


# -- ragged dot -----------------------------------------------------------------------------


def ragged(lhs, rhs, group_sizes, rdnums, result=None):
    return infer("ragged-dot", lhs, rhs, group_sizes, ragged_dot_dimension_numbers=rdnums,
                 result=result)


@pytest.mark.parametrize("lhs,rhs,gs,rd,expected", [
    # mode 1: [m,k], [g,k,n], [g] -> [m,n]
    ("f32[11,5]", "f32[3,5,7]", "u32[3]", RD(DD([1], [1]), [0], [0]), "f32[11,7]{1,0}"),
    # mode 2: [m,k], [k,n], [g] -> [g,m,n]
    ("f32[11,5]", "f32[5,7]", "u32[3]", RD(DD([1], [0]), [1]), "f32[3,11,7]{2,1,0}"),
    # mode 3: [b,m,k], [b,k,n], [g] -> [b,m,n]
    ("f32[3,11,5]", "f32[3,5,7]", "u32[3]", RD(DD([2], [1], [0], [0]), [0]), "f32[3,11,7]{2,1,0}"),
    # vectorised group sizes with repeating dimension sizes, and broadcast [g] group sizes
    ("f32[64,64,32,32,128]", "f32[3,64,64,128,32]", "u32[64,64,32,3]",
     RD(DD([4], [3], [0, 1], [1, 2]), [3], [0]), "f32[64,64,32,32,32]{4,3,2,1,0}"),
    ("f32[64,64,32,32,128]", "f32[3,64,64,128,32]", "u32[3]",
     RD(DD([4], [3], [0, 1], [1, 2]), [3], [0]), "f32[64,64,32,32,32]{4,3,2,1,0}"),
    # xla/hlo/translate tests: ragged non-contracting with group sizes per leading dim
    ("f32[19,11,5]", "f32[3,5,7]", "s64[19,3]", RD(DD([2], [1]), [1], [0]), "f32[19,11,7]{2,1,0}"),
    ("f32[11,19,5]", "f32[19,5,7]", "s64[19,3]", RD(DD([1, 2], [0, 1]), [2]), "f32[3,11,7]{2,1,0}"),
    ("f32[19,17,11,5]", "f32[19,17,5,7]", "s64[19,3]", RD(DD([3], [2], [0, 1], [0, 1]), [1]),
     "f32[19,17,11,7]{3,2,1,0}"),
])
def test_ragged_dot_shapes(lhs, rhs, gs, rd, expected):
    assert ragged(lhs, rhs, gs, rd) == expected


def test_ragged_dot_preferred_element_type():
    assert ragged("s8[11,5]", "s8[5,7]", "u32[3]", RD(DD([1], [0]), [1]),
                  result="s32[3,11,7]") == "s32[3,11,7]{2,1,0}"


@pytest.mark.parametrize("lhs,rhs,gs,rd,message", [
    ("f32[11,5]", "f32[3,2,7]", "u32[3]", RD(DD([1], [1]), [0], [0]),
     "Contracting dimension sizes are not compatible"),
    ("f32[11,5]", "f32[2,7]", "u32[3]", RD(DD([1], [0]), [1]),
     "Contracting dimension sizes are not compatible"),
    ("f32[11,5]", "f32[3,5,7]", "u32[3]", RD(DD([1], [1]), [0, 1], [0]),
     "There must be exactly one ragged dimension in the lhs."),
    ("f32[11,5]", "f32[3,5,7]", "u32[3]", RD(DD([1], [1]), [2], [0]),
     r"lhs ragged dimension 2 is out of range \[0, 2\)"),
    ("f32[11,5]", "f32[3,5,7]", "u32[2,3]", RD(DD([1], [1]), [0], [0]),
     "expected group_sizes to have rank 1, got 2"),
    ("f32[19,17,11,5]", "f32[3,19,5,7]", "u32[19,11,3]", RD(DD([3], [2], [0], [1]), [2], [0]),
     r"group_sizes is expected to have shape \[19, 17, 3\], got \[19, 11, 3\]"),
    ("f32[19,11,17,5]", "f32[19,17,5,7]", "u32[19,11,3]", RD(DD([2, 3], [1, 2], [0], [0]), [3]),
     r"group_sizes is expected to have shape \[19, 17, 3\], got \[19, 11, 3\]"),
    ("f32[17,19,11,5]", "f32[17,19,5,7]", "u32[19,3]", RD(DD([3], [2], [0, 1], [0, 1]), [1]),
     r"group_sizes is expected to have shape \[17, 3\], got \[19, 3\]"),
    ("f32[19,11,5]", "f32[19,5,7]", "u32[19,3]", RD(DD([2], [1], [0], [0]), [1], [0]),
     "rhs group dimension cannot be a batch or contracting dimension"),
    ("f32[11,3]", "f32[3,3,7]", "u32[3]", RD(DD([1], [1]), [0], [1]),
     "rhs group dimension cannot be a batch or contracting dimension"),
    ("f32[11,5]", "f32[3,5,7]", "u32[2]", RD(DD([1], [1]), [0], [0]),
     "rhs group dimension is expected to have size=2, got 3"),
    ("f32[2,11,5]", "f32[3,2,5,7]", "u32[3]", RD(DD([2], [2], [0], [1]), [0], [0]),
     "There must be zero group dimensions in the rhs"),
    ("f32[11,5]", "f32[3,5,7]", "u32[3]", RD(DD([1], [1]), [1], [0]),
     "There must be zero group dimensions in the rhs"),
    ("f32[11,5]", "f32[5,7]", "u32[3]", RD(DD([1], [0]), [0]),
     "There must be exactly one group dimension in the rhs"),
    ("f32[11,5]", "f32[3,5,7]", "u32[3]", RD(DD([1], [1]), [0], [3]),
     r"rhs group dimension 3 is out of range \[0, 3\)"),
])
def test_ragged_dot_errors(lhs, rhs, gs, rd, message):
    with pytest.raises(ShapeError, match="ragged-dot: .*" + message):
        ragged(lhs, rhs, gs, rd)


# -- scaled dot -----------------------------------------------------------------------------


def scaled(lhs, rhs, lhs_scale, rhs_scale, dnums=MATMUL, result=None):
    return infer("scaled-dot", lhs, rhs, lhs_scale, rhs_scale, dot_dimension_numbers=dnums,
                 result=result)


def test_scaled_dot():
    # The Triton test module scaled_dot.hlo: MX block scales of 32 along k.
    assert scaled("f8e4m3fn[128,128]", "f8e4m3fn[128,256]", "f8e8m0fnu[128,4]",
                  "f8e8m0fnu[4,256]", result="bf16[128,256]") == "bf16[128,256]{1,0}"
    # A BF16 operand with an all-ones-shaped BF16 scale has no scale at all.
    assert scaled("bf16[8,64]", "f8e4m3fn[64,16]", "bf16[1,1]", "f8e8m0fnu[2,16]") == "bf16[8,16]{1,0}"


@pytest.mark.parametrize("shapes,message", [
    (("f8e4m3fn[8,64]", "f8e4m3fn[64,16]", "f8e8m0fnu[8]", "f8e8m0fnu[2,16]"),
     "has a different number of dimensions than operand"),
    (("f8e4m3fn[8,64]", "f8e4m3fn[64,16]", "f8e8m0fnu[8,3]", "f8e8m0fnu[2,16]"),
     "Dimension 1 of operand .* should be a multiple of dimension 1 of scale operand"),
    (("bf16[8,64]", "bf16[64,16]", "bf16[]", "bf16[]"),
     "At least one of the scales should be not a scalar"),
])
def test_scaled_dot_errors(shapes, message):
    with pytest.raises(ShapeError, match="scaled-dot: .*" + message):
        scaled(*shapes)
    with pytest.raises(ShapeError, match="Contracting dimensions must have exactly one dimension"):
        scaled("f8e4m3fn[8,4,16]", "f8e4m3fn[4,16,2]", "f8e8m0fnu[8,4,1]", "f8e8m0fnu[4,1,2]",
               DD([1, 2], [0, 1]))


# -- builder --------------------------------------------------------------------------------


def params(b, *texts):
    return [ops.Parameter(b, i, parse_shape(t), f"p{i}") for i, t in enumerate(texts)]


def test_builder_dot_forms():
    b = XlaBuilder("dots")
    m, v, n = params(b, "f32[3,4]", "f32[4]", "f32[4,5]")
    assert str(ops.Dot(m, v).shape) == "f32[3]{0}"
    assert str(ops.Dot(v, v).shape) == "f32[]"
    mm = ops.Dot(m, n)
    assert str(mm.shape) == "f32[3,5]{1,0}"
    assert mm.instruction.attrs["dot_dimension_numbers"] == DD([1], [0])
    assert str((m @ n).shape) == "f32[3,5]{1,0}"
    typed = ops.Dot(m, n, preferred_element_type="f64")
    assert str(typed.shape) == "f64[3,5]{1,0}"
    precise = ops.DotGeneral(m, n, DD([1], [0]), ops.PrecisionConfig(["highest", "default"]))
    text = module_to_string(b.build(precise).module, HloPrintOptions.short_parsable())
    assert ("dot(p0, p2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
            "operand_precision={highest,default}") in text
    again = parse_hlo_module(text)
    assert again.entry.root.attrs["precision_config"] == precise.instruction.attrs["precision_config"]


def test_builder_dot_general_and_errors():
    b = XlaBuilder("dg")
    lhs, rhs, s = params(b, "s8[8,3,4]", "s8[8,4,5]", "f32[]")
    dn = ops.DotDimensionNumbers(lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                                 lhs_batch_dimensions=[0], rhs_batch_dimensions=[0])
    out = ops.DotGeneral(lhs, rhs, dn, preferred_element_type=PrimitiveType.S32)
    assert str(out.shape) == "s32[8,3,5]{2,1,0}"
    with pytest.raises(ShapeError, match="dot: A dimension number is out of range in Dot"):
        ops.Dot(s, lhs)  # a scalar lhs: contracting dimension 1 does not exist
    with pytest.raises(ShapeError, match="Contracting dimension sizes are not compatible"):
        ops.Dot(lhs, lhs)
    with pytest.raises(InvalidArgumentError, match="DotGeneral: dimension_numbers must be"):
        ops.DotGeneral(lhs, rhs, {"lhs_contracting_dimensions": [2]})
    with pytest.raises(InvalidArgumentError, match="precision_config must be a PrecisionConfig"):
        ops.Dot(lhs, rhs, "highest")


def test_builder_ragged_and_scaled_dot():
    b = XlaBuilder("rd")
    x, w, sizes = params(b, "f32[11,5]", "f32[3,5,7]", "u32[3]")
    out = ops.RaggedDot(x, w, sizes, ops.RaggedDotDimensionNumbers(DD([1], [1]), [0], [0]))
    assert str(out.shape) == "f32[11,7]{1,0}"
    assert ("ragged-dot(p0, p1, p2), lhs_contracting_dims={1}, rhs_contracting_dims={1}, "
            "lhs_ragged_dims={0}, rhs_group_dims={0}") in module_to_string(
                b.build(out).module, HloPrintOptions.short_parsable())
    b = XlaBuilder("sd")
    a, c, sa, sc = params(b, "f8e4m3fn[4,64]", "f8e4m3fn[64,8]", "f8e8m0fnu[4,2]", "f8e8m0fnu[2,8]")
    out = ops.ScaledDot(a, c, sa, sc, MATMUL, preferred_element_type="bf16")
    assert str(out.shape) == "bf16[4,8]{1,0}"
    assert len(out.instruction.operands) == 4
