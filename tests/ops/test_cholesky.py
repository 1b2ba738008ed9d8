"""cholesky: InferCholeskyShape (messages, unbounded case), the ``lower`` attribute's text
(printed only when true), and the builder's Cholesky."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def cholesky(shape, lower=False):
    d = get_opdef("cholesky")
    return str(d.infer_shape([parse_shape(shape)], d.check_attrs({"lower": lower})))


@pytest.mark.parametrize("shape,expected", [
    ("f32[4,4]", "f32[4,4]{1,0}"),
    ("c64[2,3,3]", "c64[2,3,3]{2,1,0}"),
    ("f32[?,10]", "f32[?,10]{1,0}"),          # UnboundedCholesky
    ("f64[1,291,291]", "f64[1,291,291]{2,1,0}"),
    ("bf16[0,0]", "bf16[0,0]{1,0}"),
])
def test_shapes(shape, expected):
    assert cholesky(shape) == expected
    assert cholesky(shape, lower=True) == expected


@pytest.mark.parametrize("shape,message", [
    ("s32[4,4]", "Expected element type in shape to be floating or complex for Cholesky; got S32."),
    ("f32[4]", r"The 'a' argument to Cholesky must have rank >= 2, got shape f32\[4\]\{0\}"),
    ("f32[2,4,3]", r"The two minor dimensions of 'a' must have compatible size, got f32\[2,4,3\]\{2,1,0\}."),
    ("(f32[4,4])", "Expected array argument for operand of cholesky"),
])
def test_errors(shape, message):
    with pytest.raises(ShapeError, match="^cholesky: " + message):
        cholesky(shape)


def test_text_and_builder():
    b = XlaBuilder("chol")
    a = ops.Parameter(b, 0, parse_shape("f32[1,291,291]"), "a")
    upper = ops.Cholesky(a, False)
    lower = ops.Cholesky(a, lower=True)
    assert lower.instruction.attrs["lower"] is True
    with pytest.raises(InvalidArgumentError, match="Cholesky: lower must be true or false"):
        ops.Cholesky(a, "yes")
    assert upper.instruction.attrs["lower"] is False
    text = module_to_string(b.build(lower).module, HloPrintOptions.short_parsable())
    assert "cholesky = f32[1,291,291]{2,1,0} cholesky(a)\n" in text
    assert "ROOT cholesky.1 = f32[1,291,291]{2,1,0} cholesky(a), lower=true\n" in text
    again = parse_hlo_module(text)
    assert [i.attrs["lower"] for i in again.entry.instructions if i.opcode == "cholesky"] == [False, True]
