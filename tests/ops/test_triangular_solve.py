"""triangular-solve: InferTriangularSolveShape (messages, unbounded case), the options'
text (left_side/lower/unit_diagonal printed when true, transpose_a when set, as XLA's
PrintAttributeProto), and the builder's TriangularSolve."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.enums import Transpose
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def solve(a, b, left_side=True, transpose_a="NO_TRANSPOSE", **attrs):
    d = get_opdef("triangular-solve")
    attrs = d.check_attrs({"left_side": left_side, "transpose_a": transpose_a, **attrs})
    return str(d.infer_shape([parse_shape(a), parse_shape(b)], attrs))


@pytest.mark.parametrize("a,b,left_side,expected", [
    ("f32[4,4]", "f32[4,3]", True, "f32[4,3]{1,0}"),
    ("f32[4,4]", "f32[3,4]", False, "f32[3,4]{1,0}"),
    ("c64[2,5,5]", "c64[2,5,7]", True, "c64[2,5,7]{2,1,0}"),
    ("f32[?,3,?]", "f32[?,?,4]", True, "f32[?,?,4]{2,1,0}"),   # UnboundedTriangularSolve
])
def test_shapes(a, b, left_side, expected):
    assert solve(a, b, left_side, "TRANSPOSE", lower=True) == expected


@pytest.mark.parametrize("a,b,left_side,message", [
    ("s32[4,4]", "s32[4,3]", True, ("Expected element types in shape to be floating or complex and "
                                   "identical for TriangularSolve; got S32 and S32.")),
    ("f32[4,4]", "f64[4,3]", True, "got F32 and F64."),
    ("f32[4]", "f32[4]", True, (r"The 'a' argument to TriangularSolve must have rank >= 2, got "
                               r"shape f32\[4\]\{0\}")),
    ("f32[4,4]", "f32[2,4,3]", True, (r"Arguments to triangular solve must have equal rank; got "
                                     r"f32\[2,4,3\]\{2,1,0\} and f32\[4,4\]\{1,0\}.")),
    ("f32[4,3]", "f32[4,3]", True, (r"The two minor dimensions of 'a' must have equal size, got "
                                   r"f32\[4,3\]\{1,0\}.")),
    ("f32[4,4]", "f32[3,4]", True, "The shared dimension of 'a' and 'b' does not match"),
    ("f32[4,4]", "f32[4,3]", False, "The shared dimension of 'a' and 'b' does not match"),
    ("f32[2,4,4]", "f32[3,4,3]", True, ("The leading batch dimensions of the arguments to "
                                       "triangular solve must be equal")),
])
def test_errors(a, b, left_side, message):
    with pytest.raises(ShapeError, match="^triangular-solve: .*" + message):
        solve(a, b, left_side)


def test_transpose_a_must_be_given():
    with pytest.raises(ShapeError, match="Invalid transpose option value for triangular solve"):
        solve("f32[4,4]", "f32[4,3]", transpose_a=None)
    with pytest.raises(InvalidArgumentError, match="must be one of NO_TRANSPOSE, TRANSPOSE, ADJOINT"):
        solve("f32[4,4]", "f32[4,3]", transpose_a="CONJUGATE")


def test_hlo_parser_test_text_prints_back():
    text = """HloModule TriangularSolve_module, entry_computation_layout={(f32[4,4]{1,0}, f32[3,4]{1,0})->f32[3,4]{1,0}}

ENTRY %SimpleRightLowerNotranspose.4 (a.1: f32[4,4], b.2: f32[3,4]) -> f32[3,4] {
  %a.1 = f32[4,4]{1,0} parameter(0)
  %b.2 = f32[3,4]{1,0} parameter(1)
  ROOT %triangular-solve.3 = f32[3,4]{1,0} triangular-solve(f32[4,4]{1,0} %a.1, f32[3,4]{1,0} %b.2), lower=true, transpose_a=NO_TRANSPOSE
}

"""
    module = parse_hlo_module(text)
    attrs = module.entry.root.attrs
    assert (attrs["left_side"], attrs["lower"], attrs["unit_diagonal"]) == (False, True, False)
    assert attrs["transpose_a"] is Transpose.NO_TRANSPOSE
    assert module_to_string(module, HloPrintOptions(print_operand_shape=True)) == text


def test_builder():
    builder = XlaBuilder("solve")
    a = ops.Parameter(builder, 0, parse_shape("f32[8,5,5]"), "a")
    b = ops.Parameter(builder, 1, parse_shape("f32[8,5,2]"), "b")
    x = ops.TriangularSolve(a, b, True, True, True, ops.TriangularSolveOptions.ADJOINT)
    assert str(x.shape) == "f32[8,5,2]{2,1,0}"
    with pytest.raises(ShapeError, match="The shared dimension of 'a' and 'b' does not match"):
        ops.TriangularSolve(a, b, False, True, False, "NO_TRANSPOSE")
    assert ops.Transpose is not Transpose  # ops.Transpose is the transpose op
    text = module_to_string(builder.build(x).module, HloPrintOptions.short_parsable())
    assert ("triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=true, "
            "transpose_a=ADJOINT") in text
